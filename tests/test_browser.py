"""Headless-browser check of the built HTML book (``_build/html``), offline.

Every page is opened from ``file://`` in headless Chromium (the system browser, driven by Playwright from PyPI)
with every non-``file://`` request aborted and recorded: a page that asked for the network fails. On each page:

* no JavaScript error (uncaught exceptions and console errors);
* math is typeset: every Sphinx math element holds MathJax output and no raw ``$$``, ``\\(`` or ``\\[`` is left
  in the text outside code;
* every image has loaded (``naturalWidth > 0``);
* no error output: no stderr or traceback output blocks, no output cell showing ``...Error`` or a traceback;
* no literal ``$`` left in the rendered text (math that was not parsed as math), and every table row has as many
  cells as its header (a ``|`` inside a Markdown table cell splits it);
* embedded widgets rendered (one view per embedded widget-view script) and, for the pre-rendered sliders of
  :mod:`attn_lib.book.widgets`, moving the slider changes the displayed figure;
* each chapter shows the paper's results as numbered sphinx-proof blocks (Lemma 1, Theorem 1, ...), numbered as
  in the paper, and has at least one ``{prf:ref}`` link that leads to its block;
* every page fits a 1280 px window and a 390 px phone: the page never scrolls sideways, nothing is cut by a box
  that does not scroll, and a wide code cell, equation, table or figure scrolls inside its own box with a visible
  cue (book/_ext/static/scroll-cue.js); chapter 6's verdict summary is a list of cards on the phone.

A screenshot of every page goes to ``_build/screenshots/`` (its first screen, at 1280 px and at 390 px; the whole
page with ``ATTN_LIB_SCREENSHOTS=full``). Each page is opened once per width and every check reads that visit. Run after ``make
book`` (``make test`` builds the book first). With ``CI=true`` a missing browser or a missing built book is a
failure; otherwise it is a skip that says why.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HTML = ROOT / "_build" / "html"
SHOTS = ROOT / "_build" / "screenshots"
CI = os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}
#: Screenshots of each page go to _build/screenshots: the first screen (1280 x 900) by default, the whole page with
#: ATTN_LIB_SCREENSHOTS=full (`make screenshots`; about 3 s a page on two cores, so not part of `make test`).
FULL_PAGE_SHOTS = os.environ.get("ATTN_LIB_SCREENSHOTS", "").strip().lower() == "full"
#: the chapter whose temperature slider is moved
SLIDER_PAGES = {"book/01_vanishing_attention.html", "book/08_training_with_each_normaliser.html"}
#: the numbered statements each chapter must show, with the paper's numbers
NUMBERED_BLOCKS = {
    "book/01_vanishing_attention.html": ["Lemma 1", "Corollary 1"],
    "book/02_distance_bound.html": ["Theorem 1", "Corollary 2"],
    "book/03_separability.html": ["Assumption 1", "Assumption 2", "Definition 1", "Theorem 2"],
    "book/04_gradient_sensitivity.html": ["Lemma 2", "Corollary 3"],
    "book/05_multihead_and_remedies.html": [],
}

pytestmark = pytest.mark.browser
REDIRECT = re.compile(r"<meta\s+http-equiv=[\"']refresh[\"']\s+content=[\"']\d+;\s*url=([^\"']+)[\"']", re.I)

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-default-apps",
    "--disable-extensions",
    "--metrics-recording-only",
    "--disable-dev-shm-usage",
]


def _unavailable(reason: str):
    if CI:
        pytest.fail(f"{reason} (CI=true: this is a failure)")
    pytest.skip(reason)


def _pages() -> list[str]:
    if not HTML.is_dir():
        return []
    skip = {"_static", "_sources", "_images", "_downloads"}
    return sorted(
        p.relative_to(HTML).as_posix() for p in HTML.rglob("*.html") if not skip.intersection(p.relative_to(HTML).parts)
    )


PAGES = _pages()


def _chromium() -> str | None:
    """The browser: $ATTN_LIB_CHROMIUM if set, else the first of chromium / chromium-browser / google-chrome."""
    explicit = os.environ.get("ATTN_LIB_CHROMIUM")
    candidates = [explicit] if explicit else ["chromium", "chromium-browser", "google-chrome"]
    for candidate in candidates:
        path = shutil.which(candidate) or (candidate if Path(candidate).is_file() else None)
        if path:
            return path
    return None


@pytest.fixture(scope="module")
def browser(chromium):
    """The browser, for the checks of the built book (skipped, or failed under CI, without one)."""
    if not (HTML / "index.html").is_file():
        _unavailable(f"no built book at {HTML} (run `make book` first)")
    return chromium


@pytest.fixture(scope="module")
def chromium():
    """Headless Chromium, whether or not the book is built."""
    exe = _chromium()
    if exe is None:
        _unavailable(
            f"no Chromium found (ATTN_LIB_CHROMIUM={os.environ.get('ATTN_LIB_CHROMIUM')!r}, PATH searched for "
            "chromium, chromium-browser, google-chrome; Debian: apt-get install chromium)"
        )
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("playwright is not installed (pip install -e '.[test]')")
    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=exe, headless=True, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


class PageVisit:
    """One page opened offline, with the errors and network requests it produced."""

    def __init__(self, browser, rel: str, width: int = 1280):
        self.rel = rel
        self.width = width
        self.blocked: list[str] = []
        self.js_errors: list[str] = []
        # a phone (PHONE_WIDTH) lays the page out as a mobile browser does: the meta viewport is honoured and
        # scrollbars are overlays, so a box that scrolls shows no scrollbar
        phone = {"is_mobile": True, "has_touch": True} if width < 800 else {}
        self.context = browser.new_context(
            viewport={"width": width, "height": 844 if phone else 900}, service_workers="block", **phone
        )
        self.context.route("**/*", self._route)
        self.page = self.context.new_page()
        self.page.on("pageerror", lambda exc: self.js_errors.append(f"uncaught: {exc}"))
        self.page.on("console", self._console)
        self.page.set_default_timeout(60_000)
        self.page.goto((HTML / rel).as_uri(), wait_until="load")
        # index.html is a redirect (<meta http-equiv="Refresh">): check the page it leads to
        redirect = REDIRECT.search((HTML / rel).read_text(encoding="utf-8"))
        if redirect:
            target = ((HTML / rel).parent / redirect.group(1)).resolve()
            assert target.is_file(), f"{rel} redirects to a missing page {redirect.group(1)}"
            self.page.wait_for_url(target.as_uri(), wait_until="load")

    def _route(self, route):
        url = route.request.url
        if url.startswith(("file://", "data:", "blob:", "about:")):
            route.continue_()
        else:
            self.blocked.append(url)
            route.abort("internetdisconnected")

    def _console(self, msg):
        if msg.type == "error":
            self.js_errors.append(f"console: {msg.text}")

    def close(self):
        self.context.close()


@pytest.fixture(scope="module")
def visits(browser):
    """Open every page once; the checks below share the visits. (Not ``opened.setdefault(rel, PageVisit(...))``:
    that opens the page again on every call, and left each copy loading in the background.)"""
    opened: dict[tuple[str, int], PageVisit] = {}

    def visit(rel: str, width: int = 1280) -> PageVisit:
        if (rel, width) not in opened:
            opened[(rel, width)] = PageVisit(browser, rel, width)
        return opened[(rel, width)]

    yield visit
    for v in opened.values():
        v.close()


# ------------------------------------------------------------------------------------------------ helpers

WAIT_MATHJAX = """async () => {
  if (!window.MathJax) return 'absent';
  const t0 = Date.now();
  while (!(MathJax.startup && MathJax.startup.promise)) {
    if (Date.now() - t0 > 30000) return 'never-started';
    await new Promise(r => setTimeout(r, 100));
  }
  await MathJax.startup.promise;
  return 'typeset';
}"""

WAIT_IMAGES = """async () => {
  const imgs = Array.from(document.images);
  await Promise.all(imgs.map(i => i.complete ? null : new Promise(r => { i.addEventListener('load', r);
                                                                        i.addEventListener('error', r); })));
  return imgs.map(i => ({src: i.currentSrc.slice(0, 120), ok: i.complete && i.naturalWidth > 0}));
}"""

RAW_INLINE_TEX = re.compile(r"\$[^$\n]{0,200}?\\[A-Za-z]+[^$\n]{0,200}?\$")

# Text of the page outside code, scripts and MathJax output (where raw TeX would show if typesetting failed).
PROSE_TEXT = """() => {
  const skip = new Set(['PRE', 'CODE', 'SCRIPT', 'STYLE', 'TEXTAREA', 'MJX-CONTAINER', 'NOSCRIPT']);
  const out = [];
  const walk = (n) => {
    if (n.nodeType === Node.TEXT_NODE) { out.push(n.textContent); return; }
    if (n.nodeType !== Node.ELEMENT_NODE || skip.has(n.tagName)) return;
    if (n.classList.contains('highlight')) return;
    for (const c of n.childNodes) walk(c);
  };
  walk(document.querySelector('main') || document.body);
  return out.join(' ');
}"""

MATH_STATE = """() => {
  const math = Array.from(document.querySelectorAll('.math'));
  return {n_math: math.length,
          n_untypeset: math.filter(m => !m.querySelector('mjx-container')).length,
          n_mjx: document.querySelectorAll('mjx-container').length,
          n_mjx_error: document.querySelectorAll('mjx-merror, [data-mjx-error]').length};
}"""

VISIBLE_SLIDER_IMAGE = """(box) => {
  const imgs = Array.from(box.querySelectorAll('img')).filter(i => i.offsetParent !== null);
  return imgs.map(i => i.src.slice(-64)).join('|');
}"""


# Rows of every table whose number of cells (colspans counted) differs from the widest header row.
RAGGED_TABLE_ROWS = """() => {
  // the width of each row in grid columns: its cells' colspans plus the cells that reach into it from rows above
  // through rowspan (a pandas MultiIndex spans its index cells over several rows)
  const widths = (rows) => {
    let carry = [];  // remaining row counts of cells spanning down, one entry per spanned grid column
    return rows.map(row => {
      const inherited = carry.filter(n => n > 0).length;
      let next = carry.filter(n => n > 1).map(n => n - 1);
      let own = 0;
      for (const c of row.cells) {
        const span = c.colSpan || 1;
        own += span;
        if ((c.rowSpan || 1) > 1) for (let k = 0; k < span; k++) next.push(c.rowSpan - 1);
      }
      carry = next;
      return inherited + own;
    });
  };
  const bad = [];
  for (const table of document.querySelectorAll('main table')) {
    const head = Array.from(table.querySelectorAll('thead tr'));
    const body = Array.from(table.querySelectorAll('tbody tr'));
    if (!head.length || !body.length) continue;
    const expected = Math.max(...widths(head));
    widths(body).forEach((w, i) => {
      if (w !== expected) bad.push(`${w} cells, header ${expected}: ${body[i].innerText.slice(0, 80)}`);
    });
  }
  return bad;
}"""

# (text, href) of every internal link of the article (not the navigation).
INTERNAL_LINKS = """() => Array.from(document.querySelectorAll('main article a.reference.internal:not(.nav-link)'))
  .map(a => [a.innerText.trim(), a.getAttribute('href') || ''])"""

# Titles of the sphinx-proof blocks on the page ("Lemma 1 (Vanishing attention)", ...).
PROOF_TITLES = """() => Array.from(document.querySelectorAll('main div.proof > .admonition-title, main div.proof > p.admonition-title'))
  .map(t => t.innerText.trim())"""


def _shot_name(rel: str, suffix: str = "") -> Path:
    return SHOTS / (rel.replace("/", "__").removesuffix(".html") + suffix + ".png")


def _embedded_widget_views(visit: PageVisit) -> int:
    return visit.page.locator('script[type="application/vnd.jupyter.widget-view+json"]').count()


# ------------------------------------------------------------------------------------------------ tests


def test_built_book_exists_and_covers_the_toc():
    if not (HTML / "index.html").is_file():
        _unavailable(f"no built book at {HTML} (run `make book` first)")
    import yaml

    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [toc["root"]] + [c["file"] for c in toc.get("chapters", [])]
    for f in files:
        assert (HTML / f"{f}.html").is_file(), f"_toc.yml entry {f} has no page in the built book"


def test_no_remote_scripts_or_styles_in_the_html():
    """Static check of every page: no script or stylesheet is loaded from http(s)."""
    if not PAGES:
        _unavailable(f"no built book at {HTML} (run `make book` first)")
    pat = re.compile(r"<(script|link)\b[^>]*\b(src|href)=[\"'](https?:)?//[^\"']+[\"'][^>]*>", re.I)
    for rel in PAGES:
        for m in pat.finditer((HTML / rel).read_text(encoding="utf-8")):
            tag = m.group(0)
            if m.group(1).lower() == "link" and not re.search(r"rel=[\"'](stylesheet|preload|modulepreload|icon)", tag):
                continue  # plain hyperlinks-as-<link> (canonical, prev/next) load nothing
            pytest.fail(f"{rel}: remote resource {tag}")


def test_built_pages_name_no_document_outside_the_repository():
    """The book's own account of the paper is its appendix; no page may point readers to a document they lack."""
    if not PAGES:
        _unavailable(f"no built book at {HTML} (run `make book` first)")
    from test_book_hygiene import OUTSIDE_DOCUMENTS

    hits = []
    for rel in PAGES:
        m = OUTSIDE_DOCUMENTS.search((HTML / rel).read_text(encoding="utf-8"))
        if m:
            hits.append(f"{rel}: {m.group(0)!r}")
    assert not hits, f"built pages that name a document outside the repository: {hits}"


@pytest.mark.parametrize("rel", PAGES or ["<no built book>"])
def test_page_renders_offline(visits, rel):
    if rel not in PAGES:
        _unavailable(f"no built book at {HTML} (run `make book` first)")
    v = visits(rel)
    page = v.page

    mathjax = page.evaluate(WAIT_MATHJAX)
    images = page.evaluate(WAIT_IMAGES)
    n_views = _embedded_widget_views(v)
    if n_views:
        page.wait_for_selector(".widget-subarea > *", state="attached", timeout=60_000)
        page.wait_for_function(
            "n => document.querySelectorAll('.widget-subarea').length >= n", arg=n_views, timeout=60_000
        )
    page.wait_for_timeout(300)
    page.screenshot(path=str(_shot_name(rel)), full_page=FULL_PAGE_SHOTS)

    # 1. offline: nothing but file:// was requested
    assert not v.blocked, f"{rel} needed the network: {v.blocked}"
    # 2. no JavaScript errors
    assert not v.js_errors, f"{rel}: JavaScript errors: {v.js_errors}"
    # 3. math typeset
    math = page.evaluate(MATH_STATE)
    if math["n_math"]:
        assert mathjax == "typeset", f"{rel} has math but MathJax is {mathjax}"
        assert math["n_untypeset"] == 0, f"{rel}: {math['n_untypeset']} of {math['n_math']} math blocks untypeset"
        assert math["n_mjx"] >= math["n_math"]
    assert math["n_mjx_error"] == 0, f"{rel}: MathJax reported {math['n_mjx_error']} TeX errors"
    prose = page.evaluate(PROSE_TEXT)
    for raw in ("$$", "\\(", "\\[", "\\begin{"):
        assert raw not in prose, f"{rel}: raw TeX {raw!r} left in the page text: ...{_around(prose, raw)}..."
    # inline $...$ holding a TeX command (e.g. run-time Markdown output that was not parsed as math)
    inline = RAW_INLINE_TEX.search(prose)
    assert inline is None, f"{rel}: raw inline TeX left in the page text: {inline.group(0)!r}"
    # no literal dollar sign: math that MyST did not parse (e.g. display math inside a list item) shows raw `$`
    assert "$" not in prose, f"{rel}: a literal '$' in the rendered text: ...{_around(prose, '$')}..."
    ragged = page.evaluate(RAGGED_TABLE_ROWS)
    assert not ragged, f"{rel}: table rows whose cell count differs from the header's: {ragged[:3]}"
    # 4. every image loaded
    broken = [im["src"] for im in images if not im["ok"]]
    assert not broken, f"{rel}: images that did not load: {broken}"
    # 5. no error output
    n_err_blocks = page.locator(".output.stderr, .output.traceback, .output.error, .cell_output .stderr").count()
    assert n_err_blocks == 0, f"{rel}: {n_err_blocks} stderr/traceback output blocks"
    for text in page.locator(".cell_output").all_inner_texts():
        assert not re.search(r"Traceback \(most recent call last\)|\b\w*Error\b", text), (
            f"{rel}: an output cell shows an error: {text[:300]!r}"
        )
    # 6. widgets rendered
    if n_views:
        rendered = page.locator(".widget-subarea > *").count()
        assert rendered >= n_views, f"{rel}: {rendered} of {n_views} embedded widgets rendered"
        assert page.locator(".widget-slider, .jupyter-widgets").count() > 0


def test_each_page_is_opened_once_and_shared_by_the_checks(browser, visits):
    if not PAGES:
        _unavailable(f"no built book at {HTML} (run `make book` first)")
    first = visits(PAGES[0])
    contexts = len(browser.contexts)
    assert visits(PAGES[0]) is first and len(browser.contexts) == contexts, "a second visit opened the page again"


@pytest.mark.parametrize("rel", sorted(SLIDER_PAGES))
def test_slider_switches_the_figure(visits, rel):
    if rel not in PAGES:
        _unavailable(f"{rel} is not in the built book at {HTML} (run `make book` first)")
    v = visits(rel)
    page = v.page
    page.wait_for_selector(".attn-lib-precomputed-slider .widget-slider .noUi-handle", timeout=60_000)
    boxes = page.locator(".attn-lib-precomputed-slider")
    assert boxes.count() >= 1, f"{rel}: no pre-rendered slider (attn_lib.book.widgets.precomputed_slider) found"
    for i in range(boxes.count()):
        box = boxes.nth(i)
        box.scroll_into_view_if_needed()
        readout = box.locator(".widget-readout")
        before_img = box.evaluate(VISIBLE_SLIDER_IMAGE)
        before_readout = readout.inner_text()
        assert before_img, f"{rel}: slider {i} shows no image"
        # drag the handle to the far right end of the track
        handle = box.locator(".noUi-handle").first
        track = box.locator(".noUi-base, .noUi-target").first
        hb, tb = handle.bounding_box(), track.bounding_box()
        page.mouse.move(hb["x"] + hb["width"] / 2, hb["y"] + hb["height"] / 2)
        page.mouse.down()
        page.mouse.move(tb["x"] + tb["width"] + 40, hb["y"] + hb["height"] / 2, steps=12)
        page.mouse.up()
        page.wait_for_function(
            "([box, before]) => { const imgs = Array.from(box.querySelectorAll('img'))"
            ".filter(i => i.offsetParent !== null).map(i => i.src.slice(-64)).join('|');"
            " return imgs && imgs !== before; }",
            arg=[box.element_handle(), before_img],
            timeout=10_000,
        )
        after_img = box.evaluate(VISIBLE_SLIDER_IMAGE)
        after_readout = readout.inner_text()
        assert after_img and after_img != before_img, f"{rel}: moving slider {i} did not change the figure"
        assert after_readout != before_readout, f"{rel}: slider {i} readout stayed {before_readout!r}"
        box.screenshot(path=str(_shot_name(rel, f"__slider{i}_moved")))
        # and back with the keyboard (noUiSlider: Home = first value): the first figure comes back
        handle.focus()
        page.keyboard.press("Home")
        page.wait_for_function(
            "([box, shown]) => Array.from(box.querySelectorAll('img')).filter(i => i.offsetParent !== null)"
            ".map(i => i.src.slice(-64)).join('|') !== shown",
            arg=[box.element_handle(), after_img],
            timeout=10_000,
        )
        assert readout.inner_text() != after_readout, f"{rel}: the Home key did not move slider {i}"
    assert not v.blocked, f"{rel} needed the network while using the slider: {v.blocked}"
    assert not v.js_errors, f"{rel}: JavaScript errors while using the slider: {v.js_errors}"


@pytest.mark.parametrize("rel", sorted(NUMBERED_BLOCKS))
def test_chapter_shows_numbered_statements_and_a_working_reference(visits, rel):
    if rel not in PAGES:
        _unavailable(f"{rel} is not in the built book at {HTML} (run `make book` first)")
    page = visits(rel).page
    titles = page.evaluate(PROOF_TITLES)
    for expected in NUMBERED_BLOCKS[rel]:
        assert any(re.match(rf"{expected}\b(?!\.\d)", t) for t in titles), (
            f"{rel}: no numbered block {expected!r}; blocks found: {titles}"
        )
    # {prf:ref} links: internal links whose text names a numbered statement (or a block title) of the book
    refs = [tuple(r) for r in page.evaluate(INTERNAL_LINKS)]  # one round trip (two per link took seconds)
    prf = [(t, h) for t, h in refs if re.search(r"#(lem|cor|thm|asm|def|prop|rem|exa)-", h)]
    assert prf, f"{rel}: no {{prf:ref}} link to a numbered statement (links found: {refs[:10]})"
    for text, href in prf:
        target, anchor = href.split("#", 1)
        target_file = (HTML / rel).parent / target if target else HTML / rel
        html = target_file.read_text(encoding="utf-8")
        assert f'id="{anchor}"' in html, f"{rel}: {{prf:ref}} link {text!r} points to a missing anchor {href}"
    # follow the first one in the browser: it lands on a block with that id
    text, href = prf[0]
    page.locator(f'main a.reference.internal[href="{href}"]').first.click()
    anchor = href.split("#", 1)[1]
    page.wait_for_function("id => location.hash === '#' + id", arg=anchor, timeout=10_000)
    page.wait_for_load_state("load")
    page.wait_for_selector(f'[id="{anchor}"]', state="attached", timeout=10_000)
    assert page.locator(f'[id="{anchor}"]').count() == 1, f"{rel}: {{prf:ref}} {text!r} led to no block #{anchor}"
    page.go_back()
    page.wait_for_load_state("load")


def _around(text: str, needle: str, width: int = 60) -> str:
    i = text.find(needle)
    return text[max(0, i - width) : i + width]


# ------------------------------------------------------------------------------------------------ exercises

#: every chapter page (book/NN_*.md), whether or not its source has exercises: each must show at least 3
CHAPTER_PAGES = sorted(f"book/{p.stem}.html" for p in (ROOT / "book").glob("[0-9][0-9]_*.md"))
MIN_EXERCISES = 3
#: "Exercise 7 (Title (kind · difficulty))", the title sphinx-exercise renders from the chapters' format
EXERCISE_TITLE = re.compile(
    r"^Exercise (\d+)\s*\((.+) \((derivation|implementation|measurement) · (easy|medium|hard)\)\)$", re.S
)


@pytest.mark.parametrize("rel", CHAPTER_PAGES)
def test_chapter_exercises_are_numbered_and_their_solutions_open_on_click(visits, rel):
    if rel not in PAGES:
        _unavailable(f"{rel} is not in the built book at {HTML} (run `make book` first)")
    page = visits(rel).page
    titles = [t.strip() for t in page.locator("main div.exercise > .admonition-title").all_inner_texts()]
    assert len(titles) >= MIN_EXERCISES, f"{rel}: {len(titles)} exercises, at least {MIN_EXERCISES} expected"
    parsed = [EXERCISE_TITLE.match(t) for t in titles]
    assert all(parsed), f"{rel}: exercise titles not numbered as 'Exercise n (title (kind · difficulty))': {titles}"
    numbers = [int(m.group(1)) for m in parsed]
    assert numbers == list(range(numbers[0], numbers[0] + len(numbers))), f"{rel}: exercise numbers {numbers}"
    # sphinx-togglebutton collapses the dropdown solutions once the page's JavaScript has run
    page.wait_for_selector("main div.solution.toggle-hidden", state="attached", timeout=30_000)
    solutions = page.locator("main div.solution")
    assert solutions.count() == len(titles), f"{rel}: {solutions.count()} solutions for {len(titles)} exercises"
    for i in range(solutions.count()):
        sol = solutions.nth(i)
        follows = sol.evaluate("e => !!e.previousElementSibling && e.previousElementSibling.matches('div.exercise')")
        assert follows, f"{rel}: solution {i} does not follow its exercise"
        body = sol.locator(":scope > section").first
        assert not body.is_visible(), f"{rel}: solution {i} ({titles[i]!r}) is not collapsed initially"
        sol.locator(":scope > .admonition-title").click()
        body.wait_for(state="visible", timeout=10_000)
        assert body.inner_text().strip(), f"{rel}: solution {i} opened empty"
        if i == 0:
            sol.screenshot(path=str(_shot_name(rel, "__solution0_open")))
    v = visits(rel)
    assert not v.js_errors, f"{rel}: JavaScript errors while opening the solutions: {v.js_errors}"


# ------------------------------------------------------------------------------------------------ chapter 7
BEYOND_PAGE = "book/07_beyond_softmax.html"


def test_beyond_softmax_model_sliders_switch_the_model_figure(visits):
    """The top-k and temperature sliders of "Beyond softmax" show figures computed from the live model at build
    time; moving each one (drag to the end, then Home) must change the displayed model figure, with no kernel."""
    if BEYOND_PAGE not in PAGES:
        _unavailable(f"{BEYOND_PAGE} is not in the built book at {HTML} (run `make book` first)")
    page = visits(BEYOND_PAGE).page
    page.wait_for_selector(".attn-lib-precomputed-slider .widget-slider .noUi-handle", timeout=60_000)
    boxes = page.locator(".attn-lib-precomputed-slider")
    assert boxes.count() == 2, f"{BEYOND_PAGE}: expected the top-k and the temperature slider, found {boxes.count()}"
    labels = [boxes.nth(i).locator(".widget-label").first.inner_text() for i in range(2)]
    assert labels == ["top-k", "temperature T"], labels
    test_slider_switches_the_figure(visits, BEYOND_PAGE)
    # the live-kernel status line exists but says nothing in the static page: no figure there was computed live
    for i in range(2):
        text = boxes.nth(i).inner_text()
        assert "computed live" not in text and "computing" not in text, f"{BEYOND_PAGE}: slider {i} shows {text!r}"


# ------------------------------------------------------------------------------------------------ page width
# Issue 20: every page readable in a 1280 px window. Code cells and their outputs never need horizontal scrolling,
# no equation runs out of its container, and the smallest text of every figure is shown at least READABLE_PX tall.

#: the smallest on-screen size, in CSS px, of a figure's smallest text (legends, provenance footer)
READABLE_PX = 9.0

WIDTH_PROBLEMS = """() => {
  const scrolls = el => el.scrollWidth > el.clientWidth + 1;
  const text = el => (el.innerText || el.textContent || '').split('\\n').reduce((a, b) => a.length >= b.length ? a : b, '').slice(0, 90);
  const code = [], outputs = [], equations = [];
  for (const el of document.querySelectorAll('.cell .cell_input pre')) if (scrolls(el)) code.push(`${el.scrollWidth - el.clientWidth} px: ${text(el)}`);
  const outs = document.querySelectorAll('.cell_output pre, .cell_output div.output, .cell_output .pst-scrollable-table-container, .cell_output .widget-subarea');
  for (const el of outs) if (scrolls(el)) outputs.push(`${el.className.split(' ').slice(0, 2).join('.')}: ${el.scrollWidth - el.clientWidth} px: ${text(el)}`);
  const block = m => { let b = m.parentElement; while (b && getComputedStyle(b).display.startsWith('inline')) b = b.parentElement; return b; };
  for (const m of document.querySelectorAll('mjx-container')) {
    const box = block(m);
    if (!box) continue;
    const inner = m.querySelector('mjx-math') || m;
    const r = inner.getBoundingClientRect(), b = box.getBoundingClientRect(), cs = getComputedStyle(box);
    // past the content box on the right, or the border box on the left (a list marker sits in the padding)
    const over = Math.max(r.right - (b.right - parseFloat(cs.paddingRight)), b.left - r.left);
    const display = m.getAttribute('display') === 'true';
    if (over > 1 || (display && m.scrollWidth > m.clientWidth + 1)) {
      const tex = (MathJax.startup.document.getMathItemsWithin ? MathJax.startup.document.getMathItemsWithin(m) : [])
        .map(i => i.math).join(' ');
      equations.push(`${Math.round(over)} px (${display ? 'display' : 'inline'}): ${(tex || m.textContent).slice(0, 90)}`);
    }
  }
  return {code, outputs, equations};
}"""

# Every visible output image: its PNG bytes (base64), natural and shown width.
OUTPUT_IMAGES = """async () => {
  const out = [];
  for (const img of document.querySelectorAll('.cell_output img')) {
    if (img.offsetParent === null || !img.naturalWidth) continue;
    let data = null;
    if (!img.src.startsWith('file:')) {
      const buf = new Uint8Array(await (await fetch(img.src)).arrayBuffer());
      let s = ''; for (let i = 0; i < buf.length; i += 32768) s += String.fromCharCode.apply(null, buf.subarray(i, i + 32768));
      data = btoa(s);
    }
    out.push({src: img.src, data, natural: img.naturalWidth, shown: img.getBoundingClientRect().width});
  }
  return out;
}"""


def _png_text(src: str, data: str | None) -> dict:
    """The text chunks of an output PNG (``attn_lib.provenance.figure_to_png`` writes the figure's layout there)."""
    import base64
    import io
    from urllib.parse import unquote, urlparse

    from PIL import Image

    raw = base64.b64decode(data) if data is not None else Path(unquote(urlparse(src).path)).read_bytes()
    with Image.open(io.BytesIO(raw)) as im:
        return dict(getattr(im, "text", {}) or im.info)


def _figure_problems(page) -> list[str]:
    from attn_lib import layout

    problems = []
    for im in page.evaluate(OUTPUT_IMAGES):
        name = im["src"][-40:]
        meta = _png_text(im["src"], im["data"])
        if layout.PNG_KEY_MIN_FONT not in meta:
            problems.append(f"{name}: no declared layout (show figures with attn_lib.book.chapter.show_figure)")
            continue
        width_in = float(meta[layout.PNG_KEY_WIDTH])
        if width_in > layout.FIGURE_WIDTH_IN + 1e-6:
            problems.append(f"{name}: declared {width_in:g} in wide, the column takes {layout.FIGURE_WIDTH_IN:g} in")
        px = float(meta[layout.PNG_KEY_MIN_FONT]) * float(meta[layout.PNG_KEY_DPI]) / 72 * im["shown"] / im["natural"]
        if px < READABLE_PX:
            problems.append(
                f"{name}: smallest text {meta[layout.PNG_KEY_MIN_FONT]} pt shown {px:.1f} px tall (< {READABLE_PX} px; "
                f"image {im['natural']} px shown at {im['shown']:.0f} px)"
            )
    return problems


def _width_report(page) -> dict:
    page.evaluate(WAIT_MATHJAX)
    page.evaluate(WAIT_IMAGES)
    page.wait_for_timeout(200)
    found = page.evaluate(WIDTH_PROBLEMS)
    found["figures"] = _figure_problems(page)
    return found


@pytest.mark.parametrize("rel", PAGES or ["<no built book>"])
def test_page_fits_a_1280px_window(visits, rel):
    """At 1280 px: no code cell or output scrolls sideways, no equation overflows, and figure text is readable."""
    if rel not in PAGES:
        _unavailable(f"no built book at {HTML} (run `make book` first)")
    v = visits(rel)
    if _embedded_widget_views(v):
        v.page.wait_for_selector(".widget-subarea > *", state="attached", timeout=60_000)
    found = _width_report(v.page)
    assert not found["code"], f"{rel}: code cells that need horizontal scrolling: {found['code'][:5]}"
    assert not found["outputs"], f"{rel}: outputs that need horizontal scrolling: {found['outputs'][:5]}"
    assert not found["equations"], f"{rel}: equations wider than their container: {found['equations'][:5]}"
    assert not found["figures"], f"{rel}: figures whose text is shrunk or that declare no width: {found['figures']}"


WIDE_FIXTURE = """<!doctype html><html><head><meta charset="utf-8">
<script>window.MathJax = {{tex: {{inlineMath: [['\\\\(', '\\\\)']]}}}};</script>
<script src="{mathjax}"></script></head>
<body><main style="width: 600px"><article>
<div class="cell"><div class="cell_input"><pre>{long_code}</pre></div>
<div class="cell_output"><div class="output stream"><pre>{long_code}</pre></div>
<img src="{shrunk_png}" style="max-width: 100%"></div></div>
<div class="math">\\[{long_tex}\\]</div>
</article></main></body></html>"""


def test_the_width_checks_fail_on_a_page_that_overflows(chromium, tmp_path):
    """The checks above flag a page with a wide code cell and output, a wide equation and a shrunk figure."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    from attn_lib.provenance import figure_to_png

    fig = Figure(figsize=(13, 4))  # a 1300 px figure shown in a 600 px column: its 7 pt legend is ~4 px tall
    ax = fig.subplots()
    ax.plot([0, 1], label="a line")
    ax.legend(fontsize=7)
    (tmp_path / "wide.png").write_bytes(figure_to_png(fig))
    mathjax = ROOT / "book" / "_vendor" / "mathjax" / "tex-mml-chtml.js"
    if not mathjax.is_file():
        _unavailable(f"no vendored MathJax at {mathjax} (run `make vendor`)")
    page_file = tmp_path / "wide.html"
    page_file.write_text(
        WIDE_FIXTURE.format(
            mathjax=mathjax.as_uri(),
            long_code="x = " + " + ".join(f"value_{i}" for i in range(30)),
            shrunk_png="wide.png",
            long_tex=" + ".join(f"a_{{{i}}} b_{{{i}}}" for i in range(60)),
        ),
        encoding="utf-8",
    )
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    try:
        page = context.new_page()
        page.goto(page_file.as_uri(), wait_until="load")
        found = _width_report(page)
    finally:
        context.close()
    assert found["code"] and found["equations"] and found["figures"], found
    assert any("px tall" in f for f in found["figures"]) and "display" in found["equations"][0], found
    # the book's stylesheet wraps printed output; this page has none, so its long printed line scrolls
    assert found["outputs"], found


# ------------------------------------------------------------------------------------------------ phone width
# Issue 36: every page fits a phone (PHONE_WIDTH) as well as a 1280 px window. The page never scrolls sideways;
# what is wider than the column (a code cell, a display equation, a table, a figure) scrolls inside its own box,
# and every such box carries the visible cue of book/_ext/static/scroll-cue.js (class attn-lib-scroll-x: a faded
# edge, and a "scroll sideways" hint above it); nothing is clipped by a box that does not scroll (an admonition,
# inline math); figure text stays READABLE_PX tall (on a phone a figure keeps its natural size and scrolls).

#: an iPhone 12-15's width in CSS px
PHONE_WIDTH = 390
#: px a box may hide without a cue or a clip being reported: a MathJax glyph's box passes its formula's box by a
#: few px with no ink outside it (the tilde of d~: 3.1 px); book/_ext/static/scroll-cue.js uses the same slack
SLACK_PX = 4
#: the pages whose verdict summary is a list of cards on a phone (a code cell tagged attn-lib-cards)
CARD_PAGES = {"book/06_reproduction_report.html"}

FIT_PROBLEMS = """(slack) => {
  const root = document.querySelector('article.bd-article') || document.querySelector('main') || document.body;
  const label = el => `${el.tagName.toLowerCase()}.${[...el.classList].slice(0, 2).join('.')}: ` +
    (el.innerText || el.textContent || '').trim().split('\\n')[0].slice(0, 70);
  // the right edge of what an element shows, from its text and children (MathJax's assistive MathML, a
  // zero-size copy for screen readers, does not count; a child that is itself a box bounds its content)
  const extent = (el) => {
    let right = -Infinity;
    const walk = (n) => {
      for (const c of n.childNodes) {
        if (c.nodeType === Node.TEXT_NODE) {
          if (!c.textContent.trim()) continue;
          const r = document.createRange(); r.selectNodeContents(c);
          for (const q of r.getClientRects()) right = Math.max(right, q.right);
        } else if (c.nodeType === Node.ELEMENT_NODE && c.tagName !== 'MJX-ASSISTIVE-MML') {
          const cs = getComputedStyle(c);
          if (cs.display === 'none') continue;
          const q = c.getBoundingClientRect();
          if (q.width) right = Math.max(right, q.right);
          if (cs.overflowX === 'visible') walk(c);
        }
      }
    };
    walk(el);
    return right;
  };
  const inScroller = el => {
    for (let a = el.parentElement; a && a !== root; a = a.parentElement) if (getComputedStyle(a).overflowX !== 'visible') return true;
    return false;
  };
  const rootRight = root.getBoundingClientRect().right;
  const clipped = [], uncued = [], spills = [], cued = [];
  for (const el of root.querySelectorAll('*')) {
    if (el.closest('mjx-assistive-mml') || (el.parentElement && el.parentElement.closest('mjx-container'))) continue;
    const cs = getComputedStyle(el);
    if (cs.display === 'none' || cs.visibility === 'hidden') continue;
    const r = el.getBoundingClientRect();
    if (r.width && r.right > rootRight + 1 && !inScroller(el)) spills.push(`${Math.round(r.right - rootRight)} px: ${label(el)}`);
    if (el.clientWidth === 0 || el.scrollWidth <= el.clientWidth + slack || cs.overflowX === 'visible') continue;
    if (cs.overflowX === 'hidden' || cs.overflowX === 'clip') {
      const over = extent(el) - (r.left + el.clientLeft + el.clientWidth);
      if (over > slack) clipped.push(`${Math.round(over)} px: ${label(el)}`);
      continue;
    }
    // a box that scrolls: its cue is the class and its visible hint (named by data-attn-lib-hint)
    const hint = el.dataset.attnLibHint ? document.getElementById(el.dataset.attnLibHint) : null;
    const shown = hint && !hint.hidden && hint.getBoundingClientRect().height > 0;
    if (el.classList.contains('attn-lib-scroll-x') && shown) cued.push(label(el));
    else uncued.push(`${el.scrollWidth - el.clientWidth} px: ${label(el)}` + (hint ? ' (hint hidden)' : ''));
  }
  // the page's width (on a phone a wider page makes the browser zoom out: innerWidth grows with it)
  return {scroll_width: document.documentElement.scrollWidth, clipped, uncued, spills, cued};
}"""


def _fit_report(page, width: int) -> dict:
    page.evaluate(WAIT_MATHJAX)
    page.evaluate(WAIT_IMAGES)
    # scroll-cue.js updates on the next animation frame after a change of size: give it two
    page.wait_for_timeout(300)
    found = page.evaluate(FIT_PROBLEMS, SLACK_PX)
    found["page"] = found["scroll_width"] - width  # px the page scrolls sideways in a window `width` px wide
    return found


def _assert_fits(rel: str, width: int, found: dict) -> None:
    assert found["page"] <= 0, f"{rel} at {width} px: the page scrolls sideways by {found['page']} px"
    assert not found["spills"], f"{rel} at {width} px: content that runs out of the article: {found['spills'][:5]}"
    assert not found["clipped"], (
        f"{rel} at {width} px: content cut by a box that does not scroll: {found['clipped'][:5]}"
    )
    assert not found["uncued"], f"{rel} at {width} px: boxes that scroll sideways with no cue: {found['uncued'][:5]}"


@pytest.mark.parametrize("rel", PAGES or ["<no built book>"])
def test_page_fits_the_1280px_window_with_no_cut_content(visits, rel):
    """At 1280 px, as at a phone's width: the page does not scroll sideways, nothing is cut, and a box that
    scrolls (a long command in a code block) shows its cue."""
    if rel not in PAGES:
        _unavailable(f"no built book at {HTML} (run `make book` first)")
    v = visits(rel)
    if _embedded_widget_views(v):
        v.page.wait_for_selector(".widget-subarea > *", state="attached", timeout=60_000)
    _assert_fits(rel, 1280, _fit_report(v.page, 1280))


@pytest.mark.parametrize("rel", PAGES or ["<no built book>"])
def test_page_fits_a_phone(visits, rel):
    """At 390 px: offline and without JavaScript errors, no sideways scroll of the page, every wide box scrolls
    inside itself with a visible cue, nothing is cut, and figure text is as readable as at 1280 px."""
    if rel not in PAGES:
        _unavailable(f"no built book at {HTML} (run `make book` first)")
    v = visits(rel, PHONE_WIDTH)
    page = v.page
    n_views = _embedded_widget_views(v)
    if n_views:
        page.wait_for_function(
            "n => document.querySelectorAll('.widget-subarea > *').length >= n", arg=n_views, timeout=60_000
        )
    found = _fit_report(page, PHONE_WIDTH)
    page.screenshot(path=str(_shot_name(rel, f"__{PHONE_WIDTH}px")), full_page=FULL_PAGE_SHOTS)
    assert not v.blocked, f"{rel} at {PHONE_WIDTH} px needed the network: {v.blocked}"
    assert not v.js_errors, f"{rel} at {PHONE_WIDTH} px: JavaScript errors: {v.js_errors}"
    _assert_fits(rel, PHONE_WIDTH, found)
    figures = _figure_problems(page)
    assert not figures, f"{rel} at {PHONE_WIDTH} px: figures whose text is shrunk: {figures}"


# One claim per card: the header of each column in front of each cell, no cell wider than the card.
CARDS = """() => Array.from(document.querySelectorAll('.tag_attn-lib-cards table')).map(t => {
  const box = t.closest('.pst-scrollable-table-container') || t.parentElement;
  const rows = Array.from(t.querySelectorAll('tbody tr'));
  return {
    thead: getComputedStyle(t.querySelector('thead')).display,
    rowDisplay: rows.length ? getComputedStyle(rows[0]).display : '',
    rows: rows.length,
    unlabelled: rows.flatMap(r => Array.from(r.cells)).filter(c => !c.dataset.label).length,
    label: rows.length ? getComputedStyle(rows[0].cells[1], '::before').content : '',
    scrolls: box.scrollWidth > box.clientWidth + 1,
    tooWide: rows.filter(r => r.getBoundingClientRect().right > box.getBoundingClientRect().right + 1).length,
  };
})"""


@pytest.mark.parametrize("rel", sorted(CARD_PAGES))
def test_the_verdict_summary_is_a_list_of_cards_on_a_phone(visits, rel):
    if rel not in PAGES:
        _unavailable(f"{rel} is not in the built book at {HTML} (run `make book` first)")
    phone = visits(rel, PHONE_WIDTH).page
    phone.wait_for_load_state("load")
    tables = phone.evaluate(CARDS)
    assert len(tables) == 1, f"{rel}: {len(tables)} tables in a cell tagged attn-lib-cards, expected the summary"
    t = tables[0]
    assert t["rows"] > 0 and t["thead"] == "none" and t["rowDisplay"] == "block", t
    assert t["unlabelled"] == 0 and t["label"].startswith('"'), t  # every cell names its column
    assert not t["scrolls"] and t["tooWide"] == 0, t
    phone.locator(".tag_attn-lib-cards table").first.screenshot(
        path=str(_shot_name(rel, f"__{PHONE_WIDTH}px_cards")), timeout=60_000
    )
    # at 1280 px it is the ordinary table
    wide = visits(rel).page.evaluate(CARDS)[0]
    assert wide["thead"] != "none" and wide["rowDisplay"] == "table-row", wide


FIT_FIXTURE = """<!doctype html><html><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="stylesheet" href="{css}">{script}</head>
<body><main><article class="bd-article" style="margin: 0 16px">
<div class="highlight"><pre style="overflow-x: auto">{long_code}</pre></div>
<div class="admonition" style="overflow: hidden"><p>{clipped}</p></div>
{extra}
</article></main></body></html>"""


def _fit_fixture(chromium, tmp_path, *, cue: bool, extra: str = "") -> dict:
    static = ROOT / "book" / "_ext" / "static"
    script = f'<script defer src="{(static / "scroll-cue.js").as_uri()}"></script>' if cue else ""
    page_file = tmp_path / f"fit_{cue}.html"
    page_file.write_text(
        FIT_FIXTURE.format(
            css=(static / "page-width.css").as_uri(),
            script=script,
            long_code="x = " + " + ".join(f"value_{i}" for i in range(30)),
            clipped='<span style="display: inline-block; width: 600px">a box 600 px wide</span>',
            extra=extra,
        ),
        encoding="utf-8",
    )
    context = chromium.new_context(viewport={"width": PHONE_WIDTH, "height": 844}, is_mobile=True, has_touch=True)
    try:
        page = context.new_page()
        page.goto(page_file.as_uri(), wait_until="load")
        return _fit_report(page, PHONE_WIDTH)
    finally:
        context.close()


def test_the_phone_checks_fail_on_a_page_that_does_not_fit(chromium, tmp_path):
    """The checks above flag a box that scrolls with no cue, content cut by a box that does not scroll, and a page
    that scrolls sideways; with scroll-cue.js the same code block passes, with its hint shown."""
    wide = '<div style="width: 700px">a block 700 px wide</div>'
    bare = _fit_fixture(chromium, tmp_path, cue=False, extra=wide)
    assert bare["uncued"] and "value_0" in bare["uncued"][0], bare
    assert bare["clipped"] and "600 px wide" in bare["clipped"][0], bare
    assert bare["page"] > 0 and bare["spills"], bare
    cued = _fit_fixture(chromium, tmp_path, cue=True)
    assert not cued["uncued"] and cued["cued"] and "value_0" in cued["cued"][0], cued
    assert cued["clipped"] and cued["page"] <= 0 and not cued["spills"], cued
