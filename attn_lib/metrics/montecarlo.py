r"""Monte-Carlo :math:`\mathbb E[\tilde d]` under uniformly random ``N``-subsets (Eq. 8), the ground truth that E1
and E2 approximate. Reading the paper, §Expectation forms.

:func:`expected_distance_mc` checks its input and runs :func:`_mc_numba` (the compiled
:func:`attn_lib._kernels.mc_prefix` on the subsets of :func:`_mc_subsets`) or :func:`_mc_torch`; both draw the same
subsets.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch

from .. import _kernels as _kern
from .._validation import check_int, check_seed
from . import _engine
from ._engine import F64, kernel_threads, uses_numba
from .layer import LayerData, as_layer, check_n, check_rows

__all__ = ["MCRows", "expected_distance_mc"]


@dataclass
class MCRows:
    """Monte-Carlo ``E[d~]`` of :func:`expected_distance_mc` on a subset of rows.

    Attributes
    ----------
    N : int
        The subset size.
    rows : torch.Tensor
        ``(R,)`` int64, the rows, ascending.
    mean, stderr : torch.Tensor
        ``(H, R)`` float64: the estimate and its standard error (0 where not valid).
    valid : torch.Tensor
        ``(H, R)`` bool: ``t >= N + 1``.
    """

    N: int
    rows: torch.Tensor
    mean: torch.Tensor
    stderr: torch.Tensor
    valid: torch.Tensor


def expected_distance_mc(
    layer, values=None, N: int = 5, *, rows=None, mask=None, n_samples: int = 64, seed: int = 0, engine: str = "auto"
) -> MCRows:
    r"""Monte-Carlo estimate of :math:`\mathbb E_{I_N\sim\mathcal U}[\tilde d]` (Eq. 8).

    For each requested row, ``n_samples`` uniform ``N``-subsets of its visible tokens are drawn from a CPU
    generator seeded with ``seed`` (random keys, smallest ``N`` -- the same construction as
    :func:`attn_lib.theory.expected_distance_mc`); the subsets depend only on ``(seed, row, t)`` and are shared by
    all heads (each head's estimate is a valid Monte-Carlo estimate). Cost per row: ``O(K t d)`` by BLAS.

    Parameters
    ----------
    layer, values, mask
        The layer: a :class:`~attn_lib.metrics.layer.LayerData` (then ``values`` and ``mask`` are ``None``), or raw
        weights ``(H, L, L)`` with ``values`` ``(H, L, d)`` and an optional bool ``mask`` (default causal), as
        :func:`~attn_lib.metrics.layer.as_layer` takes them. Every head must have the same mask.
    N : int
        Subset size, ``>= 1``.
    rows : sequence of int or tensor, optional
        Rows to estimate (integers in ``[0, L - 1]``; may be empty); default all rows.
    n_samples : int
        Subsets per row ``K``, ``>= 1``.
    seed : int
        Seed of the subsets, ``>= 0``.
    engine : {"auto", "numba", "torch"}
        ``"numba"`` (CPU, prefix masks: the compiled :func:`attn_lib._kernels.mc_prefix`, ``O(K t min(N, d))``
        per row, same subsets, float64), ``"torch"`` (any device or mask), ``"auto"`` (numba where it applies).

    Returns
    -------
    MCRows
        ``mean``, ``stderr`` and ``valid`` of shape ``(H, R)``.
    """
    ld = as_layer(layer, values, mask)
    N = check_n(N)
    n_samples = check_int("n_samples", n_samples, low=1)
    seed = check_seed("seed", seed)
    rows = torch.arange(ld.L) if rows is None else check_rows(rows, ld.L)
    if ld.mask.shape[0] != 1 and not bool((ld.mask == ld.mask[:1]).all()):
        raise ValueError("expected_distance_mc needs the same mask for every head")
    valid = torch.broadcast_to(ld.t, (ld.H, ld.L))[:, rows.to(ld.device)] >= N + 1
    if uses_numba(engine, ld.kernels_apply) and rows.numel() and N < ld.L:
        mean, stderr = _mc_numba(ld, N, rows, n_samples, seed)
    else:
        mean, stderr = _mc_torch(ld, N, rows, n_samples, seed)
    zero = torch.zeros((), dtype=F64, device=ld.device)
    return MCRows(
        N=N, rows=rows, mean=torch.where(valid, mean, zero), stderr=torch.where(valid, stderr, zero), valid=valid
    )


def _mc_numba(
    ld: LayerData, N: int, rows: torch.Tensor, n_samples: int, seed: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(mean, stderr)`` ``(H, R)`` by the compiled kernel; the subsets depend only on ``(seed, rows, t, N, K, L)``:
    drawn once (:func:`_mc_subsets`), shared by every layer."""
    counts = ld.t[0, rows]
    subsets = _mc_subsets(seed, tuple(rows.tolist()), tuple(counts.tolist()), ld.L, N, n_samples)
    mean, stderr = _kern.mc_prefix(
        ld.alpha.numpy(),
        ld.gram.numpy(),
        ld.values.numpy(),
        torch.broadcast_to(ld.t, (ld.H, ld.L)).numpy(),
        rows.numpy(),
        subsets.numpy(),
        threads=kernel_threads(),
    )
    return torch.from_numpy(mean), torch.from_numpy(stderr)


def _mc_torch(
    ld: LayerData, N: int, rows: torch.Tensor, n_samples: int, seed: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(mean, stderr)`` ``(H, R)`` by float64 tensor code, a block of rows at a time: the ``s`` of every subset by
    one BLAS product, then ``d~ = sum over the visible non-selected tokens of ||a_i - s||``."""
    H, L, n_rows, K = ld.H, ld.L, rows.numel(), n_samples
    mean = torch.zeros(H, n_rows, dtype=F64, device=ld.device)
    stderr = torch.zeros(H, n_rows, dtype=F64, device=ld.device)
    gen = torch.Generator(device="cpu").manual_seed(seed)
    keys_all = torch.rand(n_rows, K, L, generator=gen, dtype=F64)  # one draw per (row, sample, position)
    zero = torch.zeros((), dtype=F64, device=ld.device)
    per_block = max(1, _engine.BLOCK_ELEMS // max(1, H * K * L))
    for first in range(0, n_rows, per_block):
        rows_block = rows[first : first + per_block].to(ld.device)
        B = rows_block.numel()
        width = int(ld.last.amax(0)[rows_block].max()) + 1
        visible = ld.mask[0][rows_block, :width]  # (B, W)
        keys = keys_all[first : first + B, :, :width].to(ld.device)
        keys = torch.where(visible.unsqueeze(1), keys, torch.tensor(2.0, dtype=F64, device=ld.device))
        n_take = min(N, width)
        subsets = torch.topk(keys, n_take, dim=-1, largest=False).indices  # (B, K, N)
        alpha = ld.alpha[:, rows_block, :width]  # (H, B, W)
        subset_idx = subsets.unsqueeze(0).expand(H, B, K, n_take)
        subset_alpha = alpha.unsqueeze(2).expand(H, B, K, width).gather(-1, subset_idx)  # (H, B, K, n)
        weights = torch.zeros(H, B, K, width, dtype=F64, device=ld.device).scatter_(-1, subset_idx, subset_alpha)
        s = torch.bmm(weights.view(H, B * K, width), ld.values[:, :width])  # (H, B K, d)
        del weights
        s_dot_x = torch.bmm(s, ld.values[:, :width].transpose(1, 2)).view(H, B, K, width)
        s_sq = (s * s).sum(-1).view(H, B, K, 1)
        alpha_k = alpha.unsqueeze(2)
        dist = torch.addcmul(s_sq, alpha_k * ld.gdiag[:, None, None, :width] - 2 * s_dot_x, alpha_k)
        dist = dist.clamp_(min=0).sqrt_()  # ||a_i - s||
        # d~ = sum over visible non-selected = sum over visible - sum over the selected
        d_tilde = torch.where(visible.view(1, B, 1, width), dist, zero).sum(-1) - dist.gather(-1, subset_idx).sum(-1)
        mean[:, first : first + B] = d_tilde.mean(-1)
        stderr[:, first : first + B] = d_tilde.std(-1) / math.sqrt(K) if K > 1 else math.inf
    return mean, stderr


@functools.lru_cache(maxsize=8)
def _mc_subsets(seed: int, rows: tuple, t: tuple, L: int, N: int, K: int) -> torch.Tensor:
    """The ``K`` uniform ``N``-subsets of each row's visible prefix ``0..t-1``, ``(R, K, N)`` -- the same draws as
    :func:`_mc_torch` (keys from one seeded ``rand(R, K, L)``, the ``N`` smallest visible ones). Rows too short for
    a subset (``t < N + 1``, invalid) get masked indices, which are never read."""
    gen = torch.Generator(device="cpu").manual_seed(seed)
    keys = torch.rand(len(rows), K, L, generator=gen, dtype=F64)
    counts = torch.as_tensor(t).view(-1, 1, 1)
    keys.masked_fill_(torch.arange(L).view(1, 1, L) >= counts, 2.0)
    return torch.topk(keys, N, dim=-1, largest=False).indices
