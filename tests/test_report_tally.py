"""attn_lib.report.tally_markdown: the verdicts counted apart by kind of evidence, one column per model."""

from __future__ import annotations

import pandas as pd
import pytest

from attn_lib import report as R


def _t(rows):
    return pd.DataFrame(rows, columns=["evidence", "verdict"])


def test_counts_each_kind_apart_per_model():
    a = _t([("informative", "reproduced"), ("informative", "not reproduced"), ("forced", "agrees (forced)")])
    b = _t([("informative", "reproduced"), ("guarantee", "holds")])
    md = R.tally_markdown({"decoder: x": a, "encoder: y": b}).splitlines()
    assert md[0] == "| kind of evidence | decoder | encoder |"
    rows = {line.split(" | ")[0].strip("| "): line for line in md[2:]}
    assert "1 not reproduced, 1 reproduced | 1 reproduced" in rows["informative"]
    assert rows["forced"].endswith("| 1 agrees (forced) | 0 |")
    assert rows["guarantee"].endswith("| 0 | 1 holds |")


def test_needs_a_table():
    with pytest.raises(ValueError, match="tables"):
        R.tally_markdown({})
