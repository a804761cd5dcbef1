"""Row plumbing shared by :mod:`attn_lib.normalizers` and :mod:`attn_lib.jacobian`: the input checks of logits and
masks (each a ``ValueError`` naming the parameter), moving the reduced axis last, the stable scaling ``l / T`` and the
masked row reductions. Every function acts on the last axis."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from ._validation import check_int, check_positive


def to_tensor(x: Any, message: str) -> torch.Tensor:
    """``x`` as a tensor (arrays and nested lists converted), or ``ValueError(message)``."""
    if isinstance(x, torch.Tensor):
        return x
    try:
        return torch.as_tensor(np.asarray(x))
    except (TypeError, ValueError, RuntimeError):
        raise ValueError(message) from None


def real_tensor(x: Any, name: str) -> torch.Tensor:
    """``x`` as a tensor of real numbers, any real dtype (arrays and nested lists converted); ``ValueError`` naming
    ``name`` otherwise."""
    t = to_tensor(x, f"{name} must be a tensor or array of real numbers (got {type(x).__name__})")
    if t.dtype == torch.bool or t.is_complex():
        raise ValueError(f"{name} must hold real numbers (got dtype {t.dtype})")
    return t


def as_mask(mask: Any, shape: tuple, device, *, name: str = "mask", target: str = "logits") -> torch.Tensor:
    """``mask`` as a bool tensor on ``device`` broadcast to ``shape`` (True = visible); ``ValueError`` if it is not
    bool, on a device it cannot be copied from (e.g. ``meta``), or of a shape that does not broadcast."""
    m = to_tensor(mask, f"{name} must be a bool tensor with True = visible (got {type(mask).__name__})")
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


def prepare(logits: Any, temperature: Any, dim: int, mask: Any):
    """Validate and move ``dim`` last: ``(x, visible, T, was_numpy, dim)``, ``x`` with the reduced axis last (integer
    logits promoted to the default float dtype) and masked/-inf entries replaced by 0, ``visible`` bool of its shape."""
    T = check_positive("temperature", temperature)
    x = real_tensor(logits, "logits")
    if x.device.type == "meta":
        raise ValueError("logits are on the 'meta' device, which holds no values; pass a tensor with data")
    if not x.is_floating_point():
        x = x.to(torch.get_default_dtype())
    if x.dim() == 0:
        raise ValueError("logits must have at least one dimension (got a scalar)")
    nd = x.dim()
    dim = check_int("dim", dim, low=-nd, high=nd - 1)  # NumPy and 0-d tensor integers are integers too
    if x.shape[dim] == 0:
        raise ValueError(f"logits must have at least one position along dim={dim} (got shape {tuple(x.shape)})")
    visible = x != -math.inf if mask is None else as_mask(mask, x.shape, x.device) & (x != -math.inf)
    x = torch.where(visible, x, torch.zeros((), dtype=x.dtype, device=x.device))
    # one reduction instead of an elementwise check: the sum is finite unless a visible logit is NaN or +-inf (or
    # finite logits overflow the sum, which the exact check below then clears)
    if not bool(torch.isfinite(x.sum())) and bool((~torch.isfinite(x)).any()):
        raise ValueError("logits must be finite at visible positions (found NaN or +inf); use mask for hidden ones")
    return x.movedim(dim, -1), visible.movedim(dim, -1), T, isinstance(logits, np.ndarray), dim


def finish(out: torch.Tensor, visible: torch.Tensor, dim: int, was_numpy: bool):
    out = torch.where(visible, out, torch.zeros((), dtype=out.dtype, device=out.device)).movedim(-1, dim)
    return out.detach().cpu().numpy() if was_numpy else out


def divide(x: torch.Tensor, T: float) -> torch.Tensor:
    """``x / T``, in float64 when ``T`` lies outside the normal range of ``x``'s dtype (``T`` is rounded to that dtype
    before the division: ``T = 1e-46`` would be 0 in float32; float64 holds every temperature validation accepts)."""
    fi = torch.finfo(x.dtype)
    return x / T if fi.tiny <= T <= fi.max else (x.to(torch.float64) / T).clamp(-fi.max, fi.max).to(x.dtype)


def scale(x: torch.Tensor, T: float) -> torch.Tensor:
    """``x / T`` clipped to +-finfo.max/8 so that differences of two scaled logits never overflow (callers pass shifted
    logits ``x - max <= 0`` where they can: a clipped value there stands for an exponent that underflows anyway)."""
    big = torch.finfo(x.dtype).max / 8
    return divide(x, T).clamp(-big, big)


def scale_unshifted(x: torch.Tensor, visible: torch.Tensor, T: float, who: str) -> torch.Tensor:
    """``x / T`` for normalisers that cannot shift the logits first (``general``, plain ``sa_softmax``): a visible
    ``|x / T|`` beyond ``finfo.max / 8`` raises ``ValueError`` instead of being clipped."""
    big = torch.finfo(x.dtype).max / 8
    z = divide(x, T)
    if bool((visible & ~(z.abs() <= big)).any()):
        raise ValueError(
            f"temperature={T!r} is too small for these logits in {who}: logits / temperature exceeds the "
            f"{str(x.dtype).removeprefix('torch.')} range (|l / T| must stay below {big:.3g}); use a larger "
            "temperature or float64 logits"
        )
    return z.clamp(-big, big)


def row_max(z: torch.Tensor, visible: torch.Tensor, detach: bool = True) -> torch.Tensor:
    """Max over visible positions (0 for a fully masked row; ``-row_max(-z, ...)`` is the min); detached by default,
    as every caller that uses it as a shift is exactly invariant to the shift."""
    neg = torch.full((), -torch.finfo(z.dtype).max, dtype=z.dtype, device=z.device)
    m = torch.where(visible, z, neg).amax(dim=-1, keepdim=True)
    m = torch.where(visible.any(dim=-1, keepdim=True), m, torch.zeros_like(m))
    return m.detach() if detach else m


def count(visible: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return visible.sum(dim=-1, keepdim=True).to(dtype)


def masked_softmax_lastdim(z: torch.Tensor, visible: torch.Tensor, *, shifted: bool = False) -> torch.Tensor:
    """Stable softmax of ``z`` over visible positions of the last axis; zeros on a fully masked row. ``shifted``: the
    row maximum is already subtracted (the same weights, bit for bit, with four fewer passes)."""
    e = torch.exp(z if shifted else z - row_max(z, visible))
    e = torch.where(visible, e, torch.zeros((), dtype=z.dtype, device=z.device))
    s = e.sum(dim=-1, keepdim=True)
    return e / torch.where(s > 0, s, torch.ones_like(s))


def call_F(F: Callable, z: torch.Tensor, theta: Any, name: str = "F") -> torch.Tensor:
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
