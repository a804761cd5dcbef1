"""The background build of tests/test_bare_install.py: started once per test run, and a failed or vanished build
fails the waiting tests with its error and log instead of passing or hanging (the install itself is tested there)."""

from __future__ import annotations

import json
import subprocess
import sys
import types

import pytest
import test_bare_install as B  # a module import: this file must not define start_background itself


@pytest.fixture
def runs(tmp_path, monkeypatch):
    monkeypatch.setattr(B, "RUNS", tmp_path / "runs")
    monkeypatch.setattr(B, "_BUILDS", {})
    return tmp_path / "runs"


def _config(uid="run1"):
    return types.SimpleNamespace(workerinput={"testrunuid": uid})


def test_the_run_id_is_the_workers_shared_one_or_one_per_session():
    assert B.run_id(_config("abc")) == "abc"
    plain = types.SimpleNamespace()
    assert B.run_id(plain) == B.run_id(plain) != B.run_id(types.SimpleNamespace())


def test_the_build_starts_once_per_run(runs, monkeypatch):
    started = []

    class FakePopen:
        def __init__(self, cmd, **kw):
            started.append(cmd)
            assert "PYTHONPATH" not in kw["env"] and kw["cwd"] == B.ROOT
            self.pid = 12345

    monkeypatch.setattr(B.subprocess, "Popen", FakePopen)
    monkeypatch.setenv("PYTHONPATH", "/somewhere")
    first = B.start_background(_config())
    assert B.start_background(_config()) == first == runs / "run1.json"  # the second caller finds it claimed
    assert len(started) == 1 and started[0][-2:] == ["build", str(first)]
    assert (runs / "run1.started").read_text() == "12345"
    B.start_background(_config("run2"))
    assert len(started) == 2


def _claimed(runs, uid, pid):
    runs.mkdir(parents=True, exist_ok=True)
    (runs / f"{uid}.started").write_text(str(pid))
    (runs / f"{uid}.log").write_text("pip said: no matching distribution\n")


def test_a_failed_build_fails_the_waiting_test_with_its_error_and_log(runs):
    _claimed(runs, "run1", 1)
    (runs / "run1.json").write_text(json.dumps({"ok": False, "error": "AssertionError: pip install torch failed"}))
    with pytest.raises(AssertionError, match=r"(?s)pip install torch failed.*no matching distribution"):
        B.wait_for_build(_config(), timeout=5)


def test_a_build_that_died_without_a_status_fails_at_once(runs):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    _claimed(runs, "run1", int(dead.stdout))
    with pytest.raises(pytest.fail.Exception, match=r"(?s)ended without a status.*no matching distribution"):
        B.wait_for_build(_config(), timeout=60)


def test_a_build_past_the_timeout_fails(runs):
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        _claimed(runs, "run1", live.pid)
        with pytest.raises(pytest.fail.Exception, match="took over 1 s"):
            B.wait_for_build(_config(), timeout=1)
    finally:
        live.kill()
        live.wait()


def test_a_finished_build_gives_the_venvs_python(runs, tmp_path):
    _claimed(runs, "run1", 1)
    (runs / "run1.json").write_text(json.dumps({"ok": True, "python": str(tmp_path / "venv/bin/python")}))
    assert B.wait_for_build(_config(), timeout=5) == tmp_path / "venv/bin/python"
