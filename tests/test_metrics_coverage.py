"""attn_lib.metrics.coverage (multi-head coverage of the head-averaged top-N) against a brute-force loop over rows,
heads and head orders, with the one-row definitions of attn_lib.theory."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from attn_lib import metrics as M
from attn_lib import theory as th

pytestmark = pytest.mark.numerical  # run twice by `make test`: with the accelerator, and --without-numba


def _layer(H=3, L=14, d=5, scale=2.0, seed=0):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(H, L, L, generator=g, dtype=torch.float64) * scale
    V = torch.randn(H, L, d, generator=g, dtype=torch.float64)
    mask = torch.ones(L, L, dtype=torch.bool).tril()
    return M.LayerData.from_logits(logits.masked_fill(~mask, -math.inf), V)


def _separable_set(alpha: np.ndarray, X: np.ndarray, N: int) -> set[int]:
    """One head, one row: the top-N tokens i with ||alpha_i x_i - s|| < min over non-selected j (unit vectors)."""
    X = X / np.linalg.norm(X, axis=-1, keepdims=True)
    top = th.top_n_indices(alpha, N)
    A = alpha[:, None] * X
    s = A[top].sum(0)
    D = np.linalg.norm(A - s, axis=-1)
    rho = min(D[j] for j in range(len(alpha)) if j not in set(top.tolist()))
    return {int(i) for i in top if D[i] < rho}


def _brute_force(ld: M.LayerData, N: int, perms: np.ndarray):
    """coverage (L, H) averaged over the given orders, needed (P, L), by sets and loops."""
    a, X = ld.alpha.numpy(), ld.values.numpy()
    P, L, H = perms.shape
    coverage, needed = np.zeros((L, H)), np.zeros((P, L), dtype=int)
    for t in range(N, L):  # row t sees t + 1 >= N + 1 tokens
        vis = slice(0, t + 1)
        sets = [_separable_set(a[h, t, vis], X[h, vis], N) for h in range(H)]
        target = set(th.top_n_indices(a[:, t, vis].mean(0), N).tolist())
        for p in range(P):
            union: set[int] = set()
            for k, h in enumerate(perms[p, t]):
                union |= sets[h]
                c = len(target & union) / N
                coverage[t, k] += c / P
                if c == 1 and needed[p, t] == 0:
                    needed[p, t] = k + 1
    return coverage, needed


@pytest.mark.parametrize("N, seed", [(1, 0), (2, 1), (3, 2), (5, 3)])
def test_coverage_matches_brute_force(N, seed):
    ld = _layer(seed=seed)
    cov = M.coverage_metrics(ld, N=N, permutations=5, seed=seed)
    expected, _ = _brute_force(ld, N, cov.perms.numpy())
    np.testing.assert_allclose(cov.coverage.numpy(), expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("N, seed", [(1, 0), (2, 1), (3, 2), (5, 3)])
def test_heads_needed_match_brute_force(N, seed):
    ld = _layer(seed=seed)
    cov = M.coverage_metrics(ld, N=N, permutations=5, seed=seed)
    _, expected = _brute_force(ld, N, cov.perms.numpy())
    np.testing.assert_array_equal(cov.needed.numpy(), expected)


def test_brute_force_cases_include_partial_and_full_coverage():
    """The random layers above exercise both outcomes (a reference that only ever sees one would prove little)."""
    cov = M.coverage_metrics(_layer(seed=2), N=3, permutations=5, seed=2)
    needed = cov.needed[:, cov.valid]
    assert bool((needed == 0).any()) and bool((needed > 0).any())


@pytest.mark.parametrize("engine", ["torch", "numba"])
def test_separable_fraction_equals_separability_metrics(engine):
    if engine == "numba":
        pytest.importorskip("numba")
    ld = _layer(H=4, L=40, d=6, seed=7)
    sp = M.separability_metrics(ld, N=6, engine=engine)
    cov = M.coverage_metrics(ld, N=6)
    np.testing.assert_allclose(cov.fraction.numpy(), sp.fraction.numpy(), rtol=0, atol=1e-12)  # counts / 6


def test_separable_sets_are_within_each_heads_top_n():
    ld = _layer(seed=4)
    sets = M.coverage.separable_sets(ld, N=4)
    np.testing.assert_array_equal(sets.order.numpy(), ld.order(4).numpy())
    assert not bool(sets.separable[~sets.valid].any())


def test_coverage_is_a_fraction_and_grows_with_heads():
    cov = M.coverage_metrics(_layer(H=6, L=30, seed=5), N=4, permutations=3)
    c = cov.coverage[cov.valid]
    assert c.dtype == torch.float64
    assert bool(((c >= 0) & (c <= 1)).all())
    assert bool((c.diff(dim=-1) >= 0).all())


def test_all_heads_cover_the_same_whatever_the_order():
    ld = _layer(H=5, L=25, seed=6)
    a = M.coverage_metrics(ld, N=3, permutations=2, seed=0)
    b = M.coverage_metrics(ld, N=3, permutations=7, seed=11)
    np.testing.assert_array_equal(a.coverage[:, -1].numpy(), b.coverage[:, -1].numpy())


def test_identical_heads_add_nothing():
    ld = _layer(H=1, L=20, seed=8)
    same = M.LayerData(ld.alpha.expand(4, -1, -1), ld.values.expand(4, -1, -1))
    cov = M.coverage_metrics(same, N=3, permutations=3)
    np.testing.assert_array_equal(cov.coverage.numpy(), cov.coverage[:, :1].expand(-1, 4).numpy())


def test_orders_are_seeded_permutations():
    ld = _layer(H=4)
    a = M.coverage_metrics(ld, N=2, permutations=3, seed=1)
    b = M.coverage_metrics(ld, N=2, permutations=3, seed=1)
    c = M.coverage_metrics(ld, N=2, permutations=3, seed=2)
    assert torch.equal(a.perms, b.perms) and not torch.equal(a.perms, c.perms)
    assert torch.equal(a.perms.sort(-1).values, torch.arange(4).expand(3, ld.L, 4))


def test_rows_without_n_plus_one_tokens_are_zero():
    cov = M.coverage_metrics(_layer(), N=4, permutations=2)
    assert cov.valid.tolist() == [t >= 4 for t in range(14)]
    assert not bool(cov.coverage[:4].any()) and not bool(cov.needed[:, :4].any())


@pytest.mark.parametrize(
    "kwargs, name",
    [(dict(N=0), "N"), (dict(permutations=0), "permutations"), (dict(seed=-1), "seed"), (dict(N=1.5), "N")],
)
def test_bad_arguments_are_refused(kwargs, name):
    with pytest.raises(ValueError, match=name):
        M.coverage_metrics(_layer(), **kwargs)


def test_bad_weights_are_refused():
    with pytest.raises(ValueError, match="weights"):
        M.coverage_metrics(torch.ones(2, 3, 4), torch.ones(2, 3, 2))


def test_a_head_covers_at_most_its_own_separable_tokens():
    cov = M.coverage_metrics(_layer(H=4, L=30, seed=9), N=5)
    sets = M.coverage.separable_sets(_layer(H=4, L=30, seed=9), N=5)
    assert bool((cov.hits.sum(-1) <= sets.separable.sum(-1)).all())
    assert bool((cov.hits.sum(-1) < sets.separable.sum(-1)).any())  # the target differs from some head's top-N
