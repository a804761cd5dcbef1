"""The claims' texts in the book's and report.md's Markdown: a formula such as ``E[d~](32)`` in a measured value or a
cause is text, not a link (the chapter-6 build once warned "cross-reference target not found: '32'")."""

from __future__ import annotations

import pandas as pd
import pytest
from markdown_it import MarkdownIt

from attn_lib import report as R
from attn_lib.report._common import md_text

CAUSE = "from E[d~](32) = 9.94 that caps log(E[d~](1024)/E[d~](32)) ({prf:ref}`prop-random-bounded`); more"
ROW = dict(
    id="fig2a-mc-linear",
    where="Fig. 2a",
    claim="grows linearly",
    paper="“grows linearly”",
    reading="the Monte-Carlo E[d~]",
    evidence="informative",
    basis="",
    rule="exponent in [0.8, 1.2]",
    fails_if="an exponent below 0.8",
    section="app-thm1",
    weak="",
    verdict="not reproduced",
    measured="E[d~](1024) = 12.1",
    cause=CAUSE,
)


def _links(md: str) -> list[str]:
    tokens = MarkdownIt("commonmark").enable("table").parse(md)
    return [t.attrs.get("href") for tok in tokens for t in (tok.children or []) if t.type == "link_open"]


@pytest.mark.parametrize("links", [True, False])
def test_a_formula_with_brackets_is_not_a_link(links):
    table = pd.DataFrame([ROW])
    both = R.side_by_side({"decoder: a": table})
    for md in (
        R.summary_markdown({"decoder: a": table}, links=links),
        R.claim_details_markdown({"decoder: a": table}, links=links),
        R.side_by_side_markdown(both),
    ):
        assert "E[d~]" in md
        assert _links(md) == [], md


def test_md_text_escapes_only_outside_code_spans():
    assert md_text("E[d~](32)") == "E[d~]\\(32)"
    assert md_text("see `a](b` and E[x](1)") == "see `a](b` and E[x]\\(1)"
    assert md_text("no brackets") == "no brackets"
    # what the check above would have caught: the unescaped text is a link
    assert _links("from E[d~](32) = 9.94") == ["32"]
