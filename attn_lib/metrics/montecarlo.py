r"""Monte-Carlo :math:`\mathbb E[\tilde d]` under uniformly random ``N``-subsets (Eq. 8), the ground truth that E1
and E2 approximate. Reading the paper, §Expectation forms.

:func:`expected_distance_mc_scan` (every ``N`` of a range, for the critical-N scan, §The critical N) takes the
``N``-prefixes of ``K`` random orders of each row's visible tokens (:func:`mc_permutations`) as the subsets: adding
one token updates ``s . x_i`` and ``||s||^2`` from one row of the Gram matrix, so all ``N`` cost ``O(K t^2)`` per
row instead of ``O(K t d)`` for each. :func:`expected_distance_mc` (one ``N``) runs the same code on orders that
start with its subsets: with the same ``seed``, rows, ``n_samples`` and a row set ending at the layer's last row,
the scan's prefix of length ``N`` is exactly the subset it draws at that ``N``.

**Variance reduction.** With ``control_variate=True`` each sample is :math:`Y = \tilde d - C + \mathbb E[C]`, where
:math:`C = \sum_{i\notin I} w_i Q_i`, :math:`Q_i = \|\alpha_i x_i - s\|^2` (d~'s term ``i`` squared),
:math:`w_i = 1/(2\sqrt{m_i})`, :math:`m_i = \mathbb E[Q_i \mid i\notin I]` (exact, from the Gram matrix) and
:math:`\mathbb E[C] = \frac{t-N}{t}\sum_i w_i m_i`: the first-order Taylor expansion of d~ around the second
moments, so ``Y`` has d~'s expectation and, where the linearisation holds, a smaller variance (extra cost
``O(t^2 + n t)`` per row). On a row with an attention sink ``Q_i`` jumps with the sink's membership, the Taylor
weights overshoot, and the variance can be larger than the plain mean's.

With ``stratify=True`` each row is stratified on its largest weight ``j*`` (per head; ties to the lower index):
sample ``k`` is a pair of independent orders, one with ``j*`` first (``j*`` and a uniform ``(N-1)``-subset of the
others), one with ``j*`` last among the visible tokens (a uniform ``N``-subset without ``j*``), weighted ``N/t`` and
``1 - N/t``: unbiased, twice the orders, less variance on rows with an attention sink;
``stderr = sqrt((N/t)^2 se_in^2 + (1 - N/t)^2 se_out^2)``. Both options can be combined.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
import torch

from .._validation import check_bool, check_seed, check_size
from . import _engine
from ._engine import F64, choose, coarse_threads
from .layer import LayerData, as_layer, check_n, check_n_range, check_rows, zero_invalid

__all__ = ["expected_distance_mc", "expected_distance_mc_scan"]


@dataclass
class MCRows:
    """Monte-Carlo ``E[d~]`` of :func:`expected_distance_mc` on a subset of rows (0 where not valid)."""

    N: int  #: the subset size
    rows: torch.Tensor  #: ``(R,)`` int64, the rows, ascending
    mean: torch.Tensor  #: ``(H, R)``: the estimate
    stderr: torch.Tensor  #: ``(H, R)``: its standard error
    valid: torch.Tensor  #: ``(H, R)`` bool: ``t >= N + 1``


@coarse_threads
def expected_distance_mc(
    layer, values=None, N: int = 5, *, rows=None, mask=None, n_samples: int = 64, seed: int = 0, engine: str = "auto"
) -> MCRows:
    r"""Monte-Carlo estimate of :math:`\mathbb E_{I_N\sim\mathcal U}[\tilde d]` (Eq. 8).

    For each requested row (``rows``, default all; may be empty), ``n_samples`` uniform ``N``-subsets of its visible
    tokens are drawn from one seeded CPU ``rand(R, K, L)`` (random keys, smallest ``N``, as
    :func:`attn_lib.theory.expected_distance_mc`), so a row asked for together with other rows may get other subsets
    than alone. They are shared by all heads, which must have the same mask. Cost per row: ``O(K t N)``; the
    accelerator (``mc_prefix``, ``O(K t min(N, d))``) uses the same subsets.
    """
    ld, N = as_layer(layer, values, mask), check_n(N)
    rows, n_samples, seed = _check_mc_args(ld, rows, n_samples, seed, "expected_distance_mc")
    valid = torch.broadcast_to(ld.t, (ld.H, ld.L))[:, rows.to(ld.device)] >= N + 1
    impl = choose("expected_distance_mc", engine, ld.kernels_apply)
    if impl is not None and rows.numel() and N < ld.L:
        # the subsets depend only on (seed, rows, t, N, K, L): drawn once, shared by every layer
        subsets = _mc_subsets(seed, tuple(rows.tolist()), tuple(ld.t[0, rows].tolist()), ld.L, N, n_samples)
        mean, stderr = impl(ld, rows, subsets)
    else:
        # the same estimate as the scan's at n_min = n_max = N, whose orders start with these subsets
        subsets = _draw_subsets(seed, ld.mask[0][rows.to(ld.device)].cpu(), N, n_samples)
        mean, stderr = (x[..., 0] for x in _mc_scan_torch(ld, N, N, rows, subsets))
    return MCRows(N=N, rows=rows, valid=valid, **zero_invalid(valid, mean=mean, stderr=stderr))


def _draw_subsets(seed: int, visible: torch.Tensor, N: int, K: int) -> torch.Tensor:
    """``K`` uniform ``N``-subsets ``(R, K, min(N, L))`` of the visible columns of each row of ``visible`` ``(R, L)``:
    the ``N`` smallest :func:`_keys` (rows too short for a subset get masked indices, never read)."""
    return torch.topk(_keys(seed, visible, K), min(N, visible.shape[1]), dim=-1, largest=False).indices


def _keys(seed: int, visible: torch.Tensor, K: int) -> torch.Tensor:
    """``K`` random keys per column of ``visible`` ``(R, W)``: one seeded CPU ``rand(R, K, W)``, 2 at masked columns."""
    gen = torch.Generator(device="cpu").manual_seed(seed)
    keys = torch.rand(visible.shape[0], K, visible.shape[1], generator=gen, dtype=F64)
    return keys.masked_fill_(~visible.unsqueeze(1), 2.0)


@functools.lru_cache(maxsize=64)  # a paper pass asks for 55 (5 seeds x 11 grid points), each at most a few MB
def _mc_subsets(seed: int, rows: tuple, t: tuple, L: int, N: int, K: int) -> torch.Tensor:
    """:func:`_draw_subsets` for rows that see the prefixes ``0..t-1`` (cached: a pass reuses them for every layer)."""
    return _draw_subsets(seed, torch.arange(L).view(1, L) < torch.as_tensor(t).view(-1, 1), N, K)


@dataclass
class MCScanRows:
    """Monte-Carlo ``E[d~]`` of :func:`expected_distance_mc_scan` for every ``N`` of a range, on a subset of rows (0
    where not valid)."""

    n_values: np.ndarray  #: ``(n,)``: the ``N`` of the last axis, ``n_min..n_max``
    rows: torch.Tensor  #: ``(R,)`` int64, the rows, ascending
    mean: torch.Tensor  #: ``(H, R, n)``: the estimate
    stderr: torch.Tensor  #: ``(H, R, n)``: its standard error ``std / sqrt(K)`` (``inf`` for ``K = 1``)
    valid: torch.Tensor  #: ``(H, R, n)`` bool: ``t >= N + 1``
    n_samples: int  #: ``K``
    control_variate: bool = False  #: whether each sample carried the control variate
    stratified: bool = False  #: whether the samples were stratified on the largest weight


@coarse_threads
def expected_distance_mc_scan(
    layer,
    values=None,
    n_max: int = 16,
    *,
    n_min: int = 1,
    rows=None,
    mask=None,
    n_samples: int = 8,
    seed: int = 0,
    engine: str = "auto",
    control_variate: bool = False,
    stratify: bool = False,
) -> MCScanRows:
    r"""Monte-Carlo :math:`\mathbb E_{I_N\sim\mathcal U}[\tilde d]` (Eq. 8) for every ``N`` in ``n_min..n_max``.

    The estimator of :func:`expected_distance_mc` with the subsets of every ``N`` drawn together: the ``N``-prefixes
    of ``K = n_samples`` uniformly random orders per row (:func:`mc_permutations`), updated one token at a time as
    :func:`attn_lib.metrics.topn_scan` does; ``O(K t min(t, n_max))`` per row. The estimates at different ``N`` share
    their orders (correlated across ``N``); each is unbiased. ``control_variate`` and ``stratify`` (``K`` pairs of
    orders, twice the work) reduce the variance with the same expectation (module doc, §Variance reduction).
    ``rows``, ``mask`` as for :func:`expected_distance_mc`. The accelerator (``mc_scan_prefix``) uses the same orders,
    a float64 state and float32 square roots as in the critical-N scan (relative error below ``1.2e-7``).
    """
    ld = as_layer(layer, values, mask)
    n_min, n_max = check_n_range(ld.L, n_min, n_max)
    rows, n_samples, seed = _check_mc_args(ld, rows, n_samples, seed, "expected_distance_mc_scan")
    check_bool("control_variate", control_variate)
    check_bool("stratify", stratify)
    n_values = torch.arange(n_min, n_max + 1, device=ld.device)
    valid = torch.broadcast_to(ld.t, (ld.H, ld.L))[:, rows.to(ld.device), None] >= n_values.view(1, 1, -1) + 1
    impl = choose("expected_distance_mc_scan", engine, ld.kernels_apply)
    impl = impl if rows.numel() else None
    perm = mc_permutations(ld.mask[0][rows.to(ld.device)].cpu(), 2 * n_samples if stratify else n_samples, seed)
    if stratify:
        mean, stderr = _mc_scan_stratified(ld, n_min, n_max, rows, perm, control_variate, impl)
    else:
        mean, stderr = (impl or _mc_scan_torch)(ld, n_min, n_max, rows, perm, control_variate)
    return MCScanRows(
        n_values=np.arange(n_min, n_max + 1),
        rows=rows,
        **zero_invalid(valid, mean=mean, stderr=stderr),
        valid=valid,
        n_samples=n_samples,
        control_variate=control_variate,
        stratified=stratify,
    )


def _check_mc_args(ld: LayerData, rows, n_samples, seed, caller: str) -> tuple[torch.Tensor, int, int]:
    """The checked ``(rows, n_samples, seed)`` (``rows`` ascending, on the CPU), and the one mask of every head."""
    seed = check_seed("seed", seed)
    rows = torch.arange(ld.L) if rows is None else check_rows(rows, ld.L)
    n_samples = check_size("n_samples", n_samples, per_item=max(1, int(rows.numel())) * ld.L)  # (R, K, L) keys
    if ld.mask.shape[0] != 1 and not bool((ld.mask == ld.mask[:1]).all()):
        raise ValueError(f"{caller} needs the same mask for every head")
    return rows, n_samples, seed


def mc_permutations(visible, n_samples: int, seed: int) -> torch.Tensor:
    """The random orders ``(R, K, W)`` int64 of :func:`expected_distance_mc_scan`, ``K = n_samples`` per row of
    ``visible`` ``(R, L)``, visible tokens first: the stable sort of the :func:`_keys` (``W`` = the last visible
    column, plus one), the keys :func:`expected_distance_mc` draws when ``W`` is the layer's length. Cached."""
    visible = visible.to(torch.bool).cpu()
    last = torch.where(visible, torch.arange(visible.shape[1]), -1).amax(-1)
    width = max(1, int(last.max()) + 1) if visible.numel() else 1
    vis = visible[:, :width].contiguous()
    return _mc_permutations_cached(vis.numpy().tobytes(), tuple(vis.shape), int(n_samples), int(seed)).clone()


@functools.lru_cache(maxsize=16)  # a paper pass asks for 10 (5 seeds x short and long rows), each at most ~6 MB
def _mc_permutations_cached(visible_bytes: bytes, shape: tuple, K: int, seed: int) -> torch.Tensor:
    visible = torch.from_numpy(np.frombuffer(visible_bytes, dtype=np.bool_).reshape(shape).copy())
    return torch.argsort(_keys(seed, visible, K), dim=-1, stable=True)


def _move_token(perm: torch.Tensor, token: torch.Tensor, t: torch.Tensor, first: bool) -> torch.Tensor:
    """``perm`` ``(R, K, W)`` with ``token[i]`` moved to the front of row ``i``'s orders (``first``) or to position
    ``t[i] - 1``, the last visible one; the other entries keep their order."""
    pos = torch.arange(perm.shape[-1], dtype=F64).expand(perm.shape)
    hit = perm == token.view(-1, 1, 1)
    place = -1.0 if first else (t.to(F64) - 0.5).view(-1, 1, 1).expand(perm.shape)
    return perm.gather(-1, torch.argsort(torch.where(hit, place, pos), dim=-1, stable=True))


def _mc_scan_stratified(ld: LayerData, n_min: int, n_max: int, rows, perm, control_variate: bool, impl) -> tuple:
    """``(mean, stderr)`` ``(H, R, n)`` stratified on each head's largest weight: the first half of the orders
    ``perm`` ``(R, 2K, W)`` with that token first, the second half with it last. The accelerated ``impl`` moves the
    token itself (``pick``, ``first``); the torch path by :func:`_move_token`, head by head (the same orders)."""
    K = perm.shape[1] // 2
    dev = ld.device
    t = torch.broadcast_to(ld.t, (ld.H, ld.L))[0, rows.to(dev)].cpu()  # (R,), the same for every head
    p = (torch.arange(n_min, n_max + 1, dtype=F64).view(1, -1) / t.to(F64).view(-1, 1)).to(ld.dtype).to(dev)  # (R, n)
    top = ld.alpha[:, rows.to(dev)].argmax(-1).cpu()  # (H, R), first maximum: ties to the lower index
    halves = []
    for first, part in ((True, perm[:, :K]), (False, perm[:, K:])):
        if impl is not None:
            halves.append(impl(ld, n_min, n_max, rows, part, control_variate, pick=top, first=first))
            continue
        per_head = []
        for h in range(ld.H):
            head = LayerData(ld.alpha[h : h + 1], ld.values[h : h + 1], ld.mask[:1], dtype=ld.dtype)
            per_head.append(
                _mc_scan_torch(head, n_min, n_max, rows, _move_token(part, top[h], t, first), control_variate)
            )
        halves.append(tuple(torch.cat(x, 0) for x in zip(*per_head, strict=True)))
    (m_in, se_in), (m_out, se_out) = halves
    return p * m_in + (1 - p) * m_out, (p.square() * se_in.square() + (1 - p).square() * se_out.square()).sqrt()


def _cv_terms(ld: LayerData, rows_block: torch.Tensor, W: int) -> tuple[torch.Tensor, ...]:
    """``(P, U, C)`` ``(H, B, W)`` of the control variate: ``m_i = P_i + q U_i + q2 C_i`` is
    ``E[||alpha_i x_i - s||^2 | i not in I]`` for a uniform ``N``-subset ``I`` of the row's other visible tokens
    (``q = N/(t-1)``, ``q2 = N(N-1)/((t-1)(t-2))``)."""
    alpha = ld.alpha[:, rows_block, :W]
    ga = torch.einsum("hbj,hij->hbi", alpha, ld.gram[:, :W, :W])  # sum_j alpha_j G_ij
    base = alpha * ld.gdiag[:, None, :W]
    p = alpha * base
    b = (alpha * base).sum(-1, keepdim=True) - p
    s = (alpha * ga).sum(-1, keepdim=True)
    return p, b - 2 * alpha * (ga - base), s - 2 * alpha * ga + p - b


def _cv_weights(P, U, C, visible: torch.Tensor, N: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Weights ``w`` ``(H, B, W)`` (``1 / (2 sqrt(m_i))``, 0 where ``m_i <= 0`` or ``i`` is masked) and ``E[C]``
    ``(H, B)`` at ``N`` for rows with visible columns ``visible`` ``(B, W)``."""
    tf = visible.sum(-1).to(P.dtype).view(1, -1, 1)
    q = N / (tf - 1).clamp(min=1)
    q2 = N * (N - 1) / ((tf - 1) * (tf - 2)).clamp(min=1) if N >= 2 else torch.zeros((), dtype=P.dtype, device=P.device)
    m = P + q * U + q2 * C
    w = torch.where((m > 0) & visible.unsqueeze(0), 0.5 / m.clamp(min=1e-300).sqrt(), 0.0)
    return w, (w * m).sum(-1) * ((tf - N) / tf).squeeze(-1)


def _mc_scan_torch(ld: LayerData, n_min: int, n_max: int, rows, perm, control_variate: bool = False) -> tuple:
    """``(mean, stderr)`` ``(H, R, n)`` by tensor code in row blocks: the state ``K_i = alpha_i ||x_i||^2 - 2 s . x_i``
    and ``||s||^2`` of every (head, row, sample), one token added per ``N``; ``d~`` sums ``sqrt(alpha_i K_i + ||s||^2)``
    over the visible tokens not yet added."""
    H, L, K, n_rows = ld.H, ld.L, perm.shape[1], rows.numel()
    mean = torch.zeros(H, n_rows, n_max - n_min + 1, dtype=ld.dtype, device=ld.device)
    stderr = torch.zeros_like(mean)
    if n_rows == 0:
        return mean, stderr
    gram_rows = ld.gram.reshape(H * L, L)
    head_offset = (torch.arange(H, device=ld.device) * L).view(H, 1)
    last = ld.last.amax(0)
    per_block = max(1, _engine.settings.block_elems // max(1, H * K * (int(last[rows.to(ld.device)].max()) + 1)))
    for first in range(0, n_rows, per_block):
        rows_block = rows[first : first + per_block].to(ld.device)
        B = rows_block.numel()
        W = max(1, int(last[rows_block].max()) + 1)
        visible = ld.mask[0][rows_block, :W]  # (B, W)
        top = min(n_max, int(visible.sum(-1).max()) - 1)
        if top < n_min:
            continue
        # positions past a row's visible count only reach rows that are no longer valid: clamp them into the block
        order = perm[first : first + B, :, :top].to(ld.device).clamp(max=W - 1)  # (B, K, top)
        alpha = ld.alpha[:, rows_block, :W]  # (H, B, W)
        alpha_k = alpha.unsqueeze(2)  # (H, B, 1, W)
        state = (alpha * ld.gdiag[:, None, :W]).unsqueeze(2).expand(H, B, K, W).clone()
        s_sq = torch.zeros(H, B, K, 1, dtype=ld.dtype, device=ld.device)
        keep = visible.unsqueeze(1).expand(B, K, W).clone()  # visible and not yet added
        cv = _cv_terms(ld, rows_block, W) if control_variate else None
        for N in range(1, top + 1):
            j = order[:, :, N - 1]  # (B, K)
            a_j = alpha.gather(-1, j.view(1, B, K).expand(H, B, K)).unsqueeze(-1)  # (H, B, K, 1)
            k_j = state.gather(-1, j.view(1, B, K, 1).expand(H, B, K, 1))
            g_jj = ld.gdiag.gather(-1, j.view(1, B * K).expand(H, B * K)).view(H, B, K, 1)
            s_sq = s_sq + a_j * (2 * a_j * g_jj - k_j)
            g_j = gram_rows.index_select(0, (j.view(1, B * K) + head_offset).reshape(-1))[:, :W]
            state.addcmul_(g_j.view(H, B, K, W), a_j, value=-2.0)
            keep.scatter_(-1, j.unsqueeze(-1), False)
            if N < n_min:
                continue
            arg = torch.addcmul(s_sq, alpha_k, state).clamp_(min=0)
            d_tilde = torch.where(keep.unsqueeze(0), arg.sqrt(), 0.0).sum(-1)  # (H, B, K)
            if cv is not None:
                w, expect = _cv_weights(*cv, visible, N)
                c_k = torch.where(keep.unsqueeze(0), w.unsqueeze(2) * arg, 0.0).sum(-1)
                d_tilde = d_tilde - c_k + expect.unsqueeze(-1)
            mean[:, first : first + B, N - n_min] = d_tilde.mean(-1)
            stderr[:, first : first + B, N - n_min] = d_tilde.std(-1) / math.sqrt(K) if K > 1 else math.inf
    return mean, stderr
