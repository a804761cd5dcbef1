"""Tests for chapter 5's block of attn_lib.report: the normaliser swap's summary, paragraph and figure."""

from __future__ import annotations

import pandas as pd
import pytest

from attn_lib import report, widgets

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
        got = report.normaliser_swap_summary(LAYERS, LOSS)
        assert list(got.index) == ["softmax (model)", "sparsemax"]
        assert got.loc["softmax (model)", "entropy"] == pytest.approx(1.5)
        assert got.loc["sparsemax", "support"] == pytest.approx(2.0)

    def test_adds_the_loss(self):
        assert report.normaliser_swap_summary(LAYERS, LOSS)["next-token loss"].tolist() == [3.25, 6.5]

    def test_rejects_a_frame_without_the_statistics(self):
        with pytest.raises(ValueError, match="layers"):
            report.normaliser_swap_summary(LAYERS.drop(columns="entropy"), LOSS)


class TestNormaliserSwapMarkdown:
    def test_names_model_and_text(self):
        text = report.normaliser_swap_markdown(LAYERS, LOSS)
        assert text.startswith("**Computed (tiny (random init) on cpu; bytes, first 8 tokens).**")

    def test_reports_the_computed_numbers(self):
        text = report.normaliser_swap_markdown(LAYERS, LOSS)
        assert "Entropy: softmax (model) 1.50, sparsemax 0.30." in text
        assert "Largest weight: softmax (model) 0.40, sparsemax 0.80." in text
        assert "Next-token loss (nats): softmax (model) 3.25, sparsemax 6.50." in text


class TestFigureNormaliserSwap:
    def test_one_line_per_normaliser_in_each_panel(self):
        fig = report.figure_normaliser_swap(LAYERS)
        assert len(fig.axes) == 3
        for ax, col in zip(fig.axes, ["entropy", "max", "support"]):
            sparse = next(ln for ln in ax.lines if ln.get_label() == "sparsemax")
            assert list(sparse.get_ydata()) == LAYERS.query("normaliser == 'sparsemax'")[col].tolist()

    def test_names_model_text_and_device(self):
        label = widgets.figure_provenance(report.figure_normaliser_swap(LAYERS))
        assert label == "model: tiny (random init) on cpu · text: bytes, first 8 tokens · device: cpu"

    def test_title_names_the_model(self):
        assert "inside tiny:" in report.figure_normaliser_swap(LAYERS)._suptitle.get_text()

    def test_rejects_an_empty_frame(self):
        with pytest.raises(ValueError, match="layers"):
            report.figure_normaliser_swap(LAYERS.iloc[:0])
