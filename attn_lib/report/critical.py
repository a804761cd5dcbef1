r"""The critical-N diagnosis as the report shows it (chapter 6, ``prop-e1-crossing``; Reading the paper, §The
critical N): its figure and tables. The statistics are :mod:`attn_lib.claims.diagnosis`'s."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..claims.diagnosis import diagnosis_first_pass, diagnosis_summary, required_rho
from ..layout import FIGURE_WIDTH_IN, MIN_FONT_PT, wrap_text
from ._common import footer, label, meta_of, who


def figure_critical_diagnosis(diag: pd.DataFrame, n_star_ratio: float | None = None):
    r"""Why the critical N is where it is, from :func:`attn_lib.experiments.critical_n_diagnosis`'s ``diag``: two
    panels against ``N/L``, one line per counterfactual. Top: the median over heads of :math:`\|s_N\|/\|z\|`, with
    the line :math:`N/(L-1)` where E1's leading term meets d~'s and the paper's 0.06. Bottom: E1/d~ of the head means
    (solid) and of their leading terms (dashed), with 1 and the model's measured ``n_star_ratio`` (``N*/L``)."""
    from matplotlib.figure import Figure  # matplotlib: imported only when a figure is drawn

    summ = diagnosis_summary(diag)
    meta = meta_of(diag)
    L = int(summ["L"].iloc[0])

    fig = Figure(figsize=(FIGURE_WIDTH_IN, 8.0))
    ax1, ax2 = fig.subplots(2, 1)
    colors = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown")
    for (variant, g), c in zip(summ.groupby("variant", sort=False), colors):
        ax1.plot(g["N/L"], g["rho"], "o-", color=c, label=variant)
        ax1.fill_between(g["N/L"], g["rho q25"], g["rho q75"], color=c, alpha=0.12)
        ax2.plot(g["N/L"], g["E1/d~"], "o-", color=c, label=f"{variant}: E1/d~")
        ax2.plot(g["N/L"], g["lead ratio"], "--", color=c, lw=1)
    x = np.linspace(0.005, 0.95, 50)
    ax1.plot(x, x * L / (L - 1), ":", color="k", label="N/(L−1): E1 meets d~ at t = L")
    for ax in (ax1, ax2):
        ax.axvline(0.06, color="0.5", lw=0.8, ls="-.")
        ax.set(xlabel="N / L", xscale="log")
    ax1.set_ylabel("‖s_N‖ / ‖z‖ (median over heads; band: IQR)")
    ax1.set_title(f"the ratio that places the critical N (L = {L})", fontsize=9)
    ax2.axhline(1.0, color="k", lw=0.8)
    if n_star_ratio is not None and math.isfinite(n_star_ratio):
        ax2.axvline(n_star_ratio, color="tab:blue", lw=1, ls=":", label=f"measured N*/L = {n_star_ratio:.2f}")
    ax2.set_ylabel("E1 / d~ (head means; dashed: leading terms)")
    ax2.set_title("E1 against d~ (the KS test passes once they are close)", fontsize=9)
    ax1.legend(fontsize=MIN_FONT_PT, loc="center right")
    ax2.legend(fontsize=MIN_FONT_PT, loc="upper left")
    fig.suptitle(wrap_text(who(meta), FIGURE_WIDTH_IN, 9), fontsize=9)
    footer(fig, label(meta))
    fig.tight_layout(rect=(0, 0.04, 1, 0.95))
    return fig


def _md_column(name: str) -> str:
    return name.replace("~", "\\~")


def diagnosis_markdown(diag: pd.DataFrame, alpha: float = 0.01) -> str:
    r"""The critical-N diagnosis (``diag``) as Markdown: per counterfactual, where the KS test at level ``alpha``
    first passes, the median :math:`\|s_N\|/\|z\|` and E1/d~ at 0.06 L, and what 0.06 L would need; then the
    model's rows by ``N/L``."""
    summ = diagnosis_summary(diag)
    first = diagnosis_first_pass(summ, alpha)
    L = int(summ["L"].iloc[0])
    viol = int(summ["bound violations"].sum())
    model = summ["variant"].iloc[0]
    d0, m0 = diag[diag["variant"] == model], summ[summ["variant"] == model]
    n06 = int(d0["N"].iloc[int(np.argmin(np.abs(d0["N"].to_numpy() / L - 0.06)))])
    per_head = d0.loc[d0["N"] == n06, "rho_median"].quantile([0, 0.1, 0.5, 0.9, 1.0])
    sink_line = ""
    if "first value 0" in first.index and model in first.index:
        f0, f1 = first.loc[model, "first N/L"], first.loc["first value 0", "first N/L"]
        moved = "does not bring" if not (f1 <= 2 * 0.06) else "brings"
        sink_line = (
            f" The first token carries a median {float(m0['sink share'].median()):.2f} of the weight but a median "
            f"{float(m0['sink output share'].median()):.3f} of ‖z‖ through its value vector (α₀‖x₀‖/‖z‖); setting that value vector to zero moves "
            f"the first passing N/L from {f0:.2f} to {f1:.2f}: it {moved} the critical N to about 0.06 L."
        )
    rows = m0[["N", "N/L", "rows", "rho", "E1/d~", "lead ratio", "KS p (kv groups)"]]
    lines = [
        f"### Why the critical N is where it is (L = {L})",
        "",
        f"By the leading terms of prop-e1-crossing (its bounds fail in {viol} rows of this run), E1 meets d~ at "
        f"N = 0.06 L in the longest rows only if ‖s_N‖/‖z‖ ≈ N/(L−1) = {required_rho(L):.3f} there (a heuristic "
        f"scale: shorter rows have a larger p). Per head at N = {n06}, ‖s_N‖/‖z‖ "
        f"(each head's median over rows) ranges from {per_head.iloc[0]:.3f} (10 %: {per_head.iloc[1]:.3f}, median "
        f"{per_head.iloc[2]:.3f}, 90 %: {per_head.iloc[3]:.3f}) to {per_head.iloc[4]:.3f} over "
        f"{int((d0['N'] == n06).sum())} heads.{sink_line}",
        "",
        first.rename(columns=_md_column).to_markdown(floatfmt=".3f"),
        "",
        rows.rename(columns=_md_column).to_markdown(index=False, floatfmt=".3g"),
    ]
    return "\n".join(lines)
