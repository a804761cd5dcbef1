"""The Colab-versions environment (tools/colab_env.py, `make test-colab`): what it pins, and that attn_lib's own
requirements admit Colab's versions, so that the chapters' install on Colab upgrades none of them. The environment
itself takes minutes (a fresh venv), so `make test` does not build it; .ci/run runs `make test-colab` after it."""

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


def _colab_cell(template: Path, url: str) -> str:
    return template.read_text().replace("{repository_url}", url)


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
    assert calls and calls[0][-2:] == ["attn_lib @ git+https://github.com/o/r", "ipywidgets==7.7.1"]
    assert "--upgrade" not in calls[0] and not enabled  # ipywidgets 7: Colab's own widget manager


def test_the_custom_widget_manager_is_enabled_where_ipywidgets_8_is_present(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    for template in (ROOT / "book" / "_shared" / "colab_setup.py", ROOT / "assignments" / "_colab_setup.py"):
        _, enabled = _run_on_fake_colab(monkeypatch, _colab_cell(template, "https://github.com/o/r"), "8.1.9")
        assert enabled == [True], template
