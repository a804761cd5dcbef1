"""Theorem 2 derived with SymPy (chapter 3; Reading the paper, §Theorem 2)."""

from __future__ import annotations

import sympy as sp

from attn_lib._validation import check_int

from ._sums import sum_linear

__all__ = ["theorem2_expansion", "theorem2_tail_bounds"]


def theorem2_expansion(N: int = 3) -> dict:
    r"""Theorem 2: expansion of ``X_i^2`` and the bound ``X_i^2 <= xi_i^2`` ("Reading the paper", §Theorem 2, step 2).

    Fix ``i`` in ``I_N`` and name the other ``N - 1`` selected tokens ``1..N-1`` with weights ``alpha_j`` and Gram
    entries ``<x_j, x_k>``. Using ``||x_j||^2 = M^2`` and writing
    ``<x_j, x_k> = M^2 - delta^2/2 - eta_jk/2`` with ``eta_jk = ||x_j - x_k||^2 - delta^2 >= 0``:

    * ``X_i^2 = sum_j alpha_j^2 M^2 + sum_{j!=k} alpha_j alpha_k <x_j, x_k>``;
    * ``xi_i^2 - X_i^2 = 1/2 sum_{j!=k} alpha_j alpha_k eta_jk >= 0`` (``slack_check`` = 0);
    * ``xi_i^2 = (M^2 - delta^2/2) beta_i^2 + delta^2/2 sum_j alpha_j^2``, ``beta_i = sum_j alpha_j``
      (``beta_form_check`` = 0).

    Chapter 3, ``thm-separability`` (step 2); tested by ``tests/test_symbolic.py::test_theorem2_expansion``.
    """
    N = check_int("N", N, low=2, high=6)
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

    Chapter 3, ``thm-separability`` (steps 3-4) and ``prop-valid-upper``; tested by
    ``tests/test_symbolic.py::test_theorem2_lower_bound_sum_matches_theory`` and
    ``tests/test_symbolic.py::test_theorem2_hoeffding_exponent_matches_theory``.

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
    summed = sum_linear(1 - xis[i] / r, limits)
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
