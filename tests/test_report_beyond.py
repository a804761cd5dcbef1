"""Tests for the chapter-7 block of attn_lib.report (every normaliser on the limits; the live swap)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import figure_provenance
from test_beyond import TEXT, TOY_PROFILE, toy_table

from attn_lib import experiments as B
from attn_lib import report as R
from attn_lib.book.swap_view import render_swap_row
from attn_lib.provenance import figure_to_png


@pytest.fixture(scope="module")
def table():
    return toy_table()


@pytest.fixture(scope="module")
def swap(tiny_gpt2):
    return B.live_swap(tiny_gpt2, TEXT, profile=TOY_PROFILE, start=0, layer=1, head=0)


def test_limits_markdown_has_one_row_per_normaliser_with_the_summary_numbers(table):
    s = B.limits_summary(table)
    md = R.beyond_limits_markdown(s)
    lines = md.splitlines()
    assert len(lines) == 2 + len(s)
    row = next(ln for ln in lines if ln.startswith("| top-2 |"))
    assert f"{s.loc['top-2', 'max_alpha_slope']:.2f}" in row and f"{s.loc['top-2', 'sep_fraction']:.2f}" in row
    assert "| sparsemax |" in md and md.count("—") >= 1  # no analytic Jacobian for sparsemax


def test_limits_markdown_says_none_up_to_l_minus_one_when_censored(table):
    s = B.limits_summary(table).copy()
    s["n_star_censored"] = [True] + [False] * (len(s) - 1)
    s.iloc[0, s.columns.get_loc("n_star")] = 15
    md = R.beyond_limits_markdown(s)
    first = md.splitlines()[2]
    assert "| none ≤ 15 |" in first and "(" not in first.split("|")[5]
    assert "≥" not in md


def test_figure_beyond_limits_is_labelled(table):
    fig = R.figure_beyond_limits(table, B.critical_n_from_heads(table))
    assert figure_provenance(fig) == "model: toy · text: toy · device: cpu"
    assert len(fig.axes) == 6  # five panels and the legend


def test_figure_beyond_limits_draws_censored_points_as_open_triangles(table):
    crit = B.critical_n_from_heads(table).copy()
    crit["censored"] = crit["L"] == crit["L"].max()
    crit.loc[crit["censored"], "n_star"] = crit["L"] - 1
    ax = R.figure_beyond_limits(table, crit).axes[2]
    tri = [ln for ln in ax.get_lines() if ln.get_marker() == "^"]
    assert len(tri) == crit["normalizer"].nunique()
    assert all(ln.get_linestyle() == "None" and ln.get_markerfacecolor() == "none" for ln in tri)
    joined = [ln for ln in ax.get_lines() if ln.get_marker() != "^"]
    assert all(max(ln.get_xdata(), default=0) < crit["L"].max() for ln in joined)  # no line reaches a censored point


def test_figure_beyond_limits_rejects_other_tables():
    with pytest.raises(ValueError, match="df"):
        R.figure_beyond_limits(pd.DataFrame({"x": [1]}), pd.DataFrame())


def test_swap_table_deltas_are_against_the_model(swap):
    t = R.beyond_swap_table(swap.losses)
    assert t.loc["softmax (model)", "delta_loss"] == 0
    np.testing.assert_allclose(t["delta_loss"], t["loss"] - t.loc["softmax (model)", "loss"])
    with pytest.raises(ValueError, match="L must be one of"):
        R.beyond_swap_table(swap.losses, L=3)


def test_figure_beyond_swap_is_labelled(swap):
    fig = R.figure_beyond_swap(swap.losses)
    assert "tiny-gpt2" in figure_provenance(fig)


def test_render_swap_row_changes_with_the_setting(swap):
    a = figure_to_png(render_swap_row(swap.rows, "top-1", "k"))
    b = figure_to_png(render_swap_row(swap.rows, "top-16", "k"))
    c = figure_to_png(render_swap_row(swap.rows, "softmax T=0.5", "T"))
    assert a != b and b != c


def test_render_swap_row_rejects_unknown_setting(swap):
    with pytest.raises(ValueError, match="setting"):
        render_swap_row(swap.rows, "top-999")
    with pytest.raises(ValueError, match="sweep"):
        render_swap_row(swap.rows, "top-1", "q")
