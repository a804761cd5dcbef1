"""Chapter 7 and ``compare-normalizers``: every normaliser on the paper's limits, and the live swap. Each
``figure_*`` returns a matplotlib Figure outside pyplot, with the provenance footer."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .._validation import check_int
from ..claims.stats import require_columns
from ..layout import FIGURE_WIDTH_IN, wrap_text
from ._common import label, meta_of, pipe_table

_BEYOND_METRICS = ("max_alpha", "d_tilde", "e1", "sep_fraction", "g")
_SWAP_COLUMNS = ("setting", "normalizer", "k", "T", "L", "loss", "perplexity")


def _labelled(fig, meta: dict):
    from ..provenance import label_figure  # provenance imports matplotlib: only when a figure is drawn

    return label_figure(fig, **{k: meta.get(k, "?") for k in ("model", "text", "device")})


def beyond_limits_markdown(summary: pd.DataFrame) -> str:
    """:func:`attn_lib.experiments.limits_summary`'s ``summary`` as a Markdown pipe table, one row per normaliser: the
    slope of the max weight against ``L``, ``d~`` and its slope, critical ``N`` (and ``N*/L``), ``N_s/N``, ``g`` at
    the smallest ``T`` and at ``T = 1``, the analytic Jacobian's spectral norm."""
    require_columns(
        summary.reset_index(), "summary", ("normalizer", "max_alpha_slope", "d_tilde", "n_star", "sep_fraction")
    )
    s0 = summary.iloc[0]
    head = ["normaliser", "max α ∝ L^b: b", "d~ (N=5, L max)", "d~ ∝ L^c: c", "critical N (N*/L)"]
    head += [f"N_s/N (N={int(s0['sep_n'])})", f"g(T={s0['low_T']:g})", "g(T=1)", "‖J‖₂ (T=1)"]
    rows = []
    for lab, r in summary.iterrows():
        n = int(r["n_star"])
        crit = f"none ≤ {n}" if r["n_star_censored"] else f"{n} ({r['n_star_ratio']:.3f})"
        jn = "—" if not np.isfinite(r["jac_norm_T1"]) else f"{r['jac_norm_T1']:.3g}"
        rows.append(
            [lab, f"{r['max_alpha_slope']:.2f}", f"{r['d_tilde']:.3g}", f"{r['d_tilde_slope']:.2f}", crit]
            + [f"{r['sep_fraction']:.2f}", f"{r['g_low_T']:.3g}", f"{r['g_T1']:.3g}", jn]
        )
    return pipe_table(head, rows)


def figure_beyond_limits(df: pd.DataFrame, crit: pd.DataFrame):
    """Small multiples, one line per normaliser of ``df`` (:func:`attn_lib.experiments.compare_normalizers`): mean
    max weight, ``d~`` (``N = 5``) and critical ``N`` (``crit``, :func:`attn_lib.experiments.critical_n_from_heads`)
    against ``L``; median ``N_s/N`` against ``N``; the paper's ``g`` against ``T`` (smallest ``eps``)."""
    from matplotlib.figure import Figure  # matplotlib: imported only when a figure is drawn
    from matplotlib.ticker import NullFormatter

    require_columns(df, "df", ("normalizer", "metric", "layer", "head", "value", "L", "N", "T", "eps"))
    missing = [m for m in _BEYOND_METRICS if m not in set(df["metric"])]
    if missing:
        raise ValueError(f"df must be attn_lib.experiments.compare_normalizers' table (no rows for {missing})")
    meta = meta_of(df)
    fig = Figure(figsize=(FIGURE_WIDTH_IN, 9.6))
    grid = fig.subplots(3, 2)
    axes, legend_ax = list(grid.flat[:5]), grid.flat[5]
    n_d = 5 if 5 in set(df["N"].dropna()) else int(df["N"].min())
    e0 = float(df["eps"].min())
    for i, (lab, d) in enumerate(df.groupby("normalizer", sort=False)):
        style = dict(marker="o", ms=3, lw=1.2, ls="-" if i < 10 else "--", label=lab)
        curves = {
            0: d[d["metric"] == "max_alpha"].groupby("L")["value"].mean(),
            1: d[(d["metric"] == "d_tilde") & (d["N"] == n_d)].groupby("L")["value"].mean(),
            3: d[d["metric"] == "sep_fraction"].groupby("N")["value"].median(),
            4: d[(d["metric"] == "g") & (d["eps"] == e0)].groupby("T")["value"].max(),
        }
        for k, y in curves.items():
            axes[k].plot(y.index.astype(float), y.to_numpy(), **style)
        c = crit[crit["normalizer"] == lab]
        cens = c["censored"].astype(bool).to_numpy()
        axes[2].plot(c["L"][~cens], c["n_star"][~cens], **style)
        if cens.any():  # no scanned N passed: an open triangle at the last scanned N, joined to nothing
            color = axes[2].get_lines()[-1].get_color()
            axes[2].plot(c["L"][cens], c["n_star"][cens], ls="none", marker="^", mfc="none", color=color, ms=6)
    Ls = np.array(sorted(df["L"].dropna().unique()), dtype=float)
    axes[0].plot(Ls, 1 / Ls, "k:", lw=1, label="1/L")
    titles = [
        ("L (row length)", "mean max weight", "vanishing (Lemma 1)"),
        ("L", f"mean d~ (N = {n_d})", "distance (Theorem 1)"),
        ("L", "critical N (KS, over heads)", "critical N (△: no scanned N passed)"),
        ("N", "median N_s/N (unit values)", "separability (Theorem 2)"),
        ("T", f"g(T, ε={e0:g}) (max over heads)", "sensitivity (Corollary 3)"),
    ]
    for ax, (xl, yl, t) in zip(axes, titles):
        ax.set(xlabel=xl, ylabel=yl, xscale="log")
        ax.set_title(t, fontsize=9)
        ax.xaxis.set_minor_formatter(NullFormatter())  # half-width panels: minor labels would overlap
        ax.grid(alpha=0.3)
    for ax in (axes[0], axes[1], axes[2], axes[4]):
        ax.set_yscale("log")
    legend_ax.axis("off")
    legend_ax.legend(*axes[0].get_legend_handles_labels(), loc="center", fontsize=9, title="normaliser")
    fig.suptitle(wrap_text(f"Every normaliser on the same logits: {label(meta)}", FIGURE_WIDTH_IN, 10), fontsize=10)
    fig.tight_layout()
    return _labelled(fig, meta)


def beyond_swap_table(losses: pd.DataFrame, L: int | None = None) -> pd.DataFrame:
    """Loss and perplexity of every swap setting of ``losses`` (``attn_lib.experiments.SwapResult.losses``) at one
    measured ``L`` (default the largest), indexed by setting, and ``delta_loss`` (loss minus the model's own)."""
    require_columns(losses, "losses", _SWAP_COLUMNS)
    L = int(losses["L"].max()) if L is None else check_int("L", L)
    if L not in set(losses["L"]):
        raise ValueError(f"L must be one of the measured lengths {sorted(set(losses['L']))} (got {L})")
    t = losses[losses["L"] == L].set_index("setting")[["loss", "perplexity"]]
    t["delta_loss"] = t["loss"] - float(t.loc["softmax (model)", "loss"])
    return t


def figure_beyond_swap(losses: pd.DataFrame):
    """Held-out next-token loss with each normaliser swapped in (``losses``: ``SwapResult.losses``): against ``L``;
    against ``k`` for top-k and against ``T`` for softmax at the largest ``L``."""
    from matplotlib.figure import Figure  # matplotlib: imported only when a figure is drawn

    require_columns(losses, "losses", _SWAP_COLUMNS)
    meta = meta_of(losses)
    Lm = int(losses["L"].max())
    fig = Figure(figsize=(FIGURE_WIDTH_IN, 7.0))
    mosaic = fig.subplot_mosaic([["L", "L"], ["k", "T"]])
    axes = [mosaic["L"], mosaic["k"], mosaic["T"]]
    main = losses[~losses["setting"].str.startswith("softmax T=")]
    ks = sorted(int(k) for k in losses.loc[losses["normalizer"] == "topk", "k"].dropna().unique())
    shown = {f"top-{k}" for k in ks[1:-1:2]}
    for i, (s, d) in enumerate(main.groupby("setting", sort=False)):
        if s.startswith("top-") and s not in shown:
            continue
        axes[0].plot(d["L"], d["loss"], marker="o", ms=3, ls="-" if i < 10 else "--", label=s)
    axes[0].set(xscale="log", xlabel="L (prefix of the held-out window)", ylabel="mean next-token loss (nats)")
    axes[0].legend(fontsize=7)
    at = losses[losses["L"] == Lm]
    model_loss = float(at.loc[at["setting"] == "softmax (model)", "loss"].iloc[0])
    tk = at[at["normalizer"] == "topk"].sort_values("k")
    axes[1].plot(tk["k"], tk["loss"], "o-", color="tab:purple", label="top-k")
    axes[1].set_xscale("log", base=2)
    axes[1].set_xlabel("k")
    tt = at[at["setting"].str.startswith("softmax T=")].sort_values("T")
    axes[2].plot(tt["T"], tt["loss"], "o-", color="tab:orange", label="softmax at T")
    axes[2].set_xscale("log", base=2)
    axes[2].set_xlabel("T (on top of the model's logits)")
    for ax in axes[1:]:
        ax.axhline(model_loss, color="k", ls=":", lw=1, label="model's own softmax")
        ax.set_ylabel(f"loss at L = {Lm}")
        ax.legend(fontsize=7)
    for ax in axes:
        ax.grid(alpha=0.3)
    title = f"Normalisers swapped into every head, no retraining: {label(meta)}"
    fig.suptitle(wrap_text(title, FIGURE_WIDTH_IN, 10), fontsize=10)
    fig.tight_layout()
    return _labelled(fig, meta)
