"""The Colab-versions environment (tools/colab_env.py, `make test-colab`): what it pins, that attn_lib's own
requirements admit Colab's versions, what the install cells run on Colab (the library at the book's commit, Otter
pinned and without the dependencies that would replace Colab's ipywidgets), and that the environment's dry-run check
catches an install that would change a pin. The environment itself takes minutes (a fresh venv), so `make test` does
not build it; .ci/run runs `make test-colab` after it."""

from __future__ import annotations

import importlib.util
import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("colab_env", ROOT / "tools" / "colab_env.py")
colab_env = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(colab_env)


def test_the_pins_are_colabs_versions():
    assert colab_env.COLAB_PINS == {
        "ipywidgets": "7.7.1",
        "transformers": "5.15.0",
        "numpy": "2.1.3",
        "pandas": "2.2.3",
        "matplotlib": "3.10.0",
        "scipy": "1.16.3",
        "ipykernel": "6.17.1",
        "notebook": "6.5.7",
        "widgetsnbextension": "3.6.10",
    }


def test_attn_libs_requirements_admit_colabs_versions():
    """Every core dependency of attn_lib that Colab ships is satisfied by Colab's version (else pip would upgrade it)."""
    requirements = [
        Requirement(r) for r in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    ]
    by_name = {r.name.lower(): r for r in requirements}
    checked = 0
    for name, version in colab_env.COLAB_PINS.items():
        if name in by_name:
            assert by_name[name].specifier.contains(version), f"pyproject's {by_name[name]} rejects Colab's {version}"
            checked += 1
    assert checked >= 6  # ipywidgets, transformers, numpy, pandas, matplotlib, scipy
    assert by_name["torch"].specifier.contains("2.11.0")  # Colab's torch


def test_ci_runs_the_colab_environment_after_make_test():
    run = (ROOT / ".ci" / "run").read_text()
    assert run.index("make test\n") < run.index("make test-colab\n")
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^test-colab: .*\n\t\$\(PY\) tools/colab_env\.py", makefile, re.M)
    test_line = re.search(r"^test: (.*)$", makefile, re.M)[1]
    assert "test-colab" not in test_line.split()  # minutes of installing: not part of make test


REF = "0123456789abcdef0123456789abcdef01234567"


def _colab_cell(template: Path, url: str, ref: str = REF) -> str:
    return template.read_text().replace("{repository_url}", url).replace("{repository_ref}", ref)


def _run_on_fake_colab(monkeypatch, source: str, ipywidgets_version: str) -> tuple[list, list]:
    """Run a Colab set-up cell as on Colab: a fake google.colab, pip not really run, ipywidgets at a given version."""
    import importlib.metadata
    import subprocess
    import sys
    import types

    calls, enabled = [], []
    colab = types.ModuleType("google.colab")
    colab.output = types.SimpleNamespace(enable_custom_widget_manager=lambda: enabled.append(True))
    colab._message = types.SimpleNamespace(
        blocking_request=lambda *a, **k: {"ipynb": {"metadata": {"otter": {"tests": {}}}}}
    )
    google = types.ModuleType("google")
    google.colab = colab
    monkeypatch.setitem(sys.modules, "google", google)
    monkeypatch.setitem(sys.modules, "google.colab", colab)
    monkeypatch.setattr(subprocess, "run", lambda cmd, **kwargs: calls.append(cmd))
    monkeypatch.setattr(importlib.metadata, "version", lambda name: ipywidgets_version if name == "ipywidgets" else "0")
    exec(compile(source, "colab_setup", "exec"), {})
    return calls, enabled


def test_the_chapters_install_keeps_colabs_ipywidgets(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    source = _colab_cell(ROOT / "book" / "_shared" / "colab_setup.py", "https://github.com/o/r")
    calls, enabled = _run_on_fake_colab(monkeypatch, source, "7.7.1")
    assert calls and calls[0][-2:] == [f"attn_lib @ git+https://github.com/o/r@{REF}", "ipywidgets==7.7.1"]
    assert "--upgrade" not in calls[0] and not enabled  # ipywidgets 7: Colab's own widget manager


def test_the_assignments_install_pins_otter_and_keeps_colabs_ipywidgets(monkeypatch, tmp_path):
    """The assignments' cell: the library at the book's commit with Otter's student-side needs (exact pins for what
    Colab lacks, ranges its own versions satisfy), Colab's ipywidgets kept; then otter-grader and fica, pinned,
    without their dependencies (otter-grader 7 requires ipywidgets>=8.1.5, which would replace Colab's 7.7.1)."""
    monkeypatch.chdir(tmp_path)
    source = _colab_cell(ROOT / "assignments" / "_colab_setup.py", "https://github.com/o/r")
    calls, enabled = _run_on_fake_colab(monkeypatch, source, "7.7.1")
    assert len(calls) == 2 and not enabled
    first, second = (call[4:] for call in calls)
    assert calls[0][1:4] == calls[1][1:4] == ["-m", "pip", "install"]
    assert first[0] == "-q" and first[1] == f"attn_lib @ git+https://github.com/o/r@{REF}"
    assert first[-1] == "ipywidgets==7.7.1"
    for requirement in map(Requirement, first[2:-1]):  # each pinned, or bounded above
        assert requirement.specifier and any(s.operator in ("==", "<") for s in requirement.specifier), requirement
    assert second[:2] == ["-q", "--no-deps"] and {r.split("==")[0] for r in second[2:]} == {"otter-grader", "fica"}
    assert all(next(iter(Requirement(r).specifier)).operator == "==" for r in second[2:])
    otter = next(Requirement(r) for r in second[2:] if r.startswith("otter-grader=="))
    assign = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["assign"]
    built_with = next(Requirement(r) for r in assign if r.startswith("otter-grader"))
    version = next(iter(otter.specifier)).version
    assert built_with.specifier.contains(version)  # the Otter that builds the assignments checks them on Colab
    assert not any("--upgrade" in call or "-U" in call for call in calls)
    assert (tmp_path / "tests").is_dir()  # the public tests' folder, written from the notebook's metadata


def _report(**versions: str) -> dict:
    return {"install": [{"metadata": {"name": name, "version": v}} for name, v in versions.items()]}


def test_the_dry_run_check_names_each_pin_an_install_would_change():
    """What the unpinned `pip install otter-grader` of the former assignments' cell reported in the Colab venv."""
    old = _report(otter_grader="7.0.0", ipywidgets="8.1.9", widgetsnbextension="4.0.16", jupyterlab_widgets="3.0.16")
    assert colab_env.pin_changes(old, colab_env.COLAB_PINS) == {
        "ipywidgets": ("7.7.1", "8.1.9"),
        "widgetsnbextension": ("3.6.10", "4.0.16"),
    }
    kept = _report(attn_lib="0.1.0", ipywidgets="7.7.1", ipylab="1.1.0", **{"python-frontmatter": "1.3.0"})
    assert colab_env.pin_changes(kept, colab_env.COLAB_PINS) == {}
    assert colab_env.pin_changes(_report(Torch="2.12.0"), {"torch": "2.11.0"}) == {"torch": ("2.11.0", "2.12.0")}


def test_the_environment_runs_every_chapter_and_assignment_quickly_offline(tmp_path):
    assert [p.name for p in colab_env.CHAPTERS] == sorted(p.name for p in (ROOT / "book").glob("0*.ipynb"))
    assert len(colab_env.CHAPTERS) == 8 and len(colab_env.ASSIGNMENTS) == 5
    env = colab_env._env(tmp_path / "venv")
    assert env["ATTN_LIB_PROFILE"] == "quick" and env["ATTN_LIB_OFFLINE"] == "1" and "PYTHONPATH" not in env
    assert set(colab_env.INSTALL_CELLS.values()) == {
        ROOT / "book" / "_shared" / "colab_setup.py",
        ROOT / "assignments" / "_colab_setup.py",
    }


def test_the_custom_widget_manager_is_enabled_where_ipywidgets_8_is_present(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    for template in (ROOT / "book" / "_shared" / "colab_setup.py", ROOT / "assignments" / "_colab_setup.py"):
        _, enabled = _run_on_fake_colab(monkeypatch, _colab_cell(template, "https://github.com/o/r"), "8.1.9")
        assert enabled == [True], template
