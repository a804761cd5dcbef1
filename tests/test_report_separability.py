"""attn_lib.report and attn_lib.book.tables for chapter 3: the per-N table of Fig. 3 (separability_per_n) and the shape of its median
curve (separability_shape), whose saturation rule must agree with the separability row of claims.verdicts."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from matplotlib.patches import PathPatch

from attn_lib import claims
from attn_lib import report as R
from attn_lib.book import tables

META = dict(model="toy-model", text="toy-text", device="cpu", L=128, layer=0, n_rows=10, r=0.1, delta=0.01)


def _table(medians: dict[int, float], heads: int = 5, spread: float = 0.02) -> pd.DataFrame:
    """Separability rows whose fraction over heads is symmetric around the given median per N."""
    rows = []
    for N, m in medians.items():
        for h in range(heads):
            f = m + spread * (h - (heads - 1) / 2)
            rows.append(dict(META, N=N, head=h, fraction=f, lower=-0.1 * h, upper=0.9 + 0.01 * h))
    return pd.DataFrame(rows)


SATURATING = {1: 1.0, 2: 0.9, 4: 0.85, 8: 0.8, 16: 0.78, 32: 0.76}
LOW = {1: 1.0, 2: 0.8, 4: 0.7, 8: 0.6, 16: 0.5, 32: 0.48}


def _verdict(df):
    return claims.verdicts({"separability": df}, ids=["fig3-saturates"])["verdict"].iloc[0]


# ----------------------------------------------------------------------------------------- separability_per_n
class TestSeparabilityPerN:
    def test_quantiles_match_numpy_per_n(self):
        df = _table(LOW, spread=0.05)
        per_n = R.separability_per_n(df)
        for N in LOW:
            f = df[df.N == N]["fraction"].to_numpy()
            expected = (np.median(f), np.quantile(f, 0.25), np.quantile(f, 0.75))
            assert tuple(per_n.loc[N, ["median", "q25", "q75"]]) == pytest.approx(expected, rel=1e-14)

    def test_iqr_is_q75_minus_q25(self):
        per_n = R.separability_per_n(_table(LOW))
        np.testing.assert_allclose(per_n["IQR"], per_n["q75"] - per_n["q25"], rtol=1e-15)

    def test_bound_medians_match_numpy(self):
        df = _table(LOW)
        per_n = R.separability_per_n(df)
        assert per_n.loc[4, "lower_median"] == pytest.approx(np.median(df[df.N == 4]["lower"]))
        assert per_n.loc[4, "upper_median"] == pytest.approx(np.median(df[df.N == 4]["upper"]))

    def test_counts_heads(self):
        assert (R.separability_per_n(_table(LOW, heads=7))["heads"] == 7).all()

    def test_flags_compare_the_bound_medians_with_the_median(self):
        per_n = R.separability_per_n(_table(LOW))
        assert per_n.loc[1, "upper ≥ median"] == (per_n.loc[1, "upper_median"] >= per_n.loc[1, "median"])
        assert not per_n.loc[1, "upper ≥ median"] and per_n.loc[32, "upper ≥ median"]
        assert per_n["lower ≤ median"].all()

    def test_is_indexed_by_n_in_order(self):
        assert list(R.separability_per_n(_table(LOW)).index) == sorted(LOW)

    @pytest.mark.parametrize("df", [pd.DataFrame(), _table(LOW).drop(columns="upper"), "not a table"])
    def test_bad_tables_are_refused(self, df):
        with pytest.raises(ValueError, match="df"):
            R.separability_per_n(df)


# ---------------------------------------------------------------------------------------- separability_shape
class TestSeparabilityShape:
    @pytest.mark.parametrize("medians, verdict", [(SATURATING, "reproduced"), (LOW, "not reproduced")])
    def test_saturation_agrees_with_the_verdict(self, medians, verdict):
        df = _table(medians)
        assert tables.separability_shape(df)["saturates"] == (_verdict(df) == "reproduced")
        assert _verdict(df) == verdict

    def test_saturation_is_none_without_n_of_16(self):
        df = _table({1: 1.0, 2: 0.9, 4: 0.8})
        assert tables.separability_shape(df)["saturates"] is None and _verdict(df) == "n/a"

    def test_a_falling_median_is_declining(self):
        assert tables.separability_shape(_table(LOW))["declining"] is True

    def test_a_rise_before_16_is_not_declining(self):
        assert tables.separability_shape(_table(LOW | {4: 0.9}))["declining"] is False

    def test_a_rise_after_16_does_not_count(self):
        assert tables.separability_shape(_table(LOW | {32: 0.7}))["declining"] is True

    def test_a_single_n_is_not_declining(self):
        assert tables.separability_shape(_table({16: 0.8}))["declining"] is False

    def test_band_and_start_come_from_the_thresholds(self):
        shape = tables.separability_shape(_table(LOW), thresholds={"sep_tol": 0.05, "sep_from_n": 8})
        assert (shape["from_n"], shape["lo"], shape["hi"]) == (8, pytest.approx(0.65), pytest.approx(0.90))

    def test_a_wider_tolerance_can_make_it_saturate_as_the_verdict_does(self):
        df, th = _table(LOW), {"sep_lo": 0.5, "sep_tol": 0.05}
        assert tables.separability_shape(df, thresholds=th)["saturates"] is True
        vt = claims.verdicts({"separability": df}, thresholds=th)
        assert vt.set_index("id").loc["fig3-saturates", "verdict"] == "reproduced"

    def test_bad_tables_are_refused(self):
        with pytest.raises(ValueError, match="df"):
            tables.separability_shape(pd.DataFrame({"N": [1]}))


def test_both_functions_are_public():
    assert "separability_per_n" in R.__all__ and "separability_shape" in tables.__all__


# ---------------------------------------------------------------------------------------- figure_separability
class TestFigureSeparability:
    def _figure(self, df=None):
        return R.figure_separability(_table(LOW, spread=0.05) if df is None else df)

    def test_one_box_per_n(self):
        ax = self._figure().axes[0]
        medians = [ln for ln in ax.get_lines() if ln.get_color() == "darkgreen"]
        assert len(medians) == len(LOW)
        assert [t.get_text() for t in ax.get_xticklabels()] == [str(n) for n in sorted(LOW)]

    def test_boxes_span_the_quartiles_over_heads(self):
        df = _table(LOW, spread=0.05)
        ax = self._figure(df).axes[0]
        boxes = [p for p in ax.patches if isinstance(p, PathPatch)]  # the boxplot's boxes
        for box, N in zip(boxes, sorted(LOW), strict=True):
            f = df[df.N == N]["fraction"].to_numpy()
            y = box.get_path().vertices[:, 1]
            assert (y.min(), y.max()) == pytest.approx((np.quantile(f, 0.25), np.quantile(f, 0.75)), rel=1e-12)

    def test_bounds_are_drawn_as_their_medians_over_heads(self):
        df = _table(LOW)
        lines = {ln.get_label(): ln for ln in self._figure(df).axes[0].get_lines()}
        upper = next(ln for name, ln in lines.items() if name.startswith("Thm 2 upper"))
        lower = next(ln for name, ln in lines.items() if name.startswith("Thm 2 lower"))
        per_n = R.separability_per_n(df)
        np.testing.assert_allclose(upper.get_ydata(), per_n["upper_median"])
        np.testing.assert_allclose(lower.get_ydata(), per_n["lower_median"])
        assert upper.get_marker() != "None" and lower.get_marker() != "None"

    def test_legend_names_boxes_bounds_and_band(self):
        legend = [t.get_text() for t in self._figure().axes[0].get_legend().get_texts()]
        assert any("box" in t for t in legend) and any("0.70–0.85" in t for t in legend)
        assert any("upper" in t and "heuristic" in t for t in legend) and any("lower" in t for t in legend)

    def test_band_is_shaded(self):
        ax = self._figure().axes[0]
        band = [p for p in ax.patches if p.get_label().startswith("paper:")]
        assert len(band) == 1
        ys = ax.transData.inverted().transform(band[0].get_transform().transform(band[0].get_path().vertices))[:, 1]
        assert (ys.min(), ys.max()) == pytest.approx((0.70, 0.85), abs=1e-9)

    def test_labelled_with_model_text_and_device(self):
        fig = self._figure()
        texts = [t.get_text() for t in fig.texts] + [fig.axes[0].get_title()]
        assert any(all(w in t for w in ("toy-model", "toy-text", "cpu")) for t in texts)

    def test_bad_tables_are_refused(self):
        with pytest.raises(ValueError, match="df"):
            R.figure_separability(_table(LOW).drop(columns="lower"))
