"""The checks of chapter 3, separability (see :mod:`attn_lib.book.exercises`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from attn_lib import theory

from . import harness

__all__ = ["check_distinguishable_count", "check_theorem2_xi", "check_markov_lower_bound"]


def _tie_row() -> tuple[np.ndarray, np.ndarray, int]:
    """A row where a selected token lies exactly at distance rho_min (strict and non-strict N_s differ)."""
    alpha = np.array([0.3, 0.25, 0.25, 0.1, 0.1])
    X = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 1.0], [-1.0, 0.0], [0.5, -1.0]])
    return alpha, X, 2


def _spread_row() -> tuple[np.ndarray, np.ndarray, int]:
    """A row where a selected token lies between rho_min and the largest distance outside I_N (D = 0.3, 0.4 inside;
    0.35, 2, 1 outside): the radius rho_min and the largest outside distance give different counts."""
    alpha = np.array([0.4, 0.3, 0.1, 0.1, 0.1])
    X = np.array([[1.0, 0.0], [0.0, 1.0], [7.5, 3.0], [4.0, 23.0], [-6.0, 3.0]])
    return alpha, X, 2


def _n_s_with(alpha: np.ndarray, X: np.ndarray, sel: np.ndarray, weighted=True, strict=True, smallest=True) -> int:
    A = (alpha[:, None] if weighted else 1.0) * X
    s = (alpha[:, None] * X)[sel].sum(0)
    D = np.linalg.norm(A - s, axis=1)
    rho = D[~sel].min() if smallest else D[~sel].max()
    return int(np.sum(D[sel] < rho) if strict else np.sum(D[sel] <= rho))


def _cases_distinguishable_count(seed: Any) -> list[harness.Case]:
    rng = harness.rng(seed)
    rows = [(*harness.row(L, d, s, rng), N) for L, d, s, N in ((16, 4, 2.5, 4), (30, 3, 1.0, 10), (8, 2, 0.5, 3))]
    rows += [_tie_row(), _spread_row()]
    cases = []
    for alpha, X, N in rows:
        top = theory.top_n_mask(alpha, N)
        ref = theory.distinguishable_count(alpha, X, N)
        cases.append(
            harness.Case(
                (alpha.copy(), X.copy(), N),
                ref,
                {
                    "at the radius r = rho_min itself the convention is strict: count D_i < rho_min, not <=": _n_s_with(
                        alpha, X, top, strict=False
                    ),
                    "you forgot the weights: D_i = ||alpha_i x_i - s||, not ||x_i - s||": _n_s_with(
                        alpha, X, top, weighted=False
                    ),
                    "rho_min is the SMALLEST distance of a non-selected token to s, not the largest": _n_s_with(
                        alpha, X, top, smallest=False
                    ),
                    "I_N is the set of the N LARGEST weights; you took the N smallest": _n_s_with(
                        alpha, X, harness.bottom_n_mask(alpha, N)
                    ),
                },
                f"at L = {alpha.size}, N = {N} (alpha of shape ({alpha.size},), X of shape {X.shape})",
                (),
                "one count per row",
                "your N_s does not match |{i in I_N : D_i < rho_min}|",
            )
        )
    return cases


check_distinguishable_count = harness.make_check(
    "check_distinguishable_count",
    _cases_distinguishable_count,
    summary=r"""Check ``fn(alpha, X, N)``: the number ``N_s`` of distinguishable selected tokens, strict convention.

    With :math:`D_i=\|\alpha_ix_i-s\|_2` and :math:`\rho_{\min}=\min_{j\notin I_N}D_j`:
    :math:`N_s=|\{i\in I_N: D_i<\rho_{\min}\}|`.""",
    fn_doc=r"""``fn(alpha, X, N) -> int`` with ``alpha (L,)``, ``X (L, d)``, ``1 <= N < L``.""",
)


_XI_CASES = ((16, 4, 1.0, 0.8), (25, 8, 2.0, 1.5))


def _cases_theorem2_xi(seed: Any) -> list[harness.Case]:
    rng = harness.rng(seed)
    cases = []
    for L, N, M, delta in _XI_CASES:
        alpha = theory.softmax_np(2.0 * rng.standard_normal(L))
        order = theory.top_n_indices(alpha, N)
        aI = alpha[order]
        beta = aI.sum() - aI
        q = (aI**2).sum() - aI**2
        abar = aI.sum()
        ref = theory.theorem2_xi(alpha, N, M, delta)
        root = lambda sq: np.sqrt(np.clip(sq, 0, None))  # noqa: E731
        cases.append(
            harness.Case(
                (alpha.copy(), N, M, delta),
                ref,
                {
                    "beta_i = abar_N - alpha_i leaves token i out; you used abar_N": root(
                        (M**2 - delta**2 / 2) * abar**2 + delta**2 / 2 * q
                    ),
                    "xi_i is a square root: you returned xi_i^2": ref**2,
                    "the sign of delta^2/2 is wrong: xi^2 = (M^2 - delta^2/2) beta^2 + (delta^2/2) sum alpha_j^2": root(
                        (M**2 + delta**2 / 2) * beta**2 - delta**2 / 2 * q
                    ),
                    "the sum runs over j in I_N OTHER than i; you included alpha_i^2": root(
                        (M**2 - delta**2 / 2) * beta**2 + delta**2 / 2 * (aI**2).sum()
                    ),
                    "xi must be in top-N order (largest weight first), not in the order of the positions": ref[
                        np.argsort(order)
                    ],
                },
                f"at L = {L}, N = {N}, M = {M}, delta = {delta}",
                (N,),
                "one xi_i per selected token, in top-N order",
                "your xi does not match sqrt((M^2 - delta^2/2) beta_i^2 + (delta^2/2) sum_{j in I_N, j != i} alpha_j^2)",
            )
        )
    return cases


check_theorem2_xi = harness.make_check(
    "check_theorem2_xi",
    _cases_theorem2_xi,
    summary=r"""Check ``fn(alpha, N, M, delta)``: Theorem 2's :math:`\xi_i` for ``i`` in ``I_N``, in top-N order.

    .. math:: \xi_i^2=\Big(M^2-\tfrac{\delta^2}{2}\Big)\beta_i^2+\tfrac{\delta^2}{2}\sum_{j\in I_N\setminus\{i\}}\alpha_j^2,
              \qquad\beta_i=\bar\alpha_N-\alpha_i .""",
    fn_doc=r"""``fn(alpha, N, M, delta) -> xi`` with ``alpha (L,)``, ``1 <= N <= L``, ``M > 0``, ``0 <= delta <= 2M``;
        ``xi`` has shape ``(N,)``, largest weight first.""",
)


def _cases_markov_lower_bound(seed: Any) -> list[harness.Case]:
    rng = harness.rng(seed)
    cases = []
    for L, N, M, delta, r in ((16, 4, 1.0, 0.8, 0.5), (25, 8, 2.0, 1.5, 0.9)):
        alpha = theory.softmax_np(2.0 * rng.standard_normal(L))
        xi = theory.theorem2_xi(alpha, N, M, delta).sum()
        lower, _ = theory.theorem2_bounds(alpha, N, M, delta, r)
        cases.append(
            harness.Case(
                (alpha.copy(), N, M, delta, r),
                lower,
                {
                    "divide the sum of the xi_i by r N, not by r": 1 - xi / r,
                    "divide the sum of the xi_i by r N, not by N": 1 - xi / N,
                    "the bound is 1 - (sum xi_i) / (r N): you returned the fraction without the '1 -'": xi / (r * N),
                    "Markov's inequality divides by r: you multiplied": 1 - xi * r / N,
                },
                f"at L = {L}, N = {N}, M = {M}, delta = {delta}, r = {r}",
                (),
                "one number",
                "your bound does not match 1 - (sum_{i in I_N} xi_i) / (r N)",
            )
        )
    return cases


check_markov_lower_bound = harness.make_check(
    "check_markov_lower_bound",
    _cases_markov_lower_bound,
    summary=r"""Check ``fn(alpha, N, M, delta, r)``: Theorem 2's lower bound :math:`1-\frac{1}{rN}\sum_{i\in I_N}\xi_i`.""",
    fn_doc=r"""``fn(alpha, N, M, delta, r) -> float`` with the arguments of :func:`check_theorem2_xi` and a radius
        ``r > 0``.""",
)
