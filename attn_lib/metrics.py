r"""Vectorised per-row metrics of the paper, batched over heads and causal query rows (paper-notes §2-§4).

:mod:`attn_lib.theory` holds the readable one-row reference definitions; this module computes the same
quantities for a whole layer at once -- every head ``h`` and every query row ``r`` of an attention matrix --
without a Python loop over tokens. Everything is float64.

Inputs (one layer):

* ``weights`` ``(H, L, L)`` -- attention weights, row ``r`` is the query; or ``logits`` with a ``mask`` (softmax
  with temperature ``T`` is then taken in float64, paper-notes §5e);
* ``values`` ``(H, L, d)`` -- the vectors :math:`x_i` (per-head value vectors, §5c);
* ``mask`` -- bool, ``True`` = visible, broadcastable to ``(H, L, L)``; default: causal (row ``r`` sees ``0..r``).

Row ``r`` uses only its ``t_r`` visible tokens (``L_t = t``, §5d). A top-``N`` metric is defined for a row only if
``t_r >= N + 1``; every function returns a ``valid`` mask, and entries of rows that do not qualify are ``0.0``
(never NaN). Aggregate with :func:`masked_mean`.

Building blocks, all from the per-head Gram matrix :math:`G = VV^\top` (:class:`LayerData` computes it once):

.. math:: \|\alpha_ix_i-s\|^2=\alpha_i^2G_{ii}-2\alpha_i\,c_i+\|s\|^2,\quad c_i=s\cdot x_i=\sum_{j\in I_N}\alpha_jG_{ji},

and for E1, :math:`\|(1+p)a_i-pz\|^2=(1+p)^2\alpha_i^2G_{ii}-2p(1+p)\alpha_i(z\cdot x_i)+p^2\|z\|^2`.

Public functions: :class:`LayerData`, :func:`distance_metrics` (d~, d_max, E1 + Jensen gap, E2 at one ``N``),
:func:`topn_scan` (the same for every ``N`` in a range, incrementally), :func:`naive_scan` (non-incremental
reference of the scan), :func:`expected_distance_mc` (Monte-Carlo E[d~]), :func:`separability_metrics`
(``N_s/N`` and Theorem 2's bounds), :func:`sensitivity_rows` (``g(T, eps)`` per row), :func:`masked_mean`.
"""
from __future__ import annotations

import contextlib
import functools
import math
import os
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import numpy as np
import torch

from . import _kernels as _kern
from . import jacobian as _jac
from . import normalizers as _nz
from ._validation import check_choice, check_int, check_positive

__all__ = [
    "LayerData",
    "DistanceRows",
    "ScanRows",
    "MCRows",
    "SeparabilityRows",
    "distance_metrics",
    "topn_scan",
    "naive_scan",
    "expected_distance_mc",
    "separability_metrics",
    "sensitivity_rows",
    "masked_mean",
    "top_n_order",
    "block_parallel",
]

F64 = torch.float64
#: target number of float64 elements of one (H, rows, W) work block (~4 MB): keeps memory bounded and the
#: working set in cache.
BLOCK_ELEMS = 1 << 19
#: what ``engine="auto"`` means: ``"auto"`` (numba on CPU with prefix masks, torch elsewhere), or ``"torch"`` /
#: ``"numba"`` everywhere they apply. Set by the environment variable ``ATTN_LIB_ENGINE`` (e.g. ``torch`` for float64
#: square roots in the critical-N scan), or assign ``attn_lib.metrics.DEFAULT_ENGINE``.
DEFAULT_ENGINE = os.environ.get("ATTN_LIB_ENGINE", "auto").strip().lower() or "auto"
#: when the compiled top-N order runs, it keeps at least ``L // ORDER_PREFETCH_DIV`` columns per row: the
#: critical-N scan goes up to ``N = L/4``, so one sort per layer serves every experiment (0 disables prefetching).
ORDER_PREFETCH_DIV = 4
#: largest N for which the compiled distance kernel also computes d_1 of Theorem 1(a) (cost N t per row); above it
#: the running-maximum kernel :func:`attn_lib._kernels.d1_cummax` is cheaper.
KERNEL_D1_MAX_N = 64
#: block size of the critical-N scan, whose ~6 work arrays are revisited for every N: small enough to stay in
#: the L2 cache.
SCAN_BLOCK_ELEMS = 1 << 19


# ----------------------------------------------------------------------------------------------------------
# input handling
# ----------------------------------------------------------------------------------------------------------
def _tensor(x: Any, name: str) -> torch.Tensor:
    if isinstance(x, torch.Tensor):
        t = x
    else:
        try:
            t = torch.as_tensor(np.asarray(x))
        except (TypeError, ValueError):
            raise ValueError(f"{name} must be a tensor or array of real numbers") from None
    if t.dtype == torch.bool or t.is_complex():
        raise ValueError(f"{name} must hold real numbers (got dtype {t.dtype})")
    return t.detach()


def _causal(L: int, device) -> torch.Tensor:
    return torch.ones(L, L, dtype=torch.bool, device=device).tril_()


def _check_N(N: Any, name: str = "N") -> int:
    return check_int(name, N, low=1)


def _check_rows(rows: Any, n_rows: int, *, allow_empty: bool = True) -> torch.Tensor:
    """Row indices as a sorted CPU int64 tensor ``(R,)``: integers (an integral float such as ``2.0`` counts, as in
    :func:`attn_lib._validation.check_int`) in ``[0, n_rows - 1]``. A fractional, negative or too large index, a
    bool mask or a non-number is a ``ValueError`` that names ``rows`` and the allowed range."""
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
    """One layer's attention weights, value vectors and mask in float64, with cached derived quantities.

    Build with ``LayerData(weights, values, mask=None)`` or ``LayerData.from_logits(logits, values, mask=None,
    temperature=1.0)``. Shapes: weights/logits ``(H, L, L)`` or ``(L, L)``; values ``(H, L, d)`` or ``(L, d)``
    (a single head is promoted to ``H = 1``). Masks broadcast to ``(H, L, L)``; default causal.

    Cached: :attr:`gram` ``(H, L, L)``, :attr:`gdiag` ``(H, L)``, :attr:`t` visible counts ``(Hm, L)``,
    ``z . x_i`` (:meth:`zdot`), and the top-``n`` order (:meth:`order`). Memory: a few ``H L^2`` float64 arrays
    (about 75 MB each for 9 heads at L = 1024); one layer at a time.
    """

    def __init__(self, weights: Any, values: Any, mask: Any = None, *, _trusted: bool = False):
        # _trusted (from_logits only): weights are a softmax that is finite everywhere and exactly 0 where masked
        a = _tensor(weights, "weights")
        v = _tensor(values, "values")
        if a.dim() == 2:
            a = a.unsqueeze(0)
        if v.dim() == 2:
            v = v.unsqueeze(0)
        if a.dim() != 3 or a.shape[-1] != a.shape[-2]:
            raise ValueError(f"weights must have shape (H, L, L) or (L, L) (got {tuple(a.shape)})")
        if v.dim() != 3:
            raise ValueError(f"values must have shape (H, L, d) or (L, d) (got {tuple(v.shape)})")
        H, L, _ = a.shape
        if v.shape[0] != H or v.shape[1] != L:
            raise ValueError(f"values must have shape ({H}, {L}, d) to match weights (got {tuple(v.shape)})")
        if L < 1 or v.shape[2] < 1:
            raise ValueError("weights and values must be non-empty")
        a = a.to(F64)
        v = v.to(F64)
        if not bool(torch.isfinite(v).all()):
            raise ValueError("values must be finite")
        if mask is None:
            m = _causal(L, a.device).unsqueeze(0)
        else:
            m = _bool_mask(mask, a.device)
            if m.dim() == 2:
                m = m.unsqueeze(0)
            if m.dim() != 3 or m.shape[-2:] != (L, L) or m.shape[0] not in (1, H):
                raise ValueError(f"mask must broadcast to ({H}, {L}, {L}) (got {tuple(m.shape)})")
        if not _trusted:
            a = torch.where(m, a, torch.zeros((), dtype=F64, device=a.device))
            if not bool(torch.isfinite(a).all()) or bool((a < 0).any()):
                raise ValueError("weights must be finite and non-negative at visible positions")
        self.alpha = a
        self.values = v
        self.mask = m
        self.H, self.L, self.d = H, L, v.shape[2]
        self.device = a.device
        self.t = m.sum(-1)  # (Hm, L) visible counts
        cols = torch.arange(L, device=a.device)
        self.last = torch.where(m, cols, -1).amax(-1)  # (Hm, L) last visible column
        self.prefix = bool((m == (cols.view(1, 1, L) <= self.last.unsqueeze(-1))).all())
        self._gram = None
        self._zdot = None
        self._order: torch.Tensor | None = None
        self._cummax = None

    @classmethod
    def from_logits(cls, logits: Any, values: Any, mask: Any = None, temperature: float = 1.0) -> "LayerData":
        """Weights = float64 softmax of ``logits / temperature`` over visible positions (``-inf`` = masked)."""
        T = check_positive("temperature", temperature)
        x = _tensor(logits, "logits").to(F64)
        if x.dim() == 2:
            x = x.unsqueeze(0)
        vis = x != -math.inf
        if mask is not None:
            vis = vis & _bool_mask(mask, x.device)
        m_eff = vis if vis.shape[0] > 1 and not bool((vis == vis[:1]).all()) else vis[:1]
        if bool(vis.any(-1).all()):
            # every row has a visible position: one fused stable softmax (subtracts the row max, as
            # normalizers.softmax does); masked positions are -inf and get weight exactly 0. A NaN or +inf logit at a
            # visible position (or overflow of logits / T) makes its row NaN: then the checked path below says so.
            xm = x if mask is None else x.masked_fill(~vis, -math.inf)
            a = torch.softmax(xm if T == 1.0 else xm / T, dim=-1)
            if bool(torch.isfinite(a).all()):
                return cls(a, values, mask=m_eff, _trusted=True)
        if not bool(torch.isfinite(x[vis]).all()):
            raise ValueError("logits must be finite at visible positions (-inf marks a masked position)")
        a = _nz.softmax(torch.where(vis, x, torch.zeros((), dtype=F64, device=x.device)), T, dim=-1, mask=vis)
        return cls(a, values, mask=m_eff)

    # -- cached pieces ------------------------------------------------------------------------------------
    @property
    def gram(self) -> torch.Tensor:
        if self._gram is None:
            self._gram = self.values @ self.values.transpose(1, 2)
        return self._gram

    @property
    def gdiag(self) -> torch.Tensor:
        return torch.diagonal(self.gram, dim1=1, dim2=2)

    def zdot(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(z . x_i)`` of shape ``(H, L, L)`` (row r, column i) and ``||z||^2`` ``(H, L)``; ``z = sum_i a_i``."""
        if self._zdot is None:
            z = self.alpha @ self.values  # (H, L, d)
            zv = z @ self.values.transpose(1, 2)  # (H, L, L): z_r . x_i
            zz = (z * z).sum(-1)
            self._zdot = (zv, zz)
        return self._zdot

    def order(self, n: int) -> torch.Tensor:
        """Indices ``(H, L, n)`` of the ``n`` largest visible weights per row, largest first, ties -> lower index.

        Positions past a row's visible count are filled by masked positions (lowest index first); they are never
        used by a valid row.
        """
        n = min(_check_N(n, "n"), self.L)
        if self._order is None or self._order.shape[-1] < n:
            nn = max(n, min(self.L, 8))
            if _engine("auto", _kernel_ok(self.device, self.prefix), ""):  # compiled sort
                # selecting more columns costs little: keep enough for every later request of the experiments
                if ORDER_PREFETCH_DIV:
                    nn = max(nn, self.L // ORDER_PREFETCH_DIV)
                t = torch.broadcast_to(self.t, (self.H, self.L))
                self._order = torch.from_numpy(_kern.order_prefix(self.alpha.numpy(), t.numpy(), nn,
                                                                  threads=_kthreads()))
            else:
                self._order = top_n_order(self.alpha, nn, self.mask)
        return self._order[..., :n]

    def blocks(self, rows: torch.Tensor | None = None, per_row: int = 1, elems: int | None = None):
        """Yield ``(rows_block, W)``: row indices (sorted) and the number of columns they can see.

        A block holds about ``elems`` (default :data:`BLOCK_ELEMS`) ``H x rows x W`` elements per array, ``W``
        being the widest row of the block (so causal blocks are near-triangular and stay in cache).
        """
        if elems is None:
            elems = BLOCK_ELEMS
        if rows is None:
            rows = torch.arange(self.L, device=self.device)
        lastu = self.last.amax(0)  # (L,)
        R = rows.numel()
        if R == 0:
            return
        # widest row so far (prefix max): a block [i, j) has width W(j-1) <= wcum[j-1] + 1
        wcum = torch.cummax(lastu[rows], 0).values.tolist()
        lim = max(1, elems // max(1, self.H * per_row))  # rows * width per block
        i = 0
        while i < R:
            j = i + 1  # grow the block while (rows in block) * (its widest row) stays within the budget
            while j < R and (j + 1 - i) * (wcum[j] + 1) <= lim:
                j += 1
            rb = rows[i:j]
            W = int(lastu[rb].max()) + 1
            yield rb, max(W, 1)
            i = j


#: worker threads of :func:`_run_blocks` inside :func:`block_parallel` (``None``: ``torch.get_num_threads()``).
_WORKERS: int | None = None


@contextlib.contextmanager
def block_parallel(workers: int | None = None):
    """Context: torch runs single-threaded inside, and the row-block loops of this module run on ``workers``
    Python threads instead (default: the current ``torch.get_num_threads()``).

    Per-operation OpenMP parallelism pays a thread barrier for every tensor operation; on a shared or busy machine
    a barrier waits for a descheduled thread (milliseconds), which made the layer analyses 10-50x slower than
    single-threaded. Coarse-grained parallelism over row blocks (each milliseconds of work) has no such barriers.
    """
    global _WORKERS
    prev_threads = torch.get_num_threads()
    prev_workers = _WORKERS
    _WORKERS = max(1, int(workers)) if workers is not None else (prev_workers or prev_threads)
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(prev_threads)
        _WORKERS = prev_workers


@contextlib.contextmanager
def large_ops():
    """Inside :func:`block_parallel`: let torch use the worker count again for a few large operations (softmax and
    Gram products over a whole layer), where per-operation threading pays off. Elsewhere: no change."""
    if _WORKERS is None:
        yield
        return
    prev = torch.get_num_threads()
    torch.set_num_threads(_WORKERS)
    try:
        yield
    finally:
        torch.set_num_threads(prev)


def _run_blocks(fn, blocks) -> None:
    """Call ``fn(rows_block, W)`` for every block; ``fn`` writes disjoint rows. Inside :func:`block_parallel` the
    blocks are shared out to its worker threads (one torch thread each); elsewhere they run in order."""
    blocks = list(blocks)
    nt = _WORKERS or 1
    if nt <= 1 or len(blocks) < 2:
        for b in blocks:
            fn(*b)
        return
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=min(nt, len(blocks))) as ex:
        for f in [ex.submit(fn, *b) for b in blocks]:
            f.result()


def top_n_order(alpha: torch.Tensor, n: int, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Top-``n`` indices along the last axis, largest first, ties to the lower index (as
    :func:`attn_lib.theory.top_n_indices`); masked positions rank below every visible one, lowest index first.

    Uses ``torch.topk`` and repairs ties: inside the selection by a stable re-sort, at the selection boundary by
    a full stable sort of the few affected rows.
    """
    L = alpha.shape[-1]
    n = min(n, L)
    cols = torch.arange(L, device=alpha.device, dtype=F64)
    key = alpha.to(F64)
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
        n_eq_all = (key == kth).sum(-1)
        n_eq_sel = (vals == kth).sum(-1)
        bad = n_eq_all > n_eq_sel
        if bool(bad.any()):
            full = torch.sort(key[bad], dim=-1, descending=True, stable=True).indices[..., :n]
            idx[bad] = full
    return idx


def masked_mean(x: torch.Tensor | np.ndarray, valid, dim: int = -1):
    """Mean of ``x`` over ``dim`` counting only ``valid`` entries; returns ``(mean, count)``; mean is 0 where
    count is 0 (check ``count``)."""
    xt = torch.as_tensor(x)
    vt = torch.as_tensor(valid).to(torch.bool)
    vt = torch.broadcast_to(vt, xt.shape)
    cnt = vt.sum(dim)
    s = torch.where(vt, xt, torch.zeros((), dtype=xt.dtype)).sum(dim)
    return s / cnt.clamp(min=1), cnt


def _kernel_ok(device: torch.device, prefix: bool) -> bool:
    """Whether the compiled kernels of :mod:`attn_lib._kernels` apply: CPU tensors, prefix masks, numba present."""
    return device.type == "cpu" and prefix and _kern.available()


def _kthreads() -> int:
    """Threads for a compiled kernel: the workers of :func:`block_parallel`, else torch's thread count."""
    return _WORKERS or torch.get_num_threads()


def _bool_mask(mask: Any, device) -> torch.Tensor:
    """``mask`` as a bool tensor on ``device`` (True = visible), leading singleton axes beyond three dropped."""
    m = mask if isinstance(mask, torch.Tensor) else torch.as_tensor(np.asarray(mask))
    if m.dtype != torch.bool:
        raise ValueError(f"mask must be a bool tensor with True = visible (got dtype {m.dtype})")
    m = m.to(device)
    while m.dim() > 3 and m.shape[0] == 1:
        m = m[0]
    return m


def _engine(engine: str, applies: bool, what: str) -> bool:
    """Validate ``engine`` and say whether the compiled kernel runs (``applies``: CPU, prefix masks, numba, ...)."""
    check_choice("engine", engine, ["auto", "numba", "torch"])
    if engine == "auto":
        eng = DEFAULT_ENGINE
        if eng not in ("auto", "numba", "torch"):
            raise ValueError(f"ATTN_LIB_ENGINE must be one of 'auto', 'numba', 'torch' (got {eng!r})")
        return eng != "torch" and applies
    if engine == "numba" and not applies:
        raise ValueError(f"engine='numba' needs numba, a CPU layer and prefix masks (row r sees tokens 0..t_r-1)"
                         f"{what}; use engine='torch'")
    return engine == "numba"


def _p_value(p: Any, N: int, t: torch.Tensor) -> torch.Tensor:
    """Inclusion probability per row: ``N/(t-1)`` (``"L-1"``), ``N/t`` (``"L"``) or a number."""
    tt = t.to(F64)
    if isinstance(p, str):
        check_choice("p", p, ["L-1", "L"])
        return N / (tt - 1).clamp(min=1) if p == "L-1" else N / tt.clamp(min=1)
    need = f"p must be 'L-1', 'L' or a number in [0, 1] (got {p!r})"
    if isinstance(p, bool):
        raise ValueError(need)
    try:
        pv = float(p)
    except (TypeError, ValueError):
        raise ValueError(need) from None
    if not (0 <= pv <= 1):
        raise ValueError(need)
    return torch.full_like(tt, pv)


# ----------------------------------------------------------------------------------------------------------
# distances at one N (Eq. 7, Theorem 1, E1, E2)
# ----------------------------------------------------------------------------------------------------------
@dataclass
class DistanceRows:
    """Per-(head, row) results of :func:`distance_metrics`, each ``(H, L)`` float64 (``valid`` bool)."""

    N: int
    t: torch.Tensor
    valid: torch.Tensor
    d_tilde: torch.Tensor
    e1: torch.Tensor
    e1_gap: torch.Tensor
    e1_gap_crude: torch.Tensor
    e2: torch.Tensor
    s_norm: torch.Tensor
    alpha_bar: torch.Tensor
    d1: torch.Tensor | None = None
    max_norm: torch.Tensor | None = None
    d_max: torch.Tensor | None = None
    extra: dict = field(default_factory=dict)


def _as_layer(layer_or_weights, values=None, mask=None) -> LayerData:
    if isinstance(layer_or_weights, LayerData):
        if values is not None or mask is not None:
            raise ValueError("values and mask must be None when a LayerData is given")
        return layer_or_weights
    if values is None:
        raise ValueError("values must be given with raw weights")
    return LayerData(layer_or_weights, values, mask)


def distance_metrics(layer, values=None, N: int = 5, *, mask=None, p: Any = "L-1", form: str = "sum",
                     with_dmax: bool = True, engine: str = "auto") -> DistanceRows:
    r"""d~ (Eq. 7), d_max (Theorem 1a), E1 and its Jensen-gap bounds, E2 (Theorem 1b) for every head and row.

    ``layer`` is a :class:`LayerData` or raw ``weights`` (then give ``values``/``mask``). Row ``r`` with ``t``
    visible tokens is valid iff ``t >= N + 1``. ``form="sum"`` is the project's d~ (§5a); ``"vector"`` the variant
    :math:`\|\sum_{i\notin I_N}a_i-s\|`. ``p`` as in :func:`attn_lib.theory.expectation_e1`.

    Cost per row: ``O(t d)`` by BLAS for ``s . x_i``, ``O(t)`` elementwise; ``d_1`` (for d_max) uses a running
    maximum of the squared distances from each token (prefix masks) and falls back to ``O(N t)`` per row only
    where the farthest visible token from the best selected one is itself selected.

    ``engine``: ``"numba"`` computes the per-row sums with the compiled :func:`attn_lib._kernels.dist_prefix`
    (CPU, prefix masks, ``form="sum"``; float64, same formulas), ``"torch"`` with tensor operations (any device,
    mask and form), ``"auto"`` (default) numba where it applies. ``d_max`` is computed in torch either way.
    """
    ld = _as_layer(layer, values, mask)
    N = _check_N(N)
    _p_value(p, 1, torch.ones(1))  # validates p
    check_choice("form", form, ["sum", "vector"])
    use_numba = _engine(engine, _kernel_ok(ld.device, ld.prefix) and form == "sum",
                        " and form='sum'")
    H, L = ld.H, ld.L
    t = torch.broadcast_to(ld.t, (H, L))
    valid = t >= N + 1
    n_ord = min(N, L)
    order = ld.order(n_ord)  # (H, L, N)
    G, g = ld.gram, ld.gdiag
    zv, zz = ld.zdot()
    pv = _p_value(p, N, t)  # (H, L)
    out = {k: torch.zeros(H, L, dtype=F64, device=ld.device)
           for k in ("d_tilde", "e1", "e1_gap", "e1_gap_crude", "e2", "s_norm", "alpha_bar")}
    sel_all = ld.alpha.gather(-1, order)  # (H, L, N)
    out["alpha_bar"] = sel_all.sum(-1)
    # s = sum_{top N} alpha_j v_j for every row: (H, L, d)
    zero = torch.zeros((), dtype=F64, device=ld.device)

    def block(rb, W):
        r0, r1 = int(rb[0]), int(rb[-1]) + 1
        a = ld.alpha[:, r0:r1, :W]
        m = torch.broadcast_to(ld.mask[:, r0:r1, :W], a.shape)
        idx = order[:, r0:r1].clamp(max=W - 1)  # past a row's count (invalid rows only)
        aj = sel_all[:, r0:r1]
        w = torch.zeros_like(a).scatter_(-1, idx, aj)  # top-N weights of each row (one BLAS product below)
        S = torch.bmm(w, ld.values[:, :W])  # (H, B, d)
        del w
        C = S @ ld.values[:, :W].transpose(1, 2)  # (H, B, W) = s . x_i
        ss = (S * S).sum(-1, keepdim=True)  # (H, B, 1)
        nmask = (~m).sum(-1, keepdim=True).to(F64)  # masked columns of the block (a = 0 there)
        ag = a * g[:, None, :W]  # alpha_i ||x_i||^2
        A = a * ag  # ||a_i||^2
        # Every per-token square below is (row constant) + (row constants) x (A, a_i . z, a_i . s): at a masked
        # column it is exactly the row constant, so those columns are summed and then subtracted (no masking pass);
        # a rounding-negative square gives NaN, which nansum counts as sqrt(0) = 0.
        D = torch.addcmul(ss, a, torch.add(ag, C, alpha=-2.0)).sqrt_()  # ||a_i - s||
        rs = ss.clamp(min=0).sqrt()
        tot = (D.nansum(-1, keepdim=True) - nmask * rs).squeeze(-1)
        sel = D.gather(-1, idx).nan_to_num_(0.0).sum(-1)
        tb = t[:, r0:r1].to(F64)
        out["s_norm"][:, r0:r1] = rs.squeeze(-1)
        if form == "sum":
            out["d_tilde"][:, r0:r1] = tot - sel
        else:
            # ||(z - s) - s||^2 = ||z||^2 - 4 z.s + 4 ||s||^2,  z.s = sum_i alpha_i (s . x_i)
            zs = (a * C).sum(-1)
            out["d_tilde"][:, r0:r1] = (zz[:, r0:r1] - 4 * zs + 4 * ss.squeeze(-1)).clamp(min=0).sqrt()
        del D, C
        if N == 1:  # the selected token sits exactly at s: remove the rounding of the Gram formula
            tot = tot - sel
        fac = (tb - N) / tb.clamp(min=1)
        out["e2"][:, r0:r1] = fac * tot
        # E1: ||(1+p) a_i - p z||^2 = (1+p)^2 A_i - 2p(1+p) a_i.z + p^2 ||z||^2
        pb = pv[:, r0:r1].unsqueeze(-1)
        Bz = a * zv[:, r0:r1, :W]
        Z = zz[:, r0:r1].unsqueeze(-1)
        c3 = pb * pb * Z
        E = torch.addcmul(c3, A, (1 + pb) ** 2).addcmul_(Bz, -2 * pb * (1 + pb)).sqrt_()
        out["e1"][:, r0:r1] = fac * (E.nansum(-1, keepdim=True) - nmask * c3.clamp(min=0).sqrt()).squeeze(-1)
        # Jensen gap: p(1-p) [ (t-1)/(t-2) sum_{j!=i} A_j - ||z - a_i||^2/(t-2) ]
        #           = k1 + k2 A_i + k3 a_i.z  with  k1 = pq/den ((t-1) Q - Z), k2 = -pq t/den, k3 = 2 pq/den
        Q = A.sum(-1, keepdim=True)
        tm = tb.unsqueeze(-1)
        den = (tm - 2).clamp(min=1)
        pq = (pb * (1 - pb)).clamp(min=0)
        k1 = pq / den * ((tm - 1) * Q - Z)
        E = torch.addcmul(k1, A, -pq * tm / den, out=E).addcmul_(Bz, 2 * pq / den).sqrt_()
        gterm = E.nansum(-1, keepdim=True) - nmask * k1.clamp(min=0).sqrt()
        # crude: p(1-p) (t-1)/(t-2) sum_{j!=i} A_j = k4 - k5 A_i
        k5 = pq * (tm - 1) / den
        k4 = k5 * Q
        E = torch.addcmul(k4, A, -k5, out=E).sqrt_()
        gcrude = E.nansum(-1, keepdim=True) - nmask * k4.clamp(min=0).sqrt()
        gap_on = (tb >= N + 2)  # N >= t - 1 gives 0
        out["e1_gap"][:, r0:r1] = torch.where(gap_on, fac * gterm.squeeze(-1), zero)
        out["e1_gap_crude"][:, r0:r1] = torch.where(gap_on, fac * gcrude.squeeze(-1), zero)

    kd1 = None
    if use_numba:
        if N < L:
            # d_1 in the kernel costs N t per row: cheaper than the running-maximum path below for small N
            k = _kern.dist_prefix(ld.alpha.numpy(), G.numpy(), ld.values.numpy(), order.numpy(), zv.numpy(),
                                  zz.numpy(), t.numpy(), N, p, with_d1=with_dmax and N <= KERNEL_D1_MAX_N,
                                  threads=_kthreads())
            for i, name in enumerate(("d_tilde", "e1", "e1_gap", "e1_gap_crude", "e2", "s_norm")):
                out[name] = torch.from_numpy(k[i])
            if with_dmax and N <= KERNEL_D1_MAX_N:
                kd1 = torch.from_numpy(k[6]), torch.from_numpy(k[7])
            elif with_dmax:
                d1_np, mx_np = _kern.d1_cummax(G.numpy(), order.numpy(), t.numpy(), N,
                                               threads=_kthreads())
                kd1 = torch.from_numpy(d1_np), torch.from_numpy(mx_np)
    else:
        _run_blocks(block, ld.blocks(per_row=2))
    res = DistanceRows(N=N, t=t, valid=valid, **out)
    if with_dmax:
        d1, max_norm = kd1 if kd1 is not None else _d1_and_norm(ld, n_ord, order)
        # 1 - abar as the out-of-set mass (identical for rows summing to one), as in theory.theorem1_dmax
        out_mass = ld.alpha.sum(-1) - res.alpha_bar
        res.d1, res.max_norm = d1, max_norm
        res.d_max = out_mass * d1 + ((t.to(F64) - N) * res.alpha_bar - out_mass) * max_norm
    zero = torch.zeros((), dtype=F64, device=ld.device)
    for k in ("d_tilde", "e1", "e1_gap", "e1_gap_crude", "e2", "s_norm", "alpha_bar", "d1", "max_norm", "d_max"):
        val = getattr(res, k)
        if val is not None:
            setattr(res, k, torch.where(valid, val, zero))
    return res


def _d1_and_norm(ld: LayerData, N: int, order: torch.Tensor):
    """``d_1 = max_{i not in I_N, j in I_N} ||x_i - x_j||`` and ``max_{j in I_N} ||x_j||`` per (head, row)."""
    H, L = ld.H, ld.L
    G, g = ld.gram, ld.gdiag
    gsel = g.gather(1, order.reshape(H, -1)).view(H, L, N)
    max_norm = gsel.clamp(min=0).sqrt().amax(-1)
    d1sq = torch.zeros(H, L, dtype=F64, device=ld.device)
    rows_fb = torch.ones(H, L, dtype=torch.bool, device=ld.device)
    if ld.prefix:
        # F[h, j, c] = max_{i <= c} ||x_i - x_j||^2 and its argmax (independent of N: cached on the layer)
        if getattr(ld, "_cummax", None) is None:
            D2 = torch.addcmul(g.unsqueeze(-1) + g.unsqueeze(-2), G, torch.full((), -2.0, dtype=F64))
            ld._cummax = torch.cummax(D2, dim=-1)
            del D2
        F, Fi = ld._cummax
        last = torch.broadcast_to(ld.last, (H, L)).clamp(min=0)  # (H, L)
        # candidate for every selected j: F[h, j, last_r] -- exact for j when its argmax i is not selected
        lin = order * L + last.unsqueeze(-1)  # (H, L, N) flat index into (L, L)
        cand = F.view(H, -1).gather(1, lin.view(H, -1)).view(H, L, N)
        arg = Fi.view(H, -1).gather(1, lin.view(H, -1)).view(H, L, N)
        del F, Fi
        if N <= 64:
            argsel = (arg.unsqueeze(-1) == order.unsqueeze(-2)).any(-1)  # (H, L, N)
        else:
            sel = torch.zeros(H, L, L, dtype=torch.bool, device=ld.device).scatter_(-1, order, True)
            argsel = sel.gather(-1, arg)
            del sel
        ninf = torch.tensor(-math.inf, dtype=F64, device=ld.device)
        # V1: the best exact candidate (a real pair selected j / non-selected i); a j whose argmax is selected
        # can only matter if its bound cand exceeds V1: recompute exactly those (h, r, j) only
        d1sq = torch.where(argsel, ninf, cand).amax(-1)
        need = argsel & (cand > d1sq.unsqueeze(-1))
        tvis = torch.broadcast_to(ld.t, (H, L))
        need &= (tvis >= N + 1).unsqueeze(-1)  # rows that have a non-selected token
        trip = need.nonzero(as_tuple=False)  # (n, 3): head, row, k-th selected; sorted by head, then row
        if trip.numel():
            cols = torch.arange(L, device=ld.device)
            for hh in trip[:, 0].unique().tolist():
                th_ = trip[trip[:, 0] == hh]
                c0 = 0
                while c0 < th_.shape[0]:
                    # rows ascending: the chunk's width is that of its last row
                    W = int(last[hh, th_[min(th_.shape[0], c0 + 1) - 1, 1]]) + 1
                    n = max(1, BLOCK_ELEMS // max(1, 2 * W))
                    W = int(last[hh, th_[min(th_.shape[0], c0 + n) - 1, 1]]) + 1
                    hrk = th_[c0:c0 + n]
                    c0 += n
                    r = hrk[:, 1]
                    j = order[hh, r, hrk[:, 2]]
                    # ||x_j - x_i||^2 for every i < W, then drop masked and selected i
                    D2 = torch.index_select(G[hh, :, :W], 0, j).mul_(-2.0).add_(g[hh, :W]).add_(g[hh, j].unsqueeze(-1))
                    D2.masked_fill_(cols[:W].unsqueeze(0) > last[hh, r].unsqueeze(-1), -math.inf)
                    D2.scatter_(1, order[hh, r].clamp(max=W - 1), -math.inf)
                    val = D2.amax(-1)
                    d1sq[hh].scatter_reduce_(0, r, val, reduce="amax")
        rows_fb = torch.zeros(H, L, dtype=torch.bool, device=ld.device)
    # exact fallback rows: gather the Gram rows of the selected tokens
    fb = rows_fb.nonzero(as_tuple=False)  # (n, 2): head, row
    if fb.numel():
        chunk = max(1, BLOCK_ELEMS // max(1, N * L))
        for k in range(0, fb.shape[0], chunk):
            hr = fb[k:k + chunk]
            h, r = hr[:, 0], hr[:, 1]
            idx = order[h, r]  # (n, N)
            Grows = G[h.unsqueeze(-1), idx]  # (n, N, L)
            D2 = g[h].unsqueeze(1) + g[h.unsqueeze(-1), idx].unsqueeze(-1) - 2 * Grows
            vis = torch.broadcast_to(ld.mask, (H, L, L))[h, r].clone()  # (n, L)
            vis.scatter_(1, idx, False)
            D2 = torch.where(vis.unsqueeze(1), D2, torch.tensor(-math.inf, dtype=F64, device=ld.device))
            d1sq[h, r] = D2.amax(dim=(-2, -1))
    d1 = torch.where(torch.isfinite(d1sq), d1sq, torch.zeros((), dtype=F64)).clamp(min=0).sqrt()
    return d1, max_norm


# ----------------------------------------------------------------------------------------------------------
# incremental scan over N (Algorithm 3)
# ----------------------------------------------------------------------------------------------------------
@dataclass
class ScanRows:
    """Per-(head, row, N) d~, E1 and E2 for ``N = n_min..n_max``: arrays ``(H, L, n)`` float64; ``valid``
    ``(H, L, n)``; ``n_values`` the N of the last axis."""

    n_values: np.ndarray
    valid: torch.Tensor
    d_tilde: torch.Tensor
    e1: torch.Tensor
    e2: torch.Tensor


def topn_scan(layer, values=None, n_max: int = 16, *, n_min: int = 1, mask=None, p: Any = "L-1",
              rows: torch.Tensor | None = None, engine: str = "auto") -> ScanRows:
    r"""d~, E1, E2 for every ``N`` in ``n_min..n_max``, incrementally (critical-N scan, Algorithm 3).

    Per row, adding the ``N``-th top token ``j`` updates ``c_i = s . x_i`` by ``alpha_j G_{j i}`` and
    :math:`\|s\|^2` by :math:`2\alpha_jc_j+\alpha_j^2G_{jj}`, so one step costs ``O(t)`` per row and the whole scan
    ``O(H L^2 n)`` -- not ``O(H L^2 d\,n)`` as recomputing ``s`` for every ``N`` would. The state at ``n_min - 1``
    is built directly (one BLAS product), so a scan can be continued in stages. Rows are processed in blocks of
    about :data:`BLOCK_ELEMS` elements.

    ``engine``: ``"numba"`` runs the fused compiled kernel :func:`attn_lib._kernels.scan_prefix` (CPU tensors,
    prefix masks such as causal ones; square roots in float32, relative error below ``1.2e-7``, see that module);
    ``"torch"`` the tensor code below (any device and mask, float64 throughout); ``"auto"`` (default) picks numba
    where it applies.
    """
    ld = _as_layer(layer, values, mask)
    n_min = _check_N(n_min, "n_min")
    n_max = check_int("n_max", n_max, low=n_min)
    _p_value(p, 1, torch.ones(1))  # validates p
    check_choice("engine", engine, ["auto", "numba", "torch"])
    H, L = ld.H, ld.L
    nn = n_max - n_min + 1
    t_full = torch.broadcast_to(ld.t, (H, L))
    Ns = torch.arange(n_min, n_max + 1, device=ld.device)
    valid = t_full.unsqueeze(-1) >= Ns.view(1, 1, -1) + 1
    if rows is not None:
        rows = _check_rows(rows, L).to(ld.device)
        keep = torch.zeros(L, dtype=torch.bool, device=ld.device)
        keep[rows] = True
        valid = valid & keep.view(1, L, 1)
    n_ord = min(n_max, L)
    order = ld.order(n_ord)
    zv, zz = ld.zdot()
    if _engine(engine, _kernel_ok(ld.device, ld.prefix), ""):
        rws = torch.arange(L) if rows is None else rows
        outs = _kern.scan_prefix(ld.alpha.numpy(), ld.gram.numpy(), order.numpy(), zv.numpy(), zz.numpy(),
                                 t_full.numpy(), rws.numpy(), n_min, n_max, p, threads=_kthreads())
        res = {}
        for k, v in zip(("d_tilde", "e1", "e2"), outs):
            res[k] = torch.zeros(H, L, nn, dtype=F64)
            res[k][:, rws] = torch.from_numpy(v)
        return ScanRows(n_values=np.arange(n_min, n_max + 1), valid=valid, **res)
    G, g = ld.gram, ld.gdiag
    res = {k: torch.zeros(H, L, nn, dtype=F64, device=ld.device) for k in ("d_tilde", "e1", "e2")}
    zero = torch.zeros((), dtype=F64, device=ld.device)
    Gflat = G.reshape(H * L, L)
    hoff = (torch.arange(H, device=ld.device) * L).view(H, 1, 1)
    Vt = ld.values.transpose(1, 2)
    Ns_f = torch.arange(n_min, n_max + 1, device=ld.device).to(F64)

    def block(rb, W):
        B = rb.numel()
        a = ld.alpha[:, rb, :W]  # (H, B, W) copy; zero at masked columns
        m = torch.broadcast_to(ld.mask[:, rb, :W], a.shape)
        nmask = (~m).sum(-1).to(F64).unsqueeze(-1)  # masked columns inside the block, (H, B, 1)
        tb = t_full[:, rb].to(F64)
        ag = a * g[:, None, :W]  # alpha_i ||x_i||^2
        ordb = order[:, rb].clamp(max=W - 1)  # (H, B, n_ord); entries past a row's count only reach invalid cells
        asel = a.gather(-1, ordb)  # (H, B, n_ord): alpha of the k-th top token (0 where masked)
        agsel = ag.gather(-1, ordb)
        Gidx = (ordb + hoff).permute(2, 0, 1).reshape(ordb.shape[-1], -1)  # (n_ord, H B) flat Gram rows
        # state at n_min - 1: K_i = alpha_i ||x_i||^2 - 2 s . x_i, so that ||a_i - s||^2 = alpha_i K_i + ||s||^2
        k0 = min(n_min - 1, n_ord)
        if k0 > 0:
            w0 = torch.zeros(H, B, W, dtype=F64, device=ld.device).scatter_(-1, ordb[..., :k0], asel[..., :k0])
            S = torch.bmm(w0, ld.values[:, :W])  # (H, B, d)
            K = torch.baddbmm(ag, S, Vt[:, :, :W], alpha=-2.0)
            ss = (S * S).sum(-1, keepdim=True)
            del w0, S
        else:
            K = ag.clone()
            ss = torch.zeros(H, B, 1, dtype=F64, device=ld.device)
        tmp = torch.empty(H, B, W, dtype=F64, device=ld.device)
        Gj = torch.empty(H * B, W, dtype=F64, device=ld.device)
        GW = Gflat[:, :W]
        dt = torch.empty(H, B, nn, dtype=F64, device=ld.device)
        e2 = torch.empty_like(dt)
        for k, N in enumerate(range(n_min, n_max + 1)):
            if N <= n_ord:
                # add the N-th top token j: s += a_j x_j, so K -= 2 alpha_j G[j, :] and
                # ||s||^2 += 2 alpha_j s.x_j + alpha_j^2 G_jj = alpha_j (2 alpha_j G_jj - K_j)
                aj = asel[..., N - 1:N]  # (H, B, 1)
                ss = ss + aj * (2 * agsel[..., N - 1:N] - K.gather(-1, ordb[..., N - 1:N]))
                torch.index_select(GW, 0, Gidx[N - 1], out=Gj)  # G[h, j, :W]
                K.addcmul_(Gj.view(H, B, W), aj, value=-2.0)
            # D_i = sqrt(alpha_i K_i + ||s||^2); the NaN of a rounding-negative square counts as 0 (nansum), and
            # masked columns give exactly sqrt(||s||^2)
            torch.addcmul(ss, a, K, out=tmp).sqrt_()
            tot = tmp.nansum(-1, keepdim=True) - nmask * ss.clamp(min=0).sqrt()
            sel = tmp.gather(-1, ordb[..., :min(N, n_ord)]).nan_to_num_(0.0).sum(-1, keepdim=True)
            dt[..., k:k + 1] = tot - sel
            e2[..., k:k + 1] = tot - sel if N == 1 else tot  # N = 1: the selected token sits exactly at s
        fac = (tb.unsqueeze(-1) - Ns_f) / tb.clamp(min=1).unsqueeze(-1)  # (H, B, nn)
        res["d_tilde"][:, rb] = dt
        res["e2"][:, rb] = fac * e2
        # E1 = (t-N)/t sum_i sqrt((1+p)^2 ||a_i||^2 - 2p(1+p) a_i.z + p^2 ||z||^2): it does not depend on the
        # selection, so a few N at a time are one small batched matmul [c1, c2, c3] @ [A; Bz; 1]
        X = torch.stack([a * ag, a * zv[:, rb, :W], torch.ones_like(a)], -2).view(H * B, 3, W)
        Z = zz[:, rb].unsqueeze(-1)
        e1 = torch.empty(H, B, nn, dtype=F64, device=ld.device)
        step = max(1, min(nn, 8))
        for k0_ in range(0, nn, step):
            k1_ = min(nn, k0_ + step)
            pv = torch.stack([_p_value(p, int(N), tb) for N in range(n_min + k0_, n_min + k1_)], -1)  # (H, B, c)
            coef = torch.stack([(1 + pv) ** 2, -2 * pv * (1 + pv), pv * pv * Z], -1).view(H * B, k1_ - k0_, 3)
            q = torch.bmm(coef, X).sqrt_()  # (H B, c, W)
            c3 = (pv * pv * Z).clamp(min=0).sqrt()
            e1[..., k0_:k1_] = q.nansum(-1).view(H, B, -1) - nmask * c3
        res["e1"][:, rb] = fac * e1

    _run_blocks(block, ld.blocks(rows=rows, per_row=3, elems=SCAN_BLOCK_ELEMS))
    for k in res:
        res[k] = torch.where(valid, res[k], zero)
    return ScanRows(n_values=np.arange(n_min, n_max + 1), valid=valid, **res)


def naive_scan(layer, values=None, n_max: int = 16, *, n_min: int = 1, mask=None, p: Any = "L-1") -> ScanRows:
    """Reference for :func:`topn_scan`: :func:`distance_metrics` recomputed from scratch for every ``N``."""
    ld = _as_layer(layer, values, mask)
    outs = [distance_metrics(ld, N=N, p=p, with_dmax=False) for N in range(n_min, n_max + 1)]
    st = lambda k: torch.stack([getattr(o, k) for o in outs], -1)  # noqa: E731
    return ScanRows(n_values=np.arange(n_min, n_max + 1), valid=st("valid"), d_tilde=st("d_tilde"),
                    e1=st("e1"), e2=st("e2"))


# ----------------------------------------------------------------------------------------------------------
# Monte Carlo E[d~] under uniformly random N-subsets
# ----------------------------------------------------------------------------------------------------------
@dataclass
class MCRows:
    """Monte-Carlo ``E[d~]`` on a subset of rows: ``rows`` ``(R,)``; ``mean``, ``stderr`` ``(H, R)``; ``valid``."""

    N: int
    rows: torch.Tensor
    mean: torch.Tensor
    stderr: torch.Tensor
    valid: torch.Tensor


def expected_distance_mc(layer, values=None, N: int = 5, *, rows=None, mask=None, n_samples: int = 64,
                         seed: int = 0, engine: str = "auto") -> MCRows:
    r"""Monte-Carlo estimate of :math:`\mathbb E_{I_N\sim\mathcal U}[\tilde d]` (Eq. 8; ground truth §5b).

    For each requested row, ``n_samples`` uniform ``N``-subsets of its visible tokens are drawn from a CPU
    generator seeded with ``seed`` (random keys, smallest ``N`` -- the same construction as
    :func:`attn_lib.theory.expected_distance_mc`); the subsets depend only on ``(seed, row, t)`` and are shared by
    all heads (each head's estimate is a valid Monte-Carlo estimate). Cost per row: ``O(K t d)`` by BLAS.

    ``engine``: ``"numba"`` (CPU, prefix masks: the compiled :func:`attn_lib._kernels.mc_prefix`, ``O(K t min(N, d))``
    per row, same subsets, float64), ``"torch"`` (any device or mask), ``"auto"`` (numba where it applies).
    """
    ld = _as_layer(layer, values, mask)
    N = _check_N(N)
    K = check_int("n_samples", n_samples, low=1)
    seed = check_int("seed", seed, low=0)
    H, L = ld.H, ld.L
    rows = torch.arange(L) if rows is None else _check_rows(rows, L)
    t = torch.broadcast_to(ld.t, (H, L))[:, rows.to(ld.device)]
    valid = t >= N + 1
    R = rows.numel()
    mean = torch.zeros(H, R, dtype=F64, device=ld.device)
    se = torch.zeros(H, R, dtype=F64, device=ld.device)
    if ld.mask.shape[0] != 1 and not bool((ld.mask == ld.mask[:1]).all()):
        raise ValueError("expected_distance_mc needs the same mask for every head")
    zero = torch.zeros((), dtype=F64, device=ld.device)
    use_numba = _engine(engine, _kernel_ok(ld.device, ld.prefix), "")
    if use_numba and R and N < L:
        # compiled kernel; the subsets depend only on (seed, rows, t, N, K, L): drawn once, shared by every layer
        t1 = ld.t[0, rows]
        sub = _mc_subsets(seed, tuple(rows.tolist()), tuple(t1.tolist()), L, N, K)
        mean_np, se_np = _kern.mc_prefix(ld.alpha.numpy(), ld.gram.numpy(), ld.values.numpy(),
                                         torch.broadcast_to(ld.t, (H, L)).numpy(), rows.numpy(), sub.numpy(),
                                         threads=_kthreads())
        mean, se = torch.from_numpy(mean_np), torch.from_numpy(se_np)
        return MCRows(N=N, rows=rows, mean=torch.where(valid, mean, zero), stderr=torch.where(valid, se, zero),
                      valid=valid)
    gen = torch.Generator(device="cpu").manual_seed(seed)
    keys_all = torch.rand(R, K, L, generator=gen, dtype=F64)  # one draw per (row, sample, position)
    m1 = ld.mask[0]
    g = ld.gdiag
    per = max(1, BLOCK_ELEMS // max(1, H * K * L))
    for i0 in range(0, R, per):
        rb = rows[i0:i0 + per].to(ld.device)
        B = rb.numel()
        W = int(ld.last.amax(0)[rb].max()) + 1
        vis = m1[rb, :W]  # (B, W)
        keys = keys_all[i0:i0 + B, :, :W].to(ld.device)
        keys = torch.where(vis.unsqueeze(1), keys, torch.tensor(2.0, dtype=F64, device=ld.device))
        n_take = min(N, W)
        sub = torch.topk(keys, n_take, dim=-1, largest=False).indices  # (B, K, N)
        a = ld.alpha[:, rb, :W]  # (H, B, W)
        subx = sub.unsqueeze(0).expand(H, B, K, n_take)
        asub = a.unsqueeze(2).expand(H, B, K, W).gather(-1, subx)  # (H, B, K, n)
        # s of every subset by one BLAS product: subset weights (H, B K, W) @ values (H, W, d)
        w = torch.zeros(H, B, K, W, dtype=F64, device=ld.device).scatter_(-1, subx, asub)
        S = torch.bmm(w.view(H, B * K, W), ld.values[:, :W])  # (H, B K, d)
        del w
        C = torch.bmm(S, ld.values[:, :W].transpose(1, 2)).view(H, B, K, W)
        ss = (S * S).sum(-1).view(H, B, K, 1)
        aa = a.unsqueeze(2)
        D = torch.addcmul(ss, aa * g[:, None, None, :W] - 2 * C, aa).clamp_(min=0).sqrt_()  # ||a_i - s||
        # d~ = sum over visible non-selected = sum over visible - sum over the selected
        visb = vis.view(1, B, 1, W)
        dt = torch.where(visb, D, torch.zeros((), dtype=F64, device=ld.device)).sum(-1) - D.gather(-1, subx).sum(-1)
        mean[:, i0:i0 + B] = dt.mean(-1)
        se[:, i0:i0 + B] = dt.std(-1) / math.sqrt(K) if K > 1 else math.inf
    return MCRows(N=N, rows=rows, mean=torch.where(valid, mean, zero), stderr=torch.where(valid, se, zero),
                  valid=valid)


@functools.lru_cache(maxsize=8)
def _mc_subsets(seed: int, rows: tuple, t: tuple, L: int, N: int, K: int) -> torch.Tensor:
    """The ``K`` uniform ``N``-subsets of each row's visible prefix ``0..t-1``, ``(R, K, N)`` -- the same draws as the
    torch path of :func:`expected_distance_mc` (keys from one seeded ``rand(R, K, L)``, the ``N`` smallest visible
    ones). Rows too short for a subset (``t < N + 1``, invalid) get masked indices, which are never read."""
    gen = torch.Generator(device="cpu").manual_seed(seed)
    keys = torch.rand(len(rows), K, L, generator=gen, dtype=F64)
    tt = torch.as_tensor(t).view(-1, 1, 1)
    keys.masked_fill_(torch.arange(L).view(1, 1, L) >= tt, 2.0)
    return torch.topk(keys, N, dim=-1, largest=False).indices


# ----------------------------------------------------------------------------------------------------------
# geometric separability (Definition, Theorem 2; Algorithm 4)
# ----------------------------------------------------------------------------------------------------------
@dataclass
class SeparabilityRows:
    """Per-(head, row) ``fraction = N_s/N``, Theorem 2 ``lower``/``upper`` (paper's form), radius ``r``
    (``rho_min``), ``delta`` (running minimum pairwise distance), ``valid``; each ``(H, L)``."""

    N: int
    valid: torch.Tensor
    fraction: torch.Tensor
    lower: torch.Tensor
    upper: torch.Tensor
    r: torch.Tensor
    delta: torch.Tensor


def unit_layer(layer: LayerData, M: float = 1.0) -> LayerData:
    """The same weights with every value vector scaled to norm ``M`` (Assumption 1; zero vectors stay zero)."""
    M = check_positive("M", M)
    v = layer.values
    n = torch.linalg.vector_norm(v, dim=-1, keepdim=True)
    u = M * v / torch.where(n > 0, n, torch.ones_like(n))
    out = LayerData.__new__(LayerData)
    out.__dict__.update(layer.__dict__)
    out.values = u
    out._gram = None
    out._zdot = None
    out._cummax = None
    return out


def running_min_distance(layer: LayerData) -> torch.Tensor:
    """``delta`` per (head, row): minimum pairwise distance among the tokens visible to the row (prefix masks:
    a running minimum over rows); ``0`` for rows with fewer than two visible tokens."""
    H, L = layer.H, layer.L
    G, g = layer.gram, layer.gdiag
    compiled = _engine("auto", _kernel_ok(layer.device, layer.prefix), "")
    if not compiled:
        D2 = (g.unsqueeze(-1) + g.unsqueeze(-2) - 2 * G)
        strict = torch.ones(L, L, dtype=torch.bool, device=layer.device).tril_(-1)
    if compiled:  # compiled, no (H, L, L) temporaries
        run = torch.from_numpy(_kern.running_min_sq(G.numpy(), threads=_kthreads()))
        run[:, 0] = math.inf
        last = torch.broadcast_to(layer.last, (H, L)).clamp(min=0)
        out = run.gather(1, last)
    elif layer.prefix:
        rowmin = torch.where(strict, D2, torch.tensor(math.inf, dtype=F64, device=layer.device)).amin(-1)  # (H, L)
        # rows are ordered by their last visible column for causal masks; compute by column index
        run = torch.cummin(rowmin, dim=-1).values  # min over pairs (j < k <= c)
        last = torch.broadcast_to(layer.last, (H, L)).clamp(min=0)
        out = run.gather(1, last)
    else:
        mfull = torch.broadcast_to(layer.mask, (H, L, L))
        out = torch.empty(H, L, dtype=F64, device=layer.device)
        for r in range(L):  # general masks only (not used by the experiments)
            vis = mfull[:, r]
            pair = vis.unsqueeze(-1) & vis.unsqueeze(-2) & strict
            out[:, r] = torch.where(pair, D2, torch.tensor(math.inf, dtype=F64)).amin(dim=(-2, -1))
    out = torch.where(torch.isfinite(out), out, torch.zeros((), dtype=F64)).clamp(min=0).sqrt()
    return out


def separability_metrics(layer, values=None, N: int = 4, *, mask=None, M: float = 1.0, normalize: bool = True,
                         delta: torch.Tensor | None = None, engine: str = "auto") -> SeparabilityRows:
    r"""``N_s/N`` with ``r`` ↑ ``rho_min`` (strict convention, §3.6) and Theorem 2's bounds at ``r = rho_min``.

    ``normalize=True`` first puts every value vector on the sphere of radius ``M`` (Algorithm 4's "normalize",
    §5c). ``delta`` (per head and row) defaults to :func:`running_min_distance`. Valid rows: ``t >= N + 1``.
    The lower bound is clipped below at ``-1`` (anything ``<= 0`` is vacuous); a row with ``rho_min = 0`` gets
    ``-1``. ``engine``: ``"numba"`` (CPU, prefix masks: compiled :func:`attn_lib._kernels.sep_prefix`),
    ``"torch"`` (any device or mask) or ``"auto"`` (numba where it applies); float64 either way.
    """
    ld = _as_layer(layer, values, mask)
    N = _check_N(N)
    M = check_positive("M", M)
    use_numba = _engine(engine, _kernel_ok(ld.device, ld.prefix), "")
    if normalize:
        ld = unit_layer(ld, M)
    H, L = ld.H, ld.L
    t = torch.broadcast_to(ld.t, (H, L))
    valid = t >= N + 1
    if delta is None:
        delta = running_min_distance(ld)
    order = ld.order(min(N, L))
    g = ld.gdiag
    frac = torch.zeros(H, L, dtype=F64, device=ld.device)
    rmin = torch.zeros(H, L, dtype=F64, device=ld.device)
    inf = torch.tensor(math.inf, dtype=F64, device=ld.device)

    def block(rb, W):
        r0, r1 = int(rb[0]), int(rb[-1]) + 1
        a = ld.alpha[:, r0:r1, :W]
        m = torch.broadcast_to(ld.mask[:, r0:r1, :W], a.shape)
        idx = order[:, r0:r1].clamp(max=W - 1)
        w = torch.zeros_like(a).scatter_(-1, idx, a.gather(-1, idx))  # top-N weights (one BLAS product below)
        S = torch.bmm(w, ld.values[:, :W])
        C = torch.bmm(S, ld.values[:, :W].transpose(1, 2))
        ss = (S * S).sum(-1, keepdim=True)
        D = torch.addcmul(a * a * g[:, None, :W], a, C, value=-2.0).add_(ss).clamp_(min=0).sqrt_()
        sel = torch.zeros(a.shape, dtype=torch.bool, device=ld.device).scatter_(-1, idx, True)
        rho = torch.where(m & ~sel, D, inf).amin(-1)  # (H, B)
        Dsel = D.gather(-1, idx)
        frac[:, r0:r1] = (Dsel < rho.unsqueeze(-1)).sum(-1).to(F64) / N
        rmin[:, r0:r1] = torch.where(torch.isfinite(rho), rho, torch.zeros((), dtype=F64))

    if use_numba:
        if N < L:
            f_np, r_np = _kern.sep_prefix(ld.alpha.numpy(), ld.gram.numpy(), ld.values.numpy(), order.numpy(),
                                          t.numpy(), N, threads=_kthreads())
            frac = torch.from_numpy(f_np)
            rho = torch.from_numpy(r_np)
            rmin = torch.where(torch.isfinite(rho), rho, torch.zeros((), dtype=F64))
    else:
        _run_blocks(block, ld.blocks(per_row=2))
    # Theorem 2 (paper's form) at r = rho_min
    aI = ld.alpha.gather(-1, order)
    beta = aI.sum(-1, keepdim=True) - aI
    q = (aI * aI).sum(-1, keepdim=True) - aI * aI
    dl = delta.clamp(max=2 * M).unsqueeze(-1)
    xi = ((M * M - dl * dl / 2) * beta * beta + dl * dl / 2 * q).clamp(min=0).sqrt()  # (H, L, N)
    r = rmin.unsqueeze(-1)
    lower = torch.where(rmin > 0, 1.0 - xi.sum(-1) / (rmin.clamp(min=1e-300) * N), torch.full_like(rmin, -1.0))
    lower = lower.clamp(min=-1.0)
    upper = torch.exp(-((xi - r).clamp(min=0) ** 2) / (2 * M * M)).mean(-1)
    zero = torch.zeros((), dtype=F64, device=ld.device)
    return SeparabilityRows(N=N, valid=valid, fraction=torch.where(valid, frac, zero),
                            lower=torch.where(valid, lower, zero), upper=torch.where(valid, upper, zero),
                            r=torch.where(valid, rmin, zero), delta=delta)


# ----------------------------------------------------------------------------------------------------------
# gradient sensitivity g(T, eps) (Algorithm 5)
# ----------------------------------------------------------------------------------------------------------
def sensitivity_rows(logits: Any, temperatures: Sequence[float], eps_values: Sequence[float], *, mask=None,
                     seed: int = 0, direction: torch.Tensor | None = None,
                     rows: Any = None, engine: str = "auto") -> tuple[torch.Tensor, torch.Tensor]:
    r"""Finite-difference sensitivity per row for a grid of ``T`` and ``eps`` (paper-notes §4.5).

    Same definition as :func:`attn_lib.jacobian.sensitivity` (and the same seeded unit directions from
    :func:`attn_lib.jacobian.random_directions`, one per row, reused for every ``T`` and ``eps``), but the rows are
    processed in causal blocks, all temperatures at once. ``logits`` ``(H, L, L)`` (``-inf`` = masked).

    ``rows`` (optional, sorted row indices): evaluate only these rows (the set ``R`` of §4.5); the directions are
    then drawn for the ``(H, len(rows), L)`` sub-array (seeded, so they depend on ``seed`` and ``rows`` only), and
    ``direction``, if given, has that shape. Returns ``(g, valid)``: ``g`` of shape ``(len(T), len(eps), H, R)``
    and ``valid`` ``(H, R)`` = rows with at least two visible tokens (``R = L`` without ``rows``).

    ``engine``: ``"numba"`` (CPU, every row seeing a prefix of the tokens: the fused compiled
    :func:`attn_lib._kernels.sens_rows` with a vectorised exponential), ``"torch"`` (any device or mask) or
    ``"auto"`` (numba where it applies); float64 either way.
    """
    x = _tensor(logits, "logits")
    if x.dim() == 2:
        x = x.unsqueeze(0)
    Ts = [check_positive("temperature", T) for T in temperatures]
    Es = [check_positive("eps", e) for e in eps_values]
    if not Ts or not Es:
        raise ValueError("temperatures and eps_values must be non-empty")
    m = None
    if mask is not None:
        m = torch.broadcast_to(_bool_mask(mask, x.device), x.shape)
    H, L, _ = x.shape
    if rows is not None:  # select the rows first: everything below works on (H, R, L) only
        rows = _check_rows(rows, x.shape[1], allow_empty=False).to(x.device)
        x = x[:, rows]
        m = None if m is None else m[:, rows]
    x = x.to(F64)
    vis = x != -math.inf
    if m is not None:
        vis = vis & m
    R = x.shape[1]
    if not bool(torch.isfinite(x[vis]).all()):
        raise ValueError("logits must be finite at visible positions")
    if direction is not None:
        v = _tensor(direction, "direction").to(F64).to(x.device)
        if v.shape != x.shape:
            raise ValueError(f"direction must have shape {tuple(x.shape)} (got {tuple(v.shape)})")
    else:
        v = _jac.random_directions(x.shape, vis.cpu(), seed=seed, dtype=F64, device=x.device)
    cols = torch.arange(L, device=x.device)
    tvis = vis[0].sum(-1)  # (R,)
    prefix_rows = bool((vis == (cols.view(1, 1, L) < tvis.view(1, -1, 1))).all())
    if _engine(engine, _kernel_ok(x.device, prefix_rows), ""):
        out = torch.from_numpy(_kern.sens_rows(x.numpy(), v.numpy(), tvis.numpy(), Ts, Es,
                                               threads=_kthreads()))
        valid = vis.sum(-1) >= 2
        return torch.where(valid, out, torch.zeros((), dtype=F64)), valid
    Tt = torch.as_tensor(Ts, dtype=F64, device=x.device).view(-1, 1, 1, 1)
    out = torch.zeros(len(Ts), len(Es), H, R, dtype=F64, device=x.device)
    cols = torch.arange(L, device=x.device)
    lastu = torch.where(vis, cols, -1).amax(-1).amax(0).tolist()  # (R,) widest visible column per row
    lim = max(1, BLOCK_ELEMS // 2 // max(1, H * len(Ts)))  # rows x width per block (all T at once)
    ninf = torch.tensor(-math.inf, dtype=F64, device=x.device)
    blocks = []
    r0 = 0
    while r0 < R:
        r1, W = r0 + 1, lastu[r0] + 1
        while r1 < R and (r1 + 1 - r0) * (max(W, lastu[r1] + 1)) <= lim:
            W = max(W, lastu[r1] + 1)
            r1 += 1
        blocks.append((r0, r1, max(1, W)))
        r0 = r1

    def block(r0, r1, W):
        mb = vis[:, r0:r1, :W]
        xm = torch.where(mb, x[:, r0:r1, :W], ninf)
        vb = torch.where(mb, v[:, r0:r1, :W], torch.zeros((), dtype=F64, device=x.device))
        # plain stable softmax over all T at once: torch.softmax subtracts the row max; rows with no visible
        # position give NaN and are zeroed below (invalid)
        a0 = torch.softmax(xm / Tt, dim=-1)  # (nT, H, B, W)
        for b_, e in enumerate(Es):
            a1 = torch.softmax((xm + e * vb) / Tt, dim=-1)
            out[:, b_, :, r0:r1] = torch.linalg.vector_norm(a1.sub_(a0), dim=-1) / e

    _run_blocks(block, blocks)  # disjoint rows; on worker threads inside block_parallel
    valid = vis.sum(-1) >= 2
    out = torch.where(valid, out, torch.zeros((), dtype=F64, device=x.device))
    return out.nan_to_num_(0.0), valid
