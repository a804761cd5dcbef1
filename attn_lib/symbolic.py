"""SymPy derivations of the paper's results, returned as SymPy objects for step-by-step display.

Every function returns a ``dict`` whose values are SymPy expressions, matrices or ``Eq``/relational objects
(never strings), in the order a chapter shows them. Keys ending in ``_check`` hold an expression that SymPy has
simplified to ``0`` -- the machine-checked part of the derivation; the tests assert them. Inequality steps
(Cauchy-Schwarz, triangle inequality, Markov, Hoeffding) are named in the docstrings; their side conditions are
entries whose value is SymPy's own decision from the symbols' assumptions (``expr.is_nonnegative`` etc., a Python
``bool``), and sums are ``sympy.Sum(...).doit()`` results, never typed-in closed forms.
Each function runs in well under two seconds.

Section names refer to the book's appendix "Reading the paper".
"""

from __future__ import annotations

import sympy as sp
from sympy.simplify.simplify import factor_sum

__all__ = [
    "softmax_jacobian",
    "max_alpha_one_minus_alpha",
    "lemma1_constants_symbolic",
    "lemma1_general",
    "corollary1_from_lemma1",
    "two_way_tie_spectral_norm",
    "corollary3_bounds_symbolic",
    "e1_crossing_symbolic",
    "theorem1_steps",
    "theorem1_random_variance",
    "corollary2_limits_symbolic",
    "corollary2_remainder_symbolic",
    "theorem2_expansion",
    "theorem2_tail_bounds",
    "sqrt5_example_exact",
    "lemma2_jacobian",
    "multihead_coverage_symbolic",
]


def _check_int(name: str, value, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not (low <= value <= high):
        raise ValueError(f"{name} must be an integer in [{low}, {high}] (got {value!r})")
    return value


def _sum_linear(term, limits):
    """``Sum(term, limits)`` evaluated by SymPy: split over the terms of ``term``, constants factored out."""
    total = sp.expand(sp.Sum(sp.expand(term), limits)).doit()
    return total.replace(lambda e: isinstance(e, sp.Sum), factor_sum)


def softmax_jacobian(L: int = 3) -> dict:
    r"""Softmax Jacobian from the definition ("Reading the paper", §Corollary 3).

    Steps: logits ``l_1..l_L`` and ``T > 0``; ``alpha_i = exp(l_i/T) / S``; ``J_raw[i, j] = d alpha_i / d l_j``
    by differentiation; the closed form ``(diag(alpha) - alpha alpha^T) / T``; ``difference_check`` = zero matrix.
    ``L`` in ``[1, 6]``.
    """
    L = _check_int("L", L, 1, 6)
    T = sp.Symbol("T", positive=True)
    l = sp.symbols(f"l1:{L + 1}", real=True)
    S = sum(sp.exp(li / T) for li in l)
    alpha = sp.Matrix([sp.exp(li / T) / S for li in l])
    J_raw = alpha.jacobian(sp.Matrix(l))
    a = sp.symbols(f"alpha1:{L + 1}", positive=True)
    J_alpha = sp.Matrix(L, L, lambda i, j: (a[i] * (1 if i == j else 0) - a[i] * a[j]) / T)
    J_closed = (sp.diag(*alpha) - alpha * alpha.T) / T
    diff = (J_raw - J_closed).applyfunc(lambda e: sp.simplify(sp.together(e)))
    return {
        "T": T,
        "logits": sp.Matrix(l),
        "S": S,
        "alpha": alpha,
        "jacobian_raw": J_raw,
        "jacobian_in_alpha": J_alpha,
        "jacobian_closed": J_closed,
        "identity": sp.Eq(sp.Symbol("J"), sp.Symbol("(diag(alpha) - alpha alpha^T)/T")),
        "difference_check": diff,
    }


def max_alpha_one_minus_alpha() -> dict:
    r"""``max_{alpha in [0,1]} alpha (1 - alpha) = 1/4`` ("Reading the paper", §Corollary 3, entrywise bound).

    Steps: ``f``, ``f'``, critical point ``1/2``, ``f''(1/2) = -2 < 0``, endpoint values ``0``, maximum ``1/4``;
    ``completing_square``: ``1/4 - f = (alpha - 1/2)^2 >= 0``.
    """
    a = sp.Symbol("alpha", real=True)
    f = a * (1 - a)
    df = sp.diff(f, a)
    crit = sp.solve(sp.Eq(df, 0), a)
    d2 = sp.diff(f, a, 2)
    maximum = sp.Max(*[f.subs(a, c) for c in crit], f.subs(a, 0), f.subs(a, 1))
    return {
        "alpha": a,
        "f": f,
        "derivative": df,
        "critical_points": crit,
        "second_derivative": d2,
        "endpoint_values": (f.subs(a, 0), f.subs(a, 1)),
        "maximum": maximum,
        "completing_square": sp.Eq(sp.Rational(1, 4) - f, (a - sp.Rational(1, 2)) ** 2),
        "completing_square_check": sp.expand(sp.Rational(1, 4) - f - (a - sp.Rational(1, 2)) ** 2),
    }


def lemma1_constants_symbolic(F_expr=None, l=None, a=None) -> dict:
    r"""Lemma 1 constants for a symbolic ``F`` ("Reading the paper", §Lemma 1).

    Steps: ``m_F = min_{[-a,a]} F``, ``M_F = max_{[-a,a]} F`` (``sympy.calculus.util.minimum/maximum``),
    ``L m_F <= S <= L M_F``, ``C1 = m_F / M_F``, ``C2 = M_F / m_F`` and the bounds ``C1/L <= alpha_i <= C2/L``.
    Defaults: ``F = exp(l/T)``, ``l`` real, ``a > 0``, giving ``C2 = exp(2a/T)``.
    """
    from sympy.calculus.util import maximum, minimum

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


def two_way_tie_spectral_norm() -> dict:
    r"""Spectral norm ``1/(2T)`` at a two-way tie ("Reading the paper", §Corollary 3, counterexample to ``1/(4T)``).

    Two tokens, ``sigma = sigma(u)`` with ``u = (l_1 - l_2)/T``: ``alpha = (sigma, 1 - sigma)``,
    ``J = (diag alpha - alpha alpha^T)/T``, eigenvalues ``{0, 2 sigma (1 - sigma)/T}``, maximised at
    ``sigma = 1/2`` (``u = 0``, the tie) to ``1/(2T)``, eigenvector ``(1, -1)/sqrt 2``; the ratio to the paper's
    ``1/(4T)`` is 2.
    """
    T = sp.Symbol("T", positive=True)
    s = sp.Symbol("sigma", positive=True)
    u = sp.Symbol("u", real=True)
    alpha = sp.Matrix([s, 1 - s])
    J = (sp.diag(*alpha) - alpha * alpha.T) / T
    eig = J.eigenvals()
    eigs = [sp.factor(e) for e in eig]
    lam = next(e for e in eigs if e != 0)
    crit = sp.solve(sp.diff(lam, s), s)
    spectral = sp.simplify(lam.subs(s, crit[0]))
    J_tie = J.subs(s, sp.Rational(1, 2))
    v = sp.Matrix([1, -1]) / sp.sqrt(2)
    return {
        "sigma_of_u": sp.Eq(s, 1 / (1 + sp.exp(-u))),
        "alpha": alpha,
        "J": J,
        "eigenvalues": eigs,
        "nonzero_eigenvalue": lam,
        "critical_sigma": crit,
        "spectral_norm_at_tie": spectral,
        "J_at_tie": J_tie,
        "eigenvector": v,
        "eigen_check": sp.simplify(J_tie * v - spectral * v),
        "ratio_to_paper": sp.simplify(spectral / (1 / (4 * T))),
    }


def corollary3_bounds_symbolic(L: int = 3) -> dict:
    r"""Corrected Corollary 3 constants for general ``alpha`` ("Reading the paper", §Corollary 3, items 1-3), computed.

    The weights are a softmax, ``alpha_j = w_j / W`` with ``w_j = exp(l_j / T) > 0`` and ``W = sum_k w_k``: with
    positive symbols SymPy knows every sign, so the absolute values of the Gershgorin row sum are *evaluated*
    (``J_11 > 0``, ``J_1j < 0`` for ``j != 1``), not typed. ``gershgorin_check`` is SymPy's simplification of that
    computed sum minus ``2 alpha_1 (1 - alpha_1)/T`` (0). The maxima over ``alpha_1 in [0, 1]`` are computed by
    ``sympy.maximum``; the displayed bounds use them: entry ``<= max alpha(1-alpha)/T = 1/(4T)``, spectral norm
    ``<=`` the largest Gershgorin row sum ``= 1/(2T)``, row gradient ``||e_i - alpha||^2 <= 2 (1 - alpha_i)^2``
    (slack ``sum_{j != k, both != i} alpha_j alpha_k >= 0``, ``row_gradient_check`` = 0), so
    ``||grad alpha_i|| <= sqrt(2) max alpha(1-alpha)/T = sqrt(2)/(4T)``.
    """
    L = _check_int("L", L, 2, 6)
    T = sp.Symbol("T", positive=True)
    w = list(sp.symbols(f"w1:{L + 1}", positive=True))
    W = sum(w)
    al = sp.Matrix([wj / W for wj in w])
    J = (sp.diag(*al) - al * al.T) / T
    gersh = sp.simplify(sum(sp.Abs(sp.factor(J[0, j])) for j in range(L)))  # the signs come from positivity
    # SymPy's own sign decisions (Python bools), one entry per entry of the first row
    signs = {"J11_positive": bool(sp.factor(J[0, 0]).is_positive)}
    signs.update({f"J1{j + 1}_negative": bool(sp.factor(J[0, j]).is_negative) for j in range(1, L)})
    alpha1 = al[0]
    a1 = sp.Symbol("alpha_1", nonnegative=True)
    peak = sp.maximum(a1 * (1 - a1), a1, sp.Interval(0, 1))  # 1/4, at alpha_1 = 1/2
    # row gradient in the alpha coordinates (simplex: alpha_1 = 1 - sum_{j>1} alpha_j)
    rest = list(sp.symbols(f"alpha2:{L + 1}", nonnegative=True))
    a = [1 - sum(rest)] + rest
    row_sq = (1 - a[0]) ** 2 + sum(x**2 for x in a[1:])
    cross = sum(a[j] * a[k] for j in range(1, L) for k in range(1, L) if j != k)
    grad = sp.Symbol("||grad alpha_1||_2")
    return {
        "J": J,
        **signs,
        "diagonal_entry_in_alpha": a1 * (1 - a1) / T,
        "gershgorin_in_alpha": 2 * a1 * (1 - a1) / T,
        "row_gradient_in_alpha": sp.Le(grad, sp.sqrt(2) * a1 * (1 - a1) / T),
        "diagonal_entry": J[0, 0],
        "max_alpha_one_minus_alpha": peak,
        "entry_bound": sp.Le(a1 * (1 - a1) / T, peak / T),
        "gershgorin_row_sum": gersh,
        "gershgorin_check": sp.simplify(gersh - 2 * alpha1 * (1 - alpha1) / T),
        "spectral_bound": sp.Le(sp.Symbol("||J||_2"), 2 * peak / T),
        "row_gradient_sq": row_sq,
        "row_gradient_slack": sp.expand(2 * (1 - a[0]) ** 2 - row_sq),
        "row_gradient_slack_form": cross,
        "row_gradient_check": sp.expand(2 * (1 - a[0]) ** 2 - row_sq - cross),
        "row_gradient_bound": sp.Le(grad, sp.sqrt(2) * peak / T),
    }


def e1_crossing_symbolic() -> dict:
    r"""Where E1's leading term meets d~'s (chapter 6, ``prop-e1-crossing``): solve
    ``(t - N) p ||z|| = (t - N) rho ||z||`` with ``p = N/(t - 1)`` and ``rho = ||s_N|| / ||z||`` for ``N``.

    Returns ``ratio`` (the leading-term ratio ``E1/d~ = p / rho``), ``solutions`` (SymPy's solutions for ``N``:
    ``N = rho (t - 1)`` besides the trivial ``N = t``) and ``crossing``, the non-trivial one; ``check`` is SymPy's
    simplification of the ratio at the crossing minus 1 (0).
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
    N = _check_int("N", N, 1, 5)
    d = _check_int("d", d, 1, 4)
    aj = sp.symbols(f"alpha_j1:{N + 1}", positive=True)
    ai = sp.Symbol("alpha_i", positive=True)
    xs = [sp.Matrix(sp.symbols(f"x_{j}_1:{d + 1}", real=True)) for j in range(1, N + 1)]
    xi = sp.Matrix(sp.symbols(f"x_i_1:{d + 1}", real=True))
    abar = sum(aj)
    s = sum((aj[j] * xs[j] for j in range(N)), sp.zeros(d, 1))
    lhs1 = ai * xi - s
    rhs1 = ai * (xi - s / abar) - (1 - ai / abar) * s
    step1 = (lhs1 - rhs1).applyfunc(sp.simplify)
    lhs2 = xi - s / abar
    rhs2 = sum(((aj[j] / abar) * (xi - xs[j]) for j in range(N)), sp.zeros(d, 1))
    step2 = (lhs2 - rhs2).applyfunc(sp.simplify)
    weights_sum = sp.simplify(sum(aj[j] / abar for j in range(N)))
    d1, Mx, ab, L, Nn = sp.symbols("d_1 M_I abar L N", positive=True)
    # step 2's norm bound: sum_j (alpha_j/abar) ||x_i - x_j|| <= sum_j (alpha_j/abar) d1 = d1
    step2_norm = sp.simplify(sum(aj[j] / abar * d1 for j in range(N)) - d1)
    # step 3: ||s|| <= sum_j ||alpha_j x_j|| = sum_j |alpha_j| n_j = sum_j alpha_j n_j <= abar M_I
    n = sp.symbols(f"n1:{N + 1}", nonnegative=True)
    t = sp.symbols(f"t1:{N + 1}", nonnegative=True)
    triangle = sum(sp.Abs(aj[j]) * n[j] for j in range(N))
    homogeneity = sp.simplify(triangle - sum(aj[j] * n[j] for j in range(N)))
    slack3 = sp.expand((abar * Mx - sum(aj[j] * n[j] for j in range(N))).subs({n[j]: Mx - t[j] for j in range(N)}))
    # step 4: coefficient of ||s|| in [0, 1] because 0 < alpha_i <= abar (alpha_i = abar - u, u >= 0)
    u = sp.Symbol("u", nonnegative=True)
    coef = 1 - ai / ab
    coef_low = sp.simplify(coef.subs(ai, ab - u))
    coef_high_slack = sp.simplify(1 - coef)
    k = sp.Symbol("k", integer=True, positive=True)
    al = sp.IndexedBase("alpha")
    per_term = al[k] * d1 + (ab - al[k]) * Mx
    step4_inserted = ai * d1 + coef * ab * Mx
    step4 = sp.expand(step4_inserted - per_term.subs(al[k], ai))
    # step 5: the sum over the L - N excluded tokens, evaluated by SymPy, then sum alpha_i = 1 - abar
    limits = (k, 1, L - Nn)
    summed = sp.Sum(per_term, limits)
    evaluated = _sum_linear(per_term, limits)
    out_sum = sp.Sum(al[k], limits)
    substituted = evaluated.subs(out_sum, 1 - ab)
    dmax = (1 - ab) * d1 + ((L - Nn) * ab - (1 - ab)) * Mx
    step5 = sp.simplify(substituted - dmax)
    return {
        "abar": abar,
        "s": s,
        "step1_identity": sp.Eq(
            sp.Symbol("alpha_i x_i - s"), sp.Symbol("alpha_i (x_i - s/abar) - (1 - alpha_i/abar) s")
        ),
        "step1_check": step1,
        "step2_convex_combination": rhs2,
        "step2_check": step2,
        "step2_weights_sum": weights_sum,
        "step2_weights_positive": all(w.is_positive for w in (aj[j] / abar for j in range(N))),
        "step2_norm_check": step2_norm,
        "step3_triangle": sp.Le(sp.Symbol("||s||"), triangle),
        "step3_homogeneity_check": homogeneity,
        "step3_slack": slack3,
        "step3_slack_nonnegative": slack3.is_nonnegative,
        "step3_norm_s": sp.Le(sp.Symbol("||s||"), ab * Mx),
        "step4_coefficient": coef,
        "step4_coefficient_nonnegative": coef_low.is_nonnegative,
        "step4_coefficient_at_most_one": coef_high_slack.is_nonnegative,
        "step4_inserted": step4_inserted,
        "step4_check": step4,
        "step4_per_term": sp.Le(sp.Symbol("||alpha_i x_i - s||"), per_term),
        "step5_sum": summed,
        "step5_evaluated": evaluated,
        "step5_expanded": substituted,
        "d_max": dmax,
        "step5_check": step5,
        "at_N_equals_L": sp.simplify(dmax.subs({Nn: L, ab: 1})),
    }


def theorem1_random_variance(n: int = 4, N: int = 2) -> dict:
    r"""Jensen-gap variance for sampling without replacement ("Reading the paper", §Theorem 1(b), proof step 5).

    ``n`` candidates (the ``L - 1`` tokens other than ``i``), ``N`` drawn. From the counts
    ``P(j in) = C(n-1, N-1)/C(n, N) = p`` and ``P(j, k in) = C(n-2, N-2)/C(n, N)``: ``Var 1_j = p(1-p)``,
    ``Cov(1_j, 1_k) = -p(1-p)/(n-1)``. With a symbolic Gram matrix ``G_jk = <a_j, a_k>``,
    ``Var sum_j 1_j a_j = sum_jk Cov_jk G_jk`` simplifies to
    ``p(1-p)[n/(n-1) sum_j G_jj - 1/(n-1) sum_jk G_jk]`` (``variance_check`` = 0).
    """
    n = _check_int("n", n, 2, 6)
    N = _check_int("N", N, 1, n)
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
    L = _check_int("L", L, 2, 5)
    d = _check_int("d", d, 1, 3)
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
    evaluated = _sum_linear(p * (Z + A[i]), limits)
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


def theorem2_expansion(N: int = 3) -> dict:
    r"""Theorem 2: expansion of ``X_i^2`` and the bound ``X_i^2 <= xi_i^2`` ("Reading the paper", §Theorem 2, step 2).

    Fix ``i`` in ``I_N`` and name the other ``N - 1`` selected tokens ``1..N-1`` with weights ``alpha_j`` and Gram
    entries ``<x_j, x_k>``. Using ``||x_j||^2 = M^2`` and writing
    ``<x_j, x_k> = M^2 - delta^2/2 - eta_jk/2`` with ``eta_jk = ||x_j - x_k||^2 - delta^2 >= 0``:

    * ``X_i^2 = sum_j alpha_j^2 M^2 + sum_{j!=k} alpha_j alpha_k <x_j, x_k>``;
    * ``xi_i^2 - X_i^2 = 1/2 sum_{j!=k} alpha_j alpha_k eta_jk >= 0`` (``slack_check`` = 0);
    * ``xi_i^2 = (M^2 - delta^2/2) beta_i^2 + delta^2/2 sum_j alpha_j^2``, ``beta_i = sum_j alpha_j``
      (``beta_form_check`` = 0).
    """
    N = _check_int("N", N, 2, 6)
    K = N - 1
    M, delta = sp.symbols("M delta", positive=True)
    a = sp.symbols(f"alpha1:{K + 1}", positive=True)
    eta = {
        (j, k): sp.Symbol(f"eta_{min(j, k) + 1}{max(j, k) + 1}", nonnegative=True)
        for j in range(K)
        for k in range(K)
        if j != k
    }
    g = {
        (j, k): sp.Symbol(f"g_{min(j, k) + 1}{max(j, k) + 1}", real=True) for j in range(K) for k in range(K) if j != k
    }
    X2_gram = sum(a[j] ** 2 * M**2 for j in range(K)) + sum(a[j] * a[k] * g[(j, k)] for (j, k) in g)
    subs = {g[(j, k)]: M**2 - delta**2 / 2 - eta[(j, k)] / 2 for (j, k) in g}
    X2 = sp.expand(X2_gram.subs(subs))
    xi2 = M**2 * sum(x**2 for x in a) + (M**2 - delta**2 / 2) * sum(a[j] * a[k] for (j, k) in g)
    beta = sum(a)
    xi2_beta = (M**2 - delta**2 / 2) * beta**2 + delta**2 / 2 * sum(x**2 for x in a)
    slack = sp.Rational(1, 2) * sum(a[j] * a[k] * eta[(j, k)] for (j, k) in eta)
    return {
        "X_squared_gram": X2_gram,
        "inner_product_substitution": [sp.Eq(k_, v) for k_, v in subs.items()],
        "X_squared": X2,
        "xi_squared": xi2,
        "slack": slack,
        "slack_check": sp.expand(xi2 - X2 - slack),
        "slack_nonnegative": slack.is_nonnegative,
        "xi_squared_beta_form": xi2_beta,
        "beta_form_check": sp.expand(xi2 - xi2_beta),
        "bound": sp.Le(sp.Symbol("X_i") ** 2, sp.Symbol("xi_i") ** 2),
    }


def theorem2_tail_bounds() -> dict:
    r"""Theorem 2's Markov and Hoeffding steps, with their side conditions ("Reading the paper", §Theorem 2).

    *Markov* (side conditions ``X >= 0``, ``r > 0``): the pointwise inequality ``r 1{X > r} <= X`` is checked on
    both branches of ``sympy.Piecewise``: for ``X = r + t`` (``t > 0``) the difference is ``t > 0``; for
    ``X = r - u`` (``u >= 0``) the indicator is 0 and the difference is ``X >= 0``. Taking expectations and dividing
    by ``r > 0`` gives ``P(X > r) <= E X / r``; with ``E X_i <= xi_i`` (step 2: ``E X_i = xi_i - w``, ``w >= 0``)
    also ``<= xi_i / r``. ``E N_s >= sum_i (1 - P(X_i > r)) >= sum_i (1 - xi_i/r)``: ``sympy.Sum`` evaluated by
    SymPy, divided by ``N``, minus the lower bound of Theorem 2 simplifies to 0 (``lower_check``).

    *Hoeffding* for one variable in ``[a, b]``: ``P(X - E X <= -t) <= exp(-2 t^2/(b - a)^2)``, ``t > 0``. With
    ``t = mu - r`` (side condition ``r < mu``) and range ``2M``, SymPy simplifies the exponent to
    ``(mu - r)^2/(2 M^2)`` (``exponent_check`` = 0); with range ``M`` to ``2 (mu - r)^2/M^2``. The range condition:
    ``0 <= X_i <= M beta_i`` with ``beta_i <= 1`` fits in ``[0, 2M]`` (``range_slack_nonnegative``). Finally the
    derivative of ``exp(-(mu - r)^2/(2 M^2))`` in ``mu`` is negative for ``mu > r`` (``decreasing_in_mu``): the
    reason the paper's substitution ``mu -> xi >= mu`` is the wrong direction.

    Returns
    -------
    dict
        SymPy objects; ``*_check`` entries are zero, boolean entries are SymPy's decisions (``True``).
    """
    X = sp.Symbol("X", nonnegative=True)
    r, t, M, mu = sp.symbols("r t M mu", positive=True)
    u, w, v = sp.symbols("u w v", nonnegative=True)
    indicator = sp.Piecewise((1, X > r), (0, True))
    pointwise = X - r * indicator
    above = sp.simplify(pointwise.subs(X, r + t))
    below = sp.simplify(pointwise.subs(X, r - u))
    xi = sp.Symbol("xi", positive=True)
    via_xi = sp.simplify(xi / r - (xi - w) / r)
    i = sp.Symbol("i", integer=True, positive=True)
    N = sp.Symbol("N", positive=True, integer=True)
    xis = sp.IndexedBase("xi")
    limits = (i, 1, N)
    summed = _sum_linear(1 - xis[i] / r, limits)
    lower = sp.expand(summed / N)
    lower_target = 1 - sp.Sum(xis[i], limits) / (r * N)
    tt = sp.Symbol("t", positive=True)
    R = sp.Symbol("R", positive=True)
    hoeffding = sp.exp(-2 * tt**2 / R**2)
    exponent_2M = sp.simplify(2 * (mu - r) ** 2 / (2 * M) ** 2)
    exponent_M = sp.simplify(2 * (mu - r) ** 2 / M**2)
    beta = 1 - v  # beta_i = abar_N - alpha_i <= 1
    range_slack = sp.expand(2 * M - M * beta)
    paper_form = sp.exp(-((mu - r) ** 2) / (2 * M**2))
    derivative = sp.diff(paper_form, mu)
    derivative_above = sp.simplify(derivative.subs(mu, r + t))
    return {
        "markov_indicator": indicator,
        "markov_pointwise": pointwise,
        "markov_above": above,
        "markov_above_positive": above.is_positive,
        "markov_below": below,
        "markov_below_check": sp.simplify(below - (r - u)),
        "markov_below_nonnegative": X.is_nonnegative,
        "markov": sp.Le(sp.Symbol("P(X > r)"), sp.Symbol("E X") / r),
        "markov_via_xi_slack": via_xi,
        "markov_via_xi_nonnegative": via_xi.is_nonnegative,
        "lower_sum": sp.Sum(1 - xis[i] / r, limits),
        "lower_sum_evaluated": summed,
        "lower": lower,
        "lower_check": sp.simplify(lower - lower_target),
        "hoeffding": sp.Le(sp.Symbol("P(X - E X <= -t)"), hoeffding),
        "exponent_range_2M": exponent_2M,
        "exponent_check": sp.simplify(exponent_2M - (mu - r) ** 2 / (2 * M**2)),
        "exponent_range_M": exponent_M,
        "range_slack": range_slack,
        "range_slack_nonnegative": range_slack.is_nonnegative,
        "paper_form": paper_form,
        "derivative_in_mu": derivative,
        "derivative_at_mu_above_r": derivative_above,
        "decreasing_in_mu": derivative_above.is_negative,
    }


def sqrt5_example_exact() -> dict:
    r"""The ``sqrt(5) eps`` example exactly for ``L = 2`` ("Reading the paper", §The √5 ε example).

    ``l1 = (c + eps, c)``, ``l2 = (c - eps, c + eps)``; ``||l1 - l2|| = sqrt(5) eps``;
    ``alpha_1 = sigma((l_1 - l_2)/T)``
    so ``Delta alpha_1 = sigma(eps/T) - sigma(-2 eps/T) = 3 eps/(4T) + O(eps^3)``; ``||Delta alpha||_2 =
    sqrt(2)|Delta alpha_1| ~ 3 sqrt(2) eps / (4T)``.
    """
    c = sp.Symbol("c", real=True)
    eps, T = sp.symbols("epsilon T", positive=True)
    l1 = sp.Matrix([c + eps, c])
    l2 = sp.Matrix([c - eps, c + eps])
    dist = sp.sqrt(sum((l1 - l2).applyfunc(lambda e: e**2)))

    def sig(u):
        return 1 / (1 + sp.exp(-u))

    da1 = sig((l1[0] - l1[1]) / T) - sig((l2[0] - l2[1]) / T)
    series = sp.series(da1, eps, 0, 3).removeO()
    leading = sp.simplify(series)
    norm_leading = sp.sqrt(2) * leading
    return {
        "l1": l1,
        "l2": l2,
        "logit_distance": sp.simplify(dist),
        "delta_alpha_1": da1,
        "delta_alpha_1_series": leading,
        "delta_alpha_norm_leading": norm_leading,
        "norm_coefficient": sp.simplify(norm_leading * T / eps),
        "distance_check": sp.simplify(dist - sp.sqrt(5) * eps),
    }


def lemma2_jacobian(L: int = 3) -> dict:
    r"""Lemma 2: Jacobian of the general normaliser and its norm bound ("Reading the paper", §Lemma 2).

    For a generic ``F = Function('F')`` and ``L`` logits:

    * ``alpha_i = F(l_i)/S``; ``J_raw`` by ``sympy`` differentiation (the quotient rule); the closed form
      ``J_ij = F'(l_j)(delta_ij - alpha_i)/S`` (``difference_check`` = zero matrix);
    * with real symbols ``g_j = F'(l_j)``: the singular values of ``diag(g)``, computed by SymPy, are ``|g_j|``, so
      ``||diag F'||_2 = max_j |g_j|`` (``diag_norm_check`` = 0);
    * the singular values of the rank-one ``alpha g^T`` are ``||alpha|| ||g||`` and zeros (``rank_one_check`` = 0);
    * ``||alpha||_2 <= 1`` on the simplex: ``(sum alpha)^2 - sum alpha^2`` expands to the non-negative cross terms
      (``alpha_norm_check`` = 0, ``alpha_cross_nonnegative``);
    * ``||g||_2^2 <= sum_{j=1}^L G^2 = L G^2`` with ``G = max|F'|`` and ``S >= sum_{j=1}^L m = L m`` with
      ``m = min F``: both sums by ``sympy.Sum(...).doit()``;
    * triangle inequality ``||J|| <= (||diag F'|| + ||alpha F'^T||)/S`` (side condition ``S > 0``, decided by SymPy
      for positive ``F`` values); inserting the pieces gives the bound (``bound_check`` = 0).

    Parameters
    ----------
    L : int
        Number of logits, in ``[1, 6]``.

    Returns
    -------
    dict
        SymPy objects; ``*_check`` entries are zero, boolean entries are SymPy's decisions (``True``).
    """
    L = _check_int("L", L, 1, 6)
    F = sp.Function("F")
    l = sp.symbols(f"l1:{L + 1}", real=True)
    S = sum(F(li) for li in l)
    alpha = sp.Matrix([F(li) / S for li in l])
    J_raw = alpha.jacobian(sp.Matrix(l))
    dF = [sp.diff(F(li), li) for li in l]
    J_closed = sp.Matrix(L, L, lambda i, j: dF[j] * ((1 if i == j else 0) - alpha[i]) / S)
    diff = (J_raw - J_closed).applyfunc(lambda e: sp.simplify(sp.together(e)))
    g = sp.Matrix(sp.symbols(f"g1:{L + 1}", real=True))  # g_j = F'(l_j)
    a = sp.Matrix(sp.symbols(f"alpha1:{L + 1}", nonnegative=True))
    f = sp.symbols(f"f1:{L + 1}", positive=True)  # f_j = F(l_j) > 0
    diag_sv = sp.diag(*g).singular_values()
    diag_norm = sp.Max(*diag_sv)
    rank_one = a * g.T
    rank_one_sv = rank_one.singular_values()
    rank_one_norm = sp.Max(*rank_one_sv)
    norm_a, norm_g = sp.sqrt(sum(x**2 for x in a)), sp.sqrt(sum(x**2 for x in g))
    cross = sum(a[j] * a[k] for j in range(L) for k in range(L) if j != k)
    maxdF, minF = sp.symbols("max|F'| minF", positive=True)
    Ls = sp.Symbol("L", positive=True, integer=True)
    j = sp.Symbol("j", integer=True, positive=True)
    g_sq_sum = sp.Sum(maxdF**2, (j, 1, Ls)).doit()
    g_norm_bound = sp.sqrt(g_sq_sum)
    S_lower = sp.Sum(minF, (j, 1, Ls)).doit()
    computed = (maxdF + 1 * g_norm_bound) / S_lower  # ||alpha|| <= 1
    bound = maxdF * (1 / (Ls * minF) + 1 / (sp.sqrt(Ls) * minF))
    return {
        "F": F,
        "S": S,
        "alpha": alpha,
        "jacobian_raw": J_raw,
        "jacobian_closed": J_closed,
        "difference_check": diff,
        "diag_singular_values": diag_sv,
        "diag_norm": diag_norm,
        "diag_norm_check": sp.simplify(diag_norm - sp.Max(*[sp.Abs(x) for x in g])),
        "rank_one_singular_values": rank_one_sv,
        "rank_one_norm": rank_one_norm,
        "rank_one_check": sp.simplify(rank_one_norm - norm_a * norm_g),
        "alpha_cross_terms": cross,
        "alpha_norm_check": sp.expand(sum(a) ** 2 - sum(x**2 for x in a) - cross),
        "alpha_cross_nonnegative": cross.is_nonnegative if L > 1 else True,
        "S_positive": sum(f).is_positive,
        "g_norm_sq_sum": sp.Sum(maxdF**2, (j, 1, Ls)),
        "g_norm_bound": g_norm_bound,
        "S_lower_sum": sp.Sum(minF, (j, 1, Ls)),
        "S_lower_value": S_lower,
        "diag_term_norm": sp.Eq(sp.Symbol("||diag(F')||_2"), maxdF),
        "rank_one_term_norm": sp.Le(sp.Symbol("||alpha F'^T||_2"), g_norm_bound),
        "S_lower": sp.Ge(sp.Symbol("S"), S_lower),
        "triangle": sp.Le(
            sp.Symbol("||J||_2"), (sp.Symbol("||diag(F')||_2") + sp.Symbol("||alpha F'^T||_2")) / sp.Symbol("S")
        ),
        "bound_computed": computed,
        "bound": bound,
        "bound_check": sp.simplify(computed - bound),
    }


def multihead_coverage_symbolic() -> dict:
    r"""Multi-head coverage ``1 - (1 - p)^H`` ("Reading the paper", §Multi-head coverage):
    at ``p = 4/5, H = 3`` it is ``124/125 = 0.992``;
    the smallest ``H`` with coverage ``>= 99/100`` is ``ceil(log(1/100)/log(1/5)) = 3``.
    """
    p = sp.Symbol("p", positive=True)
    H = sp.Symbol("H", positive=True, integer=True)
    c = sp.Symbol("c", positive=True)
    cov = 1 - (1 - p) ** H
    at = cov.subs({p: sp.Rational(4, 5), H: 3})
    Hmin_expr = sp.ceiling(sp.log(1 - c) / sp.log(1 - p))
    Hmin = Hmin_expr.subs({c: sp.Rational(99, 100), p: sp.Rational(4, 5)})
    return {
        "coverage": cov,
        "coverage_p08_H3": at,
        "coverage_p08_H3_float": sp.N(at),
        "H_min": Hmin_expr,
        "H_min_p08_c099": sp.simplify(Hmin),
        "H_min_ratio_value": sp.N(sp.log(sp.Rational(1, 100)) / sp.log(sp.Rational(1, 5))),
    }
