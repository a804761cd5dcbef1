"""Chapter 8 (book/08_training_with_each_normaliser.md): its sentences on the training sweep, every number from the
runs table of :func:`attn_lib.training.run_sweep` (the sweep's figures, tables and report are
:mod:`attn_lib.report.training`'s)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from attn_lib.report.training import sweep_table

__all__ = ["finite_words", "temperature_words", "swap_question_words"]


def finite_words(runs: pd.DataFrame) -> str:
    """Which normalisers at ``T = 1`` had steps with a non-finite gradient (Markdown)."""
    at1 = runs[np.isclose(runs["temperature"], 1.0)]
    bad = at1[at1["nonfinite_share"] > 0]
    if bad.empty:
        return f"All {at1['normalizer'].nunique()} registered normalisers trained without a non-finite gradient."
    return "Non-finite gradients in: " + ", ".join(
        f"{r.normalizer} ({r.nonfinite_share:.0%} of steps, seed {r.seed})" for r in bad.itertuples()
    )


def temperature_words(runs: pd.DataFrame) -> str:
    """The temperatures with the lowest and highest median validation loss of softmax (Markdown)."""
    t = sweep_table(runs[runs["normalizer"] == "softmax"]).set_index("temperature")
    best, worst = t["val_loss"].idxmin(), t["val_loss"].idxmax()
    at1 = t.loc[t.index[np.isclose(t.index, 1.0)][0], "val_loss"]
    return (
        f"After {int(runs['steps'].iloc[0])} steps the lowest median validation loss is at $T={best:g}$ "
        f"({t.loc[best, 'val_loss']:.3f} nats per byte), the highest at $T={worst:g}$ ({t.loc[worst, 'val_loss']:.3f}); "
        f"at $T=1$ it is {at1:.3f}."
    )


def swap_question_words(runs: pd.DataFrame) -> str:
    """Each normaliser's validation loss at ``T = 1`` against softmax's range over seeds (Markdown): the question
    chapter 7's ``rem-training-free-swap`` leaves open, as far as these runs answer it."""
    at1 = runs[np.isclose(runs["temperature"], 1.0)]
    sm = at1[at1["normalizer"] == "softmax"]["final_val_loss"]
    lo, hi = sm.min(), sm.max()
    others = at1[at1["normalizer"] != "softmax"].groupby("normalizer")["final_val_loss"].median()
    seeds = at1[at1["normalizer"] != "softmax"].groupby("normalizer")["seed"].nunique().min()

    def names(mask):
        return ", ".join(f"{n} ({v:.3f})" for n, v in others[mask].sort_values().items()) or "none"

    verdict = (
        "One seed per normaliser gives no spread, so a loss outside softmax's range is a measurement, not yet a "
        "verdict (the `full` profile trains five seeds of each)."
        if seeds < 2
        else f"Each normaliser has {seeds} seeds or more; the medians are compared."
    )
    return (
        f"Trained with it ({int(runs['steps'].iloc[0])} steps), each normaliser reaches a validation loss that lies, "
        f"against softmax's range over {len(sm)} seeds ({lo:.3f}–{hi:.3f}), within it: {names((others >= lo) & (others <= hi))}; "
        f"below it: {names(others < lo)}; above it: {names(others > hi)}. Chapter 7 swapped these normalisers into a "
        "model trained with softmax; here each model learned its logits under its own normaliser, which is the "
        "comparison {prf:ref}`rem-training-free-swap` asked for, at this size and budget. " + verdict
    )
