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

Normalisers whose rows sum to one: ``softmax``, ``general``, ``sparsemax``, ``entmax15``, ``entmax_alpha``,
``ssmax``, ``topk``. Rows that need **not** sum to one: ``softmax1`` (sum < 1), ``sigmoid`` (any sum in (0, n)),
``softpick`` (sum <= 1, can be 0) and ``sa_softmax`` (sum <= 1).

Numerical stability: all exponentials are evaluated after subtracting the row maximum (log-sum-exp), the
sparse maps are evaluated on shifted logits clipped below at a value that provably lies outside the support
(the output is unchanged), so every normaliser is finite for ``T`` in ``[1e-4, 1e4]`` and logits up to
``±1e4`` in float32 and float64.

Use :func:`get` to look a normaliser up by name and :func:`available` to list the names.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from ._validation import check_choice, check_finite, check_int, check_positive

__all__ = [
    "available",
    "get",
    "softmax",
    "general",
    "make_general",
    "sparsemax",
    "entmax15",
    "entmax_alpha",
    "ssmax",
    "sa_softmax",
    "softmax1",
    "sigmoid",
    "softpick",
    "topk",
    "SUMS_TO_ONE",
]

Normalizer = Callable[..., Any]


# ----------------------------------------------------------------------------------------------------------
# shared plumbing
# ----------------------------------------------------------------------------------------------------------
def _as_tensor(logits: Any) -> tuple[torch.Tensor, bool]:
    """Return ``(tensor, was_numpy)``; integer input is promoted to the default float dtype."""
    was_numpy = isinstance(logits, np.ndarray)
    if isinstance(logits, torch.Tensor):
        t = logits
    else:
        try:
            t = torch.as_tensor(np.asarray(logits))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"logits must be a tensor or array of real numbers (got {type(logits).__name__})") from exc
    if t.dtype == torch.bool or t.is_complex():
        raise ValueError(f"logits must hold real numbers (got dtype {t.dtype})")
    if t.device.type == "meta":
        raise ValueError("logits are on the 'meta' device, which holds no values; pass a tensor with data")
    if not t.is_floating_point():
        t = t.to(torch.get_default_dtype())
    return t, was_numpy


def _as_mask(mask: Any, shape: tuple, device, *, name: str = "mask", target: str = "logits") -> torch.Tensor:
    """``mask`` as a bool tensor on ``device`` broadcast to ``shape`` (True = visible), or a ``ValueError`` that says
    what is wrong: not bool, on a device it cannot be copied from (e.g. ``meta``), or a shape that does not
    broadcast. Shared by :mod:`attn_lib.jacobian`."""
    if isinstance(mask, torch.Tensor):
        m = mask
    else:
        try:
            m = torch.as_tensor(np.asarray(mask))
        except (TypeError, ValueError, RuntimeError):
            raise ValueError(f"{name} must be a bool tensor with True = visible (got {type(mask).__name__})") from None
    if m.dtype != torch.bool:
        raise ValueError(f"{name} must be a bool tensor with True = visible (got dtype {m.dtype})")
    if m.device.type == "meta":
        raise ValueError(f"{name} is on the 'meta' device, which holds no values; pass a mask with data")
    try:
        m = m.to(device)
    except (RuntimeError, NotImplementedError) as exc:
        raise ValueError(f"{name} cannot be moved from {m.device} to the {target}' device {device} ({exc})") from None
    try:
        return torch.broadcast_to(m, tuple(shape))
    except RuntimeError:
        raise ValueError(f"{name} shape {tuple(m.shape)} does not broadcast to {target} shape {tuple(shape)}") from None


def _prepare(logits: Any, temperature: Any, dim: int, mask: Any):
    """Validate and move ``dim`` last.

    Returns ``(x, visible, T, was_numpy, dim)`` where ``x`` has the reduced axis last and masked/-inf entries
    replaced by 0 (so no non-finite value ever enters the arithmetic), ``visible`` is a bool tensor of the same
    shape as ``x``.
    """
    T = check_positive("temperature", temperature)
    x, was_numpy = _as_tensor(logits)
    if x.dim() == 0:
        raise ValueError("logits must have at least one dimension (got a scalar)")
    nd = x.dim()
    dim = check_int("dim", dim, low=-nd, high=nd - 1)  # NumPy and 0-d tensor integers are integers too
    if x.shape[dim] == 0:
        raise ValueError(f"logits must have at least one position along dim={dim} (got shape {tuple(x.shape)})")
    if mask is None:
        visible = torch.ones(x.shape, dtype=torch.bool, device=x.device)
    else:
        visible = _as_mask(mask, x.shape, x.device)
    visible = visible & (x != -math.inf)
    x = torch.where(visible, x, torch.zeros((), dtype=x.dtype, device=x.device))
    # one reduction instead of an elementwise check: the sum is finite unless a visible logit is NaN or +-inf (or
    # finite logits overflow the sum, which the exact check below then clears)
    if not bool(torch.isfinite(x.sum())) and bool((~torch.isfinite(x)).any()):
        raise ValueError("logits must be finite at visible positions (found NaN or +inf); use mask for hidden ones")
    x = x.movedim(dim, -1)
    visible = visible.movedim(dim, -1)
    return x, visible, T, was_numpy, dim


def _finish(out: torch.Tensor, visible: torch.Tensor, dim: int, was_numpy: bool):
    out = torch.where(visible, out, torch.zeros((), dtype=out.dtype, device=out.device))
    out = out.movedim(-1, dim)
    if was_numpy:
        return out.detach().cpu().numpy()
    return out


def _divide(x: torch.Tensor, T: float) -> torch.Tensor:
    """``x / T``, in float64 when ``T`` lies outside the normal range of ``x``'s dtype.

    A Python scalar is rounded to the tensor's dtype before the division, so e.g. ``T = 1e-46`` would become ``0`` in
    float32 and ``0 / 0`` a NaN; float64 holds every temperature that validation accepts.
    """
    fi = torch.finfo(x.dtype)
    if fi.tiny <= T <= fi.max:
        return x / T
    return (x.to(torch.float64) / T).clamp(-fi.max, fi.max).to(x.dtype)


def _scale(x: torch.Tensor, T: float) -> torch.Tensor:
    """``x / T`` clipped to +-finfo.max/8 so that differences of two scaled logits never overflow.

    Exact (unclipped) where it matters: callers pass shifted logits ``x - max <= 0`` whenever the normaliser allows
    it, and a clipped value there only stands for an exponent that underflows to 0 anyway.
    """
    big = torch.finfo(x.dtype).max / 8
    return _divide(x, T).clamp(-big, big)


def _scale_unshifted(x: torch.Tensor, visible: torch.Tensor, T: float, who: str) -> torch.Tensor:
    """``x / T`` for normalisers that cannot shift the logits first (``general``, plain ``sa_softmax``).

    Clipping would silently change their output, so a visible ``|x / T|`` beyond ``finfo.max / 8`` raises
    ``ValueError`` instead.
    """
    big = torch.finfo(x.dtype).max / 8
    z = _divide(x, T)
    if bool((visible & ~(z.abs() <= big)).any()):
        raise ValueError(
            f"temperature={T!r} is too small for these logits in {who}: logits / temperature exceeds the "
            f"{str(x.dtype).removeprefix('torch.')} range (|l / T| must stay below {big:.3g}); use a larger "
            "temperature or float64 logits"
        )
    return z.clamp(-big, big)


def _row_max(z: torch.Tensor, visible: torch.Tensor, detach: bool = True) -> torch.Tensor:
    """Max over visible positions (0 for a fully masked row).

    Detached by default: every caller that uses it as a shift is exactly invariant to the shift.
    """
    neg = torch.full((), -torch.finfo(z.dtype).max, dtype=z.dtype, device=z.device)
    m = torch.where(visible, z, neg).amax(dim=-1, keepdim=True)
    m = torch.where(visible.any(dim=-1, keepdim=True), m, torch.zeros_like(m))
    return m.detach() if detach else m


def _row_min(z: torch.Tensor, visible: torch.Tensor) -> torch.Tensor:
    pos = torch.full((), torch.finfo(z.dtype).max, dtype=z.dtype, device=z.device)
    m = torch.where(visible, z, pos).amin(dim=-1, keepdim=True)
    return torch.where(visible.any(dim=-1, keepdim=True), m, torch.zeros_like(m))


def _count(visible: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return visible.sum(dim=-1, keepdim=True).to(dtype)


def _masked_softmax_lastdim(z: torch.Tensor, visible: torch.Tensor) -> torch.Tensor:
    """Stable softmax of ``z`` over visible positions of the last axis; zeros on a fully masked row."""
    m = _row_max(z, visible)
    e = torch.where(visible, torch.exp(z - m), torch.zeros((), dtype=z.dtype, device=z.device))
    s = e.sum(dim=-1, keepdim=True)
    return e / torch.where(s > 0, s, torch.ones_like(s))


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
    x, visible, T, was_numpy, dim = _prepare(logits, temperature, dim, mask)
    m = _row_max(x, visible)
    z = _scale(x - m, T)  # <= 0 at visible positions, no overflow for any finite input
    e = torch.where(visible, torch.exp(z), torch.zeros((), dtype=x.dtype, device=x.device))
    s = e.sum(dim=-1, keepdim=True)
    out = e / torch.where(s > 0, s, torch.ones_like(s))
    return _finish(out, visible, dim, was_numpy)


def _log_softplus(z: torch.Tensor) -> torch.Tensor:
    """``log(softplus(z))`` without underflow: equals ``z`` (to rounding) for very negative ``z``."""
    sp = torch.nn.functional.softplus(z)
    safe = torch.where(z > -30, sp, torch.ones_like(sp))
    return torch.where(z > -30, torch.log(safe), z + torch.log1p(-0.5 * torch.exp(torch.clamp(z, max=-30))))


def _softplus(z: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.softplus(z)


def _check_F(F: Any, log_F: Any, theta: Any) -> None:
    """``F``/``log_F`` must be callables (or None); ``theta`` needs one of them (the default softplus has none)."""
    if F is not None and not callable(F):
        raise ValueError(f"F must be callable or None (got {type(F).__name__})")
    if log_F is not None and not callable(log_F):
        raise ValueError(f"log_F must be callable or None (got {type(log_F).__name__})")
    if theta is not None and F is None and log_F is None:
        raise ValueError(
            f"theta is a parameter of a user-supplied F or log_F (got theta={theta!r} without either); "
            "the default F = softplus takes no parameter"
        )


def _call_F(F: Callable, z: torch.Tensor, theta: Any, name: str = "F") -> torch.Tensor:
    """``F(z)`` or ``F(z, theta)`` as a tensor of ``z``'s shape and dtype; ``ValueError`` naming ``name`` if it is not
    an elementwise map to real numbers."""
    out = F(z) if theta is None else F(z, theta)
    if not isinstance(out, torch.Tensor):
        try:
            out = torch.as_tensor(np.asarray(out, dtype=np.float64), device=z.device)
        except (TypeError, ValueError):
            raise ValueError(f"{name} must return a tensor of real numbers (got {type(out).__name__})") from None
    if out.dtype == torch.bool or out.is_complex():
        raise ValueError(f"{name} must return real numbers (got dtype {out.dtype})")
    if out.shape != z.shape:
        try:
            out = torch.broadcast_to(out, z.shape)
        except RuntimeError:
            raise ValueError(
                f"{name} must act elementwise: {name}(z) has shape {tuple(out.shape)}, z has {tuple(z.shape)}"
            ) from None
    return out.to(z.dtype)


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
    x, visible, T, was_numpy, dim = _prepare(logits, temperature, dim, mask)
    z = _scale_unshifted(x, visible, T, "general")
    if F is None and log_F is None:
        log_F = _log_softplus
    if log_F is not None:
        lw = _call_F(log_F, z, theta, "log_F")
        if bool((visible & ~torch.isfinite(lw)).any()):
            raise ValueError("log_F must return finite values at every visible logit (F must be finite and > 0)")
        out = _masked_softmax_lastdim(lw, visible)
        return _finish(out, visible, dim, was_numpy)
    w = _call_F(F, z, theta, "F")
    bad = visible & ~(torch.isfinite(w) & (w > 0))
    if bool(bad.any()):
        bad_z = z[bad].flatten()[:3].tolist()
        raise ValueError(
            "F must return finite values > 0 at every visible logit (F(l/T) was non-positive or non-finite at "
            f"l/T = {bad_z}); pass log_F for a stable evaluation"
        )
    w = torch.where(visible, w, torch.zeros((), dtype=w.dtype, device=w.device))
    s = w.sum(dim=-1, keepdim=True)
    out = w / torch.where(s > 0, s, torch.ones_like(s))
    return _finish(out, visible, dim, was_numpy)


def make_general(F=None, *, log_F=None, theta=None) -> Normalizer:
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
    x, visible, T, was_numpy, dim = _prepare(logits, temperature, dim, mask)
    dtype = x.dtype
    if work_dtype is not None:
        x = x.to(work_dtype)
    m = _row_max(x, visible)
    z = _scale(x - m, T).clamp(min=-floor)
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
    from entmax import sparsemax as _sm

    z, visible, was_numpy, dim, _ = _sparse_prepare(logits, temperature, dim, mask, floor=2.0)
    out = _sm(z, dim=-1)
    return _finish(out, visible, dim, was_numpy)


def entmax15(logits, temperature=1.0, dim=-1, mask=None):
    r"""1.5-entmax (Tsallis alpha = 1.5).

    .. math:: \alpha_j = [\,z_j/2 - \tau\,]_+^2,\quad z = l/T,\ \tau \text{ such that } \textstyle\sum_j\alpha_j = 1

    Computed with ``entmax.entmax15`` (exact sort-based algorithm) on shifted logits clipped below at ``-3``
    (coordinates ``< z_max - 2`` are outside the support). Rows sum to one; fully masked row: zeros.

    Reference: Peters, Niculae & Martins 2019, arXiv:1905.05702; cited by the paper with Martins & Astudillo 2016.
    """
    from entmax import entmax15 as _e15

    z, visible, was_numpy, dim, _ = _sparse_prepare(logits, temperature, dim, mask, floor=3.0)
    out = _e15(z, dim=-1)
    return _finish(out, visible, dim, was_numpy)


def entmax_alpha(logits, temperature=1.0, dim=-1, mask=None, alpha=1.5, n_iter=60):
    r"""alpha-entmax for ``alpha > 1`` by bisection (``entmax.entmax_bisect``).

    .. math:: \alpha_j = [\,(\alpha-1) z_j - \tau\,]_+^{1/(\alpha-1)},\quad z = l/T,\ \textstyle\sum_j\alpha_j = 1

    ``alpha -> 1`` is softmax, ``alpha = 2`` sparsemax. The shifted logits are clipped below at
    ``-(1/(alpha-1) + 1)`` (outside the support), then bisected in float64 and cast back. Rows sum to one; fully
    masked row: zeros. ``ValueError`` unless ``alpha`` is a finite number ``> 1``.

    Reference: Peters, Niculae & Martins 2019, arXiv:1905.05702.
    """
    from entmax import entmax_bisect

    a = check_positive("alpha", alpha)
    if not a > 1:
        raise ValueError(f"alpha must be a finite number > 1 (got {alpha!r}); alpha = 1 is softmax")
    # bisection halves the interval each step: float64 is resolved long before 1000 steps, more only burn time
    n_iter = check_int("n_iter", n_iter, low=1, high=1000)
    # in float64 throughout: the floor 1/(alpha-1) + 1 is ~4.5e15 for alpha just above 1 (beyond float16)
    z, visible, was_numpy, dim, dtype = _sparse_prepare(
        logits, temperature, dim, mask, floor=1.0 / (a - 1.0) + 1.0, work_dtype=torch.float64
    )
    out = entmax_bisect(z, alpha=a, dim=-1, n_iter=n_iter).to(dtype)
    return _finish(out, visible, dim, was_numpy)


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
    x, visible, T, was_numpy, dim = _prepare(logits, temperature, dim, mask)
    n = _count(visible, torch.float64).clamp(min=1)
    # s log n in float64, capped at the dtype's largest number: an infinite factor would make 0 * inf = NaN at the
    # row maximum; a finite one sends every other (negative) shifted logit to -inf or a tiny weight, as it should
    factor = (s * torch.log(n)).clamp(max=torch.finfo(x.dtype).max).to(x.dtype)
    m = _row_max(x, visible)
    z = _scale(x - m, T) * factor
    z = torch.where(visible, z, torch.zeros((), dtype=z.dtype, device=z.device))
    out = _masked_softmax_lastdim(z, visible)
    return _finish(out, visible, dim, was_numpy)


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
    x, visible, T, was_numpy, dim = _prepare(logits, temperature, dim, mask)
    m = _row_max(x, visible)
    p = torch.where(visible, torch.exp(_scale(x - m, T)), torch.zeros((), dtype=x.dtype, device=x.device))
    ssum = p.sum(dim=-1, keepdim=True)
    p = p / torch.where(ssum > 0, ssum, torch.ones_like(ssum))
    if variant == "plain":
        out = _scale_unshifted(x, visible, T, "sa_softmax(variant='plain')") * p
    else:
        # halve before subtracting so that no difference of two finite numbers overflows
        h = x * 0.5
        lo = torch.clamp(_row_min(h, visible), max=0.0)
        hi = torch.clamp(_row_max(h, visible, detach=False), min=0.0)
        den = hi - lo
        fac = torch.where(den > 0, (h - lo) / torch.where(den > 0, den, torch.ones_like(den)), torch.ones_like(x))
        out = fac.clamp(0.0, 1.0) * p
    return _finish(out, visible, dim, was_numpy)


def softmax1(logits, temperature=1.0, dim=-1, mask=None):
    r"""Softmax off by one ("quiet softmax"): an implicit extra logit fixed at 0.

    .. math:: \alpha_j = \frac{e^{z_j}}{1 + \sum_k e^{z_k}},\quad z = l/T

    computed with ``m = max(0, max_k z_k)`` as ``exp(z_j - m) / (exp(-m) + sum_k exp(z_k - m))``. Rows sum to
    ``1 - 1/(1 + sum_k e^{z_k}) < 1`` (a head may attend to nothing). Fully masked row: zeros (the empty sum).

    Reference: E. Miller, "Attention Is Off By One" (2023, blog); also ``softmax_1`` in Flaxformer.
    """
    x, visible, T, was_numpy, dim = _prepare(logits, temperature, dim, mask)
    # shift by M = max(0, max_k l_k) before scaling: z - m = (l - M) / T <= 0 and -m = -M / T never overflow
    M = torch.clamp(_row_max(x, visible), min=0.0)
    e = torch.where(visible, torch.exp(_scale(x - M, T)), torch.zeros((), dtype=x.dtype, device=x.device))
    out = e / (torch.exp(_scale(-M, T)) + e.sum(dim=-1, keepdim=True))
    return _finish(out, visible, dim, was_numpy)


def sigmoid(logits, temperature=1.0, dim=-1, mask=None, bias=None):
    r"""Sigmoid attention with the ``-log n`` bias.

    .. math:: \alpha_j = \sigma(z_j + b),\quad b = -\log n,\quad z = l/T

    with ``n`` the number of visible positions of the row (``bias`` overrides ``b`` with a fixed number).
    Each weight is in ``(0, 1)`` independently; rows do **not** sum to one (with ``b = -log n`` the sum is
    ``~1`` when logits are near 0). Fully masked row: zeros.

    Reference: Ramapuram et al. 2024, "Theory, Analysis, and Best Practices for Sigmoid Self-Attention",
    arXiv:2409.04431.
    """
    x, visible, T, was_numpy, dim = _prepare(logits, temperature, dim, mask)
    z = _scale(x, T)
    if bias is None:
        b = -torch.log(_count(visible, z.dtype).clamp(min=1))
    else:
        bf = check_finite("bias", bias)  # a bool is not a number
        b = torch.tensor(bf, dtype=z.dtype, device=z.device)
    out = torch.sigmoid(z + b)
    return _finish(out, visible, dim, was_numpy)


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
    x, visible, T, was_numpy, dim = _prepare(logits, temperature, dim, mask)
    # as in softmax1: shift by M = max(0, max_k l_k) before scaling, so no exponent overflows for any T
    M = torch.clamp(_row_max(x, visible), min=0.0)
    em = torch.exp(_scale(-M, T))
    d = torch.exp(_scale(x - M, T)) - em
    d = torch.where(visible, d, torch.zeros((), dtype=x.dtype, device=x.device))
    eps_t = min(eps, torch.finfo(x.dtype).max)  # an eps beyond the dtype's range would give inf * 0 = NaN
    den = d.abs().sum(dim=-1, keepdim=True) + eps_t * em
    den = torch.where(den > 0, den, torch.full_like(den, torch.finfo(x.dtype).tiny))
    out = torch.relu(d) / den
    return _finish(out, visible, dim, was_numpy)


# ----------------------------------------------------------------------------------------------------------
# top-k
# ----------------------------------------------------------------------------------------------------------
def topk_support(logits, k, dim=-1, mask=None):
    """The positions :func:`topk` keeps: the ``k`` largest visible logits of each row, as a bool tensor.

    Ties are broken deterministically: among equal logits the **lower index wins** (a stable descending sort).
    A row with ``t <= k`` visible positions keeps all of them; masked positions and ``-inf`` logits are never kept.

    Parameters
    ----------
    logits : tensor or array, shape (..., L)
        Logits (the reduced axis is ``dim``).
    k : int
        Number of positions kept per row, an integer ``>= 1``.
    dim : int
        The reduced axis.
    mask : bool tensor, optional
        ``True`` = visible, broadcastable to ``logits``.

    Returns
    -------
    torch.Tensor or numpy.ndarray
        Bool, the shape of ``logits`` (numpy in, numpy out).
    """
    k = _check_k(k)
    x, visible, _, was_numpy, dim = _prepare(logits, 1.0, dim, mask)
    keep = _topk_keep(x, visible, k)
    keep = keep.movedim(-1, dim)
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
    # the k-th largest value by a partial sort; everything above it is kept, and of the entries equal to it the
    # lowest indices fill the remaining places (torch.topk itself does not promise an order among ties)
    kth = torch.topk(key, k, dim=-1, sorted=True).values[..., -1:]
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

    Parameters
    ----------
    logits : tensor or array, shape (..., L)
        Logits; any leading dimensions.
    temperature : float
        ``T > 0``.
    dim : int
        The reduced axis.
    mask : bool tensor, optional
        ``True`` = visible, broadcastable to ``logits``.
    k : int
        Number of kept positions per row, ``>= 1``.

    Returns
    -------
    torch.Tensor or numpy.ndarray
        Weights of the shape of ``logits``.

    Reference: top-k attention as in Gupta et al. 2021, "Memory-efficient Transformers via Top-k Attention",
    arXiv:2106.06899; recommended by the paper for ``L >> k`` (the book's appendix "Reading the paper").
    """
    k = _check_k(k)
    x, visible, T, was_numpy, dim = _prepare(logits, temperature, dim, mask)
    keep = _topk_keep(x, visible, k)
    m = _row_max(x, visible)
    z = _scale(x - m, T)
    out = _masked_softmax_lastdim(torch.where(keep, z, torch.zeros((), dtype=z.dtype, device=z.device)), keep)
    return _finish(out, keep, dim, was_numpy)


# ----------------------------------------------------------------------------------------------------------
# registry
# ----------------------------------------------------------------------------------------------------------
_REGISTRY: dict[str, Normalizer] = {
    "softmax": softmax,
    "general": general,
    "sparsemax": sparsemax,
    "entmax15": entmax15,
    "entmax_alpha": entmax_alpha,
    "ssmax": ssmax,
    "sa_softmax": sa_softmax,
    "softmax1": softmax1,
    "sigmoid": sigmoid,
    "softpick": softpick,
    "topk": topk,
}

#: Names whose non-empty rows sum to one.
SUMS_TO_ONE = frozenset({"softmax", "general", "sparsemax", "entmax15", "entmax_alpha", "ssmax", "topk"})


def available() -> list[str]:
    """Names accepted by :func:`get`, in a fixed order."""
    return list(_REGISTRY)


def get(name: str, **params) -> Normalizer:
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
    base = _REGISTRY[name]
    if name == "topk":
        params["k"] = _check_k(params.get("k"))
    if not params:
        return base
    import inspect

    allowed = [p for p in inspect.signature(base).parameters if p not in ("logits", "temperature", "dim", "mask")]
    for k in params:
        if k not in allowed:
            raise ValueError(f"params for {name!r} must be among {allowed} (got {k!r})")
    f = functools.partial(base, **params)
    functools.update_wrapper(f, base)
    f.name = name  # type: ignore[attr-defined]
    return f


for _n, _f in _REGISTRY.items():
    _f.name = _n  # type: ignore[attr-defined]
del _n, _f
