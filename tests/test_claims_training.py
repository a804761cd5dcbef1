"""The training claims of chapter 8 (attn_lib.claims.training): a tiny table on which each rule passes, one on which
it fails, and one on which the seeds disagree."""

from __future__ import annotations

import pandas as pd

from attn_lib.claims import CLAIMS, verdicts
from attn_lib.claims.training import ZERO_WEIGHT

IDS = ["train-low-t-harder", "train-logit-grad-low-t", "train-nonvanishing-stabler"]


def _runs(low_loss, low_grad, zero_unstable, pos_unstable, seeds=(0, 1, 2)):
    rows = []
    for i, s in enumerate(seeds):
        for T, loss, grad in ((0.03, low_loss[i], low_grad[i]), (1.0, 2.5, 1e-3)):
            gain = grad / 0.01
            rows.append(dict(normalizer="softmax", temperature=T, seed=s, final_val_loss=loss, logit_grad=grad,
                             gain=gain, gain_max=min(gain, 0.5 / T), clipped_share=pos_unstable[i],
                             nonfinite_share=0.0))  # fmt: skip
        for name in ("sparsemax", "softpick", "sigmoid", "ssmax"):
            u = zero_unstable[i] if name in ZERO_WEIGHT else pos_unstable[i]
            rows.append(dict(normalizer=name, temperature=1.0, seed=s, final_val_loss=2.6, logit_grad=1e-3,
                             gain=0.1, gain_max=0.2, clipped_share=u, nonfinite_share=0.0))  # fmt: skip
    return pd.DataFrame(rows)


#: ``tests/test_claims.py::CASES`` entries: (passing verdict, passing results, failing verdict, failing results).
CASES = {
    cid: (
        "reproduced",
        lambda: {"train_runs": _runs([3.0, 3.1, 2.9], [1e-6, 2e-6, 5e-7], [0.5, 0.4, 0.6], [0.1, 0.2, 0.1])},
        "not reproduced",
        lambda: {"train_runs": _runs([2.4, 2.3, 2.5], [1e-3, 2e-3, 5e-4], [0.1, 0.1, 0.0], [0.3, 0.2, 0.4])},
    )
    for cid in IDS
}


def _verdicts(runs):
    return verdicts({"train_runs": runs}, ids=IDS).set_index("id")["verdict"]


def test_each_training_claim_passes_on_a_table_made_to_pass():
    v = _verdicts(_runs([3.0, 3.1, 2.9], [1e-6, 2e-6, 5e-7], [0.5, 0.4, 0.6], [0.1, 0.2, 0.1]))
    assert (v == "reproduced").all(), v


def test_each_training_claim_fails_on_a_table_made_to_fail():
    v = _verdicts(_runs([2.4, 2.3, 2.5], [1e-3, 2e-3, 5e-4], [0.1, 0.1, 0.0], [0.3, 0.2, 0.4]))
    assert (v == "not reproduced").all(), v


def test_seeds_that_disagree_give_no_verdict():
    v = _verdicts(_runs([3.0, 2.3, 2.9], [1e-6, 2e-3, 5e-7], [0.5, 0.0, 0.6], [0.1, 0.2, 0.1]))
    assert (v == "no verdict").all(), v


def test_one_seed_per_normaliser_gives_no_verdict_and_says_why():
    runs = _runs([3.0], [1e-6], [0.5], [0.1], seeds=(0,))
    t = verdicts({"train_runs": runs}, ids=IDS).set_index("id")
    assert (t["verdict"] == "no verdict").all()
    assert "one seed" in t.loc["train-nonvanishing-stabler", "cause"]


def test_the_training_claims_are_informative_and_need_the_sweep():
    for i in IDS:
        assert CLAIMS[i].evidence == "informative" and CLAIMS[i].needs == ("train_runs",)
    t = verdicts({}, ids=IDS)
    assert (t["verdict"] == "n/a").all()
