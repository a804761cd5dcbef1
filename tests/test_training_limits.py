"""The paper's limits on the trained heads (issue 37, item 3): attn_lib.training.trained_limits and its report."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pandas as pd
import pytest

from attn_lib import normalizers as nz
from attn_lib import training as tr
from attn_lib.cache import ResultCache
from attn_lib.report import training as rep

#: Two layers of two heads, so that the second layer reads hidden states the trained normaliser produced in the first;
#: each model trains in well under a second, and its window is 16 tokens.
TWO = tr.TrainSize(n_layer=2, n_head=2, n_embd=16, n_positions=16, batch=4, steps=3, eval_every=3, eval_batches=1)
WINDOW = 16


@pytest.fixture(scope="module")
def runs():
    out = {("softmax", T, s): tr.train("softmax", T, seed=s, size=TWO) for T in (1.0, 0.3) for s in (1, 0)}
    for name in ("topk", "sigmoid"):  # out of the registry's order: the table puts them in it
        out[(name, 1.0, 0)] = tr.train(name, 1.0, seed=0, size=TWO)
    return out


@pytest.fixture(scope="module")
def lim(runs, tiny_gpt2):
    return tr.trained_limits(runs, window=WINDOW, reference=tiny_gpt2)


def test_one_finite_row_per_run_and_one_for_the_reference(lim):
    assert list(lim["kind"]) == ["trained"] * 6 + ["reference"]
    assert list(zip(lim["normalizer"], lim["temperature"], lim["seed"]))[:6] == [
        ("softmax", 0.3, 0), ("softmax", 0.3, 1), ("softmax", 1.0, 0), ("softmax", 1.0, 1), ("sigmoid", 1.0, 0),
        ("topk", 1.0, 0),
    ]  # fmt: skip
    ns = [c for c in lim if c.startswith("ns_")]
    assert ns == ["ns_2", "ns_4", "ns_8"]  # the paper's N between 1 (always separable) and the window of 16
    num = lim[["b", *ns, "rho", "g_T0.01", "g_T1", "g_slope"]].to_numpy(dtype=float)
    assert np.isfinite(num).all()
    assert ((lim[ns] >= 0) & (lim[ns] <= 1)).all().all()
    assert (lim["rho"] > 0).all() and (lim["g_T1"] > 0).all()
    assert (lim["L"] == WINDOW).all() and (lim["rho_N"] == 1).all()  # 0.06 * 16 is nearest N = 1
    assert (lim["n_heads"].iloc[:6] == 4).all() and lim["n_heads"].iloc[-1] == 8


def test_weights_on_the_simplex_keep_g_within_sqrt2_over_eps(lim):
    """Weights that sum to one move by at most sqrt(2) in 2-norm: g(T, eps) <= sqrt(2)/eps for every such model."""
    simplex = lim[lim["normalizer"].isin(nz.available(sums_to_one=True))]
    assert len(simplex) == 6
    g = simplex[[c for c in lim if c.startswith("g_T")]].to_numpy(dtype=float)
    assert (g <= np.sqrt(2) / lim["eps"].iloc[0] * (1 + 1e-9)).all()


def _old_limits_profile(window):
    """The grids the former ``trained_limits`` gave :func:`attn_lib.experiments.run_all` (commit 7494374)."""
    from attn_lib.experiments import PROFILES, DiagnosisParams

    q, p = PROFILES["quick"], tr.limits_profile(window)
    return dataclasses.replace(
        q,
        name=f"trained-limits-L{window}",
        distance_vs_length=dataclasses.replace(q.distance_vs_length, lengths=(window,)),
        distance_vs_n=dataclasses.replace(q.distance_vs_n, L=window, n_values=(1, 5)),
        critical_n=dataclasses.replace(q.critical_n, lengths=(window,), stage=window - 1),
        separability=p["separability"],
        gradient_sensitivity=dataclasses.replace(q.gradient_sensitivity, L=window, eps_values=(p["eps"],)),
        critical_n_diagnosis=DiagnosisParams(L=window, rows=32, variants={"model": (1.0, False)}),
    )


@pytest.mark.parametrize("which", ["softmax at T = 1", "reference", pytest.param("stand-in", marks=pytest.mark.slow)])
def test_a_softmax_row_is_the_reproductions_experiments(lim, runs, tiny_gpt2, which):
    """With softmax, each limit is what Algorithms 4 and 5 and the critical-N diagnosis of ``run_all`` give on the
    model's own pass (what the former ``trained_limits`` reported), to 1e-9 relative: a trained softmax model, the
    tiny reference, and the pretrained stand-in (the book's reference row)."""
    from attn_lib.experiments import run_all
    from attn_lib.models import load_model

    handle = {"softmax at T = 1": lambda: tr.trained_handle(runs[("softmax", 1.0, 0)]), "reference": lambda: tiny_gpt2,
              "stand-in": lambda: load_model(tr.LIMITS_REFERENCE, device="cpu", quiet=True)}[which]()  # fmt: skip
    mine = {"softmax at T = 1": lim.iloc[2], "reference": lim.iloc[-1]}.get(which)
    if mine is None:
        mine = tr.limits_row(handle, tr.held_out_text(), tr.limits_profile(WINDOW))
    names = ["separability", "critical_n_diagnosis", "gradient_sensitivity"]
    sep, diag, sens = (
        run_all(handle, tr.held_out_text(), _old_limits_profile(WINDOW), experiments=names)[n] for n in names
    )
    theirs = {f"ns_{int(n)}": v for n, v in sep.groupby("N")["fraction"].median().items()}
    theirs["rho"] = diag.loc[diag["N"] == mine["rho_N"], "rho_median"].median()
    curve = sens.groupby(["draw", "T"])["g"].max().unstack("draw")  # max over (layer, head)
    for T in tr.LIMITS_T:
        at = curve.loc[np.isclose(curve.index, T)].iloc[0]
        theirs.update({f"g_T{T:g}": at.median(), f"g_T{T:g}_lo": at.min(), f"g_T{T:g}_hi": at.max()})
    low = curve[curve.index <= 0.1 * (1 + 1e-9)].median(axis=1)
    theirs["g_slope"] = np.polyfit(np.log10(low.index), np.log10(low.clip(lower=1e-300)), 1)[0]
    for c, v in theirs.items():
        assert mine[c] == pytest.approx(v, rel=1e-9, abs=0 if c != "g_slope" else 1e-12), c


def test_the_trained_temperature_is_folded_in(runs):
    # the same weights at a lower training temperature read larger logits: g(T = 1) differs between the two
    p, text = tr.limits_profile(WINDOW), tr.held_out_text()
    a = tr.limits_row(tr.trained_handle(runs[("softmax", 0.3, 0)]), text, p)
    b = tr.limits_row(tr.trained_handle(runs[("softmax", 1.0, 0)]), text, p)
    assert a["g_T1"] != b["g_T1"]


def test_the_learned_parameters_are_measured(runs, lim):
    """The sigmoid model's row reads its learned bias offsets: with them set to 0 the same weights measure otherwise."""
    run = runs[("sigmoid", 1.0, 0)]
    assert any(abs(b) > 1e-6 for b in run.summary["learned"])  # three steps moved the learned bias
    mine = lim[lim["normalizer"] == "sigmoid"].iloc[0]
    handle = tr.trained_handle(run)
    again = tr.limits_row(handle, tr.held_out_text(), tr.limits_profile(WINDOW), "sigmoid", {})
    assert again["g_T1"] == pytest.approx(mine["g_T1"], rel=1e-12)
    handle.model.attn_lib_norm.data.zero_()
    zeroed = tr.limits_row(handle, tr.held_out_text(), tr.limits_profile(WINDOW), "sigmoid", {})
    assert zeroed["g_T1"] != pytest.approx(mine["g_T1"], rel=1e-6)


def test_a_cache_hit_returns_the_same_table(runs, tmp_path):
    cache = ResultCache(tmp_path)
    first = tr.trained_limits(runs, window=WINDOW, reference=None, cache=cache)
    assert len(cache.entries()) == len(runs)  # one entry per run
    second = tr.trained_limits(runs, window=WINDOW, reference=None, cache=cache)
    assert cache.last_status == "hit" and len(cache.entries()) == len(runs)
    pd.testing.assert_frame_equal(first, second)


@pytest.mark.parametrize(
    "kw, name",
    [
        (dict(runs=[]), "runs"),
        (dict(runs={}), "runs"),
        (dict(runs={("softmax", 1.0, 0): "not a run"}), "runs"),
        (dict(window=8), "window"),  # b needs two row lengths
        (dict(window=32), "window"),  # longer than the runs' training window of 16
        (dict(reference=3), "reference"),
    ],
)
def test_bad_input_names_the_parameter(runs, kw, name):
    args = {**dict(runs=runs, window=WINDOW, reference=None), **kw}
    with pytest.raises(ValueError, match=name):
        tr.trained_limits(args.pop("runs"), **args)


def test_the_report_table_and_words_follow_the_numbers(lim, runs):
    t = rep.limits_table(lim)
    assert list(t["training"]) == [
        "softmax, T = 0.3", "softmax, T = 1", "sigmoid, T = 1", "topk, T = 1", "tiny-gpt2 (pretrained)",
    ]  # fmt: skip
    assert list(t["seeds"]) == [2, 2, 1, 1, 1]
    med = lim[lim["temperature"] == 0.3]["ns_8"].median()
    assert t.loc[0, "ns_8"] == pytest.approx(med)
    words = rep.limits_words(lim)
    assert f"{med:.3g} at T = 0.3" in words
    ref = float(lim.loc[lim["kind"] == "reference", "rho"].iloc[0])
    assert f"reference's {ref:.3g}" in words
    o = lim[lim["normalizer"].isin(["sigmoid", "topk"])].set_index("normalizer")["g_T1"]
    assert f"from {o.min():.3g} ({o.idxmin()}) to {o.max():.3g} ({o.idxmax()})" in words
    fig = rep.figure_limits(lim, tr.sweep_tables(runs)["train_runs"])
    assert len([a for a in fig.axes if a.get_visible()]) == 4
    import matplotlib.pyplot as plt

    plt.close(fig)


def test_the_limits_figure_labels_do_not_overlap_with_every_normaliser(lim, runs):
    """The book's sweep has 17 lines (softmax at 6 temperatures, 11 normalisers): their labels must not overlap."""
    import matplotlib.pyplot as plt

    one = lim[lim["kind"] == "trained"].iloc[[0]]
    many = pd.concat(
        [one.assign(temperature=float(T)) for T in np.logspace(-2, 1, 17)] + [lim[lim["kind"] != "trained"]]
    )
    fig = rep.figure_limits(many.reset_index(drop=True), tr.sweep_tables(runs)["train_runs"])
    fig.canvas.draw()
    boxes = sorted((t.get_window_extent() for t in fig.axes[0].get_yticklabels()), key=lambda b: b.y0)
    assert len(boxes) == 17
    assert all(lo.y1 <= hi.y0 for lo, hi in itertools.pairwise(boxes)), "tick labels overlap"
    plt.close(fig)


def test_the_words_say_why_there_is_no_critical_n(lim):
    """Two layers of two heads: a two-sample KS test over 4 values never goes below 2/70, so at chapter 7's level 0.01
    the critical N would be 1 by construction, and the words say so; with enough heads they do not."""
    assert "over 4 heads that test's smallest p-value is 0.0286, not below its level 0.01" in rep.limits_words(lim)
    assert np.allclose(lim["ks_p_min"].iloc[:6], 2 / 70) and (lim["ks_alpha"] == 0.01).all()
    assert "critical N" not in rep.limits_words(lim.assign(ks_p_min=1e-9))


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
