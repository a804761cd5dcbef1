"""Input handling of :mod:`attn_lib.theory` (float64 numpy, ``ValueError`` naming the argument)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from .._validation import check_choice, check_int, check_probability


def from_torch(x: Any) -> Any:
    """A torch tensor as a float64 numpy array; anything else as it is (without importing torch: a tensor can exist
    only once torch is loaded)."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):
        return x.detach().cpu().to(torch.float64).numpy()
    return x


def as_array(x: Any, name: str) -> np.ndarray:
    """``x`` (array-like or torch tensor) as a float64 numpy array; ``ValueError`` naming ``name`` otherwise."""
    try:
        return np.asarray(from_torch(x), dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be an array of real numbers") from None


def alpha_array(alpha: Any) -> np.ndarray:
    """Checked weights ``alpha (..., L)``: finite, non-negative, ``L >= 1``."""
    a = as_array(alpha, "alpha")
    if a.ndim == 0:
        raise ValueError("alpha must have shape (..., L) with L >= 1 (got a scalar)")
    if a.shape[-1] == 0 or a.size == 0:
        raise ValueError(f"alpha must have shape (..., L) with L >= 1 (got shape {a.shape})")
    if not np.all(np.isfinite(a)):
        raise ValueError("alpha must be finite")
    if np.any(a < 0):
        raise ValueError("alpha must be >= 0 (attention weights)")
    return a


def alpha_and_X(alpha: Any, X: Any) -> tuple[np.ndarray, np.ndarray]:
    """Checked ``alpha (..., L)`` and ``X (..., L, d)`` with matching leading shapes, both finite."""
    a = alpha_array(alpha)
    x = as_array(X, "X")
    if x.ndim != a.ndim + 1 or x.shape[:-1] != a.shape:
        raise ValueError(
            f"X must have shape (..., L, d) matching alpha of shape (..., L) = {a.shape} (got X of shape {x.shape})"
        )
    if x.shape[-1] == 0:
        raise ValueError("X must have d >= 1 columns")
    if not np.all(np.isfinite(x)):
        raise ValueError("X must be finite")
    return a, x


def check_N(N: Any, L: int, low: int = 1) -> int:
    """``N`` as an integer in ``[low, L]``."""
    return check_int("N", N, low=low, high=L)


def rows_and_N(alpha: Any, X: Any, N: Any) -> tuple[np.ndarray, np.ndarray, int, int]:
    """``(a, x, L, N)``: the checked rows of :func:`alpha_and_X`, their length ``L`` and ``N`` in ``[1, L]``."""
    a, x = alpha_and_X(alpha, X)
    return a, x, a.shape[-1], check_N(N, a.shape[-1])


def as_output(v: np.ndarray):
    """A Python float for a single row, an array of shape ``(...)`` for a batch."""
    v = np.asarray(v, dtype=np.float64)
    return float(v) if v.ndim == 0 else v


def row_norms(v: np.ndarray) -> np.ndarray:
    """Euclidean norms over the last axis."""
    return np.linalg.norm(v, axis=-1)


def inclusion_p(p: Any, N: int, L: int) -> float:
    """The inclusion probability ``p``: ``"L-1"`` (``N/(L-1)``), ``"L"`` (``N/L``) or a number in ``[0, 1]``."""
    if isinstance(p, str):
        check_choice("p", p, ["L-1", "L"])
        if p == "L":
            return N / L
        return 1.0 if L == 1 else N / (L - 1)
    return check_probability("p", p)


def eval_F(F: Callable, z: np.ndarray, theta: Any) -> np.ndarray:
    """``F(z)`` or ``F(z, theta)`` (numpy first, torch if ``F`` needs tensors) as a float64 array of ``z``'s shape."""
    args = () if theta is None else (theta,)
    try:
        out = F(z, *args)
    except TypeError:
        import torch  # only for an F that needs tensors: attn_lib.theory itself needs numpy only

        out = F(torch.as_tensor(z), *args)
    return np.broadcast_to(np.asarray(from_torch(out), dtype=np.float64), np.shape(z))


def lengths_array(L: Any) -> np.ndarray:
    """``L`` (an integer or array of integers ``>= 1``) as a float64 array."""
    arr = np.asarray(L)
    if arr.ndim == 0:
        return np.asarray(float(check_int("L", L, low=1)))
    if arr.size == 0:
        raise ValueError("L must be a non-empty integer or array of integers >= 1")
    for v in arr.ravel():
        check_int("L", v.item() if hasattr(v, "item") else v, low=1)
    return arr.astype(np.float64)


def logits_array(logits: Any, name: str = "logits") -> np.ndarray:
    """Checked logits ``(..., L)``: finite, ``L >= 1``."""
    l = as_array(logits, name)
    if l.ndim == 0 or l.shape[-1] == 0:
        raise ValueError(f"{name} must have shape (..., L) with L >= 1")
    if not np.all(np.isfinite(l)):
        raise ValueError(f"{name} must be finite")
    return l


def positive_array(T: Any, name: str = "temperature") -> np.ndarray:
    """A number or non-empty array of finite numbers ``> 0`` (temperatures, ``eps``) as a float64 array."""
    if isinstance(T, (int, float)) and not isinstance(T, bool):
        arr = np.asarray(float(T))
    else:
        raw = np.asarray(T)
        if raw.dtype.kind not in "iuf":  # strings, booleans, objects, complex numbers
            raise ValueError(f"{name} must be a number or array of numbers > 0 (got {T!r})")
        arr = raw.astype(np.float64)
    if arr.size == 0:
        raise ValueError(f"{name} must be a number or non-empty array of numbers > 0")
    if np.any(~np.isfinite(arr)) or np.any(arr <= 0):
        raise ValueError(f"{name} must be finite and > 0 (got {T!r})")
    return arr
