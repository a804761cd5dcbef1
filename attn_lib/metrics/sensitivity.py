r"""Gradient sensitivity ``g(T, eps)`` per row (Algorithm 5): finite differences of softmax along one seeded unit
direction per row, for a grid of temperatures and step sizes. Reading the paper, §Gradient sensitivity."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from .. import jacobian as _jac
from .._validation import check_positive
from . import _engine
from ._engine import F64, choose, coarse_threads, run_blocks
from .layer import as_real_tensor, bool_mask, check_dtype, check_rows, heads, row_blocks

__all__ = ["sensitivity_rows"]  # softmax_change: the cancellation-free difference it is built on


@coarse_threads
def sensitivity_rows(
    logits: Any,
    temperatures: Sequence[float],
    eps_values: Sequence[float],
    *,
    mask=None,
    seed: int = 0,
    direction: torch.Tensor | None = None,
    rows: Any = None,
    engine: str = "auto",
    dtype=F64,
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Finite-difference sensitivity per row for a grid of ``T`` and ``eps`` (each ``> 0``, neither grid empty).

    Same definition and seeded unit directions (one per row, for every ``T`` and ``eps``) as
    :func:`attn_lib.jacobian.sensitivity`, in causal row blocks, all temperatures at once. ``logits`` ``(H, L, L)`` or
    ``(L, L)``: ``-inf`` (or ``mask`` ``False``) marks a masked position, finite at every visible one. ``direction``
    ``(H, R, L)`` replaces the seeded directions; ``rows``: only these (the set ``R`` of Algorithm 5, non-empty, the
    directions drawn for the sub-array). ``dtype``: float32 loses ~3 digits at ``eps = 1e-3``. Returns ``(g, valid)``:
    ``g`` ``(len(temperatures), len(eps_values), H, R)``, 0 where not valid; ``valid`` ``(H, R)``, the rows with at
    least two visible tokens.
    """
    x, visible, directions, temps, eps_list = _sensitivity_inputs(
        logits, temperatures, eps_values, mask, seed, direction, rows, check_dtype(dtype)
    )
    counts = visible[0].sum(-1)  # (R,)
    cols = torch.arange(x.shape[-1], device=x.device)
    prefix_rows = bool((visible == (cols.view(1, 1, -1) < counts.view(1, -1, 1))).all())
    valid = visible.sum(-1) >= 2
    impl = choose("sensitivity_rows", engine, x.device.type == "cpu" and x.dtype == F64 and prefix_rows)
    if impl is not None:  # rows i see columns 0..counts[i]-1
        g = impl(x, directions, counts, temps, eps_list)
    else:
        g = _sensitivity_torch(x, directions, visible, temps, eps_list)
    return torch.where(valid, g, 0.0).nan_to_num_(0.0), valid


def _sensitivity_inputs(logits, temperatures, eps_values, mask, seed, direction, rows, dtype):
    """Checked ``(x, visible, directions, temperatures, eps_values)``, the first three ``(H, R, L)`` for the rows."""
    x = heads(as_real_tensor(logits, "logits"))
    if x.dim() != 3:
        raise ValueError(f"logits must have shape (H, L, L) or (L, L) (got {tuple(x.shape)})")
    temps = [check_positive("temperature", T) for T in temperatures]
    eps_list = [check_positive("eps", e) for e in eps_values]
    if not temps or not eps_list:
        raise ValueError("temperatures and eps_values must be non-empty")
    extra_mask = None if mask is None else torch.broadcast_to(bool_mask(mask, x.device), x.shape)
    if rows is not None:  # select the rows first: everything below works on (H, R, L) only
        rows = check_rows(rows, x.shape[1], allow_empty=False).to(x.device)
        x = x[:, rows]
        extra_mask = None if extra_mask is None else extra_mask[:, rows]
    x = x.to(dtype)
    visible = x != -math.inf
    if extra_mask is not None:
        visible = visible & extra_mask
    if not bool(torch.isfinite(x[visible]).all()):
        raise ValueError("logits must be finite at visible positions")
    if direction is not None:
        directions = as_real_tensor(direction, "direction").to(dtype).to(x.device)
        if directions.shape != x.shape:
            raise ValueError(f"direction must have shape {tuple(x.shape)} (got {tuple(directions.shape)})")
        directions = _jac.visible_unit_directions(directions, visible)
    else:
        directions = _jac.random_directions(x.shape, visible.cpu(), seed=seed, dtype=dtype, device=x.device)
    return x, visible, directions, temps, eps_list


def _sensitivity_torch(x: torch.Tensor, directions, visible, temps: list, eps_list: list) -> torch.Tensor:
    """``g = ||softmax((x + eps v)/T) - softmax(x/T)|| / eps`` ``(nT, nE, H, R)`` in row blocks, all temperatures at
    once, by :func:`softmax_change` (rows without a visible position give NaN, zeroed by the caller)."""
    H, n_rows, L = x.shape
    out = torch.zeros(len(temps), len(eps_list), H, n_rows, dtype=x.dtype, device=x.device)
    temps_t = torch.as_tensor(temps, dtype=x.dtype, device=x.device).view(-1, 1, 1, 1)

    def block(first: int, stop: int, width: int) -> None:  # rows first..stop-1 see at most ``width`` columns
        visible_b = visible[:, first:stop, :width]
        x_b = torch.where(visible_b, x[:, first:stop, :width], -math.inf)
        v_b = torch.where(visible_b, directions[:, first:stop, :width], 0.0)
        y = (x_b - x_b.amax(-1, keepdim=True)) / temps_t  # (nT, H, B, W), <= 0, -inf where masked
        for k, eps in enumerate(eps_list):
            out[:, k, :, first:stop] = torch.linalg.vector_norm(softmax_change(y, eps * v_b / temps_t), dim=-1) / eps

    last = torch.where(visible, torch.arange(L, device=x.device), -1).amax(-1).amax(0).tolist()  # (R,)
    budget = max(1, _engine.settings.block_elems // 6 // max(1, H * len(temps)))  # rows x width, all T at once
    run_blocks(block, row_blocks(last, budget))  # disjoint rows; on worker threads inside block_parallel
    return out


def softmax_change(y: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    r"""``softmax(y + c) - softmax(y)`` over the last axis, without the cancellation of subtracting two nearby weights
    (which loses about ``log10(p_i / |change_i|)`` digits); ``y``: logits with a row maximum of 0 (``-inf`` = masked),
    ``c``: the perturbation (0 where masked).

    With :math:`p = \mathrm{softmax}(y)`, the change of weight ``i`` is exactly :math:`p_i\,\mathrm{expm1}(z_i)`,
    :math:`z_i = c_i - \Delta`, :math:`\Delta = \log\sum_j p_j e^{c_j}`. Measured from the token ``k`` of the row
    maximum, :math:`\Delta = c_k + \mathrm{log1p}(\sum_{j \ne k} p_j\,\mathrm{expm1}(c_j - c_k))` (a log-sum-exp where
    :math:`e^{y_j + c_j - c_k}` would overflow), so :math:`z_k` keeps its digits when ``p_k`` is close to 1. Where
    :math:`z_i > 1` (over ``e`` times the old weight, which may lie below the float range) the new weight is formed
    directly, :math:`e^{\log p_i + z_i} - p_i`.
    """
    e = torch.exp(y)
    s = e.sum(-1, keepdim=True)
    log_s = torch.log(s)
    p = e / s
    c_k = c.gather(-1, y.argmax(-1, keepdim=True))  # the perturbation of the row maximum's token
    d = torch.where(y == -math.inf, 0.0, c - c_k)
    yd = y + d
    big = yd.amax(-1, keepdim=True) > 700  # exp(y + d) would overflow: no digits to save there
    terms = torch.where(d <= 1, e * torch.expm1(d.clamp(max=1.0)), torch.exp(yd.clamp(max=700.0)) - e)
    shift = torch.where(
        big, torch.logsumexp(yd, dim=-1, keepdim=True) - log_s, torch.log1p(terms.sum(-1, keepdim=True) / s)
    )
    z = d - shift  # c - Delta
    near = p * torch.expm1(z.clamp(max=1.0))
    far = torch.exp((y - log_s + z).clamp(max=0.0)) - p
    return torch.where(z <= 1, near, far)
