"""attn_lib.book.tables, chapter 4 block: the tables and findings behind Fig. 4 (gradient sensitivity), on hand-made
result tables whose curves are known in closed form, and once on a real (tiny-model) Algorithm 5 result."""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd
import pytest

from attn_lib import claims
from attn_lib.book import tables

SQRT2 = math.sqrt(2)
TS = np.logspace(-3, 2, 11)  # 10^-3, 10^-2.5, ..., 10^2
EPS = (1e-3, 0.1, 10.0)


def _sens(g_of_T=lambda T, e, h: 0.01 / T * (1 + h), heads=3, n_rows=10, above=0, violating=0):
    """A result table shaped like experiments.gradient_sensitivity's: one row per (T, eps, layer, head)."""
    rows = []
    for T in TS:
        for e in EPS:
            for h in range(heads):
                g = g_of_T(T, e, h)
                rows.append(
                    {
                        "model": "toy",
                        "text": "toy-text",
                        "device": "cpu",
                        "L": 64,
                        "T": float(T),
                        "eps": e,
                        "layer": 0,
                        "head": h,
                        "n_rows": n_rows,
                        "g": g,
                        "g_row_max": g,
                        "bound_corrected": min(1 / (2 * T), SQRT2 / e),
                        "bound_paper": min(1 / (4 * T), SQRT2),
                        "rows_violating_corrected": violating,
                        "rows_above_paper": above,
                        "row_stride": 1,
                    }
                )
    return pd.DataFrame(rows)


class TestSensitivityBounds:
    def test_g_is_the_maximum_over_heads(self):
        cur = tables.sensitivity_bounds(_sens())
        np.testing.assert_allclose(cur["g"], 0.01 / cur["T"] * 3)  # head 2 has the factor 1 + 2

    def test_bounds_follow_both_forms_of_corollary3(self):
        cur = tables.sensitivity_bounds(_sens())
        np.testing.assert_allclose(cur["paper bound"], np.minimum(1 / (4 * cur["T"]), SQRT2))
        np.testing.assert_allclose(cur["corrected bound"], np.minimum(1 / (2 * cur["T"]), SQRT2 / cur["eps"]))

    def test_rejects_a_table_without_the_sensitivity_columns(self):
        with pytest.raises(ValueError, match="gradient_sensitivity"):
            tables.sensitivity_bounds(_sens().drop(columns="rows_above_paper"))

    def test_rejects_an_empty_table(self):
        with pytest.raises(ValueError, match="non-empty"):
            tables.sensitivity_bounds(_sens().iloc[:0])

    def test_rejects_a_non_dataframe(self):
        with pytest.raises(ValueError, match="DataFrame"):
            tables.sensitivity_bounds({"T": [1.0]})


class TestSensitivityFindings:
    def test_slope_of_a_one_over_T_curve_is_minus_one(self):
        assert tables.sensitivity_findings(_sens())["slope"] == pytest.approx(-1.0, abs=1e-12)

    def test_ratio_of_a_one_over_T_curve_is_one_hundred(self):
        f = tables.sensitivity_findings(_sens())
        assert (f["T_low"], f["T_high"]) == (pytest.approx(0.01), pytest.approx(1.0))
        assert f["ratio"] == pytest.approx(100.0)

    def test_uses_the_smallest_eps(self):
        f = tables.sensitivity_findings(_sens(lambda T, e, h: e / T))
        assert f["eps"] == 1e-3 and f["g_low"] == pytest.approx(1e-3 / 0.01)

    def test_counts_rows_and_evaluations(self):
        f = tables.sensitivity_findings(_sens(above=2, n_rows=7))
        n_cells = len(TS) * len(EPS) * 3
        assert f["rows_above_paper"] == 2 * n_cells and f["row_evaluations"] == 7 * n_cells
        assert f["rows_violating"] == 0

    def test_counts_curve_points_above_the_paper(self):
        f = tables.sensitivity_findings(_sens(lambda T, e, h: 2.0 if T < 2e-3 else 1e-4))  # above only at T = 1e-3
        assert f["curve_points_above_paper"] == len(EPS) and f["curve_points"] == len(TS) * len(EPS)
        assert f["T_above_paper"] == (pytest.approx(1e-3), pytest.approx(1e-3))

    def test_no_curve_point_above_the_paper_gives_none(self):
        assert tables.sensitivity_findings(_sens(lambda T, e, h: 1e-6))["T_above_paper"] is None

    def test_slope_is_nan_with_fewer_than_two_low_temperatures(self):
        assert math.isnan(tables.sensitivity_findings(_sens(), thresholds={"inv_t_max_T": 2e-3})["slope"])

    def test_agrees_with_the_verdicts(self):
        sens = _sens(lambda T, e, h: 0.3 / T**0.5)
        f = tables.sensitivity_findings(sens)
        measured = claims.verdicts({"gradient_sensitivity": sens}).set_index("id")["measured"]
        slope = re.search(r"log-log slope (-?[\d.]+)", measured["fig4-inv-t-mean-scaled"]).group(1)
        assert float(slope) == pytest.approx(f["slope"], abs=0.01)
        ratio = re.search(r"g\(0.01\)/g\(1\) = ([\d.]+)", measured["fig4-drop-0.01-to-1"]).group(1)
        assert float(ratio) == pytest.approx(f["ratio"], rel=1e-2)


class TestSensitivityTable:
    def test_shows_the_grid_points_nearest_the_requested_temperatures(self):
        table = tables.sensitivity_table(_sens(), temperatures=(1e-3, 0.1, 100.0))
        np.testing.assert_allclose(table.index, [1e-3, 0.1, 100.0])

    def test_skips_temperatures_off_the_grid(self):
        table = tables.sensitivity_table(_sens(), temperatures=(0.02,), rtol=0.05)  # grid: 0.0100, 0.0316
        assert len(table) == 0

    def test_one_column_per_eps_then_both_bounds(self):
        table = tables.sensitivity_table(_sens(), temperatures=(1.0,))
        assert list(table.columns) == ["g, ε=0.001", "g, ε=0.1", "g, ε=10", "paper: min{1/(4T), √2}", "1/(2T)"]
        assert table.loc[1.0, "paper: min{1/(4T), √2}"] == pytest.approx(0.25)
        assert table.loc[1.0, "1/(2T)"] == pytest.approx(0.5)

    def test_values_are_the_head_maximum(self):
        table = tables.sensitivity_table(_sens(), temperatures=(0.1,))
        assert table.loc[0.1, "g, ε=0.1"] == pytest.approx(0.01 / 0.1 * 3)

    @pytest.mark.parametrize(
        "kwargs, name",
        [({"temperatures": ()}, "temperatures"), ({"temperatures": (0.0,)}, "temperatures"), ({"rtol": 0.0}, "rtol")],
    )
    def test_rejects_bad_input(self, kwargs, name):
        with pytest.raises(ValueError, match=name):
            tables.sensitivity_table(_sens(), **kwargs)


def test_findings_on_a_real_algorithm5_result(tiny_gpt2):
    from attn_lib import experiments as E

    text = "The quick brown fox jumps over the lazy dog. " * 10
    sens = E.gradient_sensitivity(tiny_gpt2, text, L=32, temperatures=[0.01, 0.03, 0.1, 1.0], eps_values=[1e-3])
    f = tables.sensitivity_findings(sens)
    assert f["rows_violating"] == 0
    assert f["row_evaluations"] == 4 * tiny_gpt2.n_layers * tiny_gpt2.n_heads * 31
    assert f["curve_points"] == 4 and np.isfinite(f["slope"])
