"""The student edition of the book: every chapter with its exercises and without their solutions.

    python tools/student_book.py build   # write the configuration, build into _build/student/html and the student
                                         # notebooks into _build/student/branch, then check both
    python tools/student_book.py check   # only check an existing _build/student/{html,branch}

The configuration is ``_config.yml`` with sphinx-exercise's ``hide_solutions`` set and the local extension
``book/_ext/student_edition.py`` loaded (it makes ``hide_solutions`` remove the gated ``{solution-start}`` ...
``{solution-end}`` blocks the chapters use, code cells included). It is written to ``_build/student/_config.yml``
and passed to ``jupyter-book build --config``; the HTML goes to ``_build/student/html``, next to (never into) the
instructors' ``_build/html``. The extension also replaces the page sources that the download buttons serve
(``_sources/<page>.md`` and ``.ipynb``) by their stripped versions.

The student edition's Colab buttons open the chapters on the branch :data:`STUDENT_BRANCH` (its
``repository.branch``); ``build`` writes that branch's files, every chapter as a stripped ``.md`` and a student
``.ipynb`` without outputs, into ``_build/student/branch``, and the Pages workflow pushes that folder to the branch.
The repository button is off in the student edition (the repository's default branch holds the solutions).

``check`` fails when the student edition still serves a solution anywhere:

* a chapter page shows a solution (a solution block, a ``sol-`` label, or a line of a solution's code or plain prose
  from the chapter source) or lost an exercise;
* a file the site serves (``_sources``, ``_downloads``, any ``.md``, ``.ipynb``, ``.txt``, ``.py`` outside the theme's
  ``_static``) holds a solution directive or a solution line;
* a page links to a notebook or source that is not served or holds a solution: a local ``.ipynb``/``.md`` link is read
  like the served files, and a Colab or GitHub link into the book's repository must point at
  :data:`STUDENT_BRANCH` and at a file of ``_build/student/branch``, which is read too; a link to the repository's
  home page (its default branch holds the solutions) is reported;
* any other file of ``_build/student/branch`` (the whole branch is public) holds a solution, or a notebook there would
  install attn_lib from another repository than the edition's (``tools/chapters.py set-repository`` not run).
"""

from __future__ import annotations

import argparse
import copy
import html
import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "book" / "_ext"))
import repository_url as _repo_url  # noqa: E402  (the one validated reading of repository.url)
from student_edition import SOLUTION_BLOCK as _SOLUTION  # noqa: E402  (every fence and form of a solution)

OUT = Path("_build") / "student"
EXTENSION = "student_edition"
# Pages for instructors only: left out of the student edition's table of contents (and not executed there).
INSTRUCTOR_ONLY = ("book/instructor_guide",)
#: The branch that holds the student notebooks (written by the Pages workflow); the student edition's Colab buttons
#: open it.
STUDENT_BRANCH = "student"
#: Files of the student branch that are read as text and must hold no solution (the site's files are all read).
SERVED_SUFFIXES = (".md", ".ipynb", ".txt", ".py", ".rst")
#: Shortest solution line (or math of a solution) that counts: shorter ones are too common to be evidence.
MIN_LINE = 20
MIN_MATH = 12
_MATH = re.compile(r"\$\$(.+?)\$\$|\$([^$\n]+?)\$", re.S)
_HREF = re.compile(r'href="([^"]+)"')
_REPO_LINK = re.compile(
    r"^https://(?:colab\.research\.google\.com/github|github\.com)/(?P<org>[^/]+)/(?P<repo>[^/]+)"
    r"/(?:blob|tree|raw)/(?P<branch>[^/]+)/(?P<path>[^?#]+)"
    r"|^https://raw\.githubusercontent\.com/(?P<org2>[^/]+)/(?P<repo2>[^/]+)/(?P<branch2>[^/]+)/(?P<path2>[^?#]+)"
)
_DIRECTIVE = re.compile(r"\{solution(?:-start|-end)?\}")

_EXERCISE = re.compile(r"^```\{exercise\}", re.M)
_TAG = re.compile(r"<[^>]+>")
_SPACE = re.compile(r"\s+")


def student_config(root: Path = ROOT, overrides: dict | None = None) -> dict:
    """``_config.yml`` of ``root`` with the solutions hidden and the student extension loaded.

    Parameters
    ----------
    root : Path
        Repository root (holds ``_config.yml`` and ``book/_ext``).
    overrides : dict, optional
        Merged into the configuration, key by key (nested dicts are merged, other values replaced); e.g.
        ``{"execute": {"execute_notebooks": "off"}}``.

    Returns
    -------
    dict
        The configuration; the path of the local extension is absolute, so the file can live anywhere.
    """
    config = yaml.safe_load((root / "_config.yml").read_text(encoding="utf-8"))
    config["exclude_patterns"] = [*config.get("exclude_patterns", []), *(f"{page}.*" for page in INSTRUCTOR_ONLY)]
    # Colab opens the student notebooks (no solutions) of the student branch; no button leads to the default branch
    config.setdefault("repository", {})["branch"] = STUDENT_BRANCH
    config.setdefault("html", {})["use_repository_button"] = False
    sphinx = config.setdefault("sphinx", {})
    sphinx.setdefault("config", {})["hide_solutions"] = True
    sphinx["config"]["publication_repository_button"] = False  # book/_ext/publication.py
    sphinx.setdefault("local_extensions", {})[EXTENSION] = str((root / "book" / "_ext").resolve())
    _merge(config, overrides or {})
    return config


def student_toc(root: Path = ROOT) -> dict:
    """``_toc.yml`` of ``root`` without the pages in :data:`INSTRUCTOR_ONLY`.

    Parameters
    ----------
    root : Path
        Repository root (holds ``_toc.yml``).

    Returns
    -------
    dict
        The table of contents of the student edition.
    """
    toc = yaml.safe_load((root / "_toc.yml").read_text(encoding="utf-8"))
    toc["chapters"] = [entry for entry in toc.get("chapters", []) if entry.get("file") not in INSTRUCTOR_ONLY]
    return toc


def _extension(root: Path = ROOT):
    """``book/_ext/student_edition.py`` of ``root`` as a module (it strips solutions from sources and notebooks)."""
    spec = importlib.util.spec_from_file_location("student_edition", root / "book" / "_ext" / "student_edition.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_branch(root: Path, dest: Path) -> list[Path]:
    """Write the files of the student branch into ``dest`` (emptied first): each chapter of the student edition as
    ``book/NN_topic.md`` without its solutions and ``book/NN_topic.ipynb`` (the student notebook Colab opens), and a
    README. Returns the notebooks written.
    """
    ext = _extension(root)
    shutil.rmtree(dest, ignore_errors=True)
    (dest / "book").mkdir(parents=True)
    pages = {entry["file"] for entry in student_toc(root)["chapters"]}
    written = []
    for md in sorted((root / "book").glob("[0-9][0-9]_*.md")):
        if f"book/{md.stem}" not in pages:
            continue
        text = md.read_text(encoding="utf-8")
        (dest / "book" / md.name).write_text(ext.strip_solutions(text), encoding="utf-8")
        notebook = dest / "book" / f"{md.stem}.ipynb"
        notebook.write_text(ext.student_notebook(text), encoding="utf-8")
        written.append(notebook)
    (dest / "README.md").write_text(
        "# Student notebooks\n\nThe chapters of the book without the solutions of their exercises, written by "
        "`tools/student_book.py` (the Pages workflow pushes them to this branch; do not edit them here). The "
        "student edition's Colab buttons open these notebooks.\n",
        encoding="utf-8",
    )
    return written


def _merge(base: dict, extra: dict) -> None:
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = copy.deepcopy(value)


def build(root: Path = ROOT, out: Path | None = None, overrides: dict | None = None) -> Path:
    """Build the student edition of the book in ``root`` into ``out/html`` and return that folder.

    Parameters
    ----------
    root : Path
        Repository root.
    out : Path, optional
        Output folder (default ``root/_build/student``); ``out/_config.yml`` is the generated configuration.
    overrides : dict, optional
        See :func:`student_config`.

    Returns
    -------
    Path
        ``out/html``; the student branch's files are in ``out/branch`` (:func:`write_branch`). A failed build raises
        :class:`subprocess.CalledProcessError`.
    """
    out = (out or root / OUT).resolve()
    out.mkdir(parents=True, exist_ok=True)
    config_path = out / "_config.yml"
    config_path.write_text(yaml.safe_dump(student_config(root, overrides), sort_keys=False), encoding="utf-8")
    toc_path = out / "_toc.yml"
    toc_path.write_text(yaml.safe_dump(student_toc(root), sort_keys=False), encoding="utf-8")
    work = out / "work"
    shutil.rmtree(work, ignore_errors=True)
    jupyter_book = Path(sys.executable).with_name("jupyter-book")
    command = [str(jupyter_book) if jupyter_book.exists() else "jupyter-book", "build", str(root)]
    command += [
        "--config",
        str(config_path),
        "--toc",
        str(toc_path),
        "--path-output",
        str(work),
        "--builder",
        "html",
        "--all",
    ]
    target = out / "html"
    # Jupyter Book's closing banner names the work folder, which is moved away below: name the final one instead
    built = str(work / "_build" / "html")
    with subprocess.Popen(command, cwd=root, stdout=subprocess.PIPE, text=True, bufsize=1) as proc:
        for line in proc.stdout:
            print(line.replace(built, str(target)), end="", flush=True)
    if proc.returncode:
        raise subprocess.CalledProcessError(proc.returncode, command)
    shutil.rmtree(target, ignore_errors=True)
    shutil.move(str(work / "_build" / "html"), str(target))
    shutil.rmtree(work, ignore_errors=True)
    write_branch(root, out / "branch")
    return target


def _page_text(page: str) -> str:
    return _SPACE.sub(" ", html.unescape(_TAG.sub("", page)))


def _line(line: str) -> str:
    """A source line as it shows on a page: trailing comment dropped, whitespace collapsed."""
    return _SPACE.sub(" ", line.split("  #")[0]).strip()


def solution_lines(md_text: str) -> list[str]:
    """Lines of the solutions in a chapter source that would show verbatim on a page: code, plain prose and math.

    Parameters
    ----------
    md_text : str
        A chapter's MyST Markdown; its solutions are every block of :data:`student_edition.SOLUTION_BLOCK` (gated
        or plain, with backtick, colon or tilde fences).

    Returns
    -------
    list of str
        Lines of at least :data:`MIN_LINE` characters, whitespace collapsed, and the TeX source of each math span
        of at least :data:`MIN_MATH` characters (MathJax typesets it in the reader's browser, so a page holds it as
        written); directive lines, options, comments and prose with markup are left out as lines (they do not
        show verbatim), and so is anything the chapter also has outside its solutions (as a line or inside one).
    """
    # outside the solutions, as one text: a solution line that stands anywhere there (a fragment of a call split
    # across lines, say) shows on the page whatever the edition, so it is no evidence of a leak
    elsewhere = "\n".join(_line(line) for line in _SOLUTION.sub("", md_text).splitlines())
    lines = []
    for block in _SOLUTION.finditer(md_text):
        body = block[0]
        for math in _MATH.finditer(body):
            text = _SPACE.sub(" ", math[1] or math[2]).strip()
            if len(text) >= MIN_MATH and text not in elsewhere:
                lines.append(text)
        for line in body.splitlines():
            text = _line(line)
            if (
                len(text) < MIN_LINE
                or text.startswith(("```", ":", "#", "~~~"))
                or re.search(r"[$`{}\\*]", text)
                or text in elsewhere
            ):
                continue
            lines.append(text)
    return list(dict.fromkeys(lines))


def _served_text(path: Path) -> str:
    """The text of a served file as a reader gets it: a notebook's cell sources and outputs, a page's text (tags
    removed, entities decoded: what search and MathJax read), else the file; ``""`` for a binary file."""
    data = path.read_bytes()
    if b"\0" in data[:8192]:  # images, fonts: no text to read
        return ""
    raw = data.decode("utf-8", errors="replace")
    if path.suffix in (".html", ".htm", ".svg", ".xml"):
        return raw + "\n" + _page_text(raw)
    if path.suffix in (".js", ".json"):  # strings there escape a backslash (TeX) as two
        return raw + "\n" + raw.replace("\\\\", "\\")
    if path.suffix == ".ipynb":
        try:
            nb = json.loads(raw)
        except ValueError:
            return raw
        parts = []
        for cell in nb.get("cells", []):
            parts.append("".join(cell.get("source", "")))
            for output in cell.get("outputs", []):
                parts.append("".join(output.get("text", "")))
                parts += ["".join(v) if isinstance(v, list) else str(v) for v in output.get("data", {}).values()]
        return "\n".join(parts)
    return raw


def _leaks(path: Path, lines: list[str]) -> str | None:
    """Why the served file ``path`` gives a solution away (a solution directive or line), or ``None``."""
    text = _served_text(path)
    directive = _DIRECTIVE.search(text)
    if directive:
        return f"holds a {directive[0]} directive"
    flat = _SPACE.sub(" ", text)
    leaked = [line for line in lines if line in flat]
    if leaked:
        return f"holds {len(leaked)} solution lines, e.g. {leaked[0]!r}"
    return None


def _repository_url(html_dir: Path, root: Path) -> str:
    """``repository.url`` the edition was built with (its ``_config.yml`` next to ``html_dir``, else ``root``'s)."""
    return _repo_url.read_url(html_dir.parent if (html_dir.parent / "_config.yml").is_file() else root)


def _repository(html_dir: Path, root: Path) -> tuple[str, str] | None:
    """(owner, name) of the repository the edition was built for."""
    parts = _repository_url(html_dir, root).split("/")
    return (parts[-2], parts[-1].removesuffix(".git")) if len(parts) >= 5 else None


def _install_problems(branch_dir: Path, url: str) -> list[str]:
    """Student-branch notebooks whose Colab cell would not install attn_lib from ``url`` (the edition's repository)."""
    problems = []
    for path in sorted(branch_dir.rglob("*.ipynb")) if url and branch_dir.is_dir() else []:
        try:
            cells = json.loads(path.read_text(encoding="utf-8")).get("cells", [])
        except ValueError:
            problems.append(f"student branch file {path.relative_to(branch_dir)} is not a readable notebook")
            continue
        setup = ["".join(c.get("source", "")) for c in cells if "colab-setup" in c.get("metadata", {}).get("tags", [])]
        if setup and f"REPO = {_repo_url.python_literal(url)}" not in setup[0]:
            found = re.search(r'REPO = "([^"]*)"', setup[0])
            problems.append(
                f"student branch notebook {path.relative_to(branch_dir)} installs attn_lib from "
                f"{found[1] if found else 'nowhere'!r}, not from the edition's repository {url} "
                "(run tools/chapters.py set-repository URL REF before the build)"
            )
    return problems


def served_problems(html_dir: Path, root: Path = ROOT, branch_dir: Path | None = None) -> list[str]:
    """The problems of :func:`check` that concern served files and links, not the pages' own text.

    Parameters
    ----------
    html_dir : Path
        The built student HTML.
    root : Path
        Repository root (its chapter sources give the solution lines; its ``_config.yml`` the repository, unless
        ``html_dir/../_config.yml`` exists).
    branch_dir : Path, optional
        The student branch's files (default ``html_dir/../branch``).

    Returns
    -------
    list of str
        One line per problem.
    """
    branch_dir = branch_dir or html_dir.parent / "branch"
    sources = [md.read_text(encoding="utf-8") for md in sorted((root / "book").glob("*.md"))]
    # a solution line that some page also has outside its solutions (an import, say) gives nothing away
    elsewhere = {_line(line) for text in sources for line in _SOLUTION.sub("", text).splitlines()}
    lines = sorted({line for text in sources for line in solution_lines(text)} - elsewhere)
    problems: list[str] = []
    read: set[Path] = set()

    def read_file(path: Path, shown: str) -> None:
        if path in read:
            return
        read.add(path)
        why = _leaks(path, lines)
        if why:
            problems.append(f"{shown} {why}")

    # every file the site serves: sources, downloads, search index, static files, images (SVG), other pages; the
    # chapter pages themselves are checked by check() against their own sources
    chapter_pages = {f"book/{md.stem}.html" for md in (root / "book").glob("[0-9][0-9]_*.md")}
    for path in sorted(html_dir.rglob("*")):
        rel = path.relative_to(html_dir)
        if path.is_file() and rel.as_posix() not in chapter_pages:
            read_file(path.resolve(), f"served file {rel}")
    repository = _repository(html_dir, root)
    for page in sorted(html_dir.rglob("*.html")):
        rel_page = page.relative_to(html_dir)
        if rel_page.parts[0] == "_static":
            continue
        for href in sorted(set(_HREF.findall(page.read_text(encoding="utf-8", errors="replace")))):
            href = html.unescape(href)
            target = href.split("#")[0].split("?")[0]
            link = _REPO_LINK.match(href)
            if link:
                org, repo = link["org"] or link["org2"], link["repo"] or link["repo2"]
                branch, path = link["branch"] or link["branch2"], link["path"] or link["path2"]
                if "colab.research.google.com" not in href and (org, repo) != repository:
                    continue  # another repository's file: not this book's solutions
                if branch != STUDENT_BRANCH:
                    problems.append(
                        f"{rel_page} links to {path} on the branch {branch!r}, which holds the solutions "
                        f"(the student edition opens the branch {STUDENT_BRANCH!r}): {href}"
                    )
                elif not (branch_dir / path).is_file():
                    problems.append(f"{rel_page} links to {path}, which the student branch ({branch_dir}) lacks")
                else:
                    read_file((branch_dir / path).resolve(), f"{path} on the student branch (linked from {rel_page})")
            elif repository and re.fullmatch(rf"https://github\.com/{re.escape('/'.join(repository))}/?", href):
                problems.append(
                    f"{rel_page} links to the repository's home page, whose default branch has the solutions"
                )
            elif (
                "://" not in target
                and not target.startswith(("mailto:", "data:"))
                and target.endswith((".ipynb", ".md"))
            ):
                local = (page.parent / target).resolve()
                if not local.is_file():
                    problems.append(f"{rel_page} links to {target}, which the site does not serve")
                else:
                    read_file(local, f"{target} (linked from {rel_page})")
    # the rest of the student branch is public too
    for path in sorted(branch_dir.rglob("*")) if branch_dir.is_dir() else []:
        if path.is_file() and path.suffix in SERVED_SUFFIXES:
            read_file(path.resolve(), f"student branch file {path.relative_to(branch_dir)}")
    return problems + _install_problems(branch_dir, _repository_url(html_dir, root))


def check(html_dir: Path, root: Path = ROOT, branch_dir: Path | None = None) -> list[str]:
    """What is wrong with a student edition: solutions left in anywhere it serves or links to, exercises lost.
    Empty when it is right.

    Parameters
    ----------
    html_dir : Path
        The built student HTML (``_build/student/html``).
    root : Path
        Repository root, whose ``book/NN_*.md`` sources say which exercises and solutions each page has.
    branch_dir : Path, optional
        The files of the student branch that the Colab buttons open (default ``html_dir/../branch``).

    Returns
    -------
    list of str
        One line per problem.
    """
    problems = [
        f"{page}: an instructor page is in the student edition"
        for page in INSTRUCTOR_ONLY
        if (html_dir / f"{page}.html").is_file()
    ]
    for md in sorted((root / "book").glob("[0-9][0-9]_*.md")):
        source = md.read_text(encoding="utf-8")
        n_exercises = len(_EXERCISE.findall(source))
        page_path = html_dir / "book" / f"{md.stem}.html"
        if not page_path.is_file():
            if n_exercises:
                problems.append(f"{md.name}: no page {page_path.relative_to(html_dir)} in the student edition")
            continue
        page = page_path.read_text(encoding="utf-8")
        shown = len(re.findall(r'<div class="[^"]*\bexercise\b[^"]*"', page))
        if shown != n_exercises:
            problems.append(f"{md.name}: {shown} exercises on the page, {n_exercises} in the source")
        if re.search(r'class="[^"]*\bsolution\b', page) or re.search(r'id="sol-', page):
            problems.append(f"{md.name}: a solution block is on the page")
        text = _page_text(page)
        leaked = [line for line in solution_lines(source) if line in text]
        if leaked:
            problems.append(f"{md.name}: {len(leaked)} solution lines on the page, e.g. {leaked[0]!r}")
    return problems + served_problems(html_dir, root, branch_dir)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["build", "check"])
    parser.add_argument("--root", type=Path, default=ROOT, help="repository root (default: this checkout)")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    html_dir = build(root) if args.command == "build" else root / OUT / "html"
    if not html_dir.is_dir():
        print(f"student book: no {html_dir} (run `make book-student`)", file=sys.stderr)
        return 1
    problems = check(html_dir, root)
    for line in problems:
        print("student book:", line, file=sys.stderr)
    if not problems:
        print(f"Student edition (no solutions): {html_dir / 'index.html'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
