r"""Distances at one ``N`` for every head and row: d~ (Eq. 7), d_max (Theorem 1a), E1 with its Jensen-gap bounds
and E2 (Theorem 1b). Reading the paper, §Distance and §Expectation forms.

Everything comes from the per-head Gram matrix :math:`G = VV^\top` of :class:`~attn_lib.metrics.layer.LayerData`:

.. math:: \|\alpha_ix_i-s\|^2=\alpha_i^2G_{ii}-2\alpha_i\,c_i+\|s\|^2,\quad
          c_i=s\cdot x_i=\sum_{j\in I_N}\alpha_jG_{ji},

and for E1, :math:`\|(1+p)a_i-pz\|^2=(1+p)^2\alpha_i^2G_{ii}-2p(1+p)\alpha_i(z\cdot x_i)+p^2\|z\|^2`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import torch

from .._validation import check_choice, check_probability
from . import _engine
from ._engine import F64, choose, coarse_threads, run_blocks
from .layer import LayerData, as_layer, check_n, zero_invalid

__all__ = ["distance_metrics"]

#: the per-row sums both engines compute (the other fields of :class:`DistanceRows` are shared).
_SUMS = ("d_tilde", "e1", "e1_gap", "e1_gap_crude", "e2", "s_norm")
#: the fields of :class:`DistanceRows` that are zero at invalid rows.
_ROW_FIELDS = _SUMS + ("alpha_bar", "d1", "max_norm", "d_max")


@dataclass
class DistanceRows:
    """Per-(head, row) results of :func:`distance_metrics`; every tensor is ``(H, L)``, in the layer's dtype unless
    noted, and 0 at rows that are not ``valid``; Theorem 1(a)'s ``d1``, ``max_norm`` (the largest selected norm) and
    ``d_max`` are ``None`` without ``with_dmax``."""

    N: int  #: the top-``N`` size
    t: torch.Tensor  #: visible count of each row (int64)
    valid: torch.Tensor  #: bool: ``t >= N + 1``
    d_tilde: torch.Tensor  #: d~ (Eq. 7) in the requested ``form``
    e1: torch.Tensor  #: E1 (Theorem 1b)
    e1_gap: torch.Tensor  #: the Jensen-gap bound of E1
    e1_gap_crude: torch.Tensor  #: the crude version of that bound
    e2: torch.Tensor  #: E2 (Theorem 1b)
    s_norm: torch.Tensor  #: ``||s||``, the norm of the top-``N`` sum
    alpha_bar: torch.Tensor  #: the top-``N`` weight mass
    d1: torch.Tensor | None = None
    max_norm: torch.Tensor | None = None
    d_max: torch.Tensor | None = None


def check_p(p: Any) -> str | float:
    """E1's inclusion probability argument: ``"L-1"``, ``"L"`` or a number in ``[0, 1]`` (returned as float)."""
    if isinstance(p, str):
        return check_choice("p", p, ["L-1", "L"])
    try:
        return check_probability("p", p)
    except ValueError:
        raise ValueError(f"p must be 'L-1', 'L' or a number in [0, 1] (got {p!r})") from None


def inclusion_probability(p: str | float, N: int, t: torch.Tensor, dtype: torch.dtype = F64) -> torch.Tensor:
    """Per row: ``N/(t-1)`` (``p="L-1"``), ``N/t`` (``"L"``) or the number ``p`` (checked), in ``dtype``."""
    tt = t.to(dtype)
    if p == "L-1":
        return N / (tt - 1).clamp(min=1)
    if p == "L":
        return N / tt.clamp(min=1)
    return torch.full_like(tt, p)


@coarse_threads
def distance_metrics(
    layer,
    values=None,
    N: int = 5,
    *,
    mask=None,
    p: Any = "L-1",
    form: str = "sum",
    with_dmax: bool = True,
    engine: str = "auto",
) -> DistanceRows:
    r"""d~ (Eq. 7), d_max (Theorem 1a), E1 and its Jensen-gap bounds, E2 (Theorem 1b) for every head and row.

    Chapter 2, ``thm-distance``: batched versions of the references in :mod:`attn_lib.theory`, held to them by
    ``tests/test_metrics.py::test_distance_metrics_match_theory_rows``, engines by
    ``tests/test_metrics.py::test_distance_engines_agree``.

    Cost per row: ``O(t d)`` by BLAS for ``s . x_i``, ``O(t)`` elementwise; ``d_1`` (for d_max) uses a running
    maximum of the squared distances from each token (prefix masks), ``O(N t)`` only where the farthest visible token
    from the best selected one is itself selected.

    ``p``: E1's inclusion probability, as in :func:`attn_lib.theory.expectation_e1` (``"L-1"``: ``N/(t-1)``,
    ``"L"``: ``N/t``, or a number in ``[0, 1]``). ``form="sum"`` is the project's d~ (Reading the paper, §Distance),
    ``"vector"`` the variant :math:`\|\sum_{i\notin I_N}a_i-s\|`. ``with_dmax``: also ``d1``, ``max_norm`` and
    ``d_max``. The accelerator (``dist_prefix``, the same formulas) also needs ``form="sum"``.
    """
    ld, N, p = as_layer(layer, values, mask), check_n(N), check_p(p)
    check_choice("form", form, ["sum", "vector"])
    impl = choose("distance_metrics", engine, ld.kernels_apply and form == "sum", " and form='sum'")
    order = ld.order(min(N, ld.L))  # (H, L, N)
    if impl is not None:  # the six sums of _SUMS, in order, and (d_1, max_norm) if with_dmax and a row is valid
        sums, d1_and_norm = impl(ld, N, p, order, with_dmax)
        sums = dict(zip(_SUMS, sums, strict=True))
    else:
        sums, d1_and_norm = _distance_torch(ld, N, p, order, form), None
    if with_dmax and d1_and_norm is None:
        d1_and_norm = _d1_and_norm(ld, order.shape[-1], order)
    counts = torch.broadcast_to(ld.t, (ld.H, ld.L))
    valid = counts >= N + 1
    alpha_bar = ld.alpha.gather(-1, order).sum(-1)
    res = DistanceRows(N=N, t=counts, valid=valid, alpha_bar=alpha_bar, **sums)
    if d1_and_norm is not None:
        res.d1, res.max_norm = d1_and_norm
        # 1 - abar as the out-of-set mass (identical for rows summing to one), as in theory.theorem1_dmax
        out_mass = ld.alpha.sum(-1) - alpha_bar
        res.d_max = out_mass * res.d1 + ((counts.to(ld.dtype) - N) * alpha_bar - out_mass) * res.max_norm
    return replace(res, **zero_invalid(valid, **{name: getattr(res, name) for name in _ROW_FIELDS}))


def _distance_torch(ld: LayerData, N: int, p: str | float, order: torch.Tensor, form: str) -> dict:
    """The six per-row sums by tensor operations, in row blocks. Every per-token square is (row constant) + (row
    constants) x (``||a_i||^2``, ``a_i . z``, ``a_i . s``): at a masked column exactly the row constant, so those
    columns are summed and then subtracted; a rounding-negative square gives NaN, which ``nansum`` counts as 0."""
    sums = {name: torch.zeros(ld.H, ld.L, dtype=ld.dtype, device=ld.device) for name in _SUMS}
    (z_dot_x, z_sq), _ = ld.zdot(), ld.gram  # computed (and cached) before the blocks run on worker threads

    def block(rows_block: torch.Tensor, width: int) -> None:  # consecutive rows that see at most ``width`` columns
        rows, alpha, visible, top, s, s_dot_x = ld.top_block(order, rows_block, width)  # alpha (H, B, W)
        s_sq = (s * s).sum(-1, keepdim=True)  # (H, B, 1)
        n_masked = (~visible).sum(-1, keepdim=True).to(ld.dtype)  # masked columns of the block (alpha = 0 there)
        alpha_g = alpha * ld.gdiag[:, None, :width]  # alpha_i ||x_i||^2
        a_sq = alpha * alpha_g  # ||a_i||^2
        dist = torch.addcmul(s_sq, alpha, torch.add(alpha_g, s_dot_x, alpha=-2.0)).sqrt_()  # ||a_i - s||
        s_norm = s_sq.clamp(min=0).sqrt()
        dist_all = (dist.nansum(-1, keepdim=True) - n_masked * s_norm).squeeze(-1)
        dist_selected = dist.gather(-1, top).nan_to_num_(0.0).sum(-1)
        t_rows = torch.broadcast_to(ld.t, (ld.H, ld.L))[:, rows].to(ld.dtype)
        sums["s_norm"][:, rows] = s_norm.squeeze(-1)
        if form == "sum":
            sums["d_tilde"][:, rows] = dist_all - dist_selected
        else:
            # ||(z - s) - s||^2 = ||z||^2 - 4 z.s + 4 ||s||^2,  z.s = sum_i alpha_i (s . x_i)
            z_dot_s = (alpha * s_dot_x).sum(-1)
            vector_sq = z_sq[:, rows] - 4 * z_dot_s + 4 * s_sq.squeeze(-1)
            sums["d_tilde"][:, rows] = vector_sq.clamp(min=0).sqrt()
        del dist, s_dot_x
        if N == 1:  # the selected token sits exactly at s: remove the rounding of the Gram formula
            dist_all = dist_all - dist_selected
        factor = (t_rows - N) / t_rows.clamp(min=1)
        sums["e2"][:, rows] = factor * dist_all
        a_dot_z, p_rows = alpha * z_dot_x[:, rows, :width], inclusion_probability(p, N, t_rows, ld.dtype)
        e1, gap, gap_crude = _e1_and_gaps(
            a_sq, a_dot_z, z_sq[:, rows, None], p_rows[..., None], t_rows[..., None], n_masked
        )
        sums["e1"][:, rows] = factor * e1
        gap_defined = t_rows >= N + 2  # N >= t - 1 gives 0
        sums["e1_gap"][:, rows] = torch.where(gap_defined, factor * gap, 0.0)
        sums["e1_gap_crude"][:, rows] = torch.where(gap_defined, factor * gap_crude, 0.0)

    run_blocks(block, ld.blocks(per_row=2))
    return sums


def _e1_and_gaps(a_sq, a_dot_z, z_sq, p, t, n_masked) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The sums (before the factor ``(t - N)/t``) of E1, its Jensen-gap bound and the crude bound, each ``(H, B)``,
    from ``a_sq`` (``A_i = ||a_i||^2``), ``a_dot_z`` ``(H, B, W)`` and ``z_sq`` (``Z = ||z||^2``), ``p``, ``t``,
    ``n_masked`` ``(H, B, 1)``. Each term is ``sqrt(k1 + k2 A_i + k3 a_i.z)``; a masked column gives ``sqrt(k1)``."""
    # E1: ||(1+p) a_i - p z||^2 = (1+p)^2 A_i - 2p(1+p) a_i.z + p^2 Z
    e1_const = p * p * z_sq
    work = torch.addcmul(e1_const, a_sq, (1 + p) ** 2).addcmul_(a_dot_z, -2 * p * (1 + p)).sqrt_()
    e1 = work.nansum(-1, keepdim=True) - n_masked * e1_const.clamp(min=0).sqrt()
    # Jensen gap: p(1-p) [ (t-1)/(t-2) sum_{j!=i} A_j - ||z - a_i||^2/(t-2) ]
    #           = k1 + k2 A_i + k3 a_i.z  with  k1 = pq/den ((t-1) Q - Z), k2 = -pq t/den, k3 = 2 pq/den
    # (Q = sum_i A_i, pq = p(1-p), den = t-2)
    a_sq_total = a_sq.sum(-1, keepdim=True)
    den = (t - 2).clamp(min=1)
    pq = (p * (1 - p)).clamp(min=0)
    k1 = pq / den * ((t - 1) * a_sq_total - z_sq)
    work = torch.addcmul(k1, a_sq, -pq * t / den, out=work).addcmul_(a_dot_z, 2 * pq / den).sqrt_()
    gap = work.nansum(-1, keepdim=True) - n_masked * k1.clamp(min=0).sqrt()
    # crude: p(1-p) (t-1)/(t-2) sum_{j!=i} A_j = k4 - k5 A_i
    k5 = pq * (t - 1) / den
    k4 = k5 * a_sq_total
    work = torch.addcmul(k4, a_sq, -k5, out=work).sqrt_()
    gap_crude = work.nansum(-1, keepdim=True) - n_masked * k4.clamp(min=0).sqrt()
    return e1.squeeze(-1), gap.squeeze(-1), gap_crude.squeeze(-1)


def _d1_and_norm(ld: LayerData, N: int, order: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``d_1 = max_{i not in I_N, j in I_N} ||x_i - x_j||`` and ``max_{j in I_N} ||x_j||``, each ``(H, L)``."""
    max_norm = ld.gdiag.gather(1, order.reshape(ld.H, -1)).view(ld.H, ld.L, N).clamp(min=0).sqrt().amax(-1)
    d1_sq = (_d1_sq_prefix if ld.prefix else _d1_sq_rows)(ld, N, order)
    return torch.where(torch.isfinite(d1_sq), d1_sq, 0.0).clamp(min=0).sqrt(), max_norm


def _d1_sq_prefix(ld: LayerData, N: int, order: torch.Tensor) -> torch.Tensor:
    """Squared ``d_1`` ``(H, L)`` for prefix masks from ``F[h, j, c] = max_{i <= c} ||x_i - x_j||^2`` and its argmax
    (cached on the layer): ``F[h, j, last_r]`` is exact for a selected ``j`` whose argmax is not selected; the other
    ``j`` matter only if their bound exceeds the best exact candidate, and only those are recomputed."""
    H, L = ld.H, ld.L
    G, g = ld.gram, ld.gdiag
    if getattr(ld, "_cummax", None) is None:
        ld._cummax = torch.cummax(torch.add(g.unsqueeze(-1) + g.unsqueeze(-2), G, alpha=-2.0), dim=-1)
    running_max, running_arg = ld._cummax
    last = torch.broadcast_to(ld.last, (H, L)).clamp(min=0)  # (H, L)
    flat = (order * L + last.unsqueeze(-1)).view(H, -1)  # (H, L N) flat index into (L, L)
    candidate = running_max.view(H, -1).gather(1, flat).view(H, L, N)
    farthest = running_arg.view(H, -1).gather(1, flat).view(H, L, N)
    if N <= 64:
        farthest_selected = (farthest.unsqueeze(-1) == order.unsqueeze(-2)).any(-1)  # (H, L, N)
    else:
        selected = torch.zeros(H, L, L, dtype=torch.bool, device=ld.device).scatter_(-1, order, True)
        farthest_selected = selected.gather(-1, farthest)
        del selected
    d1_sq = torch.where(farthest_selected, -math.inf, candidate).amax(-1)
    recompute = farthest_selected & (candidate > d1_sq.unsqueeze(-1))
    recompute &= (torch.broadcast_to(ld.t, (H, L)) >= N + 1).unsqueeze(-1)  # rows that have a non-selected token
    _d1_sq_recompute(ld, order, last, recompute.nonzero(as_tuple=False), d1_sq)
    return d1_sq


def _d1_sq_recompute(ld: LayerData, order: torch.Tensor, last, triples: torch.Tensor, d1_sq: torch.Tensor) -> None:
    """For each ``(head, row, k)`` of ``triples`` (sorted by head, then row), raise ``d1_sq[head, row]`` to
    ``max_i ||x_j - x_i||^2`` over the visible non-selected ``i``, ``j`` the row's ``k``-th selected token."""
    if not triples.numel():
        return
    G, g = ld.gram, ld.gdiag
    cols = torch.arange(ld.L, device=ld.device)
    for head in triples[:, 0].unique().tolist():
        head_triples = triples[triples[:, 0] == head]
        start = 0
        while start < head_triples.shape[0]:
            # rows ascending: the first row's width sizes the chunk, whose width is that of its last row
            n_chunk = max(1, _engine.settings.block_elems // (2 * int(last[head, head_triples[start, 1]]) + 2))
            width = int(last[head, head_triples[min(head_triples.shape[0], start + n_chunk) - 1, 1]]) + 1
            chunk = head_triples[start : start + n_chunk]
            start += n_chunk
            rows = chunk[:, 1]
            j = order[head, rows, chunk[:, 2]]
            # ||x_j - x_i||^2 for every i < width, then drop masked and selected i
            dist_sq = torch.index_select(G[head, :, :width], 0, j).mul_(-2.0).add_(g[head, :width])
            dist_sq.add_(g[head, j].unsqueeze(-1))
            dist_sq.masked_fill_(cols[:width].unsqueeze(0) > last[head, rows].unsqueeze(-1), -math.inf)
            dist_sq.scatter_(1, order[head, rows].clamp(max=width - 1), -math.inf)
            d1_sq[head].scatter_reduce_(0, rows, dist_sq.amax(-1), reduce="amax")


def _d1_sq_rows(ld: LayerData, N: int, order: torch.Tensor) -> torch.Tensor:
    """Exact squared ``d_1`` ``(H, L)`` of every row (any mask), from the Gram rows of the selected tokens."""
    H, L = ld.H, ld.L
    G, g = ld.gram, ld.gdiag
    d1_sq = torch.zeros(H, L, dtype=ld.dtype, device=ld.device)
    head_rows = torch.ones(H, L, dtype=torch.bool, device=ld.device).nonzero()
    chunk = max(1, _engine.settings.block_elems // max(1, N * L))
    for k in range(0, head_rows.shape[0], chunk):
        heads, rows = head_rows[k : k + chunk, 0], head_rows[k : k + chunk, 1]
        selected = order[heads, rows]  # (n, N)
        h = heads.unsqueeze(-1)
        dist_sq = g[heads].unsqueeze(1) + g[h, selected].unsqueeze(-1) - 2 * G[h, selected]  # (n, N, L)
        others = torch.broadcast_to(ld.mask, (H, L, L))[heads, rows].clone()  # (n, L)
        others.scatter_(1, selected, False)
        dist_sq = torch.where(others.unsqueeze(1), dist_sq, -math.inf)
        d1_sq[heads, rows] = dist_sq.amax(dim=(-2, -1))
    return d1_sq
