"""Argument checks shared by every layer of attn_lib.

Every public function validates its input with these helpers so that bad input fails early with a
``ValueError`` that names the parameter and the allowed range, instead of producing a silent NaN.
"""
from __future__ import annotations

import math
import numbers
from typing import Any


def check_positive(name: str, value: Any, *, allow_inf: bool = False) -> float:
    """Return ``value`` as float, requiring a finite (or +inf if allowed) number > 0."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        try:
            value = float(value)  # 0-d tensors / numpy scalars
        except (TypeError, ValueError):
            raise ValueError(f"{name} must be a real number > 0 (got {value!r})") from None
    v = float(value)
    if math.isnan(v) or v <= 0 or (math.isinf(v) and not allow_inf):
        raise ValueError(f"{name} must be a finite number > 0 (got {value!r})")
    return v


def check_nonnegative(name: str, value: Any) -> float:
    """Return ``value`` as float, requiring a finite number >= 0."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a real number >= 0 (got {value!r})") from None
    if math.isnan(v) or math.isinf(v) or v < 0:
        raise ValueError(f"{name} must be a finite number >= 0 (got {value!r})")
    return v


def check_int(name: str, value: Any, *, low: int | None = None, high: int | None = None) -> int:
    """Return ``value`` as int, requiring an integer in ``[low, high]`` (either end may be open)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        if isinstance(value, numbers.Real) and float(value).is_integer() and not isinstance(value, bool):
            value = int(value)
        else:
            raise ValueError(f"{name} must be an integer{_range_text(low, high)} (got {value!r})")
    v = int(value)
    if (low is not None and v < low) or (high is not None and v > high):
        raise ValueError(f"{name} must be an integer{_range_text(low, high)} (got {v})")
    return v


def check_probability(name: str, value: Any, *, open_low: bool = False, open_high: bool = False) -> float:
    """Return ``value`` as float in [0, 1] (ends optionally open)."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number in [0, 1] (got {value!r})") from None
    lo_ok = v > 0 if open_low else v >= 0
    hi_ok = v < 1 if open_high else v <= 1
    if math.isnan(v) or not (lo_ok and hi_ok):
        lb = "(" if open_low else "["
        rb = ")" if open_high else "]"
        raise ValueError(f"{name} must be in {lb}0, 1{rb} (got {value!r})")
    return v


def check_choice(name: str, value: Any, choices) -> Any:
    """Require ``value`` to be one of ``choices``."""
    choices = list(choices)
    if value not in choices:
        raise ValueError(f"{name} must be one of {choices} (got {value!r})")
    return value


def _range_text(low: int | None, high: int | None) -> str:
    if low is not None and high is not None:
        return f" in [{low}, {high}]"
    if low is not None:
        return f" >= {low}"
    if high is not None:
        return f" <= {high}"
    return ""
