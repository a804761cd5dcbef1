"""Repository habits: the GitHub workflows pass actionlint, the licence and citation files are present and
consistent with pyproject.toml, and build leftovers are ignored by git."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = ROOT / ".github" / "workflows"
PAPER_ARXIV_ID = "2508.17821"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def _actionlint() -> str:
    """Path of the actionlint binary (the `lint` extra puts it next to this Python); fail in CI, skip elsewhere."""
    beside = Path(sys.executable).with_name("actionlint.exe" if os.name == "nt" else "actionlint")
    found = str(beside) if beside.is_file() else shutil.which("actionlint")
    if found:
        return found
    message = 'actionlint is not installed: `pip install -e ".[lint]"` (make setup installs it)'
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{message}; CI must run this check")
    pytest.skip(message)


def _run_actionlint(*files: Path) -> subprocess.CompletedProcess:
    # -shellcheck= / -pyflakes=: the same result whether or not those optional tools are on this machine.
    cmd = [_actionlint(), "-no-color", "-oneline", "-shellcheck=", "-pyflakes=", *map(str, files)]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)


def _workflow(name: str) -> dict:
    data = yaml.safe_load((WORKFLOWS / name).read_text())
    data["on"] = data.pop(True, data.get("on"))  # YAML 1.1 reads the key `on` as True
    return data


def _steps(job: dict) -> list[dict]:
    return job.get("steps", [])


# --- workflows ---------------------------------------------------------------------------------------------------


def test_both_workflows_pass_actionlint():
    files = [WORKFLOWS / "ci.yml", WORKFLOWS / "pages.yml"]
    assert all(f.is_file() for f in files), "ci.yml and pages.yml must exist"
    res = _run_actionlint(*files)
    assert res.returncode == 0, res.stdout + res.stderr


def test_actionlint_rejects_a_broken_workflow(tmp_path):
    # The check above can fail: an unknown event and an undefined context property are reported.
    bad = tmp_path / "bad.yml"
    bad.write_text(
        "on:\n  pushh:\njobs:\n  t:\n    runs-on: ubuntu-latest\n"
        '    steps:\n      - run: echo "${{ github.no_such_field }}"\n'
    )
    res = _run_actionlint(bad)
    assert res.returncode == 1
    assert 'unknown Webhook event "pushh"' in res.stdout
    assert "no_such_field" in res.stdout


def test_ci_workflow_runs_the_ci_entry_point():
    wf = _workflow("ci.yml")
    runs = [s["run"].strip() for job in wf["jobs"].values() for s in _steps(job) if "run" in s]
    assert runs == ["bash .ci/run"]
    assert (ROOT / ".ci" / "run").is_file()


def test_pages_workflow_builds_the_book_and_deploys_build_html():
    wf = _workflow("pages.yml")
    steps = [s for job in wf["jobs"].values() for s in _steps(job)]
    uses = [s["uses"].split("@")[0] for s in steps if "uses" in s]
    for action in ("actions/configure-pages", "actions/upload-pages-artifact", "actions/deploy-pages"):
        assert action in uses
    assert any(s.get("run", "").strip() == "make book" for s in steps)
    upload = next(s for s in steps if s.get("uses", "").startswith("actions/upload-pages-artifact@"))
    assert upload["with"]["path"] == "_build/html"


def test_pages_workflow_grants_pages_permissions_to_the_deploy_job_only():
    wf = _workflow("pages.yml")
    assert wf["permissions"] == {"contents": "read"}
    deploy = next(j for j in wf["jobs"].values() if any("deploy-pages" in s.get("uses", "") for s in _steps(j)))
    assert deploy["permissions"] == {"pages": "write", "id-token": "write"}
    assert deploy["environment"]["name"] == "github-pages"
    assert wf["concurrency"]["cancel-in-progress"] is False


# --- licence and citation ----------------------------------------------------------------------------------------


def test_license_file_is_mit_and_declared_in_pyproject():
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License")
    assert "Permission is hereby granted, free of charge" in text
    assert 'THE SOFTWARE IS PROVIDED "AS IS"' in text
    assert PYPROJECT["project"]["license"] == "MIT"
    assert "LICENSE" in PYPROJECT["project"]["license-files"]


def test_citation_cites_this_project_at_the_pyproject_version():
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert cff["cff-version"] == "1.2.0"
    assert cff["type"] == "software"
    assert str(cff["version"]) == PYPROJECT["project"]["version"]
    assert cff["license"] == "MIT"
    assert cff["title"] and cff["authors"]


def test_citation_references_the_paper_by_its_arxiv_id():
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    papers = [r for r in cff.get("references", []) if PAPER_ARXIV_ID in str(r.get("identifiers"))]
    assert len(papers) == 1
    paper = papers[0]
    assert paper["title"] == "Limitations of Normalization in Attention Mechanism"
    assert [a["family-names"] for a in paper["authors"]] == ["Mudarisov", "Burtsev", "Petrova", "State"]


# --- .gitignore --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path", ["build/lib/x.py", "dist/attn_lib-0.1.0.whl", "_build/html/index.html", "attn_lib.egg-info/PKG-INFO"]
)
def test_gitignore_covers_build_leftovers(path):
    git = shutil.which("git")
    if git is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: git check-ignore cannot be asked")
    # --no-index: the rule is checked even if such a file was committed by mistake.
    res = subprocess.run([git, "check-ignore", "-q", "--no-index", path], cwd=ROOT, capture_output=True, timeout=30)
    assert res.returncode == 0, f"{path} is not ignored by .gitignore"
