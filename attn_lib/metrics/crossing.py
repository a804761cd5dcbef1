r"""Where E1 can meet d~: the quantities of the critical-N diagnosis on a set of query rows.

Chapter 6's proposition ``prop-e1-crossing`` (book/06_reproduction_report.md; Reading the paper, §The critical N)
bounds, on every row with ``t >= N + 1`` visible tokens, ``p = N / (t - 1)`` and :math:`A=\sum_i\alpha_i\|x_i\|`:

.. math::

    \bigl|E_1-(t-N)\,p\,\|z\|\bigr| \le \tfrac{t-N}{t}(1+p)\,A, \qquad
    \bigl|\tilde d-(t-N)\,\|s_N\|\bigr| \le A_{\rm out}=\sum_{i\notin I_N}\alpha_i\|x_i\| ,

so E1 and d~ are close only where :math:`p\approx\|s_N\|/\|z\|`. :func:`crossing_metrics` computes, for a few
rows and every ``N`` of a short grid, the exact d~ and E1 (as :func:`attn_lib.metrics.distance.distance_metrics`)
with :math:`\|s_N\|`, :math:`\|z\|`, ``A`` and ``A_out``, so the proposition can be checked row by row; rows only
(``O(H R L d)`` per ``N``), so a whole model is diagnosed in seconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from .._validation import check_int_list
from ._engine import F64, choose, coarse_threads
from .layer import as_real_tensor, bool_mask, check_dtype, top_rank, zero_invalid

__all__ = ["crossing_metrics"]


@dataclass
class CrossingRows:
    r"""Per-(head, row, N) results of :func:`crossing_metrics`; shapes ``(H, R, n)`` unless noted, 0 where not valid."""

    n_values: list  #: the ``N`` of the last axis
    t: torch.Tensor  #: ``(R,)`` visible tokens of each row (the largest count over heads)
    valid: torch.Tensor  #: bool: ``t >= N + 1``
    d_tilde: torch.Tensor  #: d~ (Eq. 7, sum form)
    e1: torch.Tensor  #: E1 with ``p = N / (t - 1)``
    s_norm: torch.Tensor  #: ``||s_N||``, the norm of the top-``N`` sum
    z_norm: torch.Tensor  #: ``(H, R)``: ``||z||``, the norm of the attention output
    a_sum: torch.Tensor  #: ``(H, R)``: ``A = sum_i alpha_i ||x_i||``
    a_out: torch.Tensor  #: ``sum_{i not in I_N} alpha_i ||x_i||``


@coarse_threads
def crossing_metrics(
    weights: Any, values: Any, n_values: Any, mask: Any = None, *, engine: str = "auto", dtype=F64
) -> CrossingRows:
    r"""d~, E1, :math:`\|s_N\|`, :math:`\|z\|`, ``A`` and ``A_out`` on a set of query rows, for each ``N``.

    Chapter 6, ``prop-e1-crossing``; tested by
    ``tests/test_critical.py::TestCrossingBounds::test_e1_near_its_leading_term``.

    ``weights`` ``(H, R, L)`` of ``R`` query rows (finite, non-negative; masked positions ignored), ``values``
    ``(H, L, d)`` (the vectors :math:`x_i`), ``n_values`` top-``N`` sizes ``>= 1``; ``mask`` (``True`` = visible,
    broadcastable to ``(H, R, L)``) defaults to ``weights > 0`` (pass it when a visible weight may be exactly 0). The
    accelerator (``crossing_rows``) takes any visibility and agrees to rounding. Top-``N`` ties go to the lower index.
    """
    a, v, ns, vis = _crossing_inputs(weights, values, n_values, mask, dtype)
    impl = choose("crossing_metrics", engine, a.device.type == "cpu" and a.dtype == F64)  # any visibility
    t = vis.sum(-1).amax(0)  # (R,)
    norms = v.square().sum(-1).sqrt()  # (H, L)
    z = a @ v  # (H, R, d)
    z_norm = z.square().sum(-1).sqrt()
    a_norm = a * norms.unsqueeze(1)  # alpha_i ||x_i||, (H, R, L)
    zdotx = torch.einsum("hrd,hld->hrl", z, v)  # z . x_i
    parts = dict(a=a, v=v, vis=vis, rank=top_rank(a, vis), norms=norms, z_norm=z_norm, a_norm=a_norm, zdotx=zdotx, t=t)
    return CrossingRows(n_values=ns, t=t, z_norm=z_norm, a_sum=a_norm.sum(-1), **(impl or _crossing_torch)(ns, **parts))


def _crossing_torch(ns, *, a, v, vis, rank, norms, z_norm, a_norm, zdotx, t) -> dict:
    """The per-``N`` results of :func:`crossing_metrics` in tensor code, one ``N`` at a time."""
    tt = t.to(a.dtype).view(1, -1)
    a2, n2, zn2 = a.square(), norms.square().unsqueeze(1), z_norm.square().unsqueeze(-1)
    per_n = []
    for N in ns:
        top = (rank < N) & vis
        s = (a * top) @ v  # (H, R, d)
        s2 = s.square().sum(-1)
        sdotx = torch.einsum("hrd,hld->hrl", s, v)
        # ||alpha_i x_i - s||^2 over the visible non-selected i
        d2 = (a2 * n2 - 2 * a * sdotx + s2.unsqueeze(-1)).clamp(min=0)
        out_set = vis & ~top
        d_tilde = torch.where(out_set, d2.sqrt(), 0.0).sum(-1)
        p = (N / (tt - 1).clamp(min=1)).unsqueeze(-1)  # (1, R, 1)
        # ||(1+p) a_i - p z||^2 over every visible i
        e2_ = ((1 + p).square() * a2 * n2 - 2 * p * (1 + p) * a * zdotx + p.square() * zn2).clamp(min=0)
        e1 = ((tt - N) / tt) * torch.where(vis, e2_.sqrt(), 0.0).sum(-1)
        valid = (t >= N + 1).view(1, -1).expand_as(d_tilde)
        a_out = torch.where(out_set, a_norm, 0.0).sum(-1)
        per_n.append(zero_invalid(valid, d_tilde=d_tilde, e1=e1, s_norm=s2.sqrt(), a_out=a_out) | {"valid": valid})
    return {k: torch.stack([rows[k] for rows in per_n], -1) for k in per_n[0]}


def _crossing_inputs(weights: Any, values: Any, n_values: Any, mask: Any, dtype: Any):
    """Checked ``(weights in dtype, zero where masked; values; N list; visibility)`` of :func:`crossing_metrics`."""
    a = as_real_tensor(weights, "weights").to(check_dtype(dtype))
    v = as_real_tensor(values, "values").to(a.dtype)
    if a.dim() != 3 or v.dim() != 3 or v.shape[0] != a.shape[0] or v.shape[1] != a.shape[2]:
        raise ValueError(
            f"weights must be (H, R, L) and values (H, L, d) with matching H and L (got {tuple(a.shape)} and "
            f"{tuple(v.shape)})"
        )
    if not bool(torch.isfinite(v).all()):
        raise ValueError("values must be finite")
    ns = check_int_list("n_values", n_values, low=1, keep_order=True)
    vis = (a > 0) if mask is None else torch.broadcast_to(bool_mask(mask, a.device), a.shape)
    a = torch.where(vis, a, 0.0)
    if not bool(torch.isfinite(a).all()) or bool((a < 0).any()):
        raise ValueError("weights must be finite and non-negative at visible positions")
    return a, v, ns, vis
