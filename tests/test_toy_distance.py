"""attn_lib.book.toy.distance: the synthetic instances of chapter 2, checked against attn_lib.theory, brute force and
independent re-draws of the same random streams."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
import sympy as sp
from conftest import figure_provenance
from matplotlib.figure import Figure

from attn_lib import theory
from attn_lib.book import symbolic, toy
from attn_lib.book.toy import distance as D


def _softmax(z):
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _brute_distance(a, X, sel):
    """d~ for the selected index set ``sel`` by a plain loop."""
    s = sum(a[j] * X[j] for j in sel)
    return sum(np.linalg.norm(a[i] * X[i] - s) for i in range(len(a)) if i not in sel)


# ---------------------------------------------------------------------------------------------------------------
def test_toy_package_exports_the_distance_functions():
    for name in D.__all__:
        assert getattr(toy, name) is getattr(D, name)


# random_row ----------------------------------------------------------------------------------------------------
class TestRandomRow:
    def test_matches_an_independent_draw(self):
        alpha, X = toy.random_row(8, 4, logit_scale=1.5, seed=3)
        rng = np.random.default_rng(3)
        np.testing.assert_allclose(alpha, _softmax(rng.normal(size=8) * 1.5), rtol=1e-14)
        np.testing.assert_array_equal(X, rng.normal(size=(8, 4)))

    def test_weights_are_a_distribution(self):
        alpha, _ = toy.random_row(50, 2, logit_scale=30.0, seed=0)
        assert alpha.min() >= 0 and np.isclose(alpha.sum(), 1.0)

    @pytest.mark.parametrize(
        "kwargs, name",
        [
            (dict(L=0, d=2), "L"),
            (dict(L=3, d=0), "d"),
            (dict(L=3, d=2, logit_scale=0.0), "logit_scale"),
            (dict(L=3, d=2, seed=-1), "seed"),
        ],
    )
    def test_bad_input(self, kwargs, name):
        with pytest.raises(ValueError, match=name):
            toy.random_row(**kwargs)


# theorem1_instances --------------------------------------------------------------------------------------------
class TestTheorem1Instances:
    def test_shape_and_columns(self):
        inst = toy.theorem1_instances(60, batch=20, seed=1)
        assert len(inst) == 60 and inst["group"].nunique() == 3
        assert {"L", "N", "d", "d_tilde", "d_max", "lin_lower", "lin_upper"} <= set(inst.columns)

    def test_grids_of_the_draws(self):
        inst = toy.theorem1_instances(2000, batch=10, seed=2)
        assert inst.L.between(2, 60).all() and (inst.N >= 1).all() and (inst.N < inst.L).all()
        assert inst.d.between(2, 16).all()

    def test_first_group_matches_an_independent_draw(self):
        inst = toy.theorem1_instances(6, batch=3, seed=4)
        rng = np.random.default_rng(4)
        L = int(rng.integers(2, 61))
        N = int(rng.integers(1, L))
        d = int(rng.integers(2, 17))
        sharp = 10 ** rng.uniform(-1, 2, size=(3, 1))
        alpha = _softmax(rng.normal(size=(3, L)) * sharp)
        X = rng.normal(size=(3, L, d)) * 10 ** rng.uniform(-1, 1, size=(3, 1, 1))
        first = inst[inst.group == 0]
        assert (first.L == L).all() and (first.N == N).all() and (first.d == d).all()
        top = np.argsort(-alpha, axis=-1, kind="stable")[:, :N]
        brute = [_brute_distance(alpha[k], X[k], set(top[k].tolist())) for k in range(3)]
        np.testing.assert_allclose(first.d_tilde, brute, rtol=1e-10)

    def test_bound_and_fact1_hold_on_every_row(self):
        inst = toy.theorem1_instances(200, batch=4, seed=5)
        assert (inst.d_tilde <= inst.d_max * (1 + 1e-10)).all()
        assert (inst.lin_lower <= inst.d_tilde * (1 + 1e-10) + 1e-10).all()
        assert (inst.d_tilde <= inst.lin_upper * (1 + 1e-10)).all()

    def test_same_seed_same_table(self):
        pd.testing.assert_frame_equal(
            toy.theorem1_instances(20, batch=5, seed=7), toy.theorem1_instances(20, batch=5, seed=7)
        )

    @pytest.mark.parametrize(
        "kwargs, name",
        [
            (dict(n_instances=25, batch=10), "n_instances"),
            (dict(n_instances=5, batch=10), "n_instances"),
            (dict(n_instances=10, batch=0), "batch"),
        ],
    )
    def test_bad_input(self, kwargs, name):
        with pytest.raises(ValueError, match=name):
            toy.theorem1_instances(**kwargs)


# theorem1_tight_case -------------------------------------------------------------------------------------------
class TestTheorem1TightCase:
    def test_values_against_theory(self):
        tight = toy.theorem1_tight_case([3.0], L=5, d=3, seed=0)
        rng = np.random.default_rng(0)
        X = rng.normal(size=(5, 3))
        X[0] *= 2 * np.linalg.norm(X, axis=1).max() / np.linalg.norm(X[0])
        a = _softmax(np.array([3.0, 0, 0, 0, 0]))
        assert tight.loc[3.0, "abar_N"] == pytest.approx(a[0])
        assert tight.loc[3.0, "d~"] == pytest.approx(_brute_distance(a, X, {0}), rel=1e-12)
        assert tight.loc[3.0, "d_max"] == pytest.approx(theory.theorem1_dmax(a, X, 1), rel=1e-12)

    def test_ratio_tends_to_one(self):
        tight = toy.theorem1_tight_case([1, 5, 40], L=16, d=8, seed=0)
        assert tight["d~/d_max"].is_monotonic_increasing and tight["d~/d_max"].iloc[-1] > 1 - 1e-9

    @pytest.mark.parametrize(
        "kwargs, name", [(dict(logits=[]), "logits"), (dict(logits=[np.nan]), "logits"), (dict(L=1), "L")]
    )
    def test_bad_input(self, kwargs, name):
        with pytest.raises(ValueError, match=name):
            toy.theorem1_tight_case(**kwargs)


# enumeration_cases / enumeration_errors ------------------------------------------------------------------------
class TestEnumerationCases:
    def test_exact_expectation_by_brute_force(self):
        cases = toy.enumeration_cases(5, mc_samples=8, seed=0)
        rng = np.random.default_rng(0)
        L = int(rng.integers(3, 9))
        N = int(rng.integers(1, L))
        d = int(rng.integers(2, 9))
        a = _softmax(rng.normal(size=L) * 10 ** rng.uniform(-1, 1.5))
        X = rng.normal(size=(L, d))
        subsets = list(itertools.combinations(range(L), N))
        brute = np.mean([_brute_distance(a, X, set(c)) for c in subsets])
        assert (cases.L.iloc[0], cases.N.iloc[0]) == (L, N)
        assert cases.exact.iloc[0] == pytest.approx(brute, rel=1e-12)

    def test_gap_is_exact_minus_e1_and_within_the_bounds(self):
        cases = toy.enumeration_cases(40, mc_samples=16, seed=1)
        np.testing.assert_allclose(cases.gap, cases.exact - cases.e1)
        assert (cases.gap >= -1e-12).all() and (cases.gap <= cases.bound + 1e-12).all()
        assert (cases.bound <= cases.crude + 1e-12).all()

    def test_monte_carlo_uses_seed_plus_case_index(self):
        cases = toy.enumeration_cases(3, mc_samples=16, seed=10)
        rng = np.random.default_rng(10)
        for k in range(3):
            L = int(rng.integers(3, 9))
            N = int(rng.integers(1, L))
            d = int(rng.integers(2, 9))
            a = theory.softmax_np(rng.normal(size=L) * 10 ** rng.uniform(-1, 1.5))
            X = rng.normal(size=(L, d))
            assert cases.mc.iloc[k] == theory.expected_distance_mc(a, X, N, n_samples=16, seed=10 + k)

    def test_bad_input(self):
        with pytest.raises(ValueError, match="mc_samples"):
            toy.enumeration_cases(3, mc_samples=1)
        with pytest.raises(ValueError, match="n_cases"):
            toy.enumeration_cases(0)


class TestEnumerationErrors:
    def test_mean_relative_errors(self):
        cases = pd.DataFrame(
            dict(
                exact=[1.0, 2.0],
                e1=[0.9, 2.2],
                e1_L=[0.5, 2.0],
                e2=[1.0, 1.0],
                bound=[0.2, 0.0],
                mc=[1.0, 2.1],
                mc_samples=[4, 4],
            )
        )
        err = toy.enumeration_errors(cases).iloc[:, 0]
        assert err["E1, p = N/(L-1)"] == pytest.approx((0.1 + 0.1) / 2)
        assert err["E1, p = N/L"] == pytest.approx((0.5 + 0.0) / 2)
        assert err["E1 + gap bound"] == pytest.approx((0.1 + 0.1) / 2)
        assert err["E2 (heuristic)"] == pytest.approx((0.0 + 0.5) / 2)
        assert err["Monte Carlo, K = 4"] == pytest.approx((0.0 + 0.05) / 2)

    def test_rejects_zero_exact(self):
        cases = pd.DataFrame(dict(exact=[0.0], e1=[0.0], e1_L=[0.0], e2=[0.0], bound=[0.0], mc=[0.0], mc_samples=[4]))
        with pytest.raises(ValueError, match="exact"):
            toy.enumeration_errors(cases)

    def test_rejects_other_tables(self):
        with pytest.raises(ValueError, match="cases"):
            toy.enumeration_errors(pd.DataFrame({"exact": [1.0]}))


# sink_row / corollary2_sequence --------------------------------------------------------------------------------
class TestSinkRow:
    def test_matches_an_independent_draw(self):
        alpha, X = toy.sink_row(32, d=4, sink=1.0, seed=2)
        rng = np.random.default_rng([2, 32])
        z = rng.normal(size=32)
        z[0] = np.log(32) + 1.0
        np.testing.assert_allclose(alpha, _softmax(z), rtol=1e-14)
        np.testing.assert_array_equal(X, rng.normal(size=(32, 4)))

    def test_sink_keeps_its_mass_as_L_grows(self):
        shares = [toy.sink_row(L, seed=0)[0][0] for L in (64, 4096)]
        assert min(shares) > 0.3

    def test_bad_sink(self):
        with pytest.raises(ValueError, match="sink"):
            toy.sink_row(8, sink=float("inf"))


class TestCorollary2Sequence:
    def test_columns_against_theory(self):
        syn = toy.corollary2_sequence([8, 16], N=2, d=3, mc_samples=8, seed=1)
        a, X = toy.sink_row(16, d=3, seed=1)
        row = syn.loc[16]
        assert row["d~"] == pytest.approx(theory.distance(a, X, 2))
        assert row["E1 + gap"] == pytest.approx(theory.expectation_e1(a, X, 2) + theory.jensen_gap_bound(a, X, 2))
        assert row["Monte Carlo"] == pytest.approx(theory.expected_distance_mc(a, X, 2, n_samples=8, seed=1))
        assert row["(1+N) max||x||"] == pytest.approx(3 * np.linalg.norm(X, axis=1).max())

    def test_remainder_is_e1_minus_individual(self):
        syn = toy.corollary2_sequence([16, 64], N=3, seed=0)
        np.testing.assert_allclose(syn["remainder"], syn["E1"] - syn["individual"], rtol=1e-12)

    def test_d_tilde_grows_linearly_with_a_sink(self):
        syn = toy.corollary2_sequence([64, 256, 1024], N=5, mc_samples=8, seed=0)
        growth = syn["d~"].iloc[-1] / syn["d~"].iloc[0]
        assert 8 < growth < 32  # L grew 16x; slope ||s|| stays away from 0

    @pytest.mark.parametrize("lengths", [[5], [8, 8], []])
    def test_bad_lengths(self, lengths):
        with pytest.raises(ValueError, match="lengths"):
            toy.corollary2_sequence(lengths, N=5)


# top_n_curves --------------------------------------------------------------------------------------------------
class TestTopNCurves:
    def test_against_theory_for_every_N(self):
        a, X = toy.random_row(6, 3, seed=0)
        cur = toy.top_n_curves(a, X, mc_samples=8, seed=0)
        assert list(cur.index) == [1, 2, 3, 4, 5, 6]
        for n in cur.index:
            assert cur.loc[n, "d~"] == pytest.approx(theory.distance(a, X, n), abs=1e-15)
            assert cur.loc[n, "E2"] == pytest.approx(theory.expectation_e2(a, X, n), abs=1e-15)

    def test_everything_vanishes_at_N_equals_L(self):
        a, X = toy.random_row(7, 2, seed=1)
        assert np.allclose(toy.top_n_curves(a, X).loc[7], 0.0)

    def test_rejects_a_batch(self):
        with pytest.raises(ValueError, match="alpha"):
            toy.top_n_curves(np.full((2, 3), 1 / 3), np.zeros((2, 3, 2)))


# figures -------------------------------------------------------------------------------------------------------
class TestFigures:
    def test_corollary2_figure_is_labelled(self):
        syn = toy.corollary2_sequence([8, 16], N=2, mc_samples=4, seed=0)
        fig = toy.figure_corollary2_sequence(syn, N=2, text="synthetic sink row", seed=0)
        assert isinstance(fig, Figure)
        assert figure_provenance(fig) == "model: none · text: synthetic sink row · device: cpu · seed: 0"
        assert len(fig.axes[0].get_lines()) == len(D.STYLES)

    def test_top_n_figure_marks_N(self):
        a, X = toy.random_row(10, 2, seed=0)
        cur = toy.top_n_curves(a, X, mc_samples=4)
        fig = toy.figure_top_n(3, alpha=a, curves=cur, text="random row", seed=0)
        assert "top-3" in fig.axes[0].get_title() and fig.axes[1].get_title().startswith("N = 3")
        assert sum(p.get_facecolor()[:3] != (0.7, 0.7, 0.7) for p in fig.axes[0].patches) == 3
        assert figure_provenance(fig).startswith("model: none · text: random row")

    def test_top_n_figure_rejects_N_outside_the_row(self):
        a, X = toy.random_row(4, 2, seed=0)
        with pytest.raises(ValueError, match="N"):
            toy.figure_top_n(5, alpha=a, curves=toy.top_n_curves(a, X), text="t", seed=0)

    def test_corollary2_figure_rejects_other_tables(self):
        with pytest.raises(ValueError, match="table"):
            toy.figure_corollary2_sequence(pd.DataFrame({"d~": [1.0]}), N=1, text="t", seed=0)


# LaTeX lines of the SymPy results ------------------------------------------------------------------------------
class TestLatex:
    def test_theorem1_steps_lines(self):
        t1 = symbolic.theorem1_steps(N=2, d=2)
        lines = toy.theorem1_steps_latex(t1)
        assert len(lines) == 8
        assert lines[1].endswith(sp.latex(t1["step1_check"]))  # step 1's difference (the zero vector)
        assert "triangle inequality" in lines[3] and r"\ge 0" in lines[3]  # step 3's slack, decided by SymPy
        assert r"\bar{\alpha}_N" in lines[4] and "abar" not in lines[4]  # symbols typeset, not raw names
        assert lines[4].endswith("= 0") and r"\sum_{k=1}^{L - N}" in lines[5]  # step 4's difference; step 5's Sum
        assert lines[-1].endswith("= 0")

    def test_corollary2_remainder_lines(self):
        lines = toy.corollary2_remainder_latex(symbolic.corollary2_remainder_symbolic())
        assert len(lines) == 4
        assert "reverse triangle inequality" in lines[1] and r"\|a_i\|" in lines[1]  # norms typeset verbatim
        assert r"\frac{N}{L}" in lines[2] and r"\ge 0" in lines[2]
        assert lines[3].endswith("0") and r"\frac{L N \|z\|}{L - 1}" in lines[3]

    def test_random_variance_lines(self):
        rv = symbolic.theorem1_random_variance(n=4, N=2)
        lines = toy.random_variance_latex(rv, n=4, N=2)
        assert len(lines) == 3 and lines[0].startswith(r"n=4,\ N=2")
        assert r"\frac{1}{6}" in lines[0]  # Pr(j, k in I_N) = 1/6 for n=4, N=2
        assert lines[2].endswith(r"\text{difference } 0")

    def test_corollary2_limit_lines(self):
        lines = toy.corollary2_limits_latex(symbolic.corollary2_limits_symbolic())
        assert len(lines) == 2 and lines[1].endswith("0")

    def test_missing_keys(self):
        with pytest.raises(ValueError, match="t1"):
            toy.theorem1_steps_latex({"s": 1})
        with pytest.raises(ValueError, match="c2"):
            toy.corollary2_limits_latex([])
        with pytest.raises(ValueError, match="rem"):
            toy.corollary2_remainder_latex({"term": 1})
