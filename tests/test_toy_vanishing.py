"""Tests for attn_lib.book.toy.vanishing: the synthetic rows, constants, figures and SymPy helpers of chapter 1.

References are independent of the module: weights from ``F(z) / sum F(z)`` in numpy or ``scipy.special.softmax``,
closed forms of the constants and of the worst case, and the seeded generators drawn directly.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import sympy as sp
import torch
from conftest import figure_provenance
from matplotlib.figure import Figure
from scipy.special import softmax as scipy_softmax

from attn_lib.book import symbolic
from attn_lib.book.toy import vanishing as v

A, T = 2.0, 1.0
LS = [1, 2, 10, 100, 1000]
NUMPY_F = {  # independent numpy versions of the three F
    v.SOFTMAX: np.exp,
    "softplus": lambda z: np.log1p(np.exp(z)),
    "rational, F = 1 + z²": lambda z: 1 + z**2,
}
CLOSED_C2 = {  # M_F / m_F in closed form
    v.SOFTMAX: lambda a, t: math.exp(2 * a / t),
    "softplus": lambda a, t: math.log1p(math.exp(a / t)) / math.log1p(math.exp(-a / t)),
    "rational, F = 1 + z²": lambda a, t: 1 + (a / t) ** 2,
}
NAMES = list(v.FAMILIES)


def _reference_weights(name, logits, t):
    f = NUMPY_F[name](np.asarray(logits, float) / t)
    return f / f.sum()


def _extremes(name, a, t):
    """(m_F, M_F) of F(l / t) on a fine grid over [-a, a] (brute force)."""
    vals = NUMPY_F[name](np.linspace(-a, a, 200_001) / t)
    return vals.min(), vals.max()


@pytest.fixture(scope="module")
def curves():
    return v.lmax_curves(A, T, LS, seed=0)


@pytest.fixture(scope="module")
def table():
    return v.corollary1_table(16, [5, 50, 500], 4.0, seed=2)


# ---------------------------------------------------------------- rational / FAMILIES / Family


class TestFamilies:
    def test_rational_is_one_plus_square(self):
        z = np.array([-2.0, -0.5, 0.0, 3.0])
        np.testing.assert_array_equal(v.rational(z), 1 + z * z)

    def test_the_three_families_in_display_order(self):
        assert NAMES == [v.SOFTMAX, "softplus", "rational, F = 1 + z²"]

    @pytest.mark.parametrize("name", NAMES)
    def test_weights_are_F_over_the_sum_of_F(self, name):
        logits = np.random.default_rng(1).uniform(-A, A, size=50)
        np.testing.assert_allclose(
            v.FAMILIES[name].weights(logits, 0.7), _reference_weights(name, logits, 0.7), rtol=1e-12
        )

    @pytest.mark.parametrize("name", NAMES)
    def test_at_scales_the_logits_by_the_temperature(self, name):
        l = torch.linspace(-A, A, 9, dtype=torch.float64)
        np.testing.assert_allclose(v.FAMILIES[name].at(0.5)(l).numpy(), NUMPY_F[name](l.numpy() / 0.5), rtol=1e-12)

    @pytest.mark.parametrize("name", NAMES)
    @pytest.mark.parametrize("t", [0.3, 1.0, 5.0])
    def test_peak_and_trough_are_the_extrema_of_F_on_the_interval(self, name, t):
        fam, F = v.FAMILIES[name], NUMPY_F[name]
        m_F, M_F = _extremes(name, A, t)
        assert F(fam.peak * A / t) == pytest.approx(M_F, rel=1e-12)
        assert F(fam.trough * A / t) == pytest.approx(m_F, rel=1e-9)

    def test_at_rejects_a_non_positive_temperature(self):
        with pytest.raises(ValueError, match="temperature"):
            v.FAMILIES[v.SOFTMAX].at(0.0)


# ---------------------------------------------------------------- random_logits


class TestRandomLogits:
    def test_draws_in_order_from_the_seeded_generator(self):
        rng = np.random.default_rng(7)
        expected = {L: rng.uniform(-A, A, size=L) for L in LS}
        got = v.random_logits(LS, A, seed=7)
        assert list(got) == LS
        for L in LS:
            np.testing.assert_array_equal(got[L], expected[L])

    def test_rows_lie_in_the_interval(self):
        rows = v.random_logits([1000], 0.5, seed=0)
        assert np.abs(rows[1000]).max() <= 0.5

    @pytest.mark.parametrize(
        "kwargs, name",
        [(dict(lengths=[]), "lengths"), (dict(lengths=[0]), "lengths"), (dict(a=0.0), "a"), (dict(seed=-1), "seed")],
    )
    def test_rejects_bad_input(self, kwargs, name):
        args = dict(lengths=LS, a=A, seed=0) | kwargs
        with pytest.raises(ValueError, match=name):
            v.random_logits(**args)


# ---------------------------------------------------------------- extreme_logits


class TestExtremeLogits:
    @pytest.mark.parametrize("name", NAMES)
    @pytest.mark.parametrize("L", LS)
    def test_largest_weight_is_the_closed_form(self, name, L):
        m_F, M_F = _extremes(name, A, T)
        alpha = v.FAMILIES[name].weights(v.extreme_logits(name, L, A), T)
        assert L * alpha.max() == pytest.approx(L * M_F / (M_F + (L - 1) * m_F), rel=1e-9)

    @pytest.mark.parametrize("name", NAMES)
    @pytest.mark.parametrize("L", LS)
    def test_mirrored_smallest_weight_is_the_closed_form(self, name, L):
        m_F, M_F = _extremes(name, A, T)
        alpha = v.FAMILIES[name].weights(v.extreme_logits(name, L, A, largest=False), T)
        assert L * alpha.min() == pytest.approx(L * m_F / (m_F + (L - 1) * M_F), rel=1e-9)

    def test_accepts_a_family_object(self):
        np.testing.assert_array_equal(v.extreme_logits(v.FAMILIES["softplus"], 3, A), [A, -A, -A])

    @pytest.mark.parametrize("kwargs, name", [(dict(family="cosine"), "family"), (dict(L=0), "L"), (dict(a=-1.0), "a")])
    def test_rejects_bad_input(self, kwargs, name):
        args = dict(family=v.SOFTMAX, L=4, a=A) | kwargs
        with pytest.raises(ValueError, match=name):
            v.extreme_logits(**args)


# ---------------------------------------------------------------- constants


class TestConstants:
    @pytest.mark.parametrize("name", NAMES)
    @pytest.mark.parametrize("a, t", [(2.0, 1.0), (1.0, 0.25), (3.0, 4.0)])
    def test_C2_is_the_closed_form(self, name, a, t):
        assert v.constants(a, t).loc[name, "C2"] == pytest.approx(CLOSED_C2[name](a, t), rel=1e-9)

    @pytest.mark.parametrize("name", NAMES)
    def test_C1_is_the_reciprocal_of_C2(self, name):
        c = v.constants(A, T).loc[name]
        assert c["C1"] * c["C2"] == pytest.approx(1.0, rel=1e-12)

    def test_a_subset_of_families(self):
        assert list(v.constants(A, T, families=["softplus"]).index) == ["softplus"]

    @pytest.mark.parametrize(
        "kwargs, name",
        [
            (dict(a=0.0), "a"),
            (dict(temperature=-1.0), "temperature"),
            (dict(families=["nope"]), "families"),
            (dict(families=[]), "families"),
        ],
    )
    def test_rejects_bad_input(self, kwargs, name):
        args = dict(a=A, temperature=T) | kwargs
        with pytest.raises(ValueError, match=name):
            v.constants(**args)


# ---------------------------------------------------------------- random_check


class TestRandomCheck:
    def test_matches_a_loop_over_the_same_generator(self):
        rng = np.random.default_rng(3)
        expected = []
        for name in NAMES:
            for L in [5, 50]:
                for _ in range(2):
                    alpha = _reference_weights(name, rng.uniform(-A, A, size=L), T)
                    expected.append((L * alpha.min(), L * alpha.max(), alpha.sum()))
        got = v.random_check(A, T, [5, 50], draws=2, seed=3)
        np.testing.assert_allclose(got[["L·min α", "L·max α", "row sum"]].to_numpy(), np.array(expected), rtol=1e-12)

    def test_one_row_per_family_length_and_draw(self):
        got = v.random_check(A, T, [3, 30], draws=4, seed=0)
        assert len(got) == 3 * 2 * 4
        assert list(got.columns) == ["family", "L", "draw", "L·min α", "L·max α", "row sum"]

    def test_rows_respect_lemma_1(self):
        got = v.random_check(A, T, [1, 10, 1000], draws=3, seed=0).join(v.constants(A, T), on="family")
        assert (got["L·min α"] >= got["C1"] * (1 - 1e-12)).all()
        assert (got["L·max α"] <= got["C2"] * (1 + 1e-12)).all()

    def test_rejects_zero_draws(self):
        with pytest.raises(ValueError, match="draws"):
            v.random_check(A, T, LS, draws=0)


# ---------------------------------------------------------------- lmax_curves


class TestLmaxCurves:
    def test_random_curve_is_softmax_of_the_seeded_rows(self, curves):
        rows = v.random_logits(LS, A, seed=0)
        expected = [L * scipy_softmax(rows[L] / T).max() for L in LS]
        np.testing.assert_allclose(curves.random[v.SOFTMAX], expected, rtol=1e-12)

    def test_worst_case_stays_below_C2_and_approaches_it(self, curves):
        ratio = curves.worst_max / curves.constants["C2"]
        assert (ratio <= 1 + 1e-12).all().all()
        gap = (1 - ratio).to_numpy()
        assert (gap[1:] <= (curves.constants["C2"].to_numpy() / np.array(LS[1:])[:, None])).all()

    def test_mirrored_worst_case_stays_above_C1(self, curves):
        assert (curves.worst_min >= curves.constants["C1"] * (1 - 1e-12)).all().all()

    def test_ssmax_worst_case_is_its_closed_form(self, curves):
        s = 0.43  # SSMax default scale: z -> s log L z, so the top weight is 1 / (1 + (L - 1) L^(-2 a s / T))
        expected = [L / (1 + (L - 1) * L ** (-2 * A * s / T)) for L in LS]
        np.testing.assert_allclose(curves.ssmax_worst.to_numpy(), expected, rtol=1e-10)

    def test_lengths_property(self, curves):
        np.testing.assert_array_equal(curves.lengths, LS)

    def test_a_subset_of_families(self):
        got = v.lmax_curves(A, T, LS, families=[v.SOFTMAX])
        assert list(got.random.columns) == [v.SOFTMAX] and list(got.constants.index) == [v.SOFTMAX]


# ---------------------------------------------------------------- figures


class TestFigures:
    def test_figure_lmax_draws_the_curves(self, curves):
        fig = v.figure_lmax(curves)
        ax = fig.axes[0]
        solid = [line for line in ax.lines if line.get_label() == f"{v.SOFTMAX}: random logits"]
        np.testing.assert_allclose(solid[0].get_ydata(), curves.random[v.SOFTMAX])
        ssmax = [line for line in ax.lines if line.get_label().startswith("SSMax")]
        np.testing.assert_allclose(ssmax[0].get_ydata(), curves.ssmax_worst)

    def test_figure_lmax_names_its_data(self, curves):
        label = figure_provenance(v.figure_lmax(curves))
        assert label == "model: none · text: synthetic logits, uniform on [-2, 2] · device: cpu · seed: 0"

    def test_figure_lmax_is_not_managed_by_pyplot(self, curves):
        import matplotlib.pyplot as plt

        before = plt.get_fignums()
        assert isinstance(v.figure_lmax(curves), Figure)
        assert plt.get_fignums() == before

    def test_figure_lmax_rejects_other_input(self):
        with pytest.raises(ValueError, match="curves"):
            v.figure_lmax(pd.DataFrame())

    def test_render_temperature_draws_softmax_at_that_temperature(self):
        fig = v.render_temperature(0.5, a=A, lengths=LS, seed=0)
        worst = next(line for line in fig.axes[0].lines if line.get_label() == "worst case")
        expected = v.lmax_curves(A, 0.5, LS, families=[v.SOFTMAX]).worst_max[v.SOFTMAX]
        np.testing.assert_allclose(worst.get_ydata(), expected)
        assert f"{math.exp(2 * A / 0.5):.3g}" in "".join(t.get_text() for t in fig.axes[0].get_legend().get_texts())

    def test_render_temperature_names_its_data(self):
        assert "seed: 4" in figure_provenance(v.render_temperature(1.0, a=A, lengths=LS, seed=4))

    def test_render_temperature_rejects_a_non_positive_temperature(self):
        with pytest.raises(ValueError, match="temperature"):
            v.render_temperature(0.0, a=A, lengths=LS)

    def test_figure_temperature_needs_the_softmax_family(self):
        with pytest.raises(ValueError, match="softmax"):
            v.figure_temperature(v.lmax_curves(A, T, LS, families=["softplus"]))


# ---------------------------------------------------------------- corollary1_table


class TestCorollary1Table:
    def test_draws_and_weights_match_a_direct_computation(self, table):
        gen = torch.Generator().manual_seed(2)
        for L in [5, 50, 500]:
            q = torch.randn(16, generator=gen, dtype=torch.float64)
            K = torch.randn(L, 16, generator=gen, dtype=torch.float64)
            alpha = scipy_softmax((K @ q).numpy() / 4.0)
            delta = q.norm().item() * K.norm(dim=1).max().item()
            assert table.loc[L, "max α"] == pytest.approx(alpha.max(), rel=1e-12)
            assert table.loc[L, "min α"] == pytest.approx(alpha.min(), rel=1e-12)
            assert table.loc[L, "Δ"] == pytest.approx(delta, rel=1e-12)

    def test_bounds_are_corollary_1(self, table):
        L = table.index.to_numpy()
        np.testing.assert_allclose(table["upper"], np.exp(2 * table["Δ"] / 4.0) / L, rtol=1e-12)
        np.testing.assert_allclose(table["lower"], np.exp(-2 * table["Δ"] / 4.0) / L, rtol=1e-12)

    def test_weights_lie_within_the_bounds(self, table):
        assert (table["lower"] <= table["min α"]).all() and (table["max α"] <= table["upper"]).all()
        assert (table["max |l_j|"] <= table["Δ"]).all()

    @pytest.mark.parametrize(
        "kwargs, name", [(dict(dim=0), "dim"), (dict(temperature=0.0), "temperature"), (dict(lengths=[0]), "lengths")]
    )
    def test_rejects_bad_input(self, kwargs, name):
        args = dict(dim=4, lengths=[3], temperature=1.0) | kwargs
        with pytest.raises(ValueError, match=name):
            v.corollary1_table(**args)


# ---------------------------------------------------------------- resolve_min_max

a_, T_ = sp.symbols("a T", positive=True)


class TestResolveMinMax:
    def test_min_of_exponentials_with_positive_symbols(self):
        assert v.resolve_min_max(sp.Min(sp.exp(-a_ / T_), sp.exp(a_ / T_))) == sp.exp(-a_ / T_)

    def test_max_of_exponentials_with_positive_symbols(self):
        assert v.resolve_min_max(sp.Max(sp.exp(-a_ / T_), sp.exp(a_ / T_))) == sp.exp(a_ / T_)

    def test_min_of_softplus_values(self):
        expr = sp.Min(sp.log(1 + sp.exp(-a_ / T_)), sp.log(1 + sp.exp(a_ / T_)))
        assert v.resolve_min_max(expr) == sp.log(1 + sp.exp(-a_ / T_))

    def test_agrees_numerically_with_the_unresolved_min(self):
        expr = sp.Min(sp.exp(-a_ / T_), sp.exp(a_ / T_)) + sp.Max(1 + a_**2, 1)
        resolved = v.resolve_min_max(expr)
        for point in [{a_: 0.3, T_: 2.0}, {a_: 5.0, T_: 0.1}]:
            assert float(resolved.subs(point)) == pytest.approx(float(expr.subs(point)), rel=1e-14)

    def test_an_undecidable_order_is_kept(self):
        x, y = sp.symbols("x y", real=True)
        assert v.resolve_min_max(sp.Min(x, y)) == sp.Min(x, y)

    def test_resolves_inside_a_relation(self):
        L, S = sp.symbols("L S", positive=True)
        rel = sp.Le(L * sp.Min(sp.exp(-a_ / T_), sp.exp(a_ / T_)), S)
        assert v.resolve_min_max(rel) == sp.Le(L * sp.exp(-a_ / T_), S)

    def test_softmax_step_2_of_lemma_1(self):
        steps = symbolic.lemma1_constants_symbolic(
            sp.exp(sp.Symbol("l", real=True) / T_), sp.Symbol("l", real=True), a_
        )
        lower, upper = (v.resolve_min_max(r) for r in steps["sum_bounds"])
        assert not lower.has(sp.Min) and not upper.has(sp.Max)

    def test_rejects_a_non_sympy_object(self):
        with pytest.raises(ValueError, match="expr"):
            v.resolve_min_max(object())


# ---------------------------------------------------------------- latex_relations


class TestLatexRelations:
    def test_label_then_relations_side_by_side(self):
        x = sp.Symbol("x")
        assert v.latex_relations("step 2:", [sp.Le(0, x), sp.Le(x, 1)]) == (
            r"\text{step 2:}\quad 0 \leq x,\qquad x \leq 1"
        )

    @pytest.mark.parametrize(
        "label, relations, name",
        [("s", [], "relations"), (3, [sp.Le(0, 1)], "label"), ("s", sp.Symbol("x"), "relations")],
    )
    def test_rejects_bad_input(self, label, relations, name):
        with pytest.raises(ValueError, match=name):
            v.latex_relations(label, relations)
