"""Tests for attn_lib.jacobian: every Jacobian against torch.autograd.functional.jacobian and closed forms."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from attn_lib import jacobian as jb
from attn_lib import normalizers as nz
from attn_lib import theory as th

NAMES = [n for n in nz.available() if n != "topk"]  # topk needs k: tests/test_topk.py


def per_row_reference(f, x, T, mask):
    """torch.autograd.functional.jacobian row by row (independent of the batched implementation)."""
    B, L = x.shape
    out = torch.zeros(B, L, L, dtype=x.dtype)
    for b in range(B):
        mb = None if mask is None else mask[b]
        out[b] = torch.autograd.functional.jacobian(lambda l, mb=mb: f(l, T, mask=mb), x[b])
    return out


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("T", [0.05, 1.0, 7.0])
def test_every_jacobian_matches_autograd_functional(name, T):
    gen = torch.Generator().manual_seed(11)
    x = torch.randn(5, 6, generator=gen, dtype=torch.float64) * 2
    mask = torch.ones(5, 6, dtype=torch.bool)
    mask[1, 4:] = False
    mask[2, 1] = False
    mask[3] = False  # fully masked row
    f = nz.get(name)
    for m in (None, mask):
        J = jb.jacobian(name, x, T, mask=m)
        assert J.shape == (5, 6, 6)
        torch.testing.assert_close(J, per_row_reference(f, x, T, m), atol=1e-10, rtol=1e-8)
        if m is not None:
            assert (J[3] == 0).all()
            assert (J[1, 4:, :] == 0).all() and (J[1, :, 4:] == 0).all()


def test_softmax_jacobian_matches_central_differences():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(4, 7, generator=gen, dtype=torch.float64)
    T = 0.6
    J = jb.jacobian("softmax", x, T)
    h = 1e-6
    fd = torch.zeros_like(J)
    for j in range(7):
        e = torch.zeros(7, dtype=torch.float64)
        e[j] = h
        fd[..., :, j] = (nz.softmax(x + e, T) - nz.softmax(x - e, T)) / (2 * h)
    torch.testing.assert_close(J, fd, atol=1e-8, rtol=0)
    torch.testing.assert_close(J, J.transpose(-1, -2))  # symmetric
    assert (torch.linalg.eigvalsh(J) > -1e-15).all()  # positive semidefinite
    np.testing.assert_allclose(J.numpy(), th.softmax_jacobian_np(x.numpy(), T), atol=1e-14)


@pytest.mark.parametrize(
    "F,dF",
    [
        (lambda z: 1 + z**2, lambda z: 2 * z),
        (torch.exp, torch.exp),
        (torch.nn.functional.softplus, torch.sigmoid),
    ],
)
def test_general_jacobian_lemma2(F, dF):
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(3, 5, generator=gen, dtype=torch.float64)
    T = 0.8
    f = nz.make_general(F)
    J = jb.jacobian(f, x, T)
    torch.testing.assert_close(J, per_row_reference(f, x, T, None), atol=1e-10, rtol=1e-8)
    # the quotient-rule form of theory.lemma2_jacobian with F_T(l) = F(l/T), F_T' = F'(l/T)/T
    Fn = lambda l: F(torch.as_tensor(l) / T).numpy()  # noqa: E731
    dFn = lambda l: (dF(torch.as_tensor(l) / T) / T).numpy()  # noqa: E731
    np.testing.assert_allclose(J.numpy(), th.lemma2_jacobian(Fn, dFn, x.numpy()), atol=1e-12)


def test_general_by_name_uses_softplus():
    x = torch.tensor([[0.3, -2.0, 1.0]], dtype=torch.float64)
    f = nz.get("general")
    torch.testing.assert_close(jb.jacobian("general", x, 0.5), per_row_reference(f, x, 0.5, None))


def test_sparse_jacobians_closed_forms():
    """Sparsemax: diag(s) - s s^T/|S|; 1.5-entmax: diag(g) - g g^T / sum g with g = sqrt(p)."""
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(20, 6, generator=gen, dtype=torch.float64)
    p = nz.sparsemax(x)
    s = (p > 0).to(torch.float64)
    ref = torch.diag_embed(s) - s.unsqueeze(-1) * s.unsqueeze(-2) / s.sum(-1)[:, None, None]
    torch.testing.assert_close(jb.jacobian("sparsemax", x), ref)
    q = nz.entmax15(x)
    g = q.sqrt()
    ref15 = torch.diag_embed(g) - g.unsqueeze(-1) * g.unsqueeze(-2) / g.sum(-1)[:, None, None]
    torch.testing.assert_close(jb.jacobian("entmax15", x), ref15)


def test_jacobian_numpy_in_numpy_out_and_batch_dims():
    x = np.random.default_rng(0).normal(size=(2, 3, 4))
    J = jb.jacobian("sigmoid", x, 1.0)
    assert isinstance(J, np.ndarray) and J.shape == (2, 3, 4, 4)
    # sigmoid acts elementwise (bias depends on n only): diagonal Jacobian
    off = J - np.einsum("...ii->...i", J)[..., None] * np.eye(4)
    assert np.abs(off).max() < 1e-15


def test_callable_normaliser_is_differentiated():
    def doubled(logits, temperature=1.0, dim=-1, mask=None):
        return nz.softmax(logits, temperature / 2, dim=dim, mask=mask)

    x = torch.randn(3, 4, dtype=torch.float64)
    torch.testing.assert_close(jb.jacobian(doubled, x, 1.0), jb.jacobian("softmax", x, 0.5))


# ---------------------------------------------------------------------------------------------------------
# corrected Corollary 3 over thousands of rows; violation of the spectral-norm reading
# ---------------------------------------------------------------------------------------------------------
def test_corollary3_corrected_bounds_hold_and_paper_spectral_reading_fails():
    rng = np.random.default_rng(123)
    worst = {"spectral": 0.0, "entrywise": 0.0, "row": 0.0}
    n_rows = 0
    violations = 0
    for L in (2, 3, 5, 10, 30):
        scale = rng.uniform(0.01, 10, size=(1000, 1))
        x = torch.tensor(rng.normal(size=(1000, L)) * scale)
        T = 1.0
        norms = jb.jacobian_norms(jb.jacobian("softmax", x, T))
        for k in worst:
            worst[k] = max(worst[k], float(norms[k].max()) * T)
        violations += int((norms["spectral"] > th.corollary3_paper(T) + 1e-12).sum())
        n_rows += 1000
    assert n_rows == 5000
    assert worst["spectral"] <= 0.5 + 1e-12
    assert worst["entrywise"] <= 0.25 + 1e-12
    assert worst["row"] <= math.sqrt(2) / 4 + 1e-12
    assert worst["spectral"] > 0.49  # nearly attained (near-ties occur)
    assert violations > 0  # the spectral-norm reading of min{1/(4T), sqrt2} is false


def test_jacobian_norms_values():
    J = torch.tensor([[[0.25, -0.25], [-0.25, 0.25]]], dtype=torch.float64)
    n = jb.jacobian_norms(J)
    torch.testing.assert_close(n["spectral"], torch.tensor([0.5], dtype=torch.float64))
    torch.testing.assert_close(n["entrywise"], torch.tensor([0.25], dtype=torch.float64))
    torch.testing.assert_close(n["row"], torch.tensor([math.sqrt(2) / 4], dtype=torch.float64))


# ---------------------------------------------------------------------------------------------------------
# sensitivity g(T, eps)
# ---------------------------------------------------------------------------------------------------------
def test_random_directions_unit_on_visible_and_seeded():
    mask = torch.tril(torch.ones(5, 5, dtype=torch.bool))
    mask[2] = False
    v = jb.random_directions((5, 5), mask, seed=3)
    n = torch.linalg.vector_norm(v, dim=-1)
    torch.testing.assert_close(n[[0, 1, 3, 4]], torch.ones(4, dtype=torch.float64))
    assert n[2] == 0 and (v[~mask] == 0).all()
    torch.testing.assert_close(v, jb.random_directions((5, 5), mask, seed=3))
    assert not torch.allclose(v, jb.random_directions((5, 5), mask, seed=4))


@pytest.mark.parametrize("big", [False, True], ids=["cached", "over-the-cache-limit"])
def test_random_directions_cached_draw_is_the_fresh_draw_and_never_leaks_a_change(monkeypatch, big):
    # the Gaussian draw is cached per (shape, seed); the directions must be the bits of a fresh generator's draw
    # and a caller changing its directions in place must not change the next call's
    if big:
        monkeypatch.setattr(jb, "GAUSSIAN_CACHE_DRAWS", 10)
    shape = (3, 4, 6)
    g = torch.Generator(device="cpu").manual_seed(11)
    raw = torch.randn(shape, generator=g, dtype=torch.float64)
    fresh = raw / torch.linalg.vector_norm(raw, dim=-1, keepdim=True)
    hits = jb._gaussian_cached.cache_info().hits
    for mask in (None, torch.ones(shape, dtype=torch.bool)):
        v = jb.random_directions(shape, mask, seed=11)
        assert torch.equal(v, fresh)
        v.mul_(0)
        assert torch.equal(jb.random_directions(shape, mask, seed=11), fresh)
    assert torch.equal(jb.random_directions(shape, seed=11, dtype=torch.float32), fresh.float())
    # the cache served the repeated draws, or (over the limit) was never asked
    assert (jb._gaussian_cached.cache_info().hits > hits) is not big


def test_sensitivity_matches_manual_formula_and_linearisation():
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(3, 8, generator=gen, dtype=torch.float64)
    mask = torch.tril(torch.ones(8, 8, dtype=torch.bool))[[2, 5, 7]]
    T, eps = 0.3, 1e-1
    g = jb.sensitivity(x, T, eps, mask=mask, seed=9)
    v = jb.random_directions(x.shape, mask, seed=9)
    for r in range(3):
        vis = mask[r]
        a0 = torch.tensor(th.softmax_np(x[r, vis].numpy(), T))
        a1 = torch.tensor(th.softmax_np((x[r, vis] + eps * v[r, vis]).numpy(), T))
        assert abs(g[r].item() - torch.linalg.vector_norm(a1 - a0).item() / eps) < 1e-12
    # small eps: g -> ||J v||
    g_small = jb.sensitivity(x, T, 1e-7, mask=mask, seed=9)
    Jv = (jb.jacobian("softmax", x, T, mask=mask) @ v.unsqueeze(-1)).squeeze(-1)
    torch.testing.assert_close(g_small, torch.linalg.vector_norm(Jv, dim=-1), atol=1e-6, rtol=1e-5)
    # a row with a single visible token does not move
    assert jb.sensitivity(x[:1], T, eps, mask=torch.tensor([[True] + [False] * 7]))[0] == 0


def test_sensitivity_corrected_bound_thousands_of_rows_and_tie_counterexample():
    rng = np.random.default_rng(77)
    x = torch.tensor(rng.normal(size=(600, 12)) * rng.uniform(0, 5, size=(600, 1)))
    mask = torch.tensor(rng.random((600, 12)) < 0.8)
    for T in (1e-3, 1e-1, 1.0, 1e2):
        for eps in (1e-3, 1e-1, 10.0):
            g = jb.sensitivity(x, T, eps, mask=mask, seed=1)
            bound = th.corollary3_corrected(T, eps)["sensitivity"]
            assert float(g.max()) <= bound * (1 + 1e-9)
    # the paper's dashed curve is exceeded at a two-way tie along (1, -1)/sqrt 2
    tie = torch.zeros(1, 2, dtype=torch.float64)
    v = torch.tensor([[1.0, -1.0]], dtype=torch.float64) / math.sqrt(2)
    for T, expected in ((1.0, 0.5), (0.1, 5.0), (0.01, 50.0)):
        g = jb.sensitivity(tie, T, 1e-6, direction=v)
        assert abs(g.item() - expected) < 1e-3 * expected
        assert g.item() > th.corollary3_paper(T)


def test_sensitivity_other_normalisers_and_numpy():
    x = np.random.default_rng(0).normal(size=(4, 6))
    g = jb.sensitivity(x, 0.5, 1e-3, normalizer="sparsemax")
    assert isinstance(g, np.ndarray) and g.shape == (4,) and np.all(np.isfinite(g))
    g2 = jb.sensitivity(x, 0.5, 1e-3, normalizer=nz.get("sparsemax"))
    np.testing.assert_allclose(g, g2)


# ---------------------------------------------------------------------------------------------------------
# bad input
# ---------------------------------------------------------------------------------------------------------
def test_bad_input():
    x = torch.randn(2, 3)
    with pytest.raises(ValueError, match="temperature"):
        jb.jacobian("softmax", x, 0.0)
    with pytest.raises(ValueError, match="temperature"):
        jb.jacobian("sparsemax", x, float("nan"))
    with pytest.raises(ValueError, match="name"):
        jb.jacobian("nope", x)
    with pytest.raises(ValueError, match="name_or_fn"):
        jb.jacobian(3, x)
    with pytest.raises(ValueError, match="logits"):
        jb.jacobian("softmax", torch.ones(2, 0))
    with pytest.raises(ValueError, match="mask"):
        jb.jacobian("softmax", x, mask=torch.ones(3, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match="eps"):
        jb.sensitivity(x, 1.0, 0.0)
    with pytest.raises(ValueError, match="temperature"):
        jb.sensitivity(x, -1.0, 1e-3)
    with pytest.raises(ValueError, match="direction"):
        jb.sensitivity(x, 1.0, 1e-3, direction=torch.ones(2, 4))
    with pytest.raises(ValueError, match="mask"):
        jb.sensitivity(x, 1.0, 1e-3, mask=torch.ones(2, 5, dtype=torch.bool))
    with pytest.raises(ValueError, match="seed"):
        jb.random_directions((2, 3), seed=-1)
    with pytest.raises(ValueError, match="J"):
        jb.jacobian_norms(torch.ones(2, 3))


def test_jacobian_norms_of_a_nan_matrix():
    with pytest.raises(ValueError, match="J must be finite"):  # was torch's _LinAlgError from the SVD
        jb.jacobian_norms(torch.full((3, 3), float("nan")))
    with pytest.raises(ValueError, match="J must be finite"):
        jb.jacobian_norms(np.array([[1.0, np.inf], [0.0, 1.0]]))


@pytest.mark.parametrize(
    "shape, match",
    [
        (5, "shape must be a sequence of integers"),
        ("ab", "shape must be a sequence of integers"),
        ((2, -3), r"shape must be an integer >= 0 \(got -3\)"),
        ((2.7, 3.2), r"shape must be an integer >= 0 \(got 2.7\)"),  # was silently truncated to (2, 3)
        ((2, 0), "non-empty last axis"),
    ],
)
def test_random_directions_bad_shape(shape, match):
    with pytest.raises(ValueError, match=match):
        jb.random_directions(shape)


def test_random_directions_bad_seed_dtype_device():
    with pytest.raises(ValueError, match=r"seed must be an integer in \[0, 18446744073709551615\]"):
        jb.random_directions((2, 3), seed=2**70)
    assert jb.random_directions((2, 3), seed=2**64 - 1).shape == (2, 3)
    with pytest.raises(ValueError, match="dtype must be a floating-point torch dtype"):
        jb.random_directions((2, 3), dtype=torch.int64)  # was a tensor of zeros
    with pytest.raises(ValueError, match="device must be a device present on this machine"):
        jb.random_directions((2, 3), device="cuda:999")  # no CUDA here, or no 1000th GPU (was an AssertionError)
    with pytest.raises(ValueError, match="device must be a device present"):
        jb.random_directions((2, 3), device="nonsense")
    assert jb.random_directions((2, 3), device="cpu").device.type == "cpu"


@pytest.mark.parametrize("T", ["1", True])
def test_sensitivity_string_or_boolean_temperature(T):
    with pytest.raises(ValueError, match="temperature must be a real number > 0"):
        jb.sensitivity(torch.randn(2, 3), T, 0.1)


def test_sensitivity_eps_beyond_the_dtype_range():
    x = torch.randn(2, 3, dtype=torch.float64)
    with pytest.raises(ValueError, match="eps=1e\\+39 is too large for these logits"):
        jb.sensitivity(x, 1.0, 1e39, dtype=torch.float32)
    assert torch.isfinite(jb.sensitivity(x, 1.0, 1e39)).all()  # fine in float64


# ---------------------------------------------------------------------------------------------------------
# sensitivity_grid: sensitivity at every (T, eps) with one direction per row
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["softmax", "sparsemax", "topk", "softpick", "ssmax"])
def test_sensitivity_grid_equals_sensitivity_at_each_point(name):
    g = torch.Generator().manual_seed(4)
    x = torch.randn(3, 5, 9, generator=g, dtype=torch.float64) * 3
    causal = torch.ones(5, 9, dtype=torch.bool).tril(diagonal=4)  # row r sees r + 5 tokens
    f = nz.get(name, k=3) if name == "topk" else nz.get(name)
    Ts, es = (0.05, 1.0, 7.0), (1e-3, 0.1, 10.0)
    grid = jb.sensitivity_grid(x, Ts, es, normalizer=f, mask=causal, seed=11)
    assert grid.shape == (3, 3, 3, 5)
    for i, T in enumerate(Ts):
        for j, e in enumerate(es):
            one = jb.sensitivity(x, T, e, normalizer=f, mask=causal, seed=11)
            torch.testing.assert_close(grid[i, j], one, rtol=1e-12, atol=1e-15)
    assert (grid > 0).any()
    # a different seed is a different direction
    assert not torch.allclose(grid, jb.sensitivity_grid(x, Ts, es, normalizer=f, mask=causal, seed=12))


def test_sensitivity_grid_numpy_and_bad_input():
    x = np.random.default_rng(0).normal(size=(4, 6))
    g = jb.sensitivity_grid(x, [0.5], [1e-3, 1e-1], normalizer="sparsemax")
    assert isinstance(g, np.ndarray) and g.shape == (1, 2, 4)
    np.testing.assert_allclose(g[0, 1], jb.sensitivity(x, 0.5, 1e-1, normalizer="sparsemax"), rtol=1e-12)
    with pytest.raises(ValueError, match="temperatures must be a finite number > 0"):
        jb.sensitivity_grid(x, [1.0, 0.0], [0.1])
    with pytest.raises(ValueError, match="eps_values must be a number or a non-empty list"):
        jb.sensitivity_grid(x, [1.0], [])
    with pytest.raises(ValueError, match="eps_values=.* too large"):
        jb.sensitivity_grid(x, [1.0], [1e39], dtype=torch.float32)
