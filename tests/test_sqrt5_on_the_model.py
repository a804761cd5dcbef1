"""The sqrt(5) eps example on the model's rows (experiments.sensitivity._model_examples) computed in O(1) per row is
held to the definition: softmax_change over the whole row, on rows with masks, near-one-hot weights and ties of
scale, at every T and eps of the paper's grid."""

from __future__ import annotations

import math

import pytest
import torch

from attn_lib.experiments.sensitivity import _model_examples, _top_two
from attn_lib.metrics.sensitivity import softmax_change

TEMPS = [1e-3, 1e-2, 0.1, 1.0, 10.0, 100.0]
EPS = [1e-3, 0.1, 10.0]


def _rows():
    torch.manual_seed(0)
    x = torch.randn(3, 40, 64, dtype=torch.float64) * torch.tensor([1.0, 5.0, 30.0]).view(3, 1, 1)
    vis = torch.ones(3, 40, 64, dtype=torch.bool)
    vis[:, :5, 10:] = False  # short rows
    vis[:, 5, 2:] = False  # a row of two tokens
    return x, vis


def _reference(x, vis, top2, T, e):
    xx = torch.where(vis, x, torch.tensor(-math.inf, dtype=x.dtype))
    unit = torch.zeros_like(x).scatter_(-1, top2[..., :1], -2.0).scatter_(-1, top2[..., 1:], 1.0)
    unit = torch.where(vis, unit, 0.0)
    y = (xx - xx.amax(-1, keepdim=True)) / T
    return torch.linalg.vector_norm(softmax_change(y, e * unit / T), dim=-1) / (3 * math.sqrt(2) * e / (4 * T))


@pytest.mark.numerical
def test_the_two_token_formula_matches_the_whole_row():
    x, vis = _rows()
    _, top2 = _top_two(torch.where(vis, x, -math.inf), vis)
    out = _model_examples(x, vis, top2, TEMPS, EPS)
    for a, T in enumerate(TEMPS):
        for b, e in enumerate(EPS):
            r = _reference(x, vis, top2, T, e)
            rm = r.amax(-1)
            assert torch.allclose(out["sqrt5_max"][a, b], rm, rtol=1e-9, atol=0), (T, e)
            assert (out["sqrt5_half"][a, b] == (r >= 0.5).sum(-1)).all(), (T, e)


@pytest.mark.numerical
def test_the_check_sees_a_lost_component():
    """Dropping the top weight's change (what a log-sum-exp not measured from the row maximum does when p_1 ~ 1)
    is a factor 1/sqrt2 on near-one-hot rows: the comparison above would fail on it."""
    x, vis = _rows()
    _, top2 = _top_two(torch.where(vis, x, -math.inf), vis)
    r = _reference(x, vis, top2, 1e-3, 1e-3)
    assert (r.amax(-1) > 0).all() and not torch.allclose(r.amax(-1) / math.sqrt(2), r.amax(-1), rtol=1e-9)


@pytest.mark.numerical
@pytest.mark.parametrize("T, e", [(1e-3 / 8, 10 / 8), (1e-3, 10.0), (1e-3 / 8, 0.1 / 8)])
def test_a_top_weight_near_one_keeps_its_change_past_the_expm1_range(T, e):
    """3 eps / T > 700 (the raw-score grid reaches it) with a top-two gap a little over 3 eps: p_1 is 1 to 1e-50 and
    its change, equal and opposite to p_2's, is below the rounding of a log-sum-exp near 0. A log-sum-exp for the
    change of log Z drops it: a factor 1/sqrt2 (the paper profile's layer 18 showed it); the definition keeps it."""
    gap = 3 * e + 128 * T  # the moved weight is e^-128 of the top one
    x = torch.tensor([[[0.0, -gap, -gap - 1.0, -gap - 5.0, -40.0, -80.0]]], dtype=torch.float64)
    vis = torch.ones_like(x, dtype=torch.bool)
    _, top2 = _top_two(x, vis)
    out = _model_examples(x, vis, top2, [T], [e])["sqrt5_max"][0, 0]
    ref = _reference(x, vis, top2, T, e).amax(-1)
    assert (ref > 0).all() and torch.allclose(out, ref, rtol=1e-9, atol=0), (out, ref)
