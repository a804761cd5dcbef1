"""attn_lib.report and attn_lib.book.tables, the reproduction report: setting differences, the claim table, its Markdown and the run times."""

from __future__ import annotations

import pandas as pd
import pytest
from test_report import _results

from attn_lib import claims
from attn_lib import report as R
from attn_lib.book import tables

STANDIN = "SmolLM2-135M-Instruct (offline stand-in for gpt2)"


class TestSettingDifferences:
    def test_the_papers_setting_has_none(self):
        assert tables.setting_differences("gpt2", "war-and-peace") == []

    def test_the_stand_in_names_architecture_quantisation_and_gqa(self):
        (model, text) = tables.setting_differences(STANDIN, "botchan", n_heads=9, n_kv_heads=3)
        assert model.startswith("model:") and "RoPE" in model and "Q4_1" in model
        assert "9 query heads share 3 key/value heads" in model
        assert text == "text: botchan, not War and Peace"

    def test_another_gpt2_size_is_a_difference(self):
        assert tables.setting_differences("gpt2-medium", "war-and-peace") == ["model: gpt2-medium, not GPT-2 small"]


class TestReproductionTable:
    def test_one_row_per_claim_id_with_cause_and_section(self):
        results = _results(linear=False)
        vt, table = claims.verdicts(results), R.reproduction_table(results)
        assert list(table["id"]) == list(vt["id"]) == list(claims.CLAIMS)
        assert set(table.columns) >= {"id", "claim", "paper", "evidence", "measured", "verdict", "rule", "cause"}
        assert table["section"].str.startswith("app-").all()

    def test_the_critical_n_has_a_row_per_reading_with_its_section(self):
        table = R.reproduction_table(_results(ratio=0.3)).set_index("id")
        for cid in ("fig2c-critical-e1", "fig2c-critical-mc"):
            assert table.loc[cid, "section"] == "app-critical-n"
        assert table.loc["fig2c-critical-e1", "verdict"] == "not reproduced" and table.loc["fig2c-critical-e1", "cause"]
        # the Monte-Carlo row needs its seeds (critical_n_mc_seeds), which these results lack
        assert table.loc["fig2c-critical-mc", "verdict"] == "n/a"

    def test_causes_where_the_verdict_differs(self):
        table = R.reproduction_table(_results(linear=False))
        failed = table["verdict"].isin(["not reproduced", "differs (forced)", "no verdict"])
        assert failed.any() and table.loc[failed, "cause"].str.len().gt(0).all()

    def test_thresholds_reach_the_rules(self):
        res = _results(ratio=0.2)
        assert R.reproduction_table(res).set_index("id").loc["fig2c-critical-e1", "verdict"] == "not reproduced"
        t = R.reproduction_table(res, thresholds={"crit_ratio_factor": 4.0}).set_index("id")
        assert t.loc["fig2c-critical-e1", "verdict"] == "reproduced"


class TestReproductionMarkdown:
    def test_keeps_every_row_to_four_cells(self):
        md = tables.reproduction_markdown(R.reproduction_table(_results(linear=False)))
        rows = [line for line in md.splitlines() if line.startswith("| ")]
        unescaped = [line.replace("\\|", "") for line in rows]
        assert len(rows) == 1 + len(claims.CLAIMS)
        assert all(line.count("|") == 5 for line in unescaped), rows[:3]

    def test_one_line_cause_is_the_first_clause(self):
        table = R.reproduction_table(_results(linear=False))
        table.loc[0, "cause"] = "first clause; second clause"
        md = tables.reproduction_markdown(table)
        assert "| first clause |" in md and "second clause" not in md

    def test_plain_roles_without_links(self):
        table = R.reproduction_table(_results(linear=False))
        table.loc[0, "cause"] = "bounded ({prf:ref}`prop-random-bounded`)"
        assert "{prf:ref}`prop-random-bounded`" in tables.reproduction_markdown(table)
        assert "bounded (prop-random-bounded)" in tables.reproduction_markdown(table, links=False)

    def test_needs_the_table_columns(self):
        with pytest.raises(ValueError, match="evidence"):
            tables.reproduction_markdown(pd.DataFrame({"claim": ["x"]}))


class TestClaimDetailsMarkdown:
    def test_one_dropdown_per_claim_with_its_appendix_link(self):
        md = R.claim_details_markdown(R.reproduction_table(_results(linear=False)))
        assert md.count(":::{dropdown}") == len(claims.CLAIMS)
        assert "{ref}`Reading the paper <app-critical-n>`" in md

    def test_plain_markdown_uses_details(self):
        md = R.claim_details_markdown(R.reproduction_table(_results(linear=False)), links=False)
        assert md.count("<details>") == len(claims.CLAIMS) and "{ref}" not in md and "{prf:ref}" not in md

    def test_fails_if_only_for_informative_rows(self):
        md = R.claim_details_markdown(R.reproduction_table(_results()), links=False)
        blocks = dict(b.split("</summary>", 1) for b in md.split("<details><summary>") if "</summary>" in b)
        e2 = next(v for k, v in blocks.items() if k.startswith("thm1-bound-holds:"))
        e1 = next(v for k, v in blocks.items() if k.startswith("fig2a-dtilde-linear:"))
        assert "Fails on (an outcome" not in e2 and "Rests on:** thm-distance" in e2
        assert "Fails on (an outcome" in e1

    def test_several_models_each_get_their_measured_line(self):
        a, b = R.reproduction_table(_results()), R.reproduction_table(_results(ratio=0.3))
        md = R.claim_details_markdown({"decoder: x": a, "encoder: y": b}, links=False)
        assert md.count("**Measured (decoder: x):**") == len(claims.CLAIMS)
        assert md.count("**Measured (encoder: y):**") == len(claims.CLAIMS)


class TestRuntimeTable:
    def test_reads_the_timing_kept_with_each_table(self):
        results = _results()
        for name in tables.PAPER_TABLE1:
            results[name].attrs["timing"] = {
                "analysis_s": 2.0,
                "shared_pass_s": 3.0,
                "device": "cpu",
                "threads": 2,
                "computed_at": "now",
            }
        times = tables.runtime_table(results)
        assert list(times.index) == [tables.PAPER_TABLE1[n][0] for n in tables.PAPER_TABLE1]
        assert times.loc["Algorithm 3", "paper (s)"] == 17 * 3600 + 4 * 60
        assert times.loc["Algorithm 5", "speed-up"] == pytest.approx(60 / 5.0)

    def test_tables_without_timing_are_left_out(self):
        assert tables.runtime_table(_results()).empty


@pytest.mark.parametrize("fn", [R.reproduction_table, tables.runtime_table])
@pytest.mark.parametrize("bad", [None, [], "results", pd.DataFrame()])
def test_results_must_be_the_run_all_dict(fn, bad):
    with pytest.raises(ValueError, match="results must be the dict"):
        fn(bad)
