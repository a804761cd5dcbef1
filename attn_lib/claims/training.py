"""The rules of the abstract's training claim (chapter 8; their fields are in claims.toml): softmax's "gradient
sensitivity ... presents challenges during training, especially at low temperature settings", a claim the paper makes
without training a model. They read :mod:`attn_lib.training`'s ``train_runs`` (one row per normaliser, temperature and seed); a verdict
needs every seed to agree (paired by seed), otherwise the row says "no verdict" and shows the spread.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .claim import Outcome, na_if, rule

#: The reference temperature (plain GPT-2: ``T = 1`` on top of its 1/sqrt(d)).
T_REF = 1.0
#: "vanishes or explodes": the median logit-gradient norm at the smallest T is below 1/FACTOR or above FACTOR times its
#: value at ``T_REF`` in every seed.
GRAD_FACTOR = 10.0
#: Normalisers whose weights can be exactly 0 at finite logits: the projections onto the simplex, top-k, softpick
#: (ReLU) and SA-softmax (0 at the smallest logit); every other one keeps every visible weight above 0.
ZERO_WEIGHT = ("sparsemax", "entmax15", "entmax_alpha", "topk", "softpick", "sa_softmax")


def _paired(runs: pd.DataFrame, col: str, T_low: float) -> pd.DataFrame:
    """Softmax runs at ``T_low`` and at :data:`T_REF`, side by side per seed: columns ``low, ref``."""
    sm = runs[runs["normalizer"] == "softmax"]
    lo = sm[np.isclose(sm["temperature"], T_low)].set_index("seed")[col]
    ref = sm[np.isclose(sm["temperature"], T_REF)].set_index("seed")[col]
    return pd.DataFrame({"low": lo, "ref": ref}).dropna()


def _low_and_ref(results, col: str) -> tuple[pd.DataFrame, float, pd.DataFrame]:
    """The runs, the lowest softmax temperature ``T0`` and :func:`_paired` of ``col`` (``n/a`` unless ``T0 < T_REF``
    and some seed has both)."""
    runs = results["train_runs"]
    T0 = float(runs.loc[runs["normalizer"] == "softmax", "temperature"].min())
    p = _paired(runs, col, T0)
    na_if(T0 >= T_REF or not len(p), f"needs softmax runs below T = {T_REF:g} and at it, with the same seeds")
    return runs, T0, p


def _seeds_verdict(ok: pd.Series, bad: pd.Series, disagree: str, fails: str) -> tuple[str, str]:
    """The verdict when every seed passes (``ok``) or fails (``bad``), else (or with fewer than two seeds) "no
    verdict"; and its cause, ``disagree`` or ``fails``."""
    v = "no verdict" if len(ok) < 2 else "reproduced" if ok.all() else "not reproduced" if bad.all() else "no verdict"
    return v, "" if v == "reproduced" else disagree if v == "no verdict" else fails


@rule("train-low-t-harder")
def low_t_harder(results, th) -> Outcome:
    _, T0, p = _low_and_ref(results, "final_val_loss")
    d = p["low"] - p["ref"]
    meas = (
        f"mean validation loss at T = {T0:g}: {p['low'].mean():.3f} (seeds {p['low'].min():.3f}–{p['low'].max():.3f}); "
        f"at T = {T_REF:g}: {p['ref'].mean():.3f} ({p['ref'].min():.3f}–{p['ref'].max():.3f}); "
        f"paired difference {d.min():+.3f} to {d.max():+.3f} over {len(p)} seeds"
    )
    v, cause = _seeds_verdict(d > 0, d <= 0, "the seeds disagree in sign", "low T trained as well")
    return Outcome(v, meas, cause, numbers=dict(T_low=T0, diff_min=float(d.min()), diff_max=float(d.max())))


@rule("train-logit-grad-low-t", GRAD_FACTOR=GRAD_FACTOR)
def logit_grad_extreme(results, th) -> Outcome:
    runs, T0, p = _low_and_ref(results, "logit_grad")
    g = _paired(runs, "gain", T0)
    r = p["low"] / p["ref"]
    gmax = float(runs.loc[runs["normalizer"] == "softmax"].eval("gain_max * 2 * temperature").max())
    meas = (
        f"median ‖∂loss/∂l‖ at T = {T0:g} over that at T = {T_REF:g}: {r.min():.3g}–{r.max():.3g} over {len(p)} seeds; "
        f"its gain ‖∂loss/∂l‖/‖∂loss/∂α‖ at T = {T0:g}: {g['low'].median():.3g} against Corollary 3's 1/(4T) = "
        f"{1 / (4 * T0):.3g} and the corrected 1/(2T) = {1 / (2 * T0):.3g}; largest gain x 2T over all softmax runs "
        f"{gmax:.3g} (the bound needs <= 1)"
    )
    extreme = (r < 1 / GRAD_FACTOR) | (r > GRAD_FACTOR)
    fails = f"the ratio stays within a factor {GRAD_FACTOR:g}"
    v, cause = _seeds_verdict(extreme, ~extreme, "the seeds disagree", fails)
    return Outcome(v, meas, cause, numbers=dict(ratio_min=float(r.min()), ratio_max=float(r.max()), gain_x2T=gmax))


@rule("train-nonvanishing-stabler", ZERO_WEIGHT=", ".join(ZERO_WEIGHT))
def nonvanishing_stabler(results, th) -> Outcome:
    runs = results["train_runs"]
    at1 = runs[np.isclose(runs["temperature"], T_REF)].copy()
    at1["unstable"] = at1["clipped_share"] + at1["nonfinite_share"]
    has_zeros = at1["normalizer"].isin(ZERO_WEIGHT)
    zero, pos = at1[has_zeros], at1[~has_zeros]
    na_if(not len(zero) or not len(pos), "needs runs at T = 1 of normalisers with and without exact zeros")
    per = at1.groupby(["seed", has_zeros])["unstable"].median().unstack().dropna()
    # the median over normalisers (each counted once)
    pm, zm = (x.groupby("normalizer")[["unstable", "final_val_loss"]].median().median() for x in (pos, zero))
    meas = (
        f"median over normalisers of the share of clipped or non-finite steps at T = 1: {pm['unstable']:.3f} for the "
        f"{pos['normalizer'].nunique()} without exact zeros, {zm['unstable']:.3f} for the "
        f"{zero['normalizer'].nunique()} with them; final validation loss {pm['final_val_loss']:.3f} and "
        f"{zm['final_val_loss']:.3f}; {len(per)} seed(s) with both kinds"
    )
    if len(per) < 2:
        return Outcome("no verdict", meas, "one seed per normaliser: the spread over seeds is not measured")
    d = per[True] - per[False]
    v, cause = _seeds_verdict(d > 0, d <= 0, "the seeds disagree", "no more stable")
    return Outcome(v, meas, cause, numbers=dict(diff_min=float(d.min()), diff_max=float(d.max())))
