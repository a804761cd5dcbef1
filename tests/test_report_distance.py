"""attn_lib.report and attn_lib.book.tables, chapter 2's block: the linear-growth rule shared by the tables and the
verdicts, and the tables of Algorithms 1-3, checked on small synthetic result tables against independent computations."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from attn_lib import claims
from attn_lib import report as R
from attn_lib.book import tables

META = dict(model="toy-model", text="toy-text", device="cpu")


def _alg1(d_of_L, heads=3, lengths=(16, 32, 64, 128)):
    """A distance_vs_length table whose d~ head mean at L is d_of_L(L); heads differ by a constant offset."""
    rows = []
    for L in lengths:
        for h in range(heads):
            d = d_of_L(L) + 0.01 * (h - (heads - 1) / 2)
            rows.append(
                dict(
                    META,
                    L=L,
                    N=5,
                    layer=0,
                    head=h,
                    n_rows=10,
                    d_tilde=d,
                    d_max=3 * d,
                    e1=0.5 + 0.001 * L,
                    e1_plus_gap=0.7 + 0.002 * L,
                    e2=0.98 * d,
                    mc=0.6,
                    s_norm=0.2 + 0.1 * h,
                    dmax_violations=0,
                )
            )
    return pd.DataFrame(rows)


def _alg2():
    rows = []
    for N in (1, 5, 20):
        for h in range(2):
            d = float(N + h)
            rows.append(
                dict(
                    META,
                    L=128,
                    N=N,
                    layer=0,
                    head=h,
                    n_rows=10,
                    d_tilde=d,
                    d_max=2 * d,
                    e1=d / 2,
                    e2=1.1 * d,
                    mc=d - 1,
                    dmax_violations=0,
                )
            )
    return pd.DataFrame(rows)


def _summary(rows):
    return pd.DataFrame([dict(META, form=f, L=L, n_star=n, censored=c) for f, L, n, c in rows])


def _growth_verdict(vt):
    return vt.set_index("id").loc["fig2a-dtilde-linear", "verdict"]


# linear_growth -------------------------------------------------------------------------------------------------
class TestLinearGrowth:
    def test_slope_and_r2_against_polyfit(self):
        rng = np.random.default_rng(0)
        x = np.array([16.0, 32, 64, 128, 256])
        y = 0.3 * x + 2 + rng.normal(size=5)
        slope, intercept = np.polyfit(x, y, 1)
        r2 = 1 - ((y - (slope * x + intercept)) ** 2).sum() / ((y - y.mean()) ** 2).sum()
        fit = claims.linear_growth(x, y)
        assert fit["slope"] == pytest.approx(slope) and fit["intercept"] == pytest.approx(intercept)
        assert fit["r2"] == pytest.approx(r2)

    def test_a_rising_line_is_linear(self):
        assert claims.linear_growth([1, 2, 3], [2, 4, 6])["linear"] is True

    def test_a_falling_line_is_not(self):
        fit = claims.linear_growth([1, 2, 3], [6, 4, 2])
        assert fit["r2"] == pytest.approx(1.0) and fit["linear"] is False

    def test_exponent_against_a_log_log_polyfit(self):
        x = np.array([32.0, 64, 128, 256, 512, 1024])
        y = 0.5 * x**0.6 * np.exp(np.random.default_rng(1).normal(scale=0.05, size=6))
        fit = claims.linear_growth(x, y)
        assert fit["exponent"] == pytest.approx(np.polyfit(np.log(x), np.log(y), 1)[0])
        assert fit["growth"] == pytest.approx(y[-1] / y[0]) and fit["x_growth"] == pytest.approx(32.0)

    def test_a_good_line_with_a_large_intercept_is_not_linear_growth(self):
        x = np.array([32.0, 64, 128, 256, 512, 1024])
        fit = claims.linear_growth(x, 100 + 0.01 * x)  # R² = 1, but it grows only 1.1x while L grows 32x
        assert fit["r2"] == pytest.approx(1.0) and fit["exponent"] < 0.1 and fit["linear"] is False

    def test_a_square_is_not_linear(self):
        x = np.array([1.0, 2, 4, 8])
        assert (
            claims.linear_growth(x, x**2)["exponent"] == pytest.approx(2.0)
            and not claims.linear_growth(x, x**2)["linear"]
        )

    def test_the_tolerance_can_be_overridden(self):
        x = np.array([1.0, 2, 4, 8])
        y = x**1.3
        assert claims.linear_growth(x, y)["linear"] is False
        assert claims.linear_growth(x, y, {"linear_exponent_tol": 0.31})["linear"] is True

    def test_non_positive_values_have_no_exponent(self):
        fit = claims.linear_growth([1, 2, 3], [-1.0, 0.5, 2.0])
        assert math.isnan(fit["exponent"]) and fit["linear"] is False

    def test_a_constant_does_not_grow(self):
        fit = claims.linear_growth([16, 32, 64, 128], [0.6] * 4)
        assert fit["slope"] == 0.0 and fit["r2"] == 1.0 and fit["linear"] is False

    def test_one_distinct_x_gives_no_line(self):
        fit = claims.linear_growth([4, 4], [1, 2])
        assert math.isnan(fit["slope"]) and math.isnan(fit["r2"]) and fit["linear"] is False

    @pytest.mark.parametrize("x, y", [([1, 2, 3], [1, 2]), ([[1, 2]], [[1, 2]]), ([1, 2], [1, np.nan])])
    def test_bad_input(self, x, y):
        with pytest.raises(ValueError, match="x and y"):
            claims.linear_growth(x, y)


# one rule for the table and the verdict ------------------------------------------------------------------------
class TestOneLinearRule:
    @pytest.mark.parametrize(
        "d_of_L",
        [
            lambda L: 0.01 * L,
            lambda L: 1.0 + 0.3 * math.sin(L),
            lambda L: 5 - 0.01 * L,
            lambda L: 0.002 * L + 0.2 * math.cos(L),
        ],
    )
    def test_verdict_and_table_agree(self, d_of_L):
        df = _alg1(d_of_L)
        table = tables.distance_length_fits(df).loc["d~", "linear"]
        assert (_growth_verdict(claims.verdicts({"distance_vs_length": df})) == "reproduced") == table

    def test_verdict_follows_linear_growth_of_the_head_means(self):
        df = _alg1(lambda L: 0.01 * L**1.25)
        means = df.groupby("L")["d_tilde"].mean()
        fit = claims.linear_growth(means.index, means.to_numpy())
        assert fit["exponent"] == pytest.approx(1.25)
        vt = claims.verdicts({"distance_vs_length": df}, {"linear_exponent_tol": 0.26})
        assert _growth_verdict(vt) == "reproduced"
        vt = claims.verdicts({"distance_vs_length": df}, {"linear_exponent_tol": 0.24})
        assert _growth_verdict(vt) == "not reproduced"


# distance_length_means / distance_length_fits ------------------------------------------------------------------
class TestDistanceLengthTables:
    def test_means_are_head_means_per_L(self):
        df = _alg1(lambda L: 0.01 * L)
        means = tables.distance_length_means(df)
        assert list(means.columns) == ["d~", "E1", "E1 + gap", "E2", "Monte Carlo", "d_max", "mean ||s||"]
        assert means.loc[64, "d~"] == pytest.approx(df[df.L == 64].d_tilde.mean())
        assert means.loc[16, "mean ||s||"] == pytest.approx(0.3)

    def test_fits_against_polyfit(self):
        df = _alg1(lambda L: 0.01 * L + 0.1 * math.sin(L))
        fits = tables.distance_length_fits(df)
        means = df.groupby("L")["e2"].mean()
        slope = np.polyfit(means.index.to_numpy(float), means.to_numpy(), 1)[0]
        assert fits.loc["E2", "slope"] == pytest.approx(slope)
        assert list(fits.index) == ["d~", "E1", "E1 + gap", "E2", "Monte Carlo", "d_max"]

    def test_growth_column(self):
        fits = tables.distance_length_fits(_alg1(lambda L: 0.01 * L))
        assert fits.columns[2] == "growth L=16→128"
        assert fits.loc["d~", "growth L=16→128"] == pytest.approx(1.28 / 0.16)
        assert fits.loc["Monte Carlo", "growth L=16→128"] == pytest.approx(1.0)

    def test_constant_quantity_is_not_linear(self):
        assert not tables.distance_length_fits(_alg1(lambda L: 0.01 * L)).loc["Monte Carlo", "linear"]

    def test_missing_columns(self):
        with pytest.raises(ValueError, match="s_norm"):
            tables.distance_length_fits(_alg1(lambda L: 0.01 * L).drop(columns="s_norm"))


# distance_n_table ----------------------------------------------------------------------------------------------
class TestDistanceNTable:
    def test_ratios_of_head_means(self):
        t = tables.distance_n_table(_alg2())
        # N = 5: head means d~ 5.5, d_max 11, E1 2.75, E2 6.05, MC 4.5
        assert t.loc[5, "d~"] == pytest.approx(5.5)
        assert t.loc[5, "d_max / d~"] == pytest.approx(2.0)
        assert t.loc[5, "(E1 - d~)/d~"] == pytest.approx(-0.5)
        assert t.loc[5, "(E2 - d~)/d~"] == pytest.approx(0.1)
        assert t.loc[5, "(MC - d~)/d~"] == pytest.approx(-1 / 5.5)

    def test_one_row_per_N(self):
        assert list(tables.distance_n_table(_alg2()).index) == [1, 5, 20]

    def test_missing_columns(self):
        with pytest.raises(ValueError, match="mc"):
            tables.distance_n_table(_alg2().drop(columns="mc"))


# critical_n_ratio / critical_n_lines ---------------------------------------------------------------------------
class TestCriticalN:
    SUMMARY = (
        ("e1", 16, 2, False),
        ("e1", 32, 3, False),
        ("e1", 64, 16, True),
        ("e2", 16, 4, True),
        ("e2", 32, 8, True),
    )

    def test_ratio_is_least_squares_through_the_origin_over_uncensored_L(self):
        r = tables.critical_n_ratio(_summary(self.SUMMARY))
        L, n = np.array([16.0, 32.0]), np.array([2.0, 3.0])
        expected = np.linalg.lstsq(L[:, None], n, rcond=None)[0][0]
        assert r.loc["e1", "ratio"] == pytest.approx(expected)
        assert (r.loc["e1", "n_uncensored"], r.loc["e1", "n_lengths"]) == (2, 3)

    def test_every_L_censored_gives_no_ratio(self):
        r = tables.critical_n_ratio(_summary(self.SUMMARY))
        assert math.isnan(r.loc["e2", "ratio"]) and r.loc["e2", "n_uncensored"] == 0

    def test_verdict_uses_the_same_ratio(self):
        summary = _summary([("e1", 64, 4, False), ("e1", 128, 8, False)])
        ratio = tables.critical_n_ratio(summary).loc["e1", "ratio"]
        vt = claims.verdicts({"critical_n_summary": summary})
        assert f"N*/L = {ratio:.3f}" in vt.set_index("id").loc["fig2c-critical-e1", "measured"]

    def test_lines(self):
        text = tables.critical_n_lines(_summary(self.SUMMARY))
        e1, e2 = text.split("\n")
        assert e1 == (
            "- **E1**: N* per L: 16→2, 32→3, 64→16 (censored). Fitted N*/L = "
            f"{tables.critical_n_ratio(_summary(self.SUMMARY)).loc['e1', 'ratio']:.3f} over 2 uncensored L "
            "(paper: 0.06)."
        )
        assert e2.startswith("- **E2**: N* per L: 16→4 (censored), 32→8 (censored).") and "measured" in e2

    def test_lines_of_a_form_censored_at_every_L(self):
        text = tables.critical_n_lines(_summary([("e1", 16, 15, True), ("e1", 32, 31, True)]))
        assert "Fitted N*/L = n/a (every L censored) over 0 uncensored L" in text

    def test_per_sampling_ratios_and_the_valid_sampling(self):
        summary = _summary([("e1", 64, 8, False), ("e1", 128, 16, False)])
        both = pd.concat(
            [summary.assign(sampling="heads"), summary.assign(sampling="kv_groups", n_star=[4, 8])], ignore_index=True
        )
        r = tables.critical_n_ratio(both)
        assert r.loc[("e1", "heads"), "ratio"] == pytest.approx(0.125)
        assert r.loc[("e1", "kv_groups"), "ratio"] == pytest.approx(0.0625)
        assert claims.valid_ks_sampling(both) == "kv_groups" and claims.valid_ks_sampling(summary) == "heads"
        vt = claims.verdicts({"critical_n_summary": both})
        row = vt.set_index("id").loc["fig2c-critical-e1"]
        assert row["verdict"] == "reproduced"  # the key/value-group ratio 0.0625 is within 2x, the heads' 0.125 not
        assert "one sample per key/value group" in row["measured"]
        assert "(the valid test for this model)" in tables.critical_n_lines(both).splitlines()[1]

    def test_e2_is_an_informative_row_judged_by_the_data(self):
        summary = _summary([("e1", 64, 8, False), ("e2", 64, 1, False)])
        row = claims.verdicts({"critical_n_summary": summary}).set_index("id").loc["fig2c-critical-e2"]
        assert (row["evidence"], row["verdict"], row["basis"]) == ("informative", "not reproduced", "")

    def test_missing_columns(self):
        with pytest.raises(ValueError, match="censored"):
            tables.critical_n_ratio(_summary(self.SUMMARY).drop(columns="censored"))

    def test_each_reading_gets_its_own_verdict_row(self):
        """E1 and the Monte-Carlo expectation are two readings of "the expectation": one row each, each judged by
        its own fitted ratio (here E1 at 0.0625, within a factor 2 of 0.06, and Monte Carlo at 0.75)."""
        summary = _summary([("e1", 64, 4, False), ("e1", 128, 8, False), ("mc", 64, 48, False), ("mc", 128, 96, False)])
        trace = pd.DataFrame(dict(form="mc", L=[64, 128], N=[48, 96], n_rows=[16, 32], mc_rel_se=[0.01, 0.015]))
        seeds = _summary([("mc", L, n, False) for _ in range(4) for L, n in ((64, 48), (128, 96))])
        seeds = seeds.assign(seed=[1, 1, 2, 2, 3, 3, 4, 4])
        vt = claims.verdicts({"critical_n_summary": summary, "critical_n": trace, "critical_n_mc_seeds": seeds})
        vt = vt.set_index("id")
        e1, mc = vt.loc["fig2c-critical-e1"], vt.loc["fig2c-critical-mc"]
        assert e1["verdict"] == "reproduced" and mc["verdict"] == "not reproduced"
        assert f"N*/L = {tables.critical_n_ratio(summary).loc['mc', 'ratio']:.3f}" in mc["measured"]
        assert "Monte-Carlo" in mc["rule"] and "Monte-Carlo" in mc["reading"] and e1["reading"].startswith("E1")
        assert "64→48 (16 rows)" in mc["measured"]  # the rows behind each N*

    def test_mc_lines_give_the_noise_at_n_star_from_the_trace(self):
        summary = _summary([("mc", 16, 12, False), ("mc", 32, 20, False)])
        trace = pd.DataFrame(dict(form="mc", L=[16, 16, 32, 32], N=[11, 12, 19, 20], mc_rel_se=[0.5, 0.125, 0.9, 0.25]))
        line = tables.critical_n_lines(summary, trace)
        assert line.startswith("- **Monte Carlo**: N* per L: 16→12, 32→20.")
        assert "the largest standard error of a sample value is 12.5%–25.0% of that value (over L)" in line
        assert "noise" not in tables.critical_n_lines(summary)  # without the trace, no noise figure

    def test_figure_draws_the_mc_reading(self):
        summary = _summary([("e1", 16, 12, False), ("mc", 16, 10, False), ("mc", 32, 31, True)])
        fig = R.figure_critical_n(summary)
        labels = fig.axes[0].get_legend_handles_labels()[1]
        assert "critical N: d~ vs Monte Carlo, KS over all heads" in labels
        assert "Monte Carlo censored: no N up to the scan limit" in labels


def test_mc_scan_words_name_the_sampling_of_each_profile_and_reject_an_unknown_one():
    from attn_lib.book import tables
    from attn_lib.experiments import PROFILES

    assert tables.mc_scan_words("quick") == f"{PROFILES['quick'].critical_n.mc_samples} random orders per row"
    paper = PROFILES["paper"]
    words = tables.mc_scan_words(paper)
    assert words.startswith(f"{paper.critical_n.mc_samples} pairs of random orders per row, stratified")
    assert (
        f"({paper.critical_n.mc_short_samples} pairs for rows of at most {paper.critical_n.mc_short_t} tokens)" in words
    )
    for bad in ("huge", 3, None):
        with pytest.raises(ValueError, match=r"profile must be one of \['paper', 'quick'\]"):
            tables.mc_scan_words(bad)
