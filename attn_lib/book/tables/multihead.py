"""Chapter 5's multi-head coverage: the table, the heads needed, the figure."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from attn_lib._validation import check_probability
from attn_lib.layout import FIGURE_WIDTH_IN, MIN_FONT_PT, wrap_text
from attn_lib.report._common import label, meta_of

__all__ = ["multihead_coverage_table", "heads_needed_distribution", "figure_multihead_coverage"]

# ---- chapter 5 (multi-head coverage measured on the model): attn_lib.experiments.multihead_coverage -----------

_COVERAGE_COLUMNS = ("layer", "H", "n_heads", "coverage", "covered")


def _check_coverage_table(df: Any) -> None:
    missing = [c for c in _COVERAGE_COLUMNS if c not in getattr(df, "columns", ())]
    if not isinstance(df, pd.DataFrame) or missing or not len(df):
        raise ValueError(
            f"df must be the non-empty table of attn_lib.experiments.multihead_coverage (missing columns: {missing})"
        )


def multihead_coverage_table(df: pd.DataFrame, p: float) -> pd.DataFrame:
    """The measured coverage of the head-averaged top-``N`` against ``H``, next to ``1 − (1 − p)^H``.

    Parameters
    ----------
    df : pandas.DataFrame
        :func:`attn_lib.experiments.multihead_coverage` rows, one per (layer, ``H``).
    p : float
        Separable fraction per head, in ``[0, 1]`` (the chapter uses the median ``N_s/N`` over heads at the same
        ``N`` from :func:`attn_lib.experiments.separability`).

    Returns
    -------
    pandas.DataFrame
        Index ``H`` (heads added); columns ``measured c(H)`` (mean over layers of the per-layer mean over rows and
        orders), ``lowest layer`` and ``highest layer`` (the range over layers), ``1 − (1 − p)^H`` and
        ``fully covered`` (share of (row, order) samples with ``c(H) = 1``, mean over layers).
    """
    _check_coverage_table(df)
    p = check_probability("p", p)
    g = df.groupby("H")
    out = pd.DataFrame(
        {
            "measured c(H)": g["coverage"].mean(),
            "lowest layer": g["coverage"].min(),
            "highest layer": g["coverage"].max(),
        }
    )
    out["1 − (1 − p)^H"] = 1.0 - (1.0 - p) ** out.index.to_numpy(dtype=float)
    out["fully covered"] = g["covered"].mean()
    return out


def heads_needed_distribution(df: pd.DataFrame) -> pd.Series:
    """Share of (row, order) samples, pooled over layers, by the number of heads needed to cover the whole target.

    Parameters
    ----------
    df : pandas.DataFrame
        :func:`attn_lib.experiments.multihead_coverage` rows (``covered`` is the share with heads needed ``<= H``).

    Returns
    -------
    pandas.Series
        Index ``"1"``, ..., ``str(n_heads)`` and ``"never"`` (the union of all heads of the layer misses a target
        token); values sum to 1.
    """
    _check_coverage_table(df)
    cdf = df.groupby("H")["covered"].mean().sort_index()
    n_heads = int(df["n_heads"].max())
    cdf = cdf.reindex(range(1, n_heads + 1)).ffill().fillna(0.0)
    share = cdf.diff().fillna(cdf.iloc[0]).clip(lower=0.0)
    out = pd.Series(share.to_numpy(), index=[str(k) for k in cdf.index], name="share of samples")
    out["never"] = max(0.0, 1.0 - float(cdf.iloc[-1]))
    return out


def figure_multihead_coverage(df: pd.DataFrame, p: float):
    """Measured multi-head coverage against ``H`` with ``1 − (1 − p)^H``, and the distribution of heads needed.

    Parameters
    ----------
    df : pandas.DataFrame
        :func:`attn_lib.experiments.multihead_coverage` rows (with ``model``, ``text``, ``device``, ``L``, ``N``).
    p : float
        Separable fraction per head, in ``[0, 1]``, for the independent-heads curve.

    Returns
    -------
    matplotlib Figure (outside pyplot), two panels, titled and footed with model, text and device.
    """
    table = multihead_coverage_table(df, p)
    needed = heads_needed_distribution(df)
    from matplotlib.figure import Figure  # matplotlib: imported only when a figure is drawn

    fig = Figure(figsize=(FIGURE_WIDTH_IN, 3.9))  # outside pyplot, as _panel_figure
    left, right = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1.25, 1]})
    for _, g in df.groupby("layer"):
        g = g.sort_values("H")
        left.plot(g["H"], g["coverage"], color="tab:green", alpha=0.2, lw=0.8)
    Hs = table.index.to_numpy()
    left.plot([], [], color="tab:green", alpha=0.4, lw=0.8, label="one layer")
    left.plot(Hs, table["measured c(H)"], "o-", color="darkgreen", ms=4, label="measured, mean over layers")
    left.plot(
        Hs, table["1 − (1 − p)^H"], "s--", color="tab:red", ms=4, label=f"independent heads: 1 − (1 − p)^H, p = {p:.2f}"
    )
    left.set_ylim(0, 1.02)
    left.set_xticks(Hs)
    left.set_xlabel("heads added H (random order per row)")
    left.set_ylabel("coverage c(H) of the head-averaged top-N")
    left.legend(fontsize=7, loc="lower right")
    left.grid(alpha=0.3)
    pos = np.arange(len(needed))
    right.bar(pos, needed.to_numpy(), color=["tab:green"] * (len(needed) - 1) + ["0.5"])
    right.set_xticks(pos, list(needed.index))
    right.set_xlabel("heads needed for c(H) = 1")
    right.set_ylabel("share of (row, order) samples")
    right.grid(alpha=0.3, axis="y")
    meta = meta_of(df)
    L = int(df["L"].iloc[0]) if "L" in df else 0
    N = int(df["N"].iloc[0]) if "N" in df else 0
    title = (
        f"Multi-head coverage measured (L={L}, N={N})\n{meta.get('model', '?')} · {meta.get('text', '?')} · "
        f"{meta.get('device', '?')}"
    )
    fig.suptitle(wrap_text(title, FIGURE_WIDTH_IN, 9), fontsize=9)
    footer = wrap_text(label(meta), 0.97 * FIGURE_WIDTH_IN, MIN_FONT_PT)
    fig.text(0.01, 0.005, footer, fontsize=MIN_FONT_PT, color="0.4", ha="left", va="bottom")
    fig.tight_layout(rect=(0, 0.03 + 0.015 * footer.count("\n"), 1, 1))
    return fig
