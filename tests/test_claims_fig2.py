"""Issue 34 for Figs. 2a-2c: kinds fixed before the data, the measured causes (d_max's factors, the seeds of the
Monte-Carlo critical N, the bounds evaluated on the model) and the rows added for Lemma 1, the Jensen gap, Corollary 2
(i) and the sub-linear critical N."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch

from attn_lib import claims
from attn_lib import metrics as M
from attn_lib.claims import CLAIMS
from attn_lib.claims import distance as CD
from attn_lib.experiments import distance as ED

META = dict(model="toy-model", text="toy-text", device="cpu")
FIG2 = [i for i in CLAIMS if i.startswith(("fig2", "lemma1", "jensen", "cor2"))]


def _dvl(scale=1.0, grow=1.0, heads=3, lengths=(16, 32, 64, 128)):
    """distance_vs_length with every column the rules read; ``grow`` the exponent of E1, E2, mc in L."""
    rows = []
    for L in lengths:
        for h in range(heads):
            d = scale * 0.5 * L * (1 + 0.01 * h)
            e = scale * 0.5 * 16 * (L / 16) ** grow
            rows.append(
                dict(META, L=L, N=5, layer=0, head=h, n_rows=L - 5, d_tilde=d, d_max=3 * d, e1=e, e1_gap=0.3 * e)
                | dict(mc=1.1 * e, e2=0.99 * d, s_norm=0.5, alpha_bar=0.8, x_max=scale * 10, indiv=0.7 * e)
                | dict(dmax_violations=0)
            )
    return pd.DataFrame(rows)


def _dvn(scale=1.0):
    rows = []
    for N in (1, 5, 10, 20, 40):
        for h in range(3):
            d = scale * (128 - N) * 1.0
            f = dict(t_minus_n_common=128 - N, alpha_bar_common=0.5 + 0.01 * N, max_norm_common=scale * (5 + 0.1 * N))
            lead = f["t_minus_n_common"] * f["alpha_bar_common"] * f["max_norm_common"]
            rows.append(
                dict(META, L=128, N=N, layer=0, head=h, n_rows=100, d_tilde=d, d_max=lead, e1=d / 2, mc=d / 2)
                | dict(e2=1.002 * d, e1_plus_gap=0.6 * d, x_max=scale * 10, s_norm=1.0, alpha_bar=0.5)
                | dict(d_tilde_common=d, d_max_common=lead, dmax_lead_common=lead, s_norm_common=1.0, **f)
            )
    return pd.DataFrame(rows)


def _summ(ratios, Ls=(16, 32, 64, 128)):
    rows = []
    for form, r in ratios.items():
        for L in Ls:
            rows.append(dict(META, L=L, form=form, sampling="heads", n_star=max(1, round(r * L)), censored=False))
    return pd.DataFrame(rows)


def _seeds(ratios, Ls=(16, 32, 64, 128)):
    return pd.concat([_summ({"mc": r}, Ls).assign(seed=i + 1, mc_rel_se=0.01) for i, r in enumerate(ratios)])


def _results(scale=1.0, grow=1.0, crit=0.06):
    return {
        "distance_vs_length": _dvl(scale, grow),
        "distance_vs_n": _dvn(scale),
        "critical_n_summary": _summ({"e1": crit, "e2": crit, "mc": crit}),
        "critical_n_mc_seeds": _seeds([crit] * 4),
    }


# ---- kinds fixed before the data ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "results",
    [
        _results(),  # linear, N* = 0.06 L
        _results(scale=0.01, grow=0.3, crit=0.7),  # the bounds of max||x|| far below the data: still informative
        _results(scale=100.0, grow=0.3, crit=0.01),
        {k: v for k, v in _results().items() if k != "critical_n_mc_seeds"},
    ],
)
def test_every_fig2_row_keeps_its_registered_kind_whatever_the_data(results):
    vt = claims.verdicts(results, ids=FIG2).set_index("id")
    for cid in FIG2:
        assert vt.loc[cid, "evidence"] == CLAIMS[cid].evidence, cid


@pytest.mark.parametrize(
    "cid", ["fig2a-e1-linear", "fig2a-mc-linear", "fig2a-e2-linear", "fig2b-converge-mc", "fig2b-converge-e2"]
)
def test_rows_decided_by_measured_bounds_are_informative(cid):
    assert CLAIMS[cid].evidence == "informative" and CLAIMS[cid].fails_if


def test_converge_e2_does_not_pass_a_gap_that_was_never_open():
    row = claims.verdicts({"distance_vs_n": _dvn()}, ids=["fig2b-converge-e2"]).iloc[0]
    assert row["verdict"] == "not reproduced" and "no gap to close" in row["cause"]
    assert "0.2%" in row["measured"]


def test_e1_linear_cause_quotes_the_bound_and_the_endpoint_exponent():
    row = claims.verdicts({"distance_vs_length": _dvl(scale=0.01, grow=0.3)}, ids=["fig2a-e1-linear"]).iloc[0]
    assert row["verdict"] == "not reproduced"
    assert "caps the endpoint exponent" in row["cause"] and "least-squares exponent 0.30" in row["cause"]


def test_monte_carlo_rows_of_figs_2a_2b_are_judged_over_the_seeds():
    df = _dvl().assign(**{f"mc_seed{k}": lambda d: d["mc"] for k in range(1, 5)})
    row = claims.verdicts({"distance_vs_length": df}, ids=["fig2a-mc-linear"]).iloc[0]
    assert row["verdict"] == "reproduced" and "over 5 seeds the exponent is 1.00 … 1.00" in row["measured"]
    flat = df.assign(mc_seed3=1.0)  # one seed that does not grow
    row = claims.verdicts({"distance_vs_length": flat}, ids=["fig2a-mc-linear"]).iloc[0]
    assert row["verdict"] == "no verdict" and "4 of 5 pass" in row["cause"]
    row = claims.verdicts({"distance_vs_length": _dvl()}, ids=["fig2a-mc-linear"]).iloc[0]
    assert row["verdict"] == "no verdict" and "only 1 seeds" in row["cause"]
    dvn = _dvn().assign(**{f"mc_seed{k}": lambda d: d["mc"] for k in range(1, 5)})
    row = claims.verdicts({"distance_vs_n": dvn}, ids=["fig2b-converge-mc"]).iloc[0]
    assert row["verdict"] == "not reproduced" and "over 5 seeds the gap at N=40 is 50.0% … 50.0%" in row["measured"]


# ---- fig2b-bound-tightens: d_max's factors ---------------------------------------------------------------------------
def test_bound_tightens_cause_quotes_each_factor_on_the_same_rows():
    df = _dvn()
    row = claims.verdicts({"distance_vs_n": df}, ids=["fig2b-bound-tightens"]).iloc[0]
    f = CD.bound_factors(df)
    assert row["verdict"] == "not reproduced"
    for name in ("ᾱ_N", "max selected ‖x‖", "‖s_N‖", "t − N"):
        assert f"{name} {f.loc[20, name]:.4g} → {f.loc[40, name]:.4g}" in row["cause"]
    assert f["d_max/d~"].loc[40] == pytest.approx(f.loc[40, "d_max"] / f.loc[40, "d~"])


def test_bound_tightens_without_the_factor_columns_says_what_is_missing():
    df = _dvn().drop(columns=["alpha_bar_common"])
    cause = claims.verdicts({"distance_vs_n": df}, ids=["fig2b-bound-tightens"]).iloc[0]["cause"]
    assert "alpha_bar_common" in cause


def _layer(H=2, L=10, d=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(H, L, L, generator=g, dtype=torch.float64) * 2
    mask = torch.ones(L, L, dtype=torch.bool).tril()
    return M.LayerData.from_logits(logits.masked_fill(~mask, -math.inf), torch.randn(H, L, d, generator=g).double())


def test_individual_terms_and_bound_factors_against_a_loop():
    ld, N = _layer(), 3
    ind = ED._individual_terms(SimpleNamespace(layer=lambda: ld, get=lambda key, fn: fn()), N)
    dm = M.distance_metrics(ld, N=N)
    fac = ED._bound_factors(
        dm, {"d_tilde": dm.d_tilde, "d_max": dm.d_max, "alpha_bar": dm.alpha_bar, "s_norm": dm.s_norm}
    )
    alpha, V = ld.alpha.numpy(), ld.values.numpy()
    for h in range(ld.H):
        for r in range(N, ld.L):
            t = r + 1
            norms = np.linalg.norm(V[h, :t], axis=1)
            assert ind[h, r].item() == pytest.approx((t - N) / t * float((alpha[h, r, :t] * norms).sum()))
            top = np.argsort(-alpha[h, r, :t], kind="stable")[:N]
            lead = (t - N) * alpha[h, r, top].sum() * norms[top].max()
            assert fac["dmax_lead"][h, r].item() == pytest.approx(lead)
            assert fac["t_minus_n"][h, r].item() == t - N


# ---- the Monte-Carlo critical N over seeds ---------------------------------------------------------------------------
def test_critical_mc_reports_the_spread_over_five_seeds():
    res = {"critical_n_summary": _summ({"mc": 0.6}), "critical_n_mc_seeds": _seeds([0.6, 0.65, 0.55, 0.6])}
    row = claims.verdicts(res, ids=["fig2c-critical-mc"]).iloc[0]
    assert row["verdict"] == "not reproduced" and "over 5 seeds" in row["measured"] and " sd " in row["measured"]


def test_critical_mc_no_verdict_when_seeds_disagree_or_are_too_few():
    res = {"critical_n_summary": _summ({"mc": 0.06}), "critical_n_mc_seeds": _seeds([0.06, 0.5, 0.06, 0.06])}
    row = claims.verdicts(res, ids=["fig2c-critical-mc"]).iloc[0]
    assert row["verdict"] == "no verdict" and "4 of 5 put N*/L within" in row["cause"]
    res["critical_n_mc_seeds"] = _seeds([0.06, 0.06])
    row = claims.verdicts(res, ids=["fig2c-critical-mc"]).iloc[0]
    assert row["verdict"] == "no verdict" and "only 3 seeds" in row["cause"]


def test_seeds_experiment_repeats_critical_n_with_each_seed(tiny_llama):
    from attn_lib import experiments as E
    from attn_lib.experiments.critical import critical_n_mc_seeds

    text, kw = "War and peace. " * 40, dict(lengths=[8, 16], mc_samples=4)
    seeds = critical_n_mc_seeds(tiny_llama, text, mc_seeds=3, **kw)
    assert sorted(seeds["seed"].unique()) == [1, 2] and (seeds["form"] == "mc").all()
    for s in (1, 2):
        one = E.critical_n_summary(E.critical_n(tiny_llama, text, forms=("mc",), seed=s, **kw))
        got = seeds[seeds["seed"] == s].sort_values(["L", "sampling"])
        assert list(got["n_star"]) == list(one.sort_values(["L", "sampling"])["n_star"])
    with pytest.raises(ValueError, match="mc_seeds"):
        critical_n_mc_seeds(tiny_llama, text, mc_seeds=1, **kw)


# ---- the new rows: causes ---------------------------------------------------------------------------------------------
def test_lemma1_cause_quotes_the_sink_share_when_the_diagnosis_ran():
    df = _dvl()
    diag = pd.DataFrame(
        [
            dict(variant="model", L=128, N=N, layer=0, head=h, kv_group=0, d_tilde=1.0, e1=0.5, lead_d_tilde=1.0)
            | dict(lead_e1=0.5, rho_median=0.9, sink_share=0.4)
            for N in (5, 10)
            for h in range(2)
        ]
    )
    row = claims.verdicts({"distance_vs_length": df, "critical_n_diagnosis": diag}, ids=["lemma1-vanishing"]).iloc[0]
    assert row["verdict"] == "not reproduced" and "40% of its weight" in row["cause"]


def test_jensen_and_cor2_causes_quote_the_measured_values():
    vt = claims.verdicts({"distance_vs_length": _dvl()}, ids=["jensen-gap-small", "cor2-individual-dominate"])
    vt = vt.set_index("id")
    assert (
        vt.loc["jensen-gap-small", "verdict"] == "not reproduced" and "30% of E1" in vt.loc["jensen-gap-small", "cause"]
    )
    assert vt.loc["cor2-individual-dominate", "verdict"] == "not reproduced"
    assert "+30% of E1" in vt.loc["cor2-individual-dominate", "cause"]


def test_sublinear_needs_three_uncensored_lengths():
    s = _summ({"e1": 0.5}, Ls=(16, 32))
    assert claims.verdicts({"critical_n_summary": s}, ids=["fig2c-critical-sublinear"]).iloc[0]["verdict"] == "n/a"
    row = claims.verdicts({"critical_n_summary": _summ({"e1": 0.5})}, ids=["fig2c-critical-sublinear"]).iloc[0]
    assert row["verdict"] == "not reproduced" and "N*/L stays within 0.500" in row["cause"]


def test_distance_monte_carlo_seeds_are_the_runs_with_those_seeds(tiny_llama):
    from attn_lib import experiments as E

    text, kw = "War and peace. " * 40, dict(N=2, lengths=[8, 16], mc_samples=4, mc_rows=4)
    df = E.distance_vs_length(tiny_llama, text, mc_seeds=3, **kw)
    one = E.distance_vs_length(tiny_llama, text, seed=2, **kw)
    assert {"mc", "mc_seed1", "mc_seed2", "indiv"} <= set(df.columns)
    assert np.allclose(df["mc_seed2"], one["mc"]) and not np.allclose(df["mc_seed1"], df["mc"])
    with pytest.raises(ValueError, match="mc_seeds"):
        E.distance_vs_length(tiny_llama, text, mc_seeds=0, **kw)
    dn = E.distance_vs_n(tiny_llama, text, L=16, n_values=[1, 4], mc_samples=0)
    f = CD.bound_factors(dn)
    assert (f["d_max"] >= f["d~"]).all() and set(CD.BOUND_FACTORS.values()) <= set(f.columns)
