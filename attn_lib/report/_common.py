"""What every part of :mod:`attn_lib.report` shares: provenance labels, display names, the curves of Fig. 4 and
Markdown tables."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pandas as pd

from ..layout import FIGURE_WIDTH_IN, MIN_FONT_PT, wrap_text


def meta_of(df: pd.DataFrame | None) -> dict:
    if df is None or len(df) == 0:
        return {}
    return {k: str(df[k].iloc[0]) for k in ("model", "text", "device") if k in df}


def label(meta: dict) -> str:
    """``"model: X · text: Y · device: Z"`` (the same format as :func:`attn_lib.provenance.provenance`)."""
    return " \u00b7 ".join(f"{k}: {meta[k]}" for k in ("model", "text", "device") if k in meta)


def who(meta: dict) -> str:
    """``"X · Y · Z"``: model, text and device of ``meta`` (``?`` where missing), a panel's subtitle."""
    return " · ".join(str(meta.get(k, "?")) for k in ("model", "text", "device"))


def footer(fig, text: str, width: float = FIGURE_WIDTH_IN, **kwargs) -> str:
    """``text`` wrapped to ``width`` inches as ``fig``'s grey footer at the bottom left; returns the wrapped text."""
    text = wrap_text(text, width, MIN_FONT_PT)
    fig.text(0.01, 0.005, text, fontsize=MIN_FONT_PT, color="0.4", **kwargs)
    return text


def records(df: pd.DataFrame) -> list[dict]:
    """``df`` as JSON-able records (one dict per row, as ``results.json`` stores a table)."""
    return json.loads(df.to_json(orient="records"))


def sensitivity_curves(df: pd.DataFrame) -> pd.DataFrame:
    """The paper's ``g(T, eps)``: max over (layer, head) of the row-mean, per (T, eps)."""
    return df.groupby(["T", "eps"])["g"].max().reset_index()


#: Display names of the expectation forms of the critical-N scan.
CRITICAL_FORM_NAMES = {"e1": "E1", "e2": "E2", "mc": "Monte Carlo"}


def form_name(form: Any) -> str:
    return CRITICAL_FORM_NAMES.get(str(form), str(form).upper())


#: How the KS samples are described (Reading the paper, §The critical N).
KS_SAMPLING = {"heads": "over all heads", "kv_groups": "one sample per key/value group"}


# ---- Markdown tables -------------------------------------------------------------------------------------------------
def md_text(x: Any) -> str:
    """``x`` (a claim's measured value or cause, plain text with MyST roles) safe as Markdown text: ``](`` outside
    code spans is written ``]\\(``, so that a formula such as ``E[d~](32)`` is not read as a link to ``32``."""
    parts = str(x).split("`")  # the odd parts are code spans (role targets): left as they are
    return "`".join(p.replace("](", "]\\(") if i % 2 == 0 else p for i, p in enumerate(parts))


def md_cell(x: Any) -> str:
    """``x`` as one Markdown table cell (:func:`md_text`): a line break becomes a space, ``|`` is escaped."""
    return md_text(x).replace("\n", " ").replace("|", "\\|")


def pipe_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A Markdown pipe table of ready-made cells (each its ``str``: no padding, ``|`` not escaped), without a final
    line break; ``ValueError`` when a row does not have one cell per header."""
    n = len(headers)
    if any(len(r) != n for r in rows):
        raise ValueError(
            f"rows must have {n} cells each, one per header (got lengths {sorted({len(r) for r in rows})})"
        )
    lines = ["| " + " | ".join(str(c) for c in r) + " |" for r in [headers, *rows]]
    return "\n".join([lines[0], "|" + "---|" * n, *lines[1:]])
