"""Settings, threads and run-to-run reproducibility of attn_lib.metrics (issue 22 item 6, issue 23 item 2)."""

from __future__ import annotations

import dataclasses
import math
import os

import pytest
import torch

from attn_lib import metrics as M

pytestmark = pytest.mark.numerical  # run twice by `make test`: with the accelerator, and --without-numba


def _layer(H=3, L=40, d=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(H, L, L, generator=g, dtype=torch.float64) * 2).masked_fill(
        ~torch.ones(L, L, dtype=torch.bool).tril(), -math.inf
    )
    return x, torch.randn(H, L, d, generator=g, dtype=torch.float64)


def _all_metrics(x, v) -> list[torch.Tensor]:
    """Every metric family on a fresh layer (its Gram matrix and order recomputed), as a flat list of tensors."""
    ld = M.LayerData.from_logits(x, v)
    dm = M.distance_metrics(ld, N=4)
    sp = M.separability_metrics(ld, N=4)
    sc = M.topn_scan(ld, n_max=20)
    mc = M.expected_distance_mc_scan(ld, n_max=10, n_samples=4, seed=1)
    cv = M.expected_distance_mc_scan(ld, n_max=10, n_samples=4, seed=1, control_variate=True)
    one = M.expected_distance_mc(ld, N=3, n_samples=8, seed=2)
    return [
        dm.d_tilde, dm.d_max, dm.e1, dm.e1_gap, sp.fraction, sp.delta, sc.d_tilde, sc.e1, sc.e2,
        mc.mean, mc.stderr, cv.mean, cv.stderr, one.mean, one.stderr,
    ]  # fmt: skip


def test_results_are_bit_identical_run_to_run_and_for_any_thread_count():
    """CPU results do not depend on the run, on block_parallel's worker count, or on being called inside it."""
    x, v = _layer()
    ref = _all_metrics(x, v)
    again = _all_metrics(x, v)
    with M.block_parallel(1):
        one = _all_metrics(x, v)
    with M.block_parallel(2):
        two = _all_metrics(x, v)
    for other in (again, one, two):
        for a, b in zip(ref, other, strict=True):
            assert torch.equal(a, b)


def test_public_metrics_run_single_threaded_torch_and_restore_it():
    """A plain call runs its torch code on one thread (coarse_threads) and gives torch its thread count back."""
    before = torch.get_num_threads()
    seen = []

    @M._engine.coarse_threads
    def probe():
        seen.append(torch.get_num_threads())

    probe()
    assert seen == [1] and torch.get_num_threads() == before
    x, v = _layer(L=12)
    M.distance_metrics(M.LayerData.from_logits(x, v), N=2)
    assert torch.get_num_threads() == before


def test_settings_object_and_configure():
    """Settings live on one object; configure changes them for a block and restores them; the former module
    names are gone (settings are read from the object only); an unknown setting is a ValueError naming it."""
    s = M.settings
    old = s.block_elems
    with M.configure(block_elems=64, default_engine="torch") as got:
        assert got is s and s.block_elems == 64 and s.default_engine == "torch"
        assert not hasattr(M, "BLOCK_ELEMS") and not hasattr(M, "DEFAULT_ENGINE")
        x, v = _layer(L=12)
        assert M.distance_metrics(M.LayerData.from_logits(x, v), N=2).d_tilde.shape == (3, 12)
    assert s.block_elems == old
    with pytest.raises(ValueError, match="block_elem"), M.configure(block_elem=1):
        pass
    with pytest.raises(AttributeError):
        M.NO_SUCH_SETTING  # noqa: B018
    assert isinstance(M.settings, M._engine.Settings)


def test_numba_threading_layer_is_the_one_the_environment_names():
    """threading_info reports the layer in use: NUMBA_THREADING_LAYER's when set, else numba's own choice."""
    kernels = pytest.importorskip("attn_lib.accel.kernels", reason="numba not importable")
    x, v = _layer(L=12)
    M.distance_metrics(M.LayerData.from_logits(x, v), N=2, engine="numba")  # a parallel kernel has run
    info = kernels.threading_info()
    want = os.environ.get("NUMBA_THREADING_LAYER")
    if want and want not in ("default", "safe", "threadsafe", "forksafe"):
        assert info.startswith(want), info
    assert info.split(",")[0] in ("omp", "tbb", "workqueue"), info


@pytest.mark.parametrize(
    "change, match",
    [
        ({"default_engine": "fast"}, "default_engine"),
        ({"block_elems": 0}, "block_elems"),
        ({"scan_block_elems": 2.5}, "scan_block_elems"),
        ({"kernel_d1_max_n": -1}, "kernel_d1_max_n"),
        ({"order_prefetch_div": "4"}, "order_prefetch_div"),
    ],
)
def test_configure_refuses_a_bad_value_and_changes_nothing(change, match):
    before = dataclasses.asdict(M.settings)
    with pytest.raises(ValueError, match=match), M.configure(**change):
        pass
    assert dataclasses.asdict(M.settings) == before
