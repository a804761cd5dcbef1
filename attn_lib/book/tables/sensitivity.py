"""Chapter 4's sensitivity tables: Fig. 4's slopes and values against Corollary 3's bounds."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from attn_lib import theory
from attn_lib._validation import check_probability
from attn_lib.claims.stats import THRESHOLDS, linfit
from attn_lib.report._common import sensitivity_curves

__all__ = ["sensitivity_bounds", "sensitivity_findings", "sensitivity_table"]


# --- chapter 4 (gradient sensitivity): the numbers behind Fig. 4, as the chapter tabulates and states them -------
def _require_sensitivity(df: Any) -> None:
    if not isinstance(df, pd.DataFrame):
        raise ValueError(f"df must be the DataFrame of experiments.gradient_sensitivity (got {type(df).__name__})")
    need = ("T", "eps", "g", "n_rows", "rows_violating_corrected", "rows_above_paper")
    missing = [c for c in need if c not in df.columns]
    if missing or not len(df):
        raise ValueError(f"df must be a non-empty result of experiments.gradient_sensitivity (missing {missing})")


def sensitivity_bounds(df: pd.DataFrame) -> pd.DataFrame:
    r"""The curves :math:`g(T,\varepsilon)` of :func:`sensitivity_curves` with both forms of Corollary 3.

    Parameters
    ----------
    df : DataFrame
        Result of :func:`attn_lib.experiments.gradient_sensitivity`, one row per ``(T, eps, layer, head)``.

    Returns
    -------
    DataFrame, one row per ``(T, eps)``
        Columns ``T``, ``eps``, ``g`` (max over heads of the row mean), ``paper bound``
        (:math:`\min\{1/(4T),\sqrt2\}`) and ``corrected bound`` (:math:`\min\{1/(2T),\sqrt2/\varepsilon\}`).
    """

    _require_sensitivity(df)
    cur = sensitivity_curves(df)
    T, e = cur["T"].to_numpy(float), cur["eps"].to_numpy(float)
    cur["paper bound"] = np.atleast_1d(theory.corollary3_paper(T))
    cur["corrected bound"] = np.atleast_1d(theory.corollary3_corrected(T, eps=e)["sensitivity"])
    return cur


def _nearest_T(curve: pd.DataFrame, T: float) -> tuple[float, float]:
    """``(g, T_grid)`` at the grid temperature nearest to ``T`` on a log scale (``curve`` has columns T, g)."""
    Ts = curve["T"].to_numpy(float)
    i = int(np.argmin(np.abs(np.log(Ts / T))))
    return float(curve["g"].iloc[i]), float(Ts[i])


def sensitivity_findings(df: pd.DataFrame, thresholds: dict | None = None) -> dict:
    r"""The numbers behind the paper's statements on Fig. 4, read off the curves :math:`g(T,\varepsilon)`.

    The slope and the ratio are those that :func:`~attn_lib.claims.verdicts` judges (same thresholds); this function
    only reports them with their grid points.

    Parameters
    ----------
    df : DataFrame
        Result of :func:`attn_lib.experiments.gradient_sensitivity`.
    thresholds : dict, optional
        Overrides of :data:`~attn_lib.claims.THRESHOLDS` (``inv_t_max_T`` sets the low-temperature range of the slope).

    Returns
    -------
    dict
        ``rows_violating`` (rows above :math:`\min\{1/(2T),\sqrt2/\varepsilon\}`), ``rows_above_paper`` and
        ``row_evaluations`` (single rows above :math:`\min\{1/(4T),\sqrt2\}`, out of all (row, T, eps)
        evaluations), ``curve_points_above_paper``, ``curve_points`` and ``T_above_paper`` (``(min, max)`` or
        ``None``) for the head-maximum curve; at the smallest ``eps``: ``T_low, g_low`` and ``T_high, g_high``
        (the grid points nearest to 0.01 and 1), ``ratio = g_low / g_high``, and ``slope``, the least-squares
        log-log slope of g for T below ``inv_t_max_T`` (NaN with fewer than two such points).
    """
    th = dict(THRESHOLDS, **(thresholds or {}))
    cur = sensitivity_bounds(df)
    above = cur[cur["g"] > cur["paper bound"]]
    e0 = float(cur["eps"].min())
    c0 = cur[cur["eps"] == e0].sort_values("T")
    (g_lo, T_lo), (g_hi, T_hi) = _nearest_T(c0, 0.01), _nearest_T(c0, 1.0)
    low = c0[c0["T"] < th["inv_t_max_T"] * (1 + 1e-9)]
    slope = linfit(np.log10(low["T"]), np.log10(low["g"].clip(lower=1e-300)))[0] if len(low) >= 2 else math.nan
    return {
        "rows_violating": int(df["rows_violating_corrected"].sum()),
        "rows_above_paper": int(df["rows_above_paper"].sum()),
        "row_evaluations": int(df["n_rows"].sum()),
        "curve_points_above_paper": len(above),
        "curve_points": len(cur),
        "T_above_paper": (float(above["T"].min()), float(above["T"].max())) if len(above) else None,
        "eps": e0,
        "T_low": T_lo,
        "g_low": g_lo,
        "T_high": T_hi,
        "g_high": g_hi,
        "ratio": g_lo / max(g_hi, 1e-300),
        "slope": float(slope),
    }


def sensitivity_table(
    df: pd.DataFrame, temperatures: Sequence[float] = (1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0), rtol: float = 0.05
) -> pd.DataFrame:
    r"""The curves :math:`g(T,\varepsilon)` at a few temperatures, one column per ``eps``, next to both bounds.

    Parameters
    ----------
    df : DataFrame
        Result of :func:`attn_lib.experiments.gradient_sensitivity`.
    temperatures : sequence of float > 0
        Grid temperatures to show; a grid point is shown when it lies within ``rtol`` of one of them.
    rtol : float > 0

    Returns
    -------
    DataFrame indexed by ``T``
        Columns ``g, ε=…`` per ``eps``, ``paper: min{1/(4T), √2}`` and ``1/(2T)``.
    """

    _require_sensitivity(df)
    want = np.asarray(temperatures, dtype=float)
    if want.ndim != 1 or not len(want) or not np.all(np.isfinite(want)) or np.any(want <= 0):
        raise ValueError(f"temperatures must be a non-empty sequence of numbers > 0 (got {temperatures!r})")
    rtol = check_probability("rtol", rtol, open_low=True, open_high=True)
    cur = sensitivity_curves(df)
    show = [t for t in sorted(cur["T"].unique()) if np.isclose(t, want, rtol=rtol).any()]
    table = cur[cur["T"].isin(show)].pivot(index="T", columns="eps", values="g")
    table.columns = [f"g, ε={e:g}" for e in table.columns]
    Ts = table.index.to_numpy(float)
    table["paper: min{1/(4T), √2}"] = np.atleast_1d(theory.corollary3_paper(Ts)) if len(Ts) else []
    table["1/(2T)"] = np.atleast_1d(theory.corollary3_corrected(Ts)["spectral"]) if len(Ts) else []
    return table
