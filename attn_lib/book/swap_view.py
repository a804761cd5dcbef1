"""Chapter 7's model sliders: their figure (:func:`render_swap_row`), one setting of
:func:`attn_lib.experiments.live_swap` computed now (:func:`swap_setting`), and the sliders' live mode
(:func:`live_renderer`): moving a slider in a live kernel reruns the model at that setting."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from .._validation import check_choice, check_int, check_positive
from ..claims.stats import require_columns
from ..experiments.inputs import table_meta, text_window
from ..experiments.profiles import BeyondProfile
from ..experiments.swap import HELD_OUT_START, swap_args, swap_pass, swap_settings
from ..layout import FIGURE_WIDTH_IN
from ..report._common import meta_of

__all__ = ["swap_setting", "live_renderer", "render_swap_row"]


def setting_of(label: str, prof: BeyondProfile) -> dict:
    """The :func:`~attn_lib.experiments.live_swap` setting named ``label``: one of the profile's, ``"top-<k>"`` or
    ``"softmax T=<T>"``."""
    known = {s["setting"]: s for s in swap_settings(prof)}
    allowed = (
        f"one of {list(known)}, 'top-<k>' with an integer k in [1, {prof.swap_length}] (the window), or "
        "'softmax T=<T>' with a number T > 0 (digits, no spaces or sign)"
    )
    if not isinstance(label, str):
        raise ValueError(f"setting must be {allowed} (got {label!r})")
    if label in known:
        return known[label]
    m = re.fullmatch(r"top-([0-9]+)", label)
    if m:
        # k >= the window is softmax on every row: refuse a label that would claim to be something else
        k = check_int("setting's k", int(m.group(1)), low=1, high=prof.swap_length)
        return dict(setting=f"top-{k}", normalizer="topk", params={"k": k}, k=k, T=1.0)
    m = re.fullmatch(r"softmax T=(-?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?)", label)
    if m:
        T = check_positive("setting's T", float(m.group(1)))
        return dict(setting=f"softmax T={T:g}", normalizer="softmax", params={}, k=None, T=T)
    raise ValueError(f"setting must be {allowed} (got {label!r})")


def swap_setting(
    handle,
    text,
    setting: str,
    *,
    profile="quick",
    layer: int | None = None,
    head: int = 0,
    start: int = HELD_OUT_START,
    N: int = 5,
) -> pd.DataFrame:
    """One setting of :func:`~attn_lib.experiments.live_swap`, computed now (one forward pass, no cache): the row
    ``live_swap`` records, as a one-row table with the columns of :attr:`~attn_lib.experiments.SwapResult.rows`.

    ``setting`` is a setting of ``live_swap`` for this profile (e.g. ``"top-16"``, ``"sparsemax"``, ``"softmax
    T=0.5"``), or any ``"top-<k>"`` or ``"softmax T=<T>"`` off the profile's grids; the other arguments are those of
    :func:`~attn_lib.experiments.live_swap` (the window is ``profile.swap_length`` tokens from ``start``).
    """
    prof, Lw, layer, head, start, N = swap_args(handle, profile, layer, head, start, N)
    s = setting_of(setting, prof)
    ids = text_window(handle, text, Lw, start)
    _, rec = swap_pass(handle, ids, s, table_meta(handle, text), layer=layer, head=head, N=N, swap_lengths=())
    return pd.DataFrame([rec])


def live_renderer(handle, text, rows: pd.DataFrame, *, sweep: str = "k", **swap_kw):
    """``render(setting) -> Figure`` that computes the setting now with :func:`swap_setting`, for the ``live``
    argument of :func:`attn_lib.book.widgets.precomputed_slider`: in a live kernel, moving the slider reruns the model.

    The figure is :func:`render_swap_row` with the freshly computed row in place of the stored one in
    ``rows`` (a :attr:`~attn_lib.experiments.SwapResult.rows`; the rest of the sweep panel comes from it). ``swap_kw``
    are passed to ``swap_setting`` (``profile``, ``layer``, ``head``, ``start``, ``N``); use the values ``rows`` was
    made with. ``sweep`` is ``"k"`` or ``"T"``.
    """
    check_choice("sweep", sweep, ["k", "T"])

    def render(setting: str):
        new = swap_setting(handle, text, setting, **swap_kw)
        label = new["setting"].iloc[0]
        merged = pd.concat([rows[rows["setting"] != label], new], ignore_index=True)
        return render_swap_row(merged, label, sweep=sweep)

    return render


def render_swap_row(rows: pd.DataFrame, setting: str, sweep: str = "k"):
    """The slider's figure: one head's attention row in the live model at one setting, its ``d~`` and the loss,
    next to the whole sweep (the current setting marked).

    Parameters
    ----------
    rows : DataFrame
        ``attn_lib.experiments.SwapResult.rows``.
    setting : str
        A setting of ``rows`` (e.g. ``"top-16"`` or ``"softmax T=0.5"``).
    sweep : {"k", "T"}
        Which sweep the right-hand panel shows (top-k over ``k`` or softmax over ``T``).
    """
    from matplotlib.figure import Figure  # matplotlib: imported only when a figure is drawn

    from ..provenance import label_figure  # provenance imports matplotlib: as above

    require_columns(rows, "rows", ("setting", "attention", "d_tilde", "loss", "layer", "head", "row", "k", "T", "N"))
    check_choice("setting", setting, list(rows["setting"]))
    check_choice("sweep", sweep, ["k", "T"])
    meta = meta_of(rows)
    r = rows.set_index("setting").loc[setting]
    w = np.asarray(r["attention"], dtype=float)
    fig = Figure(figsize=(FIGURE_WIDTH_IN, 3.6))
    ax, bx = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1.8, 1]})
    # one filled step artist instead of a bar per key (1024 rectangles took ~1 s per slider figure to draw)
    ax.stairs(w, np.arange(len(w) + 1) - 0.5, fill=True, color="tab:blue", linewidth=1.0, edgecolor="tab:blue")
    ax.set_xlabel("key position")
    ax.set_ylabel("attention weight")
    ax.set_ylim(0, max(1e-3, float(w.max()) * 1.1))
    ax.set_title(
        f"{setting}: layer {int(r['layer'])}, head {int(r['head'])}, row {int(r['row'])}\n"
        f"d~ (N={int(r['N'])}) = {r['d_tilde']:.3g}, loss = {r['loss']:.3f}, {int((w > 0).sum())} tokens > 0",
        fontsize=9,
    )
    if sweep == "k":
        sw = rows[rows["normalizer"] == "topk"].sort_values("k")
        x = sw["k"].astype(float)
        bx.set_xlabel("k")
    else:
        sw = rows[rows["setting"].str.startswith("softmax T=")].sort_values("T")
        x = sw["T"].astype(float)
        bx.set_xlabel("T")
    bx.plot(x, sw["loss"], "o-", color="0.5")
    cur = sw[sw["setting"] == setting]
    bx.plot(cur[sweep].astype(float), cur["loss"], "o", ms=10, color="tab:red")
    model = rows[rows["setting"] == "softmax (model)"]
    if len(model):
        bx.axhline(float(model["loss"].iloc[0]), color="k", ls=":", lw=1, label="model's own softmax")
        bx.legend(fontsize=7)
    bx.set_xscale("log", base=2)
    bx.set_ylabel("held-out loss (nats)")
    bx.grid(alpha=0.3)
    fig.tight_layout()
    return label_figure(fig, model=meta.get("model", "?"), text=meta.get("text", "?"), device=meta.get("device", "?"))
