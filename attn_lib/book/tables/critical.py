"""Chapter 6's table of the rows behind each critical N."""

from __future__ import annotations

import pandas as pd

from attn_lib.claims.diagnosis import critical_rows
from attn_lib.claims.stats import valid_ks_sampling
from attn_lib.report._common import form_name

__all__ = ["critical_rows_table"]


def critical_rows_table(trace: pd.DataFrame, summary: pd.DataFrame, sampling: str | None = None) -> pd.DataFrame:
    """:func:`~attn_lib.claims.critical_rows` as one row per ``L``: ``N*`` and the rows behind it for each form, and
    the Monte-Carlo relative standard error at its ``N*``, for one KS sampling (default: the valid one).

    Parameters
    ----------
    trace, summary : pandas.DataFrame
        As for :func:`~attn_lib.claims.critical_rows`.
    sampling : {"heads", "kv_groups"}, optional

    Returns
    -------
    pandas.DataFrame
        Index ``L``; columns ``N* (E1)``, ``rows (E1)``, ... per form, and ``MC rel. SE at N*`` when the Monte-Carlo
        form ran.
    """

    rows = critical_rows(trace, summary)
    sampling = valid_ks_sampling(summary) if sampling is None else sampling
    rows = rows[rows["sampling"] == sampling]
    out = pd.DataFrame(index=sorted(rows["L"].unique()))
    out.index.name = "L"
    for form, g in rows.groupby("form", sort=False):
        g = g.set_index("L")
        name = form_name(form)
        out[f"N* ({name})"] = g["n_star"]
        out[f"rows ({name})"] = g["rows"]
        if form == "mc":
            out["MC rel. SE at N*"] = g["mc_rel_se"]
    return out
