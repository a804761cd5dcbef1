"""The critical-N diagnosis: report.critical's tables on tiny hand-made inputs, and metrics.crossing_metrics against
metrics.distance_metrics and the bounds of prop-e1-crossing (its module docstring)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import ks_2samp

from attn_lib import claims
from attn_lib import metrics as M
from attn_lib.metrics.crossing import crossing_metrics

pytestmark = pytest.mark.numerical  # run twice by `make test`: with the accelerator, and --without-numba


# ---- report.critical ------------------------------------------------------------------------------------------------
def _diag(variants=("model", "first value 0"), Ns=(4, 8, 16), heads=4, L=64):
    """A diagnosis table with known head values: d~ = 10 + h, E1 = N/4 + h/2, rho = 0.5 + 0.1 h (per variant +v)."""
    rows = []
    for v, variant in enumerate(variants):
        for N in Ns:
            for h in range(heads):
                rows.append(
                    dict(
                        variant=variant,
                        L=L,
                        N=N,
                        layer=0,
                        head=h,
                        kv_group=h // 2,
                        n_rows=10 + h,
                        d_tilde=10.0 + h,
                        e1=N / 4 + h / 2 + v,
                        lead_d_tilde=12.0 + h,
                        lead_e1=N / 2 + h,
                        rho_median=0.5 + 0.1 * h + v,
                        sink_share=0.2 * h,
                        bound_violations=1 if (h == 0 and N == Ns[0]) else 0,
                    )
                )
    return pd.DataFrame(rows)


class TestDiagnosisSummary:
    def test_one_row_per_variant_and_n_in_the_tables_order(self):
        s = claims.diagnosis_summary(_diag(variants=("z-model", "a-variant")))
        assert list(zip(s["variant"], s["N"])) == [(v, N) for v in ("z-model", "a-variant") for N in (4, 8, 16)]

    def test_n_over_l_heads_and_rows(self):
        r = claims.diagnosis_summary(_diag()).iloc[1]
        assert (r["L"], r["N"], r["N/L"], r["heads"], r["rows"]) == (64, 8, 8 / 64, 4, 11.5)

    def test_rho_is_the_median_over_heads_with_its_quartiles(self):
        r = claims.diagnosis_summary(_diag()).iloc[0]
        rho = 0.5 + 0.1 * np.arange(4)
        assert r["rho"] == pytest.approx(np.median(rho))
        assert (r["rho q25"], r["rho q75"]) == (
            pytest.approx(np.quantile(rho, 0.25)),
            pytest.approx(np.quantile(rho, 0.75)),
        )

    def test_ratios_are_of_the_head_means(self):
        r = claims.diagnosis_summary(_diag()).iloc[2]  # model, N = 16
        h = np.arange(4)
        assert r["E1/d~"] == pytest.approx((16 / 4 + h / 2).mean() / (10.0 + h).mean())
        assert r["lead ratio"] == pytest.approx((16 / 2 + h).mean() / (12.0 + h).mean())

    def test_ks_over_heads(self):
        r = claims.diagnosis_summary(_diag()).iloc[0]
        h = np.arange(4)
        assert r["KS p (heads)"] == pytest.approx(ks_2samp(10.0 + h, 1 + h / 2).pvalue)

    def test_ks_over_key_value_groups_uses_the_group_means(self):
        r = claims.diagnosis_summary(_diag()).iloc[0]
        d = [(10 + 11) / 2, (12 + 13) / 2]
        e = [(1 + 1.5) / 2, (2 + 2.5) / 2]
        assert r["KS p (kv groups)"] == pytest.approx(ks_2samp(d, e).pvalue)

    def test_sink_share_and_bound_violations(self):
        s = claims.diagnosis_summary(_diag())
        assert s.iloc[0]["sink share"] == pytest.approx(np.median(0.2 * np.arange(4)))
        assert list(s["bound violations"]) == [1, 0, 0, 1, 0, 0]

    def test_optional_columns_absent_give_nan_and_zero(self):
        s = claims.diagnosis_summary(_diag().drop(columns=["n_rows", "rho_median", "sink_share", "bound_violations"]))
        assert s[["rows", "rho", "rho q25", "rho q75", "sink share"]].isna().all().all()
        assert (s["bound violations"] == 0).all()

    @pytest.mark.parametrize("bad", [_diag().drop(columns="lead_e1"), "diag", None])
    def test_bad_input_names_diag(self, bad):
        with pytest.raises(ValueError, match="diag"):
            claims.diagnosis_summary(bad)


def _summary(rows):
    """variant, N/L, rho, E1/d~, KS p (heads), KS p (kv groups)."""
    cols = ["variant", "N/L", "rho", "E1/d~", "KS p (heads)", "KS p (kv groups)"]
    return pd.DataFrame(rows, columns=cols)


SUMMARY = _summary(
    [
        ("model", 0.02, 0.95, 0.05, 0.0, 0.0),
        ("model", 0.05, 0.94, 0.10, 0.0, 0.0),
        ("model", 0.3, 0.90, 0.50, 0.02, 0.001),
        ("model", 0.7, 0.85, 0.95, 0.5, 0.3),
        ("sink", 0.02, 0.10, 0.30, 0.0, 0.0),
        ("sink", 0.07, 0.08, 0.90, 0.2, 0.2),
        ("never", 0.05, 0.99, 0.01, 0.0, 0.0),
        ("never", 0.5, 0.99, 0.10, 0.0, 0.0),
    ]
)


class TestDiagnosisFirstPass:
    def test_first_passing_n_over_l_per_variant(self):
        f = claims.diagnosis_first_pass(SUMMARY)
        assert list(f.index) == ["model", "sink", "never"]
        assert f.loc["model", "first N/L"] == 0.7 and f.loc["sink", "first N/L"] == 0.07

    def test_last_failing_grid_point_before_it(self):
        f = claims.diagnosis_first_pass(SUMMARY)
        assert f.loc["model", "last failing N/L"] == 0.3 and f.loc["sink", "last failing N/L"] == 0.02

    def test_no_pass_gives_nan_and_the_last_grid_point(self):
        f = claims.diagnosis_first_pass(SUMMARY)
        assert math.isnan(f.loc["never", "first N/L"]) and f.loc["never", "last failing N/L"] == 0.5

    def test_a_pass_at_the_first_grid_point_has_no_failing_point(self):
        f = claims.diagnosis_first_pass(SUMMARY, alpha=1e-9)  # p = 0 fails, anything positive passes
        assert f.loc["sink", "first N/L"] == 0.07
        f = claims.diagnosis_first_pass(SUMMARY.assign(**{"KS p (kv groups)": 0.5}))
        assert f.loc["model", "first N/L"] == 0.02 and math.isnan(f.loc["model", "last failing N/L"])

    def test_sampling_heads_reads_the_heads_column(self):
        f = claims.diagnosis_first_pass(SUMMARY, sampling="heads")
        assert f.loc["model", "first N/L"] == 0.3

    def test_alpha_sets_the_level(self):
        assert claims.diagnosis_first_pass(SUMMARY, alpha=0.001).loc["model", "first N/L"] == 0.3
        assert math.isnan(claims.diagnosis_first_pass(SUMMARY, alpha=0.4).loc["model", "first N/L"])

    def test_rho_and_ratio_at_the_grid_point_nearest_0_06(self):
        f = claims.diagnosis_first_pass(SUMMARY)
        assert (f.loc["model", "rho at 0.06 L"], f.loc["model", "E1/d~ at 0.06 L"]) == (0.94, 0.10)
        assert (f.loc["sink", "rho at 0.06 L"], f.loc["sink", "E1/d~ at 0.06 L"]) == (0.08, 0.90)

    def test_unsorted_input_is_sorted_by_n_over_l(self):
        f = claims.diagnosis_first_pass(SUMMARY.iloc[::-1])
        assert f.loc["model", "first N/L"] == 0.7 and f.loc["model", "last failing N/L"] == 0.3

    @pytest.mark.parametrize("alpha", [0, 1, -0.1, 1.5])
    def test_bad_alpha(self, alpha):
        with pytest.raises(ValueError, match="alpha"):
            claims.diagnosis_first_pass(SUMMARY, alpha=alpha)

    def test_bad_sampling(self):
        with pytest.raises(ValueError, match="sampling"):
            claims.diagnosis_first_pass(SUMMARY, sampling="kv_groups")

    def test_missing_columns(self):
        with pytest.raises(ValueError, match="summary"):
            claims.diagnosis_first_pass(SUMMARY.drop(columns="rho"))


class TestRequiredRho:
    def test_is_n_over_l_minus_one(self):
        assert claims.required_rho(1024) == pytest.approx(61 / 1023)  # N = round(0.06 * 1024) = 61

    def test_fraction(self):
        assert claims.required_rho(100, 0.5) == pytest.approx(50 / 99)

    def test_at_least_one_token(self):
        assert claims.required_rho(3, 0.01) == pytest.approx(1 / 2)

    @pytest.mark.parametrize("L", [2, 0, 3.5, "64"])
    def test_bad_l(self, L):
        with pytest.raises(ValueError, match="L"):
            claims.required_rho(L)

    @pytest.mark.parametrize("f", [0, 1, -0.5, 2])
    def test_bad_fraction(self, f):
        with pytest.raises(ValueError, match="fraction"):
            claims.required_rho(64, f)


TRACE = pd.DataFrame(
    dict(
        L=[64, 64, 64, 128, 128],
        N=[4, 5, 5, 9, 10],
        form=["mc", "mc", "e1", "mc", "mc"],
        n_rows=[60, 59, 59, 119, 118],
        mc_rel_se=[0.1, 0.03, np.nan, 0.2, 0.01],
    )
)
SUMM = pd.DataFrame(dict(L=[64, 128, 64], form=["mc", "mc", "e1"], n_star=[5, 10, 5], censored=[False, True, False]))


class TestCriticalRows:
    def test_rows_and_standard_error_at_n_star(self):
        r = claims.critical_rows(TRACE, SUMM)
        assert list(r["rows"]) == [59, 118, 59]
        assert r["mc_rel_se"].iloc[0] == 0.03 and r["mc_rel_se"].iloc[1] == 0.01 and math.isnan(r["mc_rel_se"].iloc[2])

    def test_columns_and_censoring(self):
        r = claims.critical_rows(TRACE, SUMM)
        assert list(r.columns) == ["L", "form", "sampling", "n_star", "censored", "rows", "mc_rel_se"]
        assert list(r["censored"]) == [False, True, False] and (r["sampling"] == "heads").all()

    def test_no_trace_row_at_n_star_gives_zero_rows(self):
        r = claims.critical_rows(TRACE, SUMM.assign(n_star=[6, 11, 6]))
        assert (r["rows"] == 0).all() and r["mc_rel_se"].isna().all()

    def test_no_standard_error_column(self):
        assert claims.critical_rows(TRACE.drop(columns="mc_rel_se"), SUMM)["mc_rel_se"].isna().all()

    def test_matches_the_sampling(self):
        tr = pd.concat(
            [TRACE.assign(sampling="heads"), TRACE.assign(sampling="kv_groups", n_rows=TRACE["n_rows"] - 50)]
        )
        sm = SUMM.assign(sampling="kv_groups")
        assert list(claims.critical_rows(tr, sm)["rows"]) == [9, 68, 9]

    @pytest.mark.parametrize("which", ["trace", "summary"])
    def test_missing_columns(self, which):
        tr, sm = (TRACE.drop(columns="n_rows"), SUMM) if which == "trace" else (TRACE, SUMM.drop(columns="censored"))
        with pytest.raises(ValueError, match=which):
            claims.critical_rows(tr, sm)


# ---- metrics.crossing_metrics ---------------------------------------------------------------------------------------
def _causal(H=3, L=16, d=5, seed=0, scale=2.0):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(H, L, L, generator=g, dtype=torch.float64) * scale
    values = torch.randn(H, L, d, generator=g, dtype=torch.float64)
    mask = torch.ones(L, L, dtype=torch.bool).tril()
    return M.LayerData.from_logits(logits.masked_fill(~mask, -math.inf), values), mask


ROWS = [0, 2, 5, 9, 15]
NS = [1, 2, 4, 7]


@pytest.fixture(scope="module")
def both():
    """crossing_metrics on a few rows of a random causal layer, and distance_metrics (torch engine) on the layer."""
    ld, mask = _causal()
    cr = crossing_metrics(ld.alpha[:, ROWS, :], ld.values, NS, mask=mask[ROWS])
    ref = {N: M.distance_metrics(ld, N=N, engine="torch", with_dmax=False) for N in NS}
    return cr, ref


class TestCrossingMetrics:
    @pytest.mark.parametrize("name", ["d_tilde", "e1", "s_norm"])
    def test_equals_distance_metrics(self, both, name):
        cr, ref = both
        for k, N in enumerate(NS):
            want = getattr(ref[N], name)[:, ROWS]
            torch.testing.assert_close(getattr(cr, name)[..., k], want, rtol=0, atol=1e-10)

    def test_valid_rows_as_distance_metrics(self, both):
        cr, ref = both
        for k, N in enumerate(NS):
            assert torch.equal(cr.valid[..., k], ref[N].valid[:, ROWS])

    def test_t_is_the_visible_count(self, both):
        cr, _ = both
        assert cr.t.tolist() == [r + 1 for r in ROWS]

    def test_z_and_a(self, both):
        cr, _ = both
        ld, _ = _causal()
        a = ld.alpha[:, ROWS, :]
        torch.testing.assert_close(cr.z_norm, (a @ ld.values).norm(dim=-1), rtol=0, atol=1e-12)
        torch.testing.assert_close(cr.a_sum, (a * ld.values.norm(dim=-1).unsqueeze(1)).sum(-1), rtol=0, atol=1e-12)

    def test_default_mask_is_the_positive_weights(self, both):
        cr, _ = both
        ld, _ = _causal()
        cr2 = crossing_metrics(ld.alpha[:, ROWS, :], ld.values, NS)
        torch.testing.assert_close(cr2.e1, cr.e1, rtol=0, atol=0)

    def test_one_integer_n(self):
        ld, mask = _causal()
        cr = crossing_metrics(ld.alpha[:, ROWS, :], ld.values, 3, mask=mask[ROWS])
        assert cr.n_values == [3] and cr.d_tilde.shape == (3, len(ROWS), 1)

    def test_invalid_rows_are_zero(self, both):
        cr, _ = both
        for name in ("d_tilde", "e1", "s_norm", "a_out"):
            assert (getattr(cr, name)[~cr.valid] == 0).all()

    @pytest.mark.accel
    @pytest.mark.parametrize("visibility", ["causal", "every token", "random"])
    def test_crossing_engines_agree(self, visibility):
        """The compiled kernel and the float64 tensor code give the same results to rounding, on a causal layer, a
        bidirectional one and a random mask with ties in the weights (the top-N choice must match)."""
        H, L, d = 3, 40, 6
        g = torch.Generator().manual_seed(3)
        logits = torch.randn(H, L, L, generator=g, dtype=torch.float64).round()  # integer logits: many ties
        values = torch.randn(H, L, d, generator=g, dtype=torch.float64)
        mask = {
            "causal": torch.ones(L, L, dtype=torch.bool).tril(),
            "every token": torch.ones(L, L, dtype=torch.bool),
            "random": torch.rand(L, L, generator=g) < 0.6,
        }[visibility]
        mask[:, 0] = True
        w = torch.softmax(logits.masked_fill(~mask, -math.inf), -1)
        rows, ns = [1, 7, 20, 39], [1, 3, 10, 30]
        a = crossing_metrics(w[:, rows], values, ns, mask=mask[rows], engine="torch")
        b = crossing_metrics(w[:, rows], values, ns, mask=mask[rows], engine="numba")
        assert torch.equal(a.valid, b.valid)
        for name in ("d_tilde", "e1", "s_norm", "a_out", "z_norm", "a_sum"):
            torch.testing.assert_close(getattr(b, name), getattr(a, name), rtol=1e-12, atol=1e-13)
        assert (b.d_tilde[b.valid] > 0).any()  # not a comparison of zeros

    def test_engine_must_be_known(self):
        ld, mask = _causal()
        with pytest.raises(ValueError, match="engine must be one of"):
            crossing_metrics(ld.alpha[:, ROWS, :], ld.values, NS, mask=mask[ROWS], engine="gpu")

    @staticmethod
    def _args():
        ld, mask = _causal()
        return dict(weights=ld.alpha[:, ROWS, :], values=ld.values, n_values=NS, mask=mask[ROWS])

    @pytest.mark.parametrize(
        "change, name",
        [
            (dict(weights=torch.ones(5, 16), mask=None), "weights"),  # not (H, R, L)
            (dict(values=torch.ones(2, 16, 5)), "weights"),  # H of values differs (the message names both)
            (dict(values=torch.ones(3, 15, 5)), "weights"),  # L of values differs
            (dict(values=torch.full((3, 16, 5), math.nan)), "values"),
            (dict(n_values=[0]), "n_values"),
            (dict(n_values=[]), "n_values"),
            (dict(n_values=[1.5]), "n_values"),
            (dict(weights=-torch.ones(3, 5, 16)), "weights"),  # negative at visible positions
            (dict(weights=torch.full((3, 5, 16), math.inf)), "weights"),
        ],
    )
    def test_bad_input_names_the_parameter(self, change, name):
        args = dict(self._args(), **change)
        with pytest.raises(ValueError, match=name):
            crossing_metrics(args["weights"], args["values"], args["n_values"], mask=args["mask"])


@st.composite
def _instance(draw):
    H = draw(st.integers(1, 3))
    L = draw(st.integers(3, 24))
    d = draw(st.integers(1, 6))
    seed = draw(st.integers(0, 2**31 - 1))
    scale = draw(st.sampled_from([0.1, 1.0, 3.0, 10.0]))
    ns = draw(st.lists(st.integers(1, L - 1), min_size=1, max_size=4, unique=True))
    return H, L, d, seed, scale, ns


class TestCrossingBounds:
    """prop-e1-crossing: |E1 − (t−N) p ‖z‖| ≤ (t−N)/t (1+p) A and |d~ − (t−N)‖s_N‖| ≤ A_out on every valid row."""

    @staticmethod
    def _run(inst):
        H, L, d, seed, scale, ns = inst
        ld, mask = _causal(H, L, d, seed, scale)
        cr = crossing_metrics(ld.alpha, ld.values, ns, mask=mask)
        assert cr.valid[:, -1].all()  # the last row sees all L > N tokens
        return cr, ns

    @settings(max_examples=60, deadline=None)
    @given(_instance())
    def test_e1_near_its_leading_term(self, inst):
        cr, ns = self._run(inst)
        t = cr.t.to(torch.float64).view(1, -1, 1)
        N = torch.tensor(ns, dtype=torch.float64).view(1, 1, -1)
        p = N / (t - 1).clamp(min=1)
        lead = (t - N) * p * cr.z_norm.unsqueeze(-1)
        bound = (t - N) / t * (1 + p) * cr.a_sum.unsqueeze(-1)
        gap = ((cr.e1 - lead).abs() - bound)[cr.valid]
        assert (gap <= 1e-9 * (1 + bound[cr.valid])).all()

    @settings(max_examples=60, deadline=None)
    @given(_instance())
    def test_d_tilde_near_its_leading_term(self, inst):
        cr, ns = self._run(inst)
        t = cr.t.to(torch.float64).view(1, -1, 1)
        N = torch.tensor(ns, dtype=torch.float64).view(1, 1, -1)
        lead = (t - N) * cr.s_norm
        gap = ((cr.d_tilde - lead).abs() - cr.a_out)[cr.valid]
        assert (gap <= 1e-9 * (1 + cr.a_out[cr.valid])).all()

    @settings(max_examples=30, deadline=None)
    @given(_instance())
    def test_a_out_is_at_most_a(self, inst):
        cr, _ = self._run(inst)
        assert (cr.a_out <= cr.a_sum.unsqueeze(-1) + 1e-12).all()
