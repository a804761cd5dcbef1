"""Chapter 3's shape of the median separability curve (Fig. 3)."""

from __future__ import annotations

import pandas as pd

from attn_lib.claims.stats import THRESHOLDS
from attn_lib.report.separability import separability_per_n

__all__ = ["separability_shape"]


def separability_shape(df: pd.DataFrame, thresholds: dict | None = None) -> dict:
    """The shape of the median N_s/N against N that the paper describes for Fig. 3: a decline up to
    ``sep_from_n``, then saturation in ``[sep_lo, sep_hi]``.

    ``saturates`` applies the same rule as the separability row of :func:`~attn_lib.claims.verdicts` (``True``
    exactly when that row says "reproduced"); ``declining`` is the descriptive part: the median over heads never increases (by more
    than 1e-12) from one N to the next, for N up to ``sep_from_n``.

    Parameters
    ----------
    df : pandas.DataFrame
        Separability rows, as :func:`separability_per_n`.
    thresholds : dict, optional
        Overrides of :data:`~attn_lib.claims.THRESHOLDS` (``sep_from_n``, ``sep_lo``, ``sep_hi``, ``sep_tol``).

    Returns
    -------
    dict
        ``from_n``, ``lo``, ``hi`` (the band, tolerance included); ``declining`` (bool; ``False`` with fewer
        than two N up to ``from_n``); ``saturates`` (bool, or ``None`` when the grid has no N >= ``from_n``).
    """
    th = dict(THRESHOLDS, **(thresholds or {}))
    per_n = separability_per_n(df)
    n0 = th["sep_from_n"]
    lo, hi = th["sep_lo"] - th["sep_tol"], th["sep_hi"] + th["sep_tol"]
    tail = per_n.loc[per_n.index >= n0, "median"]
    head = per_n.loc[per_n.index <= n0, "median"]
    return {
        "from_n": n0,
        "lo": lo,
        "hi": hi,
        "declining": bool(len(head) > 1 and (head.diff().dropna() <= 1e-12).all()),
        "saturates": bool(((tail >= lo) & (tail <= hi)).all()) if len(tail) else None,
    }
