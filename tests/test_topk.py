"""Tests for the top-k normaliser (attn_lib.normalizers.topk) and its analytic Jacobian."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from attn_lib import jacobian as jb
from attn_lib import normalizers as nz


def brute_topk(row, k, T=1.0, visible=None):
    """One row in plain Python: pick the k largest visible logits (lower index first on ties), softmax over them."""
    n = len(row)
    vis = [True] * n if visible is None else list(visible)
    idx = sorted((i for i in range(n) if vis[i]), key=lambda i: (-row[i], i))[:k]
    m = max(row[i] for i in idx) if idx else 0.0
    e = {i: math.exp((row[i] - m) / T) for i in idx}
    s = sum(e.values())
    return [e[i] / s if i in e else 0.0 for i in range(n)]


# ---------------------------------------------------------------------------------------------------------
# topk
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("k", [1, 2, 3, 5])
@pytest.mark.parametrize("T", [0.1, 1.0, 4.0])
def test_topk_matches_brute_force(k, T):
    rng = np.random.default_rng([k, int(T * 10)])
    x = rng.normal(size=(6, 7)) * 3
    y = nz.get("topk", k=k)(torch.tensor(x), T)
    ref = torch.tensor([brute_topk(list(r), k, T) for r in x], dtype=torch.float64)
    torch.testing.assert_close(y, ref, atol=1e-12, rtol=1e-12)


def test_topk_keeps_exactly_k_nonzero_weights():
    x = torch.randn(4, 10, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    y = nz.topk(x, k=4)
    assert ((y > 0).sum(-1) == 4).all()
    assert torch.allclose(y.sum(-1), torch.ones(4, dtype=torch.float64))


def test_topk_largest_weight_is_at_least_one_over_k():
    """prop-topk-floor: the k kept weights sum to one, so the largest is at least 1/k at every row length."""
    gen = torch.Generator().manual_seed(5)
    for t in (5, 50, 500):
        x = torch.randn(8, t, generator=gen, dtype=torch.float64) * 3
        for k in (1, 2, 4):
            assert (nz.topk(x, k=k).max(-1).values >= 1 / k - 1e-12).all()


def test_topk_ties_lower_index_wins():
    x = torch.tensor([1.0, 2.0, 2.0, 2.0, 0.0], dtype=torch.float64)
    y = nz.topk(x, k=2)
    assert y.tolist() == [0.0, 0.5, 0.5, 0.0, 0.0]


def test_topk_ties_are_deterministic_on_a_long_row():
    x = torch.zeros(3, 2000, dtype=torch.float32)  # all tied: the k lowest indices must win, every time
    y = nz.topk(x, k=7)
    assert (y[:, :7] > 0).all() and (y[:, 7:] == 0).all()


def test_topk_respects_mask():
    x = torch.tensor([[5.0, 4.0, 3.0, 2.0]], dtype=torch.float64)
    mask = torch.tensor([[False, True, True, True]])
    y = nz.topk(x, k=2, mask=mask)
    ref = torch.tensor([brute_topk([5.0, 4.0, 3.0, 2.0], 2, visible=[False, True, True, True])], dtype=torch.float64)
    torch.testing.assert_close(y, ref)
    assert y[0, 0] == 0


def test_topk_treats_minus_inf_as_masked():
    x = torch.tensor([-math.inf, 1.0, 0.5, -math.inf], dtype=torch.float64)
    y = nz.topk(x, k=3)
    torch.testing.assert_close(y, nz.softmax(x))


def test_topk_fully_masked_row_is_zero():
    x = torch.randn(2, 5, dtype=torch.float64)
    mask = torch.tensor([[True] * 5, [False] * 5])
    y = nz.topk(x, k=2, mask=mask)
    assert (y[1] == 0).all() and abs(float(y[0].sum()) - 1) < 1e-12


@pytest.mark.parametrize("k", [5, 6, 100])
def test_topk_with_k_at_least_visible_length_is_softmax(k):
    x = torch.randn(3, 5, generator=torch.Generator().manual_seed(k), dtype=torch.float64)
    torch.testing.assert_close(nz.topk(x, 0.7, k=k), nz.softmax(x, 0.7), atol=0, rtol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("T", [0.25, 1.0, 4.0])
def test_topk_with_k_at_least_the_row_is_softmax_bit_for_bit_on_long_causal_rows(dtype, T):
    """The live swap reuses softmax's pass for a top-k whose k is at least the window: the same bits."""
    L = 333
    x = 5 * torch.randn(4, L, L, generator=torch.Generator().manual_seed(2), dtype=dtype)
    causal = torch.ones(L, L, dtype=torch.bool).tril()
    for k in (L, 1024):
        assert torch.equal(nz.topk(x, T, k=k, mask=causal), nz.softmax(x, T, mask=causal))


def test_topk_causal_rows_shorter_than_k_are_softmax():
    L = 6
    x = torch.randn(L, L, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    causal = torch.ones(L, L, dtype=torch.bool).tril()
    y = nz.topk(x, k=3, mask=causal)
    s = nz.softmax(x, mask=causal)
    torch.testing.assert_close(y[:3], s[:3], atol=0, rtol=0)
    assert ((y[3:] > 0).sum(-1) == 3).all()


def test_topk_is_stable_for_huge_logits_and_tiny_temperature():
    x = torch.tensor([1e4, -1e4, 9999.0, 0.0], dtype=torch.float32)
    y = nz.topk(x, 1e-4, k=2)
    assert torch.isfinite(y).all() and y[0] == 1.0 and y[2] == 0.0


def test_topk_numpy_in_numpy_out_and_other_dim():
    x = np.arange(12, dtype=np.float64).reshape(3, 4)
    y = nz.topk(x, k=2, dim=0)
    assert isinstance(y, np.ndarray)
    np.testing.assert_allclose(y, nz.topk(torch.tensor(x.T), k=2).numpy().T)


@pytest.mark.parametrize("k", [0, -1, 2.5, "3", True, None])
def test_topk_bad_k_is_a_value_error_naming_k(k):
    with pytest.raises(ValueError, match="k"):
        nz.topk(torch.zeros(3), k=k)
    with pytest.raises(ValueError, match="k"):
        nz.get("topk", k=k)


def test_get_topk_requires_k():
    with pytest.raises(ValueError, match=r"k must be given"):
        nz.get("topk")


def test_get_topk_binds_k_and_names_it():
    f = nz.get("topk", k=2)
    assert f.name == "topk" and f.keywords == {"k": 2}


# ---------------------------------------------------------------------------------------------------------
# jacobian("topk")
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("k", [1, 2, 4, 9])
@pytest.mark.parametrize("T", [0.05, 1.0, 7.0])
def test_topk_jacobian_matches_autograd(k, T):
    gen = torch.Generator().manual_seed(k)
    x = torch.randn(4, 7, generator=gen, dtype=torch.float64) * 2
    mask = torch.ones(4, 7, dtype=torch.bool)
    mask[1, 5:] = False
    mask[3] = False
    f = nz.get("topk", k=k)
    J = jb.jacobian("topk", x, T, mask=mask, k=k)
    for b in range(4):
        ref = torch.autograd.functional.jacobian(lambda l, b=b: f(l, T, mask=mask[b]), x[b])
        torch.testing.assert_close(J[b], ref, atol=1e-12, rtol=1e-10)


def test_topk_jacobian_from_a_bound_callable_is_analytic():
    x = torch.randn(3, 6, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    f = nz.get("topk", k=2)
    torch.testing.assert_close(jb.jacobian(f, x, 0.5), jb._softmax_type_jacobian(f, x, 0.5, None))
    torch.testing.assert_close(jb.jacobian(f, x, 0.5), jb.autograd_jacobian(f, x, 0.5))


def test_topk_jacobian_is_zero_off_the_support():
    x = torch.tensor([3.0, 1.0, 2.0, 0.0], dtype=torch.float64)
    J = jb.jacobian("topk", x, k=2)
    assert (J[1] == 0).all() and (J[:, 1] == 0).all() and (J[3] == 0).all()
    assert J[0, 0] > 0


def test_topk_jacobian_needs_k():
    with pytest.raises(ValueError, match="k"):
        jb.jacobian("topk", torch.zeros(3))
