r"""The critical-N scan (Algorithm 3): d~, E1 and E2 for every ``N`` in a range, incrementally (Reading the paper,
§Critical N)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from . import _engine
from ._engine import F64, choose, coarse_threads, run_blocks
from .distance import check_p, inclusion_probability
from .layer import LayerData, as_layer, check_n_range, check_rows, zero_invalid

__all__ = ["topn_scan"]

_SCANNED = ("d_tilde", "e1", "e2")


@dataclass
class ScanRows:
    """Per-(head, row, N) results of :func:`topn_scan`: ``d_tilde``, ``e1``, ``e2`` ``(H, L, n)``
    in the layer's dtype, 0 where not valid."""

    n_values: np.ndarray  #: ``(n,)``: the ``N`` of the last axis, ``n_min..n_max``
    valid: torch.Tensor  #: ``(H, L, n)`` bool: ``t >= N + 1`` (and the row requested)
    d_tilde: torch.Tensor
    e1: torch.Tensor
    e2: torch.Tensor


@coarse_threads
def topn_scan(
    layer,
    values=None,
    n_max: int = 16,
    *,
    n_min: int = 1,
    mask=None,
    p: Any = "L-1",
    rows: Any = None,
    engine: str = "auto",
) -> ScanRows:
    r"""d~, E1, E2 for every ``N`` in ``n_min..n_max``, incrementally (critical-N scan, Algorithm 3).

    Per row, adding the ``N``-th top token ``j`` updates ``c_i = s . x_i`` by ``alpha_j G_{j i}`` and
    :math:`\|s\|^2` by :math:`2\alpha_jc_j+\alpha_j^2G_{jj}`, so one step costs ``O(t)`` per row and the whole scan
    ``O(H L^2 n)``, not ``O(H L^2 d\,n)`` as recomputing ``s`` for every ``N`` would. The state at ``n_min - 1`` is
    built directly (one BLAS product), so a scan can be continued in stages.

    ``1 <= n_min <= n_max <= L - 1``; ``p`` as for :func:`~attn_lib.metrics.distance_metrics`; ``rows``: only these
    (the others are 0 and not valid). The accelerator (``scan_prefix``) takes its square roots in float32 (relative
    error below ``1.2e-7``), the torch code keeps the layer's dtype throughout.
    """
    ld = as_layer(layer, values, mask)
    n_min, n_max = check_n_range(ld.L, n_min, n_max)
    p = check_p(p)
    impl = choose("topn_scan", engine, ld.kernels_apply)
    valid = torch.broadcast_to(ld.t, (ld.H, ld.L)).unsqueeze(-1) >= torch.arange(n_min, n_max + 1, device=ld.device) + 1
    if rows is not None:  # and the row requested
        rows = check_rows(rows, ld.L).to(ld.device)
        valid &= torch.zeros(ld.L, dtype=torch.bool, device=ld.device).index_fill_(0, rows, True).view(1, ld.L, 1)
    if impl is None:
        scanned = _scan_torch(ld, n_min, n_max, p, rows, valid)
    else:  # d~, E1, E2 (H, R, n) of the requested rows (default all), zero where t < N + 1
        rows = torch.arange(ld.L) if rows is None else rows
        scanned = {name: torch.zeros(ld.H, ld.L, n_max - n_min + 1, dtype=F64) for name in _SCANNED}
        for name, out in zip(_SCANNED, impl(ld, n_min, n_max, p, rows), strict=True):
            scanned[name][:, rows] = out
    return ScanRows(n_values=np.arange(n_min, n_max + 1), valid=valid, **scanned)


def _scan_torch(ld: LayerData, n_min: int, n_max: int, p: str | float, rows, valid: torch.Tensor) -> dict:
    """d~, E1, E2 ``(H, L, n)`` by tensor code in row blocks, 0 where not ``valid``."""
    order = ld.order(min(n_max, ld.L))
    (z_dot_x, z_sq), _ = ld.zdot(), ld.gram  # computed (and cached) before the blocks run on worker threads
    scanned = {name: torch.zeros(ld.H, ld.L, n_max - n_min + 1, dtype=ld.dtype, device=ld.device) for name in _SCANNED}

    def block(rows_block: torch.Tensor, width: int) -> None:  # the rows see at most ``width`` columns
        alpha = ld.alpha[:, rows_block, :width]  # (H, B, W) copy; zero at masked columns
        visible = torch.broadcast_to(ld.mask[:, rows_block, :width], alpha.shape)
        n_masked = (~visible).sum(-1).to(ld.dtype).unsqueeze(-1)  # masked columns inside the block, (H, B, 1)
        t_rows = torch.broadcast_to(ld.t, (ld.H, ld.L))[:, rows_block].to(ld.dtype)
        alpha_g = alpha * ld.gdiag[:, None, :width]  # alpha_i ||x_i||^2
        n_values = torch.arange(n_min, n_max + 1, device=ld.device).to(ld.dtype)
        factor = (t_rows.unsqueeze(-1) - n_values) / t_rows.clamp(min=1).unsqueeze(-1)  # (H, B, n): (t - N) / t
        d_tilde, e2 = _scan_distances(ld, rows_block, width, alpha, alpha_g, n_masked, order, n_min, n_max)
        scanned["d_tilde"][:, rows_block] = d_tilde
        scanned["e2"][:, rows_block] = factor * e2
        # E1 = sum_i sqrt((1+p)^2 ||a_i||^2 - 2p(1+p) a_i.z + p^2 ||z||^2) (times the factor) does not depend on the
        # selection: for 8 N at a time it is one small batched matmul [c1, c2, c3] @ [||a_i||^2; a_i.z; 1]
        H, B = alpha.shape[:2]
        a_sq, a_dot_z, z_sq_rows = alpha * alpha_g, alpha * z_dot_x[:, rows_block, :width], z_sq[:, rows_block, None]
        terms = torch.stack([a_sq, a_dot_z, torch.ones_like(a_sq)], -2).view(H * B, 3, width)
        for first in range(0, n_max - n_min + 1, 8):
            ns = range(n_min + first, min(n_max, n_min + first + 7) + 1)
            p_incl = torch.stack([inclusion_probability(p, N, t_rows, t_rows.dtype) for N in ns], -1)  # (H, B, c)
            coef = torch.stack([(1 + p_incl) ** 2, -2 * p_incl * (1 + p_incl), p_incl * p_incl * z_sq_rows], -1)
            roots = torch.bmm(coef.view(H * B, len(ns), 3), terms).sqrt_()  # (H B, c, W)
            e1 = roots.nansum(-1).view(H, B, -1) - n_masked * (p_incl * p_incl * z_sq_rows).clamp(min=0).sqrt()
            scanned["e1"][:, rows_block, first : first + len(ns)] = factor[..., first : first + len(ns)] * e1

    run_blocks(block, ld.blocks(rows=rows, per_row=3, elems=_engine.settings.scan_block_elems))
    return zero_invalid(valid, **scanned)


def _scan_distances(ld: LayerData, rows_block, width: int, alpha, alpha_g, n_masked, order, n_min: int, n_max: int):
    """d~ and the E2 sum (before its factor ``(t - N)/t``) ``(H, B, n)`` of one row block for ``N = n_min..n_max``,
    adding one top token per step to the state ``K_i = alpha_i ||x_i||^2 - 2 s . x_i`` and ``||s||^2``, so that
    ``||a_i - s||^2 = alpha_i K_i + ||s||^2``."""
    H, n_rows = alpha.shape[0], alpha.shape[1]
    head_offset = (torch.arange(H, device=ld.device) * ld.L).view(H, 1, 1)
    n_ord = order.shape[-1]
    top = order[:, rows_block].clamp(max=width - 1)  # (H, B, n_ord); past a row's count only reach invalid cells
    top_alpha = alpha.gather(-1, top)  # alpha of the k-th top token (0 where masked)
    top_alpha_g = alpha_g.gather(-1, top)
    top_gram_row = (top + head_offset).permute(2, 0, 1).reshape(n_ord, -1)  # (n_ord, H B) rows of gram_cols
    # the state at n_min - 1, directly
    n_start = min(n_min - 1, n_ord)
    if n_start > 0:
        start_weights = torch.zeros(H, n_rows, width, dtype=ld.dtype, device=ld.device)
        start_weights.scatter_(-1, top[..., :n_start], top_alpha[..., :n_start])
        s = torch.bmm(start_weights, ld.values[:, :width])  # (H, B, d)
        K = torch.baddbmm(alpha_g, s, ld.values[:, :width].transpose(1, 2), alpha=-2.0)
        s_sq = (s * s).sum(-1, keepdim=True)
        del start_weights, s
    else:
        K = alpha_g.clone()
        s_sq = torch.zeros(H, n_rows, 1, dtype=ld.dtype, device=ld.device)
    dist = torch.empty(H, n_rows, width, dtype=ld.dtype, device=ld.device)
    gram_j = torch.empty(H * n_rows, width, dtype=ld.dtype, device=ld.device)
    gram_cols = ld.gram.reshape(H * ld.L, ld.L)[:, :width]  # (H L, W): row h L + j is G[h, j, :W]
    d_tilde = torch.empty(H, n_rows, n_max - n_min + 1, dtype=ld.dtype, device=ld.device)
    e2 = torch.empty_like(d_tilde)
    for k, N in enumerate(range(n_min, n_max + 1)):
        if N <= n_ord:
            # add the N-th top token j: s += a_j x_j, so K -= 2 alpha_j G[j, :] and
            # ||s||^2 += 2 alpha_j s.x_j + alpha_j^2 G_jj = alpha_j (2 alpha_j G_jj - K_j)
            alpha_j = top_alpha[..., N - 1 : N]  # (H, B, 1)
            s_sq = s_sq + alpha_j * (2 * top_alpha_g[..., N - 1 : N] - K.gather(-1, top[..., N - 1 : N]))
            torch.index_select(gram_cols, 0, top_gram_row[N - 1], out=gram_j)  # G[h, j, :W]
            K.addcmul_(gram_j.view(H, n_rows, width), alpha_j, value=-2.0)
        # D_i = sqrt(alpha_i K_i + ||s||^2); the NaN of a rounding-negative square counts as 0 (nansum), and
        # masked columns give exactly sqrt(||s||^2)
        torch.addcmul(s_sq, alpha, K, out=dist).sqrt_()
        dist_all = dist.nansum(-1, keepdim=True) - n_masked * s_sq.clamp(min=0).sqrt()
        dist_selected = dist.gather(-1, top[..., : min(N, n_ord)]).nan_to_num_(0.0).sum(-1, keepdim=True)
        d_tilde[..., k : k + 1] = dist_all - dist_selected
        # N = 1: the selected token sits exactly at s
        e2[..., k : k + 1] = dist_all - dist_selected if N == 1 else dist_all
    return d_tilde, e2
