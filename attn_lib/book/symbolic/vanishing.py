"""Lemma 1 and Corollary 1 derived with SymPy (chapter 1; Reading the paper, §Lemma 1 and §Corollary 1)."""

from __future__ import annotations

import sympy as sp
from sympy.calculus.util import maximum, minimum

__all__ = ["lemma1_constants_symbolic", "lemma1_general", "corollary1_from_lemma1"]


def lemma1_constants_symbolic(F_expr=None, l=None, a=None) -> dict:
    r"""Lemma 1 constants for a symbolic ``F`` ("Reading the paper", §Lemma 1).

    Steps: ``m_F = min_{[-a,a]} F``, ``M_F = max_{[-a,a]} F`` (``sympy.calculus.util.minimum/maximum``),
    ``L m_F <= S <= L M_F``, ``C1 = m_F / M_F``, ``C2 = M_F / m_F`` and the bounds ``C1/L <= alpha_i <= C2/L``.
    Defaults: ``F = exp(l/T)``, ``l`` real, ``a > 0``, giving ``C2 = exp(2a/T)``.

    Chapter 1, ``lem-vanishing``; tested by
    ``tests/test_symbolic.py::test_lemma1_symbolic_examples_and_numeric_agreement``.
    """
    if l is None:
        l = sp.Symbol("l", real=True)
    if a is None:
        a = sp.Symbol("a", positive=True)
    if F_expr is None:
        F_expr = sp.exp(l / sp.Symbol("T", positive=True))
    if not isinstance(l, sp.Symbol):
        raise ValueError(f"l must be a SymPy Symbol (got {l!r})")
    F_expr = sp.sympify(F_expr)
    a = sp.sympify(a)
    if a.is_positive is False:
        raise ValueError(f"a must be positive (got {a})")
    dom = sp.Interval(-a, a)
    m_F = sp.simplify(minimum(F_expr, l, dom))
    M_F = sp.simplify(maximum(F_expr, l, dom))
    if m_F.is_positive is False:
        raise ValueError("F_expr must be > 0 on [-a, a] (Lemma 1 needs a positive F)")
    L = sp.Symbol("L", positive=True, integer=True)
    S, alpha_i = sp.symbols("S alpha_i", positive=True)
    C1 = sp.simplify(m_F / M_F)
    C2 = sp.simplify(M_F / m_F)
    return {
        "F": F_expr,
        "interval": dom,
        "m_F": m_F,
        "M_F": M_F,
        "sum_bounds": (sp.Le(L * m_F, S), sp.Le(S, L * M_F)),
        "C1": C1,
        "C2": C2,
        "weight_bounds": (sp.Le(C1 / L, alpha_i), sp.Le(alpha_i, C2 / L)),
        "C1C2_check": sp.simplify(C1 * C2 - 1),
    }


def lemma1_general() -> dict:
    r"""Lemma 1 for an arbitrary (undefined) smooth positive ``F`` ("Reading the paper", §Lemma 1).

    Works with ``F = sympy.Function("F")`` and the symbols ``m_F = min_{[-a,a]} F``, ``M_F = max_{[-a,a]} F``
    (positive by the extreme-value theorem, since ``F`` is continuous and positive on the compact ``[-a, a]``):

    1. ``m_F <= F(l_j) <= M_F`` for every ``j`` (logits in ``[-a, a]``);
    2. summing ``L`` copies: ``L m_F <= S = sum_j F(l_j) <= L M_F`` (SymPy evaluates the sums of the bounds);
    3. dividing: ``m_F / (L M_F) <= alpha_i = F(l_i) / S <= M_F / (L m_F)``, i.e. ``C1 = m_F/M_F``,
       ``C2 = M_F/m_F``, both independent of ``L`` because ``theta`` does not contain ``L``.

    ``*_check`` entries simplify to 0. Step 3 is checked, not only stated: writing ``F(l_i) = m_F + u`` and
    ``L M_F = S + v`` with ``u, v >= 0`` (steps 1-2), ``alpha_i - m_F/(L M_F)`` has the numerator
    ``S u + m_F v + u v`` (``lower_gap_numerator``) over a positive denominator, which SymPy decides is
    non-negative (``lower_gap_holds``); likewise the upper side (``upper_gap_numerator``, ``upper_gap_holds``).

    Chapter 1, ``lem-vanishing``: the derivation (:func:`attn_lib.theory.lemma1_constants` is the numerical reference);
    tested by ``tests/test_symbolic.py::test_lemma1_general_undefined_F`` and
    ``tests/test_symbolic.py::test_lemma1_general_division_step_against_random_rows``.
    """
    F = sp.Function("F")
    l_i, l_j = sp.symbols("l_i l_j", real=True)
    j = sp.Symbol("j", integer=True, positive=True)
    L = sp.Symbol("L", positive=True, integer=True)
    m_F, M_F = sp.symbols("m_F M_F", positive=True)
    S = sp.Symbol("S", positive=True)
    sum_F = sp.Sum(F(sp.Indexed("l", j)), (j, 1, L))
    lower_sum = sp.Sum(m_F, (j, 1, L)).doit()
    upper_sum = sp.Sum(M_F, (j, 1, L)).doit()
    alpha_i = F(l_i) / S
    # worst cases of the quotient: numerator at its extreme, denominator at the opposite one
    alpha_low = m_F / upper_sum
    alpha_high = M_F / lower_sum
    C1 = sp.simplify(alpha_low * L)
    C2 = sp.simplify(alpha_high * L)
    # step 3 checked: with F(l_i) = m_F + u and L M_F = S + v (u, v >= 0, from steps 1-2), the numerator of
    # alpha_i - m_F/(L M_F) is a polynomial with non-negative coefficients; likewise for M_F/(L m_F) - alpha_i with
    # F(l_i) = M_F - u and S = L m_F + v. The denominators are products of positive symbols.
    u, v = sp.symbols("u v", nonnegative=True)
    low_num, low_den = sp.fraction(sp.together((m_F + u) / S - m_F / (L * ((S + v) / L))))
    high_num, high_den = sp.fraction(sp.together(M_F / (L * m_F) - (M_F - u) / (L * m_F + v)))
    low_num, high_num = sp.expand(low_num), sp.expand(high_num)
    return {
        "F_bounds": (sp.Le(m_F, F(l_j)), sp.Le(F(l_j), M_F)),
        "S": sp.Eq(S, sum_F),
        "sum_bounds": (sp.Le(lower_sum, S), sp.Le(S, upper_sum)),
        "alpha_i": sp.Eq(sp.Symbol("alpha_i", positive=True), alpha_i),
        "alpha_bounds": (
            sp.Le(alpha_low, sp.Symbol("alpha_i", positive=True)),
            sp.Le(sp.Symbol("alpha_i", positive=True), alpha_high),
        ),
        "C1": C1,
        "C2": C2,
        "sum_check": sp.simplify(lower_sum - L * m_F) + sp.simplify(upper_sum - L * M_F),
        "L_free_check": sp.diff(C1, L) + sp.diff(C2, L),
        "C1C2_check": sp.simplify(C1 * C2 - 1),
        "lower_gap_numerator": low_num,
        "lower_gap_holds": bool(low_num.is_nonnegative and low_den.is_positive),
        "upper_gap_numerator": high_num,
        "upper_gap_holds": bool(high_num.is_nonnegative and high_den.is_positive),
    }


def corollary1_from_lemma1() -> dict:
    r"""Corollary 1 from Lemma 1 ("Reading the paper", §Corollary 1): ``F = exp(l/T)``, ``a = Delta = ||q|| ||k||``.

    Steps: Cauchy-Schwarz ``|l_j| <= Delta``, checked in ``R^3`` by Lagrange's identity
    ``||q||^2 ||k||^2 - <q, k>^2 = sum_{a<b} (q_a k_b - q_b k_a)^2`` (``lagrange_check`` = 0; the sum of squares is
    non-negative, ``lagrange_nonnegative``); Lemma 1 with ``a = Delta`` gives ``C2 = exp(2 Delta/T)``,
    ``C1 = exp(-2 Delta / T)``; bounds ``exp(-2 Delta/T)/L <= alpha_i <= exp(2 Delta/T)/L``.

    Chapter 1, ``cor-softmax-vanishing``; tested by ``tests/test_symbolic.py::test_corollary1_from_lemma1`` and
    ``tests/test_symbolic.py::test_corollary1_lagrange_identity_numeric``.
    """
    l = sp.Symbol("l", real=True)
    T = sp.Symbol("T", positive=True)
    q, k = sp.symbols("\\|q\\| \\|k\\|", positive=True)
    Delta = q * k
    lem = lemma1_constants_symbolic(sp.exp(l / T), l, Delta)
    L = sp.Symbol("L", positive=True, integer=True)
    alpha_i = sp.Symbol("alpha_i", positive=True)
    expected_C2 = sp.exp(2 * Delta / T)
    # Cauchy-Schwarz in R^3 by Lagrange's identity: ||q||^2 ||k||^2 - <q, k>^2 = sum_{a<b} (q_a k_b - q_b k_a)^2 >= 0
    qv, kv = sp.symbols("q1:4", real=True), sp.symbols("k1:4", real=True)
    gap = sum(x**2 for x in qv) * sum(x**2 for x in kv) - sum(x * y for x, y in zip(qv, kv, strict=True)) ** 2
    lagrange = sum((qv[i] * kv[j] - qv[j] * kv[i]) ** 2 for i in range(3) for j in range(i + 1, 3))
    return {
        "Delta": Delta,
        "cauchy_schwarz_gap": gap,
        "lagrange_sum": lagrange,
        "lagrange_check": sp.expand(gap - lagrange),
        "lagrange_nonnegative": lagrange.is_nonnegative,
        "cauchy_schwarz": sp.Le(sp.Abs(sp.Symbol("l_j", real=True)), Delta),
        "m_F": lem["m_F"],
        "M_F": lem["M_F"],
        "C1": lem["C1"],
        "C2": lem["C2"],
        "bounds": (sp.Le(sp.exp(-2 * Delta / T) / L, alpha_i), sp.Le(alpha_i, sp.exp(2 * Delta / T) / L)),
        "C2_check": sp.simplify(lem["C2"] - expected_C2),
        "C1_check": sp.simplify(lem["C1"] - 1 / expected_C2),
    }
