"""Tests for chapter 5's block of attn_lib.book.tables: the normaliser swap's summary, paragraph and figure."""

from __future__ import annotations

import pandas as pd
import pytest
from conftest import figure_provenance

from attn_lib.book import tables

META = {"model": "tiny (random init) on cpu", "model_id": "tiny", "text": "bytes, first 8 tokens", "device": "cpu"}
LAYERS = pd.DataFrame(
    [
        {"normaliser": "softmax (model)", "layer": 0, "entropy": 1.0, "max": 0.5, "support": 8.0, **META},
        {"normaliser": "softmax (model)", "layer": 1, "entropy": 2.0, "max": 0.3, "support": 8.0, **META},
        {"normaliser": "sparsemax", "layer": 0, "entropy": 0.2, "max": 0.9, "support": 1.0, **META},
        {"normaliser": "sparsemax", "layer": 1, "entropy": 0.4, "max": 0.7, "support": 3.0, **META},
    ]
)
LOSS = {"softmax (model)": 3.25, "sparsemax": 6.5}


class TestNormaliserSwapSummary:
    def test_means_over_layers_in_run_order(self):
        got = tables.normaliser_swap_summary(LAYERS, LOSS)
        assert list(got.index) == ["softmax (model)", "sparsemax"]
        assert got.loc["softmax (model)", "entropy"] == pytest.approx(1.5)
        assert got.loc["sparsemax", "support"] == pytest.approx(2.0)

    def test_adds_the_loss(self):
        assert tables.normaliser_swap_summary(LAYERS, LOSS)["next-token loss"].tolist() == [3.25, 6.5]

    def test_rejects_a_frame_without_the_statistics(self):
        with pytest.raises(ValueError, match="layers"):
            tables.normaliser_swap_summary(LAYERS.drop(columns="entropy"), LOSS)


class TestNormaliserSwapMarkdown:
    def test_names_model_and_text(self):
        text = tables.normaliser_swap_markdown(LAYERS, LOSS)
        assert text.startswith("**Computed (tiny (random init) on cpu; bytes, first 8 tokens).**")

    def test_reports_the_computed_numbers(self):
        text = tables.normaliser_swap_markdown(LAYERS, LOSS)
        assert "Entropy: softmax (model) 1.50, sparsemax 0.30." in text
        assert "Largest weight: softmax (model) 0.40, sparsemax 0.80." in text
        assert "Next-token loss (nats): softmax (model) 3.25, sparsemax 6.50." in text


class TestFigureNormaliserSwap:
    def test_one_line_per_normaliser_in_each_panel(self):
        fig = tables.figure_normaliser_swap(LAYERS)
        assert len(fig.axes) == 3
        for ax, col in zip(fig.axes, ["entropy", "max", "support"]):
            sparse = next(ln for ln in ax.lines if ln.get_label() == "sparsemax")
            assert list(sparse.get_ydata()) == LAYERS.query("normaliser == 'sparsemax'")[col].tolist()

    def test_names_model_text_and_device(self):
        label = figure_provenance(tables.figure_normaliser_swap(LAYERS))
        assert label == "model: tiny (random init) on cpu · text: bytes, first 8 tokens · device: cpu"

    def test_title_names_the_model(self):
        assert "inside tiny:" in tables.figure_normaliser_swap(LAYERS)._suptitle.get_text()

    def test_rejects_an_empty_frame(self):
        with pytest.raises(ValueError, match="layers"):
            tables.figure_normaliser_swap(LAYERS.iloc[:0])


class TestNormaliserSwapFindings:
    def test_ratio_of_the_largest_weight_to_a_uniform_row(self):
        # softmax (model): mean max 0.4 over layers; a uniform row's mean max 0.1 -> 4.0 times
        assert "mean largest weight of a row is 0.40, 4.0 times that of a uniform row (0.100)" in (
            tables.normaliser_swap_findings(LAYERS, LOSS, 0.1)
        )

    def test_support_as_a_fraction_of_the_baseline(self):
        # sparsemax: mean support 2 of the baseline's 8 tokens
        assert "(8 tokens): sparsemax 25.0%." in tables.normaliser_swap_findings(LAYERS, LOSS, 0.1)

    def test_says_the_loss_rises_when_every_swap_raises_it(self):
        assert "rises under every swapped normaliser" in tables.normaliser_swap_findings(LAYERS, LOSS, 0.1)

    def test_names_a_swap_that_does_not_raise_the_loss(self):
        text = tables.normaliser_swap_findings(LAYERS, {"softmax (model)": 3.25, "sparsemax": 3.0}, 0.1)
        assert "does not rise under sparsemax" in text and "rises under every" not in text

    @pytest.mark.parametrize("bad", [0.0, -0.1, 1.5, float("nan")])
    def test_rejects_a_uniform_max_outside_the_unit_interval(self, bad):
        with pytest.raises(ValueError, match="uniform_max"):
            tables.normaliser_swap_findings(LAYERS, LOSS, bad)

    def test_rejects_a_loss_without_every_normaliser(self):
        with pytest.raises(ValueError, match="loss"):
            tables.normaliser_swap_findings(LAYERS, {"softmax (model)": 3.25}, 0.1)

    def test_rejects_a_run_without_a_swapped_normaliser(self):
        with pytest.raises(ValueError, match="swapped"):
            tables.normaliser_swap_findings(LAYERS.query("normaliser == 'softmax (model)'"), LOSS, 0.1)
