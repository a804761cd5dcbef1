"""Theorem 1, Corollary 2 and the E1 crossing derived with SymPy (chapters 2 and 6; Reading the paper, §Theorem 1(a),
§Theorem 1(b) and §Corollary 2)."""

from __future__ import annotations

import sympy as sp

from attn_lib._validation import check_int

from ._sums import sum_linear

__all__ = [
    "e1_crossing_symbolic",
    "theorem1_steps",
    "theorem1_random_variance",
    "corollary2_limits_symbolic",
    "corollary2_remainder_symbolic",
]


def e1_crossing_symbolic() -> dict:
    r"""Where E1's leading term meets d~'s (chapter 6, ``prop-e1-crossing``): solve
    ``(t - N) p ||z|| = (t - N) rho ||z||`` with ``p = N/(t - 1)`` and ``rho = ||s_N|| / ||z||`` for ``N``.

    Returns ``ratio`` (the leading-term ratio ``E1/d~ = p / rho``), ``solutions`` (SymPy's solutions for ``N``:
    ``N = rho (t - 1)`` besides the trivial ``N = t``) and ``crossing``, the non-trivial one; ``check`` is SymPy's
    simplification of the ratio at the crossing minus 1 (0).

    Tested by ``tests/test_report_view.py::TestE1Crossing::test_the_crossing_is_rho_times_t_minus_one``.
    """
    t = sp.Symbol("t", positive=True)
    N = sp.Symbol("N", positive=True)
    rho, z = sp.symbols("rho z", positive=True)
    p = N / (t - 1)
    lead_e1 = (t - N) * p * z
    lead_d = (t - N) * rho * z
    sols = sp.solve(sp.Eq(lead_e1, lead_d), N)
    crossing = next(s_ for s_ in sols if sp.simplify(s_ - t) != 0)
    ratio = sp.simplify(lead_e1 / lead_d)
    return {
        "lead_e1": lead_e1,
        "lead_d_tilde": lead_d,
        "ratio": ratio,
        "solutions": sols,
        "crossing": crossing,
        "check": sp.simplify(ratio.subs(N, crossing) - 1),
    }


def theorem1_steps(N: int = 2, d: int = 2) -> dict:
    r"""Theorem 1's fixed-set bound, step by step ("Reading the paper", §Theorem 1(a)).

    With explicit symbols for ``N`` selected vectors in ``R^d`` (weights ``alpha_j1..alpha_jN > 0``, norms
    ``n_1..n_N <= M_I``) and one excluded ``x_i`` (weight ``0 < alpha_i <= abar``):

    1. ``alpha_i x_i - s = alpha_i (x_i - s/abar) - (1 - alpha_i/abar) s`` (``step1_check`` = 0 componentwise);
    2. ``x_i - s/abar = sum_j (alpha_j/abar)(x_i - x_j)`` (``step2_check`` = 0), weights ``alpha_j/abar > 0``
       summing to 1, so by the triangle inequality its norm is at most ``sum_j (alpha_j/abar) d1 = d1``
       (``step2_norm_check`` = 0);
    3. triangle inequality: ``||s|| <= sum_j ||alpha_j x_j|| = sum_j alpha_j n_j`` (``|alpha_j| = alpha_j`` since
       the weights are positive, ``step3_homogeneity_check`` = 0) ``<= abar M_I``: with ``n_j = M_I - t_j``,
       ``t_j >= 0``, SymPy expands the slack ``abar M_I - sum_j alpha_j n_j`` to ``sum_j alpha_j t_j`` and decides
       that it is non-negative (``step3_slack_nonnegative``);
    4. triangle inequality on step 1, with steps 2 and 3 inserted; the coefficient ``1 - alpha_i/abar`` lies in
       ``[0, 1]`` because ``alpha_i <= abar`` (``step4_coefficient_nonnegative``, ``step4_coefficient_at_most_one``),
       and ``alpha_i d1 + (1 - alpha_i/abar) abar M_I`` expands to the per-term bound (``step4_check`` = 0);
    5. ``sympy.Sum`` of the per-term bound over the ``L - N`` excluded tokens, evaluated by SymPy
       (``step5_evaluated``), then ``sum_{i not in I_N} alpha_i = 1 - abar`` substituted; the result minus
       ``d_max`` simplifies to 0 (``step5_check``).

    Chapter 2, ``thm-distance`` (a): the derivation (:func:`attn_lib.theory.theorem1_dmax` is the reference); tested by
    ``tests/test_symbolic.py::test_theorem1_steps``,
    ``tests/test_symbolic.py::test_theorem1_side_conditions_decided_by_sympy`` and, against the reference,
    ``tests/test_symbolic.py::test_theorem1_step5_sum_matches_numeric_sum_and_theory``.

    Parameters
    ----------
    N : int
        Number of selected vectors for steps 1-3, in ``[1, 5]``.
    d : int
        Dimension of the vectors, in ``[1, 4]``.

    Returns
    -------
    dict
        SymPy objects keyed by step; ``*_check`` entries are zero, ``*_nonnegative`` / ``*_at_most_one`` entries
        are SymPy's decision (``True``).
    """
    N = check_int("N", N, low=1, high=5)
    d = check_int("d", d, low=1, high=4)
    aj = sp.symbols(f"alpha_j1:{N + 1}", positive=True)
    ai = sp.Symbol("alpha_i", positive=True)
    d1, Mx, ab = sp.symbols("d_1 M_I abar", positive=True)
    k = sp.Symbol("k", integer=True, positive=True)
    al = sp.IndexedBase("alpha")
    per_term = al[k] * d1 + (ab - al[k]) * Mx  # the bound on the term of one excluded token (step 4)
    return {
        **_theorem1_identities(aj, ai, d, d1),
        **_theorem1_norm_s(aj, Mx, ab),
        **_theorem1_per_term(ai, d1, Mx, ab, per_term.subs(al[k], ai)),
        "step4_per_term": sp.Le(sp.Symbol("||alpha_i x_i - s||"), per_term),
        **_theorem1_sum(per_term, k, al, d1, Mx, ab),
    }


def _theorem1_identities(aj: tuple, ai: sp.Symbol, d: int, d1: sp.Symbol) -> dict:
    """Steps 1-2 of :func:`theorem1_steps`: the two vector identities, componentwise, and step 2's norm bound."""
    N = len(aj)
    xs = [sp.Matrix(sp.symbols(f"x_{j}_1:{d + 1}", real=True)) for j in range(1, N + 1)]
    xi = sp.Matrix(sp.symbols(f"x_i_1:{d + 1}", real=True))
    abar = sum(aj)
    s = sum((aj[j] * xs[j] for j in range(N)), sp.zeros(d, 1))
    lhs1 = ai * xi - s
    rhs1 = ai * (xi - s / abar) - (1 - ai / abar) * s
    lhs2 = xi - s / abar
    rhs2 = sum(((aj[j] / abar) * (xi - xs[j]) for j in range(N)), sp.zeros(d, 1))
    return {
        "abar": abar,
        "s": s,
        "step1_identity": sp.Eq(
            sp.Symbol("alpha_i x_i - s"), sp.Symbol("alpha_i (x_i - s/abar) - (1 - alpha_i/abar) s")
        ),
        "step1_check": (lhs1 - rhs1).applyfunc(sp.simplify),
        "step2_convex_combination": rhs2,
        "step2_check": (lhs2 - rhs2).applyfunc(sp.simplify),
        "step2_weights_sum": sp.simplify(sum(aj[j] / abar for j in range(N))),
        "step2_weights_positive": all(w.is_positive for w in (aj[j] / abar for j in range(N))),
        # step 2's norm bound: sum_j (alpha_j/abar) ||x_i - x_j|| <= sum_j (alpha_j/abar) d1 = d1
        "step2_norm_check": sp.simplify(sum(aj[j] / abar * d1 for j in range(N)) - d1),
    }


def _theorem1_norm_s(aj: tuple, Mx: sp.Symbol, ab: sp.Symbol) -> dict:
    """Step 3 of :func:`theorem1_steps`: ``||s|| <= sum_j ||alpha_j x_j|| = sum_j alpha_j n_j <= abar M_I``."""
    N = len(aj)
    abar = sum(aj)
    n = sp.symbols(f"n1:{N + 1}", nonnegative=True)
    t = sp.symbols(f"t1:{N + 1}", nonnegative=True)
    triangle = sum(sp.Abs(aj[j]) * n[j] for j in range(N))
    homogeneity = sp.simplify(triangle - sum(aj[j] * n[j] for j in range(N)))
    slack3 = sp.expand((abar * Mx - sum(aj[j] * n[j] for j in range(N))).subs({n[j]: Mx - t[j] for j in range(N)}))
    return {
        "step3_triangle": sp.Le(sp.Symbol("||s||"), triangle),
        "step3_homogeneity_check": homogeneity,
        "step3_slack": slack3,
        "step3_slack_nonnegative": slack3.is_nonnegative,
        "step3_norm_s": sp.Le(sp.Symbol("||s||"), ab * Mx),
    }


def _theorem1_per_term(ai: sp.Symbol, d1: sp.Symbol, Mx: sp.Symbol, ab: sp.Symbol, per_term_i) -> dict:
    """Step 4 of :func:`theorem1_steps`: the coefficient of ``||s||`` lies in ``[0, 1]`` because
    ``0 < alpha_i <= abar`` (``alpha_i = abar - u``, ``u >= 0``), and steps 2-3 inserted give ``per_term_i``."""
    u = sp.Symbol("u", nonnegative=True)
    coef = 1 - ai / ab
    step4_inserted = ai * d1 + coef * ab * Mx
    return {
        "step4_coefficient": coef,
        "step4_coefficient_nonnegative": sp.simplify(coef.subs(ai, ab - u)).is_nonnegative,
        "step4_coefficient_at_most_one": sp.simplify(1 - coef).is_nonnegative,
        "step4_inserted": step4_inserted,
        "step4_check": sp.expand(step4_inserted - per_term_i),
    }


def _theorem1_sum(per_term, k: sp.Symbol, al: sp.IndexedBase, d1: sp.Symbol, Mx: sp.Symbol, ab: sp.Symbol) -> dict:
    """Step 5 of :func:`theorem1_steps`: the sum over the ``L - N`` excluded tokens, evaluated by SymPy, then
    ``sum alpha_i = 1 - abar`` substituted."""
    L, Nn = sp.symbols("L N", positive=True)
    limits = (k, 1, L - Nn)
    evaluated = sum_linear(per_term, limits)
    substituted = evaluated.subs(sp.Sum(al[k], limits), 1 - ab)
    dmax = (1 - ab) * d1 + ((L - Nn) * ab - (1 - ab)) * Mx
    return {
        "step5_sum": sp.Sum(per_term, limits),
        "step5_evaluated": evaluated,
        "step5_expanded": substituted,
        "d_max": dmax,
        "step5_check": sp.simplify(substituted - dmax),
        "at_N_equals_L": sp.simplify(dmax.subs({Nn: L, ab: 1})),
    }


def theorem1_random_variance(n: int = 4, N: int = 2) -> dict:
    r"""Jensen-gap variance for sampling without replacement ("Reading the paper", §Theorem 1(b), proof step 5).

    ``n`` candidates (the ``L - 1`` tokens other than ``i``), ``N`` drawn. From the counts
    ``P(j in) = C(n-1, N-1)/C(n, N) = p`` and ``P(j, k in) = C(n-2, N-2)/C(n, N)``: ``Var 1_j = p(1-p)``,
    ``Cov(1_j, 1_k) = -p(1-p)/(n-1)``. With a symbolic Gram matrix ``G_jk = <a_j, a_k>``,
    ``Var sum_j 1_j a_j = sum_jk Cov_jk G_jk`` simplifies to
    ``p(1-p)[n/(n-1) sum_j G_jj - 1/(n-1) sum_jk G_jk]`` (``variance_check`` = 0).

    Chapter 2, ``thm-distance`` (b); tested by
    ``tests/test_symbolic.py::test_theorem1_random_variance_against_numeric_enumeration``.
    """
    n = check_int("n", n, low=2, high=6)
    N = check_int("N", N, low=1, high=n)
    p = sp.Rational(N, n)
    P1 = sp.binomial(n - 1, N - 1) / sp.binomial(n, N)
    P2 = sp.binomial(n - 2, N - 2) / sp.binomial(n, N) if N >= 2 else sp.Integer(0)
    var = sp.simplify(P1 - P1**2)
    cov = sp.simplify(P2 - P1**2)
    G = sp.Matrix(n, n, lambda j, k: sp.Symbol(f"G_{min(j, k) + 1}{max(j, k) + 1}", real=True))
    total = sum(G[j, k] * (var if j == k else cov) for j in range(n) for k in range(n))
    bracket = sp.Rational(n, n - 1) * sum(G[j, j] for j in range(n)) - sp.Rational(1, n - 1) * sum(G)
    claimed = p * (1 - p) * bracket
    return {
        "p": p,
        "P_single": P1,
        "P_pair": P2,
        "variance_indicator": var,
        "covariance_indicator": cov,
        "variance_check_p": sp.simplify(var - p * (1 - p)),
        "covariance_check": sp.simplify(cov + p * (1 - p) / (n - 1)),
        "variance_of_sum": sp.expand(total),
        "bracket_form": claimed,
        "variance_check": sp.expand(total - claimed),
    }


def corollary2_limits_symbolic() -> dict:
    r"""Corollary 2's limits ("Reading the paper", §Corollary 2).

    (i) ``p = N/(L-1) -> 0`` and ``(L-N)/L -> 1`` as ``L -> oo`` (``N`` fixed): E1's per-token terms
    ``(1+p) a_i - p z`` tend to ``a_i`` (shown coordinatewise). (ii) the outer factor ``(L-N)/L -> 0`` as ``N -> L``.

    Chapter 2, ``cor-two-regimes``; tested by ``tests/test_symbolic.py::test_multihead_and_corollary2_symbolic``.
    """
    L, N = sp.symbols("L N", positive=True)
    p = N / (L - 1)
    outer = (L - N) / L
    ps = sp.Symbol("p", nonnegative=True)
    a_i, z = sp.symbols("a_i z", real=True)  # one coordinate of a_i and z
    term = (1 + ps) * a_i - ps * z
    return {
        "p": p,
        "p_limit_L_to_oo": sp.limit(p, L, sp.oo),
        "outer_factor": outer,
        "outer_limit_L_to_oo": sp.limit(outer, L, sp.oo),
        "outer_limit_N_to_L": sp.limit(outer, N, L),
        "per_token_term": term,
        "per_token_term_limit_p_to_0": sp.limit(term, ps, 0),
    }


def corollary2_remainder_symbolic(L: int = 3, d: int = 2) -> dict:
    r"""Corollary 2(i)'s remainder bound, step by step ("Reading the paper", §Corollary 2).

    ``E1 = (L-N)/L sum_i ||a_i - p sum_{j != i} a_j||`` and ``R = E1 - (L-N)/L sum_i ||a_i||``.

    1. identity, with explicit vectors ``a_1..a_L`` in ``R^d`` and ``z = sum_j a_j``:
       ``a_i - p sum_{j != i} a_j = a_i - p (z - a_i)`` (``identity_check`` = 0 for every ``i``);
    2. reverse triangle inequality ``| ||u - v|| - ||u|| | <= ||v||`` with ``u = a_i``, ``v = p (z - a_i)`` and
       ``||p w|| = |p| ||w|| = p ||w||`` because ``p >= 0`` (``homogeneity_check`` = 0), so each term of ``E1``
       differs from ``||a_i||`` by at most ``p ||z - a_i||``;
    3. ``(L-N)/L <= 1``: SymPy simplifies ``1 - (L-N)/L`` to ``N/L`` and decides it is non-negative;
    4. triangle inequality ``||z - a_i|| <= ||z|| + ||a_i||``, then ``sympy.Sum`` over ``i = 1..L`` evaluated by SymPy
       and ``p = N/(L-1)`` substituted: the result minus ``N L/(L-1) ||z|| + p sum_i ||a_i||`` simplifies to 0
       (``bound_check``).

    Chapter 2, ``cor-two-regimes`` (i); tested by
    ``tests/test_symbolic.py::test_corollary2_remainder_bound_against_theory`` and
    ``tests/test_symbolic.py::test_corollary2_remainder_identity_with_numbers``.

    Parameters
    ----------
    L : int
        Number of explicit vectors for step 1, in ``[2, 5]``.
    d : int
        Their dimension, in ``[1, 3]``.

    Returns
    -------
    dict
        SymPy objects keyed by step; ``*_check`` entries are zero, ``*_nonnegative`` entries SymPy's decision.
    """
    L = check_int("L", L, low=2, high=5)
    d = check_int("d", d, low=1, high=3)
    p = sp.Symbol("p", nonnegative=True)
    a = [sp.Matrix(sp.symbols(f"a_{i}_1:{d + 1}", real=True)) for i in range(1, L + 1)]
    z = sum(a, sp.zeros(d, 1))
    lhs = [a[i] - p * sum((a[j] for j in range(L) if j != i), sp.zeros(d, 1)) for i in range(L)]
    rhs = [a[i] - p * (z - a[i]) for i in range(L)]
    identity = sp.Matrix([sp.expand(e) for i in range(L) for e in (lhs[i] - rhs[i])])
    w = sp.Symbol(r"\|z - a_i\|", nonnegative=True)
    homogeneity = sp.simplify(sp.Abs(p) * w - p * w)
    Ls, Ns = sp.symbols("L N", positive=True)
    outer = (Ls - Ns) / Ls
    outer_slack = sp.simplify(1 - outer)
    i = sp.Symbol("i", integer=True, positive=True)
    A = sp.IndexedBase("A")  # A[i] = ||a_i||, displayed as A_i
    Z = sp.Symbol(r"\|z\|", nonnegative=True)
    limits = (i, 1, Ls)
    summed = sp.Sum(p * (Z + A[i]), limits)
    evaluated = sum_linear(p * (Z + A[i]), limits)
    p_exact = Ns / (Ls - 1)
    bound = evaluated.subs(p, p_exact)
    target = Ns * Ls / (Ls - 1) * Z + p_exact * sp.Sum(A[i], limits)
    return {
        "vectors": a,
        "z": z,
        "term": lhs[0],
        "term_rewritten": rhs[0],
        "identity_check": identity,
        "reverse_triangle": sp.Le(sp.Abs(sp.Symbol(r"\|a_i - p(z - a_i)\|") - sp.Symbol(r"\|a_i\|")), p * w),
        "homogeneity_check": homogeneity,
        "outer_factor": outer,
        "outer_slack": outer_slack,
        "outer_slack_nonnegative": outer_slack.is_nonnegative,
        "remainder_first": sp.Le(sp.Symbol("|R|"), sp.Sum(p * sp.IndexedBase("D")[i], limits)),
        "triangle_sum": summed,
        "triangle_sum_evaluated": evaluated,
        "bound": bound,
        "bound_check": sp.simplify(bound - target),
    }
