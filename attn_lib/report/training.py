"""The training sweep's figures, ``results.json`` and ``report.md`` section (chapter 8, ``attn-lib train-sweep``)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from ..claims import verdicts
from ..layout import FIGURE_WIDTH_IN
from ..provenance import label_figure
from ._common import md_cell, pipe_table
from .figures import save_formats
from .output import results_json

__all__ = ["figure_loss_curves", "figure_gradients", "figure_normalizers"]

#: The ids of the training claims (:mod:`attn_lib.claims.training`), in the report's order.
CLAIM_IDS = ("train-low-t-harder", "train-logit-grad-low-t", "train-nonvanishing-stabler")
TEXT = "botchan (bytes), first 90% train / last 10% validation"


def model_words(runs: pd.DataFrame) -> str:
    r = runs.iloc[0]
    return (
        f"GPT-2 architecture trained here ({int(r['n_layer'])} layers, head dim {int(r['head_dim'])}, "
        f"{int(r['n_parameters'])} parameters, {int(r['steps'])} steps)"
    )


def _label(fig, runs: pd.DataFrame):
    return label_figure(fig, model=model_words(runs), text=TEXT, device=str(runs["device"].iloc[0]))


def figure_loss_curves(curves: pd.DataFrame, runs: pd.DataFrame, T: float):
    """Training (line) and validation (dots) loss against step of softmax at temperature ``T``, every seed; ``T = 1``
    in grey."""
    import matplotlib.pyplot as plt  # matplotlib: imported only when a figure is drawn

    sm = curves[curves["normalizer"] == "softmax"]
    fig, ax = plt.subplots(figsize=(FIGURE_WIDTH_IN, 3.6))
    for temp, colour in ((1.0, "0.7"), (T, "C0")):
        for _, c in sm[np.isclose(sm["temperature"], temp)].groupby("seed"):
            ax.plot(c["step"], c["train_loss"], color=colour, lw=0.8)
            v = c.dropna(subset=["val_loss"])
            ax.plot(v["step"], v["val_loss"], "o", color=colour, ms=3)
    ax.set(xlabel="step", ylabel="loss (nats per byte)", ylim=(1.5, 6.0))
    ax.set_title(f"softmax at T = {T:g} (blue; grey: T = 1), every seed; dots: validation", fontsize=9)
    return _label(fig, runs)


def figure_gradients(runs: pd.DataFrame):
    """Left: each softmax run's median logit-gradient norm against T. Right: its gain ``||dL/dl|| / ||dL/dalpha||``
    (median and largest over steps and layers) against Corollary 3's ``1/(4T)`` and the corrected ``1/(2T)``."""
    import matplotlib.pyplot as plt  # matplotlib: imported only when a figure is drawn

    sm = runs[runs["normalizer"] == "softmax"].sort_values("temperature")
    fig, (a, b) = plt.subplots(1, 2, figsize=(FIGURE_WIDTH_IN, 3.4))
    a.loglog(sm["temperature"], sm["logit_grad"], "o", color="C0", ms=4)
    a.loglog(*sm.groupby("temperature")["logit_grad"].median().reset_index().to_numpy().T, "-", color="C0")
    a.set(xlabel="T (factor on 1/√d)", ylabel="median ‖∂loss/∂l‖ per step")
    T = np.geomspace(sm["temperature"].min(), sm["temperature"].max(), 100)
    b.loglog(T, 1 / (4 * T), "k--", lw=1, label="1/(4T) (Corollary 3, paper)")
    b.loglog(T, 1 / (2 * T), "k-", lw=1, label="1/(2T) (corrected)")
    b.loglog(sm["temperature"], sm["gain"], "o", color="C0", ms=4, label="median gain")
    b.loglog(sm["temperature"], sm["gain_max"], "^", color="C3", ms=4, label="largest gain")
    b.set(xlabel="T (factor on 1/√d)", ylabel="‖∂loss/∂l‖ / ‖∂loss/∂α‖")
    b.legend(fontsize=7)
    fig.tight_layout()
    return _label(fig, runs)


def figure_normalizers(runs: pd.DataFrame):
    """Each normaliser at ``T = 1``: the final validation loss and the share of clipped or non-finite steps."""
    import matplotlib.pyplot as plt  # matplotlib: imported only when a figure is drawn

    at1 = runs[np.isclose(runs["temperature"], 1.0)]
    g = at1.assign(unstable=at1["clipped_share"] + at1["nonfinite_share"]).groupby("normalizer", sort=False)
    m = g[["final_val_loss", "unstable"]].median()
    fig, (a, b) = plt.subplots(1, 2, figsize=(FIGURE_WIDTH_IN, 3.4), sharey=True)
    y = np.arange(len(m))
    a.barh(y, m["final_val_loss"], color="C0")
    a.set(yticks=y, yticklabels=m.index, xlabel="validation loss after the budget")
    a.set_xlim(m["final_val_loss"].min() - 0.2, m["final_val_loss"].max() + 0.1)
    b.barh(y, m["unstable"], color="C3")
    b.set(xlabel="share of steps clipped or non-finite")
    a.invert_yaxis()
    fig.tight_layout()
    return _label(fig, runs)


def sweep_table(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per (normaliser, T): over seeds, the final validation loss (median, range), the median logit-gradient
    norm and gain, the mean shares of clipped and non-finite steps, the median CPU time."""
    g = runs.groupby(["normalizer", "temperature"], sort=False)
    out = g.agg(
        seeds=("seed", "count"), val_loss=("final_val_loss", "median"), val_min=("final_val_loss", "min"),
        val_max=("final_val_loss", "max"), logit_grad=("logit_grad", "median"), gain=("gain", "median"),
        clipped=("clipped_share", "mean"), nonfinite=("nonfinite_share", "mean"), cpu_s=("cpu_s", "median"),
    )  # fmt: skip
    return out.reset_index()


def claims_markdown(vt: pd.DataFrame) -> str:
    rows = [
        [md_cell(r["id"]), md_cell(r["claim"]), f"**{r['verdict']}**", md_cell(r["measured"]), md_cell(r["cause"])]
        for _, r in vt.iterrows()
    ]
    return pipe_table(["id", "claim", "verdict", "measured", "cause"], rows)


def write_sweep(out, tables: dict, *, profile: str, limits=None) -> dict:
    """Write ``results.json``, ``train_runs.csv``, ``train_curves.csv``, the figures (PNG and SVG) and ``report.md``
    into ``out``, with ``limits`` (:func:`attn_lib.training.trained_limits`) their part too; returns ``{name: path}``."""
    out = Path(out)
    runs, curves = tables["train_runs"], tables["train_curves"]
    extra = {} if limits is None else {"train_limits": limits}
    vt = verdicts(tables, ids=CLAIM_IDS)
    meta = dict(profile=profile, model=model_words(runs), text=TEXT, device=str(runs["device"].iloc[0]))
    meta.update(runs=len(runs), cpu_s=float(runs["cpu_s"].sum()), wall_s=float(runs["wall_s"].sum()))
    made = {"results.json": out / "results.json"}
    doc = results_json({"train_runs": runs, **extra}, meta=meta, verdict_table=vt)
    made["results.json"].write_text(json.dumps(doc, indent=1))
    for name, df in {"train_runs": runs, "train_curves": curves, **extra}.items():
        made[f"{name}.csv"] = out / f"{name}.csv"
        df.to_csv(made[f"{name}.csv"], index=False)
    lows = sorted(runs.loc[runs["normalizer"] == "softmax", "temperature"].unique())
    figs = {"train_loss_lowT": figure_loss_curves(curves, runs, lows[0]), "train_gradients": figure_gradients(runs)}
    figs["train_normalizers"] = figure_normalizers(runs)
    if limits is not None:
        figs["train_limits"] = figure_limits(limits, runs)
    import matplotlib.pyplot as plt  # matplotlib: imported only when a figure is drawn

    for name, fig in figs.items():
        made.update({Path(p).name: Path(p) for p in save_formats(fig, out, name, ("png", "svg"), bbox_inches="tight")})
        plt.close(fig)
    t = sweep_table(runs)
    rows = [[md_cell(r["normalizer"]), f"{r['temperature']:g}", int(r["seeds"]),
             f"{r['val_loss']:.3f} ({r['val_min']:.3f}–{r['val_max']:.3f})", f"{r['logit_grad']:.3g}",
             f"{r['gain']:.3g}", f"{r['clipped']:.2f}", f"{r['nonfinite']:.2f}"] for _, r in t.iterrows()]  # fmt: skip
    head = ["normaliser", "T", "seeds", "val. loss (range)", "‖∂loss/∂l‖", "gain", "clipped", "non-finite"]
    intro = (
        f"{meta['model']}; text: {TEXT}; device: {meta['device']}; profile {profile!r}, {len(runs)} runs, "
        f"{meta['cpu_s']:.0f} s of CPU time in all. T is a factor on GPT-2's 1/√d (T_paper = T √d)."
    )
    md = ["## Training with each normaliser (beyond the paper)", "", intro, "", claims_markdown(vt), ""]
    md += [pipe_table(head, rows), "", *[f"![{n}]({n}.png)" for n in figs], "", *_limits_section(limits)]
    (out / "report.md").write_text("\n".join(md))
    made["report.md"] = out / "report.md"
    return made


# ---- the paper's limits on the trained heads (training.trained_limits) ----------------------------------------------
LIMIT_TEXT = "botchan, held-out last 10%, first window"


def _ns_cols(lim: pd.DataFrame) -> list[str]:
    return sorted((c for c in lim if c.startswith("ns_")), key=lambda c: int(c[3:]))


def _g_cols(lim: pd.DataFrame) -> list[str]:
    return [c for c in lim if c.startswith("g_T") and not c.endswith(("_lo", "_hi"))]


def _limit_cols(lim: pd.DataFrame) -> list[str]:
    return ["b", *_ns_cols(lim), "rho", *_g_cols(lim), "g_slope"]


def limits_table(lim: pd.DataFrame) -> pd.DataFrame:
    """From :func:`attn_lib.training.trained_limits`, in its order: one row per trained (normaliser, T) (``seeds``,
    the median over seeds of each limit), then the reference model; ``training`` names the row."""
    cols = _limit_cols(lim)
    g = lim[lim["kind"] == "trained"].groupby(["normalizer", "temperature"], sort=False)
    out = g[cols].median().reset_index()
    out.insert(2, "seeds", g["seed"].count().to_numpy())
    out.insert(0, "training", [f"{n}, T = {T:g}" for n, T in zip(out["normalizer"], out["temperature"])])
    for _, r in lim[lim["kind"] == "reference"].iterrows():
        out.loc[len(out)] = {"training": f"{r['model']} (pretrained)", "normalizer": "softmax", "seeds": 1,
                             **{c: r[c] for c in cols}}  # fmt: skip
    return out[["training", "normalizer", "temperature", "seeds", *cols]]


def limits_columns(lim: pd.DataFrame) -> dict:
    """Display names of :func:`limits_table`'s columns."""
    names = {c: f"N_s/N (N={c[3:]})" for c in _ns_cols(lim)}
    eps = float(lim["eps"].iloc[0])
    names.update({"b": "b (max α ∝ L^b)", "rho": f"‖s_N‖/‖z‖ (N={int(lim['rho_N'].iloc[0])})"})
    names.update({c: f"g(T={c[3:]}, ε={eps:g})" for c in _g_cols(lim)}, g_slope="g slope, T ≤ 0.1")
    return names


def figure_limits(lim: pd.DataFrame, runs: pd.DataFrame):
    """The limits of every trained model, one line per row of :func:`limits_table`: every seed (dots), the median
    over seeds (bar), the reference model (dashed). Panels: ``N_s/N`` at the largest ``N``, ``||s_N||/||z||`` and
    ``g(T, eps)`` at each reported ``T``."""
    import matplotlib.pyplot as plt  # matplotlib: imported only when a figure is drawn

    t = limits_table(lim)
    tr, ref = t[t["normalizer"].notna() & t["temperature"].notna()], lim[lim["kind"] == "reference"]
    trained = lim[lim["kind"] == "trained"]
    panels, names = [_ns_cols(lim)[-1], "rho", *_g_cols(lim)], limits_columns(lim)
    n_rows = -(-len(panels) // 2)
    # 0.2 in a line at 7 pt: the labels of 17 lines (every normaliser and softmax's temperatures) do not overlap
    fig, axes = plt.subplots(n_rows, 2, figsize=(FIGURE_WIDTH_IN, 0.8 + 0.2 * len(tr) * n_rows), sharey=True,
                             squeeze=False)  # fmt: skip
    y = np.arange(len(tr))
    for ax, c in zip(axes.flat, panels):
        for i, (_, r) in enumerate(tr.iterrows()):
            v = trained.loc[
                (trained["normalizer"] == r["normalizer"]) & (trained["temperature"] == r["temperature"]), c
            ]
            ax.plot(v, np.full(len(v), i), "o", color="C0" if r["normalizer"] == "softmax" else "C2", ms=3, alpha=0.5)
        ax.plot(tr[c], y, "|", color="k", ms=7)
        for v in ref[c]:
            ax.axvline(v, color="C1", ls="--", lw=1)
        if c.startswith("g_"):
            ax.set_xscale("log")
        ax.set(xlabel=names[c], yticks=y, yticklabels=tr["training"])
        ax.tick_params(axis="y", labelsize=7)
    axes[0, 0].invert_yaxis()
    for ax in list(axes.flat)[len(panels) :]:
        ax.set_visible(False)
    if len(ref):
        axes[0, 0].set_title(f"dashed: {ref['model'].iloc[0]} (pretrained)", fontsize=8, loc="left")
    fig.tight_layout()
    model = model_words(runs) + (f"; reference {ref['model'].iloc[0]}" if len(ref) else "")
    return label_figure(fig, model=model, text=f"{LIMIT_TEXT}, L = {int(lim['L'].iloc[0])}",
                        device=str(runs["device"].iloc[0]))  # fmt: skip


def _trend(med: pd.Series) -> str:
    """``"rises with T"``, ``"falls with T"`` or ``"is not monotone in T"`` for the medians over seeds, in T order."""
    d = np.diff(med.to_numpy())
    if not len(d):
        return "is measured at one T"
    if (d > 0).all():
        return "rises with T"
    if (d < 0).all():
        return "falls with T"
    return "is not monotone in T"


def limits_words(lim: pd.DataFrame) -> str:
    """Markdown: each limit (median over seeds) of softmax over the training temperatures (range, trend), of the
    other normalisers at ``T = 1`` against softmax's seeds, and the reference model's against the trained range;
    and, where the KS test over one model's heads cannot reject, why there is no critical-N column."""
    tr, ref, names = lim[lim["kind"] == "trained"], lim[lim["kind"] == "reference"], limits_columns(lim)
    sm, other = tr[tr["normalizer"] == "softmax"], tr[tr["normalizer"] != "softmax"]
    sm1 = sm[np.isclose(sm["temperature"], 1.0)]
    words = [f"On the held-out window of {int(lim['L'].iloc[0])} tokens, each model with its own normaliser (medians "
             "over seeds)."]  # fmt: skip
    for c in ("b", _ns_cols(lim)[-1], "rho", *_g_cols(lim)):
        s = []
        if sm["temperature"].nunique() > 1:
            med = sm.groupby("temperature")[c].median()
            s.append(f"softmax's {_trend(med)} ({med.iloc[0]:.3g} at T = {med.index[0]:g}, "
                     f"{med.iloc[-1]:.3g} at T = {med.index[-1]:g})")  # fmt: skip
        if len(other) and len(sm1):
            o = other.groupby("normalizer")[c].median()
            s.append(f"at T = 1 it runs from {o.min():.3g} ({o.idxmin()}) to {o.max():.3g} ({o.idxmax()}) over the "
                     f"other normalisers, against {sm1[c].min():.3g}–{sm1[c].max():.3g} over softmax's {len(sm1)} seeds")  # fmt: skip
        if len(ref):
            r = float(ref[c].iloc[0])
            where = "below" if r < tr[c].min() else "above" if r > tr[c].max() else "within"
            s.append(f"the pretrained reference's {r:.3g} is {where} the trained models' range")
        words.append(f"{names[c]}: " + "; ".join(s) + ".")
    r = tr.loc[tr["ks_p_min"].idxmin()]
    if r["ks_p_min"] >= r["ks_alpha"]:
        words.append(
            f"Chapter 7's critical N is not in the table: it rests on a two-sample KS test over the heads of one model, "
            f"and over {int(r['n_heads'])} heads that test's smallest p-value is {r['ks_p_min']:.3g}, not below its "
            f"level {r['ks_alpha']:g}, so it would be 1 for every trained model by construction."
        )
    return " ".join(words)


def _limits_section(limits) -> list[str]:
    if limits is None:
        return []
    t = limits_table(limits)
    names = limits_columns(limits)
    cols = _limit_cols(limits)
    rows = [[md_cell(r["training"]), int(r["seeds"]), *(f"{r[c]:.3g}" for c in cols)] for _, r in t.iterrows()]
    return ["### The paper's limits on the trained heads", "",
            pipe_table(["training", "seeds", *(names[c] for c in cols)], rows), "", limits_words(limits), ""]  # fmt: skip
