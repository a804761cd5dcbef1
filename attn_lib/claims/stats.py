"""The thresholds of the claims' verdicts and the statistics their rules read: head aggregates, least-squares fits,
the linear-growth rule, the valid KS sampling, and the column check every table function shares."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

#: Explicit thresholds behind every verdict.
THRESHOLDS = {
    # growth with L at N=5: the exponent b of a log-log fit of the head mean against L has |b - 1| <= tol
    "linear_exponent_tol": 0.2,
    # plateau past N~20: |mean d~(N_max) - mean d~(20)| / mean d~(20) <= plateau_rel
    "plateau_rel": 0.25,
    "plateau_from_n": 20,
    # convergence near N=100: relative gap |E - d~| / d~ at most converge_rel at the largest N, above it at the smallest
    "converge_rel": 0.10,
    # critical N ~ 0.06 L: least-squares ratio N*/L (uncensored L only) within a factor of 2 of 0.06
    "crit_ratio_paper": 0.06,
    "crit_ratio_factor": 2.0,
    # separability 0.70-0.85 past N~16: the median over heads of N_s/N lies in [lo - tol, hi + tol] for every N >= 16
    "sep_from_n": 16,
    "sep_lo": 0.70,
    "sep_hi": 0.85,
    "sep_tol": 0.0,
    # 1/T regime below T=0.1: log-log slope of g against T (T < 0.1, smallest eps, at least inv_t_min_points
    # temperatures) in [-1.25, -0.75]
    "inv_t_max_T": 0.1,
    "inv_t_slope": (-1.25, -0.75),
    "inv_t_min_points": 5,
    # beyond T = 1: g(T=1) / g(T_max) (smallest eps) within [10^1.5, 10^2.5] ("about two orders of magnitude"), and
    # the eps-curves merge: at every T >= 1 the largest over the smallest g across eps is at most merge_ratio
    "drop_ratio": (10**1.5, 10**2.5),
    "merge_ratio": 2.0,
    # how many of the T grid's last points the fall beyond T = 1 is shown for (the verdict uses the last)
    "drop_ends": 3,
    # "the Jensen gap is small": E1's Jensen-gap bound is at most this fraction of E1 (head means) at every L
    "jensen_small_rel": 0.10,
    # "safe but conservative": the median over heads and L of d_max / d~ is at least this
    "conservative_ratio": 1.5,
    # the Monte-Carlo rows get a verdict only over at least this many seeds of the random subsets, all giving the same
    # verdict (the relative standard error at N* is reported, not thresholded: the seeds' spread is the test)
    "mc_min_seeds": 5,
    # KS level of the critical-N diagnosis (the scan's own level is in its trace)
    "ks_alpha": 0.01,
    # Theorem 2's upper bound "tracks" an aggregate when their gap is at most this at every N >= 2
    "track_tol": 0.10,
    # the multi-head rule of the Discussion: H independent heads that each separate p cover the target share
    "multihead_p": 0.8,
    "multihead_H": 3,
    "multihead_target": 0.99,
    # "near the theoretical limit": below T = 0.1 the head-max g is at least this fraction of min{1/(4T), sqrt 2}
    "near_limit_ratio": 0.5,
}


def head_summary(df: pd.DataFrame, by: str, col: str) -> pd.DataFrame:
    g = df.groupby(by)[col]
    return pd.DataFrame(
        {"mean": g.mean(), "q25": g.quantile(0.25), "q75": g.quantile(0.75), "median": g.median()}
    ).reset_index()


def separability_stats(df: pd.DataFrame) -> pd.DataFrame:
    """Per N (the index), over heads: ``median``, ``q25``, ``q75``, ``p90``, ``max`` of ``fraction``, the medians
    ``upper`` and ``lower`` of Theorem 2's bounds, and ``heads``; read by Fig. 3's claims and its per-N table."""
    g = df.groupby("N")
    f = g["fraction"]
    return pd.DataFrame(
        dict(
            median=f.median(),
            q25=f.quantile(0.25),
            q75=f.quantile(0.75),
            p90=f.quantile(0.9),
            max=f.max(),
            upper=g["upper"].median(),
            lower=g["lower"].median(),
            heads=f.size(),
        )
    )


def linfit(x, y) -> tuple[float, float, float]:
    """slope, intercept, R^2 of a least-squares line."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    if len(x) < 2 or np.ptp(x) == 0:
        return float("nan"), float("nan"), float("nan")
    A = np.vstack([x, np.ones_like(x)]).T
    (a, b), *_ = np.linalg.lstsq(A, y, rcond=None)
    ss_res = float(((y - (a * x + b)) ** 2).sum())
    ss_tot = float(((y - y.mean()) ** 2).sum())
    r2 = 1 - ss_res / ss_tot if ss_tot > 0 else 1.0
    return float(a), float(b), float(r2)


def linear_growth(x, y, thresholds: dict | None = None) -> dict:
    r"""How ``y`` grows with ``x`` (1-D, finite: e.g. the lengths ``L`` and the head-mean distances), and the rule
    "grows linearly" of :data:`THRESHOLDS` (``thresholds``: overrides; only ``linear_exponent_tol`` is read).

    A good straight-line fit does not show "roughly linearly in L" (a line with a large intercept fits a curve that
    barely grows), so the rule reads the **exponent**, the least-squares slope :math:`b` of :math:`\log y` against
    :math:`\log x`: linear when :math:`|b-1|\le` ``linear_exponent_tol``.

    Returns ``slope``, ``intercept``, ``r2`` of the straight line (a constant ``y``: slope 0, ``r2 = 1``); ``exponent``
    (NaN unless every ``y > 0``); ``growth`` (``y`` at the largest ``x`` over ``y`` at the smallest), ``x_growth``
    (the same for ``x``); ``linear`` (bool). With fewer than two distinct ``x`` the fitted numbers are NaN and
    ``linear`` is False.
    """
    th = dict(THRESHOLDS, **(thresholds or {}))
    xa, ya = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if xa.ndim != 1 or ya.shape != xa.shape:
        raise ValueError(f"x and y must be 1-D arrays of the same length (got shapes {xa.shape} and {ya.shape})")
    if not (np.all(np.isfinite(xa)) and np.all(np.isfinite(ya))):
        raise ValueError("x and y must be finite (got NaN or inf)")
    slope, intercept, r2 = linfit(xa, ya)
    if math.isfinite(r2) and np.ptp(ya) == 0:  # a flat line: lstsq leaves a rounding-sized slope of either sign
        slope, intercept = 0.0, float(ya[0])
    exponent = float("nan")
    if math.isfinite(r2) and np.all(ya > 0) and np.all(xa > 0):
        exponent = 0.0 if np.ptp(ya) == 0 else linfit(np.log(xa), np.log(ya))[0]
    order = np.argsort(xa, kind="stable")
    growth = float(ya[order[-1]] / ya[order[0]]) if len(ya) and ya[order[0]] != 0 else float("nan")
    x_growth = float(xa[order[-1]] / xa[order[0]]) if len(xa) and xa[order[0]] != 0 else float("nan")
    linear = bool(abs(exponent - 1.0) <= th["linear_exponent_tol"])  # NaN compares False: not linear
    return dict(
        slope=slope, intercept=intercept, r2=r2, exponent=exponent, growth=growth, x_growth=x_growth, linear=linear
    )


def valid_ks_sampling(summary: pd.DataFrame) -> str:
    """The KS sampling whose samples are independent: ``"kv_groups"`` when the summary has it (under grouped-query
    attention the heads of a group share keys and values), else ``"heads"``."""
    has = set(summary["sampling"]) if "sampling" in summary.columns else {"heads"}
    return "kv_groups" if "kv_groups" in has else "heads"


def need_results(results: Any) -> None:
    """``ValueError`` unless ``results`` is a dict (of result tables, as :func:`attn_lib.experiments.run_all`'s)."""
    if not isinstance(results, dict):
        raise ValueError(
            f"results must be the dict that attn_lib.experiments.run_all returns (got {type(results).__name__})"
        )


def require_columns(df: Any, name: str, columns: Sequence[str]) -> None:
    if not isinstance(df, pd.DataFrame):
        raise ValueError(f"{name} must be a pandas DataFrame (got {type(df).__name__})")
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"{name} must have the columns {list(columns)} (missing: {missing})")
