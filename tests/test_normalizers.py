"""Tests for attn_lib.normalizers against references written independently of the code under test."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import scipy.special
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from attn_lib import normalizers as nz

NAMES = [
    "softmax",
    "general",
    "sparsemax",
    "entmax15",
    "entmax_alpha",
    "ssmax",
    "sa_softmax",
    "softmax1",
    "sigmoid",
    "softpick",
]
HYP = settings(
    max_examples=40, derandomize=True, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)


# ---------------------------------------------------------------------------------------------------------
# independent references (numpy / scipy, written without looking at the implementation)
# ---------------------------------------------------------------------------------------------------------
def ref_softmax(z):
    return scipy.special.softmax(np.asarray(z, dtype=np.float64))


def ref_sparsemax_bruteforce(z):
    """Euclidean projection onto the simplex by enumerating every support set (L <= 8)."""
    z = np.asarray(z, dtype=np.float64)
    L = z.size
    best, best_d = None, np.inf
    for k in range(1, L + 1):
        for S in itertools.combinations(range(L), k):
            S = list(S)
            tau = (z[S].sum() - 1.0) / k
            p = np.zeros(L)
            p[S] = z[S] - tau
            if np.any(p[S] < -1e-12):
                continue
            d = np.sum((p - z) ** 2)
            if d < best_d:
                best, best_d = p, d
    return best


def ref_sparsemax_scipy(z):
    """Projection onto the simplex with scipy.optimize (SLSQP)."""
    from scipy.optimize import minimize

    z = np.asarray(z, dtype=np.float64)
    L = z.size
    res = minimize(
        lambda p: np.sum((p - z) ** 2),
        np.full(L, 1.0 / L),
        jac=lambda p: 2 * (p - z),
        bounds=[(0, None)] * L,
        constraints=[{"type": "eq", "fun": lambda p: p.sum() - 1.0}],
        method="SLSQP",
        options={"ftol": 1e-14, "maxiter": 500},
    )
    return res.x


def ref_entmax15(z):
    """1.5-entmax: p_i = max(z_i/2 - tau, 0)^2 with tau by Brent root finding."""
    from scipy.optimize import brentq

    z = np.asarray(z, dtype=np.float64) / 2.0
    f = lambda tau: np.sum(np.clip(z - tau, 0, None) ** 2) - 1.0  # noqa: E731
    tau = brentq(f, z.max() - 2.0, z.max(), xtol=1e-15)
    return np.clip(z - tau, 0, None) ** 2


def ref_softmax1(z):
    z = np.asarray(z, dtype=np.float64)
    return ref_softmax(np.concatenate([z, [0.0]]))[:-1]  # an extra logit fixed at 0, dropped


def ref_softpick(z, eps=1e-8):
    e = np.exp(np.asarray(z, dtype=np.float64)) - 1.0
    return np.maximum(e, 0) / (np.abs(e).sum() + eps)


def ref_sa(z, variant="normalized"):
    z = np.asarray(z, dtype=np.float64)
    p = ref_softmax(z)
    if variant == "plain":
        return z * p
    lo, hi = min(z.min(), 0.0), max(z.max(), 0.0)
    return (z - lo) / (hi - lo) * p


def ref_for(name, z):
    """Reference for one visible row ``z = l / T``."""
    n = len(z)
    if name == "softmax":
        return ref_softmax(z)
    if name == "general":  # default F = softplus
        w = np.log1p(np.exp(z))
        return w / w.sum()
    if name == "sparsemax":
        return ref_sparsemax_bruteforce(z)
    if name in ("entmax15", "entmax_alpha"):
        return ref_entmax15(z)
    if name == "ssmax":
        return ref_softmax(0.43 * math.log(n) * np.asarray(z))
    if name == "sa_softmax":
        return ref_sa(z)
    if name == "softmax1":
        return ref_softmax1(z)
    if name == "sigmoid":
        return scipy.special.expit(np.asarray(z) - math.log(n))
    if name == "softpick":
        return ref_softpick(z)
    raise AssertionError(name)


# ---------------------------------------------------------------------------------------------------------
# registry
# ---------------------------------------------------------------------------------------------------------
def test_available_lists_every_normaliser():
    # in registration order; others may be registered after them. topk needs k: tested in tests/test_topk.py
    assert [n for n in nz.available() if n in {*NAMES, "topk"}] == NAMES + ["topk"]
    for n in NAMES:
        f = nz.get(n)
        assert callable(f) and f.name == n
    sums = set(nz.available(sums_to_one=True))
    assert {"softmax", "general", "sparsemax", "entmax15", "entmax_alpha", "ssmax", "topk"} <= sums
    assert not sums & {"sa_softmax", "softmax1", "sigmoid", "softpick"}


def test_get_binds_params():
    x = torch.tensor([0.3, -1.0, 2.0, 0.1], dtype=torch.float64)
    f = nz.get("entmax_alpha", alpha=2.0)
    torch.testing.assert_close(f(x), torch.as_tensor(ref_sparsemax_bruteforce(x.numpy())), atol=1e-9, rtol=0)
    assert f.name == "entmax_alpha"
    g = nz.get("ssmax", s=1.0)
    np.testing.assert_allclose(g(x).numpy(), ref_softmax(math.log(4) * x.numpy()), atol=1e-12)
    h = nz.get("general", F=lambda z: 1 + z**2)
    w = 1 + x.numpy() ** 2
    np.testing.assert_allclose(h(x).numpy(), w / w.sum(), atol=1e-12)


# ---------------------------------------------------------------------------------------------------------
# agreement with independent references
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("T", [0.3, 1.0, 2.5])
def test_matches_reference(name, T):
    rng = np.random.default_rng([NAMES.index(name), int(T * 10)])
    f = nz.get(name)
    for _ in range(8):
        L = int(rng.integers(1, 8))
        l = rng.normal(size=L) * 2
        out = f(torch.tensor(l), T)
        np.testing.assert_allclose(out.numpy(), ref_for(name, l / T), atol=1e-9, rtol=1e-7)


@pytest.mark.parametrize("L", [2, 3, 5, 7])
def test_sparsemax_matches_scipy_projection_and_entmax_package(L):
    import entmax

    rng = np.random.default_rng(L)
    for _ in range(5):
        z = rng.normal(size=L) * 1.5
        ours = nz.sparsemax(torch.tensor(z)).numpy()
        np.testing.assert_allclose(ours, ref_sparsemax_scipy(z), atol=1e-6)
        np.testing.assert_allclose(ours, ref_sparsemax_bruteforce(z), atol=1e-12)
        # the wrapper (shift, clip, mask) must not change what the raw package computes
        np.testing.assert_allclose(ours, entmax.sparsemax(torch.tensor(z), dim=-1).numpy(), atol=1e-12)
        np.testing.assert_allclose(
            nz.entmax15(torch.tensor(z)).numpy(), entmax.entmax15(torch.tensor(z), dim=-1).numpy(), atol=1e-12
        )
        np.testing.assert_allclose(
            nz.entmax_alpha(torch.tensor(z), alpha=1.3).numpy(),
            entmax.entmax_bisect(torch.tensor(z), alpha=1.3, n_iter=80).numpy(),
            atol=1e-9,
        )


def test_entmax_alpha_limits():
    z = torch.tensor([0.5, -0.2, 1.1, 0.9], dtype=torch.float64)
    np.testing.assert_allclose(nz.entmax_alpha(z, alpha=1.5).numpy(), nz.entmax15(z).numpy(), atol=1e-9)
    np.testing.assert_allclose(nz.entmax_alpha(z, alpha=2.0).numpy(), nz.sparsemax(z).numpy(), atol=1e-9)
    # alpha -> 1 approaches softmax
    np.testing.assert_allclose(nz.entmax_alpha(z, alpha=1.001).numpy(), ref_softmax(z.numpy()), atol=5e-3)


def test_general_family_members():
    x = torch.tensor([[0.2, -1.3, 2.0], [4.0, 0.0, -0.5]], dtype=torch.float64)
    torch.testing.assert_close(nz.general(x, torch.exp, 0.7), nz.softmax(x, 0.7))
    torch.testing.assert_close(nz.general(x, log_F=lambda z: z, temperature=0.7), nz.softmax(x, 0.7))
    # theta is forwarded to F
    out = nz.general(x, lambda z, th: th + z**2, theta=3.0)
    w = 3.0 + x.numpy() ** 2
    np.testing.assert_allclose(out.numpy(), w / w.sum(-1, keepdims=True), atol=1e-12)
    # default softplus is stable where softplus underflows in float32
    big = torch.tensor([-1e4, -2e4, -1e4 + 1.0], dtype=torch.float32)
    out = nz.general(big, temperature=1e-2)
    assert torch.isfinite(out).all() and abs(out.sum().item() - 1) < 1e-5
    assert out[2] > 0.999  # softplus(z) ~ e^z far left: this is softmax-like there


def test_softmax1_and_softpick_and_sigmoid_rows_need_not_sum_to_one():
    x = torch.tensor([-3.0, -2.0, -5.0], dtype=torch.float64)
    s1 = nz.softmax1(x).sum().item()
    e = math.exp(-3) + math.exp(-2) + math.exp(-5)
    assert abs(s1 - e / (1 + e)) < 1e-12 and s1 < 1
    assert nz.softpick(x).sum() == 0.0  # all logits negative -> no token picked
    assert 0 < nz.sigmoid(x).sum() < 1
    s = nz.sigmoid(torch.zeros(7, dtype=torch.float64))
    torch.testing.assert_close(s.sum(), torch.tensor(7 / 8, dtype=torch.float64))  # sigma(-log n) = 1/(n+1)


def test_sa_softmax_variants_and_zero_row():
    z = np.array([1.5, -0.5, 0.25])
    np.testing.assert_allclose(nz.sa_softmax(torch.tensor(z), variant="plain").numpy(), ref_sa(z, "plain"), atol=1e-12)
    zero = torch.zeros(4, dtype=torch.float64)
    torch.testing.assert_close(nz.sa_softmax(zero), nz.softmax(zero))  # documented convention
    # the normalised factor is temperature invariant
    np.testing.assert_allclose(nz.sa_softmax(torch.tensor(z), 0.5).numpy(), ref_sa(z / 0.5), atol=1e-12)


def test_ssmax_uses_visible_count_and_single_token():
    torch.testing.assert_close(nz.ssmax(torch.tensor([3.0])), torch.tensor([1.0]))
    l = torch.tensor([0.5, 1.0, -0.3, 2.0, 0.0], dtype=torch.float64)
    mask = torch.tensor([True, True, True, False, False])
    out = nz.ssmax(l, 1.0, mask=mask)
    np.testing.assert_allclose(out[:3].numpy(), ref_softmax(0.43 * math.log(3) * l[:3].numpy()), atol=1e-12)
    assert (out[3:] == 0).all()


def test_ssmax_is_sharper_than_softmax_from_11_visible_tokens():
    """prop-ssmax-sharpens: s log n > 1 from n = 11 on (s = 0.43), so SSMax has the lower entropy and the larger top
    weight there; below, the factor is < 1 and SSMax is the flatter of the two."""
    assert 0.43 * math.log(11) > 1 > 0.43 * math.log(10)
    gen = torch.Generator().manual_seed(11)
    for n in (2, 5, 10, 11, 30, 200):
        l = torch.randn(64, n, generator=gen, dtype=torch.float64) * 2
        ss, sm = nz.ssmax(l), torch.softmax(l, -1)
        entropy = [-(a * torch.log(a.clamp_min(1e-300))).sum(-1) for a in (ss, sm)]
        if n >= 11:
            assert (entropy[0] <= entropy[1] + 1e-12).all()
            assert (ss.max(-1).values >= sm.max(-1).values - 1e-12).all()
        else:
            assert (entropy[0] >= entropy[1] - 1e-12).all()


# ---------------------------------------------------------------------------------------------------------
# stability, masking, batching
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", NAMES)
def test_stable_over_temperature_and_logit_range(name, dtype):
    gen = torch.Generator().manual_seed(7)
    x = (torch.rand(6, 9, generator=gen, dtype=torch.float64) * 2 - 1) * 1e4
    x[0] = 1e4
    x[1] = -1e4
    x[2, :3] = torch.tensor([1e4, 1e4 - 1e-3, -1e4])
    x = x.to(dtype)
    mask = torch.ones(6, 9, dtype=torch.bool)
    mask[3, 4:] = False
    mask[4] = False  # fully masked row
    f = nz.get(name)
    for T in [1e-4, 1e-2, 1.0, 1e2, 1e4]:
        for m in (None, mask):
            y = f(x, T, mask=m)
            assert y.dtype == dtype and y.shape == x.shape
            assert torch.isfinite(y).all(), (name, T, dtype)
            if name != "sa_softmax":
                assert (y >= 0).all()
            if m is not None:
                assert (y[4] == 0).all() and (y[3, 4:] == 0).all()
            if name in nz.available(sums_to_one=True):
                rows = [0, 1, 2, 3, 5]
                torch.testing.assert_close(y[rows].sum(-1), torch.ones(5, dtype=dtype), atol=2e-5, rtol=0)


@pytest.mark.parametrize("name", NAMES)
def test_causal_mask_equals_prefix_computation(name):
    gen = torch.Generator().manual_seed(3)
    L = 6
    x = torch.randn(2, L, L, generator=gen, dtype=torch.float64) * 3
    mask = torch.tril(torch.ones(L, L, dtype=torch.bool))
    f = nz.get(name)
    y = f(x, 0.8, mask=mask)  # mask broadcasts over the leading batch dim
    for b in range(2):
        for t in range(L):
            torch.testing.assert_close(y[b, t, : t + 1], f(x[b, t, : t + 1], 0.8))
            assert (y[b, t, t + 1 :] == 0).all()


@pytest.mark.parametrize("name", NAMES)
def test_neg_inf_logits_are_masked_and_dim_and_numpy(name):
    f = nz.get(name)
    x = torch.tensor([[0.3, -math.inf, 1.2, 0.0]], dtype=torch.float64)
    m = torch.tensor([[True, False, True, True]])
    torch.testing.assert_close(f(x, 1.3), f(torch.nan_to_num(x, neginf=0.0), 1.3, mask=m))
    full = torch.full((3,), -math.inf, dtype=torch.float64)
    assert (f(full) == 0).all()
    y = torch.randn(4, 5, dtype=torch.float64)
    torch.testing.assert_close(f(y, 0.9, dim=0), f(y.T, 0.9).T)
    out = f(y.numpy(), 0.9)
    assert isinstance(out, np.ndarray)
    np.testing.assert_allclose(out, f(y, 0.9).numpy())


# ---------------------------------------------------------------------------------------------------------
# properties (hypothesis)
# ---------------------------------------------------------------------------------------------------------
rows = hnp.arrays(np.float64, st.integers(1, 12), elements=st.floats(-50, 50, allow_nan=False))
temps = st.floats(1e-2, 1e2)


@HYP
@given(rows, temps, st.sampled_from(sorted(nz.available(sums_to_one=True))))
def test_rows_sum_to_one(l, T, name):
    y = nz.get(name, **({"k": 3} if name == "topk" else {}))(torch.tensor(l), T)
    assert abs(y.sum().item() - 1.0) < 1e-9
    assert (y >= 0).all()


@HYP
@given(rows, temps, st.floats(-1e3, 1e3), st.sampled_from(["softmax", "sparsemax", "entmax15", "ssmax"]))
def test_shift_invariance(l, T, c, name):
    f = nz.get(name)
    a = f(torch.tensor(l), T)
    b = f(torch.tensor(l + c), T)
    torch.testing.assert_close(a, b, atol=1e-9, rtol=1e-6)


@HYP
@given(rows, temps, st.sampled_from(NAMES), st.randoms(use_true_random=False))
def test_permutation_equivariance(l, T, name, rnd):
    perm = list(range(len(l)))
    rnd.shuffle(perm)
    f = nz.get(name)
    a = f(torch.tensor(l), T)
    b = f(torch.tensor(l[perm]), T)
    torch.testing.assert_close(a[perm], b, atol=1e-12, rtol=1e-9)


# every parameter value that validation accepts gives finite weights (or a ValueError naming the temperature for
# the two normalisers that cannot shift their logits first): extreme temperatures, logits up to the dtype's range,
# masked positions, and the extreme ends of s, alpha, bias and eps
_DTYPES = {
    "float32": (torch.float32, 32),
    "float64": (torch.float64, 64),
    "float16": (torch.float16, 16),
    "bfloat16": (torch.bfloat16, 32),
}
_TINY, _HUGE = 5e-324, 1.7976931348623157e308


@st.composite
def extreme_cases(draw):
    dname = draw(st.sampled_from(sorted(_DTYPES)))
    dt, width = _DTYPES[dname]
    fmax = float(torch.finfo(dt).max)
    n = draw(st.integers(1, 6))
    vals = draw(st.lists(st.one_of(st.floats(-fmax, fmax, width=width), st.just(-math.inf)), min_size=n, max_size=n))
    x = torch.tensor(vals, dtype=torch.float64).to(dt)
    x = torch.where(torch.isfinite(x) | (x == -math.inf), x, torch.zeros_like(x))  # bfloat16 rounding to +-inf
    T = draw(st.floats(_TINY, _HUGE))
    name = draw(st.sampled_from(NAMES))
    params = {}
    if name == "ssmax":
        params["s"] = draw(st.floats(_TINY, _HUGE))
    elif name == "entmax_alpha":
        params["alpha"] = draw(st.floats(1.0, _HUGE, exclude_min=True))
    elif name == "sigmoid":
        params["bias"] = draw(st.one_of(st.none(), st.floats(-_HUGE, _HUGE)))
    elif name == "softpick":
        params["eps"] = draw(st.floats(_TINY, _HUGE))
    elif name == "sa_softmax":
        params["variant"] = draw(st.sampled_from(["normalized", "plain"]))
    return dname, x, T, name, params


@settings(
    max_examples=400,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(extreme_cases())
def test_no_accepted_parameter_value_gives_nan(case):
    dname, x, T, name, params = case
    f = nz.get(name, **params)
    try:
        y = f(x, T)
    except ValueError as exc:  # only where logits / T itself overflows and no shift can avoid it
        assert name == "general" or params.get("variant") == "plain", exc
        assert "temperature" in str(exc)
        return
    assert not torch.isnan(y).any(), (dname, x, T, name, params, y)
    if not (name == "sa_softmax" and params.get("variant") == "plain"):  # plain SA weights scale like l / T
        assert torch.isfinite(y).all() and (y >= 0).all(), (dname, x, T, name, params, y)
    if name in nz.available(sums_to_one=True) and bool((x != -math.inf).any()):
        tol = 5e-2 if dname in ("float16", "bfloat16") else 1e-5
        assert abs(float(y.double().sum()) - 1.0) < tol, (dname, x, T, name, params, y)


def test_temperature_below_the_dtype_range_is_exact():
    # 1e-46 rounds to 0 in float32: the old x / T gave 0 / 0 = NaN at the row maximum
    x = torch.tensor([0.0, 1.0, -2.0])
    for name in ("softmax", "sparsemax", "entmax15", "entmax_alpha", "ssmax", "softmax1", "softpick", "sa_softmax"):
        torch.testing.assert_close(nz.get(name)(x, 1e-46), torch.tensor([0.0, 1.0, 0.0]), msg=name)
    assert nz.sigmoid(x, 1e-46).tolist() == [0.25, 1.0, 0.0]  # sigmoid(l / T - log 3), l = 0 stays at 1 / 4


def test_softmax1_and_softpick_tiny_temperature_pick_the_maximum():
    # logits / T beyond the float32 range: the old code clipped them to equal values and split the weight
    x = torch.tensor([[5.0, 900.0, 300.0, -1.0]])
    for name in ("softmax1", "softpick"):
        torch.testing.assert_close(nz.get(name)(x, 1e-40), torch.tensor([[0.0, 1.0, 0.0, 0.0]]), msg=name)
        y64 = nz.get(name)(x.double(), 1e-40)
        torch.testing.assert_close(y64, torch.tensor([[0.0, 1.0, 0.0, 0.0]], dtype=torch.float64), msg=name)


def test_unshiftable_normalisers_reject_overflowing_temperature():
    x = torch.tensor([5.0, 900.0, -1.0])
    with pytest.raises(ValueError, match="temperature=1e-40 is too small for these logits in general"):
        nz.general(x, temperature=1e-40)
    with pytest.raises(ValueError, match="temperature=1e-40 is too small"):
        nz.sa_softmax(x, 1e-40, variant="plain")
    # the same temperature in float64 is within range and exact
    y = nz.general(x.double(), temperature=1e-40)
    torch.testing.assert_close(y, torch.tensor([5.0, 900.0, 0.0], dtype=torch.float64) / 905.0)


def test_ssmax_huge_s_in_float32_is_the_argmax():
    x = torch.tensor([[0.3, 1.2, -0.7, 0.9]])
    y = nz.ssmax(x, s=1e39)  # s log n overflows float32: the old code returned a row of NaN
    torch.testing.assert_close(y, torch.tensor([[0.0, 1.0, 0.0, 0.0]]))


def test_softmax_is_not_shift_invariant_for_softmax1():
    # a property test that must fail for the wrong normaliser: softmax1 has an implicit 0 logit
    l = torch.tensor([0.0, 1.0], dtype=torch.float64)
    assert not torch.allclose(nz.softmax1(l), nz.softmax1(l + 5))


# ---------------------------------------------------------------------------------------------------------
# bad input
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("T", [0.0, -1.0, float("nan"), float("inf"), "abc"])
def test_bad_temperature(name, T):
    with pytest.raises(ValueError, match="temperature"):
        nz.get(name)(torch.ones(3), T)


@pytest.mark.parametrize("name", NAMES)
def test_bad_logits_and_mask(name):
    f = nz.get(name)
    with pytest.raises(ValueError, match="logits"):
        f(torch.ones(2, 0))
    with pytest.raises(ValueError, match="logits"):
        f(torch.tensor(1.0))
    with pytest.raises(ValueError, match="logits"):
        f(torch.tensor([0.0, float("nan")]))
    with pytest.raises(ValueError, match="logits"):
        f(torch.tensor([0.0, float("inf")]))
    with pytest.raises(ValueError, match="mask"):
        f(torch.ones(2, 3), mask=torch.ones(2, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="mask"):
        f(torch.ones(2, 3), mask=torch.ones(2, 3))
    with pytest.raises(ValueError, match="dim"):
        f(torch.ones(2, 3), dim=2)


@pytest.mark.parametrize("T", ["2", True, b"1", np.bool_(True)], ids=repr)
def test_temperature_strings_and_booleans_are_rejected(T):
    with pytest.raises(ValueError, match="temperature must be a real number > 0"):
        nz.softmax(torch.ones(3), T)


def test_numpy_integer_dim_is_an_integer():
    y = torch.randn(4, 5, dtype=torch.float64)
    torch.testing.assert_close(nz.softmax(y, dim=np.int64(0)), nz.softmax(y, dim=0))
    with pytest.raises(ValueError, match=r"dim must be an integer in \[-2, 1\]"):
        nz.softmax(y, dim=1.5)


def test_mask_on_meta_device_says_so():
    with pytest.raises(ValueError, match="mask is on the 'meta' device"):
        nz.softmax(torch.randn(3), mask=torch.ones(3, dtype=torch.bool, device="meta"))
    with pytest.raises(ValueError, match="logits are on the 'meta' device"):
        nz.softmax(torch.randn(3, device="meta"))


def test_general_theta_needs_F():
    x = torch.tensor([0.5, -1.0, 2.0])
    with pytest.raises(ValueError, match="theta is a parameter of a user-supplied F or log_F"):
        nz.get("general", theta=1.0)(x)  # used to be a TypeError from the default softplus
    with pytest.raises(ValueError, match="theta"):
        nz.general(x, theta=1.0)
    y = nz.get("general", F=lambda z, th: 1 + (th * z) ** 2, theta=2.0)(x)
    torch.testing.assert_close(y, (1 + (2 * x) ** 2) / (1 + (2 * x) ** 2).sum())


def test_general_F_not_callable_and_log_F_wrong_shape():
    x = torch.randn(2, 5)
    with pytest.raises(ValueError, match="F must be callable"):
        nz.general(x, F=5)
    with pytest.raises(ValueError, match="log_F must be callable"):
        nz.general(x, log_F="log")
    with pytest.raises(ValueError, match=r"log_F must act elementwise: log_F\(z\) has shape \(2, 2\)"):
        nz.general(x, log_F=lambda z: z[..., :2])
    with pytest.raises(ValueError, match="log_F must return a tensor of real numbers"):
        nz.general(x, log_F=lambda z: "abc")


@pytest.mark.parametrize("n_iter", [0, -3, "abc", 2.5, None])
def test_entmax_alpha_bad_n_iter(n_iter):
    with pytest.raises(ValueError, match=r"n_iter must be an integer in \[1, 1000\]"):
        nz.entmax_alpha(torch.randn(4), n_iter=n_iter)  # n_iter=0 was an UnboundLocalError inside entmax


@pytest.mark.parametrize("kw", [{"alpha": "2"}, {"alpha": True}], ids=repr)
def test_entmax_alpha_string_alpha_rejected(kw):
    with pytest.raises(ValueError, match="alpha"):
        nz.entmax_alpha(torch.randn(4), **kw)


def test_bad_params():
    x = torch.ones(3)
    with pytest.raises(ValueError, match="name"):
        nz.get("softmax2")
    with pytest.raises(ValueError, match="alpha"):
        nz.entmax_alpha(x, alpha=1.0)
    with pytest.raises(ValueError, match="alpha"):
        nz.get("entmax_alpha", alpha=0.5)(x)
    with pytest.raises(ValueError, match="s "):
        nz.ssmax(x, s=0.0)
    with pytest.raises(ValueError, match="eps"):
        nz.softpick(x, eps=-1e-8)
    with pytest.raises(ValueError, match="variant"):
        nz.sa_softmax(x, variant="other")
    with pytest.raises(ValueError, match="bias"):
        nz.sigmoid(x, bias=float("nan"))
    with pytest.raises(ValueError, match="params"):
        nz.get("softmax", alpha=2.0)
    with pytest.raises(ValueError, match="F must"):
        nz.general(torch.tensor([0.0, 1.0]), lambda z: z)  # F(0) = 0 is not positive
    with pytest.raises(ValueError, match="F must"):
        nz.general(torch.tensor([0.0, 1.0]), lambda z: -torch.ones_like(z))
    with pytest.raises(ValueError, match="F must"):
        nz.general(torch.tensor([1e4]), torch.exp, 1e-2)  # overflow: inf is not a finite value
    with pytest.raises(ValueError, match="F must"):
        nz.general(torch.tensor([0.0, 1.0]), lambda z: torch.ones(5))
    with pytest.raises(ValueError, match="F must"):
        nz.make_general(3.0)
