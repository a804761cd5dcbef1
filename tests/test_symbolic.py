"""Tests for attn_lib.symbolic: every derivation returns SymPy objects, its checks vanish, and its results agree
with the numeric code."""
from __future__ import annotations

import math
import time

import numpy as np
import pytest
import sympy as sp

from attn_lib import symbolic as sy
from attn_lib import theory as th


def is_zero(obj) -> bool:
    if isinstance(obj, sp.MatrixBase):
        return all(sp.simplify(e) == 0 for e in obj)
    return sp.simplify(obj) == 0


def all_sympy(value) -> bool:
    if isinstance(value, (list, tuple)):
        return all(all_sympy(v) for v in value)
    if isinstance(value, bool):  # sympy's is_nonnegative etc. give Python bools
        return True
    return isinstance(value, (sp.Basic, sp.MatrixBase)) or (isinstance(value, type) and issubclass(value, sp.Function)) \
        or isinstance(value, sp.core.function.UndefinedFunction)


@pytest.mark.parametrize("name", sy.__all__)
def test_returns_sympy_objects_quickly_and_checks_vanish(name):
    t0 = time.perf_counter()
    res = getattr(sy, name)()
    assert time.perf_counter() - t0 < 2.0
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
    np.testing.assert_allclose(np.array(f(*vals, 0.7), dtype=float), th.softmax_jacobian_np(np.array(vals), 0.7),
                               atol=1e-14)


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
    assert sp.simplify(res["C2"] - (1 + a ** 2 / T ** 2)) == 0
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
    bracket = 5 / 4 * (a ** 2).sum() - 1 / 4 * (a.sum(0) ** 2).sum()
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
    assert xi_th ** 2 == pytest.approx(xi2, rel=1e-10)


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
    Jc = J.subs({sp.Derivative(F(li), li): 2 * li for li in l}).subs({F(li): 1 + li ** 2 for li in l})
    vals = {l[0]: 0.4, l[1]: -1.0, l[2]: 2.0}
    num = np.array(Jc.subs(vals).evalf(), dtype=float)
    ref = th.lemma2_jacobian(lambda v: 1 + v ** 2, lambda v: 2 * v, np.array([0.4, -1.0, 2.0]))
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
    from attn_lib import symbolic

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
