"""Multi-head coverage (chapter 5; Reading the paper, §Multi-head coverage)."""

from __future__ import annotations

import math

import numpy as np

from .._validation import check_int, check_probability, check_seed


def multihead_coverage(p: float, H: int) -> float:
    r"""Coverage of ``H`` independent heads that each separate a fraction ``p`` (the paper's multi-head argument):
    :math:`1-(1-p)^H`. ``p = 0.8, H = 3`` gives ``0.992``."""
    return _coverage(check_probability("p", p), check_int("H", H, low=0))


def _coverage(p: float, H: int) -> float:
    """``1 - (1 - p)^H`` as ``-expm1(H log1p(-p))``: accurate also when ``1 - p`` rounds to 1 (tiny ``p``)."""
    if H == 0:
        return 0.0
    if p == 1.0:
        return 1.0
    return -math.expm1(H * math.log1p(-p))


def heads_for_coverage(p: float, c: float) -> int:
    r"""Smallest ``H >= 1`` with :math:`1-(1-p)^H\ge c`, i.e. :math:`\lceil\log(1-c)/\log(1-p)\rceil`.

    ``p`` in ``(0, 1]``, ``c`` in ``(0, 1)``. Exact: the closed form is corrected by checking the neighbours in
    floating point (a tolerance of 1e-12 absorbs rounding at exact hits such as ``p = 0.8, c = 0.96``); a tiny ``p``
    still gets its very large answer (beyond about ``10^12``: the closed form to rounding), a ``ValueError`` when it
    exceeds the float range.
    """
    p = check_probability("p", p, open_low=True)
    c = check_probability("c", c, open_low=True, open_high=True)
    if p == 1.0:
        return 1
    ratio = math.log1p(-c) / math.log1p(-p)
    if not math.isfinite(ratio):
        raise ValueError(f"p is too small (got {p!r}): more than 1e308 heads would be needed for coverage c = {c!r}")
    H = max(1, math.ceil(ratio - 1e-12))
    tol = 1e-12
    # the closed form is within one or two of the answer; the neighbour checks are bounded, never an open loop
    for _ in range(4):
        if H > 1 and _coverage(p, H - 1) >= c - tol:
            H -= 1
    for _ in range(4):
        if _coverage(p, H) < c - tol:
            H += 1
    return H


#: Most random draws (``n_trials * H``) of :func:`multihead_coverage_simulation`: 10^8, about a second.
_COVERAGE_MAX_DRAWS = 10**8


def multihead_coverage_simulation(p: float, H: int, n_trials: int = 100_000, seed: int = 0) -> float:
    """Bernoulli simulation of §Multi-head coverage: fraction of trials in which at least one of ``H`` independent
    heads (each succeeding with probability ``p``) separates the token; ``numpy.random.default_rng(seed)``;
    ``n_trials * H`` at most 10^8 (else a ``ValueError`` naming ``n_trials``)."""
    p = check_probability("p", p)
    H = check_int("H", H, low=0, high=_COVERAGE_MAX_DRAWS)
    n = check_int("n_trials", n_trials, low=1, high=_COVERAGE_MAX_DRAWS // max(H, 1))
    rng = np.random.default_rng(check_seed("seed", seed))
    if H == 0:
        return 0.0
    # in chunks of about 2**22 draws (32 MB): successive draws continue one stream, so the result is the same
    hits, step = 0, max(1, (1 << 22) // H)
    for i in range(0, n, step):
        hits += int((rng.random((min(step, n - i), H)) < p).any(axis=1).sum())
    return hits / n
