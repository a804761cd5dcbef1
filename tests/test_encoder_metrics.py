"""attn_lib.metrics on bidirectional (full) masks, as an encoder produces: every query row sees all L tokens (or, with
padding, all real tokens), so each row's formulas use the full visible length. Both engines (the compiled kernels
and the torch path) are held to the one-row reference functions of attn_lib.theory and attn_lib.jacobian."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from conftest import naive_scan

from attn_lib import jacobian as J
from attn_lib import metrics as M
from attn_lib import theory as th

pytestmark = pytest.mark.numerical  # run twice by `make test`: with the accelerator, and --without-numba

TOL = 1e-6
ENGINES = ["numba", "torch"]


def _full_layer(H=2, L=13, d=4, seed=0, n_real=None, scale=2.0):
    """A random layer with a bidirectional mask; with ``n_real``, columns from ``n_real`` on are padding."""
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(H, L, L, generator=g, dtype=torch.float64) * scale
    V = torch.randn(H, L, d, generator=g, dtype=torch.float64)
    mask = torch.ones(L, L, dtype=torch.bool)
    if n_real is not None:
        mask[:, n_real:] = False
    ld = M.LayerData.from_logits(logits.masked_fill(~mask, -math.inf), V, mask=mask)
    return ld, logits, V, mask


def _visible(mask, r):
    return mask[r].nonzero().view(-1).numpy()


def test_full_mask_counts_every_token_for_every_row():
    ld, *_ = _full_layer(L=9)
    assert ld.prefix and ld.kernels_apply  # a full mask is a prefix of length L for every row
    assert (ld.t == 9).all() and (ld.last == 8).all()
    ldp, *_ = _full_layer(L=9, n_real=6)
    assert (ldp.t == 6).all() and (ldp.last == 5).all()


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("N", [1, 3, 12])
@pytest.mark.parametrize("n_real", [None, 10])
def test_distance_metrics_on_full_masks_match_theory(engine, N, n_real):
    ld, _, V, mask = _full_layer(seed=N, n_real=n_real)
    dm = M.distance_metrics(ld, N=N, engine=engine)
    a, X = ld.alpha.numpy(), V.numpy()
    checked = 0
    for h in range(ld.H):
        for r in range(ld.L):
            vis = _visible(mask, r)
            if len(vis) < N + 1:  # N >= visible count: no token left outside the set
                assert not bool(dm.valid[h, r])
                continue
            assert bool(dm.valid[h, r])
            al, x = a[h, r, vis], X[h, vis]
            ref = {
                "d_tilde": th.distance(al, x, N),
                "d_max": th.theorem1_dmax(al, x, N),
                "e1": th.expectation_e1(al, x, N),  # p = N / (t - 1) with t = the full visible length
                "e1_gap": th.jensen_gap_bound(al, x, N),
                "e2": th.expectation_e2(al, x, N),
            }
            for k, v in ref.items():
                assert abs(float(getattr(dm, k)[h, r]) - float(v)) <= TOL * max(1.0, abs(float(v))), (k, h, r)
            checked += 1
    assert checked == (0 if N >= (n_real or ld.L) else ld.H * ld.L)


@pytest.mark.parametrize("engine", ENGINES)
def test_scan_on_full_masks_matches_naive_and_theory(engine):
    ld, _, V, _ = _full_layer(L=11, seed=3)
    sc = M.topn_scan(ld, n_max=10, engine=engine)
    nv = naive_scan(ld, n_max=10)
    for k in ("d_tilde", "e1", "e2"):
        assert torch.allclose(getattr(sc, k), getattr(nv, k), rtol=1e-6, atol=1e-9)
    a, X = ld.alpha.numpy(), V.numpy()
    for N in (1, 5, 10):
        for r in (0, 4, 10):  # the first row sees the whole window too (a causal row 0 would see one token)
            ref = th.expectation_e1(a[0, r], X[0], N)
            assert abs(float(sc.e1[0, r, N - 1]) - ref) <= TOL * max(1.0, ref)
            assert abs(float(sc.d_tilde[0, r, N - 1]) - th.distance(a[0, r], X[0], N)) <= TOL * 10
    assert sc.valid[:, :, :10].all()


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("n_real", [None, 9])
def test_separability_on_full_masks_matches_theory(engine, n_real):
    ld, _, V, mask = _full_layer(L=12, seed=21, n_real=n_real)
    N = 3
    sp = M.separability_metrics(ld, N=N, engine=engine)
    U = (V / V.norm(dim=-1, keepdim=True)).numpy()
    a = ld.alpha.numpy()
    for h in range(ld.H):
        for r in range(ld.L):
            vis = _visible(mask, r)
            al, x = a[h, r, vis], U[h, vis]
            assert abs(float(sp.fraction[h, r]) - float(th.separability(al, x, N))) <= TOL
            D = np.linalg.norm(x[:, None] - x[None], axis=-1)
            delta = D[np.triu_indices(len(vis), 1)].min()  # over every visible pair, the same for every row
            assert abs(float(sp.delta[h, r]) - delta) <= TOL
            lo, up = th.theorem2_bounds(al, N, 1.0, delta, float(sp.r[h, r]))
            assert abs(float(sp.lower[h, r]) - max(lo, -1.0)) <= TOL
            assert abs(float(sp.upper[h, r]) - up) <= TOL


@pytest.mark.parametrize("engine", ENGINES)
def test_monte_carlo_on_full_masks_matches_brute_force(engine):
    ld, _, V, _ = _full_layer(L=10, seed=5)
    N, K = 3, 16
    rows = torch.tensor([0, 4, 9])
    mc = M.expected_distance_mc(ld, N=N, rows=rows, n_samples=K, seed=7, engine=engine)
    from attn_lib.metrics.montecarlo import _mc_subsets

    # the shared draws: uniform N-subsets of all L tokens for every row, the first included
    subsets = _mc_subsets(7, tuple(rows.tolist()), (10, 10, 10), 10, N, K)
    assert subsets.shape == (3, K, N) and int(subsets[0].max()) > 0
    a, X = ld.alpha.numpy(), V.numpy()
    for i, r in enumerate(rows.tolist()):
        for h in range(ld.H):
            ref = np.mean([th.distance(a[h, r], X[h], selected=s) for s in subsets[i].numpy()])
            assert abs(float(mc.mean[h, i]) - ref) <= TOL * max(1.0, ref)


@pytest.mark.parametrize("engine", ENGINES)
def test_sensitivity_on_full_masks_matches_jacobian(engine):
    _, logits, _, mask = _full_layer(L=9, seed=4)
    Ts, Es = [1e-3, 0.1, 10.0], [1e-3, 1.0]
    g, valid = M.sensitivity_rows(logits, Ts, Es, mask=mask, seed=3, engine=engine)
    assert valid.all()  # every row sees 9 tokens, row 0 included
    for a, T in enumerate(Ts):
        for b, e in enumerate(Es):
            ref = J.sensitivity(logits, T, e, seed=3)
            assert torch.allclose(g[a, b], ref, rtol=1e-9, atol=1e-12)


@pytest.mark.accel
def test_engines_agree_on_a_padded_full_mask():
    ld, *_ = _full_layer(H=3, L=24, d=6, seed=9, n_real=19)
    for N in (1, 4, 18):
        a = M.distance_metrics(ld, N=N, engine="numba")
        b = M.distance_metrics(ld, N=N, engine="torch")
        for k in ("d_tilde", "d_max", "e1", "e1_gap", "e2"):
            assert torch.allclose(getattr(a, k), getattr(b, k), rtol=1e-9, atol=1e-12), (N, k)
