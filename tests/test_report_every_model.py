"""report.md carries every model's claims table, critical-N diagnosis and details (issue 34, item 3), and the
side-by-side table has the agree column that report.md describes."""

from __future__ import annotations

from test_claims import _realistic

from attn_lib import claims
from attn_lib import report as R
from attn_lib.report.output import markdown_report


def _md():
    res = _realistic()
    enc = dict(_realistic())
    return markdown_report(
        res,
        verdict_table=claims.verdicts(res),
        compare={"encoder: e": {"results": enc, "table": claims.verdicts(enc)}},
        label="decoder: d",
    )


def test_every_model_has_its_table_diagnosis_and_details():
    md = _md()
    assert "### decoder: d" in md and "### encoder: e" in md
    assert "The critical-N diagnosis on **decoder: d**" in md and "The critical-N diagnosis on **encoder: e**" in md
    for who in ("decoder: d", "encoder: e"):
        assert f"- **Measured ({who}):**" in md
    assert md.index("## Summary") < md.index("## Claims against measurements") < md.index("## Each claim in detail")


def test_near_empty_rows_are_labelled():
    md = _md()
    assert "| informative (near-empty test) |" in md and "| near-empty test |" in md
    assert "- **Near-empty test** (counted apart from the informative rows):" in md


def test_the_side_by_side_has_the_agree_column_it_describes():
    vt = claims.verdicts(_realistic())
    other = vt.assign(verdict=vt["verdict"].where(vt["id"] != "fig3-declines", "not reproduced"))
    md = R.side_by_side_markdown(R.side_by_side({"decoder: d": vt, "encoder: e": other}), links=False)
    head, _, *rows = md.splitlines()
    assert head.split(" | ")[5] == "agree"
    row = next(r for r in rows if r.startswith("| fig3-declines |"))
    assert row.split(" | ")[5] == "**no**"
