"""attn_lib.report, the reproduction report: setting differences, the claim table, its Markdown and the run times."""

from __future__ import annotations

import pandas as pd
import pytest
from test_report import _results

from attn_lib import report as R

STANDIN = "SmolLM2-135M-Instruct (offline stand-in for gpt2)"


class TestSettingDifferences:
    def test_the_papers_setting_has_none(self):
        assert R.setting_differences("gpt2", "war-and-peace") == []

    def test_the_stand_in_names_architecture_quantisation_and_gqa(self):
        (model, text) = R.setting_differences(STANDIN, "botchan", n_heads=9, n_kv_heads=3)
        assert model.startswith("model:") and "RoPE" in model and "Q4_1" in model
        assert "9 query heads share 3 key/value heads" in model
        assert text == "text: botchan, not War and Peace"

    def test_another_gpt2_size_is_a_difference(self):
        assert R.setting_differences("gpt2-medium", "war-and-peace") == ["model: gpt2-medium, not GPT-2 small"]


class TestReproductionTable:
    def test_one_row_per_verdict_with_reason_and_section(self):
        results = _results(linear=False)
        vt, table = R.verdicts(results), R.reproduction_table(results)
        assert list(table["claim"]) == list(vt["claim"])
        assert set(table.columns) >= {"claim", "paper", "measured", "verdict", "rule", "reason", "section"}
        assert table["section"].str.startswith("app-").all()

    def test_the_critical_n_has_a_row_per_reading_with_its_section(self):
        table = R.reproduction_table(_results(ratio=0.3)).set_index("claim")
        for reading in ("E1", "Monte Carlo"):
            row = table.loc[f"critical N ≈ 0.06·L (KS, α=0.01) — reading {reading}"]
            assert row["section"] == "app-critical-n" and row["verdict"] == "not reproduced" and row["reason"]

    def test_reasons_only_where_the_verdict_is_not_reproduced(self):
        table = R.reproduction_table(_results(linear=False))
        failed = table["verdict"] == "not reproduced"
        assert failed.any() and table.loc[failed, "reason"].str.len().gt(0).all()
        assert (table.loc[table["verdict"] == "reproduced", "reason"] == "").all()

    def test_markdown_keeps_every_row_to_five_cells(self):
        md = R.reproduction_markdown(R.reproduction_table(_results(linear=False)))
        rows = [line for line in md.splitlines() if line.startswith("| ")]
        unescaped = [line.replace("\\|", "") for line in rows]
        assert all(line.count("|") == 6 for line in unescaped), rows[:3]
        assert "{ref}`appendix <app-" in md

    def test_markdown_needs_the_table_columns(self):
        with pytest.raises(ValueError, match="section"):
            R.reproduction_markdown(pd.DataFrame({"claim": ["x"]}))


class TestRuntimeTable:
    def test_reads_the_timing_kept_with_each_table(self):
        results = _results()
        for name in R.PAPER_TABLE1:
            results[name].attrs["timing"] = {
                "analysis_s": 2.0,
                "shared_pass_s": 3.0,
                "device": "cpu",
                "threads": 2,
                "computed_at": "now",
            }
        times = R.runtime_table(results)
        assert list(times.index) == [R.PAPER_TABLE1[n][0] for n in R.PAPER_TABLE1]
        assert times.loc["Algorithm 3", "paper (s)"] == 17 * 3600 + 4 * 60
        assert times.loc["Algorithm 5", "speed-up"] == pytest.approx(60 / 5.0)

    def test_tables_without_timing_are_left_out(self):
        assert R.runtime_table(_results()).empty


@pytest.mark.parametrize("fn", [R.reproduction_table, R.runtime_table])
@pytest.mark.parametrize("bad", [None, [], "results", pd.DataFrame()])
def test_results_must_be_the_run_all_dict(fn, bad):
    with pytest.raises(ValueError, match="results must be the dict"):
        fn(bad)
