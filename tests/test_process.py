"""attn_lib.process: process settings only on request; importing attn_lib and loading a model change nothing.

How a thread waits and where memory comes from change speed only, never a result (``benchmarks/bench_contention.py``,
``benchmarks/bench_allocator.py`` measure the effects). Each test runs a fresh interpreter.
"""

import io
import os
import platform
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from attn_lib import process

LINUX = sys.platform.startswith("linux")
GLIBC = LINUX and platform.libc_ver()[0] == "glibc"
OURS = ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY", "OMP_DISPLAY_ENV", "GLIBC_TUNABLES")

#: Whether a fresh 64 MiB malloc lands on the heap (tuned: M_MMAP_MAX = 0) or in a mapping of its own (glibc's default).
HEAP_PROBE = textwrap.dedent(
    """
    import ctypes
    def on_heap():
        libc = ctypes.CDLL(None)
        libc.malloc.restype = ctypes.c_void_p
        p = libc.malloc(64 << 20)
        heap = [l.split()[0] for l in open("/proc/self/maps") if l.rstrip().endswith("[heap]")]
        lo, hi = (int(x, 16) for x in heap[0].split("-")) if heap else (0, 0)
        return lo <= p < hi
    """
)


def _run(code: str, **env) -> subprocess.CompletedProcess:
    e = {k: v for k, v in os.environ.items() if k not in OURS}
    e.update(env)
    return subprocess.run([sys.executable, "-c", code], env=e, capture_output=True, text=True, check=True)


def test_import_and_load_model_leave_the_environment_and_the_allocator_alone(tmp_path, tiny_gpt2):
    tiny_gpt2.model.save_pretrained(tmp_path)
    tiny_gpt2.tokenizer.save_pretrained(tmp_path)
    code = HEAP_PROBE + textwrap.dedent(
        f"""
        import os
        before = dict(os.environ)
        import attn_lib
        from attn_lib import capture, models
        attn_lib.load_model({str(tmp_path)!r}, device="cpu")
        assert dict(os.environ) == before, set(os.environ.items()) ^ set(before.items())
        print(on_heap() if {GLIBC} else False)
        """
    )
    assert _run(code).stdout.split() == ["False"]  # a 64 MiB block still gets its own mapping: mallopt was not called


@pytest.mark.skipif(not GLIBC, reason="the allocator setting applies to glibc only")
def test_tune_moves_large_blocks_to_the_heap():
    out = _run(HEAP_PROBE + "from attn_lib import process; print(on_heap()); print(process.tune()); print(on_heap())")
    before, done, after = out.stdout.splitlines()
    assert (before, after) == ("False", "True")
    assert "large blocks from the heap" in done


@pytest.mark.skipif(not LINUX, reason="the setting applies on Linux only")
def test_tune_before_torch_sets_the_spin_count_that_libgomp_reads():
    out = _run(
        "import os, attn_lib.process as p; print(p.tune(allocator=False)); import torch; torch.ones(4).sum()",
        OMP_DISPLAY_ENV="verbose",
    )
    assert "GOMP_SPINCOUNT=3000, set by" in out.stdout
    assert f"GOMP_SPINCOUNT = '{process.SPIN_COUNT}'" in out.stderr  # libgomp's own report


@pytest.mark.skipif(not LINUX, reason="the setting applies on Linux only")
def test_tune_after_torch_says_too_late_and_sets_nothing():
    out = _run(
        "import os, torch, attn_lib.process as p; print(p.tune()['openmp']); print(os.environ.get('GOMP_SPINCOUNT'))"
    )
    state, spin = out.stdout.splitlines()
    assert state.startswith("libgomp defaults (asked too late") and "libgomp.so.1" in state
    assert spin == "None"


@pytest.mark.parametrize("var, value", [("GOMP_SPINCOUNT", "7"), ("OMP_WAIT_POLICY", "PASSIVE")])
def test_the_environment_wins(var, value):
    out = _run(
        f"import os, attn_lib.process as p; print(p.tune()['openmp']); print(os.environ['{var}'])", **{var: value}
    )
    assert out.stdout.splitlines() == [f"left as the environment sets it ({var}={value})", value]


def test_state_reports_the_environment_and_refuses_a_spin_count_that_is_no_count():
    out = _run(
        "import attn_lib.process as p; print(p.state())", GOMP_SPINCOUNT="5k", GLIBC_TUNABLES="glibc.malloc.mmap_max=0"
    )
    assert "GOMP_SPINCOUNT=5k (from the environment)" in out.stdout
    assert "GLIBC_TUNABLES=glibc.malloc.mmap_max=0 (from the environment)" in out.stdout
    for call in ("state()", "tune()"):  # a value libgomp ignores was reported as in effect
        code = f"import attn_lib.process as p\ntry:\n    p.{call}\nexcept ValueError as e:\n    print(e)"
        assert "GOMP_SPINCOUNT must be a count" in _run(code, GOMP_SPINCOUNT="abc").stdout


@pytest.mark.parametrize("kw", [{"openmp": 1}, {"allocator": "yes"}])
def test_tune_rejects_non_booleans(kw):
    with pytest.raises(ValueError, match=next(iter(kw))):
        process.tune(**kw)


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
    monkeypatch.setattr(process, "open", lambda *a, **k: io.StringIO(maps), raising=False)
    assert process._libgomp_loaded() == found


def test_info_reports_both_and_the_cli_flag_tunes():
    main = "import sys; from attn_lib.cli import main; sys.argv=['attn-lib', *sys.argv[1:]]; main()"
    env = {k: v for k, v in os.environ.items() if k not in OURS}
    plain = subprocess.run([sys.executable, "-c", main, "info"], capture_output=True, text=True, check=True, env=env)
    assert "OpenMP threads waiting: libgomp defaults (not tuned" in plain.stdout
    assert "memory allocator: glibc defaults (not tuned" in plain.stdout or not GLIBC
    tuned = subprocess.run(
        [sys.executable, "-c", main, "--tune-process", "info"], capture_output=True, text=True, check=True, env=env
    ).stdout
    if GLIBC:
        assert "OpenMP threads waiting: GOMP_SPINCOUNT=3000, set by" in tuned
        assert "memory allocator: large blocks from the heap" in tuned


@pytest.mark.skipif(not GLIBC, reason="glibc's tunables")
def test_the_environment_form_tunes_a_new_process_as_the_makefile_sets_it():
    out = _run(HEAP_PROBE + "import attn_lib.process as p; print(on_heap()); print(p.state())", **process.ENVIRONMENT)
    on_heap, state = out.stdout.splitlines()
    assert on_heap == "True"
    assert "GOMP_SPINCOUNT=3000 (from the environment)" in state
    makefile = (Path(__file__).parents[1] / "Makefile").read_text()
    for var, value in process.ENVIRONMENT.items():
        assert f"\n{var} ?= {value}\n" in makefile
