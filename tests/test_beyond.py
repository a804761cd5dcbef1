"""Tests for the chapter "Beyond softmax" (attn_lib.experiments.normalizers, .weights and .swap): each limit metric of
every compared normaliser on toy inputs, against attn_lib.theory's one-row references, brute force and closed forms."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch

from attn_lib import experiments as B
from attn_lib import jacobian as jb
from attn_lib import normalizers as nz
from attn_lib import theory as th
from attn_lib.book.swap_view import live_renderer, swap_setting
from attn_lib.experiments import weights
from attn_lib.experiments.normalizers import CompareAnalysis

pytestmark = pytest.mark.numerical  # run twice by `make test`: with the accelerator, and --without-numba

SETTINGS = B.normalizer_settings((2, 5))
LABELS = list(SETTINGS)


def toy(H=2, L=12, d=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(H, L, L, generator=g, dtype=torch.float64) * 2
    causal = torch.ones(L, L, dtype=torch.bool).tril()
    logits = logits.masked_fill(~causal, -math.inf)
    values = torch.randn(H, L, d, generator=g, dtype=torch.float64)
    return logits, causal, values


def weights_of(label, logits, mask):
    name, params = SETTINGS[label]
    return nz.get(name, **params)(logits, 1.0, mask=mask)


# ---------------------------------------------------------------------------------------------------------
# normalizer_settings / row_sample
# ---------------------------------------------------------------------------------------------------------
def test_normalizer_settings_lists_every_normaliser_with_topk_at_each_k():
    s = B.normalizer_settings((3, 7))
    assert list(s)[:3] == ["softmax", "top-3", "top-7"]
    # every normaliser of the registry's comparison, and top-k (the built-in set is pinned in tests/test_registry.py)
    assert {name for name, _ in s.values()} == {"topk", *nz.available(compared=True)}
    assert s["top-7"] == ("topk", {"k": 7})


def test_normalizer_settings_rejects_bad_k():
    with pytest.raises(ValueError, match="k_values"):
        B.normalizer_settings((0,))


def test_row_sample_takes_rows_with_t_in_upper_half_ending_at_L():
    rs = B.weights.row_sample([8, 32], 4)
    for L, r in rs.items():
        t = r + 1
        assert t.max() == L and (t > L / 2).all() and len(r) == 4


def test_row_sample_rejects_bad_input():
    with pytest.raises(ValueError, match="rows_per_length"):
        B.weights.row_sample([8], 0)
    with pytest.raises(ValueError, match="lengths"):
        B.weights.row_sample([1], 2)


# ---------------------------------------------------------------------------------------------------------
# row_metrics: d~, E1 and N_s/N per normaliser against theory's one-row references
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("label", LABELS)
def test_row_metrics_match_theory_for_every_normaliser(label):
    logits, causal, values = toy()
    w = weights_of(label, logits, causal)
    ns = [1, 3, 6]
    m = B.weights.row_metrics(w, values, causal, ns)
    for h in range(2):
        for r in range(12):
            t = r + 1
            a, X = w[h, r, :t].numpy(), values[h, :t].numpy()
            for c, N in enumerate(ns):
                assert bool(m["valid"][h, r, c]) == (t >= N + 1)
                if t < N + 1:
                    continue
                assert m["d_tilde"][h, r, c].item() == pytest.approx(th.distance(a, X, N), rel=1e-9, abs=1e-12)
                assert m["e1"][h, r, c].item() == pytest.approx(th.expectation_e1(a, X, N), rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("label", LABELS)
def test_row_metrics_separability_matches_theory_on_unit_vectors(label):
    logits, causal, values = toy(seed=3)
    w = weights_of(label, logits, causal)
    m = B.weights.row_metrics(w, values, causal, [2, 4], unit=True)
    unit = values / values.norm(dim=-1, keepdim=True)
    for h in range(2):
        for r in range(5, 12):
            a, X = w[h, r, : r + 1].numpy(), unit[h, : r + 1].numpy()
            for c, N in enumerate([2, 4]):
                assert m["sep"][h, r, c].item() == pytest.approx(th.separability(a, X, N), abs=1e-12)


def test_row_metrics_topk_zero_weights_put_every_dropped_token_at_norm_s():
    # top-k with N = k: every dropped token has a_i = 0, so d~ = (t - k) ||s||
    logits, causal, values = toy(seed=5)
    w = nz.topk(logits, k=2, mask=causal)
    m = B.weights.row_metrics(w, values, causal, [2])
    r = 11
    s = (w[0, r, :, None] * values[0]).sum(0)
    assert m["d_tilde"][0, r, 0].item() == pytest.approx((12 - 2) * s.norm().item(), rel=1e-12)


def test_row_metrics_blocks_of_n_give_the_same_result(monkeypatch):
    # the N values are processed in blocks of at most BLOCK_ELEMS entries; one N per block must change nothing
    logits, causal, values = toy(seed=7)
    w = nz.sparsemax(logits, mask=causal)
    ns = [1, 2, 3, 5, 8]
    whole = B.weights.row_metrics(w, values, causal, ns)
    monkeypatch.setattr(weights, "BLOCK_ELEMS", 1)
    split = B.weights.row_metrics(w, values, causal, ns)
    for k in ("d_tilde", "e1", "sep", "valid"):
        assert torch.allclose(whole[k].double(), split[k].double(), rtol=1e-12, atol=0), k
    assert whole["valid"].any() and not whole["valid"].all()


def test_row_metrics_rejects_bad_input():
    logits, causal, values = toy()
    w = nz.softmax(logits, mask=causal)
    with pytest.raises(ValueError, match="weights must be"):
        B.weights.row_metrics(w[0], values, causal, [1])
    with pytest.raises(ValueError, match="non-negative"):
        B.weights.row_metrics(-w, values, causal, [1])
    with pytest.raises(ValueError, match="n_values"):
        B.weights.row_metrics(w, values, causal, [0])


# ---------------------------------------------------------------------------------------------------------
# softmax_type_spectral_norm
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("k", [None, 1, 3])
@pytest.mark.parametrize("T", [0.1, 1.0])
def test_spectral_norm_matches_the_dense_jacobian(k, T):
    x = torch.randn(5, 9, generator=torch.Generator().manual_seed(2), dtype=torch.float64) * 3
    J = jb.softmax_jacobian(x, T) if k is None else jb.jacobian("topk", x, T, k=k)
    w = nz.softmax(x, T) if k is None else nz.topk(x, T, k=k)
    ref = torch.linalg.matrix_norm(J, ord=2)
    torch.testing.assert_close(B.weights.softmax_type_spectral_norm(w, T), ref, atol=1e-12, rtol=1e-10)


def test_spectral_norm_at_a_two_way_tie_is_half_over_T():
    w = torch.tensor([0.5, 0.5, 0.0], dtype=torch.float64)
    assert B.weights.softmax_type_spectral_norm(w, 2.0).item() == pytest.approx(0.25, abs=1e-14)


def test_spectral_norm_rejects_negative_weights():
    with pytest.raises(ValueError, match="weights"):
        B.weights.softmax_type_spectral_norm(torch.tensor([-0.1, 1.1]))


# ---------------------------------------------------------------------------------------------------------
# the comparison, on a toy layer (every metric, every normaliser)
# ---------------------------------------------------------------------------------------------------------
TOY_PROFILE = B.BeyondProfile(
    name="toy",
    lengths=(8, 16),
    rows_per_length=3,
    n_distance=2,
    crit_grid=(1, 2, 4, 8),
    sep_n=(1, 2, 4),
    temperatures=(0.1, 1.0),
    eps_values=(1e-3,),
    k_values=(2,),
    swap_length=16,
    swap_lengths=(8, 16),
    k_grid=(1, 4, 16),
    t_grid=(0.5, 1.0),
)


def toy_table(n_layers=3, H=4):
    a = CompareAnalysis(
        {"model": "toy", "text": "toy", "device": "cpu"},
        TOY_PROFILE,
        B.normalizer_settings(TOY_PROFILE.k_values),
        seed=0,
    )
    for layer in range(n_layers):
        logits, causal, values = toy(H=H, L=16, seed=10 + layer)
        la = SimpleNamespace(
            layer=layer, logits=logits.unsqueeze(0), mask=causal.view(1, 1, 16, 16), values=values.unsqueeze(0)
        )
        a.layer(la)
    return a.finish()


@pytest.fixture(scope="module")
def table():
    return toy_table()


def test_compare_table_has_every_metric_for_every_normaliser(table):
    got = table.groupby("normalizer")["metric"].agg(lambda m: set(m))
    for lab in B.normalizer_settings((2,)):
        expect = {"max_alpha", "L_max_alpha", "d_tilde", "e1", "sep_fraction", "g"}
        if nz.spec(B.normalizer_settings((2,))[lab][0]).jacobian == "softmax":
            expect.add("jac_norm")
        assert got[lab] == expect, lab
    assert (table[["model", "text", "device"]] == ["toy", "toy", "cpu"]).all().all()


def test_compare_scans_the_grid_below_l_not_l_minus_one(table):
    d = table[table["metric"] == "d_tilde"]
    for L in TOY_PROFILE.lengths:
        got = set(d[d["L"] == L]["N"].astype(int))
        assert got == {n for n in TOY_PROFILE.crit_grid if n < L} | {TOY_PROFILE.n_distance}, L


def test_at_n_equal_l_minus_one_d_tilde_and_e1_are_the_same_kind_of_term():
    # why the scan leaves N = L - 1 out: with one token j left out and p = 1, d~ = ||2 a_j - z|| and
    # E1 = mean_i ||2 a_i - z|| (chapter 7's prose says so)
    logits, causal, values = toy(seed=9)
    w = nz.softmax(logits, mask=causal)
    L = w.shape[-1]
    m = B.weights.row_metrics(w, values, causal, [L - 1])
    for h in range(w.shape[0]):
        a = w[h, L - 1].double()[:, None] * values[h].double()
        z = a.sum(0)
        j = int(torch.argmin(w[h, L - 1]))
        terms = (2 * a - z).norm(dim=-1)
        assert m["valid"][h, L - 1, 0] and not m["valid"][h, L - 2, 0]
        assert m["d_tilde"][h, L - 1, 0].item() == pytest.approx(terms[j].item(), rel=1e-12)
        assert m["e1"][h, L - 1, 0].item() == pytest.approx(terms.mean().item(), rel=1e-12)


def test_compare_max_alpha_is_the_row_sample_mean(table):
    logits, causal, _ = toy(H=4, L=16, seed=10)
    rows = B.weights.row_sample([8, 16], 3)[16]
    w = nz.sparsemax(logits, mask=causal)
    ref = w[:, rows].amax(-1).mean(-1)
    got = table.query("normalizer == 'sparsemax' and metric == 'max_alpha' and layer == 0 and L == 16")
    np.testing.assert_allclose(got.sort_values("head")["value"].to_numpy(), ref.numpy(), rtol=1e-12)


def test_compare_g_matches_jacobian_sensitivity(table):
    logits, causal, _ = toy(H=4, L=16, seed=11)
    rows = torch.as_tensor(B.weights.row_sample([8, 16], 3)[16])
    g = jb.sensitivity(logits[:, rows], 0.1, 1e-3, normalizer=nz.softpick, mask=causal[rows], seed=1)
    got = table.query("normalizer == 'softpick' and metric == 'g' and layer == 1 and T == 0.1")
    np.testing.assert_allclose(got.sort_values("head")["value"].to_numpy(), g.mean(-1).numpy(), rtol=1e-12)


def test_compare_topk_max_alpha_at_least_one_over_k(table):
    v = table.query("normalizer == 'top-2' and metric == 'max_alpha'")["value"]
    assert (v >= 0.5 - 1e-12).all()


def test_critical_n_from_heads_finds_first_passing_n():
    rows = []
    for N in (1, 2, 4):
        for head in range(30):
            d = 10.0 + head
            e = d + (100.0 if N < 4 else 0.0)  # separated until N = 4
            rows += [
                dict(normalizer="x", L=16, N=N, layer=0, head=head, metric="d_tilde", value=d),
                dict(normalizer="x", L=16, N=N, layer=0, head=head, metric="e1", value=e),
            ]
    c = B.critical_n_from_heads(pd.DataFrame(rows))
    assert c.iloc[0]["n_star"] == 4 and not c.iloc[0]["censored"] and c.iloc[0]["ratio"] == 4 / 16


def test_critical_n_from_heads_censored_when_never_passing():
    rows = [
        dict(normalizer="x", L=8, N=N, layer=0, head=h, metric=m, value=h + (50.0 if m == "e1" else 0))
        for N in (1, 2)
        for h in range(30)
        for m in ("d_tilde", "e1")
    ]
    c = B.critical_n_from_heads(pd.DataFrame(rows))
    assert bool(c.iloc[0]["censored"]) and c.iloc[0]["n_star"] == 2


def test_critical_n_from_heads_rejects_other_tables():
    with pytest.raises(ValueError, match="compare_normalizers"):
        B.critical_n_from_heads(pd.DataFrame({"a": [1]}))


def test_limits_summary_has_one_row_per_normaliser(table):
    s = B.limits_summary(table)
    assert list(s.index) == list(B.normalizer_settings((2,)))
    assert s.loc["top-2", "max_alpha_slope"] > s.loc["softmax", "max_alpha_slope"]  # top-k cannot dilute below 1/k
    assert math.isnan(s.loc["sparsemax", "jac_norm_T1"]) and s.loc["softmax", "jac_norm_T1"] <= 0.5 + 1e-12


def test_compare_normalizers_rejects_bad_profile():
    with pytest.raises(ValueError, match="profile"):
        B.compare_normalizers(SimpleNamespace(max_length=1024), "text", profile="huge")


# ---------------------------------------------------------------------------------------------------------
# on tiny random-init models (conftest.py): the pass, the cache and the live swap
# ---------------------------------------------------------------------------------------------------------
TEXT = ("Well, Prince, so Genoa and Lucca are now just family estates of the Buonapartes. " * 30).strip()


def test_compare_normalizers_on_a_tiny_model_is_cached(tiny_gpt2, tmp_path):
    from attn_lib.cache import ResultCache

    cache = ResultCache(tmp_path)
    df = B.compare_normalizers(tiny_gpt2, TEXT, profile=TOY_PROFILE, cache=cache)
    assert set(df["layer"]) == {0, 1} and set(df["head"]) == {0, 1, 2, 3}
    assert df["model"].iloc[0] == "tiny-gpt2" and df["device"].iloc[0] == "cpu"
    again = B.compare_normalizers(tiny_gpt2, TEXT, profile=TOY_PROFILE, cache=cache)
    pd.testing.assert_frame_equal(df, again)
    assert len(cache.entries()) == 1


def test_compare_table_is_the_frame_of_one_dict_per_row():
    """CompareAnalysis keeps a block per call and expands it at the end: the frame a list of one dict per (row, head)
    gives, with the same column order, dtypes and missing grid values."""
    from attn_lib.experiments.normalizers import CompareAnalysis

    a = CompareAnalysis.__new__(CompareAnalysis)
    a.meta, a.out = dict(model="m", text="t", device="cpu"), []
    calls = [
        ("softmax", "softmax", "max_alpha", 0, [0.5, 0.25], dict(L=8)),
        ("top-4", "topk", "d_tilde", 1, [1.5, float("nan")], dict(L=8, N=2)),
        ("softmax", "softmax", "g", 1, [0.125, 3.0], dict(L=16, T=0.1, eps=1e-3)),
        ("softmax", "softmax", "jac_norm", 2, [2.0, 4.0], dict(L=16, T=1.0)),
    ]
    rows = []
    for label, name, metric, layer, values, where in calls:
        a._add(label, name, metric, layer, torch.tensor(values, dtype=torch.float64), **where)
        for h, v in enumerate(values):
            rows.append(
                dict(a.meta, normalizer=label, family=name, metric=metric, layer=layer, head=h, value=v, **where)
            )
    ref = pd.DataFrame(rows)
    ref[["L", "N"]] = ref[["L", "N"]].astype("Int64")
    pd.testing.assert_frame_equal(a.finish(), ref, check_exact=True)


def test_compare_normalizers_softmax_is_the_models_attention(tiny_llama):
    from attn_lib.capture import collect_attention
    from attn_lib.experiments import text_window

    df = B.compare_normalizers(tiny_llama, TEXT, profile=TOY_PROFILE)
    la = collect_attention(tiny_llama, text_window(tiny_llama, TEXT, 16), keep_qk=False)[1]
    rows = B.weights.row_sample([8, 16], 3)[16]
    ref = la.weights[0][:, rows].double().amax(-1).mean(-1)
    got = df.query("normalizer == 'softmax' and metric == 'max_alpha' and layer == 1 and L == 16")
    np.testing.assert_allclose(got.sort_values("head")["value"].to_numpy(), ref.numpy(), rtol=1e-5)


@pytest.fixture(scope="module")
def swap(tiny_gpt2):
    return B.live_swap(tiny_gpt2, TEXT, profile=TOY_PROFILE, start=0, layer=1, head=2)


def test_live_swap_model_setting_is_the_models_own_loss(tiny_gpt2, swap):
    from attn_lib.experiments import text_window

    ids = text_window(tiny_gpt2, TEXT, 16)
    with torch.no_grad():
        logits = tiny_gpt2.model(ids).logits[0, :-1].double()
    ref = torch.nn.functional.cross_entropy(logits, ids[0, 1:]).item()
    got = swap.losses.query("setting == 'softmax (model)' and L == 16")["loss"].item()
    assert got == pytest.approx(ref, rel=1e-6)


def test_live_swap_loss_at_each_L_is_the_prefix_mean(swap):
    lm = swap.losses.query("setting == 'sparsemax'").set_index("L")
    assert lm.loc[8, "n_predictions"] == 7 and lm.loc[16, "n_predictions"] == 15
    assert lm.loc[16, "perplexity"] == pytest.approx(math.exp(lm.loc[16, "loss"]))


def test_live_swap_topk_with_k_at_least_L_is_softmax_and_small_k_changes_the_loss(swap):
    loss = swap.losses.query("L == 16").set_index("setting")["loss"]
    assert loss["top-16"] == pytest.approx(loss["softmax (model)"], rel=1e-5)
    assert loss["top-1"] != pytest.approx(loss["softmax (model)"], rel=1e-3)
    assert loss["softmax T=1"] == pytest.approx(loss["softmax (model)"], rel=1e-5)


def test_live_swap_top_k_as_long_as_the_window_reuses_softmax_and_equals_its_own_pass(tiny_gpt2, swap):
    """top-16 on a 16-token window is softmax on every row: live_swap relabels the softmax T=1 pass, and a pass
    computed for top-16 itself (swap_setting) gives the same bits."""
    r = swap.rows.set_index("setting")
    assert r.loc["top-16", "normalizer"] == "topk" and r.loc["top-16", "k"] == 16 and r.loc["top-16", "T"] == 1.0
    fresh = swap_setting(tiny_gpt2, TEXT, "top-16", **SWAP_KW).iloc[0]
    np.testing.assert_array_equal(r.loc["top-16", "attention"], fresh["attention"])
    assert r.loc["top-16", "loss"] == fresh["loss"] and r.loc["top-16", "d_tilde"] == fresh["d_tilde"]
    top = swap.losses.query("setting == 'top-16'")
    soft = swap.losses.query("setting == 'softmax T=1'")
    assert (top["normalizer"] == "topk").all() and (top["k"] == 16).all()
    assert list(top["L"]) == list(soft["L"]) and list(top["loss"]) == list(soft["loss"])


def test_live_swap_records_the_chosen_row(swap):
    r = swap.rows.set_index("setting")
    assert (r["layer"] == 1).all() and (r["head"] == 2).all() and (r["row"] == 15).all()
    top1 = r.loc["top-1", "attention"]
    assert len(top1) == 16 and (top1 > 0).sum() == 1
    assert r.loc["softmax (model)", "attention"].sum() == pytest.approx(1.0, abs=1e-5)
    assert r.loc["top-4", "d_tilde"] > 0


def test_live_swap_rejects_bad_input(tiny_gpt2):
    with pytest.raises(ValueError, match="head"):
        B.live_swap(tiny_gpt2, TEXT, profile=TOY_PROFILE, head=99, start=0)
    with pytest.raises(ValueError, match="layer"):
        B.live_swap(tiny_gpt2, TEXT, profile=TOY_PROFILE, layer=5, start=0)


# ---------------------------------------------------------------------------------------------------------
# one setting computed now (the sliders' live mode)
# ---------------------------------------------------------------------------------------------------------
SWAP_KW = dict(profile=TOY_PROFILE, start=0, layer=1, head=2)


@pytest.mark.parametrize("setting", ["top-4", "softmax T=0.5", "sparsemax", "softmax (model)"])
def test_swap_setting_equals_the_live_swap_row(tiny_gpt2, swap, setting):
    one = swap_setting(tiny_gpt2, TEXT, setting, **SWAP_KW)
    assert list(one["setting"]) == [setting] and set(swap.rows.columns) <= set(one.columns)
    ref = swap.rows.set_index("setting").loc[setting]
    got = one.iloc[0]
    np.testing.assert_allclose(got["attention"], ref["attention"], rtol=1e-6, atol=1e-9)
    assert got["loss"] == pytest.approx(ref["loss"], rel=1e-6)
    assert got["d_tilde"] == pytest.approx(ref["d_tilde"], rel=1e-6)


def test_swap_setting_off_the_grid(tiny_gpt2):
    kw = dict(SWAP_KW, layer=0)  # layer 0's logits do not depend on the swap, so its row is softmax(logits / T)
    top3 = swap_setting(tiny_gpt2, TEXT, "top-3", **kw).iloc[0]
    assert top3["k"] == 3 and (top3["attention"] > 0).sum() == 3
    model = swap_setting(tiny_gpt2, TEXT, "softmax (model)", **kw).iloc[0]["attention"]
    t07 = swap_setting(tiny_gpt2, TEXT, "softmax T=0.7", **kw).iloc[0]
    assert t07["T"] == 0.7
    want = torch.softmax(torch.log(torch.as_tensor(model)) / 0.7, dim=-1).numpy()  # softmax(l/T), l up to a shift
    np.testing.assert_allclose(t07["attention"], want, rtol=1e-4, atol=1e-7)
    assert not np.allclose(t07["attention"], model, rtol=1e-3)


@pytest.mark.parametrize(
    ("setting", "match"),
    [
        ("top-0", "k must be"),
        ("top-x", "setting must be"),
        ("softmax T=-1", "T must be"),
        ("relu", "setting"),
        (3, "setting"),
    ],
)
def test_swap_setting_rejects_bad_settings(tiny_gpt2, setting, match):
    with pytest.raises(ValueError, match=match):
        swap_setting(tiny_gpt2, TEXT, setting, **SWAP_KW)


def test_live_renderer_draws_the_recomputed_row(tiny_gpt2, swap):
    from matplotlib.figure import Figure

    render = live_renderer(tiny_gpt2, TEXT, swap.rows, sweep="k", **SWAP_KW)
    fig = render("top-4")
    assert isinstance(fig, Figure)
    title = fig.axes[0].get_title()
    assert title.startswith("top-4: layer 1, head 2, row 15") and "4 tokens > 0" in title
    with pytest.raises(ValueError, match="sweep"):
        live_renderer(tiny_gpt2, TEXT, swap.rows, sweep="N")


@pytest.mark.accel
@pytest.mark.parametrize("unit", [False, True])
def test_row_metrics_engines_agree(unit):
    """The compiled row sums and the float64 tensor code: N_s/N identical (each distance is the same expression),
    d~ and E1 equal to rounding; on rows with ties in the weights, masked positions and rows too short for some N."""
    g = torch.Generator().manual_seed(5)
    H, R, L, d = 3, 6, 50, 7
    logits = torch.randn(H, R, L, generator=g, dtype=torch.float64).round()  # integer logits: ties
    mask = torch.rand(R, L, generator=g) < 0.7
    mask[:, 0] = True
    mask[0, 3:] = False  # a row of 3 visible tokens
    w = torch.softmax(logits.masked_fill(~mask, -math.inf), -1)
    V = torch.randn(H, L, d, generator=g, dtype=torch.float64)
    ns = [1, 2, 5, 17, 40]
    a = B.weights.row_metrics(w, V, mask, ns, unit=unit, engine="torch")
    b = B.weights.row_metrics(w, V, mask, ns, unit=unit, engine="numba")
    assert torch.equal(a["valid"], b["valid"]) and torch.equal(a["sep"], b["sep"])
    for k in ("d_tilde", "e1"):
        torch.testing.assert_close(b[k], a[k], rtol=1e-12, atol=1e-14)
    assert (b["sep"] > 0).any() and (b["sep"] < 1).any() and (b["d_tilde"] > 0).any()


def test_row_metrics_engine_must_be_known():
    w = torch.full((1, 2, 3), 1 / 3, dtype=torch.float64)
    V = torch.randn(1, 3, 2, dtype=torch.float64)
    with pytest.raises(ValueError, match="engine must be one of"):
        B.weights.row_metrics(w, V, torch.ones(2, 3, dtype=torch.bool), [1], engine="gpu")
