"""The checks of chapter 1, vanishing attention (see :mod:`attn_lib.book.exercises`)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from attn_lib import theory

from . import harness

__all__ = ["check_stable_softmax", "check_lemma1_bounds"]


def _softmax_rows(z: np.ndarray, axis: int = -1) -> np.ndarray:
    e = np.exp(z - z.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def _cases_stable_softmax(seed: Any) -> list[harness.Case]:
    l = 3.0 * harness.rng(seed).standard_normal((4, 7))
    T = 0.5
    z = l / T
    stable = np.exp(z - z.max(-1, keepdims=True))
    colmax = np.exp((l - l.max(0, keepdims=True)) / T)
    where = f"at T = {T} for logits of shape {l.shape}"
    cases = [
        harness.Case(
            (l.copy(), T),
            theory.softmax_np(l, T),
            {
                "your softmax ignores the temperature: compute softmax(logits / T)": theory.softmax_np(l),
                "you multiplied the logits by T; divide them by T instead": theory.softmax_np(l * T),
                "the temperature divides the logits, not the weights: softmax(logits / T), not softmax(logits) / T": (
                    theory.softmax_np(l) / T
                ),
                "you normalised over the wrong axis: each ROW (the last axis) must sum to one": _softmax_rows(z, 0),
                "you subtracted each COLUMN's maximum (axis=0): subtract each row's, max(axis=-1, keepdims=True)": (
                    colmax / colmax.sum(-1, keepdims=True)
                ),
                "you divided by the sum of the whole array: divide each row by its own sum (axis=-1, keepdims=True)": (
                    stable / stable.sum()
                ),
                "you returned the exponentials themselves: divide each by the sum of its row": np.exp(z),
                "you subtracted the row maximum but did not normalise: divide by the row sum of the exponentials": stable,
            },
            where,
            l.shape,
            "one row of weights per row of logits",
            "your softmax does not match softmax(logits / T)",
            (harness.finite_prop("for moderate logits"), harness.sums_to_one("softmax")),
        )
    ]
    overflow = harness.finite_prop(
        "for logits far from 0: exp overflows or underflows; subtract each row's maximum (axis=-1, keepdims=True) before exponentiating "
        "(the result does not change)"
    )
    mixed = l + np.array([1000.0, -1000.0, 0.0, 500.0])[:, None]
    for big, what in ((l + 1000.0, "near +1000"), (l - 1000.0, "near -1000"), (mixed, "near +1000, -1000, 0, 500")):
        cases.append(
            harness.Case(
                (big.copy(), 1.0),
                theory.softmax_np(big),
                {},
                f"at T = 1 for logits {what} (one row each)" if big is mixed else f"at T = 1 for logits {what}",
                l.shape,
                "one row of weights per row of logits",
                "softmax is shift-invariant, but yours changes when a constant is added to a row",
                (overflow, harness.sums_to_one("softmax")),
            )
        )
    return cases


check_stable_softmax = harness.make_check(
    "check_stable_softmax",
    _cases_stable_softmax,
    summary="""Check ``fn(logits, T)``: the softmax of ``logits / T`` over the last axis, computed stably.""",
    fn_doc="""``fn(logits, T) -> weights`` with ``logits`` a float64 array of shape ``(B, L)``, ``T > 0`` a float, and
        ``weights`` of shape ``(B, L)`` (numpy array or torch tensor), each row summing to one.""",
)


def _cases_lemma1_bounds(seed: Any) -> list[harness.Case]:
    rng = harness.rng(seed)
    # T stays away from 1/2, 1/sqrt(2) and 1, where two of the listed mistakes would coincide
    drawn = [(rng.uniform(0.1, 2.0), int(rng.integers(2, 100)), rng.uniform(1.2, 3.0)) for _ in range(2)]
    cases = []
    for a, L, T in [(1.5, 10, 0.4), (2.0, 50, 0.75), (0.5, 7, 2.5), *drawn]:
        lo, hi = theory.lemma1_bounds(lambda z, T=T: np.exp(z / T), a, L)
        g = 2 * a / T
        pair = lambda gap, scale=1 / L: (math.exp(-gap) * scale, math.exp(gap) * scale)  # noqa: E731
        cases.append(
            harness.Case(
                (a, L, T),
                (lo, hi),
                {
                    # a flipped sign of the exponent gives the same pair: the hint names both
                    "you returned (upper, lower): either the two are swapped or the exponent's sign is flipped; "
                    "lower = exp(-2a/T)/L, upper = exp(2a/T)/L": (hi, lo),
                    "the exponent misses its factor 2: two logits in [-a, a] differ by up to 2a": pair(a / T),
                    "you multiplied by T; the logits enter as l / T": pair(2 * a * T),
                    "you forgot the temperature: the logits enter as l / T, so the exponent is 2a/T, not 2a": pair(
                        2 * a
                    ),
                    "you forgot the 1/L: the bounds are C1/L and C2/L": pair(g, 1.0),
                    "you multiplied by L; the bounds are C1/L and C2/L": pair(g, float(L)),
                },
                f"at a = {a:.6g}, L = {L}, T = {T:.6g}",
                (2,),
                "a pair (lower, upper)",
                "expected (exp(-2a/T)/L, exp(2a/T)/L)",
                skip=frozenset({"swapped"}),  # the pair swapped is the listed (upper, lower)
            )
        )
    return cases


check_lemma1_bounds = harness.make_check(
    "check_lemma1_bounds",
    _cases_lemma1_bounds,
    summary="""Check ``fn(a, L, T)``: Lemma 1's bounds ``(C1 / L, C2 / L)`` for softmax with logits in ``[-a, a]``.

    For ``F(l) = exp(l / T)``: ``C1 = exp(-2a/T)`` and ``C2 = exp(2a/T)``.""",
    fn_doc="""``fn(a, L, T) -> (lower, upper)``, two floats, with ``a >= 0``, ``L >= 1`` an int and ``T > 0``.""",
)
