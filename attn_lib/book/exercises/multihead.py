"""The checks of chapter 5, multi-head attention and remedies (see :mod:`attn_lib.book.exercises`)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from attn_lib import theory

from . import harness

__all__ = ["check_sparsemax", "check_coverage", "check_heads_for_coverage"]


def _cases_sparsemax(seed: Any) -> list[harness.Case]:
    from attn_lib import normalizers  # imports torch: only this check needs it, so the others load without it

    l = 1.2 * harness.rng(seed).standard_normal((5, 9))
    ref = np.asarray(normalizers.sparsemax(l), dtype=np.float64)
    z = np.sort(l, axis=-1)[:, ::-1]
    k = np.arange(1, l.shape[-1] + 1)
    kk = (1 + k * z > z.cumsum(-1)).sum(-1, keepdims=True)
    tau = (np.take_along_axis(z.cumsum(-1), kk - 1, -1) - 1) / kk

    def negative(got: np.ndarray) -> str | None:
        return (
            "your sparsemax has negative weights: clip l_j - tau at zero, [l_j - tau]_+"
            if np.any(got < -1e-12)
            else None
        )

    return [
        harness.Case(
            (l.copy(),),
            ref,
            {
                "you projected the columns: sparsemax works on each ROW (the last axis)": np.asarray(
                    normalizers.sparsemax(l, dim=0), dtype=np.float64
                ),
                "that is softmax; sparsemax is the Euclidean projection onto the simplex, with exact zeros": (
                    theory.softmax_np(l)
                ),
                "you did not clip: sparsemax is [l_j - tau]_+, so weights below tau are 0, not negative": l - tau,
            },
            f"for logits of shape {l.shape}",
            l.shape,
            "one row of weights per row of logits",
            "your weights lie on the simplex but are not the closest point to the logits",
            (
                harness.finite_prop(""),
                negative,
                harness.sums_to_one(
                    "sparsemax", ": tau must solve sum_j [l_j - tau]_+ = 1 (sort the row and find the support size k)"
                ),
            ),
        )
    ]


check_sparsemax = harness.make_check(
    "check_sparsemax",
    _cases_sparsemax,
    summary="""Check ``fn(logits)``: sparsemax of each row (Euclidean projection onto the probability simplex).""",
    fn_doc="""``fn(logits) -> weights`` with ``logits`` a float64 array of shape ``(B, L)``; ``weights`` has the same
        shape, rows on the simplex.""",
)


def _cases_coverage(seed: Any) -> list[harness.Case]:
    rng = harness.rng(seed)
    drawn = [(rng.uniform(0.05, 0.95), int(rng.integers(2, 12))) for _ in range(2)]
    cases = []
    for p, H in [(0.8, 3), (0.3, 4), (0.05, 12), *drawn]:
        cases.append(
            harness.Case(
                (p, H),
                theory.multihead_coverage(p, H),
                {
                    "p**H is the probability that EVERY head covers the token; coverage needs at least one": p**H,
                    "(1-p)**H is the probability that NO head covers the token; coverage is its complement": (1 - p)
                    ** H,
                    "1 - p**H is not it: the heads that miss have probability 1 - p each": 1 - p**H,
                    "H p is the union bound, not the probability (it can exceed 1)": H * p,
                },
                f"at p = {p:.6g}, H = {H}",
                (),
                "one probability",
                "expected 1 - (1-p)^H",
            )
        )
    return cases


check_coverage = harness.make_check(
    "check_coverage",
    _cases_coverage,
    summary="""Check ``fn(p, H)``: the probability ``1 - (1 - p)^H`` that at least one of ``H`` independent heads covers a token.""",
    fn_doc="""``fn(p, H) -> float`` with ``p`` in ``[0, 1]`` and an int ``H >= 1``.""",
)


def _cases_heads_for_coverage(seed: Any) -> list[harness.Case]:
    rng = harness.rng(seed)
    drawn = [(rng.uniform(0.05, 0.9), rng.uniform(0.5, 0.999)) for _ in range(2)]
    cases = []
    for p, c in [(0.8, 0.99), (0.3, 0.9), (0.1, 0.999), (0.5, 0.75), *drawn]:
        H = theory.heads_for_coverage(p, c)
        ratio = math.log(1 - c) / math.log(1 - p)
        cases.append(
            harness.Case(
                (p, c),
                H,
                {
                    "you rounded down; the smallest H that REACHES c is the ceiling": math.floor(ratio),
                    "H = log(1-c)/log(1-p) must be rounded up to a whole number of heads": ratio,
                    "floor(x) + 1 is one head too many when x is whole: at an exact hit the coverage already equals c; "
                    "round up with the ceiling": math.floor(ratio) + 1,
                },
                f"at p = {p:.6g}, c = {c:.6g}",
                (),
                "one integer",
                "expected the smallest H >= 1 with 1 - (1-p)^H >= c",
            )
        )
    return cases


check_heads_for_coverage = harness.make_check(
    "check_heads_for_coverage",
    _cases_heads_for_coverage,
    summary="""Check ``fn(p, c)``: the smallest number of heads ``H >= 1`` with ``1 - (1 - p)^H >= c``.""",
    fn_doc="""``fn(p, c) -> int`` with ``p`` in ``(0, 1)`` and ``c`` in ``(0, 1)``.""",
)
