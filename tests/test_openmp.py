"""attn_lib._openmp: the spin count of GNU OpenMP's idle threads, set when attn_lib is imported before torch.

How a thread waits changes speed only, never a result; ``benchmarks/bench_contention.py`` measures the effect. These
tests check, in fresh interpreters, what is set and when, and (through libgomp's own ``OMP_DISPLAY_ENV`` report) that
the runtime torch and numba share reads it.
"""

import io
import os
import subprocess
import sys

import pytest

from attn_lib import _openmp

LINUX = sys.platform.startswith("linux")
OURS = (_openmp.ENV, *_openmp.USER_VARIABLES, "OMP_DISPLAY_ENV")


def _run(code: str, **env) -> subprocess.CompletedProcess:
    e = {k: v for k, v in os.environ.items() if k not in OURS}
    e.update(env)
    return subprocess.run([sys.executable, "-c", code], env=e, capture_output=True, text=True, check=True)


PROBE = "import os, attn_lib; print(os.environ.get('GOMP_SPINCOUNT')); print(attn_lib._openmp.openmp_state())"


@pytest.mark.skipif(not LINUX, reason="the setting applies on Linux only")
def test_import_sets_the_spin_count_and_libgomp_reads_it():
    spin, state = _run(PROBE).stdout.splitlines()
    assert spin == str(_openmp.SPIN_COUNT)
    assert state == _openmp.TUNED
    # libgomp prints the spin count it runs with when OMP_DISPLAY_ENV is set: the one attn_lib chose
    out = _run("import attn_lib, torch; torch.ones(4).sum()", OMP_DISPLAY_ENV="verbose")
    assert f"GOMP_SPINCOUNT = '{_openmp.SPIN_COUNT}'" in out.stderr


@pytest.mark.parametrize("value", ["0", "off", "False"])
def test_switched_off_by_env(value):
    spin, state = _run(PROBE, ATTN_LIB_TUNE_OMP=value).stdout.splitlines()
    assert spin == "None"
    assert state == f"libgomp defaults ({_openmp.ENV}=0)"


@pytest.mark.parametrize("var, value", [("GOMP_SPINCOUNT", "7"), ("OMP_WAIT_POLICY", "PASSIVE")])
def test_the_environment_wins(var, value):
    out = _run(PROBE + f"; print(os.environ['{var}'])", **{var: value}).stdout.splitlines()
    assert out[0] == ("7" if var == "GOMP_SPINCOUNT" else "None")
    assert out[1] == f"as the environment sets it ({var}={value})"
    assert out[2] == value


@pytest.mark.skipif(not LINUX, reason="the setting applies on Linux only")
def test_too_late_after_torch_says_so_and_sets_nothing():
    spin, state = _run("import os, torch, attn_lib; " + PROBE.split("; ", 1)[1]).stdout.splitlines()
    assert spin == "None"
    assert state.startswith("libgomp defaults (OpenMP was loaded before attn_lib was imported: ")
    assert "libgomp.so.1" in state


def test_an_empty_variable_decides_nothing():
    spin, state = _run(PROBE, GOMP_SPINCOUNT="", OMP_WAIT_POLICY=" ").stdout.splitlines()
    if LINUX:
        assert (spin, state) == (str(_openmp.SPIN_COUNT), _openmp.TUNED)
    else:
        assert state == "platform defaults (not Linux)"


@pytest.mark.parametrize(
    "mapped, found",
    [
        ("/usr/lib/x86_64-linux-gnu/libgomp.so.1.0.0", "/usr/lib/x86_64-linux-gnu/libgomp.so.1.0.0"),
        ("/site-packages/torch/lib/libgomp.so.1", "/site-packages/torch/lib/libgomp.so.1"),
        ("/site-packages/scikit_learn.libs/libgomp-a34b3233.so.1.0.0", None),  # another soname: torch loads its own
        ("/usr/lib/libm.so.6", None),
    ],
)
def test_only_a_libgomp_the_loader_would_reuse_counts_as_loaded(monkeypatch, mapped, found):
    maps = f"7f00-7f01 r-xp 00000000 08:01 42 {mapped}\n7f02-7f03 rw-p 00000000 00:00 0 [heap]\n7f04-7f05 rw-p 0 0 0\n"
    monkeypatch.setattr(_openmp, "open", lambda *a, **k: io.StringIO(maps), raising=False)
    assert _openmp._libgomp_loaded() == found


def test_info_reports_it():
    out = _run("import sys; from attn_lib.cli import main; sys.argv=['attn-lib','info']; main()", ATTN_LIB_TUNE_OMP="0")
    assert f"OpenMP threads waiting: libgomp defaults ({_openmp.ENV}=0)" in out.stdout
