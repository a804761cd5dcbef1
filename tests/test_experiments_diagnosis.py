"""experiments.critical_n_diagnosis (the critical-N diagnosis with its counterfactual layers) and
experiments.gradient_sensitivity_raw (Algorithm 5 on the raw scores q.k) on the tiny GPT-2 of tests/conftest.py."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from conftest import small_profile

from attn_lib import experiments as E

pytestmark = pytest.mark.numerical  # run twice by `make test`: with the accelerator, and --without-numba

TEXT = (
    "Well, Prince, so Genoa and Lucca are now just family estates of the Buonapartes. But I warn you, if you "
    "don't tell me that this means war, I will not believe it. "
) * 12
L = 32
FRACTIONS = (3 / 32, 10 / 32, 0.5)  # N = 3, 10, 16
KEY = ["layer", "head", "N"]


@pytest.fixture(scope="module")
def diag(tiny_gpt2):
    return E.critical_n_diagnosis(tiny_gpt2, TEXT, L=L, fractions=FRACTIONS, rows=0)


class TestCriticalNDiagnosis:
    def test_columns(self, diag):
        want = [
            "variant",
            "temperature",
            "first_value_zero",
            "L",
            "N",
            "layer",
            "head",
            "kv_group",
            "n_rows",
            "d_tilde",
            "e1",
            "lead_d_tilde",
            "lead_e1",
            "rho_mean",
            "rho_median",
            "bound_violations",
            "sink_share",
            "model",
            "text",
            "device",
        ]
        assert set(want) <= set(diag.columns)

    def test_one_row_per_variant_layer_head_and_n(self, tiny_gpt2, diag):
        assert set(diag["variant"]) == set(E.diagnosis.DIAGNOSIS_VARIANTS) and set(diag["N"]) == {3, 10, 16}
        n = len(E.diagnosis.DIAGNOSIS_VARIANTS) * tiny_gpt2.n_layers * tiny_gpt2.n_heads * 3
        assert len(diag) == n and not diag.duplicated(["variant", *KEY]).any()

    def test_variants_carry_their_settings(self, diag):
        got = diag.groupby("variant")[["temperature", "first_value_zero"]].first()
        for name, (T, zero) in E.diagnosis.DIAGNOSIS_VARIANTS.items():
            assert (got.loc[name, "temperature"], bool(got.loc[name, "first_value_zero"])) == (T, zero)

    def test_no_bound_violations(self, diag):
        assert int(diag["bound_violations"].sum()) == 0

    def test_rows_are_those_with_n_plus_one_visible_tokens(self, diag):
        """rows=0 keeps every row with t >= 3; at N the valid ones have t >= N + 1: L - N rows."""
        assert (diag["n_rows"] == L - diag["N"]).all()

    def test_model_variant_matches_distance_vs_n(self, tiny_gpt2, diag):
        """On every row with t >= N + 1 (N >= 2), the model's d~ and E1 are Algorithm 2's head means."""
        ref = E.distance_vs_n(tiny_gpt2, TEXT, L=L, n_values=[3, 10, 16], mc_samples=1, mc_rows=1)
        m = diag[diag["variant"] == "model"].merge(ref, on=KEY, suffixes=("", "_ref"))
        assert len(m) == len(diag) // len(E.diagnosis.DIAGNOSIS_VARIANTS)
        np.testing.assert_allclose(m["d_tilde"], m["d_tilde_ref"], rtol=1e-5)
        np.testing.assert_allclose(m["e1"], m["e1_ref"], rtol=1e-5)

    def test_first_value_zero_changes_the_layer(self, diag):
        a = diag[diag["variant"] == "model"].set_index(KEY)
        b = diag[diag["variant"] == "first value 0"].set_index(KEY).loc[a.index]
        assert not np.allclose(a["rho_median"], b["rho_median"])
        assert not np.allclose(a["d_tilde"], b["d_tilde"])
        np.testing.assert_allclose(a["sink_share"], b["sink_share"])  # same weights: only the value changed

    @pytest.mark.parametrize("variant", ["T=4", "T=16"])
    def test_a_temperature_changes_the_weights(self, diag, variant):
        a = diag[diag["variant"] == "model"].set_index(KEY)
        b = diag[diag["variant"] == variant].set_index(KEY).loc[a.index]
        assert not np.allclose(a["sink_share"], b["sink_share"]) and not np.allclose(a["e1"], b["e1"])

    def test_kv_groups_of_gpt2_are_the_heads(self, diag):
        assert (diag["kv_group"] == diag["head"]).all()

    def test_rows_subsample(self, tiny_gpt2):
        d = E.critical_n_diagnosis(tiny_gpt2, TEXT, L=L, fractions=[0.1], rows=8, variants={"model": (1.0, False)})
        # rows every 4th ending at the last: t = 4, 8, ..., 32; N = 3 needs t >= 4
        assert (d["n_rows"] == 8).all() and set(d["N"]) == {3}

    def test_custom_variants(self, tiny_gpt2):
        d = E.critical_n_diagnosis(
            tiny_gpt2, TEXT, L=16, fractions=[0.25], rows=0, variants={"a": (2.0, False), "b": (2.0, True)}
        )
        assert set(d["variant"]) == {"a", "b"}

    @pytest.mark.parametrize(
        "kwargs, name",
        [
            (dict(L=3), "L"),
            (dict(L=100000), "L"),
            (dict(fractions=[0.0]), "fractions"),
            (dict(fractions=[1.0]), "fractions"),
            (dict(fractions=[]), "fractions"),
            (dict(rows=-1), "rows"),
            (dict(variants={}), "variants"),
            (dict(variants={"x": (1.0, 1)}), "variants"),
            (dict(variants={"x": (0.0, False)}), "variants"),
            (dict(variants={"x": 1.0}), "variants"),
        ],
    )
    def test_bad_input(self, tiny_gpt2, kwargs, name):
        args = dict(L=16, fractions=[0.25], rows=0)
        args.update(kwargs)
        with pytest.raises(ValueError, match=name):
            E.critical_n_diagnosis(tiny_gpt2, TEXT, **args)


RAW_T = (0.01, 0.1, 1.0, 10.0)
RAW_E = (1e-3, 0.1)


@pytest.fixture(scope="module")
def raw(tiny_gpt2):
    return E.gradient_sensitivity_raw(tiny_gpt2, TEXT, L=L, temperatures=RAW_T, eps_values=RAW_E)


class TestGradientSensitivityRaw:
    def test_columns_say_the_base(self, tiny_gpt2, raw):
        assert (raw["temperature_base"] == "raw q.k").all() and (raw["head_dim"] == tiny_gpt2.head_dim).all()
        assert {"T", "eps", "layer", "head", "g", "g_row_max", "bound_corrected", "bound_paper"} <= set(raw.columns)
        assert "rows_above_paper" not in raw.columns

    def test_grid_in_raw_units(self, raw):
        np.testing.assert_allclose(sorted(raw["T"].unique()), RAW_T, rtol=1e-12)
        np.testing.assert_allclose(sorted(raw["eps"].unique()), RAW_E, rtol=1e-12)

    def test_is_the_scaled_run_at_t_and_eps_over_sqrt_d(self, tiny_gpt2, raw):
        """g_raw(T, ε) = g_scaled(T/√d, ε/√d)/√d: the same rows and directions, another unit of score."""
        c = math.sqrt(tiny_gpt2.head_dim)
        sc = E.gradient_sensitivity(
            tiny_gpt2, TEXT, L=L, temperatures=[T / c for T in RAW_T], eps_values=[e / c for e in RAW_E]
        )
        sc = sc.assign(T=(sc["T"] * c).round(12), eps=(sc["eps"] * c).round(12))
        r = raw.assign(T=raw["T"].round(12), eps=raw["eps"].round(12))
        m = r.merge(sc, on=["T", "eps", "layer", "head"], suffixes=("", "_s"))
        assert len(m) == len(raw) == len(sc)
        np.testing.assert_allclose(m["g"], m["g_s"] / c, rtol=1e-10)
        np.testing.assert_allclose(m["g_row_max"], m["g_row_max_s"] / c, rtol=1e-10)
        assert (m["n_rows"] == m["n_rows_s"]).all()

    def test_differs_from_the_scaled_run_at_the_same_numbers(self, tiny_gpt2, raw):
        sc = E.gradient_sensitivity(tiny_gpt2, TEXT, L=L, temperatures=RAW_T, eps_values=RAW_E)
        m = raw.merge(sc, on=["T", "eps", "layer", "head"], suffixes=("", "_s"))
        assert not np.allclose(m["g"], m["g_s"])

    def test_bounds_in_raw_units(self, raw):
        np.testing.assert_allclose(raw["bound_corrected"], np.minimum(1 / (2 * raw["T"]), math.sqrt(2) / raw["eps"]))
        np.testing.assert_allclose(raw["bound_paper"], np.minimum(1 / (4 * raw["T"]), math.sqrt(2)))

    def test_no_row_above_the_corrected_bound(self, raw):
        assert int(raw["rows_violating_corrected"].sum()) == 0
        assert (raw["g_row_max"] <= raw["bound_corrected"] * (1 + 1e-9)).all()

    @pytest.mark.parametrize(
        "kwargs, name",
        [
            (dict(temperatures=[0.0]), "temperatures"),
            (dict(temperatures=[]), "temperatures"),
            (dict(eps_values=[-1.0]), "eps_values"),
            (dict(L=1), "L"),
            (dict(rows=-2), "rows"),
            (dict(seed=-1), "seed"),
        ],
    )
    def test_bad_input(self, tiny_gpt2, kwargs, name):
        args = dict(L=16, temperatures=[1.0], eps_values=[0.1])
        args.update(kwargs)
        with pytest.raises(ValueError, match=name):
            E.gradient_sensitivity_raw(tiny_gpt2, TEXT, **args)


def test_run_all_carries_both(tiny_gpt2):
    """The profile's pass runs both experiments with the others (the report's sensitivity and critical-N rows)."""
    prof = small_profile(
        "t",
        lengths=(8, 16),
        L=16,
        N=2,
        n_values=(1, 2),
        sep_n_values=(1, 2),
        temperatures=(0.01, 1.0),
        eps_values=(0.1,),
        mc=(2, 2),
        stage=15,
        crit_fraction=1.0,
    )
    res = E.run_all(tiny_gpt2, TEXT, prof, experiments=["critical_n_diagnosis", "gradient_sensitivity_raw"])
    assert isinstance(res["critical_n_diagnosis"], pd.DataFrame) and len(res["critical_n_diagnosis"])
    assert (res["gradient_sensitivity_raw"]["temperature_base"] == "raw q.k").all()
