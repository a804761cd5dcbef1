"""Tests for attn_lib.book.toy.multihead: coverage, the remedies on synthetic rows, sensitivity, the slider figure and
the normaliser swap of chapter 5.

References are independent of the module where possible: scipy's softmax and entropy, closed-form coverage and
bounds, the seeded generators drawn directly, and a plain forward pass of the tiny model.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import figure_provenance
from scipy.special import softmax as scipy_softmax
from scipy.stats import entropy as scipy_entropy

from attn_lib import jacobian, normalizers
from attn_lib.book.toy import multihead as mh
from attn_lib.capture import LayerAttention

A, T = 2.0, 1.0
LS = [2, 10, 100, 1000]


@pytest.fixture(scope="module")
def comparison():
    return mh.compare_remedies(LS, A, T, seed=0)


@pytest.fixture(scope="module")
def sweep():
    X = np.random.default_rng(1).normal(size=(32, 12))
    return mh.sensitivity_sweep(X, [0.01, 0.3, 10.0], 1e-3, seed=0)


# ---------------------------------------------------------------- coverage_table


class TestCoverageTable:
    def test_exact_column_is_one_minus_the_miss_probability(self):
        got = mh.coverage_table([0.5, 0.8], [1, 3], n_trials=10, seed=0)
        np.testing.assert_allclose(got["1 − (1 − p)^H"], [0.5, 0.875, 0.8, 0.992], rtol=1e-12)

    def test_simulation_is_the_seeded_bernoulli_draw(self):
        got = mh.coverage_table([0.7], [4], n_trials=5000, seed=3)
        expected = (np.random.default_rng(3).random((5000, 4)) < 0.7).any(axis=1).mean()
        assert got["simulated"].iloc[0] == expected

    def test_standard_error_is_the_binomial_one(self):
        got = mh.coverage_table([0.8], [2], n_trials=400, seed=0)
        assert got["standard error"].iloc[0] == pytest.approx(math.sqrt(0.96 * 0.04 / 400), rel=1e-12)

    def test_one_row_per_rate_and_head_count(self):
        got = mh.coverage_table([0.5, 0.7, 0.9], [1, 2], n_trials=10, seed=0)
        assert list(zip(got["p"], got["H"])) == [(0.5, 1), (0.5, 2), (0.7, 1), (0.7, 2), (0.9, 1), (0.9, 2)]

    @pytest.mark.parametrize(
        "kwargs, name",
        [(dict(ps=[1.5]), "ps"), (dict(ps=[]), "ps"), (dict(heads=[0]), "lengths"), (dict(n_trials=0), "n_trials")],
    )
    def test_rejects_bad_input(self, kwargs, name):
        args = dict(ps=[0.5], heads=[1], n_trials=10) | kwargs
        with pytest.raises(ValueError, match=name):
            mh.coverage_table(**args)


# ---------------------------------------------------------------- remedy_rows


class TestRemedyRows:
    def test_draws_bounded_rows_then_separated_rows(self):
        rng = np.random.default_rng(5)
        bounded = {L: rng.uniform(-A, A, size=L) for L in LS}
        separated = {L: rng.uniform(-A, -A + 1, size=L - 1) for L in LS}
        got = mh.remedy_rows(LS, A, seed=5)
        for L in LS:
            np.testing.assert_array_equal(got["bounded random"][L], bounded[L])
            np.testing.assert_array_equal(got["one separated"][L], np.concatenate([[A], separated[L]]))

    def test_separated_logit_leads_by_at_least_2a_minus_1(self):
        row = mh.remedy_rows([500], 2.5, seed=0)["one separated"][500]
        assert row[0] - row[1:].max() >= 2 * 2.5 - 1

    @pytest.mark.parametrize(
        "kwargs, name", [(dict(lengths=[1]), "lengths"), (dict(a=0.5), "a"), (dict(seed=-2), "seed")]
    )
    def test_rejects_bad_input(self, kwargs, name):
        args = dict(lengths=LS, a=A, seed=0) | kwargs
        with pytest.raises(ValueError, match=name):
            mh.remedy_rows(**args)


# ---------------------------------------------------------------- compare_remedies


class TestCompareRemedies:
    def test_softmax_statistics_match_scipy(self, comparison):
        for kind in mh.ROW_KINDS:
            for L in LS:
                w = scipy_softmax(comparison.rows[kind][L] / T)
                row = comparison.stats.loc[(kind, L, "softmax")]
                assert row["max"] == pytest.approx(w.max(), rel=1e-12)
                assert row["top"] == pytest.approx(w[0], rel=1e-12)
                assert row["support"] == L and row["sum"] == pytest.approx(1.0, rel=1e-12)

    def test_ratio_to_softmax_is_the_largest_weight_ratio(self, comparison):
        for L in LS:
            l = comparison.rows["bounded random"][L]
            expected = (normalizers.softmax1(l) / scipy_softmax(l)).max()
            assert comparison.stats.loc[("bounded random", L, "softmax1"), "ratio to softmax"] == pytest.approx(
                expected, rel=1e-12
            )

    def test_support_counts_positive_weights(self, comparison):
        for L in LS:
            w = normalizers.sparsemax(comparison.rows["bounded random"][L])
            assert comparison.stats.loc[("bounded random", L, "sparsemax"), "support"] == (w > 0).sum()

    def test_table_is_indexed_by_length_with_one_column_per_normaliser(self, comparison):
        table = comparison.table("max", "one separated")
        assert list(table.index) == LS and list(table.columns) == normalizers.available(compared=True)

    def test_sparse_maps_put_all_weight_on_the_separated_token(self, comparison):
        top = comparison.table("top", "one separated")
        assert (top["sparsemax"] == 1.0).all() and (top["entmax15"] == 1.0).all()

    def test_a_subset_of_names(self):
        got = mh.compare_remedies([3], A, T, names=["ssmax", "softmax"])
        assert got.names == ["ssmax", "softmax"]

    def test_rejects_an_unknown_normaliser(self):
        with pytest.raises(ValueError, match="names"):
            mh.compare_remedies(LS, A, T, names=["nope"])

    def test_table_rejects_an_unknown_column(self, comparison):
        with pytest.raises(ValueError, match="column"):
            comparison.table("median", "one separated")


class TestFigureMaxWeight:
    def test_draws_each_normaliser_and_the_lemma_1_line(self, comparison):
        fig = mh.figure_max_weight(comparison)
        left = fig.axes[0]
        ssmax = next(line for line in left.lines if line.get_label() == "ssmax")
        np.testing.assert_allclose(ssmax.get_ydata(), comparison.table("max", "bounded random")["ssmax"])
        lemma = next(line for line in left.lines if line.get_label().startswith("Lemma 1"))
        np.testing.assert_allclose(lemma.get_ydata(), np.minimum(1, math.exp(2 * A / T) / np.array(LS)))

    def test_names_its_data(self, comparison):
        label = figure_provenance(mh.figure_max_weight(comparison))
        assert label.startswith("model: none") and "seed: 0" in label and "device: cpu" in label

    def test_rejects_other_input(self):
        with pytest.raises(ValueError, match="comparison"):
            mh.figure_max_weight(pd.DataFrame())


# ---------------------------------------------------------------- sensitivity_bound / sensitivity_sweep


class TestSensitivityBound:
    @pytest.mark.parametrize(
        "name, expected",
        [
            ("softmax", 1 / 1.0),
            ("softmax1", 1 / 1.0),
            ("ssmax", 0.43 * math.log(64) / 1.0),
            ("sparsemax", 2.0),
            ("entmax15", 2.0),
            ("sigmoid", 0.5),
        ],
    )
    def test_values_at_half_temperature(self, name, expected):
        assert mh.sensitivity_bound(name, 0.5, 1e-3, 64) == pytest.approx(expected, rel=1e-12)

    @pytest.mark.parametrize("name", ["softmax", "ssmax", "sparsemax", "entmax15"])
    def test_capped_at_sqrt2_over_eps(self, name):
        assert mh.sensitivity_bound(name, 1e-6, 0.1, 64) == pytest.approx(math.sqrt(2) / 0.1, rel=1e-12)

    @pytest.mark.parametrize("name", mh.SENSITIVITY_BOUNDED)
    @pytest.mark.parametrize("t", [1e-3, 0.1, 1.0, 30.0])
    def test_holds_on_random_rows(self, name, t):
        X = np.random.default_rng(2).normal(size=(64, 20)) * 3
        g = jacobian.sensitivity(X, t, 1e-3, normalizer=normalizers.get(name), seed=1)
        assert (np.asarray(g) <= mh.sensitivity_bound(name, t, 1e-3, 20) * (1 + 1e-9)).all()

    def test_softmax_bound_is_attained_at_a_two_way_tie(self):
        x = np.array([[0.0, 0.0]])
        v = np.array([[1.0, -1.0]]) / math.sqrt(2)
        g = jacobian.sensitivity(x, 0.5, 1e-6, normalizer="softmax", direction=v)
        assert float(g[0]) == pytest.approx(mh.sensitivity_bound("softmax", 0.5, 1e-6, 2), rel=1e-5)

    @pytest.mark.parametrize(
        "kwargs, name",
        [
            (dict(name="softpick"), "name"),
            (dict(eps=0.0), "eps"),
            (dict(temperature=-1.0), "temperature"),
            (dict(length=0), "length"),
        ],
    )
    def test_rejects_bad_input(self, kwargs, name):
        args = dict(name="softmax", temperature=1.0, eps=1e-3, length=8) | kwargs
        with pytest.raises(ValueError, match=name):
            mh.sensitivity_bound(**args)


class TestSensitivitySweep:
    def test_statistics_match_a_direct_computation(self, sweep):
        X = np.random.default_rng(1).normal(size=(32, 12))
        g = np.asarray(jacobian.sensitivity(X, 0.3, 1e-3, normalizer=normalizers.get("entmax15"), seed=0))
        row = sweep.stats.loc[(0.3, "entmax15")]
        assert row["mean"] == pytest.approx(g.mean(), rel=1e-12) and row["max"] == pytest.approx(g.max(), rel=1e-12)
        assert row["zero share"] == (g == 0).mean()

    def test_bound_column_is_nan_only_where_there_is_no_bound(self, sweep):
        missing = sweep.stats["bound"].isna().groupby(level="normaliser").all()
        assert sorted(missing[missing].index) == ["sa_softmax", "softpick"]

    def test_table_is_indexed_by_temperature(self, sweep):
        table = sweep.table("mean")
        assert list(table.index) == [0.01, 0.3, 10.0] and list(table.columns) == normalizers.available(compared=True)

    @pytest.mark.parametrize(
        "kwargs, name",
        [(dict(logits=np.zeros(5)), "logits"), (dict(temperatures=[]), "temper"), (dict(eps=-1.0), "eps")],
    )
    def test_rejects_bad_input(self, kwargs, name):
        args = dict(logits=np.zeros((2, 3)), temperatures=[1.0], eps=1e-3) | kwargs
        with pytest.raises(ValueError, match=name):
            mh.sensitivity_sweep(**args)


class TestFigureSensitivity:
    def test_draws_the_means_and_leaves_out_zeros(self, sweep):
        fig = mh.figure_sensitivity(sweep)
        line = next(ln for ln in fig.axes[0].lines if ln.get_label() == "sparsemax")
        mean = sweep.table("mean")["sparsemax"]
        np.testing.assert_allclose(np.asarray(line.get_ydata(), float), mean.where(mean > 0), equal_nan=True)

    def test_names_its_data(self, sweep):
        assert "L = 12" in figure_provenance(mh.figure_sensitivity(sweep))

    def test_rejects_other_input(self):
        with pytest.raises(ValueError, match="sweep"):
            mh.figure_sensitivity(None)


# ---------------------------------------------------------------- render_normalisers


class TestRenderNormalisers:
    ROW = np.sort(np.random.default_rng(0).normal(size=16))[::-1].copy()

    def test_panel_titles_report_the_weights(self):
        fig = mh.render_normalisers(0.5, row=self.ROW, seed=0)
        w = normalizers.sparsemax(self.ROW, temperature=0.5)
        title = fig.axes[1].get_title()
        assert title == f"sparsemax\nmax {w.max():.2f} · support {(w > 0).sum()} · sum {w.sum():.2f}"

    def test_bars_are_the_weights(self):
        fig = mh.render_normalisers(2.0, row=self.ROW, seed=0)
        heights = [p.get_height() for p in fig.axes[0].patches]
        np.testing.assert_allclose(heights, scipy_softmax(self.ROW / 2.0), rtol=1e-12)

    def test_fewer_names_hide_the_spare_panels(self):
        fig = mh.render_normalisers(1.0, row=self.ROW, seed=0, names=["softmax", "ssmax"])
        assert [ax.get_visible() for ax in fig.axes] == [True, True] + [False] * 6

    def test_names_its_data(self):
        assert "L = 16" in figure_provenance(mh.render_normalisers(1.0, row=self.ROW, seed=0))

    @pytest.mark.parametrize(
        "kwargs, name",
        [
            (dict(temperature=0.0), "temperature"),
            (dict(row=np.zeros((2, 2))), "row"),
            (dict(names=normalizers.available(compared=True) + ["sparsemax"]), "names"),
        ],
    )
    def test_rejects_bad_input(self, kwargs, name):
        args = dict(temperature=1.0, row=self.ROW, seed=0) | kwargs
        with pytest.raises(ValueError, match=name):
            mh.render_normalisers(args.pop("temperature"), **args)


# ---------------------------------------------------------------- row_stats


def _layer(weights: torch.Tensor, logits: torch.Tensor) -> LayerAttention:
    B, H, Lq, Lk = weights.shape
    return LayerAttention(
        layer=0,
        logits=logits,
        mask=torch.ones(1, 1, Lq, Lk, dtype=torch.bool),
        weights=weights,
        values=torch.zeros(B, H, Lk, 2),
    )


class TestRowStats:
    def test_entropy_matches_scipy(self):
        w = torch.softmax(torch.randn(1, 2, 3, 5, generator=torch.Generator().manual_seed(0)), -1)
        st = mh.row_stats(_layer(w, torch.zeros_like(w)))
        np.testing.assert_allclose(st["entropy"].numpy(), scipy_entropy(w[0].numpy(), axis=-1), rtol=1e-6)

    def test_zero_weights_add_no_entropy_and_no_support(self):
        w = torch.tensor([[[[0.5, 0.5, 0.0, 0.0]]]])
        st = mh.row_stats(_layer(w, torch.zeros_like(w)))
        assert st["entropy"].item() == pytest.approx(math.log(2), rel=1e-12) and st["support"].item() == 2

    def test_largest_logit_ignores_masked_positions(self):
        w = torch.tensor([[[[1.0, 0.0]]]])
        logits = torch.tensor([[[[0.3, -math.inf]]]])
        assert mh.row_stats(_layer(w, logits))["max_logit"].item() == pytest.approx(0.3)

    def test_rejects_other_input(self):
        with pytest.raises(ValueError, match="layer_attention"):
            mh.row_stats(torch.zeros(1, 1, 2, 2))

    def test_rejects_a_batch_out_of_range(self):
        w = torch.full((1, 1, 1, 2), 0.5)
        with pytest.raises(ValueError, match="batch"):
            mh.row_stats(_layer(w, w), batch=1)


# ---------------------------------------------------------------- normaliser_swap


@pytest.fixture(scope="module")
def ids():
    return torch.randint(0, 256, (1, 24), generator=torch.Generator().manual_seed(0))


@pytest.fixture(scope="module")
def result(tiny_gpt2, ids):
    return mh.normaliser_swap(tiny_gpt2, ids, (None, "sparsemax"), text="random bytes")


class TestNormaliserSwap:
    def test_one_row_per_normaliser_and_layer(self, result):
        assert list(zip(result.layers["normaliser"], result.layers["layer"])) == [
            ("softmax (model)", 0),
            ("softmax (model)", 1),
            ("sparsemax", 0),
            ("sparsemax", 1),
        ]

    def test_loss_of_the_unchanged_model_is_its_cross_entropy(self, tiny_gpt2, ids, result):
        with torch.no_grad():
            logits = tiny_gpt2.model(input_ids=ids).logits
        expected = torch.nn.functional.cross_entropy(logits[0, :-1].float(), ids[0, 1:]).item()
        assert result.loss["softmax (model)"] == pytest.approx(expected, rel=1e-5)

    def test_layer_means_skip_the_first_query_row(self, result):
        st = result.first["sparsemax"]
        row = result.layers.query("normaliser == 'sparsemax' and layer == 0").iloc[0]
        assert row["entropy"] == pytest.approx(float(st["entropy"][:, 1:].mean()), rel=1e-12)

    def test_carries_its_provenance(self, tiny_gpt2, result):
        assert (result.layers["model"] == tiny_gpt2.describe()).all() and (
            result.layers["text"] == "random bytes"
        ).all()

    def test_first_layer_statistics_for_every_run(self, result):
        assert sorted(result.first) == ["softmax (model)", "sparsemax"]
        assert torch.equal(result.first["sparsemax"]["max_logit"], result.first["softmax (model)"]["max_logit"])

    @pytest.mark.parametrize(
        "kwargs, name",
        [
            (dict(input_ids=torch.zeros(5, dtype=torch.long)), "input_ids"),
            (dict(swaps=["nope"]), "swaps"),
            (dict(swaps=[]), "swaps"),
        ],
    )
    def test_rejects_bad_input(self, tiny_gpt2, kwargs, name):
        args = dict(input_ids=torch.zeros(1, 4, dtype=torch.long), swaps=[None]) | kwargs
        with pytest.raises(ValueError, match=name):
            mh.normaliser_swap(tiny_gpt2, **args)
