"""Tests for attn_lib.theory: brute force, exact enumeration, Monte Carlo and property checks."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import scipy.special
import torch
from hypothesis import find, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from attn_lib import theory as th

HYP = settings(max_examples=60, derandomize=True, deadline=None, database=None)


def random_rows(rng, B, L, d, sharp=(0.1, 5.0)):
    """Softmax weights of random sharpness and Gaussian vectors of random scale."""
    logits = rng.normal(size=(B, L)) * rng.uniform(*sharp, size=(B, 1))
    alpha = scipy.special.softmax(logits, axis=-1)
    X = rng.normal(size=(B, L, d)) * rng.uniform(0.2, 3.0, size=(B, 1, 1))
    return alpha, X


# brute-force references -----------------------------------------------------------------------------------
def bf_top(alpha, N):
    order = sorted(range(len(alpha)), key=lambda i: (-alpha[i], i))
    return order[:N]


def bf_dtilde(alpha, X, sel):
    s = sum(alpha[j] * X[j] for j in sel)
    return sum(np.linalg.norm(alpha[i] * X[i] - s) for i in range(len(alpha)) if i not in sel)


def bf_expectation(alpha, X, N):
    vals = [bf_dtilde(alpha, X, set(c)) for c in itertools.combinations(range(len(alpha)), N)]
    return float(np.mean(vals))


def bf_d1(X, sel):
    out = [i for i in range(len(X)) if i not in sel]
    return max((np.linalg.norm(X[i] - X[j]) for i in out for j in sel), default=0.0)


# ---------------------------------------------------------------------------------------------------------
# top-N, distance
# ---------------------------------------------------------------------------------------------------------
def test_top_n_ties_to_lower_index():
    a = np.array([0.2, 0.3, 0.2, 0.3, 0.0])
    assert th.top_n_indices(a, 3).tolist() == [1, 3, 0]
    assert th.top_n_mask(a, 2).tolist() == [False, True, False, True, False]
    batch = np.stack([a, a[::-1]])
    assert th.top_n_indices(batch, 2).tolist() == [[1, 3], [1, 3]]
    assert th.top_n_indices(torch.tensor(a), 1).tolist() == [1]


@HYP
@given(hnp.arrays(np.float64, st.integers(1, 9), elements=st.floats(0, 1)), st.data())
def test_top_n_matches_sorted_reference(alpha, data):
    N = data.draw(st.integers(1, alpha.size))
    assert th.top_n_indices(alpha, N).tolist() == bf_top(alpha, N)


def test_distance_against_brute_force_both_forms():
    rng = np.random.default_rng(0)
    for _ in range(30):
        L, d = int(rng.integers(2, 10)), int(rng.integers(1, 5))
        alpha, X = random_rows(rng, 1, L, d)
        alpha, X = alpha[0], X[0]
        N = int(rng.integers(1, L + 1))
        sel = bf_top(alpha, N)
        assert abs(th.distance(alpha, X, N) - bf_dtilde(alpha, X, set(sel))) < 1e-12
        s = sum(alpha[j] * X[j] for j in sel)
        outer = sum((alpha[i] * X[i] for i in range(L) if i not in sel), np.zeros(d))
        assert abs(th.distance(alpha, X, N, form="vector") - np.linalg.norm(outer - s)) < 1e-12
        rnd = rng.choice(L, size=N, replace=False)
        assert abs(th.distance(alpha, X, N, selected=rnd) - bf_dtilde(alpha, X, set(rnd.tolist()))) < 1e-12
    assert th.distance(alpha, X, L) == 0.0
    np.testing.assert_allclose(th.context_vector(alpha, X, L), alpha @ X)


# ---------------------------------------------------------------------------------------------------------
# Theorem 1 (fixed set)
# ---------------------------------------------------------------------------------------------------------
def test_theorem1_dmax_holds_on_20000_instances():
    rng = np.random.default_rng(1)
    worst = 0.0
    count = 0
    for L in (2, 5, 12, 30, 60):
        for N in (1, 2, max(1, L // 3), L - 1):
            alpha, X = random_rows(rng, 1000, L, 8, sharp=(0.01, 10.0))
            dt = th.distance(alpha, X, N)
            dm = th.theorem1_dmax(alpha, X, N)
            assert np.all(dt <= dm * (1 + 1e-12) + 1e-12)
            worst = max(worst, float(np.max(dt / np.maximum(dm, 1e-300))))
            count += 1000
    assert count >= 19000
    assert worst > 0.9  # the bound is nearly attained (the book's check: worst ratio ~1.0)


def test_theorem1_d1_and_parts_against_brute_force():
    rng = np.random.default_rng(2)
    alpha, X = random_rows(rng, 4, 7, 3)
    for N in (1, 3, 6, 7):
        parts = th.theorem1_dmax(alpha, X, N, return_parts=True)
        for b in range(4):
            sel = bf_top(alpha[b], N)
            assert abs(parts["d1"][b] - bf_d1(X[b], set(sel))) < 1e-9
            abar = alpha[b][sel].sum()
            mx = max(np.linalg.norm(X[b][j]) for j in sel)
            ref = (1 - abar) * bf_d1(X[b], set(sel)) + ((7 - N) * abar - (1 - abar)) * mx
            assert abs(parts["d_max"][b] - ref) < 1e-9
    assert np.all(th.theorem1_dmax(alpha, X, 7) == 0)


def test_theorem1_tight_example():
    # one excluded token at distance d1 from a single selected token with all the mass except eps
    eps = 1e-9
    alpha = np.array([1 - eps, eps])
    X = np.array([[1.0, 0.0], [-1.0, 0.0]])
    assert th.distance(alpha, X, 1) / th.theorem1_dmax(alpha, X, 1) > 0.999


# ---------------------------------------------------------------------------------------------------------
# Theorem 1 (random selection): exact enumeration, Jensen gap, Monte Carlo
# ---------------------------------------------------------------------------------------------------------
def test_exact_enumeration_matches_brute_force():
    rng = np.random.default_rng(3)
    for L in (3, 5, 7):
        alpha, X = random_rows(rng, 3, L, 2)
        for N in range(1, L + 1):
            ours = th.expected_distance_exact(alpha, X, N)
            for b in range(3):
                assert abs(ours[b] - bf_expectation(alpha[b], X[b], N)) < 1e-12


def test_jensen_gap_bound_by_enumeration_300_cases():
    rng = np.random.default_rng(4)
    rel_lm1, rel_l = [], []
    cases = 0
    for L in range(3, 11):
        for N in range(1, L - 1):
            B = 12 if L <= 8 else 4
            alpha, X = random_rows(rng, B, L, 4)
            exact = th.expected_distance_exact(alpha, X, N)
            e1 = th.expectation_e1(alpha, X, N)
            gap = exact - e1
            bound = th.jensen_gap_bound(alpha, X, N)
            crude = th.jensen_gap_bound(alpha, X, N, crude=True)
            assert np.all(gap >= -1e-12), (L, N)
            assert np.all(gap <= bound + 1e-12), (L, N)
            assert np.all(bound <= crude + 1e-12)
            np.testing.assert_allclose(th.jensen_gap_exact(alpha, X, N), gap, atol=1e-12)
            rel_lm1.extend(np.abs(gap) / exact)
            rel_l.extend(np.abs(exact - th.expectation_e1(alpha, X, N, p="L")) / exact)
            cases += B
    assert cases >= 300
    # Reading the paper, §Expectation forms: p = N/(L-1) is the more accurate reading (~10% vs ~20% mean relative error)
    assert np.mean(rel_lm1) < np.mean(rel_l)


def test_e1_closed_form_matches_definition_and_gap_zero_at_n_equals_l_minus_1():
    rng = np.random.default_rng(5)
    alpha, X = random_rows(rng, 1, 6, 3)
    a, x = alpha[0], X[0]
    for N in range(1, 6):
        p = N / 5
        A = a[:, None] * x
        ref = (6 - N) / 6 * sum(np.linalg.norm(A[i] - p * (A.sum(0) - A[i])) for i in range(6))
        assert abs(th.expectation_e1(a, x, N) - ref) < 1e-12
        assert abs(th.expectation_e1(a, x, N, p=p) - ref) < 1e-12
    # N = L - 1: selection given i excluded is deterministic -> E1 exact, gap bound 0
    assert th.jensen_gap_bound(a, x, 5) == 0
    assert abs(th.expected_distance_exact(a, x, 5) - th.expectation_e1(a, x, 5)) < 1e-12
    assert th.expectation_e1(a, x, 6) == 0


def test_monte_carlo_matches_enumeration_within_standard_error():
    rng = np.random.default_rng(6)
    alpha, X = random_rows(rng, 20, 9, 3)
    exact = th.expected_distance_exact(alpha, X, 3)
    mc, se = th.expected_distance_mc(alpha, X, 3, n_samples=400, seed=0, return_stderr=True)
    z = (mc - exact) / se
    assert np.all(np.abs(z) < 4.5)
    assert abs(np.mean(z)) < 1.0  # 20 rows: the mean z-score is ~N(0, 1/20)
    again = th.expected_distance_mc(alpha, X, 3, n_samples=400, seed=0)
    np.testing.assert_array_equal(mc, again)  # seeded
    assert not np.array_equal(mc, th.expected_distance_mc(alpha, X, 3, n_samples=400, seed=1))


def test_e2_identity_and_bound():
    rng = np.random.default_rng(7)
    for L in (4, 20, 80):
        alpha, X = random_rows(rng, 300, L, 5)
        for N in (1, 3):
            e2 = th.expectation_e2(alpha, X, N)
            dt = th.distance(alpha, X, N)
            res = th.corollary2_e2_identity(alpha, X, N)
            np.testing.assert_allclose(res["difference"], e2 - dt, atol=1e-12)
            np.testing.assert_allclose(res["identity"], e2 - dt, atol=1e-10)
            assert np.all(np.abs(e2 - dt) <= res["bound"] + 1e-12)


# ---------------------------------------------------------------------------------------------------------
# Corollary 2
# ---------------------------------------------------------------------------------------------------------
def test_corollary2_facts_hold():
    rng = np.random.default_rng(8)
    for L in (3, 6, 9):
        alpha, X = random_rows(rng, 40, L, 3, sharp=(0.01, 8))
        for N in range(1, L):
            dt = th.distance(alpha, X, N)
            lo, hi = th.corollary2_linear_bounds(alpha, X, N)
            assert np.all(lo <= dt + 1e-12) and np.all(dt <= hi + 1e-12)
            exact = th.expected_distance_exact(alpha, X, N)
            assert np.all(exact <= th.corollary2_random_bound(alpha, X, N) + 1e-12)
            for p in ("L-1", "L"):
                e1 = th.expectation_e1(alpha, X, N, p=p)
                assert np.all(e1 <= th.corollary2_e1_bound(alpha, X, N, p=p) + 1e-12)
            lim = th.corollary2_limits(alpha, X, N)
            assert np.all(np.abs(lim["remainder"]) <= lim["remainder_bound"] + 1e-12)
            assert np.all(lim["remainder_bound"] <= lim["remainder_bound_loose"] + 1e-12)


def test_corollary2_regimes():
    rng = np.random.default_rng(9)
    # (ii) N = L: everything vanishes
    alpha, X = random_rows(rng, 5, 7, 3)
    for f in (th.distance, th.theorem1_dmax, th.expectation_e1, th.expectation_e2):
        assert np.all(f(alpha, X, 7) == 0)
    assert th.corollary2_limits(alpha, X, 7)["outer_factor"] == 0
    # (i) growing L with a dominant first token: d~ grows linearly, the random-selection expectation stays bounded
    d = 4
    v0 = rng.normal(size=d)
    dts, mcs, slopes = [], [], []
    for L in (32, 64, 128, 256):
        logits = np.concatenate([[6.0], rng.normal(size=L - 1) * 0.3])
        alpha = scipy.special.softmax(logits)
        X = rng.normal(size=(L, d))
        X[0] = v0
        dts.append(th.distance(alpha, X, 1))
        mcs.append(th.expected_distance_mc(alpha, X, 1, n_samples=64, seed=0))
        slopes.append(np.linalg.norm(th.context_vector(alpha, X, 1)))
        assert mcs[-1] <= th.corollary2_random_bound(alpha, X, 1)
    assert dts[-1] / dts[0] > 5  # roughly x8 over a x8 range of L
    assert mcs[-1] / mcs[0] < 2
    # regime (i) dominance: E1 ~ individual terms when N ||z|| << sum alpha_i ||x_i|| fails for a dominant token,
    # but for flat weights the remainder is small relative to E1
    alpha = np.full(400, 1 / 400)
    X = rng.normal(size=(400, 3))
    lim = th.corollary2_limits(alpha, X, 1)
    assert lim["dominance_ratio"] < 0.2 and abs(lim["remainder"]) / lim["e1"] < 0.05


# ---------------------------------------------------------------------------------------------------------
# separability (definition of N_s) and Theorem 2
# ---------------------------------------------------------------------------------------------------------
def test_separability_unit_cases():
    alpha = np.array([0.3, 0.3, 0.3, 0.05, 0.05])
    sel = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]])  # D = ||sum of the other two a_j|| = 0.3, 0.3, 0.3*sqrt2
    s = 0.3 * sel.sum(0)

    def with_rho(rho):
        # non-selected tokens placed so that ||a_j - s|| = rho and 2 rho
        outer = np.array([(s + rho * np.array([1.0, 0.0])) / 0.05, (s + 2 * rho * np.array([0.0, -1.0])) / 0.05])
        return np.vstack([sel, outer])

    # every selected vector inside the ball -> 1
    assert th.separability(alpha, with_rho(0.5), 3) == 1.0
    assert th.distinguishable_count(alpha, with_rho(0.5), 3) == 3
    # one selected vector outside (0.424 > rho_min = 0.35) -> (N-1)/N
    assert th.separability(alpha, with_rho(0.35), 3) == pytest.approx(2 / 3)
    # strict convention: a selected token exactly at rho_min is not counted
    X = with_rho(0.3 * math.sqrt(2))
    assert th.distinguishable_count(alpha, X, 3) == 2
    # N = 1 -> 1; N = L: no outer token, rho_min = inf -> 1
    assert th.separability(alpha, with_rho(0.35), 1) == 1.0
    assert th.separability(alpha, with_rho(0.35), 5) == 1.0
    # fixed radius: closed ball for the selected, outer indicator for the rest
    X = with_rho(0.5)
    assert th.separability(alpha, X, 3, r=0.3 * math.sqrt(2) + 1e-12) == 1.0
    assert th.separability(alpha, X, 3, r=0.3) == pytest.approx(2 / 3)
    assert th.separability(alpha, X, 3, r=0.5) == 0.0  # an outer token on the boundary -> indicator 0
    # batch
    np.testing.assert_allclose(
        th.separability(np.stack([alpha, alpha]), np.stack([with_rho(0.5), with_rho(0.35)]), 3), [1.0, 2 / 3]
    )


def test_theorem2_xi_matches_double_sum():
    rng = np.random.default_rng(10)
    alpha = scipy.special.softmax(rng.normal(size=12))
    M, delta, N = 1.5, 0.7, 5
    idx = th.top_n_indices(alpha, N)
    xi = th.theorem2_xi(alpha, N, M, delta)
    for k, i in enumerate(idx):
        others = [j for j in idx if j != i]
        ref = M**2 * sum(alpha[j] ** 2 for j in others) + (M**2 - delta**2 / 2) * sum(
            alpha[j] * alpha[m] for j in others for m in others if j != m
        )
        assert abs(xi[k] - math.sqrt(ref)) < 1e-12


def sphere(rng, shape, M):
    v = rng.normal(size=shape)
    return M * v / np.linalg.norm(v, axis=-1, keepdims=True)


def test_theorem2_monte_carlo_on_sphere():
    rng = np.random.default_rng(11)
    L, d, M, S = 24, 8, 1.0, 2000
    for N in (2, 4, 8):
        alpha = scipy.special.softmax(rng.normal(size=L) * 1.5)
        X = sphere(rng, (S, L, d), M)
        A = np.broadcast_to(alpha, (S, L))
        Xi = th.selected_offsets(A, X, N)  # (S, N)
        # per-sample delta: X_i <= xi_i(delta_s) pointwise
        diff = X[:, :, None, :] - X[:, None, :, :]
        pd = np.linalg.norm(diff, axis=-1) + np.eye(L) * 1e9
        delta_s = pd.min(axis=(1, 2))
        for s in range(0, S, 50):
            assert np.all(Xi[s] <= th.theorem2_xi(alpha, N, M, delta_s[s]) + 1e-12)
        delta = float(delta_s.min())
        xi = th.theorem2_xi(alpha, N, M, delta)
        assert np.all(Xi <= xi + 1e-12)
        assert np.all(Xi.mean(0) <= xi + 1e-12)  # E X_i <= xi_i
        # lower bound (Markov) on the fraction of selected tokens inside B_r(s), fixed r
        for r in (0.5 * xi.mean(), xi.mean(), 2 * xi.max()):
            frac_inside = (Xi <= r).mean()
            lower, upper = th.theorem2_bounds(alpha, N, M, delta, r)
            assert lower <= frac_inside + 1e-12
            # valid Hoeffding form at the Monte-Carlo means (sampling error ~ 1/sqrt(S))
            valid = th.theorem2_hoeffding_upper(Xi.mean(0), r, M)
            assert frac_inside <= valid + 3 / math.sqrt(S)
            # the paper's form uses xi >= E X_i in the exponent, so it is never above the valid form
            assert upper <= valid + 1e-12


def test_theorem2_bounds_formula():
    alpha = np.array([0.4, 0.3, 0.2, 0.1])
    xi = th.theorem2_xi(alpha, 3, 1.0, 0.5)
    lo, up = th.theorem2_bounds(alpha, 3, 1.0, 0.5, 0.2)
    assert lo == pytest.approx(1 - xi.sum() / (0.2 * 3))
    assert up == pytest.approx(np.mean(np.exp(-(np.clip(xi - 0.2, 0, None) ** 2) / 2)))
    # N = 1: xi = 0 -> lower bound 1
    assert th.theorem2_bounds(alpha, 1, 1.0, 0.5, 0.2) == (1.0, 1.0)


# ---------------------------------------------------------------------------------------------------------
# Lemma 1, Corollary 1
# ---------------------------------------------------------------------------------------------------------
F_FAMILY = {
    "exp": (lambda l: np.exp(l / 0.7), lambda a: (math.exp(-2 * a / 0.7), math.exp(2 * a / 0.7))),
    "softplus": (
        lambda l: np.log1p(np.exp(l / 0.7)),
        lambda a: (
            math.log1p(math.exp(-a / 0.7)) / math.log1p(math.exp(a / 0.7)),
            math.log1p(math.exp(a / 0.7)) / math.log1p(math.exp(-a / 0.7)),
        ),
    ),
    "rational": (lambda l: 1 + (l / 0.7) ** 2, lambda a: (1 / (1 + (a / 0.7) ** 2), 1 + (a / 0.7) ** 2)),
}


@pytest.mark.parametrize("name", list(F_FAMILY))
def test_lemma1_constants_and_bounds(name):
    F, closed = F_FAMILY[name]
    rng = np.random.default_rng(12)
    a = 1.3
    C1, C2 = th.lemma1_constants(F, a)
    assert C1 == pytest.approx(closed(a)[0], rel=1e-9) and C2 == pytest.approx(closed(a)[1], rel=1e-9)
    for L in (2, 10, 100, 1000, 10000):
        l = rng.uniform(-a, a, size=(5, L))
        w = F(l)
        alpha = w / w.sum(-1, keepdims=True)
        assert np.all(C1 <= L * alpha + 1e-12) and np.all(L * alpha <= C2 + 1e-12)
    lo, _hi = th.lemma1_bounds(F, a, [10, 100])
    np.testing.assert_allclose(lo, [C1 / 10, C1 / 100])


def test_lemma1_interior_extremum_and_torch_F():
    # min of 1 + (l - 0.3)^2 is interior (l = 0.3, not on the grid); max at l = -a
    _C1, C2 = th.lemma1_constants(lambda l: 1 + (l - 0.3) ** 2, 1.0, grid=11)
    assert C2 == pytest.approx(1 + 1.3**2, rel=1e-9)
    _C1t, C2t = th.lemma1_constants(torch.exp, 2.0)
    assert C2t == pytest.approx(math.exp(4.0))
    assert th.lemma1_constants(lambda l, th_: th_ + l**2, 1.0, theta=2.0)[1] == pytest.approx(1.5)


def test_length_aware_normaliser_escapes_lemma1():
    # F depends on L (logits scaled by log L): max weight does not decay like 1/L
    rng = np.random.default_rng(13)
    for L in (100, 10000):
        l = rng.uniform(-1, 1, size=L)
        l[0] = 1.0
        alpha = scipy.special.softmax(3 * math.log(L) * l)
        _C1, C2 = th.lemma1_constants(lambda z: np.exp(z), 1.0)
        if L == 10000:
            assert L * alpha.max() > C2


def test_corollary1_bounds_hold():
    rng = np.random.default_rng(14)
    for L in (2, 16, 256, 2048):
        q = rng.normal(size=64) * 0.2
        K = rng.normal(size=(L, 64)) * 0.2
        T = 8.0
        alpha = scipy.special.softmax(K @ q / T)
        lo, hi = th.corollary1_bounds(L, th.corollary1_delta(q, K), T)
        assert np.all(lo <= alpha) and np.all(alpha <= hi)
    lo, hi = th.corollary1_bounds([2, 4], 0.0, 1.0)
    np.testing.assert_allclose(lo, [0.5, 0.25]) and np.testing.assert_allclose(hi, [0.5, 0.25])


# ---------------------------------------------------------------------------------------------------------
# Lemma 2, Corollary 3, examples
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", list(F_FAMILY))
def test_lemma2_bound_5000_cases(name):
    F, _ = F_FAMILY[name]
    dF = {
        "exp": lambda l: np.exp(l / 0.7) / 0.7,
        "softplus": lambda l: scipy.special.expit(l / 0.7) / 0.7,
        "rational": lambda l: 2 * l / 0.7**2,
    }[name]
    rng = np.random.default_rng(15)
    worst = 0.0
    for L in (2, 4, 8, 16, 32):
        l = rng.normal(size=(1000, L)) * rng.uniform(0.1, 3, size=(1000, 1))
        J = th.lemma2_jacobian(F, dF, l)
        spec = np.linalg.norm(J, ord=2, axis=(-2, -1))
        bound = th.lemma2_jacobian_bound(F, dF, l)
        assert np.all(spec <= bound * (1 + 1e-12))
        worst = max(worst, float(np.max(spec / bound)))
    assert worst < 1
    # the finite-difference F' default agrees with the analytic one
    l = rng.normal(size=(3, 6))
    np.testing.assert_allclose(th.lemma2_jacobian(F, None, l), th.lemma2_jacobian(F, dF, l), atol=1e-7)


def test_lemma2_jacobian_against_autograd():
    l = torch.tensor([0.4, -1.0, 2.0, 0.0], dtype=torch.float64)
    F = lambda x: 1 + x**2  # noqa: E731
    ref = torch.autograd.functional.jacobian(lambda x: F(x) / F(x).sum(), l).numpy()
    np.testing.assert_allclose(th.lemma2_jacobian(lambda x: 1 + x**2, lambda x: 2 * x, l.numpy()), ref, atol=1e-14)


def test_corollary3_forms_and_counterexample():
    assert th.corollary3_paper(1.0) == 0.25
    assert th.corollary3_paper(0.01) == pytest.approx(math.sqrt(2))
    np.testing.assert_allclose(th.corollary3_paper(np.array([1.0, 0.1])), [0.25, math.sqrt(2)])
    c = th.corollary3_corrected(0.5, eps=0.1)
    assert c["entrywise"] == 0.5 and c["spectral"] == 1.0 and c["row"] == pytest.approx(math.sqrt(2) / 2)
    assert c["finite_difference"] == pytest.approx(0.1) and c["sensitivity"] == 1.0
    assert "finite_difference" not in th.corollary3_corrected(1.0)
    for T, fd, paper in ((1.0, 0.5, 0.25), (0.1, 5.0, 1.41), (0.01, 50.0, 1.41)):
        r = th.corollary3_counterexample(T, 1e-6)
        assert r["spectral_norm"] == pytest.approx(1 / (2 * T))
        assert r["fd_ratio"] == pytest.approx(fd, rel=1e-4)
        assert r["paper_bound"] == pytest.approx(paper, abs=0.01)
        assert r["spectral_norm"] > r["paper_bound"]


def test_finite_difference_bound_20000_cases():
    rng = np.random.default_rng(16)
    B = 20000
    L = 8
    T = 10 ** rng.uniform(-3, 2, size=(B, 1))
    eps = 10 ** rng.uniform(-3, 1, size=(B, 1))
    l = rng.normal(size=(B, L)) * rng.uniform(0, 5, size=(B, 1))
    v = rng.normal(size=(B, L))
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    diff = np.linalg.norm(th.softmax_np((l + eps * v) / T) - th.softmax_np(l / T), axis=1)
    bound = np.minimum(eps[:, 0] / (2 * T[:, 0]), math.sqrt(2))
    assert np.all(diff <= bound * (1 + 1e-9))


def test_spectral_reading_violation_found_by_hypothesis():
    """Search with hypothesis for a row whose Jacobian spectral norm exceeds the paper's min{1/(4T), sqrt 2}."""
    row = hnp.arrays(np.float64, st.integers(2, 6), elements=st.floats(-3, 3))

    def violates(args):
        l, T = args
        J = th.softmax_jacobian_np(l, T)
        return np.linalg.norm(J, 2) > th.corollary3_paper(T) * (1 + 1e-9)

    ex = find(
        st.tuples(row, st.floats(0.05, 5)),
        violates,
        settings=settings(max_examples=2000, derandomize=True, database=None),
    )
    assert violates(ex)


def test_sqrt5_example_numbers():
    for L, T, ratio in (
        (2, 1.0, 1.061),
        (2, 0.1, 10.61),
        (2, 0.01, 105.8),
        (5, 1.0, 0.69),
        (5, 0.1, 10.61),
        (5, 0.01, 105.8),
    ):
        r = th.sqrt5_example(1.0, 1e-3, T, L)
        assert r["logit_distance"] == pytest.approx(math.sqrt(5) * 1e-3)
        assert r["ratio"] == pytest.approx(ratio, rel=6e-3), (L, T, r["ratio"])
    r = th.sqrt5_example(1.0, 1e-5, 1.0, 2)
    assert r["delta_alpha"] == pytest.approx(r["tie_approximation"], rel=1e-4)
    assert r["delta_alpha"] == pytest.approx(r["linearised"], rel=1e-3)


def test_multihead_coverage():
    assert th.multihead_coverage(0.8, 3) == pytest.approx(0.992)
    assert th.heads_for_coverage(0.8, 0.99) == 3
    assert th.heads_for_coverage(1.0, 0.99) == 1
    for p in (0.05, 0.3, 0.5, 0.8, 0.95):
        for c in (0.5, 0.9, 0.96, 0.99, 0.999):
            H = th.heads_for_coverage(p, c)
            brute = next(h for h in range(1, 1000) if 1 - (1 - p) ** h >= c - 1e-12)
            assert H == brute
    sim = th.multihead_coverage_simulation(0.8, 3, n_trials=200_000, seed=0)
    assert abs(sim - 0.992) < 4 * math.sqrt(0.992 * 0.008 / 200_000)


@pytest.mark.timeout(20)
def test_heads_for_coverage_tiny_p_terminates_with_the_right_answer():
    # 1 - p rounds to 1.0: the old neighbour search looped forever; the answer is about log(2) / 1e-17
    H = th.heads_for_coverage(1e-17, 0.5)
    assert H == pytest.approx(math.log(2) / 1e-17, rel=1e-9)
    assert th.multihead_coverage(1e-17, 10**17) == pytest.approx(-math.expm1(-1.0), rel=1e-12)
    with pytest.raises(ValueError, match="p is too small"):
        th.heads_for_coverage(5e-324, 0.5)


@pytest.mark.timeout(60)
@HYP
@given(st.floats(1e-12, 1.0), st.floats(1e-9, 1 - 1e-9))
def test_heads_for_coverage_matches_high_precision(p, c):
    import mpmath

    def smallest(target):  # smallest H >= 1 with 1 - (1 - p)^H >= target, in 60-digit arithmetic
        if p == 1.0:
            return 1
        with mpmath.workdps(60):
            return max(1, int(mpmath.ceil(mpmath.log(1 - mpmath.mpf(target)) / mpmath.log(1 - mpmath.mpf(p)))))

    # the documented tolerance: coverage >= c - 1e-12, evaluated in floating point (slack 1e-15)
    lo, hi = smallest(c - 1e-12 - 1e-15), smallest(c - 1e-12 + 1e-15)
    H = th.heads_for_coverage(p, c)
    if hi < 10**10:
        assert lo <= H <= hi
    else:  # beyond the float resolution of H: the closed form to rounding
        assert H == pytest.approx(hi, rel=1e-6)


# ---------------------------------------------------------------------------------------------------------
# bad input
# ---------------------------------------------------------------------------------------------------------
def test_bad_N():
    a = np.array([0.5, 0.3, 0.2])
    X = np.ones((3, 2))
    for N in (0, 4, -1, 2.5, "2", None):
        with pytest.raises(ValueError, match="N"):
            th.distance(a, X, N)
        with pytest.raises(ValueError, match="N"):
            th.theorem1_dmax(a, X, N)
    for f in (
        th.expectation_e1,
        th.expectation_e2,
        th.jensen_gap_bound,
        th.expected_distance_mc,
        th.expected_distance_exact,
        th.separability,
        th.corollary2_limits,
        th.corollary2_linear_bounds,
    ):
        with pytest.raises(ValueError, match="N"):
            f(a, X, 4)
    with pytest.raises(ValueError, match="N"):
        th.theorem2_xi(a, 0, 1.0, 0.5)
    with pytest.raises(ValueError, match="N"):
        th.top_n_indices(a, 5)


def test_bad_alpha_X():
    X = np.ones((3, 2))
    with pytest.raises(ValueError, match="alpha"):
        th.distance(np.array([0.5, -0.1, 0.6]), X, 1)
    with pytest.raises(ValueError, match="alpha"):
        th.distance(np.array([0.5, np.nan, 0.5]), X, 1)
    with pytest.raises(ValueError, match="alpha"):
        th.distance(np.array([]), np.ones((0, 2)), 1)
    with pytest.raises(ValueError, match="X"):
        th.distance(np.array([0.5, 0.5]), X, 1)
    with pytest.raises(ValueError, match="X"):
        th.distance(np.array([0.5, 0.3, 0.2]), np.ones(3), 1)
    with pytest.raises(ValueError, match="form"):
        th.distance(np.array([0.5, 0.3, 0.2]), X, 1, form="max")
    with pytest.raises(ValueError, match="selected"):
        th.distance(np.array([0.5, 0.3, 0.2]), X, selected=np.zeros(3, dtype=bool))
    with pytest.raises(ValueError, match="p"):
        th.expectation_e1(np.array([0.5, 0.3, 0.2]), X, 1, p="L+1")
    with pytest.raises(ValueError, match="L"):
        th.expected_distance_exact(np.full(40, 1 / 40), np.ones((40, 2)), 20)
    for bad in ("abc", None, 0, 2.5):
        with pytest.raises(ValueError, match="max_subsets"):
            th.expected_distance_exact(np.array([0.5, 0.3, 0.2]), X, 1, max_subsets=bad)
    with pytest.raises(ValueError, match="n_samples"):
        th.expected_distance_mc(np.array([0.5, 0.3, 0.2]), X, 1, n_samples=0)


def test_bad_scalars():
    a = np.array([0.5, 0.3, 0.2])
    for T in (0.0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="temperature"):
            th.corollary1_bounds(10, 1.0, T)
        with pytest.raises(ValueError, match="temperature"):
            th.corollary3_paper(T)
        with pytest.raises(ValueError, match="temperature"):
            th.sqrt5_example(1.0, 1e-3, T, 2)
    with pytest.raises(ValueError, match="L"):
        th.corollary1_bounds(0, 1.0, 1.0)
    with pytest.raises(ValueError, match="L"):
        th.corollary1_bounds(2.5, 1.0, 1.0)
    with pytest.raises(ValueError, match="delta"):
        th.corollary1_bounds(3, -1.0, 1.0)
    with pytest.raises(ValueError, match="eps"):
        th.corollary3_corrected(1.0, eps=0.0)
    with pytest.raises(ValueError, match="delta"):
        th.theorem2_xi(a, 2, 1.0, 2.5)
    with pytest.raises(ValueError, match="M"):
        th.theorem2_xi(a, 2, 0.0, 0.5)
    with pytest.raises(ValueError, match="r"):
        th.theorem2_bounds(a, 2, 1.0, 0.5, 0.0)
    with pytest.raises(ValueError, match="r"):
        th.separability(a, np.ones((3, 2)), 2, r=-1.0)
    with pytest.raises(ValueError, match="p"):
        th.multihead_coverage(1.5, 3)
    with pytest.raises(ValueError, match="H"):
        th.multihead_coverage(0.5, -1)
    with pytest.raises(ValueError, match="c"):
        th.heads_for_coverage(0.5, 1.0)
    with pytest.raises(ValueError, match="p"):
        th.heads_for_coverage(0.0, 0.5)
    with pytest.raises(ValueError, match="L"):
        th.sqrt5_example(1.0, 1e-3, 1.0, 1)
    for c in (None, "abc", float("inf"), True):
        with pytest.raises(ValueError, match="c must be a finite real number"):
            th.sqrt5_example(c, 1e-3, 1.0, 4)
    for T in ("abc", True, [1.0, "x"], None, 1j):
        with pytest.raises(ValueError, match="temperature"):
            th.corollary3_paper(T)
        with pytest.raises(ValueError, match="temperature"):
            th.corollary3_corrected(T)


def test_bad_F():
    with pytest.raises(ValueError, match="F"):
        th.lemma1_constants(lambda l: l, 1.0)  # non-positive on [-1, 1]
    with pytest.raises(ValueError, match="F"):
        th.lemma1_constants(lambda l: np.full_like(l, np.inf), 1.0)
    with pytest.raises(ValueError, match="F"):
        th.lemma1_constants("exp", 1.0)
    with pytest.raises(ValueError, match="a"):
        th.lemma1_constants(np.exp, -1.0)
    with pytest.raises(ValueError, match="F"):
        th.lemma2_jacobian_bound(lambda l: l - 10, None, np.array([0.0, 1.0]))
    with pytest.raises(ValueError, match="logits"):
        th.lemma2_jacobian(np.exp, np.exp, np.array([]))


def test_monte_carlo_accepts_torch_tensors():
    """The module's convention: torch tensors are accepted and converted (np.size on a tensor raised TypeError)."""
    rng = np.random.default_rng(3)
    alpha, X = rng.dirichlet(np.ones(8)), rng.normal(size=(8, 3))
    want = th.expected_distance_mc(alpha, X, 2, n_samples=16, seed=0)
    assert th.expected_distance_mc(torch.from_numpy(alpha), torch.from_numpy(X), 2, n_samples=16, seed=0) == want
