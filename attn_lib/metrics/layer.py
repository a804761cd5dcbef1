"""One layer (:class:`LayerData`, float64 by default) and the input helpers every metric shares."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

from .. import _rows
from .. import normalizers as _nz
from .._validation import check_int, check_positive
from . import _engine
from ._engine import F64, choose, coarse_threads, large_ops

__all__ = ["LayerData"]


def as_real_tensor(x: Any, name: str) -> torch.Tensor:
    """``x`` as a detached tensor of real numbers (any real dtype); a ``ValueError`` naming ``name`` otherwise."""
    return _rows.real_tensor(x, name).detach()


def bool_mask(mask: Any, device) -> torch.Tensor:
    """``mask`` as a bool tensor on ``device`` (True = visible), leading singleton axes beyond three dropped."""
    m = mask if isinstance(mask, torch.Tensor) else torch.as_tensor(np.asarray(mask))
    if m.dtype != torch.bool:
        raise ValueError(f"mask must be a bool tensor with True = visible (got dtype {m.dtype})")
    m = m.to(device)
    while m.dim() > 3 and m.shape[0] == 1:
        m = m[0]
    return m


def heads(x: torch.Tensor) -> torch.Tensor:
    """``x`` with a leading head axis added if it is 2-d (a single head is ``H = 1``)."""
    return x.unsqueeze(0) if x.dim() == 2 else x


def check_dtype(dtype: Any) -> torch.dtype:
    """A floating-point torch dtype (float64 by default; float32 where the device has no float64, as MPS)."""
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise ValueError(f"dtype must be a floating-point torch dtype such as torch.float64 (got {dtype!r})")
    return dtype


def check_n(N: Any, name: str = "N") -> int:
    """A top-``N`` size: an integer ``>= 1``."""
    return check_int(name, N, low=1)


def check_n_range(L: int, n_min: Any, n_max: Any) -> tuple[int, int]:
    """A scan's range: integers ``1 <= n_min <= n_max <= L - 1`` (the largest valid ``N``; both 1 when ``L = 1``)."""
    n_min = check_int("n_min", check_n(n_min, "n_min"), low=1, high=max(1, L - 1))
    return n_min, check_int("n_max", n_max, low=n_min, high=max(n_min, L - 1))


def check_rows(rows: Any, n_rows: int, *, allow_empty: bool = True) -> torch.Tensor:
    """The row indices ``rows`` (integers in ``[0, n_rows - 1]``, integral floats such as ``2.0`` included; none only
    if ``allow_empty``) as an ascending ``(R,)`` int64 CPU tensor; ``ValueError`` naming the allowed range otherwise."""
    need = f"rows must be {'a' if allow_empty else 'a non-empty'} list of integer row indices in [0, {n_rows - 1}]"
    try:
        arr = np.asarray(rows.detach().cpu() if isinstance(rows, torch.Tensor) else rows).reshape(-1)
    except (TypeError, ValueError):
        raise ValueError(f"{need} (got {rows!r})") from None
    if arr.size == 0:
        if not allow_empty:
            raise ValueError(f"{need} (got none)")
        return torch.zeros(0, dtype=torch.long)
    if arr.dtype.kind not in "iuf":  # bool ('b'), strings, objects
        raise ValueError(f"{need} (got {'a bool mask' if arr.dtype.kind == 'b' else f'dtype {arr.dtype}'})")
    if arr.dtype.kind == "f":
        fractional = ~np.isfinite(arr) | (arr != np.floor(arr))
        if fractional.any():
            raise ValueError(f"{need} (got {arr[fractional][0].item()!r}, not an integer)")
    outside = (arr < 0) | (arr > n_rows - 1)
    if outside.any():
        raise ValueError(f"{need} (got {arr[outside][0].item()!r})")
    return torch.as_tensor(arr.astype(np.int64)).sort().values


class LayerData:
    """One layer's attention weights, value vectors and mask in ``dtype``, and what several metrics need, computed
    once: the Gram matrix, the visible counts, the products ``z . x_i`` and the top-``n`` order of every row.

    Build with ``LayerData(weights, values, mask=None)`` or :meth:`from_logits`: ``weights`` ``(H, L, L)`` (finite
    and non-negative where visible, masked entries set to 0), ``values`` ``(H, L, d)`` (finite), a single head (2-d
    input) promoted to ``H = 1``; ``mask`` ``(L, L)``, ``(1, L, L)`` or ``(H, L, L)``; ``dtype`` float64 (the
    accelerator runs only on it) or float32 (e.g. on MPS; agrees to about 1e-4 relative). Memory: a few ``H L^2``
    arrays (about 75 MB each in float64 for 9 heads at L = 1024).

    Attributes: ``alpha`` ``(H, L, L)`` (0 where masked), ``values`` ``(H, L, d)``, ``mask`` ``(Hm, L, L)`` (``Hm``
    1 or ``H``), ``t`` and ``last`` ``(Hm, L)`` (visible count and last visible column, -1 if none), ``prefix``
    (every row sees a prefix ``0..t_r-1``, as with causal masks), :attr:`gram` and :attr:`gdiag`.
    """

    def __init__(self, weights: Any, values: Any, mask: Any = None, *, dtype=F64, _trusted: bool = False):
        # _trusted (from_logits only): weights are a softmax that is finite everywhere and exactly 0 where masked
        dtype = check_dtype(dtype)
        alpha = heads(as_real_tensor(weights, "weights"))
        vals = heads(as_real_tensor(values, "values"))
        if alpha.dim() != 3 or alpha.shape[-1] != alpha.shape[-2]:
            raise ValueError(f"weights must have shape (H, L, L) or (L, L) (got {tuple(alpha.shape)})")
        if vals.dim() != 3:
            raise ValueError(f"values must have shape (H, L, d) or (L, d) (got {tuple(vals.shape)})")
        H, L, _ = alpha.shape
        if vals.shape[0] != H or vals.shape[1] != L:
            raise ValueError(f"values must have shape ({H}, {L}, d) to match weights (got {tuple(vals.shape)})")
        if L < 1 or vals.shape[2] < 1:
            raise ValueError("weights and values must be non-empty")
        alpha, vals = alpha.to(dtype), vals.to(dtype)
        if not bool(torch.isfinite(vals).all()):
            raise ValueError("values must be finite")
        if mask is None:
            visible = torch.ones(L, L, dtype=torch.bool, device=alpha.device).tril_().unsqueeze(0)
        else:
            visible = heads(bool_mask(mask, alpha.device))
            if visible.dim() != 3 or visible.shape[-2:] != (L, L) or visible.shape[0] not in (1, H):
                raise ValueError(f"mask must broadcast to ({H}, {L}, {L}) (got {tuple(visible.shape)})")
        if not _trusted:
            alpha = torch.where(visible, alpha, 0.0)
            if not bool(torch.isfinite(alpha).all()) or bool((alpha < 0).any()):
                raise ValueError("weights must be finite and non-negative at visible positions")
        self.alpha, self.values, self.mask = alpha, vals, visible
        self.H, self.L, self.d = H, L, vals.shape[2]
        self.device, self.dtype = alpha.device, dtype
        self.t = visible.sum(-1)
        cols = torch.arange(L, device=alpha.device)
        self.last = torch.where(visible, cols, -1).amax(-1)
        self.prefix = bool((visible == (cols.view(1, 1, L) <= self.last.unsqueeze(-1))).all())
        self._gram = self._zdot = self._order = self._cummax = None

    @classmethod
    @coarse_threads
    def from_logits(
        cls, logits: Any, values: Any, mask: Any = None, temperature: float = 1.0, *, dtype=F64
    ) -> LayerData:
        """A layer whose weights are the softmax (in ``dtype``) of ``logits / temperature`` over the visible positions;
        ``-inf`` in ``logits`` ``(H, L, L)`` or ``(L, L)`` marks a masked position, ``mask`` masks further ones."""
        T = check_positive("temperature", temperature)
        x = heads(as_real_tensor(logits, "logits").to(check_dtype(dtype)))
        visible = x != -math.inf
        if mask is not None:
            visible = visible & bool_mask(mask, x.device)
        per_head = visible.shape[0] > 1 and not bool((visible == visible[:1]).all())
        layer_mask = visible if per_head else visible[:1]
        if bool(visible.any(-1).all()):
            # one fused stable softmax; masked positions are -inf and get weight exactly 0. A NaN or +inf logit at a
            # visible position (or overflow of logits / T) makes its row NaN: then the checked path below says so.
            masked = x if mask is None else x.masked_fill(~visible, -math.inf)
            alpha = torch.softmax(masked if T == 1.0 else masked / T, dim=-1)
            if bool(torch.isfinite(alpha).all()):
                return cls(alpha, values, mask=layer_mask, dtype=dtype, _trusted=True)
        if not bool(torch.isfinite(x[visible]).all()):
            raise ValueError("logits must be finite at visible positions (-inf marks a masked position)")
        alpha = _nz.softmax(torch.where(visible, x, 0.0), T, -1, visible)
        return cls(alpha, values, mask=layer_mask, dtype=dtype)

    @property
    def gram(self) -> torch.Tensor:
        """Gram matrix ``(H, L, L)``: ``G[h, i, j] = x_i . x_j`` (computed on first use)."""
        if self._gram is None:
            with large_ops():  # one product over the whole layer: worth the workers' threads
                self._gram = self.values @ self.values.transpose(1, 2)
        return self._gram

    @property
    def gdiag(self) -> torch.Tensor:
        """Squared norms ``||x_i||^2`` ``(H, L)``, the diagonal of :attr:`gram`."""
        return torch.diagonal(self.gram, dim1=1, dim2=2)

    @property
    def kernels_apply(self) -> bool:
        """Whether an accelerated implementation may run on this layer: CPU float64 tensors and prefix masks."""
        return self.device.type == "cpu" and self.dtype == F64 and self.prefix

    def zdot(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(z_r . x_i, ||z_r||^2)`` ``(H, L, L)``, ``(H, L)`` of each row's output ``z_r = sum_i a_i`` (cached)."""
        if self._zdot is None:
            with large_ops():  # whole-layer products
                z = self.alpha @ self.values  # (H, L, d)
                z_dot_x = z @ self.values.transpose(1, 2)
            self._zdot = (z_dot_x, (z * z).sum(-1))
        return self._zdot

    def order(self, n: int) -> torch.Tensor:
        """The columns ``(H, L, min(n, L))`` of the ``n`` largest visible weights of every row, largest first, ties to
        the lower index (cached); past a row's visible count, masked positions (never used by a valid row)."""
        n = min(check_n(n, "n"), self.L)
        if self._order is None or self._order.shape[-1] < n:
            n_keep = max(n, min(self.L, 8))
            impl = choose("top_n_order", "auto", self.kernels_apply)
            if impl is not None:  # an accelerated sort, as top_n_order(alpha, n_keep, mask)
                # selecting more columns costs little: keep enough for every later request of the experiments
                if _engine.settings.order_prefetch_div:
                    n_keep = max(n_keep, self.L // _engine.settings.order_prefetch_div)
                self._order = impl(self.alpha, torch.broadcast_to(self.t, (self.H, self.L)), n_keep)
            else:
                self._order = top_n_order(self.alpha, n_keep, self.mask)
        return self._order[..., :n]

    def top_block(self, order: torch.Tensor, rows_block: torch.Tensor, width: int) -> tuple:
        """For consecutive rows ``rows_block`` that see at most ``width`` columns: ``rows`` (their slice), ``alpha``,
        ``visible``, ``top`` (their ``order`` clamped into the block; past a row's count: invalid rows only), ``s`` =
        sum of the top-N ``alpha_j x_j`` ``(H, B, d)`` (one BLAS product) and ``s_dot_x``."""
        rows = slice(int(rows_block[0]), int(rows_block[-1]) + 1)
        alpha, values = self.alpha[:, rows, :width], self.values[:, :width]
        top = order[:, rows].clamp(max=width - 1)
        s = torch.bmm(torch.zeros_like(alpha).scatter_(-1, top, alpha.gather(-1, top)), values)
        visible = torch.broadcast_to(self.mask[:, rows, :width], alpha.shape)
        return rows, alpha, visible, top, s, torch.bmm(s, values.transpose(1, 2))

    def blocks(
        self, rows: torch.Tensor | None = None, per_row: int = 1, elems: int | None = None
    ) -> Iterator[tuple[torch.Tensor, int]]:
        """Split the sorted row indices ``rows`` (default all) into blocks ``(rows_block, width)`` for the torch code,
        ``width`` the columns the widest row of the block sees, ``H x rows x width`` at most ``elems`` (default
        ``settings.block_elems``) divided by ``per_row``, the work arrays per element."""
        rows = torch.arange(self.L, device=self.device) if rows is None else rows
        budget = max(1, (_engine.settings.block_elems if elems is None else elems) // max(1, self.H * per_row))
        for start, stop, width in row_blocks(self.last.amax(0)[rows].tolist(), budget):
            yield rows[start:stop], width


def row_blocks(last: list[int], budget: int) -> Iterator[tuple[int, int, int]]:
    """Consecutive blocks ``(start, stop, width)`` of the rows whose last visible columns are ``last`` (-1: none): each
    grows while its rows x (widest row + 1) stay within ``budget`` (at least one row); ``width``: widest row + 1."""
    widest = list(itertools.accumulate(last, max))
    start = 0
    while start < len(last):
        stop = start + 1
        while stop < len(last) and (stop + 1 - start) * (widest[stop] + 1) <= budget:
            stop += 1
        yield start, stop, max(1, max(last[start:stop]) + 1)
        start = stop


def zero_invalid(valid: torch.Tensor, **fields: torch.Tensor | None) -> dict:
    """``fields`` with 0 where ``valid`` is ``False``, every metric's convention (``None`` stays ``None``)."""
    return {k: None if x is None else torch.where(valid, x, 0) for k, x in fields.items()}


def top_rank(alpha: torch.Tensor, visible: torch.Tensor) -> torch.Tensor:
    """Rank (int64) of each entry of the non-negative ``alpha`` in its row by weight, descending, ties to the lower
    index, invisible entries last: the inverse permutation of the top-``N`` order (rank ``< N``: selected)."""
    order = torch.sort(torch.where(visible, alpha, -1.0), dim=-1, descending=True, stable=True).indices
    ranks = torch.arange(order.shape[-1], device=order.device).expand_as(order)
    return torch.empty_like(order).scatter_(-1, order, ranks)  # a scatter, not a second sort


def as_layer(layer_or_weights: Any, values: Any = None, mask: Any = None) -> LayerData:
    """The :class:`LayerData` a metric works on: ``layer_or_weights`` itself if it is one (then ``values`` and
    ``mask`` must be ``None``), else a new float64 layer of raw weights, the required ``values`` and ``mask``."""
    if isinstance(layer_or_weights, LayerData):
        if values is not None or mask is not None:
            raise ValueError("values and mask must be None when a LayerData is given")
        return layer_or_weights
    if values is None:
        raise ValueError("values must be given with raw weights")
    return LayerData(layer_or_weights, values, mask)


def top_n_order(alpha: torch.Tensor, n: int, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Top-``n`` indices ``(..., min(n, L))`` along the last axis of ``alpha``, largest first, ties to the lower index
    (as :func:`attn_lib.theory.top_n_indices`); masked positions (``mask`` ``False``) rank below every visible one,
    lowest index first. The definition of the order (the accelerated ``"top_n_order"`` is held to it): ``torch.topk``
    with ties repaired by a stable re-sort inside the selection and a full stable sort of rows tied at its boundary."""
    L = alpha.shape[-1]
    n = min(n, L)
    key = alpha if alpha.is_floating_point() else alpha.to(F64)
    cols = torch.arange(L, device=alpha.device, dtype=key.dtype)
    if mask is not None:
        key = torch.where(mask, key, -1.0 - cols / (L + 1))  # distinct, decreasing with index
    vals, idx = torch.topk(key, n, dim=-1, largest=True, sorted=True)
    # stable order inside the selection: sort by index, then stable by value (descending)
    idx, perm = torch.sort(idx, dim=-1)
    vals = vals.gather(-1, perm)
    vals, perm = torch.sort(vals, dim=-1, descending=True, stable=True)
    idx = idx.gather(-1, perm)
    if n < L:
        kth = vals[..., -1:]
        cut_tie = (key == kth).sum(-1) > (vals == kth).sum(-1)  # more ties of the n-th weight than selected
        if bool(cut_tie.any()):
            idx[cut_tie] = torch.sort(key[cut_tie], dim=-1, descending=True, stable=True).indices[..., :n]
    return idx


def masked_mean(x: torch.Tensor | np.ndarray, valid: Any, dim: int = -1) -> tuple[torch.Tensor, torch.Tensor]:
    """``(mean, count)``: the mean of ``x`` over ``dim`` counting only the ``valid`` entries (bool, broadcastable
    to ``x``; 0 where ``count``, the number of valid entries, is 0), each of ``x``'s shape without ``dim``."""
    xt = torch.as_tensor(x)
    vt = torch.broadcast_to(torch.as_tensor(valid).to(torch.bool), xt.shape)
    count = vt.sum(dim)
    return torch.where(vt, xt, torch.zeros((), dtype=xt.dtype)).sum(dim) / count.clamp(min=1), count
