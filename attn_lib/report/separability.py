"""The per-N table over heads behind Fig. 3 (chapter 3, separability)."""

from __future__ import annotations

import pandas as pd

from ..claims.stats import separability_stats


def separability_per_n(df: pd.DataFrame) -> pd.DataFrame:
    """Per-N summary over heads (index ``N``) of :func:`attn_lib.experiments.separability`'s rows (Algorithm 4,
    Fig. 3; columns ``N``, ``fraction``, ``lower``, ``upper``): ``median``, ``q25``, ``q75`` of ``fraction``,
    ``lower_median``, ``upper_median``, ``heads``, ``IQR``, and the booleans ``upper ≥ median`` and ``lower ≤
    median``, each ``None`` where its bound is vacuous (an upper bound ``>= 1`` or a lower bound ``<= 0`` holds for
    any fraction), with ``vacuous bounds`` naming them."""
    need = {"N", "fraction", "lower", "upper"}
    if not isinstance(df, pd.DataFrame) or len(df) == 0 or not need <= set(df.columns):
        what = f"a non-empty separability table with columns {sorted(need)} (attn_lib.experiments.separability)"
        raise ValueError(f"df must be {what}")
    a = separability_stats(df)
    out = a[["median", "q25", "q75"]].assign(lower_median=a["lower"], upper_median=a["upper"], heads=a["heads"])
    out["IQR"] = out["q75"] - out["q25"]
    up_vac, lo_vac = out["upper_median"] >= 1, out["lower_median"] <= 0
    out["upper ≥ median"] = (out["upper_median"] >= out["median"]).astype(object).where(~up_vac, None)
    out["lower ≤ median"] = (out["lower_median"] <= out["median"]).astype(object).where(~lo_vac, None)
    out["vacuous bounds"] = [
        ", ".join(n for n, v in (("upper", u), ("lower", lo)) if v) or "none" for u, lo in zip(up_vac, lo_vac)
    ]
    return out
