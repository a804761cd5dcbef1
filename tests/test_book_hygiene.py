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
