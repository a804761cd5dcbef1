"""attn_lib.book.toy.sensitivity: synthetic rows for Lemma 2, Corollary 3 and the sqrt(5) example, checked against
independent references (scipy's softmax, finite differences of the normaliser, numpy norms, hand-made tables)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import scipy.special
import sympy as sp
from conftest import figure_provenance
from matplotlib.figure import Figure

from attn_lib.book import toy
from attn_lib.book.toy import sensitivity as S

SQRT2 = math.sqrt(2)


def softmax(logits, T):
    return scipy.special.softmax(np.asarray(logits) / T)


def fd_jacobian(f, logits, h=1e-6):
    """Central finite-difference Jacobian of ``f`` (numpy in, numpy out), column j = d f / d l_j."""
    L = len(logits)
    cols = [(f(logits + h * np.eye(L)[j]) - f(logits - h * np.eye(L)[j])) / (2 * h) for j in range(L)]
    return np.stack(cols, axis=1)


def softmax_jacobian(logits, T):
    a = softmax(logits, T)
    return (np.diag(a) - np.outer(a, a)) / T


# ----------------------------------------------------------------------------------------------------------------
# the package exports
# ----------------------------------------------------------------------------------------------------------------
def test_toy_package_exports_the_module_names():
    for name in S.__all__:
        assert getattr(toy, name) is getattr(S, name)


# ----------------------------------------------------------------------------------------------------------------
# tex
# ----------------------------------------------------------------------------------------------------------------
class TestTex:
    def test_replaces_a_plain_text_name_by_its_latex(self):
        expr = sp.Symbol("max|F'|") * sp.Symbol("x")
        assert r"\max_j|F'(l_j)|" in S.tex(expr)

    def test_leaves_other_symbols_as_sympy_writes_them(self):
        expr = sp.Symbol("alpha") + 1
        assert S.tex(expr) == sp.latex(expr)

    def test_accepts_custom_names(self):
        assert S.tex(sp.Symbol("q"), names={"q": r"\mathbf q"}) == r"\mathbf q"

    def test_handles_matrices(self):
        m = sp.Matrix([[sp.Symbol("minF")]])
        assert r"\min_j F(l_j)" in S.tex(m)

    def test_rejects_a_non_sympy_object(self):
        with pytest.raises(ValueError, match="expr"):
            S.tex("x + 1")

    def test_rejects_bad_names(self):
        with pytest.raises(ValueError, match="names"):
            S.tex(sp.Symbol("x"), names={"x": 3})


# ----------------------------------------------------------------------------------------------------------------
# sqrt(5) example
# ----------------------------------------------------------------------------------------------------------------
class TestSqrt5Table:
    def test_index_is_every_length_and_temperature(self):
        tab = S.sqrt5_table(temperatures=[1.0, 0.1], lengths=[2, 3, 5])
        assert list(tab.index) == [(L, T) for L in (2, 3, 5) for T in (1.0, 0.1)]

    def test_logit_distance_is_sqrt5(self):
        tab = S.sqrt5_table(c=0.3, eps=1e-2)
        np.testing.assert_allclose(tab["‖ℓ¹−ℓ²‖₂/ε"], math.sqrt(5), rtol=1e-12)

    def test_exact_ratio_matches_scipy_softmax(self):
        c, eps, T, L = 1.0, 1e-3, 0.1, 5
        l1 = np.r_[c + eps, c, np.zeros(L - 2)]
        l2 = np.r_[c - eps, c + eps, np.zeros(L - 2)]
        expected = np.linalg.norm(softmax(l1, T) - softmax(l2, T)) / eps
        tab = S.sqrt5_table(c, eps, temperatures=[T], lengths=[L])
        assert tab.loc[(L, T), "‖Δα‖/ε exact"] == pytest.approx(expected, rel=1e-9)

    def test_linearisation_matches_a_finite_difference_jacobian(self):
        c, eps, T = 1.0, 1e-3, 1.0
        l1, l2 = np.array([c + eps, c]), np.array([c - eps, c + eps])
        J = fd_jacobian(lambda x: softmax(x, T), l1)
        tab = S.sqrt5_table(c, eps, temperatures=[T], lengths=[2])
        assert tab.loc[(2, T), "‖J(ℓ¹)(ℓ¹−ℓ²)‖/ε"] == pytest.approx(np.linalg.norm(J @ (l1 - l2)) / eps, rel=1e-6)

    def test_tie_approximation_is_three_sqrt2_over_4T(self):
        tab = S.sqrt5_table(temperatures=[0.5], lengths=[2])
        assert tab["3√2/(4T)"].iloc[0] == pytest.approx(3 * SQRT2 / 2)

    @pytest.mark.parametrize(
        "kwargs, name",
        [
            ({"eps": 0.0}, "eps"),
            ({"temperatures": [1.0, -1.0]}, "temperatures"),
            ({"temperatures": []}, "temperatures"),
            ({"lengths": [1]}, "lengths"),
            ({"lengths": []}, "lengths"),
        ],
    )
    def test_rejects_bad_input(self, kwargs, name):
        with pytest.raises(ValueError, match=name):
            S.sqrt5_table(**kwargs)


# ----------------------------------------------------------------------------------------------------------------
# Lemma 2
# ----------------------------------------------------------------------------------------------------------------
class TestLemma2Families:
    @pytest.mark.parametrize("name", ["exp (softmax)", "softplus", "1 + z²"])
    def test_dF_is_the_derivative_of_F(self, name):
        F, dF, _ = S.lemma2_families()[name]
        z = np.linspace(-3, 3, 13)
        h = 1e-6
        np.testing.assert_allclose(dF(z), (F(z + h) - F(z - h)) / (2 * h), rtol=1e-6, atol=1e-9)

    @pytest.mark.parametrize("name", ["exp (softmax)", "softplus", "1 + z²"])
    def test_normaliser_is_F_over_its_sum(self, name):
        F, _, f = S.lemma2_families()[name]
        logits, T = np.array([0.3, -1.2, 2.0, 0.0]), 0.7
        np.testing.assert_allclose(
            np.asarray(f(logits, temperature=T)), F(logits / T) / F(logits / T).sum(), rtol=1e-12
        )


class TestLemma2Instances:
    def test_one_row_per_instance_and_family(self):
        inst = S.lemma2_instances(7, seed=1)
        assert len(inst) == 21
        assert inst.groupby("family", sort=False).size().tolist() == [7, 7, 7]

    def test_draws_lie_in_the_documented_ranges(self):
        inst = S.lemma2_instances(50, seed=2)
        assert inst["L"].between(2, 30).all()
        assert inst["T"].between(10**-0.5, 10).all()
        assert (inst["logits"].map(len) == inst["L"]).all()

    def test_same_seed_same_instances(self):
        a, b = S.lemma2_instances(5, seed=3), S.lemma2_instances(5, seed=3)
        pd.testing.assert_frame_equal(a.drop(columns="logits"), b.drop(columns="logits"))

    def test_a_generator_is_used_as_given(self):
        a = S.lemma2_instances(4, seed=np.random.default_rng(9))
        b = S.lemma2_instances(4, seed=9)
        np.testing.assert_array_equal(a["T"], b["T"])

    def test_spectral_norm_matches_a_finite_difference_jacobian(self):
        inst = S.lemma2_instances(3, seed=4)
        fams = S.lemma2_families()
        for r in inst.itertuples():
            f = fams[r.family][2]
            J = fd_jacobian(lambda x, f=f, T=r.T: np.asarray(f(x, temperature=T)), r.logits)
            assert r.spectral == pytest.approx(np.linalg.norm(J, 2), rel=1e-5, abs=1e-9)

    def test_bound_is_lemma2_from_F_and_its_derivative(self):
        inst = S.lemma2_instances(3, seed=5)
        F, dF, _ = S.lemma2_families()["1 + z²"]
        r = inst[inst["family"] == "1 + z²"].iloc[0]
        z, L = r["logits"] / r["T"], r["L"]
        expected = np.abs(dF(z) / r["T"]).max() * (1 / (L * F(z).min()) + 1 / (math.sqrt(L) * F(z).min()))
        assert r["bound"] == pytest.approx(expected, rel=1e-12)

    def test_library_jacobian_agrees_with_the_closed_form(self):
        assert S.lemma2_instances(20, seed=6)["max_abs_diff"].max() < 1e-10

    def test_rejects_bad_n(self):
        with pytest.raises(ValueError, match="n_per_family"):
            S.lemma2_instances(0)

    def test_rejects_a_negative_seed(self):
        with pytest.raises(ValueError, match="seed"):
            S.lemma2_instances(2, seed=-1)


class TestLemma2Summary:
    def _instances(self):
        return pd.DataFrame(
            {
                "family": ["a", "a", "b"],
                "spectral": [1.0, 3.0, 1.0],
                "bound": [2.0, 2.0, 4.0],
                "max_abs_diff": [1e-16, 2e-16, 5e-16],
            }
        )

    def test_counts_instances_and_violations(self):
        out = S.lemma2_summary(self._instances())
        assert out["instances"].tolist() == [2, 1]
        assert out["violations"].tolist() == [1, 0]

    def test_reports_the_largest_ratio_and_difference(self):
        out = S.lemma2_summary(self._instances())
        assert out.loc["a", "largest ‖J‖₂ / bound"] == 1.5
        assert out.loc["b", "largest |J − J_lib|"] == 5e-16

    def test_rtol_lets_a_rounding_excess_pass(self):
        inst = pd.DataFrame({"family": ["a"], "spectral": [1.0 + 1e-12], "bound": [1.0], "max_abs_diff": [0.0]})
        assert S.lemma2_summary(inst, rtol=1e-9)["violations"].iloc[0] == 0
        assert S.lemma2_summary(inst, rtol=0.0)["violations"].iloc[0] == 1

    def test_rejects_missing_columns(self):
        with pytest.raises(ValueError, match="bound"):
            S.lemma2_summary(self._instances().drop(columns="bound"))

    def test_rejects_negative_rtol(self):
        with pytest.raises(ValueError, match="rtol"):
            S.lemma2_summary(self._instances(), rtol=-1.0)


# ----------------------------------------------------------------------------------------------------------------
# Corollary 3 on random rows
# ----------------------------------------------------------------------------------------------------------------
class TestCorollary3RandomNorms:
    def test_norms_match_numpy_on_the_returned_rows(self):
        norms = S.corollary3_random_norms(20, seed=1, temperature=0.3)
        for r in norms.itertuples():
            J = softmax_jacobian(r.logits, 0.3)
            assert r.spectral == pytest.approx(np.linalg.norm(J, 2), rel=1e-10)
            assert r.entrywise == pytest.approx(np.abs(J).max(), rel=1e-12)
            assert r.row == pytest.approx(np.linalg.norm(J, axis=1).max(), rel=1e-12)

    def test_planted_ties_have_nearly_equal_leading_logits(self):
        norms = S.corollary3_random_norms(40, seed=2, tie_fraction=1.0)
        gaps = norms["logits"].map(lambda x: np.diff(np.sort(x)[-2:])[0])
        assert norms["tie"].all() and (gaps < 0.01).all()

    def test_tie_fraction_zero_plants_no_tie(self):
        assert not S.corollary3_random_norms(30, seed=3, tie_fraction=0.0)["tie"].any()

    def test_ties_approach_the_spectral_bound(self):
        norms = S.corollary3_random_norms(200, seed=4, tie_fraction=1.0)
        assert 0.45 < norms["spectral"].max() <= 0.5

    def test_rejects_bad_tie_fraction(self):
        with pytest.raises(ValueError, match="tie_fraction"):
            S.corollary3_random_norms(3, tie_fraction=1.5)

    def test_rejects_bad_temperature(self):
        with pytest.raises(ValueError, match="temperature"):
            S.corollary3_random_norms(3, temperature=0.0)


class TestCorollary3RandomDifferences:
    def test_difference_matches_scipy_softmax(self):
        d = S.corollary3_random_differences(20, seed=1)
        for r in d.itertuples():
            expected = np.linalg.norm(softmax(r.logits + r.eps * r.direction, r.T) - softmax(r.logits, r.T))
            assert r.difference == pytest.approx(expected, rel=1e-9, abs=1e-15)

    def test_directions_are_unit_vectors(self):
        d = S.corollary3_random_differences(10, seed=2)
        np.testing.assert_allclose(d["direction"].map(np.linalg.norm), 1.0, rtol=1e-12)

    def test_bound_is_min_of_eps_over_2T_and_sqrt2(self):
        d = S.corollary3_random_differences(30, seed=3)
        np.testing.assert_allclose(d["bound"], np.minimum(d["eps"] / (2 * d["T"]), SQRT2), rtol=1e-12)

    def test_draws_lie_in_the_documented_ranges(self):
        d = S.corollary3_random_differences(100, seed=4)
        assert d["T"].between(1e-3, 1e2).all() and d["eps"].between(1e-3, 10).all()

    def test_rejects_bad_n(self):
        with pytest.raises(ValueError, match="n"):
            S.corollary3_random_differences(0)


class TestCorollary3RandomSummary:
    def test_lists_the_largest_values_and_the_bounds(self):
        norms = pd.DataFrame({"spectral": [0.1, 0.4], "entrywise": [0.2, 0.05], "row": [0.3, 0.1]})
        diffs = pd.DataFrame({"ratio": [0.5, 0.9]})
        out = S.corollary3_random_summary(norms, diffs)
        assert out["largest observed"].tolist() == [0.2, 0.3, 0.4, 0.9]
        np.testing.assert_allclose(out["bound"], [0.25, SQRT2 / 4, 0.5, 1.0])

    def test_bounds_scale_with_the_temperature(self):
        norms = pd.DataFrame({"spectral": [0.1], "entrywise": [0.1], "row": [0.1]})
        out = S.corollary3_random_summary(norms, pd.DataFrame({"ratio": [0.1]}), temperature=0.5)
        np.testing.assert_allclose(out["bound"], [0.5, SQRT2 / 2, 1.0, 1.0])

    def test_rejects_missing_columns(self):
        with pytest.raises(ValueError, match="differences"):
            S.corollary3_random_summary(
                pd.DataFrame({"spectral": [0], "entrywise": [0], "row": [0]}), pd.DataFrame({"x": [0]})
            )


# ----------------------------------------------------------------------------------------------------------------
# the paper's form and the corrected constants
# ----------------------------------------------------------------------------------------------------------------
class TestCounterexampleTable:
    def test_spectral_norm_is_that_of_the_two_by_two_tie(self):
        ce = S.counterexample_table([1.0, 0.1])
        for T in (1.0, 0.1):
            J = np.array([[1, -1], [-1, 1]]) / (4 * T)
            assert ce.loc[T, "‖J‖₂ at the tie"] == pytest.approx(np.linalg.norm(J, 2), rel=1e-12)

    def test_finite_difference_ratio_approaches_one_over_2T(self):
        ce = S.counterexample_table([0.5], eps=1e-7)
        assert ce.loc[0.5, "finite-difference ratio"] == pytest.approx(1.0, rel=1e-5)

    def test_paper_and_corrected_columns(self):
        ce = S.counterexample_table([0.01])
        assert ce.loc[0.01, "paper: min{1/(4T), √2}"] == pytest.approx(SQRT2)
        assert ce.loc[0.01, "corrected: 1/(2T)"] == pytest.approx(50.0)

    def test_rejects_a_bad_temperature(self):
        with pytest.raises(ValueError, match="temperatures"):
            S.counterexample_table([0.0])


class TestCorollary3SideBySide:
    def test_columns_follow_the_formulas(self):
        Ts = np.array([1e-3, 0.25, 10.0])
        side = S.corollary3_side_by_side(Ts)
        np.testing.assert_allclose(side["paper: min{1/(4T), √2}"], np.minimum(1 / (4 * Ts), SQRT2))
        np.testing.assert_allclose(side["entrywise 1/(4T)"], 1 / (4 * Ts))
        np.testing.assert_allclose(side["row √2/(4T)"], SQRT2 / (4 * Ts))
        np.testing.assert_allclose(side["spectral 1/(2T)"], 1 / (2 * Ts))

    def test_one_sensitivity_column_per_eps(self):
        side = S.corollary3_side_by_side([0.1, 1.0], [1e-3, 10.0])
        col = "g bound, ε=10: min{1/(2T), √2/ε}"
        assert "g bound, ε=0.001: min{1/(2T), √2/ε}" in side and col in side
        np.testing.assert_allclose(side[col], [SQRT2 / 10, SQRT2 / 10])

    def test_tie_column_is_the_spectral_norm_at_the_tie(self):
        side = S.corollary3_side_by_side([0.2])
        assert side["‖J‖₂ at a tie"].iloc[0] == pytest.approx(np.linalg.norm(softmax_jacobian([0.0, 0.0], 0.2), 2))

    def test_rejects_bad_eps(self):
        with pytest.raises(ValueError, match="eps_values"):
            S.corollary3_side_by_side([1.0], [-1.0])


# ----------------------------------------------------------------------------------------------------------------
# the temperature slider
# ----------------------------------------------------------------------------------------------------------------
class TestTieRow:
    def test_is_in_decreasing_order(self):
        row = S.tie_row(8, gap=0.05, seed=0)
        assert (np.diff(row) <= 0).all() and row.shape == (8,)

    def test_leading_gap_is_the_requested_one(self):
        row = S.tie_row(8, gap=0.05, seed=0)
        assert row[0] - row[1] == pytest.approx(0.05, abs=1e-15)

    def test_other_entries_are_the_sorted_draws(self):
        draws = np.sort(np.random.default_rng(1).normal(size=6))[::-1]
        np.testing.assert_array_equal(S.tie_row(6, gap=0.01, seed=1)[2:], draws[2:])

    def test_rejects_a_gap_that_breaks_the_order(self):
        with pytest.raises(ValueError, match="gap"):
            S.tie_row(8, gap=100.0)

    def test_rejects_a_short_row(self):
        with pytest.raises(ValueError, match="L"):
            S.tie_row(2)


class TestTemperatureSweep:
    def test_default_grid_is_121_log_spaced_temperatures(self):
        sw = S.temperature_sweep([0.0, 1.0, 2.0])
        np.testing.assert_allclose(sw["T"], np.logspace(-3, 2, 121))

    def test_norms_match_numpy(self):
        row, Ts = np.array([1.0, 0.95, -0.3]), [0.01, 0.1, 1.0]
        sw = S.temperature_sweep(row, Ts)
        for r in sw.itertuples():
            J = softmax_jacobian(row, r.T)
            assert r.spectral == pytest.approx(np.linalg.norm(J, 2), rel=1e-9, abs=1e-300)
            assert r.entrywise == pytest.approx(np.abs(J).max(), rel=1e-12, abs=1e-300)

    def test_bounds_follow_the_formulas(self):
        Ts = np.array([0.01, 1.0])
        sw = S.temperature_sweep([0.0, 1.0], Ts)
        np.testing.assert_allclose(sw["paper"], np.minimum(1 / (4 * Ts), SQRT2))
        np.testing.assert_allclose(sw["bound_spectral"], 1 / (2 * Ts))
        np.testing.assert_allclose(sw["bound_row"], SQRT2 / (4 * Ts))

    def test_rejects_a_bad_row(self):
        with pytest.raises(ValueError, match="row"):
            S.temperature_sweep([1.0])

    def test_rejects_bad_temperatures(self):
        with pytest.raises(ValueError, match="temperatures"):
            S.temperature_sweep([0.0, 1.0], [0.1, np.nan])


class TestRenderTemperature:
    ROW = np.array([1.3, 1.25, 0.6, 0.1])

    def test_returns_a_figure_with_its_provenance(self):
        fig = S.render_temperature(0.1, self.ROW, seed=0)
        assert isinstance(fig, Figure)
        label = figure_provenance(fig)
        assert "model: none" in label and "seed: 0" in label and "top-2 gap 0.05" in label

    def test_bars_are_the_softmax_weights(self):
        fig = S.render_temperature(0.3, self.ROW)
        heights = [p.get_height() for p in fig.axes[0].patches]
        np.testing.assert_allclose(heights, softmax(self.ROW, 0.3), rtol=1e-6)

    @pytest.mark.parametrize("T, word", [(0.05, "above"), (0.001, "below")])  # near the tie; one-hot
    def test_title_says_whether_the_spectral_norm_is_above_the_paper(self, T, word):
        norm = np.linalg.norm(softmax_jacobian(self.ROW, T), 2)
        assert (norm > min(1 / (4 * T), SQRT2)) == (word == "above")  # the reference decides
        assert f"({word} the paper's curve)" in S.render_temperature(T, self.ROW).axes[1].get_title()

    def test_uses_a_given_sweep(self):
        sw = S.temperature_sweep(self.ROW, [0.1, 1.0])
        fig = S.render_temperature(0.1, self.ROW, sw)
        np.testing.assert_allclose(fig.axes[1].lines[0].get_xdata(), [0.1, 1.0])

    def test_rejects_a_bad_temperature(self):
        with pytest.raises(ValueError, match="temperature"):
            S.render_temperature(-1.0, self.ROW)

    def test_rejects_a_sweep_without_its_columns(self):
        with pytest.raises(ValueError, match="sweep"):
            S.render_temperature(0.1, self.ROW, pd.DataFrame({"T": [0.1]}))
