"""The multi-head row (issue 34, item 2): its numbers (one statistic of p, one head's coverage against its own p, the
shortfall split into measured parts), and ``reproduce`` running chapter 5's experiment so that the row has a verdict."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from conftest import small_profile

from attn_lib import claims
from attn_lib.claims.multihead import coverage_decomposition


def _cov(p: float, c1: float, c_of_H, layers=(0, 1), heads=4) -> pd.DataFrame:
    rows = []
    for layer in layers:
        for H in range(1, heads + 1):
            c = c1 if H == 1 else c_of_H(H)
            rows.append(dict(layer=layer, H=H, n_heads=heads, coverage=c, covered=c, fraction=p, n_rows=10))
    return pd.DataFrame(rows)


class TestDecomposition:
    def test_independent_heads_aligned_with_the_target_leave_only_p(self):
        p = 0.6
        d = coverage_decomposition(_cov(p, p, lambda H: 1 - (1 - p) ** H))
        assert d["p"] == pytest.approx(p) and d["share"] == pytest.approx(1.0)
        assert d["from_share"] == pytest.approx(0, abs=1e-12) and d["from_overlap"] == pytest.approx(0, abs=1e-12)
        assert d["from_p"] == pytest.approx(0.99 - (1 - 0.4**3))

    def test_the_parts_sum_to_the_shortfall(self):
        d = coverage_decomposition(_cov(0.7, 0.35, lambda H: 0.35 + 0.1 * (H - 1)))
        assert d["share"] == pytest.approx(0.5)
        assert d["from_p"] + d["from_share"] + d["from_overlap"] == pytest.approx(0.99 - d["c3"])
        assert d["from_overlap"] == pytest.approx(1 - 0.65**3 - 0.55)

    def test_p_is_the_mean_over_layers_of_each_layers_fraction(self):
        df = pd.concat([_cov(0.5, 0.4, lambda H: 0.5, layers=(0,)), _cov(0.7, 0.4, lambda H: 0.5, layers=(1,))])
        assert coverage_decomposition(df)["p"] == pytest.approx(0.6)


class TestRow:
    def test_a_shortfall_quotes_each_measured_part(self):
        res = {"multihead_coverage": _cov(0.7, 0.35, lambda H: 0.35 + 0.1 * (H - 1))}
        row = claims.verdicts(res, ids=["multihead-rule-model"]).iloc[0]
        assert row["verdict"] == "not reproduced"
        assert "p = 0.700" in row["measured"] and "c(1) = 0.350" in row["measured"] and "share 0.50" in row["measured"]
        for part in (
            "= +0.017 (p = 0.700, not 0.8)",
            "1 − (1 − p)³ = 0.973",
            "1 − (1 − c(1))³ = 0.725",
            "+0.175 (overlap",
        ):
            assert part in row["cause"], part
        assert "cause not identified" not in row["cause"]

    def test_full_coverage_is_reproduced(self):
        res = {"multihead_coverage": _cov(0.9, 0.9, lambda H: 0.995)}
        assert claims.verdicts(res, ids=["multihead-rule-model"])["verdict"].iloc[0] == "reproduced"


def test_reproduce_gives_the_multihead_row_a_verdict(tmp_path, tmp_cache, offline, monkeypatch, tiny_gpt2):
    """``reproduce`` runs chapter 5's coverage (cached like the other experiments): the row is no longer n/a."""
    from attn_lib import experiments as E
    from attn_lib.experiments.jobs import run_reproduce

    tiny = small_profile(
        "quick",
        lengths=(16, 32),
        L=32,
        N=3,
        n_values=(1, 3),
        sep_n_values=(1, 2),
        temperatures=(0.01, 1.0),
        eps_values=(0.1,),
        mc=(4, 4),
        stage=31,
        crit_fraction=1.0,
    )
    monkeypatch.setitem(E.PROFILES, "quick", tiny)
    out = run_reproduce("gpt2", profile="quick", out=tmp_path / "a", handle=tiny_gpt2, formats=("png",))
    row = out["verdicts"].set_index("id").loc["multihead-rule-model"]
    assert row["verdict"] in ("reproduced", "not reproduced"), row["measured"]
    assert "multihead_coverage" in out["timings"]
    params = E.coverage.report_coverage_params(tiny_gpt2, tiny)
    assert (params.L, params.N, params.permutations) == (32, 16, 8)
    from attn_lib import corpus
    from attn_lib.cache import ResultCache

    key = E.passes.cache_key(params.name, tiny_gpt2, corpus.load_text("war-and-peace"), start=0, **params.key_params())
    assert key in ResultCache()  # cached like the others: a second run reads it back
    md = (tmp_path / "a" / "report.md").read_text()
    assert "multihead-rule-model" in md and not math.isnan(float(row["measured"].split("c(3) = ")[1][:5]))


def test_the_chapters_run_the_same_coverage():
    """chapter.reproduction_results (chapter 6) and reproduce judge the same run: same N and head orders."""
    from attn_lib.book import chapter
    from attn_lib.experiments import coverage

    assert (chapter.COVERAGE_N, chapter.COVERAGE_ORDERS) == (coverage.REPORT_N, coverage.REPORT_ORDERS)


def test_gpt2_variants_row_says_how_to_test_it_offline():
    row = claims.verdicts({}, ids=["gpt2-variants-same-trends"]).iloc[0]
    assert row["verdict"] == "n/a" and "--compare gpt2-medium" in row["measured"]
