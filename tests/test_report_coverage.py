"""attn_lib.book.tables for chapter 5's measured multi-head coverage: the table against 1 - (1 - p)^H, the distribution
of heads needed, and the figure (labelled with model, text and device)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from attn_lib.book import tables

META = dict(model="toy-model", text="toy-text", device="cpu", L=64, N=4, n_heads=3, n_rows=60, permutations=8)
# two layers, three heads: coverage c(H) and the share of samples fully covered by H heads (a CDF)
COVERAGE = {0: [0.5, 0.75, 0.9], 1: [0.3, 0.55, 0.7]}
COVERED = {0: [0.1, 0.4, 0.7], 1: [0.0, 0.2, 0.5]}


def _table() -> pd.DataFrame:
    rows = []
    for layer in COVERAGE:
        for k in range(3):
            rows.append(
                dict(META, layer=layer, H=k + 1, coverage=COVERAGE[layer][k], covered=COVERED[layer][k], fraction=0.5)
            )
    return pd.DataFrame(rows)


class TestMultiheadCoverageTable:
    def test_measured_is_the_mean_over_layers(self):
        got = tables.multihead_coverage_table(_table(), 0.5)
        np.testing.assert_allclose(got["measured c(H)"], [0.4, 0.65, 0.8], rtol=1e-14)

    def test_range_over_layers(self):
        got = tables.multihead_coverage_table(_table(), 0.5)
        assert got["lowest layer"].tolist() == [0.3, 0.55, 0.7]
        assert got["highest layer"].tolist() == [0.5, 0.75, 0.9]

    def test_independent_heads_formula(self):
        got = tables.multihead_coverage_table(_table(), 0.8)
        np.testing.assert_allclose(got["1 − (1 − p)^H"], [0.8, 0.96, 0.992], rtol=1e-12)

    def test_fully_covered_is_the_mean_share(self):
        np.testing.assert_allclose(tables.multihead_coverage_table(_table(), 0.5)["fully covered"], [0.05, 0.3, 0.6])

    @pytest.mark.parametrize("p", [-0.1, 1.5, float("nan")])
    def test_bad_p_is_refused(self, p):
        with pytest.raises(ValueError, match="p"):
            tables.multihead_coverage_table(_table(), p)

    @pytest.mark.parametrize("df", [pd.DataFrame(), _table().drop(columns="covered"), "not a table"])
    def test_bad_tables_are_refused(self, df):
        with pytest.raises(ValueError, match="df"):
            tables.multihead_coverage_table(df, 0.5)


class TestHeadsNeededDistribution:
    def test_shares_are_the_steps_of_the_cdf(self):
        got = tables.heads_needed_distribution(_table())
        assert list(got.index) == ["1", "2", "3", "never"]
        np.testing.assert_allclose(got.to_numpy(), [0.05, 0.25, 0.3, 0.4], atol=1e-15)

    def test_shares_sum_to_one(self):
        assert tables.heads_needed_distribution(_table()).sum() == pytest.approx(1.0)


class TestFigureMultiheadCoverage:
    def test_labelled_with_model_text_and_device(self):
        fig = tables.figure_multihead_coverage(_table(), 0.5)
        texts = [t.get_text() for t in fig.texts]
        assert any(all(w in t for w in ("toy-model", "toy-text", "cpu")) for t in texts)

    def test_draws_the_measured_mean_and_the_formula(self):
        fig = tables.figure_multihead_coverage(_table(), 0.5)
        lines = {ln.get_label(): ln for ln in fig.axes[0].get_lines()}
        np.testing.assert_allclose(lines["measured, mean over layers"].get_ydata(), [0.4, 0.65, 0.8])
        formula = next(ln for name, ln in lines.items() if name.startswith("independent heads"))
        np.testing.assert_allclose(formula.get_ydata(), [0.5, 0.75, 0.875])

    def test_one_bar_per_head_count_and_never(self):
        fig = tables.figure_multihead_coverage(_table(), 0.5)
        heights = [b.get_height() for b in fig.axes[1].patches]
        np.testing.assert_allclose(heights, [0.05, 0.25, 0.3, 0.4], atol=1e-15)

    def test_bad_p_is_refused(self):
        with pytest.raises(ValueError, match="p"):
            tables.figure_multihead_coverage(_table(), 2.0)
