"""Lemma 2, Corollary 3 and the sqrt(5) eps example derived with SymPy (chapter 4; Reading the paper, §Lemma 2 and
§Corollary 3)."""

from __future__ import annotations

import sympy as sp

from attn_lib._validation import check_int

__all__ = [
    "softmax_jacobian",
    "max_alpha_one_minus_alpha",
    "two_way_tie_spectral_norm",
    "corollary3_bounds_symbolic",
    "sqrt5_example_exact",
    "lemma2_jacobian",
]


def softmax_jacobian(L: int = 3) -> dict:
    r"""Softmax Jacobian from the definition ("Reading the paper", §Corollary 3).

    Steps: logits ``l_1..l_L`` and ``T > 0``; ``alpha_i = exp(l_i/T) / S``; ``J_raw[i, j] = d alpha_i / d l_j``
    by differentiation; the closed form ``(diag(alpha) - alpha alpha^T) / T``; ``difference_check`` = zero matrix.
    ``L`` in ``[1, 6]``.
    """
    L = check_int("L", L, low=1, high=6)
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


def two_way_tie_spectral_norm() -> dict:
    r"""Spectral norm ``1/(2T)`` at a two-way tie ("Reading the paper", §Corollary 3, counterexample to ``1/(4T)``).

    Two tokens, ``sigma = sigma(u)`` with ``u = (l_1 - l_2)/T``: ``alpha = (sigma, 1 - sigma)``,
    ``J = (diag alpha - alpha alpha^T)/T``, eigenvalues ``{0, 2 sigma (1 - sigma)/T}``, maximised at
    ``sigma = 1/2`` (``u = 0``, the tie) to ``1/(2T)``, eigenvector ``(1, -1)/sqrt 2``; the ratio to the paper's
    ``1/(4T)`` is 2.

    Chapter 4, ``prop-softmax-constants`` (item 3); tested by ``tests/test_symbolic.py::test_two_way_tie``.
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

    Chapter 4, ``prop-softmax-constants`` (items 1-3); tested by
    ``tests/test_symbolic.py::test_corollary3_bounds_symbolic_for_several_L``.
    """
    L = check_int("L", L, low=2, high=6)
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

    Chapter 4, ``lem-jacobian``: the derivation (:func:`attn_lib.theory.lemma2_jacobian` is the reference); tested by
    ``tests/test_symbolic.py::test_lemma2_symbolic``,
    ``tests/test_symbolic.py::test_lemma2_norm_ingredients_against_numpy`` and
    ``tests/test_symbolic.py::test_lemma2_computed_bound_matches_theory``.

    Parameters
    ----------
    L : int
        Number of logits, in ``[1, 6]``.

    Returns
    -------
    dict
        SymPy objects; ``*_check`` entries are zero, boolean entries are SymPy's decisions (``True``).
    """
    L = check_int("L", L, low=1, high=6)
    return {**_lemma2_closed_form(L), **_lemma2_norm_pieces(L), **_lemma2_bound()}


def _lemma2_closed_form(L: int) -> dict:
    """The Jacobian of :func:`lemma2_jacobian` by differentiation and in closed form, for ``L`` logits."""
    F = sp.Function("F")
    l = sp.symbols(f"l1:{L + 1}", real=True)
    S = sum(F(li) for li in l)
    alpha = sp.Matrix([F(li) / S for li in l])
    J_raw = alpha.jacobian(sp.Matrix(l))
    dF = [sp.diff(F(li), li) for li in l]
    J_closed = sp.Matrix(L, L, lambda i, j: dF[j] * ((1 if i == j else 0) - alpha[i]) / S)
    return {
        "F": F,
        "S": S,
        "alpha": alpha,
        "jacobian_raw": J_raw,
        "jacobian_closed": J_closed,
        "difference_check": (J_raw - J_closed).applyfunc(lambda e: sp.simplify(sp.together(e))),
    }


def _lemma2_norm_pieces(L: int) -> dict:
    """The norms of :func:`lemma2_jacobian`'s two terms (singular values by SymPy), ``||alpha||_2 <= 1`` and
    ``S > 0``, with ``g_j = F'(l_j)`` real, ``alpha_j >= 0`` and ``f_j = F(l_j) > 0``."""
    g = sp.Matrix(sp.symbols(f"g1:{L + 1}", real=True))  # g_j = F'(l_j)
    a = sp.Matrix(sp.symbols(f"alpha1:{L + 1}", nonnegative=True))
    f = sp.symbols(f"f1:{L + 1}", positive=True)  # f_j = F(l_j) > 0
    diag_sv = sp.diag(*g).singular_values()
    diag_norm = sp.Max(*diag_sv)
    rank_one_sv = (a * g.T).singular_values()
    rank_one_norm = sp.Max(*rank_one_sv)
    norm_a, norm_g = sp.sqrt(sum(x**2 for x in a)), sp.sqrt(sum(x**2 for x in g))
    cross = sum(a[j] * a[k] for j in range(L) for k in range(L) if j != k)
    return {
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
    }


def _lemma2_bound() -> dict:
    """:func:`lemma2_jacobian`'s bound for a symbolic length ``L``: the two sums by ``sympy.Sum(...).doit()``, the
    triangle inequality, and the pieces inserted (``||alpha|| <= 1``)."""
    maxdF, minF = sp.symbols("max|F'| minF", positive=True)
    Ls = sp.Symbol("L", positive=True, integer=True)
    j = sp.Symbol("j", integer=True, positive=True)
    g_norm_bound = sp.sqrt(sp.Sum(maxdF**2, (j, 1, Ls)).doit())
    S_lower = sp.Sum(minF, (j, 1, Ls)).doit()
    computed = (maxdF + 1 * g_norm_bound) / S_lower  # ||alpha|| <= 1
    bound = maxdF * (1 / (Ls * minF) + 1 / (sp.sqrt(Ls) * minF))
    return {
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
