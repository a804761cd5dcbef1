"""benchmarks/bench_make_test.py: splitting a stamped `make test` log into its phases (the timing itself is run by
hand, never in the test suite)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("bench_make_test", ROOT / "benchmarks" / "bench_make_test.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)

#: the lines `make test` echoes in a fresh clone (abridged), stamped as the benchmark stamps them
LOG = [
    "1000.0 python3 -m venv .venv",
    "1004.0 .venv/bin/python -m pip install --quiet --upgrade pip",
    '1030.0 .venv/bin/python -m pip install --quiet -e ".[book,test,lint,assign]"',
    "1101.0 .venv/bin/ruff check .",
    "1102.0 All checks passed!",
    "1103.0 .venv/bin/python tools/warm_kernels.py",
    "1125.0 warm_kernels: 11 kernels in 2 processes, 21.3 s",
    '1125.0 .venv/bin/pytest tests -m "not browser" -n auto --maxprocesses 4 --dist loadfile',
    '1378.0 ATTN_LIB_EXECUTED_CACHE="/x/_build/.executed-by-nbval" .venv/bin/pytest --nbval-lax book -p no:cacheprovider',
    '1745.0 ATTN_LIB_EXECUTED_CACHE="/x" .venv/bin/jupyter-book build . --path-output . --builder html --all -W -n',
    "1754.0 .venv/bin/pytest tests -m browser",
    "1832.0 ================ 47 passed, 2929 deselected in 76.39s (0:01:16) ================",
    "1835.0 ci: make test passed in 835 s",
    "1900.0 colab-env: stage venv passed in 83 s",
]


def test_phases_of_a_make_test_log_end_where_make_test_ends():
    phases = bench.split_phases(LOG)
    assert phases == {
        "setup": 101.0,
        "lint": 2.0,
        "kernel warm-up": 22.0,
        "unit tests": 253.0,
        "nbval (chapters)": 367.0,
        "-W build": 9.0,
        "browser checks": 81.0,  # to .ci/run's "make test passed" line, not to the end of make test-colab
    }
    assert sum(phases.values()) == 835.0


def test_a_missing_phase_is_left_out_and_unstamped_lines_are_ignored():
    log = [line for line in LOG if "warm_kernels" not in line] + ["no stamp here"]
    phases = bench.split_phases(log)
    assert "kernel warm-up" not in phases and phases["lint"] == 24.0  # lint runs on to the unit tests
    with pytest.raises(ValueError, match="no stamped lines"):
        bench.split_phases(["python3 -m venv .venv"])


def test_cli_splits_a_saved_log_and_prints_ratios_to_a_saved_run(tmp_path, capsys):
    log = tmp_path / "run.log"
    log.write_text("\n".join(LOG) + "\n")
    before = tmp_path / "before.json"
    before.write_text(json.dumps({"phases": {"browser checks": 162.0}, "total": 1000.0}))
    assert bench.main(["--log", str(log), "--previous", str(before), "--save", str(tmp_path / "now.json")]) == 0
    out = capsys.readouterr().out
    assert "15-minute target: met (13.9 min)" in out
    assert next(ln for ln in out.splitlines() if ln.startswith("browser checks")).split()[-1] == "0.50"
    saved = json.loads((tmp_path / "now.json").read_text())
    assert saved["total"] == 835.0 and saved["phases"]["nbval (chapters)"] == 367.0


def test_cli_refuses_a_bad_previous_file_and_a_log_without_stamps(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("not json")
    with pytest.raises(SystemExit) as exc:
        bench.main(["--log", str(tmp_path / "missing.log"), "--previous", str(bad)])
    assert exc.value.code == 2 and "--previous must be a JSON file" in capsys.readouterr().err
    plain = tmp_path / "plain.log"
    plain.write_text("python3 -m venv .venv\n")
    assert bench.main(["--log", str(plain)]) == 2
    assert "no stamped lines" in capsys.readouterr().err


def test_cli_refuses_a_revision_that_is_no_commit_before_cloning(capsys):
    with pytest.raises(SystemExit) as exc:
        bench.main(["--rev", "no-such-commit-xyz"])
    assert exc.value.code == 2 and "--rev must name a commit" in capsys.readouterr().err


#: `make test` since the unit tests run alongside the chapters: their output, command line included, comes at the end
LOG_ALONGSIDE = [
    *LOG[:7],  # setup, lint, the kernels' warm-up
    "1125.0 make test: the unit tests run alongside the chapters; their output goes to _build/test-unit.log, shown at the end",
    '1126.0 ATTN_LIB_PROFILE="quick" ATTN_LIB_EXECUTED_CACHE="/x" .venv/bin/pytest --nbval-lax book -p no:cacheprovider',
    "1400.0 make test: the unit tests passed in 540 s",
    '1493.0 ATTN_LIB_EXECUTED_CACHE="/x" .venv/bin/jupyter-book build . --path-output . --builder html --all -W -n',
    "1502.0 .venv/bin/pytest tests -m browser",
    "1650.0 make test: the unit tests' output (_build/test-unit.log):",
    '1650.0 .venv/bin/pytest tests -m "not browser" -n auto --maxprocesses 4 --dist loadfile',
    "1650.0 make test: the unit tests passed in 540 s",
    "1651.0 ci: make test passed in 651 s",
]


def test_unit_tests_run_alongside_the_chapters_are_shown_apart_and_not_added_to_the_total(tmp_path, capsys):
    phases = bench.split_phases(LOG_ALONGSIDE)
    assert list(phases) == ["setup", "lint", "kernel warm-up", "nbval (chapters)", "-W build", "browser checks"]
    assert phases["kernel warm-up"] == 23.0 and sum(phases.values()) == 651.0
    assert bench.unit_seconds_alongside(LOG_ALONGSIDE) == 540.0 and bench.unit_seconds_alongside(LOG) is None
    (tmp_path / "run.log").write_text("\n".join(LOG_ALONGSIDE) + "\n")
    assert bench.main(["--log", str(tmp_path / "run.log"), "--save", str(tmp_path / "now.json")]) == 0
    row = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("unit tests (in parallel)"))
    assert row.split()[4] == "540.0"
    assert json.loads((tmp_path / "now.json").read_text())["unit_alongside"] == 540.0
