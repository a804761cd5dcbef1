"""attn_lib.training (issue 37): deterministic CPU training, every registered normaliser, bad input, the cache."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from attn_lib import normalizers as nz
from attn_lib import training as tr
from attn_lib.cache import ResultCache

#: A model and budget that train in well under a second.
TINY = tr.TrainSize(n_layer=1, n_head=2, n_embd=16, n_positions=16, batch=4, steps=4, eval_every=2, eval_batches=1)


def test_two_runs_with_one_seed_give_identical_losses_and_another_seed_does_not():
    a = tr.train("softmax", 0.5, seed=3, size=TINY)
    b = tr.train("softmax", 0.5, seed=3, size=TINY)
    c = tr.train("softmax", 0.5, seed=4, size=TINY)
    assert np.array_equal(a.history["train_loss"].to_numpy(), b.history["train_loss"].to_numpy())
    assert np.array_equal(a.history["logit_grad_0"].to_numpy(), b.history["logit_grad_0"].to_numpy())
    assert a.summary["final_val_loss"] == b.summary["final_val_loss"]
    assert not np.array_equal(a.history["train_loss"].to_numpy(), c.history["train_loss"].to_numpy())


@pytest.mark.parametrize("name", nz.available())
def test_every_registered_normaliser_trains_without_a_non_finite_loss(name):
    run = tr.train(name, 1.0, seed=0, size=TINY)
    h = run.history
    assert np.isfinite(h["train_loss"]).all() and run.summary["nonfinite_share"] == 0.0
    assert math.isfinite(run.summary["final_val_loss"])
    assert (h["logit_grad_0"] > 0).all() and (h["weight_grad_0"] > 0).all()  # the hooks saw a gradient
    if name in tr.LEARNABLE:  # its parameter is trained: it moved from its initial value
        start = tr.LEARNABLE[name][1]
        assert any(abs(v - start) > 1e-6 for v in run.summary["learned"])


def test_the_logit_gradient_respects_the_softmax_jacobian_bound():
    # ||dL/dl|| <= ||J||_2 ||dL/dalpha|| row by row, and ||J||_2 <= 1/(2T) for softmax at T (chapter 4)
    for T in (0.1, 1.0, 5.0):
        h = tr.train("softmax", T, seed=1, size=TINY).history
        assert (h["logit_grad_0"] <= h["weight_grad_0"] / (2 * T) * (1 + 1e-5)).all()


def test_the_handle_is_the_trained_model_with_the_temperature_folded_in():
    import torch

    from attn_lib import capture

    run = tr.train("softmax", 0.25, seed=0, size=TINY)
    h = tr.trained_handle(run)
    assert (h.n_layers, h.n_heads, h.head_dim, h.max_length) == (1, 2, 8, 16)
    ids = torch.tensor([list(range(40, 56))])
    model = tr._build(TINY, "softmax")
    model.load_state_dict({k: torch.from_numpy(v) for k, v in run.state.items()})
    model.eval()
    with torch.no_grad(), capture.patched_attention(model, normalizer="softmax", temperature=0.25):
        want = model(input_ids=ids).logits
        got = h.model(input_ids=ids).logits
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


def test_a_run_round_trips_through_the_result_cache(tmp_path):
    cache = ResultCache(tmp_path)
    run = tr.train("sigmoid", 1.0, seed=0, size=TINY)
    key = {"experiment": "train-test"}
    cache.get_or_compute(key, lambda: run)
    back = cache.get(key)
    assert back.summary == run.summary
    assert np.array_equal(back.history["train_loss"].to_numpy(), run.history["train_loss"].to_numpy())
    assert all(np.array_equal(back.state[k], v) for k, v in run.state.items())


@pytest.mark.parametrize(
    "kwargs, names",
    [
        (dict(normalizer="nope"), "normalizer"),
        (dict(temperature=0.0), "temperature"),
        (dict(temperature=1e5), "temperature"),
        (dict(seed=-1), "seed"),
        (dict(size="huge"), "size"),
        (dict(normalizer="ssmax", params={"s": 1.0}), "params"),
        (dict(normalizer="topk", params={"k": 0}), "k"),
        (dict(device="nowhere"), "device"),
    ],
)
def test_bad_input_names_the_parameter(kwargs, names):
    with pytest.raises(ValueError, match=names):
        tr.train(**{"size": TINY, **kwargs})


@pytest.mark.parametrize("field, value", [("n_layer", 0), ("n_embd", 15), ("lr", -1.0), ("clip", 0.0)])
def test_a_bad_size_names_its_field(field, value):
    with pytest.raises(ValueError, match=field):
        tr.TrainSize(**{field: value})


def test_the_sweeps_settings_cover_every_normaliser_and_temperature():
    runs = tr.sweep_settings("quick")
    assert {n for n, _, _ in runs} == set(nz.available())
    assert len(tr.TEMPERATURES) >= 6 and min(tr.TEMPERATURES) <= 0.03 and max(tr.TEMPERATURES) >= 10
    assert len(runs) == len(set(runs))
    with pytest.raises(ValueError, match="profile"):
        tr.sweep_settings("slow")


def test_the_sweep_writes_results_json_figures_and_a_report_section(tmp_path):
    import json

    from attn_lib.report import training as rt

    runs = {
        (n, T, s): tr.train(n, T, seed=s, size=TINY) for n, T in (("softmax", 0.1), ("softmax", 1.0)) for s in (0, 1)
    }
    for name in ("sigmoid", "softpick"):  # one normaliser without exact zeros, one with them
        runs[(name, 1.0, 0)] = tr.train(name, 1.0, seed=0, size=TINY)
    tables = tr.sweep_tables(runs)
    assert len(tables["train_runs"]) == 6 and len(tables["train_curves"]) == 6 * TINY.steps
    made = rt.write_sweep(tmp_path, tables, profile="quick")
    doc = json.loads((tmp_path / "results.json").read_text())
    assert {v["id"] for v in doc["verdicts"]} == set(rt.CLAIM_IDS) and len(doc["results"]["train_runs"]) == 6
    assert [v["verdict"] for v in doc["verdicts"] if v["verdict"] == "n/a"] == [], [
        v["measured"] for v in doc["verdicts"]
    ]
    report = (tmp_path / "report.md").read_text()
    assert all(i in report for i in rt.CLAIM_IDS) and "GPT-2 architecture trained here" in report
    assert all(p.exists() and p.stat().st_size > 0 for p in made.values())


def test_the_train_sweep_command_writes_its_outputs(tmp_path, monkeypatch, capsys):
    from attn_lib.cli import main

    runs = {
        (n, T, 0): tr.train(n, T, seed=0, size=TINY) for n, T in (("softmax", 0.1), ("softmax", 1.0), ("softpick", 1.0))
    }
    seen = {}

    def fake(profile, **kw):  # the wiring, not the sweep: tiny runs stand in for the profile's
        seen.update(kw, profile=profile)
        return runs

    monkeypatch.setattr(tr, "run_sweep", fake)
    out = tmp_path / "out"
    assert main(["train-sweep", "--out", str(out), "--workers", "2", "-q", "--no-cache", "--reference", "none"]) == 0
    assert seen["profile"] == "quick" and seen["workers"] == 2 and seen["device"] == "cpu"
    assert (out / "report.md").exists() and (out / "results.json").exists()
    # the limits at the runs' whole context (16 tokens): every run, each with its own normaliser
    lim = pd.read_csv(out / "train_limits.csv")
    assert list(lim["normalizer"]) == ["softmax", "softmax", "softpick"] and (lim["L"] == 16).all()
    assert (out / "train_limits.png").stat().st_size > 0 and not (out / "train_own_limits.csv").exists()
    report = (out / "report.md").read_text()
    assert "### The paper's limits on the trained heads" in report and "| softpick, T = 1 |" in report
    assert main(["train-sweep", "--out", str(tmp_path / "o3"), "-q", "--no-limits"]) == 0
    assert not (tmp_path / "o3" / "train_limits.csv").exists()
    for bad in (["--workers", "0"], ["--profile", "huge"]):  # argparse names the flag and exits with 2
        with pytest.raises(SystemExit) as exc:
            main(["train-sweep", *bad, "--out", str(tmp_path / "o2")])
        assert exc.value.code == 2
    assert "--workers must be an integer in [1, 64]" in capsys.readouterr().err
