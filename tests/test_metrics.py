"""attn_lib.metrics against brute-force per-row loops (attn_lib.theory one row at a time) on small random inputs."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from conftest import naive_scan

from attn_lib import jacobian as J
from attn_lib import metrics as M
from attn_lib import theory as th
from attn_lib.book.toy.separability import ball_test_layer, ball_test_table, exact_ball_flags
from attn_lib.experiments.weights import row_metrics

pytestmark = pytest.mark.numerical  # run twice by `make test`: with the accelerator, and --without-numba

TOL = 1e-6


def _layer(H=3, L=14, d=5, scale=2.0, seed=0, mask=None):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(H, L, L, generator=g, dtype=torch.float64) * scale
    V = torch.randn(H, L, d, generator=g, dtype=torch.float64)
    if mask is None:
        mask = torch.ones(L, L, dtype=torch.bool).tril()
    return M.LayerData.from_logits(logits.masked_fill(~mask, -math.inf), V), logits, V, mask


def _rows(ld):
    """(h, r, visible indices) for every head and row."""
    m = torch.broadcast_to(ld.mask, (ld.H, ld.L, ld.L))
    for h in range(ld.H):
        for r in range(ld.L):
            yield h, r, m[h, r].nonzero().view(-1).numpy()


@pytest.mark.parametrize("N", [1, 2, 3, 6])
@pytest.mark.parametrize("p", ["L-1", "L"])
def test_distance_metrics_match_theory_rows(N, p):
    ld, *_ = _layer(seed=N)
    dm = M.distance_metrics(ld, N=N, p=p)
    a, X = ld.alpha.numpy(), ld.values.numpy()
    n_checked = 0
    for h, r, vis in _rows(ld):
        if len(vis) < N + 1:
            assert not bool(dm.valid[h, r])
            assert float(dm.d_tilde[h, r]) == 0.0 and float(dm.e1[h, r]) == 0.0
            continue
        assert bool(dm.valid[h, r])
        al, x = a[h, r, vis], X[h, vis]
        ref = {
            "d_tilde": th.distance(al, x, N),
            "d_max": th.theorem1_dmax(al, x, N),
            "e1": th.expectation_e1(al, x, N, p=p),
            "e1_gap": th.jensen_gap_bound(al, x, N, p=p),
            "e1_gap_crude": th.jensen_gap_bound(al, x, N, p=p, crude=True),
            "e2": th.expectation_e2(al, x, N),
        }
        for k, v in ref.items():
            assert abs(float(getattr(dm, k)[h, r]) - float(v)) <= TOL * max(1.0, abs(float(v))), (k, h, r)
        assert float(dm.d_tilde[h, r]) <= float(dm.d_max[h, r]) + 1e-12
        n_checked += 1
    assert n_checked > 0
    for k in ("d_tilde", "d_max", "e1", "e1_gap", "e2", "s_norm", "alpha_bar", "d1"):
        assert torch.isfinite(getattr(dm, k)).all()


def test_distance_vector_form_matches_theory():
    ld, *_ = _layer(seed=3)
    dm = M.distance_metrics(ld, N=2, form="vector", with_dmax=False)
    a, X = ld.alpha.numpy(), ld.values.numpy()
    for h, r, vis in _rows(ld):
        if len(vis) >= 3:
            ref = th.distance(a[h, r, vis], X[h, vis], 2, form="vector")
            assert abs(float(dm.d_tilde[h, r]) - ref) <= TOL


def test_general_and_per_head_masks():
    """Non-causal (random, per-head) masks go through the exact fallback paths."""
    g = torch.Generator().manual_seed(7)
    H, L = 2, 11
    mask = torch.rand(H, L, L, generator=g) < 0.7
    mask[:, :, 0] = True
    logits = torch.randn(H, L, L, generator=g, dtype=torch.float64)
    V = torch.randn(H, L, 4, generator=g, dtype=torch.float64)
    ld = M.LayerData.from_logits(logits.masked_fill(~mask, -math.inf), V)
    assert not ld.prefix
    for N in (1, 3):
        dm = M.distance_metrics(ld, N=N)
        for h, r, vis in _rows(ld):
            if len(vis) >= N + 1:
                al, x = ld.alpha[h, r, vis].numpy(), V[h, vis].numpy()
                assert abs(float(dm.d_tilde[h, r]) - th.distance(al, x, N)) <= TOL
                assert abs(float(dm.d_max[h, r]) - th.theorem1_dmax(al, x, N)) <= TOL
                assert abs(float(dm.e1[h, r]) - th.expectation_e1(al, x, N)) <= TOL
        sc = M.topn_scan(ld, n_max=4)
        nv = naive_scan(ld, n_max=4)
        for k in ("d_tilde", "e1", "e2"):
            assert torch.allclose(getattr(sc, k), getattr(nv, k), atol=1e-9)


def test_dmax_fallback_when_farthest_token_is_selected():
    """Two heavy, far-apart tokens: the farthest token from a selected one is selected too (fallback path)."""
    L, d = 9, 3
    V = torch.randn(1, L, d, dtype=torch.float64, generator=torch.Generator().manual_seed(1)) * 0.1
    V[0, 0] = torch.tensor([10.0, 0, 0])
    V[0, 1] = torch.tensor([-10.0, 0, 0])
    logits = torch.zeros(1, L, L, dtype=torch.float64)
    logits[0, :, :2] = 5.0
    mask = torch.ones(L, L, dtype=torch.bool).tril()
    ld = M.LayerData.from_logits(logits.masked_fill(~mask, -math.inf), V)
    dm = M.distance_metrics(ld, N=2)
    for r in range(2, L):
        al, x = ld.alpha[0, r, : r + 1].numpy(), V[0, : r + 1].numpy()
        assert abs(float(dm.d_max[0, r]) - th.theorem1_dmax(al, x, 2)) <= TOL


def test_top_n_order_ties_go_to_lower_index():
    a = torch.tensor([[[0.2, 0.3, 0.2, 0.3, 0.0, 0.0]]], dtype=torch.float64)
    mask = torch.tensor([[[True, True, True, True, True, False]]])
    idx = M.top_n_order(a, 5, mask)
    assert idx[0, 0].tolist() == [1, 3, 0, 2, 4]
    # random ties against theory.top_n_indices (numpy stable argsort)
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, 4, (50, 12), generator=g).to(torch.float64) / 4
    for n in (1, 3, 7, 12):
        ours = M.top_n_order(x, n).numpy()
        ref = th.top_n_indices(x.numpy(), n)
        assert (ours == ref).all()


#: tolerance of each scan engine against the float64 naive scan: torch is float64 throughout; the numba kernel
#: takes its square roots in float32 (relative error < 1.2e-7 by construction, see attn_lib.accel.kernels)
SCAN_RTOL = {"torch": 1e-9, "numba": 1e-6}


@pytest.mark.parametrize("engine", ["torch", "numba"])
@pytest.mark.parametrize("n_min,n_max", [(1, 8), (3, 9), (5, 5)])
def test_incremental_scan_matches_naive(n_min, n_max, engine):
    ld, *_ = _layer(H=2, L=16, seed=11)
    sc = M.topn_scan(ld, n_max=n_max, n_min=n_min, engine=engine)
    nv = naive_scan(ld, n_max=n_max, n_min=n_min)
    assert (sc.valid == nv.valid).all()
    for k in ("d_tilde", "e1", "e2"):
        assert torch.allclose(getattr(sc, k), getattr(nv, k), rtol=SCAN_RTOL[engine], atol=1e-10), k


@pytest.mark.accel
@pytest.mark.parametrize("p", ["L-1", "L", 0.3])
def test_numba_scan_matches_naive_on_larger_layer(p):
    """The fused kernel (float32 roots) against the float64 per-N reference, to 1e-6 relative, on a wider layer
    with heavy-tailed weights, every p mode, a row subset, and 1 or 2 threads (same numbers)."""
    ld, *_ = _layer(H=3, L=70, d=8, seed=21)
    nv = naive_scan(ld, n_max=20, n_min=2, p=p)
    rows = torch.tensor([5, 17, 40, 69])
    outs = []
    for threads in (1, 2):
        with M.block_parallel(threads):
            sc = M.topn_scan(ld, n_max=20, n_min=2, p=p, engine="numba")
            sub = M.topn_scan(ld, n_max=20, n_min=2, p=p, engine="numba", rows=rows)
        outs.append(sc)
        for k in ("d_tilde", "e1", "e2"):
            a, b = getattr(sc, k), getattr(nv, k)
            assert torch.allclose(a, b, rtol=1e-6, atol=1e-12), k
            assert torch.equal(getattr(sub, k)[:, rows], a[:, rows])
        assert not sub.valid[:, [0, 6, 41]].any()
    for k in ("d_tilde", "e1", "e2"):  # deterministic whatever the thread count
        assert torch.equal(getattr(outs[0], k), getattr(outs[1], k))


def test_scan_engine_choice():
    ld, *_ = _layer(H=1, L=8, seed=2)
    with pytest.raises(ValueError, match="engine"):
        M.topn_scan(ld, n_max=3, engine="fortran")
    general = M.LayerData(ld.alpha, ld.values, mask=torch.ones(8, 8, dtype=torch.bool).triu())  # not a prefix
    with pytest.raises(ValueError, match="engine='numba'"):
        M.topn_scan(general, n_max=3, engine="numba")
    a = M.topn_scan(general, n_max=3)  # auto falls back to torch
    b = naive_scan(general, n_max=3)
    assert torch.allclose(a.d_tilde, b.d_tilde, rtol=1e-9, atol=1e-12)


def test_scan_small_blocks_and_rows(monkeypatch):
    """Row blocking (tiny blocks) and a row subset give the same numbers."""
    ld, *_ = _layer(H=2, L=20, seed=5)
    ref = M.topn_scan(ld, n_max=6, engine="torch")
    monkeypatch.setattr(M.settings, "block_elems", 64)
    monkeypatch.setattr(M.settings, "scan_block_elems", 64)
    sc = M.topn_scan(ld, n_max=6, rows=torch.tensor([3, 7, 19]), engine="torch")
    for k in ("d_tilde", "e1", "e2"):
        assert torch.allclose(getattr(sc, k)[:, [3, 7, 19]], getattr(ref, k)[:, [3, 7, 19]], atol=1e-12)
    assert not sc.valid[:, [0, 1, 2, 4]].any()
    dm = M.distance_metrics(ld, N=3)
    ref_dm = M.distance_metrics(_layer(H=2, L=20, seed=5)[0], N=3)
    assert torch.allclose(dm.d_max, ref_dm.d_max, atol=1e-12)


def test_blocks_cover_rows_within_budget():
    ld, *_ = _layer(H=2, L=40, seed=1)
    for elems in (1, 50, 400, 10**6):
        seen = []
        for rb, W in ld.blocks(per_row=1, elems=elems):
            seen += rb.tolist()
            assert W == int(rb.max()) + 1  # causal: the widest row is the last one
            assert rb.numel() == 1 or 2 * rb.numel() * W <= max(elems, 2 * W)
        assert seen == list(range(40))


@pytest.mark.parametrize("workers", [1, 3])
def test_small_blocks_and_parallel_blocks_match_theory(monkeypatch, workers):
    """Many tiny blocks (early blocks narrower than N: clamped top-N indices of invalid rows), run serially and on
    worker threads (block_parallel), give the per-row references."""
    ld, *_ = _layer(H=2, L=24, d=4, seed=13)
    N = 9
    ref_sc = naive_scan(ld, n_max=N + 2)
    monkeypatch.setattr(M.settings, "block_elems", 40)
    monkeypatch.setattr(M.settings, "scan_block_elems", 40)
    with M.block_parallel(workers):
        assert torch.get_num_threads() == 1
        dm = M.distance_metrics(ld, N=N)
        sc = M.topn_scan(ld, n_max=N + 2, engine="torch")
        sp = M.separability_metrics(ld, N=N)
    a, X = ld.alpha.numpy(), ld.values.numpy()
    U = X / np.linalg.norm(X, axis=-1, keepdims=True)
    for h, r, vis in _rows(ld):
        if len(vis) < N + 1:
            continue
        al, x = a[h, r, vis], X[h, vis]
        assert abs(float(dm.d_tilde[h, r]) - th.distance(al, x, N)) <= TOL
        assert abs(float(dm.d_max[h, r]) - th.theorem1_dmax(al, x, N)) <= TOL
        assert abs(float(dm.e1[h, r]) - th.expectation_e1(al, x, N)) <= TOL
        assert abs(float(dm.e1_gap[h, r]) - th.jensen_gap_bound(al, x, N)) <= TOL
        assert abs(float(sp.fraction[h, r]) - float(th.separability(al, U[h, vis], N))) <= TOL
    for k in ("d_tilde", "e1", "e2"):
        assert torch.allclose(getattr(sc, k), getattr(ref_sc, k), rtol=1e-9, atol=1e-10), k


def test_dmax_with_large_n_matches_theory():
    """N close to t: many farthest tokens are selected (the exact per-(row, token) recomputation)."""
    ld, *_ = _layer(H=2, L=30, d=3, seed=8, scale=4.0)
    a, X = ld.alpha.numpy(), ld.values.numpy()
    for N in (12, 25, 28):
        dm = M.distance_metrics(ld, N=N)
        for h, r, vis in _rows(ld):
            if len(vis) >= N + 1:
                al, x = a[h, r, vis], X[h, vis]
                assert abs(float(dm.d_max[h, r]) - th.theorem1_dmax(al, x, N)) <= TOL
                sel = th.top_n_mask(al, N)
                d1 = np.linalg.norm(x[~sel][:, None] - x[sel][None], axis=-1).max()
                assert abs(float(dm.d1[h, r]) - d1) <= TOL


@pytest.mark.parametrize("engine", ["torch", "numba"])
@pytest.mark.parametrize("N,L", [(3, 10), (7, 14)])  # N=7 > d=5: the numba kernel forms s first
def test_monte_carlo_matches_brute_force_with_same_subsets(engine, N, L):
    ld, *_ = _layer(H=2, L=L, seed=2)
    K, seed = 16, 4
    rows = torch.tensor([2, N, L - 4, L - 1])  # the first rows are too short for N: invalid, 0
    mc = M.expected_distance_mc(ld, N=N, rows=rows, n_samples=K, seed=seed, engine=engine)
    assert mc.valid.tolist() == [[False, True, True, True]] * 2
    assert (mc.mean[:, 0] == 0).all() and (mc.stderr[:, 0] == 0).all()
    gen = torch.Generator().manual_seed(seed)
    keys = torch.rand(len(rows), K, ld.L, generator=gen, dtype=torch.float64)
    A, X = ld.alpha.numpy(), ld.values.numpy()
    for i, r in enumerate(rows.tolist()):
        t = r + 1
        if t < N + 1:
            continue
        for h in range(ld.H):
            vals = []
            for k in range(K):
                sub = np.argsort(keys[i, k, :t].numpy(), kind="stable")[:N]
                sel = np.zeros(t, bool)
                sel[sub] = True
                vals.append(th.distance(A[h, r, :t], X[h, :t], selected=sel))
            assert abs(float(mc.mean[h, i]) - np.mean(vals)) <= TOL
            assert abs(float(mc.stderr[h, i]) - np.std(vals, ddof=1) / math.sqrt(K)) <= TOL


def test_monte_carlo_is_unbiased_against_exact_enumeration():
    ld, *_ = _layer(H=1, L=7, seed=9)
    mc = M.expected_distance_mc(ld, N=2, rows=torch.tensor([6]), n_samples=4000, seed=1)
    exact = th.expected_distance_exact(ld.alpha[0, 6].numpy(), ld.values[0].numpy(), 2)
    assert abs(float(mc.mean[0, 0]) - exact) <= 4 * float(mc.stderr[0, 0]) + 1e-12


@pytest.mark.parametrize("N", [1, 2, 4])
def test_separability_matches_theory(N):
    ld, _, V, _ = _layer(H=2, L=12, d=4, seed=20 + N)
    sp = M.separability_metrics(ld, N=N)
    U = (V / V.norm(dim=-1, keepdim=True)).numpy()
    a = ld.alpha.numpy()
    for h in range(ld.H):
        for r in range(ld.L):
            t = r + 1
            if t < N + 1:
                assert not bool(sp.valid[h, r])
                continue
            al, x = a[h, r, :t], U[h, :t]
            assert abs(float(sp.fraction[h, r]) - float(th.separability(al, x, N))) <= TOL
            D = np.linalg.norm(x[:, None] - x[None], axis=-1)
            delta = D[np.triu_indices(t, 1)].min()
            assert abs(float(sp.delta[h, r]) - delta) <= TOL
            lo, up = th.theorem2_bounds(al, N, 1.0, delta, float(sp.r[h, r]))
            assert abs(float(sp.lower[h, r]) - max(lo, -1.0)) <= TOL
            assert abs(float(sp.upper[h, r]) - up) <= TOL


@pytest.mark.parametrize("engine", ["torch", "numba"])
def test_sensitivity_rows_matches_jacobian_sensitivity(engine):
    _ld, logits, _, mask = _layer(H=2, L=9, seed=4)
    x = logits.masked_fill(~mask, -math.inf)
    Ts, Es = [1e-3, 0.1, 10.0], [1e-3, 1.0]
    g, valid = M.sensitivity_rows(x, Ts, Es, seed=3, engine=engine)
    assert g.shape == (3, 2, 2, 9)
    assert not valid[:, 0].any() and valid[:, 1:].all()
    for a, T in enumerate(Ts):
        for b, e in enumerate(Es):
            ref = J.sensitivity(x, T, e, seed=3)
            assert torch.allclose(g[a, b][valid], ref[valid], rtol=1e-9, atol=1e-12)
            bound = min(1 / (2 * T), math.sqrt(2) / e)
            assert (g[a, b] <= bound * (1 + 1e-9)).all()


def test_sensitivity_rows_subset_matches_jacobian_sensitivity():
    """``rows``: only those rows, directions drawn for the (H, R, L) sub-array."""
    _ld, logits, _, mask = _layer(H=2, L=12, seed=6)
    x = logits.masked_fill(~mask, -math.inf)
    rows = [1, 5, 11]
    Ts, Es = [1e-3, 0.3, 30.0], [1e-3, 10.0]
    g, valid = M.sensitivity_rows(x, Ts, Es, seed=2, rows=rows)
    assert g.shape == (3, 2, 2, 3) and valid.all()
    xs = x[:, rows]
    for a, T in enumerate(Ts):
        for b, e in enumerate(Es):
            ref = J.sensitivity(xs, T, e, seed=2)
            assert torch.allclose(g[a, b], ref, rtol=1e-9, atol=1e-12)
    with pytest.raises(ValueError, match="rows"):
        M.sensitivity_rows(x, Ts, Es, rows=[12])


@pytest.mark.accel
@pytest.mark.parametrize("scale", [1.0, 30.0])
def test_sensitivity_engines_agree_on_the_paper_grid(scale):
    """The fused kernel (own vectorised exp) against the tensor path on the paper's T and eps grid, with large
    logits (near one-hot rows, underflowing terms) and a row subset."""
    g_ = torch.Generator().manual_seed(8)
    L = 90
    x = (torch.randn(3, L, L, generator=g_, dtype=torch.float64) * scale).masked_fill(
        ~torch.ones(L, L, dtype=torch.bool).tril(), -math.inf
    )
    Ts = list(np.logspace(-3, 2, 21))
    Es = [1e-3, 1e-1, 10.0]
    for rows in (None, [1, 2, 40, 89]):
        a, va = M.sensitivity_rows(x, Ts, Es, seed=1, rows=rows, engine="numba")
        b, vb = M.sensitivity_rows(x, Ts, Es, seed=1, rows=rows, engine="torch")
        assert torch.equal(va, vb)
        # g is a finite difference ||a1 - a0|| / eps: both engines carry rounding of about 1e-16 per softmax entry,
        # i.e. an absolute noise floor of ~1e-16 sqrt(L) / eps (torch also rounds x/T before the shift at small T)
        for k, e in enumerate(Es):
            assert torch.allclose(a[:, k], b[:, k], rtol=1e-9, atol=2e-14 / e), e


@pytest.mark.accel
def test_kernel_exp_is_accurate():
    """The vectorised exp of the sensitivity kernel: a few ulp against numpy where it matters, 0 below -708."""
    import numba

    K = pytest.importorskip("attn_lib.accel.kernels", reason="numba not importable")

    f = numba.njit(lambda x: K._exp_nonpos(x))
    xs = np.concatenate([-np.linspace(0, 40, 4001), -np.linspace(40, 707.9, 2001), [-1e-300, -708.5, -1e4]])
    got = np.array([f(v) for v in xs])
    ref = np.exp(xs)
    big = xs > -40
    assert (np.abs(got[big] - ref[big]) <= 4e-16 * ref[big]).all()
    mid = (xs <= -40) & (xs > -708)
    assert (np.abs(got[mid] - ref[mid]) <= 1e-13 * ref[mid]).all()
    assert (got[xs <= -708] == 0).all()


@pytest.mark.accel
def test_kernel_expm1_is_accurate():
    """The vectorised expm1 of the sensitivity kernel (x <= 1): within 4e-16 relative of numpy near 0 (where
    exp(x) - 1 would lose every digit), on [-1, 1] and far below; -1 where exp underflows."""
    import numba

    K = pytest.importorskip("attn_lib.accel.kernels", reason="numba not importable")

    f = numba.njit(lambda x: K._expm1_le1(x))
    tiny = np.logspace(-300, 0, 3001)
    xs = np.concatenate([np.linspace(-1, 1, 20001), tiny, -tiny, -np.linspace(1, 40, 4001), -np.linspace(40, 700, 661)])
    got = np.array([f(v) for v in xs])
    ref = np.expm1(xs)
    assert (np.abs(got - ref) <= 4e-16 * np.abs(ref)).all(), float((np.abs(got - ref) / np.abs(ref)).max())
    assert f(-800.0) == -1.0


def test_masked_mean():
    x = torch.tensor([[1.0, 2.0, 100.0], [0.0, 0.0, 0.0]])
    v = torch.tensor([[True, True, False], [False, False, False]])
    m, c = M.masked_mean(x, v)
    assert m.tolist() == [1.5, 0.0] and c.tolist() == [2, 0]


def test_no_nan_for_short_rows_and_large_n():
    ld, *_ = _layer(H=1, L=5, seed=0)
    dm = M.distance_metrics(ld, N=10)
    assert not dm.valid.any()
    for k in ("d_tilde", "e1", "e2", "d_max"):
        assert torch.isfinite(getattr(dm, k)).all() and (getattr(dm, k) == 0).all()
    sc = M.topn_scan(ld, n_max=4)  # N = L - 1: only the last row is valid
    assert torch.isfinite(sc.d_tilde).all() and sc.valid[..., -1].sum() == 1
    with pytest.raises(ValueError, match=r"n_max must be an integer in \[1, 4\]"):
        M.topn_scan(ld, n_max=7)  # beyond L - 1 no row is valid (and 10**8 allocated 22 GB of zeros)


# ---------------------------------------------------------------------------------------------- bad input
def test_bad_inputs_raise_value_error():
    ld, logits, V, _mask = _layer(H=1, L=6)
    with pytest.raises(ValueError, match="N"):
        M.distance_metrics(ld, N=0)
    with pytest.raises(ValueError, match="form"):
        M.distance_metrics(ld, N=1, form="bogus")
    with pytest.raises(ValueError, match="p"):
        M.distance_metrics(ld, N=1, p="nope")
    with pytest.raises(ValueError, match="p"):
        M.distance_metrics(ld, N=1, p=1.5)
    with pytest.raises(ValueError, match="weights"):
        M.LayerData(torch.ones(2, 3, 4), torch.ones(2, 3, 2))
    with pytest.raises(ValueError, match="values"):
        M.LayerData(torch.ones(1, 3, 3), torch.ones(1, 4, 2))
    with pytest.raises(ValueError, match="mask"):
        M.LayerData(torch.ones(1, 3, 3), torch.ones(1, 3, 2), mask=torch.ones(3, 3))
    with pytest.raises(ValueError, match="weights"):
        M.LayerData(-torch.ones(1, 3, 3), torch.ones(1, 3, 2))
    with pytest.raises(ValueError, match="values"):
        M.LayerData(torch.ones(1, 3, 3), torch.full((1, 3, 2), float("nan")))
    with pytest.raises(ValueError, match="temperature"):
        M.LayerData.from_logits(logits, V, temperature=0)
    for bad in (float("nan"), float("inf")):  # a visible NaN / +inf logit: a clear error, never NaN weights
        lg = logits.clone()
        lg[..., 3, 1] = bad
        with pytest.raises(ValueError, match="logits must be finite"):
            M.LayerData.from_logits(lg, V)
    with pytest.raises(ValueError, match="n_max"):
        M.topn_scan(ld, n_max=2, n_min=3)
    with pytest.raises(ValueError, match="n_min"):
        M.topn_scan(ld, n_max=2, n_min=0)
    with pytest.raises(ValueError, match="n_samples"):
        M.expected_distance_mc(ld, N=1, n_samples=0)
    with pytest.raises(ValueError, match="seed"):
        M.expected_distance_mc(ld, N=1, seed=-1)
    with pytest.raises(ValueError, match="rows"):
        M.expected_distance_mc(ld, N=1, rows=[7])
    with pytest.raises(ValueError, match="M"):
        M.separability_metrics(ld, N=1, M=0)
    with pytest.raises(ValueError, match="temperature"):
        M.sensitivity_rows(logits, [0.0], [1.0])
    with pytest.raises(ValueError, match="eps"):
        M.sensitivity_rows(logits, [1.0], [-1.0])
    with pytest.raises(ValueError, match="non-empty"):
        M.sensitivity_rows(logits, [], [1.0])
    with pytest.raises(ValueError, match="mask"):
        M.sensitivity_rows(logits, [1.0], [1.0], mask=torch.ones(6, 6))
    with pytest.raises(ValueError, match="values"):
        M.distance_metrics(torch.ones(1, 3, 3))


@pytest.mark.accel
@pytest.mark.parametrize("p", ["L-1", "L", 0.25])
@pytest.mark.parametrize("N", [1, 3, 9])  # N=9 > d=6: the kernel forms s first
def test_distance_engines_agree(N, p):
    """The compiled per-row kernel and the tensor path give the same d~, E1, gaps, E2, ||s|| and top-N order."""
    ld, *_ = _layer(H=2, L=40, d=6, seed=31)
    a = M.distance_metrics(ld, N=N, p=p, engine="numba")
    b = M.distance_metrics(ld, N=N, p=p, engine="torch")
    for k in ("d_tilde", "e1", "e1_gap", "e1_gap_crude", "e2", "s_norm", "alpha_bar", "d_max"):
        assert torch.allclose(getattr(a, k), getattr(b, k), rtol=1e-12, atol=1e-12), k
    ref = M.top_n_order(ld.alpha, 12, ld.mask)
    assert torch.equal(M.LayerData(ld.alpha, ld.values).order(12), ref)


@pytest.mark.accel
@pytest.mark.parametrize("quantised", [False, True])
def test_d1_kernels_agree_with_torch_for_large_n(quantised, monkeypatch):
    """d_max through the running-maximum kernel (used above settings.kernel_d1_max_n) and through the per-row kernel equal the
    tensor path, also with repeated value vectors (ties in the farthest token, selected argmax)."""
    g_ = torch.Generator().manual_seed(17)
    L = 48
    V = torch.randn(2, L, 4, generator=g_, dtype=torch.float64)
    if quantised:
        V = V.round()  # many equal vectors and distances
    x = (torch.randn(2, L, L, generator=g_, dtype=torch.float64) * 3).masked_fill(
        ~torch.ones(L, L, dtype=torch.bool).tril(), -math.inf
    )
    ld = M.LayerData.from_logits(x, V)
    for N in (2, 7, 20):
        ref = M.distance_metrics(ld, N=N, engine="torch")
        for lim in (0, 1000):  # 0: always the running-maximum kernel; 1000: always the per-row kernel
            monkeypatch.setattr(M.settings, "kernel_d1_max_n", lim)
            got = M.distance_metrics(ld, N=N, engine="numba")
            assert torch.allclose(got.d_max, ref.d_max, rtol=1e-12, atol=1e-12), (N, lim)
            assert torch.allclose(got.d1, ref.d1, rtol=1e-12, atol=1e-12), (N, lim)


def test_order_kernel_breaks_ties_like_theory():
    """Tied weights (quantised): the compiled per-row sort picks the lower index first, as theory.top_n_indices."""
    g = torch.Generator().manual_seed(3)
    L = 16
    w = torch.randint(1, 4, (2, L, L), generator=g).to(torch.float64).tril()
    ld = M.LayerData(w / w.sum(-1, keepdim=True), torch.randn(2, L, 3, dtype=torch.float64))
    order = ld.order(6)
    for h in range(2):
        for r in range(L):
            n = min(6, r + 1)
            assert order[h, r, :n].tolist() == th.top_n_indices(ld.alpha[h, r, : r + 1].numpy(), n).tolist()
            assert order[h, r, n:].tolist() == list(range(r + 1, r + 1 + 6 - n))


@pytest.mark.accel
@pytest.mark.parametrize("N", [1, 4, 9])
def test_separability_engines_agree(N):
    ld, *_ = _layer(H=2, L=36, d=6, seed=41)
    a = M.separability_metrics(ld, N=N, engine="numba")
    b = M.separability_metrics(ld, N=N, engine="torch")
    for k in ("fraction", "lower", "upper", "r", "delta"):
        assert torch.allclose(getattr(a, k), getattr(b, k), rtol=1e-12, atol=1e-12), k
    # running minimum pairwise distance: compiled (prefix) against a direct per-row minimum
    u = M.unit_layer(ld, 1.0)
    X = u.values.numpy()
    for h in range(2):
        for r in (1, 7, 35):
            D = np.linalg.norm(X[h, : r + 1, None] - X[h, None, : r + 1], axis=-1)
            assert abs(float(a.delta[h, r]) - D[np.triu_indices(r + 1, 1)].min()) <= 1e-9
    assert float(a.delta[0, 0]) == 0.0


@pytest.mark.parametrize("engine", ["torch", "numba"])
def test_ball_test_is_exact_at_low_temperature(engine):
    """At T = 0.01 many selected tokens weigh less than 1e-16 of their row's top, so their ``D_i`` equals ``||s||`` to
    float64's resolution, and comparing the rounded distances lets rounding decide the strict test (the table at the
    end: the same layer, ``ball_test_layer``). Algorithm 4 compares the excesses ``D_i^2 - ||s||^2`` instead (Reading
    the paper, §The ball test); every implementation of ``N_s`` then gives the exact-arithmetic answer, token by
    token, on every row."""
    N, L = 8, 32
    ld = ball_test_layer(0.01, L=L, d=6, seed=3)
    exact = exact_ball_flags(ld, N)
    sp = M.separability_metrics(ld, N=N, normalize=False, engine=engine)
    assert torch.equal(sp.flags, exact) and 0 < int(exact.sum()) < exact[:, N:].numel()
    assert torch.equal(sp.fraction, exact.sum(-1) / N)
    with M.configure(default_engine=engine):
        sep = row_metrics(ld.alpha, ld.values, ld.mask[0], [N])["sep"][..., 0]
    assert torch.equal(sep, exact.sum(-1) / N)
    for h in range(2):
        for r in range(N, L):
            a, X = ld.alpha[h, r, : r + 1].numpy(), ld.values[h, : r + 1].numpy()
            assert th.distinguishable_count(a, X, N) == int(exact[h, r].sum()), (h, r)
    table = ball_test_table((0.01,), N=N, L=L, d=6, seed=3)
    assert table["below 1e-16 of the top"].iloc[0] > 0 and table["distance form wrong"].iloc[0] > 0
    assert table.filter(like="excess").eq(0).all(axis=None)


@pytest.mark.parametrize("n", [1, 3, 7, 40])
def test_order_kernel_selection_path_matches_full_sort(n):
    """Rows much longer than n take the select-then-sort path; with heavy ties it must equal the stable order."""
    g = torch.Generator().manual_seed(n)
    L = 64
    w = torch.randint(1, 5, (3, L, L), generator=g).to(torch.float64).tril()
    ld = M.LayerData(w / w.sum(-1, keepdim=True), torch.randn(3, L, 2, dtype=torch.float64))
    ref = M.top_n_order(ld.alpha, n, ld.mask)
    with M.configure(order_prefetch_div=0):  # no prefetch: n columns only
        assert torch.equal(ld.order(n), ref)


@pytest.mark.parametrize("p", [None, True, float("nan"), [0.5], object()])
def test_p_that_is_not_a_probability_is_a_value_error(p):
    """Issue 12: ``p=None`` (and other non-numbers, booleans) used to raise TypeError or run."""
    ld, *_ = _layer(H=1, L=6)
    with pytest.raises(ValueError, match=r"p must be 'L-1', 'L' or a number in \[0, 1\]"):
        M.distance_metrics(ld, N=1, p=p)
    with pytest.raises(ValueError, match=r"p must be 'L-1', 'L' or a number in \[0, 1\]"):
        M.topn_scan(ld, n_max=2, p=p)


#: every public metric that takes ``rows``, called on a 6-row layer
ROWS_CALLS = {
    "topn_scan": lambda ld, x, rows, engine: M.topn_scan(ld, n_max=2, rows=rows, engine=engine),
    "expected_distance_mc": lambda ld, x, rows, engine: M.expected_distance_mc(ld, N=1, rows=rows, engine=engine),
    "sensitivity_rows": lambda ld, x, rows, engine: M.sensitivity_rows(x, [1.0], [1.0], rows=rows, engine=engine),
}


@pytest.mark.parametrize("engine", ["torch", "numba"])
@pytest.mark.parametrize(
    "rows", [[99], [6], [-1], [0.7, 2.2], [1.5], [float("nan")], [True, False], "ab", [[1, 2], [3]]], ids=str
)
@pytest.mark.parametrize("func", list(ROWS_CALLS))
def test_bad_rows_are_a_value_error_with_the_range(func, rows, engine):
    """Issue 12: out-of-range rows used to be an IndexError (topn_scan) and fractional rows were truncated."""
    ld, logits, _, mask = _layer(H=2, L=6)
    x = logits.masked_fill(~mask, -math.inf)
    with pytest.raises(ValueError, match=r"rows must be .*integer row indices in \[0, 5\]"):
        ROWS_CALLS[func](ld, x, rows, engine)


@pytest.mark.parametrize("func", list(ROWS_CALLS))
def test_integer_like_rows_are_accepted(func):
    """Integral floats and NumPy / torch integers are row indices (as check_int accepts them); the order does not
    matter."""
    ld, logits, _, mask = _layer(H=2, L=6)
    x = logits.masked_fill(~mask, -math.inf)

    def tensors(result):  # the tensors of a result dataclass or tuple
        return [
            v for v in (result if isinstance(result, tuple) else vars(result).values()) if isinstance(v, torch.Tensor)
        ]

    ref = tensors(ROWS_CALLS[func](ld, x, [2, 5], "torch"))
    for rows in ([5.0, 2.0], np.array([2, 5], dtype=np.int32), torch.tensor([5, 2])):
        got = tensors(ROWS_CALLS[func](ld, x, rows, "torch"))
        assert len(got) == len(ref) > 1
        for a, b in zip(ref, got, strict=True):
            assert torch.equal(a, b)


@pytest.mark.parametrize("seed", [2**70, -1, 1.5, "0"])
def test_monte_carlo_seed_outside_the_generator_range_is_a_value_error(seed):
    ld = M.LayerData.from_logits(torch.randn(2, 6, 6, dtype=torch.float64), torch.randn(2, 6, 4, dtype=torch.float64))
    with pytest.raises(ValueError, match="seed"):
        M.expected_distance_mc(ld, N=2, n_samples=4, seed=seed)


def test_kth_smallest_of_the_order_kernel_is_the_value_np_partition_puts_at_k():
    """The selection inside ``order_prefix`` (replacing ``np.partition``, slow to compile): the same value at every k,
    on rows of distinct values, of few repeated values, of one value and of negated weights with signed zeros."""
    K = pytest.importorskip("attn_lib.accel.kernels", reason="numba not importable")
    rng = np.random.default_rng(0)
    rows = [rng.random(37), rng.integers(0, 3, 41).astype(float), np.full(16, 0.25), -np.r_[rng.random(9), 0.0, 0.0]]
    rows += [np.array([2.0]), np.arange(30.0)[::-1], np.arange(30.0)]
    for x in rows:
        for k in range(x.size):
            got = K._kth_smallest(x.copy(), k)
            assert got == np.partition(x, k)[k], (x, k)


def test_float32_layer_runs_and_agrees_with_float64():
    """Issue 33: every metric computes in the caller's dtype (float32 where a device has no float64, as MPS),
    float64 by default; float32 agrees with float64 to about 1e-4 relative."""
    g = torch.Generator().manual_seed(3)
    H, L = 2, 24
    logits = (2 * torch.randn(H, L, L, generator=g)).masked_fill(~torch.ones(L, L, dtype=torch.bool).tril(), -math.inf)
    values = torch.randn(H, L, 6, generator=g)
    l32 = M.LayerData.from_logits(logits, values, dtype=torch.float32)
    l64 = M.LayerData.from_logits(logits, values)
    assert l32.alpha.dtype == torch.float32 and l64.alpha.dtype == torch.float64 and not l32.kernels_apply

    def pairs(fn, *fields, **kw):
        a, b = fn(l32, **kw), fn(l64, engine="torch", **kw)
        return [(getattr(a, f), getattr(b, f)) for f in fields]

    got = pairs(M.distance_metrics, "d_tilde", "e1", "e1_gap", "e2", "d_max", N=3)
    got += pairs(M.topn_scan, "d_tilde", "e1", "e2", n_max=6)
    got += pairs(M.expected_distance_mc, "mean", N=3, n_samples=8)
    got += pairs(M.expected_distance_mc_scan, "mean", n_max=5, n_samples=4, stratify=True, control_variate=True)
    got += pairs(M.separability_metrics, "fraction", "lower", "upper", "r", "delta", N=3)
    got.append((M.coverage_metrics(l32, N=2).coverage, M.coverage_metrics(l64, N=2).coverage))
    w32, w64 = l32.alpha[:, 18:], l64.alpha[:, 18:]
    a = M.crossing_metrics(w32, l32.values, [2, 4], l32.mask[:, 18:], dtype=torch.float32)
    b = M.crossing_metrics(w64, l64.values, [2, 4], l64.mask[:, 18:], engine="torch")
    got += [(a.d_tilde, b.d_tilde), (a.e1, b.e1)]
    s32, _ = M.sensitivity_rows(logits, [0.5, 2.0], [1e-2], dtype=torch.float32)
    s64, _ = M.sensitivity_rows(logits, [0.5, 2.0], [1e-2], engine="torch")
    got.append((s32, s64))
    for x, y in got:
        assert x.dtype == torch.float32 and y.dtype == torch.float64
        assert float((x.double() - y).abs().max()) <= 1e-4 * float(y.abs().max()) + 1e-12
