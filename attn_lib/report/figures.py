"""The paper's Figs. 2a, 2b, 2c, 3 and 4, drawn from the experiments' tables. Each ``figure_*`` returns a matplotlib
Figure outside pyplot with one panel per model, each titled with model, text and device: the table's, and ``other``,
a second model's (e.g. the bidirectional encoder's)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd

from ..claims.diagnosis import with_sampling
from ..claims.stats import THRESHOLDS, head_summary
from ..layout import FIGURE_WIDTH_IN, wrap_text
from ._common import KS_SAMPLING, footer, form_name, label, meta_of, sensitivity_curves, who
from .separability import separability_per_n


def _panel_figure(draw, frames: list, *, height: float = 4.2):
    """A figure with one panel per result set in ``frames`` (one model each), stacked, each as wide as the book's
    content column: ``draw(ax, frame)`` draws one and returns ``(title, meta)``; the footer names every model. Outside
    pyplot, the figure never switches the user's backend and is not auto-shown (show it with
    ``IPython.display.display``)."""
    from matplotlib.figure import Figure  # matplotlib: imported only when a figure is drawn

    fig = Figure(figsize=(FIGURE_WIDTH_IN, height * len(frames)))
    axes = fig.subplots(len(frames), 1, squeeze=False)[:, 0]
    metas = []
    for ax, frame in zip(axes, frames):
        title, meta = draw(ax, frame)
        metas.append(meta)
        ax.set_title(wrap_text(f"{title}\n{who(meta)}", 0.9 * FIGURE_WIDTH_IN, 9), fontsize=9)
    text = footer(fig, "  |  ".join(label(m) for m in metas), 0.97 * FIGURE_WIDTH_IN, ha="left", va="bottom")
    fig.tight_layout(rect=(0, 0.02 + 0.012 * text.count("\n"), 1, 1))
    return fig


def _frames(df, other) -> list:
    """``[df]`` or ``[df, other]``; ``other`` must be a table like ``df`` (a second model's results)."""
    if other is not None and not isinstance(other, pd.DataFrame):
        raise ValueError(f"other must be None or a DataFrame of a second model's results (got {type(other).__name__})")
    return [df] if other is None else [df, other]


def _model_panels(df, other, axes, title):
    """One panel per model: ``axes(ax, d)`` draws it and ``title(d)`` names it."""

    def draw(ax, d):
        axes(ax, d)
        return title(d), meta_of(d)

    return _panel_figure(draw, _frames(df, other))


_LINES = (
    ("d_tilde", "true d~", "tab:green", "-"),
    ("e1", "E1 (exact-expectation form)", "tab:blue", "-"),
    ("e1_plus_gap", "E1 + Jensen-gap bound", "tab:blue", ":"),
    ("e2", "E2", "tab:cyan", "--"),
    ("mc", "Monte-Carlo E[d~]", "navy", "-."),
    ("d_max", "bound d_max (Thm 1)", "tab:red", "-"),
)


def _finish(ax, xlabel: str, ylabel: str, base: int = 10) -> None:
    """Log-log axes (base ``base`` on x) with their labels, a legend and a light grid."""
    ax.set_xscale("log", base=base)
    ax.set(yscale="log", xlabel=xlabel, ylabel=ylabel)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)


def _distance_plot(ax, df: pd.DataFrame, by: str, xlabel: str) -> None:
    for col, name, color, ls in _LINES:
        if col not in df:
            continue
        a = head_summary(df, by, col)
        ax.plot(a[by], a["mean"], ls, color=color, marker="o", ms=3, label=name)
        ax.fill_between(a[by], a["q25"], a["q75"], color=color, alpha=0.12)
    _finish(ax, xlabel, "distance (mean over heads; band: IQR)", 2 if by == "L" else 10)


def figure_distance_vs_length(df: pd.DataFrame, other: pd.DataFrame | None = None):
    """Fig. 2a: every distance quantity against ``L`` at ``N`` (mean over heads, band: interquartile range), from
    :func:`attn_lib.experiments.distance_vs_length`'s rows."""

    def title(d):
        return f"Fig. 2a: distance vs L (N={int(d['N'].iloc[0]) if len(d) else 5})"

    return _model_panels(df, other, partial(_distance_plot, by="L", xlabel="context length L"), title)


def figure_distance_vs_n(df: pd.DataFrame, other: pd.DataFrame | None = None):
    """Fig. 2b: every distance quantity against ``N`` at fixed ``L``, from :func:`attn_lib.experiments.distance_vs_n`'s
    rows."""

    def title(d):
        return f"Fig. 2b: distance vs N (L={int(d['L'].iloc[0]) if len(d) else 0})"

    return _model_panels(df, other, partial(_distance_plot, by="N", xlabel="selected tokens N"), title)


def figure_critical_n(
    summary: pd.DataFrame,
    trace: pd.DataFrame | None = None,
    other: pd.DataFrame | None = None,
    other_trace: pd.DataFrame | None = None,
):
    """Fig. 2c: the critical ``N`` of E1 and of the Monte-Carlo expectation against ``L`` (both KS samplings), E2's
    first passing ``N`` and the paper's ``0.06 L``; a censored point (no passing ``N`` up to the scan limit) is an open
    marker at the limit. ``summary``: :func:`attn_lib.experiments.critical_n_summary`'s rows; ``trace``: the
    :func:`attn_lib.experiments.critical_n` trace (for the labels); ``other``, ``other_trace``: a second model's."""
    frames = list(zip(_frames(summary, other), (trace, other_trace)))

    def draw(ax, frame):
        s, t = frame
        _critical_n_axes(ax, s)
        return "Fig. 2c: critical N vs L (two-sample KS)", meta_of(t if t is not None and len(t) else s)

    return _panel_figure(draw, frames)


def _critical_n_axes(ax, summary: pd.DataFrame) -> None:
    summary = with_sampling(summary)
    styles = {
        ("e1", "heads"): ("tab:blue", "-", "o"),
        ("e1", "kv_groups"): ("tab:purple", "--", "s"),
        ("mc", "heads"): ("tab:orange", "-", "D"),
        ("mc", "kv_groups"): ("tab:red", "--", "v"),
    }
    for (f, sampling), g in summary.groupby(["form", "sampling"]):
        g = g.sort_values("L")
        cens = g["censored"].astype(bool).to_numpy()
        if f == "e2":
            if sampling == "heads":
                ax.scatter(g["L"], g["n_star"], marker="x", color="0.5", zorder=3, label="E2: first passing N")
            continue
        color, ls, marker = styles.get((f, sampling), ("tab:green", ":", "^"))
        name = f"{form_name(f)}, KS {KS_SAMPLING.get(sampling, sampling)}"
        ax.plot(g["L"][~cens], g["n_star"][~cens], ls, marker=marker, color=color, label=f"critical N: d~ vs {name}")
        if cens.any():
            lab = f"{form_name(f)} censored: no N up to the scan limit"
            style = dict(marker=marker, facecolors="none", edgecolors=color, zorder=3, label=lab)
            ax.scatter(g["L"][cens], g["n_star"][cens], **style)
    if len(summary):
        Ls = np.array(sorted(summary["L"].unique()), float)
        ax.plot(Ls, 0.06 * Ls, "k--", lw=1, label="paper: 0.06 L")
        ax.plot(Ls, Ls - 1, color="0.7", lw=0.8, label="scan limit L − 1")
    _finish(ax, "context length L", "critical N (first N with KS p ≥ α)", 2)


def figure_separability(df: pd.DataFrame, other: pd.DataFrame | None = None):
    """Fig. 3: box plots over heads of the per-head ``N_s/N`` against ``N`` (box: quartiles, whiskers up to 1.5 IQR,
    circles: heads beyond them), Theorem 2's lower bound (clipped at −1) and the paper's heuristic upper bound as their
    medians over heads, and the paper's 0.70–0.85 band shaded, from :func:`attn_lib.experiments.separability`'s rows
    (``N``, ``fraction``, ``lower``, ``upper``; ``L``, ``model``, ``text``, ``device`` for the labels)."""

    def title(d):
        return f"Fig. 3: geometric separability (L={int(d['L'].iloc[0]) if 'L' in d else 0})"

    return _model_panels(df, other, _separability_axes, title)


def _separability_axes(ax, df: pd.DataFrame) -> None:
    per_n = separability_per_n(df)  # checks the table
    Ns = list(per_n.index)
    data = [df.loc[df["N"] == n, "fraction"].to_numpy(dtype=float) for n in Ns]
    pos = np.arange(len(Ns))
    lo, hi = THRESHOLDS["sep_lo"], THRESHOLDS["sep_hi"]
    ax.axhspan(lo, hi, color="0.8", alpha=0.5, zorder=0, label=f"paper: {lo:.2f}–{hi:.2f}")
    box = dict(
        boxprops=dict(facecolor="tab:green", alpha=0.45),
        medianprops=dict(color="darkgreen", lw=1.5),
        flierprops=dict(marker="o", ms=3, markerfacecolor="none", markeredgecolor="tab:green"),
    )
    ax.boxplot(data, positions=pos, widths=0.5, patch_artist=True, zorder=2, **box)
    from matplotlib.patches import Patch  # matplotlib: imported only when a figure is drawn

    lab = f"measured N_s/N over {int(per_n['heads'].max())} heads (box: quartiles)"
    box_handle = Patch(facecolor="tab:green", alpha=0.45, edgecolor="k", label=lab)
    for col, fmt, color, bound in (
        ("upper_median", "^-", "tab:red", "upper bound (paper's form, heuristic)"),
        ("lower_median", "v-", "tab:purple", "lower bound (clipped at −1)"),
    ):
        ax.plot(pos, per_n[col], fmt, color=color, ms=5, zorder=3, label=f"Thm 2 {bound}: median over heads")
    ax.set_xticks(pos, [str(int(n)) for n in Ns])
    ax.set(ylim=(-1.05, 1.05), xlabel="selected tokens N", ylabel="N_s / N per head (row mean)")
    handles, labels = ax.get_legend_handles_labels()
    ax.legend([box_handle, *handles], [box_handle.get_label(), *labels], fontsize=7, loc="lower left")
    ax.grid(alpha=0.3)


def figure_sensitivity(df: pd.DataFrame, other: pd.DataFrame | None = None):
    """Fig. 4: ``g(T, eps)``, the maximum over heads of the row mean, against ``T`` for each ``eps`` (direction draw
    0; a band over the draws where the table has several), with the paper's ``min{1/(4T), sqrt2}``, the corrected
    ``1/(2T)`` and ``sqrt2/eps``, from :func:`attn_lib.experiments.gradient_sensitivity`'s rows."""

    def title(d):
        return f"Fig. 4: gradient sensitivity (L={int(d['L'].iloc[0]) if len(d) else 0}{sens_rows_note(d)})"

    return _model_panels(df, other, _sensitivity_axes, title)


def _sensitivity_axes(ax, df: pd.DataFrame) -> None:
    draws = sorted(df["draw"].unique()) if "draw" in df else [None]
    per_draw = [sensitivity_curves(df if k is None else df[df["draw"] == k]).assign(draw=k) for k in draws]
    allc = pd.concat(per_draw)
    cur = per_draw[0]  # draw 0: the seed of the paper profile
    colors = ["tab:blue", "tab:orange", "tab:green", "tab:purple", "tab:brown"]
    for i, (e, g) in enumerate(cur.groupby("eps")):
        g = g.sort_values("T")
        col = colors[i % len(colors)]
        ax.plot(g["T"], g["g"], "o-", ms=3, color=col, label=f"ε = {e:g}")
        if len(draws) > 1:
            band = allc[allc["eps"] == e].groupby("T")["g"].agg(["min", "max"])
            label = f"band: {len(draws)} direction draws" if i == 0 else None
            ax.fill_between(band.index, band["min"], band["max"], color=col, alpha=0.25, lw=0, label=label)
        ax.axhline(math.sqrt(2) / e, color=col, ls=":", lw=0.8)
    T = np.logspace(np.log10(cur["T"].min()), np.log10(cur["T"].max()), 200)
    ax.plot(T, np.minimum(1 / (4 * T), math.sqrt(2)), "k--", lw=1, label="paper: min{1/(4T), √2}")
    ax.plot(T, 1 / (2 * T), color="0.5", ls="-.", lw=1, label="1/(2T) (dotted: √2/ε)")
    _finish(ax, "temperature T", "g(T, ε): max over heads of row-mean")


def sens_rows_note(df: pd.DataFrame) -> str:
    """``", R: every k-th row (n rows)"`` when Algorithm 5 used a subsampled row set, else ``""``."""
    if df is None or not len(df) or "row_stride" not in df:
        return ""
    k = int(df["row_stride"].max())
    if k <= 1:
        return ""
    n = int(df["n_rows"].max()) if "n_rows" in df else 0
    return f", R: every {k}th row ({n} rows/head)"


#: The paper's five figures: file stem -> (the result table drawn, the function drawing it).
_FIGURE_TABLES = {
    "fig2a_distance_vs_length": ("distance_vs_length", figure_distance_vs_length),
    "fig2b_distance_vs_n": ("distance_vs_n", figure_distance_vs_n),
    "fig2c_critical_n": ("critical_n_summary", figure_critical_n),
    "fig3_separability": ("separability", figure_separability),
    "fig4_sensitivity": ("gradient_sensitivity", figure_sensitivity),
}
FIGURES = tuple(_FIGURE_TABLES)


def save_figure(fig, path, dpi: int = 130, **kwargs) -> None:
    """Write ``fig`` to ``path`` so that the same figure gives the same bytes on every run (no creation date in the
    metadata, SVG element ids from a fixed salt)."""
    import matplotlib  # matplotlib: imported only when a figure is drawn

    if not callable(getattr(fig, "savefig", None)):
        raise ValueError(f"fig must be a matplotlib Figure (got {type(fig).__name__})")
    metadata = {"Date": None} if Path(path).suffix.lstrip(".").lower() in ("svg", "pdf") else None
    with matplotlib.rc_context({"svg.hashsalt": "attn_lib"}):
        fig.savefig(path, dpi=dpi, metadata=metadata, **kwargs)


def save_formats(fig, out: Path, stem: str, formats: Sequence[str], **kwargs) -> list[str]:
    """``fig`` saved (:func:`save_figure`) as ``out/stem.fmt`` for each of ``formats``; returns the paths."""
    paths = [out / f"{stem}.{fmt}" for fmt in formats]
    for path in paths:
        save_figure(fig, path, **kwargs)
    return [str(path) for path in paths]


def write_figures(
    results: dict[str, pd.DataFrame],
    out: str | Path,
    formats: Sequence[str] = ("png", "svg"),
    on_figure=None,
    other: dict[str, pd.DataFrame] | None = None,
) -> dict[str, list[str]]:
    """Write the five figures (those with data) as ``fig2a_distance_vs_length.{png,svg}`` etc., with ``other`` (a
    second model's results) as a second panel; ``on_figure(stem)`` is called after each of :data:`FIGURES` (drawn or
    skipped), e.g. to advance a progress bar."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    o = other or {}
    written: dict[str, list[str]] = {}
    for stem, (key, fn) in _FIGURE_TABLES.items():
        df = results.get(key)
        if df is not None and len(df) > 0:
            od = o.get(key)
            od = od if od is not None and len(od) else None
            traces = {"trace": results.get("critical_n"), "other_trace": o.get("critical_n")}  # they label Fig. 2c
            fig = fn(df, other=od, **(traces if fn is figure_critical_n else {}))
            written[stem] = save_formats(fig, out, stem, formats)
        if on_figure is not None:
            on_figure(stem)
    return written
