"""attn_lib._alloc: glibc's allocator settings (speed only; benchmarks/bench_allocator.py measures the effect)."""

import os
import platform
import subprocess
import sys

import pytest

from attn_lib import _alloc

GLIBC = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"


def _run(code: str, **env) -> str:
    e = {k: v for k, v in os.environ.items() if k != _alloc.ENV}
    e.update(env)
    out = subprocess.run([sys.executable, "-c", code], env=e, capture_output=True, text=True, check=True)
    return out.stdout.strip()


PROBE = "from attn_lib import _alloc; b = _alloc.allocator_state(); print(_alloc.tune_allocator(), _alloc.tune_allocator()); print(b); print(_alloc.allocator_state())"


@pytest.mark.skipif(not GLIBC, reason="the settings apply to glibc only")
def test_tunes_once_on_glibc():
    first, before, after = _run(PROBE).splitlines()
    assert first == "True True"
    assert before.startswith("glibc defaults until a model loads")
    assert after == _alloc.TUNED


@pytest.mark.parametrize("value", ["0", "off", "False"])
def test_switched_off_by_env(value):
    first, before, after = _run(PROBE, ATTN_LIB_TUNE_MALLOC=value).splitlines()
    assert first == "False False"
    assert before == after == f"glibc defaults ({_alloc.ENV}=0)"


@pytest.mark.skipif(not GLIBC, reason="the settings apply to glibc only")
def test_load_model_tunes(tmp_path):
    # load_model applies it even when loading then fails on a bad name (it runs first)
    code = (
        "from attn_lib import _alloc, models\n"
        "try:\n    models.load_model('not a model name!')\nexcept ValueError:\n    pass\n"
        "print(_alloc.allocator_state())"
    )
    assert _run(code) == _alloc.TUNED


def test_info_reports_allocator():
    out = _run(
        "import sys; from attn_lib.cli import main; sys.argv=['attn-lib','info']; main()", ATTN_LIB_TUNE_MALLOC="0"
    )
    assert "memory allocator: glibc defaults (ATTN_LIB_TUNE_MALLOC=0)" in out
