r"""The critical-N diagnosis (chapter 6, ``prop-e1-crossing``; Reading the paper, §The critical N).

:func:`attn_lib.experiments.critical_n_diagnosis` measures, on the critical-N rows of one window, the quantities
that decide where the KS test between d~ and E1 can pass. This module turns them into the report's numbers:

* :func:`diagnosis_summary` -- per counterfactual and ``N/L``: the median over heads of
  :math:`\|s_N\|/\|z\|`, the ratio E1/d~ of the head means next to the ratio of their leading terms, the KS
  p-values over heads and over key/value groups, and the rows where the proposition's bounds fail;
* :func:`diagnosis_first_pass` -- per counterfactual, the first ``N/L`` of the grid where the KS test passes;
* :func:`required_rho` -- the :math:`\|s_N\|/\|z\|` at which E1's leading term equals d~'s at ``N = f L``;
* :func:`critical_rows` -- the rows and the Monte-Carlo standard error behind each critical ``N``;
* :func:`figure_critical_diagnosis` -- both curves against ``N/L``, one line per counterfactual.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .._validation import check_choice, check_int, check_probability
from ..layout import FIGURE_WIDTH_IN, MIN_FONT_PT, wrap_text
from ._common import label, meta_of, require_columns

__all__ = [
    "diagnosis_summary",
    "diagnosis_first_pass",
    "required_rho",
    "critical_rows",
    "figure_critical_diagnosis",
    "diagnosis_markdown",
]

_DIAG_COLUMNS = ("variant", "L", "N", "layer", "head", "kv_group", "d_tilde", "e1", "lead_d_tilde", "lead_e1")


def _ks(a, b) -> float:
    from scipy.stats import ks_2samp  # scipy.stats: imported only when the test runs

    return float(ks_2samp(np.asarray(a, float), np.asarray(b, float)).pvalue)


def diagnosis_summary(diag: pd.DataFrame) -> pd.DataFrame:
    r"""Per counterfactual and ``N``: what controls the critical N.

    Parameters
    ----------
    diag : pandas.DataFrame
        :func:`attn_lib.experiments.critical_n_diagnosis`.

    Returns
    -------
    pandas.DataFrame
        One row per ``(variant, N)`` in the table's order: ``L, N, N/L``, ``heads``, ``rows`` (the median rows per
        head), ``rho`` (median over heads of each head's median :math:`\|s_N\|/\|z\|`), ``rho q25``, ``rho q75``,
        ``E1/d~`` (ratio of the head means, what the KS test compares), ``lead ratio`` (the same for the leading
        terms :math:`(t-N)p\|z\|` and :math:`(t-N)\|s_N\|`), ``KS p (heads)``, ``KS p (kv groups)`` (the mean of
        the heads of each key/value group, one sample per group), ``sink share`` (median over heads of the first
        token's mean weight) and ``bound violations`` (rows, summed over heads).
    """
    require_columns(diag, "diag", _DIAG_COLUMNS)
    rows = []
    for variant in dict.fromkeys(diag["variant"]):
        v = diag[diag["variant"] == variant]
        for N, g in v.groupby("N", sort=True):
            grp = g.groupby(["layer", "kv_group"])[["d_tilde", "e1"]].mean()
            L = int(g["L"].iloc[0])
            rows.append(
                {
                    "variant": variant,
                    "L": L,
                    "N": int(N),
                    "N/L": N / L,
                    "heads": len(g),
                    "rows": float(g["n_rows"].median()) if "n_rows" in g else math.nan,
                    "rho": float(g["rho_median"].median()) if "rho_median" in g else math.nan,
                    "rho q25": float(g["rho_median"].quantile(0.25)) if "rho_median" in g else math.nan,
                    "rho q75": float(g["rho_median"].quantile(0.75)) if "rho_median" in g else math.nan,
                    "E1/d~": float(g["e1"].mean() / g["d_tilde"].mean()),
                    "lead ratio": float(g["lead_e1"].mean() / g["lead_d_tilde"].mean()),
                    "KS p (heads)": _ks(g["d_tilde"], g["e1"]),
                    "KS p (kv groups)": _ks(grp["d_tilde"], grp["e1"]),
                    "sink share": float(g["sink_share"].median()) if "sink_share" in g else math.nan,
                    "sink output share": float(g["sink_output_share"].median())
                    if "sink_output_share" in g
                    else math.nan,
                    "bound violations": int(g["bound_violations"].sum()) if "bound_violations" in g else 0,
                }
            )
    return pd.DataFrame(rows)


def diagnosis_first_pass(summary: pd.DataFrame, alpha: float = 0.01, sampling: str = "kv groups") -> pd.DataFrame:
    """Per counterfactual: the first ``N/L`` of the grid where the KS test passes (``p >= alpha``).

    Parameters
    ----------
    summary : pandas.DataFrame
        :func:`diagnosis_summary`.
    alpha : float in (0, 1)
    sampling : {"kv groups", "heads"}

    Returns
    -------
    pandas.DataFrame
        Index ``variant``; ``first N/L`` (NaN when no grid point passes), ``last failing N/L`` (the grid point
        before it, so the critical N lies in between), ``rho at 0.06 L`` (the median :math:`\\|s_N\\|/\\|z\\|` at
        the grid point nearest 0.06 L).
    """

    require_columns(summary, "summary", ("variant", "N/L", "rho", "KS p (heads)", "KS p (kv groups)"))
    alpha = check_probability("alpha", alpha, open_low=True, open_high=True)
    col = f"KS p ({check_choice('sampling', sampling, ['kv groups', 'heads'])})"
    out = {}
    for variant, g in summary.groupby("variant", sort=False):
        g = g.sort_values("N/L")
        hit = g[g[col] >= alpha]
        first = float(hit["N/L"].iloc[0]) if len(hit) else math.nan
        before = g[g["N/L"] < first] if len(hit) else g
        near = g.iloc[int(np.argmin(np.abs(g["N/L"].to_numpy() - 0.06)))]
        out[variant] = {
            "first N/L": first,
            "last failing N/L": float(before["N/L"].iloc[-1]) if len(before) else math.nan,
            "rho at 0.06 L": float(near["rho"]),
            "E1/d~ at 0.06 L": float(near["E1/d~"]),
        }
    return pd.DataFrame.from_dict(out, orient="index").rename_axis("variant")


def required_rho(L: int, fraction: float = 0.06) -> float:
    r"""The :math:`\|s_N\|/\|z\|` at which E1's leading term :math:`(t-N)p\|z\|` equals d~'s
    :math:`(t-N)\|s_N\|` in the last row (``t = L``) at ``N = round(fraction L)``: ``p = N/(L-1)``. A heuristic
    scale: shorter rows have a larger ``p``, and the KS test can pass before the ratio of the means reaches 1.

    Parameters
    ----------
    L : int >= 3
    fraction : float in (0, 1)

    Returns
    -------
    float
    """

    L = check_int("L", L, low=3)
    f = check_probability("fraction", fraction, open_low=True, open_high=True)
    N = max(1, round(f * L))
    return N / (L - 1)


def critical_rows(trace: pd.DataFrame, summary: pd.DataFrame) -> pd.DataFrame:
    """The rows behind each critical ``N``, and the Monte-Carlo standard error there.

    Parameters
    ----------
    trace : pandas.DataFrame
        :func:`attn_lib.experiments.critical_n` (columns ``L, N, form, p_value, n_rows``; ``sampling`` and
        ``mc_rel_se`` when present).
    summary : pandas.DataFrame
        :func:`attn_lib.experiments.critical_n_summary` of that trace.

    Returns
    -------
    pandas.DataFrame
        ``L, form, sampling, n_star, censored, rows`` (query rows per head at ``N*``: rows with ``t >= N* + 1``
        among the scan's rows) and ``mc_rel_se`` (largest relative standard error of a Monte-Carlo sample value at
        ``N*``; NaN for the other forms).
    """
    require_columns(trace, "trace", ("L", "N", "form", "n_rows"))
    require_columns(summary, "summary", ("L", "form", "n_star", "censored"))
    tr = trace if "sampling" in trace else trace.assign(sampling="heads")
    sm = summary if "sampling" in summary else summary.assign(sampling="heads")
    out = []
    for r in sm.itertuples():
        hit = tr[(tr["L"] == r.L) & (tr["form"] == r.form) & (tr["sampling"] == r.sampling) & (tr["N"] == r.n_star)]
        se = float(hit["mc_rel_se"].iloc[0]) if len(hit) and "mc_rel_se" in hit else math.nan
        out.append(
            dict(
                L=int(r.L),
                form=r.form,
                sampling=r.sampling,
                n_star=int(r.n_star),
                censored=bool(r.censored),
                rows=int(hit["n_rows"].iloc[0]) if len(hit) else 0,
                mc_rel_se=se,
            )
        )
    return pd.DataFrame(out)


def figure_critical_diagnosis(diag: pd.DataFrame, n_star_ratio: float | None = None):
    r"""Why the critical N is where it is: two panels against ``N/L``, one line per counterfactual.

    Left: the median over heads of :math:`\|s_N\|/\|z\|`, with the line :math:`N/(L-1)` where E1's leading term
    meets d~'s (``prop-e1-crossing``) and the paper's 0.06. Right: E1/d~ of the head means (solid) and of their
    leading terms (dashed), with 1 (where the KS test can pass) and the measured critical ``N/L`` of the model.

    Parameters
    ----------
    diag : pandas.DataFrame
        :func:`attn_lib.experiments.critical_n_diagnosis`.
    n_star_ratio : float, optional
        The model's measured ``N*/L`` at the same ``L`` (drawn as a vertical line).

    Returns
    -------
    matplotlib.figure.Figure
    """
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
        ax.set_xlabel("N / L")
        ax.set_xscale("log")
    ax1.set_ylabel("‖s_N‖ / ‖z‖ (median over heads; band: IQR)")
    ax1.set_title(f"the ratio that places the critical N (L = {L})", fontsize=9)
    ax2.axhline(1.0, color="k", lw=0.8)
    if n_star_ratio is not None and math.isfinite(n_star_ratio):
        ax2.axvline(n_star_ratio, color="tab:blue", lw=1, ls=":", label=f"measured N*/L = {n_star_ratio:.2f}")
    ax2.set_ylabel("E1 / d~ (head means; dashed: leading terms)")
    ax2.set_title("E1 against d~ (the KS test passes once they are close)", fontsize=9)
    ax1.legend(fontsize=MIN_FONT_PT, loc="center right")
    ax2.legend(fontsize=MIN_FONT_PT, loc="upper left")
    title = f"{meta.get('model', '?')} · {meta.get('text', '?')} · {meta.get('device', '?')}"
    fig.suptitle(wrap_text(title, FIGURE_WIDTH_IN, 9), fontsize=9)
    fig.text(0.01, 0.005, wrap_text(label(meta), FIGURE_WIDTH_IN, MIN_FONT_PT), fontsize=MIN_FONT_PT, color="0.4")
    fig.tight_layout(rect=(0, 0.04, 1, 0.95))
    return fig


def diagnosis_markdown(diag: pd.DataFrame, alpha: float = 0.01) -> str:
    r"""The critical-N diagnosis as Markdown: per counterfactual, where the KS test first passes, the median
    :math:`\|s_N\|/\|z\|` and E1/d~ at 0.06 L, and what 0.06 L would need; then the model's rows by ``N/L``.

    Parameters
    ----------
    diag : pandas.DataFrame
        :func:`attn_lib.experiments.critical_n_diagnosis`.
    alpha : float
        KS level.

    Returns
    -------
    str
    """
    summ = diagnosis_summary(diag)
    first = diagnosis_first_pass(summ, alpha)
    L = int(summ["L"].iloc[0])
    viol = int(summ["bound violations"].sum())
    model = summ["variant"].iloc[0]
    d0 = diag[diag["variant"] == model]
    n06 = int(d0["N"].iloc[int(np.argmin(np.abs(d0["N"].to_numpy() / L - 0.06)))])
    per_head = d0.loc[d0["N"] == n06, "rho_median"].quantile([0, 0.1, 0.5, 0.9, 1.0])
    sink_line = ""
    if "first value 0" in first.index and model in first.index:
        f0, f1 = first.loc[model, "first N/L"], first.loc["first value 0", "first N/L"]
        moved = "does not bring" if not (f1 <= 2 * 0.06) else "brings"
        m0 = summ[summ["variant"] == model]
        out_share = float(m0["sink output share"].median())
        sink_line = (
            f" The first token carries a median {float(m0['sink share'].median()):.2f} of the weight but a median "
            f"{out_share:.3f} of ‖z‖ through its value vector (α₀‖x₀‖/‖z‖); setting that value vector to zero moves "
            f"the first passing N/L from {f0:.2f} to {f1:.2f}: it {moved} the critical N to about 0.06 L."
        )
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
        first.rename(columns=lambda c: c.replace("~", "\\~")).to_markdown(floatfmt=".3f"),
        "",
        summ[summ["variant"] == summ["variant"].iloc[0]][
            ["N", "N/L", "rows", "rho", "E1/d~", "lead ratio", "KS p (kv groups)"]
        ]
        .rename(columns=lambda c: c.replace("~", "\\~"))
        .to_markdown(index=False, floatfmt=".3g"),
    ]
    return "\n".join(lines)
