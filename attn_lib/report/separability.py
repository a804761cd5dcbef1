"""separability"""

from __future__ import annotations

from typing import Any

import pandas as pd

from ._common import THRESHOLDS, head_summary

# ----------------------------------------------------------------------------------------------------------------
# chapter 3 (separability): the per-N table of Fig. 3 and the shape of the median curve
# ----------------------------------------------------------------------------------------------------------------


def separability_per_n(df: pd.DataFrame) -> pd.DataFrame:
    """Per-N summary over heads of a separability table (Algorithm 4, Fig. 3).

    Parameters
    ----------
    df : pandas.DataFrame
        :func:`attn_lib.experiments.separability` rows: one per (layer, head, N) with columns ``N``,
        ``fraction`` (row-mean N_s/N), ``lower`` and ``upper`` (row-mean Theorem 2 bounds, paper's form).

    Returns
    -------
    pandas.DataFrame
        Index ``N``; columns ``median``, ``q25``, ``q75`` of ``fraction`` over heads (linear-interpolated
        quantiles), ``lower_median``, ``upper_median`` (medians over heads of the bounds), ``heads`` (count),
        ``IQR`` (``q75 - q25``), and the booleans ``upper ≥ median`` and ``lower ≤ median``, each ``None`` where
        its bound is vacuous (an upper bound ``>= 1`` or a lower bound ``<= 0`` holds for any fraction, so it is no
        evidence), and ``vacuous bounds`` naming them.
    """
    _check_separability_table(df)
    a = head_summary(df, "N", "fraction").set_index("N")
    g = df.groupby("N")
    out = pd.DataFrame(
        {
            "median": a["median"],
            "q25": a["q25"],
            "q75": a["q75"],
            "lower_median": g["lower"].median(),
            "upper_median": g["upper"].median(),
            "heads": g["fraction"].size(),
        }
    )
    out["IQR"] = out["q75"] - out["q25"]
    up_vac, lo_vac = out["upper_median"] >= 1, out["lower_median"] <= 0
    out["upper ≥ median"] = (out["upper_median"] >= out["median"]).astype(object).where(~up_vac, None)
    out["lower ≤ median"] = (out["lower_median"] <= out["median"]).astype(object).where(~lo_vac, None)
    out["vacuous bounds"] = [
        ", ".join(n for n, v in (("upper", u), ("lower", lo)) if v) or "none" for u, lo in zip(up_vac, lo_vac)
    ]
    return out


def separability_shape(df: pd.DataFrame, thresholds: dict | None = None) -> dict:
    """The shape of the median N_s/N against N that the paper describes for Fig. 3: a decline up to
    ``sep_from_n``, then saturation in ``[sep_lo, sep_hi]``.

    ``saturates`` applies the same rule as the separability row of :func:`verdicts` (``True`` exactly when that
    row says "reproduced"); ``declining`` is the descriptive part: the median over heads never increases (by more
    than 1e-12) from one N to the next, for N up to ``sep_from_n``.

    Parameters
    ----------
    df : pandas.DataFrame
        Separability rows, as :func:`separability_per_n`.
    thresholds : dict, optional
        Overrides of :data:`THRESHOLDS` (``sep_from_n``, ``sep_lo``, ``sep_hi``, ``sep_tol``).

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


def _check_separability_table(df: Any) -> None:
    need = {"N", "fraction", "lower", "upper"}
    if not isinstance(df, pd.DataFrame) or len(df) == 0 or not need <= set(df.columns):
        raise ValueError(
            f"df must be a non-empty separability table with columns {sorted(need)} (attn_lib.experiments.separability)"
        )
