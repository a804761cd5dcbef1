"""SymPy derivations of the paper's results, returned as SymPy objects for step-by-step display.

Every function returns a ``dict`` whose values are SymPy expressions, matrices or ``Eq``/relational objects
(never strings), in the order a chapter shows them. Keys ending in ``_check`` hold an expression that SymPy has
simplified to ``0`` (or ``True``) -- the machine-checked part of the derivation; the tests assert them.
Each function runs in well under two seconds.

Sections refer to ``paper-notes.md``.
"""
from __future__ import annotations

import sympy as sp

__all__ = [
    "softmax_jacobian", "max_alpha_one_minus_alpha", "lemma1_constants_symbolic", "lemma1_general",
    "corollary1_from_lemma1",
    "two_way_tie_spectral_norm", "corollary3_bounds_symbolic", "theorem1_steps", "theorem1_random_variance",
    "corollary2_limits_symbolic", "theorem2_expansion", "sqrt5_example_exact", "lemma2_jacobian",
    "multihead_coverage_symbolic",
]


def _check_int(name: str, value, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not (low <= value <= high):
        raise ValueError(f"{name} must be an integer in [{low}, {high}] (got {value!r})")
    return value


def softmax_jacobian(L: int = 3) -> dict:
    r"""Softmax Jacobian from the definition (paper-notes §3.10).

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
    r"""``max_{alpha in [0,1]} alpha (1 - alpha) = 1/4`` (paper-notes §3.10, entrywise bound).

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
    r"""Lemma 1 constants for a symbolic ``F`` (paper-notes §3.1 [R]).

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
    r"""Lemma 1 for an arbitrary (undefined) smooth positive ``F`` (paper-notes §3.1 [R]).

    Works with ``F = sympy.Function("F")`` and the symbols ``m_F = min_{[-a,a]} F``, ``M_F = max_{[-a,a]} F``
    (positive by the extreme-value theorem, since ``F`` is continuous and positive on the compact ``[-a, a]``):

    1. ``m_F <= F(l_j) <= M_F`` for every ``j`` (logits in ``[-a, a]``);
    2. summing ``L`` copies: ``L m_F <= S = sum_j F(l_j) <= L M_F`` (SymPy evaluates the sums of the bounds);
    3. dividing: ``m_F / (L M_F) <= alpha_i = F(l_i) / S <= M_F / (L m_F)``, i.e. ``C1 = m_F/M_F``,
       ``C2 = M_F/m_F``, both independent of ``L`` because ``theta`` does not contain ``L``.

    ``*_check`` entries simplify to 0.
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
    alpha_low = (m_F / upper_sum)
    alpha_high = (M_F / lower_sum)
    C1 = sp.simplify(alpha_low * L)
    C2 = sp.simplify(alpha_high * L)
    return {
        "F_bounds": (sp.Le(m_F, F(l_j)), sp.Le(F(l_j), M_F)),
        "S": sp.Eq(S, sum_F),
        "sum_bounds": (sp.Le(lower_sum, S), sp.Le(S, upper_sum)),
        "alpha_i": sp.Eq(sp.Symbol("alpha_i", positive=True), alpha_i),
        "alpha_bounds": (sp.Le(alpha_low, sp.Symbol("alpha_i", positive=True)),
                         sp.Le(sp.Symbol("alpha_i", positive=True), alpha_high)),
        "C1": C1,
        "C2": C2,
        "sum_check": sp.simplify(lower_sum - L * m_F) + sp.simplify(upper_sum - L * M_F),
        "L_free_check": sp.diff(C1, L) + sp.diff(C2, L),
        "C1C2_check": sp.simplify(C1 * C2 - 1),
    }


def corollary1_from_lemma1() -> dict:
    r"""Corollary 1 from Lemma 1 (paper-notes §3.2): ``F = exp(l/T)``, ``a = Delta = ||q|| ||k||``.

    Steps: Cauchy-Schwarz ``|l_j| <= Delta``; Lemma 1 with ``a = Delta`` gives ``C2 = exp(2 Delta/T)``,
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
    return {
        "Delta": Delta,
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
    r"""Spectral norm ``1/(2T)`` at a two-way tie (paper-notes §3.10, counterexample to ``1/(4T)``).

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
    lam = [e for e in eigs if e != 0][0]
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
    r"""Corrected Corollary 3 constants for general ``alpha`` (paper-notes §3.10 items 1-3).

    Entry ``J_ii = alpha_i (1 - alpha_i)/T <= 1/(4T)``; Gershgorin absolute row sum
    ``(alpha_i (1 - alpha_i) + alpha_i sum_{j!=i} alpha_j)/T = 2 alpha_i (1 - alpha_i)/T <= 1/(2T)``;
    row gradient ``||e_i - alpha||^2 = (1 - alpha_i)^2 + sum_{j!=i} alpha_j^2 <= 2 (1 - alpha_i)^2`` (the slack is
    ``sum_{j != k, both != i} alpha_j alpha_k >= 0``, ``row_gradient_check`` = 0), so
    ``||grad alpha_i|| = alpha_i ||e_i - alpha|| / T <= sqrt(2) alpha_i (1 - alpha_i)/T <= sqrt(2)/(4T)``.
    Uses the simplex constraint ``alpha_1 = 1 - sum_{j>1} alpha_j`` (row ``i = 1``; every row is alike).
    """
    L = _check_int("L", L, 2, 6)
    T = sp.Symbol("T", positive=True)
    rest = list(sp.symbols(f"alpha2:{L + 1}", nonnegative=True))
    a = [1 - sum(rest)] + rest  # alpha_1 = 1 - sum_{j>1} alpha_j (the row of interest is i = 1)
    al = sp.Matrix(a)
    J = (sp.diag(*al) - al * al.T) / T
    i = 0
    gersh = sum(sp.Abs(J[i, j]) for j in range(L))
    gersh_simplified = (a[0] * (1 - a[0]) + a[0] * sum(a[1:])) / T
    row_sq = (1 - a[0]) ** 2 + sum(x ** 2 for x in a[1:])
    # 2(1 - alpha_1)^2 - ||e_1 - alpha||^2 = (sum_{j>1} alpha_j)^2 - sum_{j>1} alpha_j^2 = sum_{j!=k>1} alpha_j alpha_k
    cross = sum(a[j] * a[k] for j in range(1, L) for k in range(1, L) if j != k)
    a1 = sp.Symbol("alpha_1", nonnegative=True)
    return {
        "J": J,
        "diagonal_entry_in_alpha": a1 * (1 - a1) / T,
        "gershgorin_in_alpha": 2 * a1 * (1 - a1) / T,
        "row_gradient_in_alpha": sp.Le(sp.Symbol("||grad alpha_1||_2"), sp.sqrt(2) * a1 * (1 - a1) / T),
        "diagonal_entry": J[0, 0],
        "entry_bound": sp.Le(J[0, 0], 1 / (4 * T)),
        "gershgorin_row_sum": gersh,
        "gershgorin_row_sum_simplified": sp.factor(gersh_simplified),
        "gershgorin_check": sp.simplify(gersh_simplified - 2 * a[0] * (1 - a[0]) / T),
        "spectral_bound": sp.Le(sp.Symbol("||J||_2"), 1 / (2 * T)),
        "row_gradient_sq": row_sq,
        "row_gradient_slack": sp.expand(2 * (1 - a[0]) ** 2 - row_sq),
        "row_gradient_slack_form": cross,
        "row_gradient_check": sp.expand(2 * (1 - a[0]) ** 2 - row_sq - cross),
        "row_gradient_bound": sp.Le(sp.Symbol("||grad alpha_1||_2"), sp.sqrt(2) / (4 * T)),
    }


def theorem1_steps(N: int = 2, d: int = 2) -> dict:
    r"""Theorem 1's fixed-set bound, step by step (paper-notes §3.3(a) [R]).

    With explicit symbols for ``N`` selected vectors in ``R^d`` and one excluded ``x_i``:

    1. ``alpha_i x_i - s = alpha_i (x_i - s/abar) - (1 - alpha_i/abar) s`` (``step1_check`` = 0 componentwise);
    2. ``x_i - s/abar = sum_j (alpha_j/abar)(x_i - x_j)`` with weights summing to 1 (``step2_check`` = 0);
    3. ``||s|| <= abar max ||x_j||``;
    4. per-term bound ``alpha_i d1 + (abar - alpha_i) max ||x_j||``;
    5. summing over the ``L - N`` excluded tokens with ``sum alpha_i = 1 - abar`` gives ``d_max``
       (``step5_check`` = 0).
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
    # steps 3-5 with scalar symbols
    d1, Mx, ab, L, Nn = sp.symbols("d_1 M_I abar L N", positive=True)
    k = sp.Symbol("k", integer=True, positive=True)
    al = sp.IndexedBase("alpha")
    per_term = al[k] * d1 + (ab - al[k]) * Mx
    summed = sp.Sum(per_term, (k, 1, L - Nn))
    out_sum = sp.Symbol("Sigma_out", positive=True)  # sum_{i not in I_N} alpha_i
    summed_expanded = d1 * out_sum + (L - Nn) * ab * Mx - Mx * out_sum
    dmax = (1 - ab) * d1 + ((L - Nn) * ab - (1 - ab)) * Mx
    step5 = sp.simplify(summed_expanded.subs(out_sum, 1 - ab) - dmax)
    return {
        "abar": abar,
        "s": s,
        "step1_identity": sp.Eq(sp.Symbol("alpha_i x_i - s"), sp.Symbol("alpha_i (x_i - s/abar) - (1 - alpha_i/abar) s")),
        "step1_check": step1,
        "step2_convex_combination": rhs2,
        "step2_check": step2,
        "step2_weights_sum": weights_sum,
        "step3_norm_s": sp.Le(sp.Symbol("||s||"), ab * Mx),
        "step4_per_term": sp.Le(sp.Symbol("||alpha_i x_i - s||"), per_term),
        "step5_sum": summed,
        "step5_expanded": summed_expanded,
        "d_max": dmax,
        "step5_check": step5,
        "at_N_equals_L": sp.simplify(dmax.subs({Nn: L, ab: 1})),
    }


def theorem1_random_variance(n: int = 4, N: int = 2) -> dict:
    r"""Jensen-gap variance for sampling without replacement (paper-notes §3.3(b), proof step 5).

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
    var = sp.simplify(P1 - P1 ** 2)
    cov = sp.simplify(P2 - P1 ** 2)
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
    r"""Corollary 2's limits (paper-notes §3.4 [R]).

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


def theorem2_expansion(N: int = 3) -> dict:
    r"""Theorem 2: expansion of ``X_i^2`` and the bound ``X_i^2 <= xi_i^2`` (paper-notes §3.7 [R], step 2).

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
    eta = {(j, k): sp.Symbol(f"eta_{min(j, k) + 1}{max(j, k) + 1}", nonnegative=True)
           for j in range(K) for k in range(K) if j != k}
    g = {(j, k): sp.Symbol(f"g_{min(j, k) + 1}{max(j, k) + 1}", real=True)
         for j in range(K) for k in range(K) if j != k}
    X2_gram = sum(a[j] ** 2 * M ** 2 for j in range(K)) + sum(a[j] * a[k] * g[(j, k)] for (j, k) in g)
    subs = {g[(j, k)]: M ** 2 - delta ** 2 / 2 - eta[(j, k)] / 2 for (j, k) in g}
    X2 = sp.expand(X2_gram.subs(subs))
    xi2 = M ** 2 * sum(x ** 2 for x in a) + (M ** 2 - delta ** 2 / 2) * sum(a[j] * a[k] for (j, k) in g)
    beta = sum(a)
    xi2_beta = (M ** 2 - delta ** 2 / 2) * beta ** 2 + delta ** 2 / 2 * sum(x ** 2 for x in a)
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


def sqrt5_example_exact() -> dict:
    r"""The ``sqrt(5) eps`` example exactly for ``L = 2`` (paper-notes §3.8 [R]).

    ``l1 = (c + eps, c)``, ``l2 = (c - eps, c + eps)``; ``||l1 - l2|| = sqrt(5) eps``; ``alpha_1 = sigma((l_1 - l_2)/T)``
    so ``Delta alpha_1 = sigma(eps/T) - sigma(-2 eps/T) = 3 eps/(4T) + O(eps^3)``; ``||Delta alpha||_2 =
    sqrt(2)|Delta alpha_1| ~ 3 sqrt(2) eps / (4T)``.
    """
    c = sp.Symbol("c", real=True)
    eps, T = sp.symbols("epsilon T", positive=True)
    l1 = sp.Matrix([c + eps, c])
    l2 = sp.Matrix([c - eps, c + eps])
    dist = sp.sqrt(sum((l1 - l2).applyfunc(lambda e: e ** 2)))

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
    r"""Lemma 2: Jacobian of the general normaliser (paper-notes §3.9), for a generic ``F = Function('F')``.

    Steps: ``alpha_i = F(l_i)/S``; ``J_raw`` by differentiation (quotient rule); the closed form
    ``J_ij = F'(l_j)(delta_ij - alpha_i)/S`` (``difference_check`` = zero matrix); the bound's ingredients
    ``||diag F'||_2 = max|F'|``, ``||alpha F'^T||_2 = ||alpha|| ||F'|| <= sqrt(L) max |F'|``, ``S >= L min F``.
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
    maxdF, minF = sp.symbols("max|F'| minF", positive=True)
    Ls = sp.Symbol("L", positive=True, integer=True)
    bound = maxdF * (1 / (Ls * minF) + 1 / (sp.sqrt(Ls) * minF))
    return {
        "F": F,
        "S": S,
        "alpha": alpha,
        "jacobian_raw": J_raw,
        "jacobian_closed": J_closed,
        "difference_check": diff,
        "diag_term_norm": sp.Eq(sp.Symbol("||diag(F')||_2"), maxdF),
        "rank_one_term_norm": sp.Le(sp.Symbol("||alpha F'^T||_2"), sp.sqrt(Ls) * maxdF),
        "S_lower": sp.Ge(sp.Symbol("S"), Ls * minF),
        "bound": bound,
    }


def multihead_coverage_symbolic() -> dict:
    r"""Multi-head coverage ``1 - (1 - p)^H`` (paper-notes §3.11): at ``p = 4/5, H = 3`` it is ``124/125 = 0.992``;
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
