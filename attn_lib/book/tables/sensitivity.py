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

__all__ = ["sensitivity_bounds", "sensitivity_draws", "sensitivity_findings", "sensitivity_table", "sensitivity_ties"]


# --- chapter 4 (gradient sensitivity): the numbers behind Fig. 4, as the chapter tabulates and states them -------
def _require_sensitivity(df: Any) -> None:
    if not isinstance(df, pd.DataFrame):
        raise ValueError(f"df must be the DataFrame of experiments.gradient_sensitivity (got {type(df).__name__})")
    need = ("T", "eps", "g", "n_rows", "rows_violating_corrected", "rows_above_paper")
    missing = [c for c in need if c not in df.columns]
    if missing or not len(df):
        raise ValueError(f"df must be a non-empty result of experiments.gradient_sensitivity (missing {missing})")


def _draw0(df: pd.DataFrame) -> pd.DataFrame:
    """The rows of the first direction draw (the whole table where it has no ``draw`` column)."""
    return df[df["draw"] == df["draw"].min()] if "draw" in df else df


def sensitivity_bounds(df: pd.DataFrame) -> pd.DataFrame:
    r"""The curves :math:`g(T,\varepsilon)` of :func:`sensitivity_curves` (first direction draw) with both forms of
    Corollary 3.

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
    cur = sensitivity_curves(_draw0(df))
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
    df = _draw0(df)
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
    cur = sensitivity_curves(_draw0(df))
    show = [t for t in sorted(cur["T"].unique()) if np.isclose(t, want, rtol=rtol).any()]
    table = cur[cur["T"].isin(show)].pivot(index="T", columns="eps", values="g")
    table.columns = [f"g, ε={e:g}" for e in table.columns]
    Ts = table.index.to_numpy(float)
    table["paper: min{1/(4T), √2}"] = np.atleast_1d(theory.corollary3_paper(Ts)) if len(Ts) else []
    table["1/(2T)"] = np.atleast_1d(theory.corollary3_corrected(Ts)["spectral"]) if len(Ts) else []
    return table


def sensitivity_draws(df: pd.DataFrame) -> pd.DataFrame:
    r"""The spread of Fig. 4's curve over the direction draws: per ``T`` at the smallest ``eps``, ``g`` (max over
    heads of the row mean) of the first draw, its smallest and largest value over the draws, and ``spread``
    (largest / smallest - 1). One draw gives a spread of 0."""
    _require_sensitivity(df)
    draws = sorted(df["draw"].unique()) if "draw" in df else [None]
    e0 = float(df["eps"].min())
    curves = []
    for k in draws:
        d = df if k is None else df[df["draw"] == k]
        c = sensitivity_curves(d[d["eps"] == e0]).set_index("T")["g"]
        curves.append(c.rename(k))
    wide = pd.concat(curves, axis=1)
    out = pd.DataFrame({"g (draw 0)": wide.iloc[:, 0], "min": wide.min(axis=1), "max": wide.max(axis=1)})
    out["spread"] = out["max"] / out["min"].clip(lower=1e-300) - 1
    return out.assign(draws=len(draws), eps=e0)


def sensitivity_ties(df: pd.DataFrame) -> pd.DataFrame:
    r"""Near ties against the row mean of ``g`` (first direction draw, smallest ``eps``), per ``T``: ``tied rows``
    (share of all rows whose two largest logits differ by less than ``T``), ``gap density`` (that share over
    ``T``: the density of top-two gaps near 0, per unit of ``T``), ``their share of g`` (of the summed ``g`` of all
    rows), ``g`` (max over heads of the row mean) and ``two-token g`` (the same for the two-token prediction, in
    which only the top two weights respond), and ``2T g`` (``g`` against the corrected bound ``1/(2T)``)."""
    _require_sensitivity(df)
    need = ("rows_gap_below_T", "g_share_gap_below_T", "g_two_token")
    if not all(c in df for c in need):
        raise ValueError(f"df lacks the near-tie columns {list(need)} (an older gradient_sensitivity table)")
    d = _draw0(df)
    d = d[d["eps"] == d["eps"].min()].assign(g_sum=lambda x: x["g"] * x["n_rows"])
    by = d.groupby("T")
    out = pd.DataFrame({"tied rows": by["rows_gap_below_T"].sum() / by["n_rows"].sum().clip(lower=1)})
    out["gap density"] = out["tied rows"] / out.index.to_numpy(float)
    out["their share of g"] = (d["g_share_gap_below_T"] * d["g_sum"]).groupby(d["T"]).sum() / by["g_sum"].sum().clip(
        lower=1e-300
    )
    out["g"] = by["g"].max()
    out["two-token g"] = by["g_two_token"].max()
    out["2T g"] = 2 * out.index.to_numpy(float) * out["g"]
    return out
