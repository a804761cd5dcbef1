"""Attention normalisers behind one interface (Reading the paper, §Notation, Eq. 2-3; remedies of (Reading the paper, §Open questions)).

Every normaliser is a callable with the signature::

    f(logits, temperature=1.0, dim=-1, mask=None, **params) -> weights

* ``logits``: a torch tensor (a numpy array or nested list is accepted too; a numpy array in gives a numpy
  array out). Any number of leading (batch) dimensions; the normaliser acts along ``dim``.
* ``temperature``: ``T > 0``. Every normaliser is applied to the scaled logits ``z = l / T`` (the paper's Eq. 2
  for softmax; the same convention for the others).
* ``mask``: optional bool tensor broadcastable to ``logits``; ``True`` marks a *visible* position
  (causal attention: row ``t`` sees ``1..t``). Invisible positions get weight exactly ``0`` and do not count
  in ``n`` (the number of visible positions used by ``ssmax`` and ``sigmoid``). A logit of ``-inf`` is treated
  as invisible as well (the additive-mask convention of model code).
* **Fully masked row** (no visible position): every normaliser returns a row of zeros, by definition. This
  is a documented convention, not a limit: the formulas are undefined for an empty row.
* Visible logits must be finite (``NaN`` or ``+inf`` raise ``ValueError``).

Built-in normalisers whose rows sum to one: ``softmax``, ``general``, ``sparsemax``, ``entmax15``, ``entmax_alpha``,
``ssmax``, ``topk``. Rows that need **not** sum to one: ``softmax1`` (sum < 1), ``sigmoid`` (any sum in (0, n)),
``softpick`` (sum <= 1, can be 0) and ``sa_softmax`` (sum <= 1).

Numerical stability: all exponentials are evaluated after subtracting the row maximum (log-sum-exp), the
sparse maps are evaluated on shifted logits clipped below at a value that provably lies outside the support
(the output is unchanged), so every normaliser is finite for ``T`` in ``[1e-4, 1e4]`` and logits up to
``±1e4`` in float32 and float64.

The registry. Each normaliser is one :class:`Normalizer` entry, added with :func:`register`; every list of names
elsewhere (chapter 5's remedies, chapter 7's comparison, the CLI's help, the Jacobian's dispatch) is read from it with
:func:`available`. :func:`get` looks a normaliser up by name, :func:`spec` gives its entry.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math
from collections.abc import Callable
from typing import Any

import torch

from . import _rows
from ._validation import check_bool, check_choice, check_finite, check_int, check_positive

__all__ = [
    # the registry (every normaliser by name)
    "Normalizer",
    "register",
    "unregister",
    "spec",
    "available",
    "get",
]  # each normaliser (softmax, general, sparsemax, ...) is an entry of the registry: get(name), or the function itself

#: A normaliser's callable: ``f(logits, temperature=1.0, dim=-1, mask=None, **params) -> weights``.
NormalizerFn = Callable[..., Any]


# ----------------------------------------------------------------------------------------------------------
# softmax and the general family
# ----------------------------------------------------------------------------------------------------------
def softmax(logits, temperature=1.0, dim=-1, mask=None):
    r"""Softmax with temperature (paper Eq. 2; Reading the paper, §Notation).

    .. math:: \alpha_j = \frac{e^{l_j/T}}{\sum_{k\,\text{visible}} e^{l_k/T}}

    computed as ``exp((l_j - max_k l_k)/T) / sum(...)`` (log-sum-exp shift). Rows sum to one; a fully masked
    row is all zeros.

    Reference: Vaswani et al. 2017, arXiv:1706.03762; the paper's Eq. (2) with ``T = sqrt(d)`` typical.
    """
    x, visible, T, was_numpy, dim = _rows.prepare(logits, temperature, dim, mask)
    # z <= 0 at visible positions, no overflow for any finite input (its row maximum 0 is subtracted again: exact)
    out = _rows.masked_softmax_lastdim(_rows.scale(x - _rows.row_max(x, visible), T), visible, shifted=True)
    return _rows.finish(out, visible, dim, was_numpy)


def _log_softplus(z: torch.Tensor) -> torch.Tensor:
    """``log(softplus(z))`` without underflow: equals ``z`` (to rounding) for very negative ``z``."""
    sp = torch.nn.functional.softplus(z)
    safe = torch.where(z > -30, sp, torch.ones_like(sp))
    return torch.where(z > -30, torch.log(safe), z + torch.log1p(-0.5 * torch.exp(torch.clamp(z, max=-30))))


def _check_F(F: Any, log_F: Any, theta: Any) -> None:
    """``F``/``log_F`` must be callables (or None); ``theta`` needs one of them (the default softplus has none)."""
    for name, f in (("F", F), ("log_F", log_F)):
        if f is not None and not callable(f):
            raise ValueError(f"{name} must be callable or None (got {type(f).__name__})")
    if theta is not None and F is None and log_F is None:
        raise ValueError(
            f"theta is a parameter of a user-supplied F or log_F (got theta={theta!r} without either); "
            "the default F = softplus takes no parameter"
        )


def general(logits, F=None, temperature=1.0, dim=-1, mask=None, theta=None, *, log_F=None):
    r"""General normaliser of the paper's Eq. (3) (Reading the paper, §Notation, Lemma 1 (Reading the paper, §Lemma 1), Lemma 2 (Reading the paper, §Lemma 2)).

    .. math:: \alpha_j = \frac{F(l_j/T,\theta)}{\sum_{k\,\text{visible}} F(l_k/T,\theta)}

    ``F`` is a user-supplied elementwise, strictly positive function of a torch tensor (called as ``F(z)`` or,
    when ``theta`` is given, ``F(z, theta)``). The temperature is applied to the logits before ``F``.
    ``F`` must return finite values ``> 0`` at every visible position, otherwise ``ValueError`` names ``F``
    (note that e.g. ``exp`` overflows and ``softplus`` underflows in float32 for large ``|l|/T``).

    For full-range stability pass ``log_F`` (elementwise ``log F``) instead of, or in addition to, ``F``: the
    weights are then ``softmax(log_F(l/T))``, which never overflows. With neither given the default is
    ``F = softplus`` (evaluated through a stable ``log softplus``).

    Rows sum to one; a fully masked row is all zeros. ``make_general(F)`` returns this with ``F`` bound, in the
    common signature. Reference: the paper's Eq. (3), Mudarisov et al. 2025, arXiv:2508.17821.
    """
    _check_F(F, log_F, theta)
    x, visible, T, was_numpy, dim = _rows.prepare(logits, temperature, dim, mask)
    z = _rows.scale_unshifted(x, visible, T, "general")
    if F is None and log_F is None:
        log_F = _log_softplus
    if log_F is not None:
        lw = _rows.call_F(log_F, z, theta, "log_F")
        if bool((visible & ~torch.isfinite(lw)).any()):
            raise ValueError("log_F must return finite values at every visible logit (F must be finite and > 0)")
        return _rows.finish(_rows.masked_softmax_lastdim(lw, visible), visible, dim, was_numpy)
    w = _rows.call_F(F, z, theta, "F")
    bad = visible & ~(torch.isfinite(w) & (w > 0))
    if bool(bad.any()):
        bad_z = z[bad].flatten()[:3].tolist()
        raise ValueError(
            "F must return finite values > 0 at every visible logit (F(l/T) was non-positive or non-finite at "
            f"l/T = {bad_z}); pass log_F for a stable evaluation"
        )
    w = torch.where(visible, w, torch.zeros((), dtype=w.dtype, device=w.device))
    s = w.sum(dim=-1, keepdim=True)
    return _rows.finish(w / torch.where(s > 0, s, torch.ones_like(s)), visible, dim, was_numpy)


def make_general(F=None, *, log_F=None, theta=None) -> NormalizerFn:
    """Bind ``F`` (and/or ``log_F``, ``theta``) into a normaliser with the common signature.

    ``make_general(torch.exp)`` is softmax; ``make_general(lambda z: 1 + z**2)`` is the rational family of
    Reading the paper, §Lemma 1. The returned callable carries ``.F``, ``.log_F`` and ``.theta`` attributes (used by
    :func:`attn_lib.jacobian.jacobian` for the analytic Lemma-2 Jacobian).
    """
    _check_F(F, log_F, theta)

    def f(logits, temperature=1.0, dim=-1, mask=None):
        return general(logits, F, temperature=temperature, dim=dim, mask=mask, theta=theta, log_F=log_F)

    f.F = F  # type: ignore[attr-defined]
    f.log_F = log_F if (log_F is not None or F is not None) else _log_softplus  # type: ignore[attr-defined]
    f.theta = theta  # type: ignore[attr-defined]
    f.__name__ = "general"
    f.__doc__ = general.__doc__
    return f


# ----------------------------------------------------------------------------------------------------------
# sparse maps (entmax package)
# ----------------------------------------------------------------------------------------------------------
def _sparse_prepare(logits, temperature, dim, mask, floor: float, work_dtype: torch.dtype | None = None):
    """Shift by the row max, scale, clip below at ``-floor`` (outside the support), fill masked with ``-floor``.

    ``work_dtype``: compute in this dtype (the returned ``z`` has it) instead of the logits' own, which is returned
    as well: ``(z, visible, was_numpy, dim, logits_dtype)``.
    """
    x, visible, T, was_numpy, dim = _rows.prepare(logits, temperature, dim, mask)
    dtype = x.dtype
    if work_dtype is not None:
        x = x.to(work_dtype)
    z = _rows.scale(x - _rows.row_max(x, visible), T).clamp(min=-floor)
    z = torch.where(visible, z, torch.full((), -floor, dtype=z.dtype, device=z.device))
    return z, visible, was_numpy, dim, dtype


def sparsemax(logits, temperature=1.0, dim=-1, mask=None):
    r"""Sparsemax: Euclidean projection of ``l/T`` onto the probability simplex.

    .. math:: \alpha = \arg\min_{p\in\Delta}\|p - l/T\|_2^2 = [\,l/T - \tau\,]_+,\quad \sum_j\alpha_j = 1

    Computed with ``entmax.sparsemax`` on the row-max-shifted logits clipped below at ``-2`` (every
    coordinate ``< z_max - 1`` is outside the support since ``tau >= z_max - 1``, so the clip does not change the
    output). Rows sum to one; a fully masked row is all zeros.

    Reference: Martins & Astudillo 2016, arXiv:1602.02068.
    """
    from entmax import sparsemax as _sm  # entmax: imported on first use of a sparse normaliser

    z, visible, was_numpy, dim, _ = _sparse_prepare(logits, temperature, dim, mask, floor=2.0)
    return _rows.finish(_sm(z, dim=-1), visible, dim, was_numpy)


def entmax15(logits, temperature=1.0, dim=-1, mask=None):
    r"""1.5-entmax (Tsallis alpha = 1.5).

    .. math:: \alpha_j = [\,z_j/2 - \tau\,]_+^2,\quad z = l/T,\ \tau \text{ such that } \textstyle\sum_j\alpha_j = 1

    Computed with ``entmax.entmax15`` (exact sort-based algorithm) on shifted logits clipped below at ``-3``
    (coordinates ``< z_max - 2`` are outside the support). Rows sum to one; fully masked row: zeros.

    Reference: Peters, Niculae & Martins 2019, arXiv:1905.05702; cited by the paper with Martins & Astudillo 2016.
    """
    from entmax import entmax15 as _e15  # entmax: imported on first use of a sparse normaliser

    z, visible, was_numpy, dim, _ = _sparse_prepare(logits, temperature, dim, mask, floor=3.0)
    return _rows.finish(_e15(z, dim=-1), visible, dim, was_numpy)


def entmax_alpha(logits, temperature=1.0, dim=-1, mask=None, alpha=1.5, n_iter=60):
    r"""alpha-entmax for ``alpha > 1`` by bisection (``entmax.entmax_bisect``).

    .. math:: \alpha_j = [\,(\alpha-1) z_j - \tau\,]_+^{1/(\alpha-1)},\quad z = l/T,\ \textstyle\sum_j\alpha_j = 1

    ``alpha -> 1`` is softmax, ``alpha = 2`` sparsemax. The shifted logits are clipped below at
    ``-(1/(alpha-1) + 1)`` (outside the support), then bisected in float64 and cast back. Rows sum to one; fully
    masked row: zeros. ``ValueError`` unless ``alpha`` is a finite number ``> 1``.

    Reference: Peters, Niculae & Martins 2019, arXiv:1905.05702.
    """
    from entmax import entmax_bisect  # entmax: imported on first use of a sparse normaliser

    a = check_positive("alpha", alpha)
    if not a > 1:
        raise ValueError(f"alpha must be a finite number > 1 (got {alpha!r}); alpha = 1 is softmax")
    # bisection halves the interval each step: float64 is resolved long before 1000 steps, more only burn time
    n_iter = check_int("n_iter", n_iter, low=1, high=1000)
    # in float64 throughout: the floor 1/(alpha-1) + 1 is ~4.5e15 for alpha just above 1 (beyond float16)
    z, visible, was_numpy, dim, dtype = _sparse_prepare(
        logits, temperature, dim, mask, floor=1.0 / (a - 1.0) + 1.0, work_dtype=torch.float64
    )
    return _rows.finish(entmax_bisect(z, alpha=a, dim=-1, n_iter=n_iter).to(dtype), visible, dim, was_numpy)


# ----------------------------------------------------------------------------------------------------------
# length-aware and unnormalised variants
# ----------------------------------------------------------------------------------------------------------
def ssmax(logits, temperature=1.0, dim=-1, mask=None, s=0.43):
    r"""Scalable-Softmax (SSMax).

    Chapter 5, ``prop-ssmax-sharpens``; tested by
    ``tests/test_normalizers.py::test_ssmax_is_sharper_than_softmax_from_11_visible_tokens``.

    .. math:: \alpha_j = \frac{n^{s z_j}}{\sum_k n^{s z_k}} = \mathrm{softmax}\big((s\log n)\,z\big)_j,
              \quad z = l/T

    with ``n`` the number of *visible* positions of the row (so each causal row uses its own ``n = t``). For
    ``n = 1`` the single weight is 1. ``s > 0`` is the per-head scale (learned in the original; default
    ``0.43``, the value of the SSMax paper's Fig. 1 (project decision)). Because ``L`` enters the normaliser, Lemma 1's
    ``Theta(1/L)`` bound does not apply. Rows sum to one; fully masked row: zeros.

    Reference: Nakanishi 2025, "Scalable-Softmax Is Superior for Attention", arXiv:2501.19399.
    """
    s = check_positive("s", s)
    x, visible, T, was_numpy, dim = _rows.prepare(logits, temperature, dim, mask)
    n = _rows.count(visible, torch.float64).clamp(min=1)
    # s log n in float64, capped at the dtype's largest number: an infinite factor would make 0 * inf = NaN at the
    # row maximum; a finite one sends every other (negative) shifted logit to -inf or a tiny weight, as it should
    factor = (s * torch.log(n)).clamp(max=torch.finfo(x.dtype).max).to(x.dtype)
    z = _rows.scale(x - _rows.row_max(x, visible), T) * factor
    z = torch.where(visible, z, torch.zeros((), dtype=z.dtype, device=z.device))
    return _rows.finish(_rows.masked_softmax_lastdim(z, visible, shifted=True), visible, dim, was_numpy)


def sa_softmax(logits, temperature=1.0, dim=-1, mask=None, variant="normalized"):
    r"""Self-Adjust Softmax (SA-Softmax).

    ``variant="normalized"`` (default):

    .. math:: \alpha_j = \frac{z_j - \min(z_{\min},0)}{\max(0,z_{\max}) - \min(z_{\min},0)}\,
              \mathrm{softmax}(z)_j,\quad z = l/T

    ``variant="plain"``: :math:`\alpha_j = z_j\,\mathrm{softmax}(z)_j` (weights may be negative or exceed 1
    in magnitude; they scale like ``z``).

    Max/min run over visible positions. In the normalised variant the factor is in ``[0, 1]`` and is computed
    from ``l`` directly (it is invariant to ``T``), so it never overflows; when all visible logits are 0 the
    denominator vanishes and the factor is defined as 1 (plain softmax) (project decision). Rows do **not** sum to one
    (``sum <= 1`` for the normalised variant). Fully masked row: zeros.

    Reference: Zheng et al. 2025, "Self-Adjust Softmax", arXiv:2502.18277.
    """
    check_choice("variant", variant, ["normalized", "plain"])
    x, visible, T, was_numpy, dim = _rows.prepare(logits, temperature, dim, mask)
    p = _rows.masked_softmax_lastdim(_rows.scale(x - _rows.row_max(x, visible), T), visible, shifted=True)
    if variant == "plain":
        out = _rows.scale_unshifted(x, visible, T, "sa_softmax(variant='plain')") * p
    else:
        # halve before subtracting so that no difference of two finite numbers overflows
        h = x * 0.5
        lo = torch.clamp(-_rows.row_max(-h, visible, detach=False), max=0.0)
        hi = torch.clamp(_rows.row_max(h, visible, detach=False), min=0.0)
        den = hi - lo
        fac = torch.where(den > 0, (h - lo) / torch.where(den > 0, den, torch.ones_like(den)), torch.ones_like(x))
        out = fac.clamp(0.0, 1.0) * p
    return _rows.finish(out, visible, dim, was_numpy)


def softmax1(logits, temperature=1.0, dim=-1, mask=None):
    r"""Softmax off by one ("quiet softmax"): an implicit extra logit fixed at 0.

    .. math:: \alpha_j = \frac{e^{z_j}}{1 + \sum_k e^{z_k}},\quad z = l/T

    computed with ``m = max(0, max_k z_k)`` as ``exp(z_j - m) / (exp(-m) + sum_k exp(z_k - m))``. Rows sum to
    ``1 - 1/(1 + sum_k e^{z_k}) < 1`` (a head may attend to nothing). Fully masked row: zeros (the empty sum).

    Reference: E. Miller, "Attention Is Off By One" (2023, blog); also ``softmax_1`` in Flaxformer.
    """
    x, visible, T, was_numpy, dim = _rows.prepare(logits, temperature, dim, mask)
    # shift by M = max(0, max_k l_k) before scaling: z - m = (l - M) / T <= 0 and -m = -M / T never overflow
    M = torch.clamp(_rows.row_max(x, visible), min=0.0)
    e = torch.where(visible, torch.exp(_rows.scale(x - M, T)), torch.zeros((), dtype=x.dtype, device=x.device))
    return _rows.finish(e / (torch.exp(_rows.scale(-M, T)) + e.sum(dim=-1, keepdim=True)), visible, dim, was_numpy)


def sigmoid(logits, temperature=1.0, dim=-1, mask=None, bias=None):
    r"""Sigmoid attention with the ``-log n`` bias.

    .. math:: \alpha_j = \sigma(z_j + b),\quad b = -\log n,\quad z = l/T

    with ``n`` the number of visible positions of the row (``bias`` overrides ``b`` with a fixed number).
    Each weight is in ``(0, 1)`` independently; rows do **not** sum to one (with ``b = -log n`` the sum is
    ``~1`` when logits are near 0). Fully masked row: zeros.

    Reference: Ramapuram et al. 2024, "Theory, Analysis, and Best Practices for Sigmoid Self-Attention",
    arXiv:2409.04431.
    """
    x, visible, T, was_numpy, dim = _rows.prepare(logits, temperature, dim, mask)
    z = _rows.scale(x, T)
    if bias is None:
        b = -torch.log(_rows.count(visible, z.dtype).clamp(min=1))
    else:
        b = torch.tensor(check_finite("bias", bias), dtype=z.dtype, device=z.device)  # a bool is not a number
    return _rows.finish(torch.sigmoid(z + b), visible, dim, was_numpy)


def softpick(logits, temperature=1.0, dim=-1, mask=None, eps=1e-8):
    r"""Softpick (rectified softmax).

    .. math:: \alpha_j = \frac{\mathrm{ReLU}(e^{z_j} - 1)}{\sum_k |e^{z_k} - 1| + \epsilon},\quad z = l/T

    evaluated exactly (not approximately) after multiplying numerator and denominator by ``e^{-m}``,
    ``m = max(0, max_k z_k)``: ``ReLU(e^{z_j-m} - e^{-m}) / (sum_k |e^{z_k-m} - e^{-m}| + eps e^{-m})``.
    Weights are 0 for ``z_j <= 0``; rows sum to ``<= 1`` and a row of non-positive logits is all zeros.
    Fully masked row: zeros. ``eps > 0`` (default ``1e-8`` as in the reference code).

    Reference: Zuhri et al. 2025, "Softpick: No Attention Sink, No Massive Activations with Rectified
    Softmax", arXiv:2504.20966.
    """
    eps = check_positive("eps", eps)
    x, visible, T, was_numpy, dim = _rows.prepare(logits, temperature, dim, mask)
    # as in softmax1: shift by M = max(0, max_k l_k) before scaling, so no exponent overflows for any T
    M = torch.clamp(_rows.row_max(x, visible), min=0.0)
    em = torch.exp(_rows.scale(-M, T))
    d = torch.exp(_rows.scale(x - M, T)) - em
    d = torch.where(visible, d, torch.zeros((), dtype=x.dtype, device=x.device))
    eps_t = min(eps, torch.finfo(x.dtype).max)  # an eps beyond the dtype's range would give inf * 0 = NaN
    den = d.abs().sum(dim=-1, keepdim=True) + eps_t * em
    den = torch.where(den > 0, den, torch.full_like(den, torch.finfo(x.dtype).tiny))
    return _rows.finish(torch.relu(d) / den, visible, dim, was_numpy)


# ----------------------------------------------------------------------------------------------------------
# top-k
# ----------------------------------------------------------------------------------------------------------
def topk_support(logits, k, dim=-1, mask=None):
    """The positions :func:`topk` keeps: the ``k`` largest visible logits of each row, as a bool tensor.

    Ties are broken deterministically: among equal logits the **lower index wins** (a stable descending sort).
    A row with ``t <= k`` visible positions keeps all of them; masked positions and ``-inf`` logits are never kept.
    ``logits``, ``dim`` and ``mask`` as in the common signature (module docstring), ``k`` as for :func:`topk`; the
    result has the shape of ``logits`` (numpy in, numpy out).
    """
    k = _check_k(k)
    x, visible, _, was_numpy, dim = _rows.prepare(logits, 1.0, dim, mask)
    keep = _topk_keep(x, visible, k).movedim(-1, dim)
    return keep.cpu().numpy() if was_numpy else keep


def _check_k(k: Any) -> int:
    if k is None:
        raise ValueError("k must be given for topk: an integer >= 1 (e.g. get('topk', k=8))")
    return check_int("k", k, low=1)


def _topk_keep(x: torch.Tensor, visible: torch.Tensor, k: int) -> torch.Tensor:
    """Bool (..., L): the ``k`` largest visible entries of each row of ``x`` (last axis), lower index first on ties."""
    L = x.shape[-1]
    if k >= L:
        return visible.clone()
    key = torch.where(visible, x.detach(), torch.full((), -math.inf, dtype=x.dtype, device=x.device))
    # the k-th largest value: the smallest of the k largest (unsorted: half the time of a sorted top-k at k = 256);
    # everything above it is kept, and of the entries equal to it the lowest indices fill the remaining places
    # (torch.topk itself does not promise an order among ties)
    kth = torch.topk(key, k, dim=-1, sorted=False).values.amin(dim=-1, keepdim=True)
    above = key > kth
    tied = key == kth
    room = k - above.sum(dim=-1, keepdim=True)
    keep = above | (tied & (torch.cumsum(tied.to(torch.int32), dim=-1) <= room))
    return keep & visible


def topk(logits, temperature=1.0, dim=-1, mask=None, k=None):
    r"""Top-k attention: softmax over the ``k`` largest logits of each row, exactly 0 elsewhere.

    Chapter 7, ``prop-topk-floor``; tested by ``tests/test_topk.py::test_topk_largest_weight_is_at_least_one_over_k``.

    .. math:: \alpha_j = \frac{e^{z_j}\,[j \in K]}{\sum_{i \in K} e^{z_i}},\quad z = l/T,\quad
              K = \text{the } k \text{ largest visible } l_j

    * ``k``: an integer ``>= 1`` (required; ``ValueError`` naming ``k`` otherwise). A row with at most ``k``
      visible positions (``k`` larger than its visible length, e.g. the early rows of causal attention) is **plain
      softmax** over its visible positions.
    * Ties at the ``k``-th largest logit: the **lower index wins** (deterministic, see :func:`topk_support`).
    * Masks (and ``-inf`` logits) are respected: masked positions are never selected and get exactly 0; a fully
      masked row is all zeros.
    * Stable: the exponentials are taken after subtracting the row maximum (which is always kept).

    Rows sum to one. The selection does not depend on ``T`` (``T > 0`` keeps the order of the logits). Almost
    everywhere (away from ties at the ``k``-th logit) the Jacobian is softmax's on the kept set and 0 elsewhere,
    :math:`J = (\mathrm{diag}\,\alpha - \alpha\alpha^\top)/T` (:func:`attn_lib.jacobian.topk_jacobian`).

    Reference: top-k attention as in Gupta et al. 2021, "Memory-efficient Transformers via Top-k Attention",
    arXiv:2106.06899; recommended by the paper for ``L >> k`` (the book's appendix "Reading the paper").
    """
    k = _check_k(k)
    x, visible, T, was_numpy, dim = _rows.prepare(logits, temperature, dim, mask)
    keep = _topk_keep(x, visible, k)
    z = _rows.scale(x - _rows.row_max(x, visible), T)
    zero = torch.zeros((), dtype=z.dtype, device=z.device)
    out = _rows.masked_softmax_lastdim(torch.where(keep, z, zero), keep, shifted=True)  # the maximum is kept
    return _rows.finish(out, keep, dim, was_numpy)


# ----------------------------------------------------------------------------------------------------------
# registry: one entry describes a normaliser entirely; every list of names elsewhere is read from it
# ----------------------------------------------------------------------------------------------------------
#: The families of :attr:`Normalizer.family`.
FAMILIES = {
    "eq3": "F(z) / sum F(z) with a positive F, the paper's Eq. (3): Lemma 1 and Corollary 3 apply",
    "sparse": "a projection onto the simplex with exact zeros (sparsemax, entmax)",
    "length-aware": "the number of visible tokens enters the map",
    "top-k": "softmax over the k largest logits, exact zeros elsewhere",
    "unnormalised": "rows need not sum to one",
}

#: The analytic Jacobians :func:`attn_lib.jacobian.jacobian` knows (:attr:`Normalizer.jacobian`): ``"softmax"`` is
#: ``(diag alpha - alpha alpha^T) / T`` of the normaliser's own weights (softmax; top-k off ties), ``"general"`` the
#: Lemma-2 form of a :func:`make_general` normaliser.
JACOBIANS = ("softmax", "general")


@dataclasses.dataclass(frozen=True)
class Normalizer:
    """One registered normaliser: what the library, the CLI, the book and the tests read about it.

    ``name``: the name :func:`get` takes (an identifier); ``fn``: the function, in the module's common signature
    ``fn(logits, temperature=1.0, dim=-1, mask=None, **params) -> weights``; ``family``: a key of :data:`FAMILIES`;
    ``sums_to_one``: every non-empty row sums to one (``available(sums_to_one=True)``); ``display``: the name in
    prose, tables and help texts (e.g. ``"1.5-entmax"``); ``compared``: in the book's comparisons
    (``available(compared=True)``: chapter 5's remedies, chapter 7's limits and live swap, the CLI's
    ``compare-normalizers``), so it must run without parameters; ``jacobian``: the analytic Jacobian of
    :func:`attn_lib.jacobian.jacobian`, one of :data:`JACOBIANS` (``None``: autograd).
    """

    name: str
    fn: NormalizerFn
    family: str
    sums_to_one: bool
    display: str
    compared: bool = True
    jacobian: str | None = None

    def __post_init__(self) -> None:
        if not (isinstance(self.name, str) and self.name.isidentifier()):
            raise ValueError(f"name must be an identifier such as 'scaled_softmax' (got {self.name!r})")
        if not callable(self.fn):
            raise ValueError(f"fn must be callable (got {type(self.fn).__name__})")
        check_choice("family", self.family, list(FAMILIES))
        check_choice("jacobian", self.jacobian, [*JACOBIANS, None])
        for flag in ("sums_to_one", "compared"):
            check_bool(flag, getattr(self, flag))
        if not (isinstance(self.display, str) and self.display.strip()):
            raise ValueError(f"display must be a non-empty string (got {self.display!r})")


_REGISTRY: dict[str, Normalizer] = {}
_BUILT_IN: frozenset[str] = frozenset()


def register(entry: Normalizer) -> Normalizer:
    """Add ``entry`` to the registry (after every normaliser already there); it reaches :func:`get`,
    :func:`available` and everything that reads it (chapter 5's remedies, chapter 7's comparison, the CLI's help,
    the report's tables). Sets ``entry.fn.name = entry.name`` and returns ``entry``, whose ``name`` must not be
    registered yet.
    """
    if not isinstance(entry, Normalizer):
        raise ValueError(f"entry must be an attn_lib.normalizers.Normalizer (got {type(entry).__name__})")
    if entry.name in _REGISTRY:
        raise ValueError(f"name {entry.name!r} is registered already; unregister it first")
    entry.fn.name = entry.name  # type: ignore[attr-defined]
    _REGISTRY[entry.name] = entry
    return entry


def unregister(name: str) -> Normalizer:
    """Remove the normaliser ``name`` added by :func:`register` and return its entry (for tests); the built-in ones
    stay."""
    if name in _BUILT_IN:
        raise ValueError(f"name {name!r} is a built-in normaliser, which cannot be unregistered")
    added = [n for n in _REGISTRY if n not in _BUILT_IN]
    if name not in added:
        raise ValueError(f"name must be a normaliser added by register(); the added ones are {added} (got {name!r})")
    return _REGISTRY.pop(name)


def spec(name: str) -> Normalizer:
    """The registry entry (a :class:`Normalizer`) of the normaliser ``name``, one of :func:`available`."""
    check_choice("name", name, available())
    return _REGISTRY[name]


def available(**where) -> list[str]:
    """The names :func:`get` accepts (a list of str), in registration order, read from the registry at every call (a
    normaliser registered later is in it).

    ``**where`` keeps the entries whose :class:`Normalizer` fields have these values, e.g. ``available(compared=True)``
    (the book's comparisons, in display order), ``available(sums_to_one=True)``, ``available(jacobian="softmax")``
    (Jacobian ``(diag alpha - alpha alpha^T) / T`` of their own weights; the top-k form holds off ties),
    ``available(family="sparse")``.
    """
    fields = [f.name for f in dataclasses.fields(Normalizer) if f.name not in ("name", "fn")]
    for key in where:
        check_choice("where", key, fields)
    return [n for n, e in _REGISTRY.items() if all(getattr(e, k) == v for k, v in where.items())]


def describe(names) -> str:
    """The display names of the registered normalisers ``names`` (e.g. ``available(compared=True)``) as prose, for
    help texts and captions: ``"softmax, sparsemax and 1.5-entmax"`` (``""`` for no name)."""
    shown = [spec(n).display for n in names]
    return ", ".join(shown[:-1]) + (" and " if len(shown) > 1 else "") + (shown[-1] if shown else "")


for _entry in (
    Normalizer("softmax", softmax, "eq3", True, "softmax", jacobian="softmax"),
    Normalizer("general", general, "eq3", True, "general F/ΣF (Eq. 3)", compared=False, jacobian="general"),
    Normalizer("sparsemax", sparsemax, "sparse", True, "sparsemax"),
    Normalizer("entmax15", entmax15, "sparse", True, "1.5-entmax"),
    Normalizer("entmax_alpha", entmax_alpha, "sparse", True, "α-entmax", compared=False),
    Normalizer("ssmax", ssmax, "length-aware", True, "SSMax"),
    Normalizer("sa_softmax", sa_softmax, "unnormalised", False, "SA-softmax"),
    Normalizer("softmax1", softmax1, "unnormalised", False, "softmax1"),
    Normalizer("sigmoid", sigmoid, "unnormalised", False, "sigmoid"),
    Normalizer("softpick", softpick, "unnormalised", False, "softpick"),
    Normalizer("topk", topk, "top-k", True, "top-k", compared=False, jacobian="softmax"),
):
    register(_entry)
_BUILT_IN = frozenset(_REGISTRY)
del _entry


def get(name: str, **params) -> NormalizerFn:
    """Return the normaliser ``name`` as ``f(logits, temperature=1.0, dim=-1, mask=None)``.

    Extra keyword ``params`` are bound, e.g. ``get("entmax_alpha", alpha=1.75)``, ``get("ssmax", s=1.0)``,
    ``get("sigmoid", bias=0.0)``, ``get("softpick", eps=1e-6)``, ``get("sa_softmax", variant="plain")``,
    ``get("general", F=..., log_F=..., theta=...)`` (``general`` without ``F`` uses ``F = softplus``),
    ``get("topk", k=8)`` (``k`` is required for ``topk`` and checked here: an integer ``>= 1``).
    The returned callable has ``.name`` (and ``params`` bound via ``functools.partial``).
    """
    check_choice("name", name, available())
    if name == "general":
        f = make_general(params.pop("F", None), log_F=params.pop("log_F", None), theta=params.pop("theta", None))
        if params:
            raise ValueError(f"params for 'general' must be among F, log_F, theta (got {sorted(params)})")
        f.name = "general"  # type: ignore[attr-defined]
        return f
    base = _REGISTRY[name].fn
    if name == "topk":
        params["k"] = _check_k(params.get("k"))
    if not params:
        return base
    allowed = [p for p in inspect.signature(base).parameters if p not in ("logits", "temperature", "dim", "mask")]
    for k in params:
        if k not in allowed:
            raise ValueError(f"params for {name!r} must be among {allowed} (got {k!r})")
    f = functools.partial(base, **params)
    functools.update_wrapper(f, base)
    f.name = name  # type: ignore[attr-defined]
    return f
