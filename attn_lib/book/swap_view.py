"""The live mode of chapter 7's model sliders: moving a slider in a live kernel reruns the model at that setting."""

from __future__ import annotations

import pandas as pd

from .._validation import check_choice
from ..experiments import swap_setting
from ..report import render_swap_row

__all__ = ["live_renderer"]


def live_renderer(handle, text, rows: pd.DataFrame, *, sweep: str = "k", **swap_kw):
    """``render(setting) -> Figure`` that computes the setting now with
    :func:`~attn_lib.experiments.swap_setting`, for the ``live`` argument of
    :func:`attn_lib.book.widgets.precomputed_slider`: in a live kernel, moving the slider reruns the model.

    The figure is :func:`attn_lib.report.render_swap_row` with the freshly computed row in place of the stored one in
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
