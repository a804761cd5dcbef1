"""Call-to-call bit identity of the compiled kernels whatever the allocator's state.

The kernels with a float reduction in a loop that also stores into a per-job work array (Algorithm 5's ``sens_rows``,
the Monte-Carlo distance scans) once took their work arrays from separate ``np.empty`` calls: LLVM's vectorised loop
runs only when such arrays lie more than 256 bytes apart (a runtime check), else the scalar loop, which sums in
another order. Where glibc placed the arrays, and so the last bits of ``g`` (up to 4.6e-16 relative), followed the
heap's history: call to call in one process, and run to run. ``kernels._scratch`` now takes them from one allocation
at fixed distances. The test frees a different pattern of small blocks into glibc's bins before each call (39 of 40
such calls changed ``g`` before the fix).
"""

from __future__ import annotations

import ctypes
import math
import sys

import numpy as np
import pytest
import torch

from attn_lib import metrics as M

pytest.importorskip("attn_lib.accel.kernels")  # the accelerator (numba)
pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="frees blocks with the C library's malloc/free")

_LIBC = ctypes.CDLL(None)
_LIBC.malloc.restype = ctypes.c_void_p
_LIBC.malloc.argtypes = [ctypes.c_size_t]
_LIBC.free.argtypes = [ctypes.c_void_p]


def _calls_on_shuffled_heaps(fn, n: int = 12) -> list[torch.Tensor]:
    """``fn()`` ``n`` times, each with a different pattern of freed small blocks (16-400 bytes) in the allocator's
    bins, where the kernels' per-job work arrays come from (one numba thread: the calling thread's arena)."""
    outs = []
    for k in range(n):
        blocks = [_LIBC.malloc(int(s)) for s in np.random.default_rng(k).integers(16, 400, size=40)]
        for b in blocks[::2]:
            _LIBC.free(b)
        try:
            with M.block_parallel(1):
                outs.append(fn())
        finally:
            for b in blocks[1::2]:
                _LIBC.free(b)
    return outs


def _layer(H=2, L=40, d=8):
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(H, L, L, generator=g, dtype=torch.float64) * 2).masked_fill(
        ~torch.ones(L, L, dtype=torch.bool).tril(), -math.inf
    )
    return x, torch.randn(H, L, d, generator=g, dtype=torch.float64)


def _assert_all_equal(outs):
    for o in outs[1:]:
        diff = o != outs[0]
        assert not diff.any(), f"{int(diff.sum())} of {o.numel()} values differ between calls"


def test_sensitivity_rows_is_bit_identical_call_to_call_whatever_the_heap():
    x, _ = _layer()
    temps, eps = (0.01, 0.1, 1.0, 10.0), (1e-3, 1e-1, 10.0)
    _assert_all_equal(_calls_on_shuffled_heaps(lambda: M.sensitivity_rows(x, temps, eps, seed=3, engine="numba")[0]))


@pytest.mark.parametrize("control_variate", [False, True])
def test_monte_carlo_scan_is_bit_identical_call_to_call_whatever_the_heap(control_variate):
    x, v = _layer()
    ld = M.LayerData.from_logits(x, v)

    def scan():
        r = M.expected_distance_mc_scan(
            ld, n_max=12, n_samples=4, seed=1, control_variate=control_variate, engine="numba"
        )
        return torch.stack([r.mean, r.stderr])

    _assert_all_equal(_calls_on_shuffled_heaps(scan))
