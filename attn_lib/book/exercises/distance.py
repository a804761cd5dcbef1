"""The checks of chapter 2, the distance bound (see :mod:`attn_lib.book.exercises`)."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from attn_lib import theory

from . import harness

__all__ = ["check_distance", "check_dmax"]


_ROW_CASES = ((12, 5, 1.5, 3), (12, 5, 1.5, 1), (20, 8, 3.0, 6))


def _d_tilde_with(A: np.ndarray, sel: np.ndarray) -> float:
    return float(np.linalg.norm(A[~sel] - A[sel].sum(0), axis=1).sum())


def _distance_mistakes(alpha: np.ndarray, X: np.ndarray, N: int) -> dict:
    L = alpha.shape[0]
    top = theory.top_n_mask(alpha, N)
    first = np.zeros(L, dtype=bool)
    first[:N] = True
    A = alpha[:, None] * X
    s = A[top].sum(0)
    D = np.linalg.norm(A - s, axis=1)
    return {
        "you summed over the selected tokens; d~ sums over the tokens i NOT in I_N": D[top].sum(),
        "you forgot the weights: d~ compares alpha_i x_i with s, not x_i": np.linalg.norm(X - s, axis=1)[~top].sum(),
        "I_N is the set of the N LARGEST weights, not the first N positions": _d_tilde_with(A, first),
        "I_N is the set of the N LARGEST weights; you took the N smallest": _d_tilde_with(
            A, harness.bottom_n_mask(alpha, N)
        ),
        "d~ is a sum of norms, not the norm of a sum": np.linalg.norm(A[~top].sum(0) - s),
        "d~ sums the norms ||alpha_i x_i - s||, not their squares": (D[~top] ** 2).sum(),
        "s sums only over the selected set I_N, not over all tokens": np.linalg.norm(A - A.sum(0), axis=1)[~top].sum(),
    }


def _distance_transforms(alpha: np.ndarray, X: np.ndarray, N: int) -> dict:
    """d~ with each norm taken over the tokens (axis=0) instead of over each token's coordinates."""
    top = theory.top_n_mask(alpha, N)
    A = alpha[:, None] * X
    return {
        "a norm along the wrong axis: ||alpha_i x_i - s|| runs over the coordinates of each token (axis=-1), "
        "not over the tokens (axis=0)": np.linalg.norm(A[~top] - A[top].sum(0), axis=0).sum()
    }


def _cases_distance(seed: Any) -> list[harness.Case]:
    rng = harness.rng(seed)
    cases = []
    for L, d, scale, N in _ROW_CASES:
        alpha, X = harness.row(L, d, scale, rng)
        cases.append(
            harness.Case(
                (alpha.copy(), X.copy(), N),
                theory.distance(alpha, X, N),
                _distance_mistakes(alpha, X, N),
                f"at L = {L}, N = {N} (alpha of shape ({L},), X of shape ({L}, {d}))",
                (),
                "one number per row",
                "your d~ does not match sum_{i not in I_N} ||alpha_i x_i - s||",
                transforms=_distance_transforms(alpha, X, N),
            )
        )
    alpha, X = harness.row(6, 3, 1.0, rng)
    cases.append(
        harness.Case(
            (alpha.copy(), X.copy(), 6),
            0.0,
            _distance_mistakes(alpha, X, 6),
            "at L = 6, N = 6 (alpha of shape (6,), X of shape (6, 3))",
            (),
            "one number per row",
            "with N = L nothing is left out, so d~ must be 0",
            transforms=_distance_transforms(alpha, X, 6),
        )
    )
    return cases


check_distance = harness.make_check(
    "check_distance",
    _cases_distance,
    summary=r"""Check ``fn(alpha, X, N)``: the distance :math:`\tilde d=\sum_{i\notin I_N}\|\alpha_ix_i-s\|_2` of one row.""",
    fn_doc=r"""``fn(alpha, X, N) -> float`` with ``alpha`` of shape ``(L,)`` (weights summing to one), ``X`` of shape
        ``(L, d)`` and ``1 <= N <= L``; ``I_N`` is the top-N set and :math:`s=\sum_{j\in I_N}\alpha_jx_j`.""",
)


def _dmax_with(X: np.ndarray, alpha: np.ndarray, sel: np.ndarray, N: int, count: int | None = None) -> float:
    """Theorem 1's d_max with the selected set ``sel`` and ``count`` tokens outside it (default L - N)."""
    L = alpha.size
    count = L - N if count is None else count
    abar = alpha[sel].sum()
    d1 = np.linalg.norm(X[~sel][:, None, :] - X[sel][None, :, :], axis=-1).max()
    return float(theory.dmax_from_parts(1 - abar, d1, abar, np.linalg.norm(X[sel], axis=1).max(), count))


def _cases_dmax(seed: Any) -> list[harness.Case]:
    rng = harness.rng(seed)
    cases = []
    for L, d, scale, N in _ROW_CASES:
        alpha, X = harness.row(L, d, scale, rng)
        p = theory.theorem1_dmax(alpha, X, N, return_parts=True)
        abar, out, d1, mx = p["abar"], p["out_mass"], p["d1"], p["max_norm"]
        dmax = functools.partial(theory.dmax_from_parts, outside=L - N)  # (out_mass, d1, abar, max_norm)
        top = theory.top_n_mask(alpha, N)
        D = np.linalg.norm(X[:, None, :] - X[None, :, :], axis=-1)
        d1_min = D[~top][:, top].min()
        norms = np.linalg.norm(X, axis=1)
        d1_axis1 = np.linalg.norm(X[~top][:, None, :] - X[top][None, :, :], axis=1).max()
        cases.append(
            harness.Case(
                (alpha.copy(), X.copy(), N),
                p["d_max"],
                {
                    "you kept only the d1 term; Theorem 1 adds ((L-N) abar - (1-abar)) max_{j in I_N} ||x_j||": out
                    * d1,
                    "d1 is the largest distance between a token OUTSIDE I_N and one INSIDE it, not over all pairs": (
                        dmax(out, D.max(), abar, mx)
                    ),
                    "d1 is the LARGEST distance between a token outside I_N and one inside it; you took the smallest": (
                        dmax(out, d1_min, abar, mx)
                    ),
                    "the norm term takes the max of ||x_j|| over j in I_N only, not over all tokens": (
                        dmax(out, d1, abar, norms.max())
                    ),
                    "L - N tokens lie outside I_N, not L - N - 1": _dmax_with(X, alpha, top, N, L - N - 1),
                    "I_N is the set of the N LARGEST weights; you took the N smallest": _dmax_with(
                        X, alpha, harness.bottom_n_mask(alpha, N), N
                    ),
                    "abar_N is the mass INSIDE I_N; you swapped it with the mass outside, 1 - abar_N": (
                        dmax(abar, d1, out, mx)
                    ),
                },
                f"at L = {L}, N = {N} (alpha of shape ({L},), X of shape ({L}, {d}))",
                (),
                "one number per row",
                "your d_max does not match (1-abar) d1 + ((L-N) abar - (1-abar)) max_{j in I_N} ||x_j||",
                transforms={
                    "a norm along the wrong axis: ||x_j|| runs over the coordinates of token j (axis=-1), not over "
                    "the tokens (axis=0)": dmax(out, d1, abar, np.linalg.norm(X[top], axis=0).max()),
                    "a norm along the wrong axis: d1 takes ||x_i - x_j|| over the coordinates (the last axis, -1), "
                    "not over the tokens (axis=1)": dmax(out, d1_axis1, abar, mx),
                },
            )
        )
    return cases


check_dmax = harness.make_check(
    "check_dmax",
    _cases_dmax,
    summary=r"""Check ``fn(alpha, X, N)``: Theorem 1's bound :math:`d_{\max}` of one row.

    .. math:: d_{\max}=(1-\bar\alpha_N)\,d_1+\big((L-N)\bar\alpha_N-(1-\bar\alpha_N)\big)\max_{j\in I_N}\|x_j\|_2,
              \qquad d_1=\max_{i\notin I_N,\,j\in I_N}\|x_i-x_j\|_2 .""",
    fn_doc=r"""``fn(alpha, X, N) -> float`` with ``alpha (L,)``, ``X (L, d)``, ``1 <= N < L``.""",
)
