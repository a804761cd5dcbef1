"""Book hygiene: notebooks are committed without outputs, _toc.yml and book/ agree, and the configuration
keeps the book offline-complete (vendored JavaScript, one repository URL)."""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path

import nbformat
import pytest
import yaml
from conftest import figure_provenance

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"
SKIP_DIRS = {"_vendor", "_build", ".ipynb_checkpoints"}


def _book_files(suffix: str) -> list[Path]:
    return sorted(p for p in BOOK.rglob(f"*{suffix}") if not SKIP_DIRS.intersection(p.relative_to(BOOK).parts))


NOTEBOOKS = _book_files(".ipynb")


def _toc_entries() -> list[str]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    entries = [toc["root"]]

    def walk(node):
        if isinstance(node, dict):
            if "file" in node:
                entries.append(node["file"])
            for key in ("parts", "chapters", "sections"):
                for child in node.get(key, []) or []:
                    walk(child)
        elif isinstance(node, list):
            for child in node:
                walk(child)

    walk(toc)
    return entries


def _config() -> dict:
    return yaml.safe_load((ROOT / "_config.yml").read_text())


def test_there_is_at_least_one_chapter():
    assert NOTEBOOKS, "book/ holds no notebook"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_has_no_outputs(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    dirty = [
        i
        for i, c in enumerate(nb.cells)
        if c.cell_type == "code" and (c.get("outputs") or c.get("execution_count") is not None)
    ]
    assert not dirty, f"{path.name}: cells {dirty} have outputs or execution counts; clear them before committing"
    assert "widgets" not in nb.metadata, f"{path.name}: saved widget state in the metadata; clear it"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_uses_the_python3_kernel(path):
    nb = nbformat.read(path, as_version=4)
    assert nb.metadata.get("kernelspec", {}).get("name") == "python3", f"{path.name}: kernelspec must be python3"


def test_every_notebook_is_in_the_toc():
    entries = set(_toc_entries())
    for path in NOTEBOOKS + _book_files(".md"):
        doc = path.relative_to(ROOT).with_suffix("").as_posix()
        assert doc in entries, f"{doc} is not listed in _toc.yml"


def test_every_toc_entry_exists():
    for entry in _toc_entries():
        stem = ROOT / entry
        assert stem.with_suffix(".md").exists(), f"_toc.yml entry {entry!r}: {entry}.md does not exist"


def test_no_static_folder_in_the_source():
    """Jupyter Book injects every .js/.css under <source>/_static into every page (vendored JS must not be)."""
    assert not (ROOT / "_static").exists(), "do not create _static/ at the repository root; see _config.yml"


def test_config_uses_vendored_javascript():
    cfg = _config()["sphinx"]["config"]
    assert "book/_vendor" in cfg["html_static_path"]
    assert "://" not in cfg["mathjax_path"]
    assert cfg["nb_ipywidgets_js"], "nb_ipywidgets_js must list the vendored require.js and embed-amd.js"
    for url in [cfg["mathjax_path"], *cfg["nb_ipywidgets_js"]]:
        assert "://" not in url and not url.startswith("//"), f"{url} is not a local path"
    # every file the config points at is written by tools/vendor_js.py or committed in another static path
    src = (ROOT / "tools" / "vendor_js.py").read_text()
    committed = [ROOT / p for p in cfg["html_static_path"] if p != "book/_vendor"]
    for url in [*cfg["nb_ipywidgets_js"]]:
        assert url in src or any((d / url).is_file() for d in committed), f"nothing provides {url}"
    assert "tex-mml-chtml.js" in src and cfg["mathjax_path"].endswith("tex-mml-chtml.js")


def test_vendored_packages_are_pinned_and_locked():
    pkg = json.loads((ROOT / "package.json").read_text())
    lock = json.loads((ROOT / "package-lock.json").read_text())
    for name, spec in pkg["dependencies"].items():
        assert re.fullmatch(r"\d+\.\d+\.\d+", spec), f"package.json: pin {name} to an exact version (got {spec})"
        assert lock["packages"][f"node_modules/{name}"]["version"] == spec, f"package-lock.json is stale for {name}"
    assert pkg["dependencies"]["@jupyter-widgets/html-manager"].startswith("1."), "ipywidgets 8 needs html-manager 1.x"
    assert pkg["dependencies"]["mathjax"].startswith("3.")


def test_execution_settings():
    cfg = _config()
    assert cfg["execute"]["execute_notebooks"] == "force", "every build must execute every chapter"
    assert cfg["only_build_toc_files"] is True


def test_repository_url_is_set_once_and_used_consistently():
    """_config.yml's repository.url (empty until the Pages workflow sets it) drives the launch buttons; each
    chapter's Colab cell installs from it, and names no other repository."""
    cfg = _config()
    url = cfg["repository"]["url"]
    assert url == "" or re.fullmatch(r"https://github\.com/[\w.-]+/[\w.-]+", url), f"repository.url: {url!r}"
    assert cfg["launch_buttons"]["colab_url"] == "https://colab.research.google.com"
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
        for found in re.findall(r"https://github\.com/[\w.-]+/[\w.-]+", code):
            assert found.removesuffix(".git") == url, (
                f"{path.name} refers to {found}, but _config.yml's repository.url is {url}"
            )
        colab = [c for c in nb.cells if c.cell_type == "code" and "google.colab" in c.source]
        assert colab and f'REPO = "{url}"' in colab[0].source and "git+{REPO}" in colab[0].source, (
            f"{path.name}: needs a Colab set-up cell that pip-installs attn_lib from {url!r}"
        )


def test_environment_yml_lists_the_pyproject_dependencies():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    deps = list(project["dependencies"])
    for extra in ("book", "test", "assign"):
        deps += project["optional-dependencies"][extra]
    env_text = (ROOT / "environment.yml").read_text().lower().replace("_", "-")
    aliases = {"torch": "pytorch"}
    for dep in deps:
        name = re.split(r"[<>=!~\[; ]", dep, maxsplit=1)[0].lower().replace("_", "-")
        name = aliases.get(name, name)
        assert re.search(rf"^\s*-\s*{re.escape(name)}\b", env_text, re.M), f"environment.yml lacks {name}"


def test_ci_script():
    run = ROOT / ".ci" / "run"
    assert run.stat().st_mode & stat.S_IXUSR, ".ci/run must be executable"
    text = run.read_text()
    assert text.startswith("#!/usr/bin/env bash")
    assert "set -euo pipefail" in text
    assert "make test" in text
    assert os.access(run, os.X_OK)


def test_project_urls_name_no_repository():
    """The repository URL is one setting (_config.yml's repository.url): pyproject.toml does not repeat it."""
    urls = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]
    assert urls == {"Paper": "https://arxiv.org/abs/2508.17821"}


def test_python_floor_is_stated_consistently():
    """requires-python, environment.yml and the README state the same Python floor."""
    floor = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    m = re.fullmatch(r">=(3\.\d+)", floor)
    assert m, floor
    assert re.search(rf"^\s*-\s*python>={re.escape(m[1])}\b", (ROOT / "environment.yml").read_text(), re.M)
    readme = (ROOT / "README.md").read_text()
    assert f"Python ≥ {m[1]}" in readme and "Python ≥ 3.10" not in readme


# ---- references to documents outside the repository ------------------------------------------------------------
#: Documents the team worked from that are not part of the repository (readers and users do not have them). The
#: book's own account of the paper is its appendix "Reading the paper"; everything refers to that instead.
OUTSIDE_DOCUMENTS = re.compile(r"paper[-_]notes|\.\./shared|style-examples|the project's notes|notes file", re.I)
THIS_FILE = Path(__file__).resolve()


def _tracked_text_files() -> list[Path]:
    import subprocess

    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    files = []
    for rel in out:
        path = ROOT / rel
        if path.resolve() == THIS_FILE or rel.startswith(("attn_lib/data/", "package-lock.json")) or not path.is_file():
            continue
        try:
            path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        files.append(path)
    return files


def test_no_reference_to_documents_outside_the_repository():
    hits = []
    for path in _tracked_text_files():
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if OUTSIDE_DOCUMENTS.search(line):
                hits.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()[:100]}")
    assert not hits, "references to documents that are not in the repository:\n" + "\n".join(hits[:20])


def test_the_outside_document_check_can_fail(tmp_path):
    outside_name, outside_path = "paper" + "-notes", ".." + "/shared/x.md"  # spelled apart: this file names none
    assert OUTSIDE_DOCUMENTS.search(f"see {outside_name} §3.7") and OUTSIDE_DOCUMENTS.search(outside_path)
    assert not OUTSIDE_DOCUMENTS.search("see Reading the paper, §Theorem 2")


def test_relative_markdown_links_resolve():
    link = re.compile(r"\[[^\]]*\]\((?!https?:|mailto:|#)([^)\s#]+)(?:#[^)]*)?\)")
    broken = []
    for path in _tracked_text_files():
        if path.suffix != ".md":
            continue
        for target in link.findall(path.read_text(encoding="utf-8")):
            if not ((path.parent / target).exists() or (ROOT / target).exists()):
                broken.append(f"{path.relative_to(ROOT)} -> {target}")
    assert not broken, f"Markdown links to files that do not exist: {broken}"


# ------------------------------------------------------------------------------------------------ page width
# Issue 20 (pages readable at 1280 px): the static parts; tests/test_browser.py measures the built pages.


def _chapters_tool():
    import importlib.util

    spec = importlib.util.spec_from_file_location("chapters_tool_width", ROOT / "tools" / "chapters.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _one_chapter_book(tmp_path: Path, code: str) -> Path:
    """A copy of the book's config and shared cell with one chapter whose second code cell is ``code``."""
    import shutil

    tool = _chapters_tool()
    shutil.copy(ROOT / "_config.yml", tmp_path / "_config.yml")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    shutil.copytree(BOOK / "_shared", tmp_path / "book" / "_shared")
    header = (BOOK / "01_vanishing_attention.md").read_text(encoding="utf-8").split("\n---\n", 1)[0] + "\n---\n"
    body = (
        "\n# A fixture\n\n```{code-cell} ipython3\n:tags: [remove-cell, colab-setup]\n\npass\n```\n\n"
        f"```{{code-cell}} ipython3\n{code}\n```\n"
    )
    (tmp_path / "book" / "01_fixture.md").write_text(header + body, encoding="utf-8")
    tool.sync(tmp_path)
    return tmp_path


def test_chapter_code_is_formatted_to_the_column():
    tool = _chapters_tool()
    for md in tool.chapters(BOOK):
        assert tool.width_problems(md) == [], md.name


def test_the_width_rule_fails_on_a_wide_or_unformatted_cell_and_format_fixes_the_layout(tmp_path):
    tool = _chapters_tool()
    wide_call = "result = some_function(" + ", ".join(f"argument_{i}" for i in range(8)) + ")"
    root = _one_chapter_book(tmp_path, wide_call)
    found = tool.problems(root)
    assert any("not ruff-formatted" in p for p in found) and any("wider than" in p for p in found), found
    tool.format_chapters(root)
    assert tool.problems(root) == []
    # a long string cannot be split by ruff: the rule keeps failing until it is split by hand
    (tmp_path / "b").mkdir()
    root2 = _one_chapter_book(tmp_path / "b", 'print("' + "word " * 20 + '")')
    tool.format_chapters(root2)
    assert any("wider than" in p for p in tool.problems(root2))


def test_the_cell_length_rule_counts_statements_not_lines():
    tool = _chapters_tool()
    assert tool.logical_lines("x = f(\n    1,\n    2,\n)\n# a comment\ny = 2\n") == 2
    assert tool.logical_lines("%pip install x\n\n!ls\n") == 2


def test_fit_math_breaks_a_wide_equation_and_keeps_a_narrow_one():
    from attn_lib.book import display_math as layout

    narrow = r"C_1 = \frac{m_F}{M_F},\qquad C_2 = \frac{M_F}{m_F}"
    assert layout.fit_math(narrow) == narrow
    wide = r",\quad ".join(rf"x_{{{i}}} = \alpha_{{{i}}} + \beta_{{{i}}} + \gamma_{{{i}}}" for i in range(8))
    out = layout.fit_math(wide)
    assert out.startswith(r"\begin{aligned}") and out.count(r"\\") >= 2
    rows = out.removeprefix(r"\begin{aligned}").removesuffix(r"\end{aligned}").split("\\\\\n")
    assert all(layout.math_width_em(r) <= layout.MATH_WIDTH_EM for r in rows), rows
    # one long sum breaks before its + signs; a continued row is indented
    long_sum = "S = " + " + ".join(f"a_{{{i}}} b_{{{i}}} c_{{{i}}}" for i in range(20))
    broken = layout.fit_math(long_sum)
    assert r"&\qquad {}+" in broken
    assert layout.fit_math(r"\begin{aligned}a&=1\\b&=2\end{aligned}") == r"\begin{aligned}a&=1\\b&=2\end{aligned}"
    assert layout.Math(wide).data == out
    with pytest.raises(ValueError, match="tex"):
        layout.fit_math(3)


def test_math_width_estimate_is_monotone_and_counts_fractions_by_their_widest_row():
    from attn_lib.book import display_math as layout

    assert layout.math_width_em("a + b") < layout.math_width_em("a + b + c")
    frac = layout.math_width_em(r"\frac{abcdef}{g}")
    assert layout.math_width_em("abcdef") < frac < layout.math_width_em("abcdef") + 1
    column = layout.math_width_em(r"\left[\begin{matrix}a\\bbbb\end{matrix}\right]")
    assert layout.math_width_em("bbbb") < column < layout.math_width_em("bbbb") + 2


def test_book_figures_declare_their_layout_in_the_png():
    import io

    from matplotlib.figure import Figure
    from PIL import Image

    from attn_lib import layout, provenance

    fig = Figure(figsize=(layout.FIGURE_WIDTH_IN, 3))
    ax = fig.subplots()
    ax.plot([0, 1], label="line")
    ax.legend(fontsize=6.5)
    provenance.label_figure(fig, model="SmolLM2-135M-Instruct (stand-in for gpt2) " * 4, text="t", device="cpu")
    assert "\n" in next(t for t in fig.texts if t.get_gid() == provenance.PROVENANCE_GID).get_text()
    assert "\n" not in figure_provenance(fig)
    with Image.open(io.BytesIO(provenance.figure_to_png(fig))) as im:
        meta, width = im.text, im.width
    assert float(meta[layout.PNG_KEY_MIN_FONT]) == 6.5
    assert float(meta[layout.PNG_KEY_WIDTH]) == pytest.approx(layout.FIGURE_WIDTH_IN)
    # the wrapped footer keeps the image within the column
    assert width <= layout.FIGURE_WIDTH_IN * layout.FIGURE_DPI + 20


def test_wrap_text_fits_its_width():
    from attn_lib import layout

    text = "model: SmolLM2-135M-Instruct · text: a held-out window · device: cpu " * 3
    lines = layout.wrap_text(text, 3.0, 7).split("\n")
    assert len(lines) > 1 and max(len(x) for x in lines) <= int(3.0 * 72 / (0.55 * 7))
