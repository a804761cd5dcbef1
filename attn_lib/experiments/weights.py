r"""The paper's limits measured on any non-negative attention weights, row by row (chapter 7, "Beyond softmax"):
``d~``, ``E1`` and ``N_s/N`` (:func:`row_metrics`), on the rows :func:`row_sample` takes from one pass, and the exact
spectral norm of the softmax-type Jacobian (:func:`softmax_type_spectral_norm`).

**Non-softmax weights.** Every quantity is the appendix's definition with ``alpha`` replaced by the normaliser's
weights: ``I_N`` is the ``N`` largest weights (ties to the lower index), ``a_i = alpha_i x_i``, ``s = sum_{I_N} a_i``,
``d~ = sum_{i visible, not in I_N} ||a_i - s||``, and ``E1`` is the same formula in the weights. The derivations of
Theorem 1 do not use ``sum alpha = 1``, so ``d~ <= d_max`` and ``E1`` keep their meaning for weights that do not sum to
one (sigmoid, softmax1, softpick, SA-softmax); Lemma 1 and Corollary 3 are statements about the normalised family
of Eq. (3) and do not apply to them."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch

from .. import metrics as M
from .._validation import check_int, check_int_list, check_positive

__all__: list[str] = []  # helpers of compare_normalizers, reached as attn_lib.experiments.row_metrics etc.

#: Largest (H, R, C, L) block of :func:`row_metrics` (entries; 4M float64 = 32 MB per tensor).
BLOCK_ELEMS = 1 << 22


def row_sample(lengths: Sequence[int], rows_per_length: int) -> dict[int, np.ndarray]:
    """Rows (0-based query indices, row ``r`` sees ``t = r + 1`` tokens) sampled for each ``L`` of ``lengths`` (each
    ``>= 2``): ``L -> (R_L,)`` int array of ``rows_per_length`` (``>= 1``; at most ``ceil(L/2)``) rows with ``t``
    evenly spaced in ``(L/2, L]``, the last one ``t = L``."""
    n = check_int("rows_per_length", rows_per_length, low=1)
    out = {}
    for L in check_int_list("lengths", lengths, low=2):
        lo = L // 2  # t > L/2  <=>  r >= L // 2
        out[L] = np.unique(np.round(np.linspace(L - 1, lo, num=min(n, L - lo))).astype(np.int64))  # sorted
    return out


def _checked_rows(weights, values, mask) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`row_metrics`' inputs, checked: float64 ``(H, R, L)`` weights and ``(H, L, d)`` values, and the
    visibility broadcast to the weights' shape."""
    w = torch.as_tensor(weights).to(torch.float64)
    V = torch.as_tensor(values).to(torch.float64)
    if w.dim() != 3 or V.dim() != 3 or V.shape[0] != w.shape[0] or V.shape[1] != w.shape[2]:
        raise ValueError(
            f"weights must be (H, R, L) and values (H, L, d) with the same H and L "
            f"(got {tuple(w.shape)} and {tuple(V.shape)})"
        )
    m = torch.as_tensor(mask)
    try:
        fits = m.dim() in (2, 3) and len(torch.broadcast_shapes(m.shape, w.shape)) == 3
    except RuntimeError:
        fits = False
    if not fits:
        raise ValueError(f"mask must be (R, L) or (H, R, L) for weights of shape {tuple(w.shape)}")
    if m.dtype != torch.bool:  # a numeric mask must hold only 0 and 1 (0.5 is not 'visible')
        if m.is_complex() or not bool(((m == 0) | (m == 1)).all()):
            raise ValueError("mask must be boolean (True = visible) or hold only 0 and 1")
        m = m.to(torch.bool)
    vis = torch.broadcast_to(m, w.shape)
    if not bool(torch.isfinite(w).all()) or bool((w[vis] < 0).any()):
        raise ValueError("weights must be finite and non-negative")
    return w, V, vis


def row_metrics(
    weights, values, mask, n_values: Sequence[int], *, unit: bool = False, engine: str = "auto"
) -> dict[str, torch.Tensor]:
    r"""``d~``, ``E1`` and ``N_s/N`` of a batch of rows for several ``N``, for any non-negative weights.

    With ``a_i = alpha_i x_i``, ``I_N`` the ``N`` largest weights (ties to the lower index), ``s = sum_{I_N} a_i``,
    ``z = sum_i a_i`` and ``t`` visible tokens:

    .. math:: \tilde d = \sum_{i \notin I_N} \|a_i - s\|,\quad
              E_1 = \frac{t-N}{t}\sum_i \|(1+p)a_i - p z\|,\ p = \frac{N}{t-1},\quad
              \frac{N_s}{N} = \frac{|\{i\in I_N: \|a_i - s\| < \min_{j\notin I_N}\|a_j - s\|\}|}{N}

    (the sums over visible ``i``; Reading the paper, §Distance, §The expectation, §The separability definition).

    ``weights`` ``(H, R, L)``: non-negative, finite (0 where masked); ``values`` ``(H, L, d)``: the ``x_i`` of each
    head; ``mask`` ``(R, L)`` or ``(H, R, L)``: ``True`` = visible (numeric: only 0 and 1); ``n_values``: the
    ``N >= 1``; ``unit``: put every ``x_i`` on the unit sphere first (the separability convention, ``M = 1``).
    ``engine`` (``"auto"``, ``"numba"``, ``"torch"``): the row sums after the products ``s . x_i`` run in the
    accelerator's compiled ``row_metrics`` (:mod:`attn_lib.accel`; ``"auto"`` on CPU when registered, unless
    ``ATTN_LIB_ENGINE=torch``) or in float64 tensor code (:func:`_row_sums`, the definition): the same expressions, so
    ``N_s/N`` is identical and d~, E1 agree to rounding (``tests/test_beyond.py::test_row_metrics_engines_agree``).

    Returns a dict: ``d_tilde``, ``e1``, ``sep`` (``N_s/N``), ``valid`` (``t >= N + 1``), each ``(H, R, len(n_values))``
    float64 (``valid`` bool); invalid entries are 0."""
    w, V, vis = _checked_rows(weights, values, mask)
    ns = [check_int("n_values", n, low=1) for n in n_values]
    impl = M._engine.choose("row_metrics", engine, w.device.type == "cpu")  # the kernel takes any visibility
    if unit:
        V = V / torch.linalg.vector_norm(V, dim=-1, keepdim=True).clamp(min=1e-300)
    w = torch.where(vis, w, torch.zeros((), dtype=w.dtype))
    t = vis.sum(-1).to(torch.float64)  # (H, R)
    gdiag = (V * V).sum(-1)  # (H, L)
    a_sq = w * w * gdiag.unsqueeze(1)  # ||a_i||^2
    z = torch.einsum("hrl,hld->hrd", w, V)
    zx = torch.einsum("hld,hrd->hrl", V, z)  # z . x_i
    z_sq = (z * z).sum(-1, keepdim=True)
    rank = M.layer.top_rank(w, vis)
    H, R, L = w.shape
    out = {k: torch.zeros(H, R, len(ns), dtype=torch.float64) for k in ("d_tilde", "e1", "sep")}
    out["valid"] = torch.zeros(H, R, len(ns), dtype=torch.bool)
    # every N of a block at once, on (H, R, C, L) tensors (a block holds at most BLOCK_ELEMS entries)
    per_block = max(1, BLOCK_ELEMS // max(1, H * R * L))
    wv, visv, a_sq4, wzx = w.unsqueeze(2), vis.unsqueeze(2), a_sq.unsqueeze(2), (w * zx).unsqueeze(2)
    t3, z_sq4 = t.unsqueeze(-1), z_sq.unsqueeze(-1)
    for c0 in range(0, len(ns), per_block):
        nb = ns[c0 : c0 + per_block]
        n_i = torch.as_tensor(nb).view(1, 1, -1, 1)
        n_f = torch.as_tensor(nb, dtype=torch.float64)  # (C,)
        top = (rank.unsqueeze(2) < n_i) & visv  # (H, R, C, L): the N largest weights of each row
        s = torch.einsum("hrcl,hld->hrcd", wv * top, V)
        sx = torch.einsum("hld,hrcd->hrcl", V, s)
        s_sq = (s * s).sum(-1, keepdim=True)
        if impl is not None:
            d_tilde, e1, sep = impl(vis, rank, a_sq, w, sx, wzx[:, :, 0], z_sq[..., 0], s_sq[..., 0], t, nb)
        else:
            d_tilde, e1, sep = _row_sums(a_sq4, wv, visv, top, sx, s_sq, wzx, z_sq4, t3, n_f)
        valid = t3 >= n_f + 1
        sl = slice(c0, c0 + len(nb))
        for k, x in M.layer.zero_invalid(valid, d_tilde=d_tilde, e1=e1, sep=sep).items():
            out[k][..., sl] = x
        out["valid"][..., sl] = valid
    return out


def _row_sums(a_sq4, wv, visv, top, sx, s_sq, wzx, z_sq4, t3, n_f) -> tuple[torch.Tensor, ...]:
    """d~, E1 and ``N_s/N`` ``(H, R, C)`` of :func:`row_metrics` from the products, in float64 tensor code."""
    zero = torch.zeros((), dtype=torch.float64)
    excess = a_sq4 - 2 * wv * sx  # ||a_i - s||^2 - ||s||^2, the ball test's operand (M.separability.separation)
    dist = (excess + s_sq).clamp(min=0).sqrt()  # ||a_i - s||
    rest = visv & ~top
    d_tilde = torch.where(rest, dist, zero).sum(-1)  # (H, R, C)
    pp = (n_f / (t3 - 1).clamp(min=1)).unsqueeze(-1)  # p = N / (t - 1)
    e1_terms = ((1 + pp) ** 2 * a_sq4 - 2 * pp * (1 + pp) * wzx + pp**2 * z_sq4).clamp(min=0).sqrt()
    e1 = (t3 - n_f) / t3.clamp(min=1) * torch.where(visv, e1_terms, zero).sum(-1)
    least = torch.where(rest, excess, torch.full((), math.inf, dtype=dist.dtype)).amin(-1, keepdim=True)
    sep = ((excess < least) & top).sum(-1).to(torch.float64) / n_f
    return d_tilde, e1, sep


#: How far from 1 the row sums of :func:`softmax_type_spectral_norm`'s weights may be (float32 rows of 1e5 tokens: 1e-5)
_DIST_TOL = 1e-4


def softmax_type_spectral_norm(weights, temperature: float = 1.0, *, iterations: int = 100) -> torch.Tensor:
    r"""Spectral norm of :math:`J = (\mathrm{diag}\,\alpha - \alpha\alpha^\top)/T`, one value per row, exactly.

    This is the Jacobian of softmax and (off ties) of top-k (:func:`attn_lib.jacobian.softmax_jacobian`,
    :func:`attn_lib.jacobian.jacobian`). ``diag(alpha) - alpha alpha^T`` is positive semi-definite and its largest
    eigenvalue ``lambda`` is the root in ``[alpha_(2), alpha_(1)]`` (the two largest weights) of the secular equation
    :math:`\sum_i \alpha_i^2/(\alpha_i - \lambda) = 1`, found by float64 bisection in ``O(L)`` per row and step.

    ``weights`` ``(..., L)``: softmax or top-k weights (non-negative, each row summing to one within 1e-4, or all zero
    for a fully masked row; else a ``ValueError``: the formula holds only for a distribution); ``T > 0``;
    ``iterations``: most bisection steps (100 reach float64 resolution; it stops once every interval is two adjacent
    floats). Returns ``lambda / T``, ``(...)`` float64."""
    T = check_positive("temperature", temperature)
    iterations = check_int("iterations", iterations, low=1)
    # float64 from the start: torch.as_tensor of a list of Python floats would round them to float32 first
    kind = str(getattr(weights, "dtype", ""))
    if "bool" in kind or "complex" in kind:
        raise ValueError(f"weights must be real numbers (got dtype {kind})")
    try:
        is_tensor = isinstance(weights, torch.Tensor)
        a = weights.to(torch.float64) if is_tensor else torch.as_tensor(np.asarray(weights, dtype=np.float64))
    except (TypeError, ValueError, RuntimeError):
        what = type(weights).__name__
        raise ValueError(f"weights must be a real tensor or array of shape (..., L) (got {what})") from None
    if a.dim() < 1 or a.shape[-1] == 0 or not bool(torch.isfinite(a).all()) or bool((a < 0).any()):
        raise ValueError("weights must be a finite, non-negative tensor of shape (..., L) with L >= 1")
    sums = a.sum(-1)
    off = ~((sums - 1).abs() <= _DIST_TOL) & ~(sums == 0)
    if bool(off.any()):
        bad = float(sums[off].flatten()[0])
        raise ValueError(
            "weights must form a distribution: every row must sum to 1 (within "
            f"{_DIST_TOL:g}), or be all zero for a fully masked row (a row sums to {bad:.6g}); the formula holds only "
            "for softmax and top-k weights"
        )
    if a.shape[-1] == 1:
        return torch.zeros(a.shape[:-1], dtype=torch.float64)
    top2 = torch.topk(a, 2, dim=-1).values
    lo, hi = top2[..., 1].clone(), top2[..., 0].clone()
    a2 = a * a
    for i in range(iterations):
        mid = 0.5 * (lo + hi)
        if i % 8 == 7 and not bool(((mid > lo) & (mid < hi)).any()):
            break  # every interval is down to adjacent floats: more steps cannot move a midpoint
        diff = a - mid.unsqueeze(-1)
        # terms with alpha_i = lambda cannot occur strictly inside (lo, hi) except at ties, where hi - lo = 0
        safe = torch.where(diff == 0, torch.full_like(diff, math.inf), diff)
        f = (a2 / safe).sum(-1) - 1.0
        up = f > 0
        hi = torch.where(up, mid, hi)
        lo = torch.where(up, lo, mid)
    return 0.5 * (lo + hi) / T
