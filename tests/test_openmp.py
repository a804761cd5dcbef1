"""attn_lib._openmp: the spin count of GNU OpenMP's idle threads, set when attn_lib is imported before torch.

How a thread waits changes speed only, never a result; ``benchmarks/bench_contention.py`` measures the effect. These
tests check, in fresh interpreters, what is set and when, and (through libgomp's own ``OMP_DISPLAY_ENV`` report) that
the runtime torch and numba share reads it.
"""

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
    assert state.startswith(f"GOMP_SPINCOUNT={_openmp.SPIN_COUNT}, set by attn_lib")
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
    out = _run("import os, torch, attn_lib; " + PROBE.split("; ", 1)[1]).stdout.splitlines()
    assert out == ["None", "libgomp defaults (OpenMP was loaded, by torch, before attn_lib was imported)"]


def test_info_reports_it():
    out = _run("import sys; from attn_lib.cli import main; sys.argv=['attn-lib','info']; main()", ATTN_LIB_TUNE_OMP="0")
    assert f"OpenMP threads waiting: libgomp defaults ({_openmp.ENV}=0)" in out.stdout
