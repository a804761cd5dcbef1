"""Chapter 3's shape of the median separability curve (Fig. 3)."""

from __future__ import annotations

import pandas as pd

from attn_lib.claims.separability import mechanism_table
from attn_lib.claims.stats import THRESHOLDS
from attn_lib.report.separability import separability_per_n

__all__ = ["separability_shape", "separability_mechanisms", "separability_by_temperature"]


def separability_mechanisms(df: pd.DataFrame) -> pd.DataFrame | None:
    """Chapter 3's table of the candidate causes of the falling fraction (the rule of ``fig3-saturates``): per N, the
    medians over heads of ``N_s/N`` on all, short (``t <= L/2``) and long rows, on attention-sink rows and the others,
    the share of sink rows, and the share of each rank ``k`` inside the ball (``rank k``); ``None`` for a table
    without these columns."""
    m = mechanism_table(df)
    if m is None:
        return None
    names = {
        "fraction": "all rows",
        "fraction_short": "rows t ≤ L/2",
        "fraction_long": "rows t > L/2",
        "sink_share": "share of sink rows",
        "fraction_sink": "sink rows",
        "fraction_nonsink": "other rows",
    }
    names.update({c: f"rank {c.rsplit('_', 1)[1]}" for c in m.columns if c.startswith("in_ball_rank_")})
    return m.rename(columns=names)


def separability_by_temperature(df: pd.DataFrame) -> pd.DataFrame | None:
    """Per N >= 2, the median over heads of ``N_s/N`` at the model's temperature (``T = 1``) and at each extra
    temperature of the experiment (columns ``T = ...``), at the N of its temperature sweep, then the median share of
    selected tokens whose tests float64's range may decide at each (columns ``undecided, T = ...``, where the table
    has them); ``None`` without those columns."""
    found = sorted((c for c in df.columns if c.startswith("fraction_T=")), key=lambda c: -float(c.split("=", 1)[1]))
    if not found:
        return None
    cols = {c: "T = " + c.split("=", 1)[1] for c in found}
    under = {u: "undecided, " + cols[c] for c in found if (u := c.replace("fraction", "underflow", 1)) in df}
    out = df[df["N"] >= 2].groupby("N")[["fraction", *cols, *under]].median().dropna(subset=list(cols))
    return out.rename(columns={"fraction": "T = 1", **cols, **under})


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
