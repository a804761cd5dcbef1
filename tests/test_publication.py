"""Publishing: the repository URL is one setting (repository.url of _config.yml, empty in the committed file), which
the Pages workflow fills in from the repository that builds the book; book/_ext/publication.py turns it into the
intro's note, and the student edition opens the notebooks the workflow pushes to the branch `student`."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


chapters_tool = _load("chapters_tool", ROOT / "tools" / "chapters.py")
student_book = _load("student_book", ROOT / "tools" / "student_book.py")
publication = _load("publication", ROOT / "book" / "_ext" / "publication.py")
WORKFLOW = yaml.safe_load((ROOT / ".github" / "workflows" / "pages.yml").read_text())


def test_the_committed_book_is_not_published():
    assert chapters_tool.repository_url(ROOT) == "" and chapters_tool.repository_ref(ROOT) == ""
    assert "not published" in publication.publication_note("", "main")
    note = publication.publication_note("https://github.com/o/r", "student")
    assert "not published" not in note and "(https://github.com/o/r/tree/student)" in note


def test_the_pages_workflow_fills_in_this_repository_before_it_builds():
    build = WORKFLOW["jobs"]["build"]
    assert build["env"]["REPOSITORY_URL"] == "${{ github.server_url }}/${{ github.repository }}"
    assert build["env"]["BUILT_FROM"] == "${{ github.sha }}"  # the install cells take attn_lib at this commit
    runs = [step.get("run", "") for step in build["steps"]]
    at = {name: next(i for i, run in enumerate(runs) if name in run) for name in ("set-repository", "make book")}
    assert 'tools/chapters.py set-repository "$REPOSITORY_URL" "$BUILT_FROM"' in runs[at["set-repository"]]
    assert at["set-repository"] < at["make book"] and any("make book-student" in run for run in runs)
    uploads = {step.get("with", {}).get("path") for step in build["steps"] if "upload" in step.get("uses", "")}
    assert {"_build/html", "_build/student/branch", "_build/notebooks-branch"} <= uploads


def test_the_pages_workflow_pushes_the_branches_the_colab_buttons_open():
    job = WORKFLOW["jobs"]["notebook-branches"]
    assert job["permissions"] == {"contents": "write"} and WORKFLOW["permissions"] == {"contents": "read"}
    script = "\n".join(step.get("run", "") for step in job["steps"])
    for branch in (student_book.STUDENT_BRANCH, chapters_tool.PUBLISHED_BRANCH):
        assert f'publish {branch} "$RUNNER_TEMP/{branch}"' in script
    assert "git push --force origin HEAD:refs/heads/$1" in script
    artifacts = {s["with"]["name"]: s["with"]["path"] for s in job["steps"] if "download-artifact" in s.get("uses", "")}
    assert artifacts == {b: f"${{{{ runner.temp }}}}/{b}" for b in ("student", "notebooks")}
    build = {
        s["with"]["name"]: s["with"]["path"]
        for s in WORKFLOW["jobs"]["build"]["steps"]
        if "actions/upload-artifact" in s.get("uses", "")
    }
    assert build == {"student": "_build/student/branch", "notebooks": "_build/notebooks-branch"}


def test_what_the_workflow_writes_is_what_the_student_edition_reads(tmp_path):
    """set-repository on a copy of the book (as the workflow does): the student edition's configuration then names
    the repository, opens the branch student, and every install cell installs from the repository at the commit
    the book was built from."""
    shutil.copy(ROOT / "_config.yml", tmp_path / "_config.yml")
    (tmp_path / "book").mkdir()
    shutil.copytree(ROOT / "book" / "_shared", tmp_path / "book" / "_shared")
    shutil.copy(ROOT / "book" / "01_vanishing_attention.md", tmp_path / "book")
    url, commit = "https://github.com/a-school/attn-course", "89abcdef0123456789abcdef0123456789abcdef"
    chapters_tool.set_repository(tmp_path, url, commit)
    config = student_book.student_config(tmp_path)
    assert config["repository"]["url"] == url and config["repository"]["branch"] == "student"
    # the instructors' edition opens the notebooks the workflow pushes to the branch notebooks (filled-in cells)
    assert yaml.safe_load((tmp_path / "_config.yml").read_text())["repository"]["branch"] == "notebooks"
    cell = (tmp_path / "book" / "01_vanishing_attention.md").read_text()
    assert f'REPO = "{url}"' in cell and f'REF = "{commit}"' in cell and "git+{REPO}@{REF}" in cell
    assert chapters_tool.problems(tmp_path) == []


def test_the_repository_button_follows_the_url_and_stays_off_in_the_student_edition():
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert config["html"]["use_repository_button"] is False  # Jupyter Book refuses the button without a URL ...
    assert config["sphinx"]["local_extensions"]["publication"] == "book/_ext"  # ... the extension turns it on
    assert student_book.student_config(ROOT)["sphinx"]["config"]["publication_repository_button"] is False


def test_publication_turns_the_buttons_on_and_off_with_the_url():
    from types import SimpleNamespace

    for url, branch, button in (("", "main", False), ("https://github.com/o/r", "notebooks", True)):
        launch = {"colab_url": "https://colab.research.google.com"}
        config = SimpleNamespace(
            html_theme_options={"repository_url": url, "repository_branch": branch, "launch_buttons": launch},
            myst_substitutions={},
            publication_repository_button=True,
        )
        publication._config_inited(None, config)
        opts = config.html_theme_options
        assert opts.get("use_repository_button", False) is button
        assert bool(opts["launch_buttons"]) is bool(url)
        assert ("not published" in config.myst_substitutions["publication"]) is not bool(url)
    config.publication_repository_button = False  # the student edition
    config.html_theme_options.pop("use_repository_button")
    publication._config_inited(None, config)
    assert "use_repository_button" not in config.html_theme_options


def test_publication_refuses_an_invalid_repository_url():
    """A hand-edited repository.url never reaches the links and the note: the build stops, naming the setting."""
    from types import SimpleNamespace

    from sphinx.errors import ConfigError

    for url in ('https://github.com/o/r"><script>alert(1)</script>', "javascript:alert(1)", "https://github.com/o"):
        config = SimpleNamespace(
            html_theme_options={"repository_url": url, "repository_branch": "main", "launch_buttons": {}},
            myst_substitutions={},
            publication_repository_button=True,
        )
        with pytest.raises(ConfigError, match="repository.url"):
            publication._config_inited(None, config)
