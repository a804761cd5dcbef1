"""attn_lib.book.toy.separability: the sphere model of Assumptions 1-2, the radius rho_min, the unit cases of the
N_s convention, the toy statistics of Theorem 2 and the temperature slider's figure.

References are independent of the module: brute-force loops over tokens, closed forms (Archimedes' theorem on
S^2, E||sum_j alpha_j x_j||^2 = M^2 sum_j alpha_j^2 for independent uniform x_j) and the one-row functions of
attn_lib.theory.
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import figure_provenance
from matplotlib.figure import Figure
from scipy import stats as scipy_stats

from attn_lib import metrics, theory
from attn_lib.book.toy import separability as toy
from attn_lib.book.widgets import PrecomputedSlider

SMALL = dict(n_values=(1, 2, 4), seed=0, d=8, L=32, mc_draws=16)


@pytest.fixture(scope="module")
def small_stats():
    return toy.toy_stats([0.5, 2.0], 3, **SMALL)


def _random_row(seed, L=12, d=5):
    rng = np.random.default_rng(seed)
    return theory.softmax_np(rng.normal(size=L)), rng.normal(size=(L, d))


def _brute_rho_min(alpha, X, N):
    top = set(np.argsort(-alpha, kind="stable")[:N].tolist())
    s = sum(alpha[i] * X[i] for i in top)
    return min(np.linalg.norm(alpha[j] * X[j] - s) for j in range(len(alpha)) if j not in top)


def _brute_fraction(alpha, X, N):
    top = np.argsort(-alpha, kind="stable")[:N]
    s = sum(alpha[i] * X[i] for i in top)
    rho = _brute_rho_min(alpha, X, N)
    return sum(np.linalg.norm(alpha[i] * X[i] - s) < rho for i in top) / N


# ---------------------------------------------------------------------------------------------- sphere_points
class TestSpherePoints:
    def test_points_lie_on_the_sphere_of_the_given_radius(self):
        X = toy.sphere_points(0, 50, 7, radius=2.5)
        np.testing.assert_allclose(np.linalg.norm(X, axis=1), 2.5, rtol=1e-14)

    def test_shape_is_n_by_d(self):
        assert toy.sphere_points(0, 4, 3).shape == (4, 3)

    def test_height_on_s2_is_uniform_as_archimedes_says(self):
        z = toy.sphere_points(1, 20_000, 3)[:, 2]
        assert scipy_stats.kstest(z, scipy_stats.uniform(loc=-1, scale=2).cdf).pvalue > 0.01

    def test_same_seed_gives_the_same_points(self):
        np.testing.assert_array_equal(toy.sphere_points(3, 5, 4), toy.sphere_points(3, 5, 4))

    def test_a_generator_is_advanced_between_calls(self):
        rng = np.random.default_rng(0)
        assert not np.array_equal(toy.sphere_points(rng, 5, 4), toy.sphere_points(rng, 5, 4))

    @pytest.mark.parametrize(
        "kwargs, name",
        [
            (dict(n=0), "n"),
            (dict(d=0), "d"),
            (dict(radius=0.0), "radius"),
            (dict(rng="x"), "rng"),
            (dict(rng=-1), "rng"),
        ],
    )
    def test_bad_input_names_the_parameter(self, kwargs, name):
        args = dict(rng=0, n=3, d=2) | kwargs
        with pytest.raises(ValueError, match=name):
            toy.sphere_points(args.pop("rng"), args.pop("n"), args.pop("d"), **args)


# ---------------------------------------------------------------------------------------------------- rho_min
class TestRhoMin:
    @pytest.mark.parametrize("seed, N", [(0, 1), (1, 3), (2, 11)])
    def test_matches_a_loop_over_the_non_selected_tokens(self, seed, N):
        alpha, X = _random_row(seed)
        assert toy.rho_min(alpha, X, N) == pytest.approx(_brute_rho_min(alpha, X, N), rel=1e-13)

    def test_is_infinite_when_every_token_is_selected(self):
        alpha, X = _random_row(0)
        assert toy.rho_min(alpha, X, len(alpha)) == np.inf

    def test_a_batch_matches_the_rows_one_by_one(self):
        rows = [_random_row(s) for s in range(3)]
        batch = toy.rho_min(np.stack([a for a, _ in rows]), np.stack([x for _, x in rows]), 4)
        np.testing.assert_allclose(batch, [toy.rho_min(a, x, 4) for a, x in rows], rtol=1e-15)

    def test_the_closed_ball_of_radius_rho_min_holds_a_non_selected_token(self):
        alpha, X = _random_row(4)
        assert theory.distinguishable_count(alpha, X, 3, r=toy.rho_min(alpha, X, 3)) == 0

    def test_bad_n_names_the_parameter(self):
        alpha, X = _random_row(0)
        with pytest.raises(ValueError, match="N"):
            toy.rho_min(alpha, X, 0)

    def test_mismatched_shapes_name_x(self):
        alpha, X = _random_row(0)
        with pytest.raises(ValueError, match="X"):
            toy.rho_min(alpha, X[:-1], 2)


# ------------------------------------------------------------------------------------- convention_cases/table
class TestConventionCases:
    def test_expected_fractions_match_a_brute_force_count(self):
        for name, (alpha, X, N, expected) in toy.convention_cases().items():
            assert _brute_fraction(alpha, X, N) == pytest.approx(expected, abs=1e-15), name

    def test_hand_rows_have_the_documented_distances(self):
        alpha, X, _, _ = toy.convention_cases()["all selected inside (N = 3)"]
        s = (alpha[:3, None] * X[:3]).sum(0)
        D = np.linalg.norm(alpha[:, None] * X - s, axis=1)
        np.testing.assert_allclose(D, [0.6, 0.6, 0.6, 0.95, 0.95], rtol=1e-14)

    def test_the_seed_changes_only_the_random_row(self):
        a, b = toy.convention_cases(seed=0), toy.convention_cases(seed=1)
        name = "all selected inside (N = 3)"
        np.testing.assert_array_equal(a[name][0], b[name][0])
        assert not np.array_equal(a["N = 1 (random row)"][1], b["N = 1 (random row)"][1])

    def test_bad_seed_names_the_parameter(self):
        with pytest.raises(ValueError, match="seed"):
            toy.convention_cases(seed=-1)


class TestConventionTable:
    def test_strict_convention_gives_the_expected_fractions(self):
        t = toy.convention_table(toy.convention_cases())
        assert (t["N_s/N (r -> rho_min)"] == t["expected N_s/N"]).all()

    def test_literal_closed_ball_gives_zero(self):
        t = toy.convention_table(toy.convention_cases())
        assert (t["N_s (closed ball at r = rho_min)"] == 0).all()

    def test_rho_min_column_matches_the_brute_force_radius(self):
        cases = toy.convention_cases()
        t = toy.convention_table(cases)
        for name, (alpha, X, N, _) in cases.items():
            assert t.loc[name, "rho_min"] == pytest.approx(_brute_rho_min(alpha, X, N), rel=1e-13)

    def test_a_wrong_expectation_shows_up_as_a_mismatch(self):
        alpha, X, N, _ = toy.convention_cases()["one selected outside (N = 3)"]
        t = toy.convention_table({"wrong": (alpha, X, N, 1.0)})
        assert t.loc["wrong", "N_s/N (r -> rho_min)"] != t.loc["wrong", "expected N_s/N"]

    @pytest.mark.parametrize("cases", [{}, {"a": (1, 2)}, [("a", 1)]])
    def test_bad_cases_name_the_parameter(self, cases):
        with pytest.raises(ValueError, match="cases"):
            toy.convention_table(cases)


# ---------------------------------------------------------------------------------------------------- toy_row
class TestToyRow:
    def test_vectors_lie_on_the_sphere(self):
        _, X = toy.toy_row(0, 1.0, d=16, L=40, M=2.0)
        np.testing.assert_allclose(np.linalg.norm(X, axis=1), 2.0, rtol=1e-14)

    def test_weights_are_a_probability_vector(self):
        a, _ = toy.toy_row(0, 0.5, d=16, L=40)
        assert a.shape == (40,) and (a > 0).all() and a.sum() == pytest.approx(1.0, abs=1e-14)

    def test_every_temperature_sees_the_same_vectors(self):
        np.testing.assert_array_equal(toy.toy_row(3, 0.25)[1], toy.toy_row(3, 2.0)[1])

    def test_halving_the_temperature_doubles_the_log_weight_gaps(self):
        a1, _ = toy.toy_row(2, 1.0, d=16, L=40)
        a2, _ = toy.toy_row(2, 0.5, d=16, L=40)
        np.testing.assert_allclose(np.log(a2) - np.log(a2[0]), 2 * (np.log(a1) - np.log(a1[0])), atol=1e-10)

    def test_logits_are_approximately_standard_normal(self):
        a, _ = toy.toy_row(0, 1.0, d=64, L=256)
        assert 0.8 < np.std(np.log(a)) < 1.2

    def test_different_trials_differ(self):
        assert not np.array_equal(toy.toy_row(0, 1.0)[1], toy.toy_row(1, 1.0)[1])

    @pytest.mark.parametrize(
        "kwargs, name",
        [
            (dict(k=-1), "k"),
            (dict(temperature=0.0), "temperature"),
            (dict(d=1), "d"),
            (dict(L=1), "L"),
            (dict(seed=-2), "seed"),
            (dict(M=-1.0), "radius"),
        ],
    )
    def test_bad_input_names_the_parameter(self, kwargs, name):
        args = dict(k=0, temperature=1.0) | kwargs
        with pytest.raises(ValueError, match=name):
            toy.toy_row(args.pop("k"), args.pop("temperature"), **args)


# -------------------------------------------------------------------------------------------------- toy_stats
class TestToyStats:
    def test_one_row_per_temperature_trial_and_n(self, small_stats):
        assert len(small_stats) == 2 * 3 * 3
        assert set(itertools.product([0.5, 2.0], range(3), [1, 2, 4])) == set(
            small_stats[["T", "trial", "N"]].itertuples(index=False, name=None)
        )

    def test_fraction_matches_a_brute_force_count_on_the_same_row(self, small_stats):
        for row in small_stats.itertuples():
            a, X = toy.toy_row(row.trial, row.T, seed=0, d=8, L=32)
            assert row.fraction == pytest.approx(_brute_fraction(a, X, row.N), abs=1e-15)

    def test_bounds_match_theory_with_a_brute_force_delta(self, small_stats):
        row = small_stats.iloc[5]
        a, X = toy.toy_row(int(row["trial"]), row["T"], seed=0, d=8, L=32)
        delta = min(np.linalg.norm(X[i] - X[j]) for i in range(32) for j in range(i + 1, 32))
        lower, upper = theory.theorem2_bounds(a, int(row.N), 1.0, delta, _brute_rho_min(a, X, int(row.N)))
        assert (row.lower, row.upper_paper) == pytest.approx((lower, upper), rel=1e-12)

    def test_x_over_xi_is_the_largest_ratio_over_the_selected_tokens(self, small_stats):
        row = small_stats.iloc[5]
        N = int(row["N"])
        a, X = toy.toy_row(int(row["trial"]), row["T"], seed=0, d=8, L=32)
        top = np.argsort(-a, kind="stable")[:N]
        delta = min(np.linalg.norm(X[i] - X[j]) for i in range(32) for j in range(i + 1, 32))
        ratios = [
            np.linalg.norm(sum(a[j] * X[j] for j in top if j != i)) / theory.theorem2_xi(a, N, 1.0, delta)[k]
            for k, i in enumerate(top)
        ]
        assert row["X_over_xi"] == pytest.approx(max(ratios), rel=1e-12)

    def test_with_two_selected_tokens_the_monte_carlo_mean_is_exactly_m_beta(self):
        # N = 2: X_i = alpha_j ||x_j|| = M beta_i for every draw, so E X_i / (M beta_i) = 1
        stats = toy.toy_stats(1.0, 2, n_values=(2,), d=8, L=32, M=1.7, mc_draws=4)
        np.testing.assert_allclose(stats["mu_over_Mbeta"], 1.0, rtol=1e-14)

    def test_offsets_never_exceed_xi(self):
        stats = toy.toy_stats(1.0, 10, n_values=(2, 8, 32), d=16, L=64, mc_draws=8)
        assert (stats["X_over_xi"] <= 1 + 1e-10).all()

    def test_monte_carlo_mean_never_exceeds_m_beta(self, small_stats):
        assert (small_stats["mu_over_Mbeta"] <= 1 + 1e-10).all()

    def test_n_equal_one_is_fully_separable_with_zero_offset(self, small_stats):
        one = small_stats[small_stats.N == 1]
        assert (one["fraction"] == 1).all() and (one["X_over_xi"] == 0).all()

    def test_monte_carlo_mean_is_close_to_the_root_mean_square(self):
        # E||sum_{j != i} alpha_j x_j||^2 = M^2 sum_{j != i} alpha_j^2 for independent uniform x_j; in d = 64 the
        # norm concentrates, so E X_i is within a few per cent of that root and (Jensen) not above it.
        stats = toy.toy_stats(1.0, 2, n_values=(4, 8), d=64, L=64, M=1.5, mc_draws=4000)
        for row in stats.itertuples():
            a, _ = toy.toy_row(row.trial, 1.0, d=64, L=64, M=1.5)
            aI = a[np.argsort(-a, kind="stable")[: row.N]]
            rms = 1.5 * np.sqrt((aI**2).sum() - aI**2).mean()
            assert 0.97 * rms <= row.mean_mu <= 1.005 * rms

    def test_the_range_m_form_is_at_most_the_range_2m_form(self, small_stats):
        assert (small_stats["upper_valid_M"] <= small_stats["upper_valid"] + 1e-15).all()

    def test_delta_is_the_same_at_every_temperature(self, small_stats):
        d = small_stats.pivot_table(index=["trial", "N"], columns="T", values="delta")
        np.testing.assert_array_equal(d[0.5], d[2.0])

    def test_is_reproducible(self, small_stats):
        pd.testing.assert_frame_equal(toy.toy_stats([0.5, 2.0], 3, **SMALL), small_stats)

    def test_attrs_name_the_geometry(self, small_stats):
        assert small_stats.attrs == dict(d=8, L=32, M=1.0, seed=0, mc_draws=16, device="cpu")

    @pytest.mark.parametrize(
        "kwargs, name",
        [
            (dict(temperatures=[]), "temperatures"),
            (dict(temperatures=-1.0), "temperatures"),
            (dict(trials=0), "trials"),
            (dict(n_values=(1, 32)), "n_values"),
            (dict(n_values=()), "n_values"),
            (dict(mc_draws=0), "mc_draws"),
            (dict(M=0.0), "M"),
            (dict(seed=-1), "seed"),
            (dict(d=1), "d"),
        ],
    )
    def test_bad_input_names_the_parameter(self, kwargs, name):
        args = dict(SMALL, temperatures=1.0, trials=1) | kwargs
        with pytest.raises(ValueError, match=name):
            toy.toy_stats(args.pop("temperatures"), args.pop("trials"), **args)


# -------------------------------------------------------------------------------------------------- toy_means
class TestToyMeans:
    def test_is_the_mean_over_trials_per_n(self, small_stats):
        one_t = small_stats[small_stats["T"] == 0.5]
        means = toy.toy_means(one_t)
        for N in (1, 2, 4):
            assert means.loc[N, "fraction"] == pytest.approx(one_t[one_t.N == N]["fraction"].sum() / 3, rel=1e-15)

    def test_several_temperatures_are_refused(self, small_stats):
        with pytest.raises(ValueError, match="one temperature"):
            toy.toy_means(small_stats)

    def test_a_foreign_table_is_refused(self):
        with pytest.raises(ValueError, match="stats"):
            toy.toy_means(pd.DataFrame({"N": [1]}))


# ------------------------------------------------------------------------------------------------ toy_summary
def _means(**cols):
    base = dict(
        fraction=[1.0, 0.9, 0.6],
        lower=[0.5, 0.1, -2.0],
        upper_paper=[1.0, 0.95, 0.5],
        upper_valid=[1.0, 0.99, 0.7],
        upper_valid_M=[1.0, 0.9, 0.6],
        mean_X=[0.0, 0.3, 0.6],
        mean_mu=[0.0, 0.2, 0.4],
        mean_xi=[0.0, 0.4, 0.5],
        r=[0.1] * 3,
        top_mass=[0.2, 0.3, 0.4],
    )
    return pd.DataFrame(base | cols, index=pd.Index([1, 2, 4], name="N"))


class TestToySummary:
    def test_reads_the_ends_of_the_grid(self):
        s = toy.toy_summary(_means())
        assert (s.n_min, s.n_max, s.fraction_first, s.fraction_last) == (1, 4, 1.0, 0.6)

    def test_lower_positive_up_to_is_the_last_positive_n(self):
        assert toy.toy_summary(_means()).lower_positive_up_to == 2

    def test_lower_positive_up_to_is_none_when_never_positive(self):
        assert toy.toy_summary(_means(lower=[-1.0, -1.0, -1.0])).lower_positive_up_to is None

    def test_counts_the_bracketed_n(self):
        s = toy.toy_summary(_means())
        assert (s.bracketed_paper, s.bracketed_valid, s.n_values) == (2, 3, 3)

    def test_ratios_use_only_n_of_two_or_more(self):
        s = toy.toy_summary(_means())
        assert (s.mu_over_xi_mean, s.mu_over_xi_min, s.mu_over_xi_max) == pytest.approx((0.65, 0.5, 0.8))
        assert s.X_over_mu_mean == pytest.approx(1.5)

    def test_missing_columns_are_refused(self):
        with pytest.raises(ValueError, match="means"):
            toy.toy_summary(_means().drop(columns="mean_mu"))

    def test_a_grid_without_n_of_two_is_refused(self):
        with pytest.raises(ValueError, match="N >= 2"):
            toy.toy_summary(_means().iloc[:1])


# ------------------------------------------------------------------------------------------ render_temperature
class TestRenderTemperature:
    def test_footer_names_the_synthetic_generator_device_and_seed(self, small_stats):
        label = figure_provenance(toy.render_temperature(0.5, small_stats))
        assert label == (
            "model: none · text: synthetic: uniform on S^7, L=32, softmax of sqrt(d) x·q · device: cpu · seed: 0"
        )

    def test_one_box_per_n(self, small_stats):
        ax = toy.render_temperature(2.0, small_stats).axes[0]
        assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "2", "4"]

    def test_paper_upper_line_is_the_mean_over_trials(self, small_stats):
        ax = toy.render_temperature(2.0, small_stats).axes[0]
        line = next(ln for ln in ax.get_lines() if ln.get_label().startswith("upper, paper"))
        expected = toy.toy_means(small_stats[small_stats["T"] == 2.0])["upper_paper"].to_numpy()
        np.testing.assert_allclose(line.get_ydata(), expected, rtol=1e-15)

    def test_returns_a_figure_outside_pyplot(self, small_stats):
        import matplotlib.pyplot as plt

        n_open = len(plt.get_fignums())
        assert isinstance(toy.render_temperature(0.5, small_stats), Figure) and len(plt.get_fignums()) == n_open

    def test_an_unknown_temperature_is_refused(self, small_stats):
        with pytest.raises(ValueError, match="temperature"):
            toy.render_temperature(1.0, small_stats)

    def test_a_table_without_attrs_is_refused(self, small_stats):
        bare = small_stats.copy()
        bare.attrs = {}
        with pytest.raises(ValueError, match="attrs"):
            toy.render_temperature(0.5, bare)


class TestTemperatureSlider:
    def test_has_one_position_per_temperature(self, small_stats):
        w = toy.temperature_slider(small_stats, value=2.0)
        assert isinstance(w, PrecomputedSlider) and w.values == [0.5, 2.0] and len(w.images) == 2

    def test_starts_at_the_given_temperature(self, small_stats):
        assert toy.temperature_slider(small_stats, value=2.0).slider.index == 1

    def test_a_value_outside_the_temperatures_is_refused(self, small_stats):
        with pytest.raises(ValueError, match="value"):
            toy.temperature_slider(small_stats, value=1.0)


class TestBallTestTable:
    """The toy table of chapter 3's rem-ball-test (the exactness itself: tests/test_metrics.py)."""

    def test_bad_arguments_name_the_parameter(self):
        for kwargs, name in (
            ({"temperatures": (0.0,)}, "temperatures"),
            ({"N": 0}, "N"),
            ({"N": 8, "L": 8}, "L"),
            ({"seed": -1}, "seed"),
        ):
            with pytest.raises(ValueError, match=name):
                toy.ball_test_table(**kwargs)

    def test_the_layer_refuses_bad_arguments(self):
        for kwargs, name in (({"temperature": -1.0}, "temperature"), ({"temperature": 1.0, "L": 1}, "L")):
            with pytest.raises(ValueError, match=name):
                toy.ball_test_layer(**kwargs)

    def test_exact_flags_need_a_valid_n(self):
        ld = metrics.LayerData.from_logits(torch.zeros(1, 4, 4, dtype=torch.float64), torch.ones(1, 4, 2))
        with pytest.raises(ValueError, match="N"):
            toy.exact_ball_flags(ld, 4)
