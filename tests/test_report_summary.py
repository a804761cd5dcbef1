"""attn_lib.report.summary: the summary in words grouped by the paper's figures, generated from the claims table, and
report.say, through which prose states a claim's outcome."""

from __future__ import annotations

import pandas as pd
import pytest

from attn_lib import report as R
from attn_lib.report.summary import figure_of


def _t(rows):
    cols = ["id", "where", "paper", "evidence", "verdict", "cause", "weak"]
    return pd.DataFrame([dict(zip(cols, r)) for r in rows], columns=cols)


DEC = _t(
    [
        ("fig2a-x", "Fig. 2a, §4.1", "“grows linearly”", "informative", "reproduced", "", ""),
        ("thm1-y", "Theorem 1, Fig. 2a–b", "“safe”", "guarantee", "holds", "", ""),
        ("fig2b-z", "Fig. 2b", "(same sentence)", "informative", "not reproduced", "d~ falls by 28%; more", ""),
        ("fig3-w", "Fig. 3, §4.4", "“saturates”", "informative", "reproduced", "", "why it is near-empty"),
        ("mh-v", "Discussion", "“three heads”", "informative", "n/a", "", ""),
    ]
)
ENC = DEC.assign(verdict=["reproduced", "holds", "not reproduced", "not reproduced", "n/a"]).assign(
    cause=["", "", "d~ falls by 12%; more", "gap 0.19", ""]
)


@pytest.mark.parametrize(
    "where, group",
    [
        ("Fig. 2a, §4.1", "Fig. 2"),
        ("Theorem 1, Fig. 2a–b", "Fig. 2"),
        ("Corollary 3, Fig. 4", "Fig. 4"),
        ("Discussion", "Discussion"),
    ],
)
def test_rows_are_grouped_by_the_papers_figure(where, group):
    assert figure_of(where) == group


def test_one_section_per_figure_with_the_papers_words_and_each_models_verdicts():
    md = R.summary_markdown({"decoder: a": DEC, "encoder: b": ENC}, links=False)
    heads = [line for line in md.splitlines() if line.startswith("### ")]
    assert [h.split(":")[0] for h in heads] == ["### Fig. 2", "### Fig. 3", "### Discussion"]
    fig2 = md[: md.index("### Fig. 3")]
    assert "**The paper:** “grows linearly”; “safe”." in fig2  # "(same sentence)" points back: left out
    assert (
        "**Found (decoder):** informative: 1 reproduced (`fig2a-x`), 1 not reproduced (`fig2b-z`); guarantee: 1 holds"
        in fig2
    )
    assert "`fig2b-z`: decoder: d~ falls by 28%; encoder: d~ falls by 12%" in fig2  # first clause of each cause
    fig3 = md[md.index("### Fig. 3") : md.index("### Discussion")]
    assert "near-empty test: 1 reproduced (`fig3-w`)" in fig3 and "`fig3-w`: encoder: gap 0.19" in fig3
    assert "n/a on this run (the table says why): `mh-v`" in md[md.index("### Discussion") :]


def test_the_summary_follows_the_table():
    """No verdict is typed: change one in the table and the summary changes with it."""
    flipped = DEC.assign(verdict=["not reproduced", "holds", "reproduced", "reproduced", "n/a"])
    md = R.summary_markdown(flipped, links=False)
    assert "2 reproduced (`fig2b-z`" not in md and "1 not reproduced (`fig2a-x`)" in md


def test_say_renders_a_row_from_the_table():
    assert R.say(DEC, "fig2b-z") == "the row `fig2b-z` (informative) reads **not reproduced**"
    assert R.say(DEC, "fig3-w") == "the row `fig3-w` (near-empty test) reads **reproduced**"
    with pytest.raises(ValueError, match="cid"):
        R.say(DEC, "no-such-id")


def test_bad_input_is_a_value_error():
    with pytest.raises(ValueError, match="tables"):
        R.summary_markdown({})
    with pytest.raises(ValueError, match="paper"):
        R.summary_markdown(DEC.drop(columns="paper"))


def test_a_group_without_a_title_is_named_once():
    """A row whose ``where`` names no figure and no titled group ("Lemma 2") gets a heading "### Lemma 2", not
    "### Lemma 2: Lemma 2"."""
    md = R.summary_markdown(_t([("lem2-x", "Lemma 2", "“bounded”", "guarantee", "holds", "", "")]), links=False)
    assert [line for line in md.splitlines() if line.startswith("### ")] == ["### Lemma 2"]
