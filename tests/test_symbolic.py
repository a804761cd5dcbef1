"""Tests for attn_lib.book.symbolic: every derivation returns SymPy objects, its checks vanish, and its results agree
with the numeric code."""

from __future__ import annotations

import math

import numpy as np
import pytest
import sympy as sp

from attn_lib import theory as th
from attn_lib.book import symbolic as sy


def is_zero(obj) -> bool:
    if isinstance(obj, sp.MatrixBase):
        return all(sp.simplify(e) == 0 for e in obj)
    return sp.simplify(obj) == 0


def all_sympy(value) -> bool:
    if isinstance(value, (list, tuple)):
        return all(all_sympy(v) for v in value)
    if isinstance(value, bool):  # sympy's is_nonnegative etc. give Python bools
        return True
    return (
        isinstance(value, (sp.Basic, sp.MatrixBase))
        or (isinstance(value, type) and issubclass(value, sp.Function))
        or isinstance(value, sp.core.function.UndefinedFunction)
    )


@pytest.mark.parametrize("name", sy.__all__)
def test_returns_sympy_objects_and_checks_vanish(name):
    res = getattr(sy, name)()
    assert isinstance(res, dict) and res
    for k, v in res.items():
        assert not isinstance(v, str), k
        assert all_sympy(v), (k, type(v))
        if k.endswith("_check"):
            assert is_zero(v), (name, k, v)


def test_softmax_jacobian_symbolic_matches_numeric():
    res = sy.softmax_jacobian(3)
    l = list(res["logits"])
    T = res["T"]
    f = sp.lambdify([*l, T], res["jacobian_raw"], "numpy")
    vals = [0.3, -1.2, 0.8]
    np.testing.assert_allclose(
        np.array(f(*vals, 0.7), dtype=float), th.softmax_jacobian_np(np.array(vals), 0.7), atol=1e-14
    )


def test_max_alpha_one_minus_alpha():
    res = sy.max_alpha_one_minus_alpha()
    assert res["maximum"] == sp.Rational(1, 4)
    assert res["critical_points"] == [sp.Rational(1, 2)]
    assert res["second_derivative"] == -2


def test_lemma1_symbolic_examples_and_numeric_agreement():
    l = sp.Symbol("l", real=True)
    a = sp.Symbol("a", positive=True)
    T = sp.Symbol("T", positive=True)
    assert sp.simplify(sy.lemma1_constants_symbolic()["C2"] - sp.exp(2 * a / T)) == 0
    res = sy.lemma1_constants_symbolic(1 + (l / T) ** 2, l, a)
    assert sp.simplify(res["C2"] - (1 + a**2 / T**2)) == 0
    # numeric agreement for softplus at a = 1.3, T = 0.7
    res = sy.lemma1_constants_symbolic(sp.log(1 + sp.exp(l / T)), l, a)
    C2 = float(res["C2"].subs({a: 1.3, T: 0.7}))
    C1n, C2n = th.lemma1_constants(lambda x: np.log1p(np.exp(x / 0.7)), 1.3)
    assert C2 == pytest.approx(C2n, rel=1e-9)
    assert float(res["C1"].subs({a: 1.3, T: 0.7})) == pytest.approx(C1n, rel=1e-9)


def test_corollary1_from_lemma1():
    res = sy.corollary1_from_lemma1()
    assert sp.simplify(res["C2"] - sp.exp(2 * res["Delta"] / sp.Symbol("T", positive=True))) == 0


def test_two_way_tie():
    res = sy.two_way_tie_spectral_norm()
    T = sp.Symbol("T", positive=True)
    assert sp.simplify(res["spectral_norm_at_tie"] - 1 / (2 * T)) == 0
    assert res["ratio_to_paper"] == 2
    assert res["critical_sigma"] == [sp.Rational(1, 2)]
    assert 0 in res["eigenvalues"]


def test_corollary3_bounds_symbolic_for_several_L():
    for L in (2, 3, 5):
        res = sy.corollary3_bounds_symbolic(L)
        assert is_zero(res["gershgorin_check"]) and is_zero(res["row_gradient_check"])
    # the slack form is a sum of products of non-negative weights
    assert sy.corollary3_bounds_symbolic(4)["row_gradient_slack_form"].is_nonnegative


def test_theorem1_steps():
    for N, d in ((1, 1), (2, 2), (3, 2)):
        res = sy.theorem1_steps(N, d)
        assert is_zero(res["step1_check"]) and is_zero(res["step2_check"]) and is_zero(res["step5_check"])
        assert res["step2_weights_sum"] == 1
        assert res["at_N_equals_L"] == 0


def test_theorem1_random_variance_against_numeric_enumeration():
    res = sy.theorem1_random_variance(5, 2)
    assert is_zero(res["variance_check"])
    # numeric: exact variance of sum_j 1_j a_j over all 2-subsets of 5 vectors equals the bracket
    import itertools

    rng = np.random.default_rng(0)
    a = rng.normal(size=(5, 3))
    sums = np.array([a[list(c)].sum(0) for c in itertools.combinations(range(5), 2)])
    var = ((sums - sums.mean(0)) ** 2).sum(1).mean()
    p = 2 / 5
    bracket = 5 / 4 * (a**2).sum() - 1 / 4 * (a.sum(0) ** 2).sum()
    assert var == pytest.approx(p * (1 - p) * bracket)


@pytest.mark.parametrize("N", [2, 3, 4, 5])
def test_theorem2_expansion(N):
    res = sy.theorem2_expansion(N)
    assert is_zero(res["slack_check"]) and is_zero(res["beta_form_check"])
    assert res["slack_nonnegative"] is True
    # numeric: with real unit vectors and the empirical delta, X^2 <= xi^2 and the formula equals theory's xi
    rng = np.random.default_rng(N)
    x = rng.normal(size=(N - 1, 6))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    alpha = rng.uniform(0.1, 1, size=N - 1)
    delta = min((np.linalg.norm(x[j] - x[k]) for j in range(N - 1) for k in range(j + 1, N - 1)), default=0.0)
    syms = {sp.Symbol("M", positive=True): 1.0, sp.Symbol("delta", positive=True): delta}
    syms.update({sp.Symbol(f"alpha{j + 1}", positive=True): alpha[j] for j in range(N - 1)})
    xi2 = float(res["xi_squared"].subs(syms))
    X2 = float(np.linalg.norm(alpha @ x) ** 2)
    assert X2 <= xi2 + 1e-12
    # theory.theorem2_xi with token i of weight 1 (largest) and the others: same xi^2
    full = np.concatenate([[10.0], alpha])
    xi_th = th.theorem2_xi(full, N, 1.0, delta)[0]
    assert xi_th**2 == pytest.approx(xi2, rel=1e-10)


def test_sqrt5_exact():
    res = sy.sqrt5_example_exact()
    assert sp.simplify(res["norm_coefficient"] - 3 * sp.sqrt(2) / 4) == 0
    assert float(res["norm_coefficient"]) == pytest.approx(th.sqrt5_example(1.0, 1e-6, 1.0, 2)["ratio"], rel=1e-6)


def test_lemma2_symbolic():
    res = sy.lemma2_jacobian(3)
    assert is_zero(res["difference_check"])
    # substitute F = 1 + l^2 and compare with theory.lemma2_jacobian
    F = res["F"]
    J = res["jacobian_closed"]
    l = sp.symbols("l1:4", real=True)
    Jc = J.subs({sp.Derivative(F(li), li): 2 * li for li in l}).subs({F(li): 1 + li**2 for li in l})
    vals = {l[0]: 0.4, l[1]: -1.0, l[2]: 2.0}
    num = np.array(Jc.subs(vals).evalf(), dtype=float)
    ref = th.lemma2_jacobian(lambda v: 1 + v**2, lambda v: 2 * v, np.array([0.4, -1.0, 2.0]))
    np.testing.assert_allclose(num, ref, atol=1e-12)


def test_multihead_and_corollary2_symbolic():
    res = sy.multihead_coverage_symbolic()
    assert res["coverage_p08_H3"] == sp.Rational(124, 125)
    assert res["H_min_p08_c099"] == 3 == th.heads_for_coverage(0.8, 0.99)
    assert float(res["H_min_ratio_value"]) == pytest.approx(math.log(0.01) / math.log(0.2))
    lim = sy.corollary2_limits_symbolic()
    assert lim["p_limit_L_to_oo"] == 0 and lim["outer_limit_L_to_oo"] == 1 and lim["outer_limit_N_to_L"] == 0


def test_bad_input():
    with pytest.raises(ValueError, match="L"):
        sy.softmax_jacobian(0)
    with pytest.raises(ValueError, match="L"):
        sy.lemma2_jacobian(50)
    with pytest.raises(ValueError, match="N"):
        sy.theorem2_expansion(1)
    with pytest.raises(ValueError, match="N"):
        sy.theorem1_random_variance(4, 5)
    with pytest.raises(ValueError, match="d"):
        sy.theorem1_steps(2, 0)
    with pytest.raises(ValueError, match="l"):
        sy.lemma1_constants_symbolic(sp.Integer(1), l=sp.Integer(3))
    with pytest.raises(ValueError, match="F_expr"):
        l = sp.Symbol("l", real=True)
        sy.lemma1_constants_symbolic(l, l, sp.Integer(1))  # F = l is not positive on [-1, 1]


def test_lemma1_general_undefined_F():
    """Lemma 1 for an undefined positive F: C1 = m_F/M_F, C2 = M_F/m_F, independent of L."""
    import sympy as sp

    from attn_lib.book import symbolic

    out = symbolic.lemma1_general()
    m_F, M_F = sp.symbols("m_F M_F", positive=True)
    assert sp.simplify(out["C1"] - m_F / M_F) == 0
    assert sp.simplify(out["C2"] - M_F / m_F) == 0
    for key in ("sum_check", "L_free_check", "C1C2_check"):
        assert sp.simplify(out[key]) == 0, key
    # the general constants specialise to the softmax ones: m_F = e^{-a/T}, M_F = e^{a/T} -> C2 = e^{2a/T}
    a, T = sp.symbols("a T", positive=True)
    C2 = out["C2"].subs({m_F: sp.exp(-a / T), M_F: sp.exp(a / T)})
    assert sp.simplify(C2 - sp.exp(2 * a / T)) == 0
    assert out["C2"].free_symbols == {m_F, M_F}


# ----------------------------------------------------------------------------------------------------------------
# derivations that compute: each SymPy-computed step against an independent numeric evaluation
# ----------------------------------------------------------------------------------------------------------------
def _weights_and_vectors(L, d, seed):
    rng = np.random.default_rng(seed)
    alpha = rng.dirichlet(np.ones(L))
    return alpha, rng.normal(size=(L, d))


def test_lemma1_general_division_step_against_random_rows():
    """The gap numerators SymPy computes equal the numeric gaps times their denominators, and are >= 0."""
    out = sy.lemma1_general()
    assert out["lower_gap_holds"] is True and out["upper_gap_holds"] is True
    rng = np.random.default_rng(1)
    F = rng.uniform(0.5, 3.0, size=7)  # F(l_j) for L = 7 logits
    L, m, M, S = 7, F.min(), F.max(), F.sum()
    for i in range(L):
        syms = {
            sp.Symbol("S", positive=True): S,
            sp.Symbol("m_F", positive=True): m,
            sp.Symbol("M_F", positive=True): M,
            sp.Symbol("L", positive=True, integer=True): L,
            sp.Symbol("u", nonnegative=True): F[i] - m,
            sp.Symbol("v", nonnegative=True): L * M - S,
        }
        low = float(out["lower_gap_numerator"].subs(syms))
        assert low == pytest.approx((F[i] / S - m / (L * M)) * S * (S + L * M - S))
        assert F[i] / S >= m / (L * M) - 1e-15 and F[i] / S <= M / (L * m) + 1e-15


def test_corollary1_lagrange_identity_numeric():
    out = sy.corollary1_from_lemma1()
    assert out["lagrange_nonnegative"] is True
    rng = np.random.default_rng(2)
    q, k = rng.normal(size=3), rng.normal(size=3)
    subs = dict(zip(sp.symbols("q1:4", real=True), q, strict=True))
    subs.update(zip(sp.symbols("k1:4", real=True), k, strict=True))
    gap = (q @ q) * (k @ k) - (q @ k) ** 2
    assert float(out["lagrange_sum"].subs(subs)) == pytest.approx(gap)
    assert float(out["cauchy_schwarz_gap"].subs(subs)) == pytest.approx(np.linalg.norm(np.cross(q, k)) ** 2)


def test_theorem1_side_conditions_decided_by_sympy():
    res = sy.theorem1_steps(3, 2)
    for key in (
        "step2_weights_positive",
        "step3_slack_nonnegative",
        "step4_coefficient_nonnegative",
        "step4_coefficient_at_most_one",
    ):
        assert res[key] is True, key
    for key in ("step2_norm_check", "step3_homogeneity_check", "step4_check"):
        assert is_zero(res[key]), key


def test_theorem1_step5_sum_matches_numeric_sum_and_theory():
    """SymPy's evaluated Sum, at concrete weights, is the plain sum of the per-term bounds and equals d_max."""
    res = sy.theorem1_steps()
    alpha, X = _weights_and_vectors(9, 4, seed=3)
    N = 3
    parts = th.theorem1_dmax(alpha, X, N, return_parts=True)
    out = np.sort(alpha)[: 9 - N]  # weights of the excluded tokens
    d1, M_I, abar = parts["d1"], parts["max_norm"], parts["abar"]
    per_term_sum = float(np.sum(out * d1 + (abar - out) * M_I))
    k = sp.Symbol("k", integer=True, positive=True)
    Lsym, Nsym = sp.symbols("L N", positive=True)
    expr = res["step5_evaluated"].subs(sp.Sum(sp.IndexedBase("alpha")[k], (k, 1, Lsym - Nsym)), float(out.sum()))
    vals = {
        sp.Symbol("d_1", positive=True): d1,
        sp.Symbol("M_I", positive=True): M_I,
        sp.Symbol("abar", positive=True): abar,
        Lsym: 9,
        Nsym: N,
    }
    assert float(expr.subs(vals)) == pytest.approx(per_term_sum, rel=1e-12)
    assert float(res["d_max"].subs(vals)) == pytest.approx(parts["d_max"], rel=1e-12)


def test_corollary2_remainder_bound_against_theory():
    res = sy.corollary2_remainder_symbolic()
    assert res["outer_slack_nonnegative"] is True
    assert is_zero(res["identity_check"]) and is_zero(res["homogeneity_check"]) and is_zero(res["bound_check"])
    alpha, X = _weights_and_vectors(12, 5, seed=4)
    N, L = 3, 12
    lim = th.corollary2_limits(alpha, X, N)
    A = alpha[:, None] * X
    z_norm = float(np.linalg.norm(A.sum(0)))
    i = sp.Symbol("i", integer=True, positive=True)
    Lsym, Nsym = sp.symbols("L N", positive=True)
    bound = res["bound"].subs(sp.Sum(sp.IndexedBase("A")[i], (i, 1, Lsym)), float(np.linalg.norm(A, axis=1).sum()))
    bound = float(bound.subs({Lsym: L, Nsym: N, sp.Symbol(r"\|z\|", nonnegative=True): z_norm}))
    assert bound == pytest.approx(lim["remainder_bound_loose"], rel=1e-12)
    assert abs(lim["remainder"]) <= lim["remainder_bound"] <= bound * (1 + 1e-12)


def test_corollary2_remainder_identity_with_numbers():
    """The per-token rewrite a_i - p sum_{j!=i} a_j = a_i - p (z - a_i), at random vectors."""
    res = sy.corollary2_remainder_symbolic(L=4, d=3)
    rng = np.random.default_rng(5)
    a = rng.normal(size=(4, 3))
    subs = {sp.Symbol(f"a_{i + 1}_{c + 1}", real=True): a[i, c] for i in range(4) for c in range(3)}
    subs[sp.Symbol("p", nonnegative=True)] = 0.3
    term = np.array(res["term"].subs(subs), dtype=float).ravel()
    np.testing.assert_allclose(term, a[0] - 0.3 * a[1:].sum(0), rtol=1e-12)


def test_theorem2_markov_pointwise_inequality_on_samples():
    """SymPy's pointwise form X - r 1{X > r} is >= 0 on samples, and its mean gives P(X > r) <= E X / r."""
    res = sy.theorem2_tail_bounds()
    for key in ("markov_above_positive", "markov_below_nonnegative", "markov_via_xi_nonnegative"):
        assert res[key] is True, key
    assert is_zero(res["markov_below_check"]) and res["markov_above"] == sp.Symbol("t", positive=True)
    f = np.vectorize(
        sp.lambdify([sp.Symbol("X", nonnegative=True), sp.Symbol("r", positive=True)], res["markov_pointwise"])
    )
    x = np.random.default_rng(7).exponential(1 / 1.5, size=2000)
    for r in (0.1, 0.5, 1.0, 2.0):
        assert (f(x, r) >= 0).all()
        assert (x > r).mean() <= x.mean() / r
        assert math.exp(-1.5 * r) <= (1 / 1.5) / r  # exact law: P = e^{-1.5 r}, E X = 1/1.5


def test_theorem2_lower_bound_sum_matches_theory():
    res = sy.theorem2_tail_bounds()
    assert is_zero(res["lower_check"])
    xi = np.array([0.3, 0.5, 0.8, 0.2])
    r = 1.1
    i = sp.Symbol("i", integer=True, positive=True)
    Nsym = sp.Symbol("N", positive=True, integer=True)
    expr = res["lower"].subs(sp.Sum(sp.IndexedBase("xi")[i], (i, 1, Nsym)), float(xi.sum()))
    val = float(expr.subs({Nsym: 4, sp.Symbol("r", positive=True): r}))
    assert val == pytest.approx(1 - xi.sum() / (r * 4), rel=1e-14)


def test_theorem2_hoeffding_exponent_matches_theory():
    res = sy.theorem2_tail_bounds()
    assert is_zero(res["exponent_check"]) and res["range_slack_nonnegative"] is True
    mu, r, M = 0.9, 0.4, 1.0
    vals = {sp.Symbol("mu", positive=True): mu, sp.Symbol("r", positive=True): r, sp.Symbol("M", positive=True): M}
    for key, R in (("exponent_range_2M", 2 * M), ("exponent_range_M", M)):
        ours = math.exp(-float(res[key].subs(vals)))
        assert ours == pytest.approx(float(th.theorem2_hoeffding_upper([mu], r, M, value_range=R)), rel=1e-14)


def test_theorem2_paper_form_decreases_in_mu():
    """SymPy decides the derivative is negative for mu > r; a finite difference agrees."""
    res = sy.theorem2_tail_bounds()
    assert res["decreasing_in_mu"] is True
    f = sp.lambdify(sp.symbols("mu r M", positive=True), res["paper_form"])
    assert f(0.8, 0.3, 1.0) < f(0.7, 0.3, 1.0)


def test_lemma2_norm_ingredients_against_numpy():
    res = sy.lemma2_jacobian(3)
    for key in ("diag_norm_check", "rank_one_check", "alpha_norm_check", "bound_check"):
        assert is_zero(res[key]), key
    assert res["alpha_cross_nonnegative"] is True and res["S_positive"] is True
    rng = np.random.default_rng(6)
    g, alpha = rng.normal(size=3), rng.dirichlet(np.ones(3))
    subs = dict(zip(sp.symbols("g1:4", real=True), g, strict=True))
    subs.update(zip(sp.symbols("alpha1:4", nonnegative=True), alpha, strict=True))
    assert float(res["diag_norm"].subs(subs)) == pytest.approx(np.linalg.norm(np.diag(g), 2))
    assert float(res["rank_one_norm"].subs(subs)) == pytest.approx(np.linalg.norm(np.outer(alpha, g), 2))
    assert np.linalg.norm(alpha) <= 1.0


def test_lemma2_computed_bound_matches_theory():
    res = sy.lemma2_jacobian(3)
    logits = np.array([0.4, -1.0, 2.0, 0.1, 0.7])
    F, dF = (lambda v: 1 + v**2), (lambda v: 2 * v)
    vals = {
        sp.Symbol("max|F'|", positive=True): float(np.abs(dF(logits)).max()),
        sp.Symbol("minF", positive=True): float(F(logits).min()),
        sp.Symbol("L", positive=True, integer=True): len(logits),
    }
    assert float(res["bound_computed"].subs(vals)) == pytest.approx(
        float(th.lemma2_jacobian_bound(F, dF, logits)), rel=1e-12
    )
    assert res["S_lower_value"] == sp.Symbol("L", positive=True, integer=True) * sp.Symbol("minF", positive=True)
