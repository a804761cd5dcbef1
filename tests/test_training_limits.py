"""The paper's limits on the trained heads (issue 37, item 3): attn_lib.training.trained_limits and its report."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from attn_lib import training as tr
from attn_lib.cache import ResultCache
from attn_lib.report import training as rep

#: Two tiny models per temperature train in well under a second each; their window is 16 tokens.
TINY = tr.TrainSize(n_layer=1, n_head=2, n_embd=16, n_positions=16, batch=4, steps=3, eval_every=3, eval_batches=1)
WINDOW = 16


@pytest.fixture(scope="module")
def runs():
    out = {("softmax", T, s): tr.train("softmax", T, seed=s, size=TINY) for T in (0.3, 1.0) for s in (0, 1)}
    out[("sigmoid", 1.0, 0)] = tr.train("sigmoid", 1.0, seed=0, size=TINY)
    return out


@pytest.fixture(scope="module")
def lim(runs, tiny_gpt2):
    return tr.trained_limits(runs, window=WINDOW, reference=tiny_gpt2)


def test_one_finite_row_per_softmax_run_and_one_for_the_reference(lim):
    # the sigmoid run is left out (its handle would run softmax on its logits); the reference comes last
    assert list(lim["kind"]) == ["trained"] * 4 + ["reference"]
    assert list(lim["temperature"].iloc[:4]) == [0.3, 0.3, 1.0, 1.0]
    assert list(lim["seed"].iloc[:4]) == [0, 1, 0, 1]
    ns = [c for c in lim if c.startswith("ns_")]
    assert ns == ["ns_1", "ns_2", "ns_4", "ns_8"]  # the paper's N below the window of 16
    num = lim[[*ns, "rho", "g_T0.01", "g_T1", "g_slope"]].to_numpy(dtype=float)
    assert np.isfinite(num).all()
    assert ((lim[ns] >= 0) & (lim[ns] <= 1)).all().all()
    assert (lim["ns_1"] == 1).all()  # the top token is always separable from itself
    assert (lim["rho"] > 0).all() and (lim["g_T1"] > 0).all()
    assert (lim["L"] == WINDOW).all() and (lim["rho_N"] == 1).all()  # 0.06 * 16 rounds to N = 1


def test_the_reference_row_is_labelled_with_its_model(lim):
    ref = lim[lim["kind"] == "reference"].iloc[0]
    assert ref["model"] == "tiny-gpt2" and np.isnan(ref["temperature"]) and np.isnan(ref["seed"])
    assert set(lim.loc[lim["kind"] == "trained", "model"]) == {
        f"gpt2-arch-softmax-T{T:g}-seed{s}" for T in (0.3, 1.0) for s in (0, 1)
    }


def test_the_trained_temperature_is_folded_in(runs):
    # the same weights at a lower training temperature read larger logits: g(T = 1) differs between the two
    a = tr.limits_row(tr.trained_handle(runs[("softmax", 0.3, 0)]), tr.held_out_text(), tr.limits_profile(WINDOW))
    b = tr.limits_row(tr.trained_handle(runs[("softmax", 1.0, 0)]), tr.held_out_text(), tr.limits_profile(WINDOW))
    assert a["g_T1"] != b["g_T1"]


def test_a_cache_hit_returns_the_same_table(runs, tmp_path):
    cache = ResultCache(tmp_path)
    first = tr.trained_limits(runs, window=WINDOW, reference=None, cache=cache)
    n = len(cache.entries())
    assert n == 4  # one entry per softmax run
    second = tr.trained_limits(runs, window=WINDOW, reference=None, cache=cache)
    assert cache.last_status == "hit" and len(cache.entries()) == n
    pd.testing.assert_frame_equal(first, second)


@pytest.mark.parametrize(
    "kw, name",
    [
        (dict(runs=[]), "runs"),
        (dict(runs={("softmax", 1.0, 0): "not a run"}), "runs"),
        (dict(window=4), "window"),
        (dict(window=32), "window"),  # longer than the runs' training window of 16
        (dict(reference=3), "reference"),
    ],
)
def test_bad_input_names_the_parameter(runs, kw, name):
    args = {**dict(runs=runs, window=WINDOW, reference=None), **kw}
    with pytest.raises(ValueError, match=name):
        tr.trained_limits(args.pop("runs"), **args)


def test_no_softmax_run_is_an_error(runs):
    with pytest.raises(ValueError, match="runs must hold at least one softmax run"):
        tr.trained_limits({k: v for k, v in runs.items() if k[0] != "softmax"}, window=WINDOW, reference=None)


def test_the_report_table_and_words_follow_the_numbers(lim, runs):
    t = rep.limits_table(lim)
    assert list(t["training"]) == ["softmax, T = 0.3", "softmax, T = 1", "pretrained (reference)"]
    assert list(t["seeds"]) == [2, 2, 1]
    med = lim[lim["temperature"] == 0.3]["ns_8"].median()
    assert t.loc[0, "ns_8"] == pytest.approx(med)
    words = rep.limits_words(lim)
    assert "tiny-gpt2" in words and f"{med:.3g} at T = 0.3" in words
    ref = float(lim.loc[lim["kind"] == "reference", "rho"].iloc[0])
    assert f"reference's {ref:.3g}" in words
    fig = rep.figure_limits(lim, tr.sweep_tables(runs)["train_runs"])
    assert len(fig.axes) >= 3
    import matplotlib.pyplot as plt

    plt.close(fig)


def test_trend_words():
    assert rep._trend(pd.Series([1.0, 2.0, 3.0])) == "rises with T"
    assert rep._trend(pd.Series([3.0, 2.0, 1.0])) == "falls with T"
    assert rep._trend(pd.Series([1.0, 3.0, 2.0])) == "is not monotone in T"


@pytest.mark.slow
def test_the_default_reference_is_the_pretrained_standin(runs):
    lim = tr.trained_limits({k: v for k, v in runs.items() if k == ("softmax", 1.0, 0)}, window=WINDOW)
    assert list(lim["kind"]) == ["trained", "reference"]
    assert "SmolLM2" in lim["model"].iloc[-1]
    assert np.isfinite(lim[["ns_8", "rho", "g_T1"]].to_numpy(dtype=float)).all()
