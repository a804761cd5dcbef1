r"""The statistics of the critical-N diagnosis (chapter 6, ``prop-e1-crossing``; Reading the paper, §The critical N),
read by the rules of Fig. 2c: they turn what :func:`attn_lib.experiments.critical_n_diagnosis` measures (the
quantities that decide where the KS test between d~ and E1 can pass) into numbers. Tables and figure:
:mod:`attn_lib.report.critical`."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .._validation import check_choice, check_int, check_probability
from .stats import require_columns

_DIAG_COLUMNS = ("variant", "L", "N", "layer", "head", "kv_group", "d_tilde", "e1", "lead_d_tilde", "lead_e1")


def _ks(a, b) -> float:
    from scipy.stats import ks_2samp  # imported only when the test runs

    return float(ks_2samp(np.asarray(a, float), np.asarray(b, float)).pvalue)


def with_sampling(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with a ``sampling`` column (``"heads"`` for a table from before grouped-query attention)."""
    return df if "sampling" in df else df.assign(sampling="heads")


def _quantile(g: pd.DataFrame, col: str, q: float | None = None) -> float:
    """The median (or the ``q`` quantile) over heads of an optional column; NaN without it."""
    return math.nan if col not in g else float(g[col].median() if q is None else g[col].quantile(q))


def diagnosis_summary(diag: pd.DataFrame) -> pd.DataFrame:
    r"""What controls the critical N, from :func:`attn_lib.experiments.critical_n_diagnosis`'s ``diag``: one row per
    ``(variant, N)`` in the table's order with ``L, N, N/L``, ``heads``, ``rows`` (median rows per head), ``rho``
    (median over heads of each head's median :math:`\|s_N\|/\|z\|`), ``rho q25``, ``rho q75``, ``E1/d~`` (ratio of
    the head means, what the KS test compares), ``lead ratio`` (the same for the leading terms
    :math:`(t-N)p\|z\|` and :math:`(t-N)\|s_N\|`), ``KS p (heads)``, ``KS p (kv groups)`` (one sample per key/value
    group: the mean of its heads), ``sink share`` (the first token's mean weight) and ``sink output share`` (medians over heads) and ``bound
    violations`` (rows, summed over heads)."""
    require_columns(diag, "diag", _DIAG_COLUMNS)
    rows = []
    for variant in dict.fromkeys(diag["variant"]):
        rows += [_summary_row(variant, N, g) for N, g in diag[diag["variant"] == variant].groupby("N", sort=True)]
    return pd.DataFrame(rows)


def _summary_row(variant, N, g: pd.DataFrame) -> dict:
    grp = g.groupby(["layer", "kv_group"])[["d_tilde", "e1"]].mean()  # one sample per key/value group
    L = int(g["L"].iloc[0])
    row = {"variant": variant, "L": L, "N": int(N), "N/L": N / L, "heads": len(g), "rows": _quantile(g, "n_rows")}
    row |= {k: _quantile(g, "rho_median", q) for k, q in (("rho", None), ("rho q25", 0.25), ("rho q75", 0.75))}
    row["E1/d~"] = float(g["e1"].mean() / g["d_tilde"].mean())
    row["lead ratio"] = float(g["lead_e1"].mean() / g["lead_d_tilde"].mean())
    row |= {"KS p (heads)": _ks(g["d_tilde"], g["e1"]), "KS p (kv groups)": _ks(grp["d_tilde"], grp["e1"])}
    row |= {"sink share": _quantile(g, "sink_share"), "sink output share": _quantile(g, "sink_output_share")}
    row["bound violations"] = int(g["bound_violations"].sum()) if "bound_violations" in g else 0
    return row


def diagnosis_first_pass(summary: pd.DataFrame, alpha: float = 0.01, sampling: str = "kv groups") -> pd.DataFrame:
    """Per counterfactual of :func:`diagnosis_summary`'s ``summary`` (index ``variant``): ``first N/L``, the first grid
    point where the KS test (``sampling``: ``"kv groups"`` or ``"heads"``) passes, ``p >= alpha`` with ``alpha`` in
    (0, 1) (NaN when none does); ``last failing N/L``, the grid point before it (the critical N lies in between);
    ``rho at 0.06 L`` and ``E1/d~ at 0.06 L``, at the grid point nearest 0.06 L."""
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
    :math:`(t-N)\|s_N\|` in the last row (``t = L``, an int >= 3) at ``N = round(fraction L)``, ``fraction`` in (0, 1):
    ``p = N/(L-1)``. A heuristic scale: shorter rows have a larger ``p``, and the KS test can pass before the ratio of
    the means reaches 1."""
    L = check_int("L", L, low=3)
    f = check_probability("fraction", fraction, open_low=True, open_high=True)
    return max(1, round(f * L)) / (L - 1)


def critical_rows(trace: pd.DataFrame, summary: pd.DataFrame) -> pd.DataFrame:
    """The rows behind each critical ``N`` of ``summary`` (:func:`attn_lib.experiments.critical_n_summary` of the
    :func:`attn_lib.experiments.critical_n` ``trace``): ``L, form, sampling, n_star, censored, rows`` (query rows per
    head at ``N*``, those with ``t >= N* + 1``) and ``mc_rel_se`` (largest relative standard error of a Monte-Carlo
    sample value at ``N*``; NaN for the other forms)."""
    require_columns(trace, "trace", ("L", "N", "form", "n_rows"))
    require_columns(summary, "summary", ("L", "form", "n_star", "censored"))
    tr, sm = with_sampling(trace), with_sampling(summary)
    out = []
    for r in sm.itertuples():
        hit = tr[(tr["L"] == r.L) & (tr["form"] == r.form) & (tr["sampling"] == r.sampling) & (tr["N"] == r.n_star)]
        se = float(hit["mc_rel_se"].iloc[0]) if len(hit) and "mc_rel_se" in hit else math.nan
        rows = int(hit["n_rows"].iloc[0]) if len(hit) else 0
        out.append((int(r.L), r.form, r.sampling, int(r.n_star), bool(r.censored), rows, se))
    return pd.DataFrame(out, columns=["L", "form", "sampling", "n_star", "censored", "rows", "mc_rel_se"])
