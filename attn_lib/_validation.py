"""Argument checks shared by every layer of attn_lib: bad input fails early with a ``ValueError`` that names the
parameter and the allowed range, instead of producing a silent NaN."""

from __future__ import annotations

import math
import numbers
import operator
import os
import re
import tempfile
from pathlib import Path
from typing import Any

#: Largest seed a ``torch.Generator`` accepts.
SEED_MAX = 2**64 - 1

#: Most random draws or table entries one resource parameter (Monte-Carlo samples, permutations, grid points) may ask
#: for: 2 * 10^8 (1.6 GB of float64), so a typo such as ``n_samples=10**12`` is a ValueError, not a MemoryError.
MAX_DRAWS = 2 * 10**8


def check_size(name: str, value: Any, per_item: int = 1, *, low: int = 1) -> int:
    """A resource parameter: an integer ``>= low`` whose ``value * per_item`` draws stay within :data:`MAX_DRAWS`."""
    return check_int(name, value, low=low, high=max(low, MAX_DRAWS // max(int(per_item), 1)))


def _is_bool(value: Any) -> bool:
    """True for Python, NumPy and torch booleans (scalars and bool arrays), without importing either library."""
    return isinstance(value, bool) or str(getattr(value, "dtype", "")) in ("bool", "torch.bool")


def _real(name: str, value: Any, what: str) -> float:
    """``value`` as a float (Python and NumPy reals, one-element non-bool tensors/arrays; NaN and infinities as they
    are); booleans and strings are a ``ValueError`` naming ``name``."""
    if isinstance(value, (str, bytes)) or _is_bool(value):
        raise ValueError(f"{name} must be {what} (got {value!r})")
    try:
        return float(value)
    except (TypeError, ValueError, RuntimeError):
        raise ValueError(f"{name} must be {what} (got {value!r})") from None


def check_positive(name: str, value: Any, *, allow_inf: bool = False) -> float:
    """``value`` as a float, finite (or +inf if allowed) and > 0."""
    v = _real(name, value, "a real number > 0")
    if math.isnan(v) or v <= 0 or (math.isinf(v) and not allow_inf):
        raise ValueError(f"{name} must be a finite number > 0 (got {value!r})")
    return v


def check_nonnegative(name: str, value: Any) -> float:
    """``value`` as a float, finite and >= 0."""
    v = _real(name, value, "a real number >= 0")
    if math.isnan(v) or math.isinf(v) or v < 0:
        raise ValueError(f"{name} must be a finite number >= 0 (got {value!r})")
    return v


def check_finite(name: str, value: Any) -> float:
    """``value`` as a float, finite (any sign)."""
    v = _real(name, value, "a finite real number")
    if not math.isfinite(v):
        raise ValueError(f"{name} must be a finite real number (got {value!r})")
    return v


def check_int(name: str, value: Any, *, low: int | None = None, high: int | None = None) -> int:
    """``value`` as an int in ``[low, high]`` (either end may be open). Python and NumPy integers, integer 0-d tensors
    and integral floats (``3.0``) are accepted; booleans, strings and fractional numbers (never truncated) are not."""
    what = f"{name} must be an integer{_range_text(low, high)}"
    if _is_bool(value):
        raise ValueError(f"{what} (got {value!r})")
    try:
        v = operator.index(value)
    except TypeError:
        if not (isinstance(value, numbers.Real) and math.isfinite(value) and float(value).is_integer()):
            raise ValueError(f"{what} (got {value!r})") from None
        v = int(value)
    if (low is not None and v < low) or (high is not None and v > high):
        raise ValueError(f"{what} (got {v})")
    return v


def max_threads() -> int:
    """CPU threads this process may use: the CPUs of its affinity mask (``os.cpu_count()`` where there is none)."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        n = os.cpu_count() or 1
    return max(1, n)


def check_threads(name: str, value: Any) -> int:
    """A thread count: an integer in ``[1, max_threads()]`` (more threads than CPUs only adds contention)."""
    return check_int(name, value, low=1, high=max_threads())


def _items(name: str, values: Any, what: str) -> list:
    """``values`` as a non-empty list (one value, a string, bool or 0-d tensor/array included, is a list of one, which
    the caller checks); ``ValueError`` naming ``name`` otherwise."""
    one = isinstance(values, (str, bytes)) or _is_bool(values) or getattr(values, "ndim", None) == 0
    try:
        items = [values] if one or not hasattr(values, "__iter__") else list(values)
    except TypeError:
        items = []
    if not items:
        raise ValueError(f"{name} must be {what}")
    return items


def check_int_list(
    name: str, values: Any, *, low: int | None = None, high: int | None = None, keep_order: bool = False
) -> list[int]:
    """One integer or a non-empty iterable of integers (each as :func:`check_int`), as a sorted list without repeats
    (``keep_order``: as given, repeats included)."""
    items = _items(name, values, f"an integer or a non-empty list of integers{_range_text(low, high)}")
    ints = [check_int(name, v, low=low, high=high) for v in items]
    return ints if keep_order else sorted(set(ints))


def check_positive_list(name: str, values: Any) -> list[float]:
    """A number or a non-empty sequence of numbers > 0, as a list of floats; else a ``ValueError`` naming ``name``."""
    return [check_positive(name, v) for v in _items(name, values, "a number or a non-empty list of numbers > 0")]


def check_probability(name: str, value: Any, *, open_low: bool = False, open_high: bool = False) -> float:
    """``value`` as a float in [0, 1] (ends optionally open)."""
    v = _real(name, value, "a number in [0, 1]")
    lo_ok = v > 0 if open_low else v >= 0
    hi_ok = v < 1 if open_high else v <= 1
    if math.isnan(v) or not (lo_ok and hi_ok):
        raise ValueError(f"{name} must be in {'(' if open_low else '['}0, 1{')' if open_high else ']'} (got {value!r})")
    return v


def check_seed(name: str, value: Any) -> int:
    """A random seed: an integer in ``[0, 2**64 - 1]`` (the range ``torch.Generator.manual_seed`` accepts)."""
    return check_int(name, value, low=0, high=SEED_MAX)


def expand_path(name: str, value: Any, what: str = "path") -> Path:
    """``value`` (a str or path) as a ``Path`` with ``~`` / ``~user`` expanded; ``ValueError`` naming ``name`` when
    it is not a str path, is empty, holds a NUL byte, or names a home folder that cannot be found."""
    raw = os.fspath(value) if isinstance(value, (str, os.PathLike)) else None
    if not isinstance(raw, str) or not raw.strip():  # not a path, a bytes path, or empty
        raise ValueError(f"{name} must be a {what} (got {value!r})")
    if "\0" in raw:
        raise ValueError(f"{name} must not contain a NUL character (got {value!r})")
    try:
        return Path(raw).expanduser()
    except RuntimeError:  # ~nosuchuser: "Could not determine home directory"
        user = raw[1:].split("/", 1)[0] or "the current user"
        raise ValueError(f"{name} {raw!r} starts with a '~' whose home folder cannot be found ({user})") from None


def prepare_output_dir(name: str, value: Any) -> Path:
    """Create the folder ``value`` (with its parents) if needed, check that a file can be written there, and return
    it as a ``Path``; ``ValueError`` naming ``name`` otherwise. Run it *before* a long computation that writes there."""
    path = expand_path(name, value, "folder path")
    if path.exists() and not path.is_dir():
        raise ValueError(f"{name} {str(path)!r} exists and is not a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".write-test-", dir=path)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        why = exc.strerror or type(exc).__name__
        where = f" ({exc.filename})" if exc.filename and os.fspath(exc.filename) != os.fspath(path) else ""
        raise ValueError(f"{name} {str(path)!r} cannot be used as an output folder: {why}{where}") from None
    return path


def check_bool(name: str, value: Any) -> bool:
    """``value`` if it is ``True`` or ``False``; else (a 0/1, a string, None) a ``ValueError`` naming ``name``."""
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be True or False (got {value!r})")
    return value


def check_choice(name: str, value: Any, choices) -> Any:
    """``value``, required to be one of ``choices``."""
    choices = list(choices)
    if value not in choices:
        raise ValueError(f"{name} must be one of {choices} (got {value!r})")
    return value


def _range_text(low: int | None, high: int | None) -> str:
    if low is not None and high is not None:
        return f" in [{low}, {high}]"
    return f" >= {low}" if low is not None else f" <= {high}" if high is not None else ""


_FOLDER = (
    "an absolute folder path, or one starting with ~ (a relative path or a $VARIABLE is not expanded)",
    lambda v: v.startswith("~") or Path(v).is_absolute(),
)


def _words(*words: str) -> tuple[str, Any]:
    return "one of " + ", ".join(words), lambda v: v.lower() in words


#: The library's environment variables: name -> (allowed values in words, test of a stripped value). Unset or empty
#: means the default; :func:`env` reads them, :func:`check_environment` checks them all (``attn-lib`` at start-up).
ENVIRONMENT = {
    "ATTN_LIB_CACHE_DIR": _FOLDER,
    "ATTN_LIB_MODEL_DIR": _FOLDER,
    "ATTN_LIB_OFFLINE": _words("1", "true", "yes", "on", "0", "false", "no", "off"),
    "ATTN_LIB_ENGINE": _words("auto", "numba", "torch"),
    "ATTN_LIB_PROFILE": _words("paper", "quick"),
    "ATTN_LIB_MODEL": ("a model name or folder such as gpt2", bool),
    "GOMP_SPINCOUNT": (
        "a count (digits, optionally followed by k, K, M or G) or INFINITE / INFINITY",
        lambda v: re.fullmatch(r"\d+[kKMG]?|INFINITE|INFINITY", v) is not None,
    ),
}


def env(name: str) -> str:
    """The stripped value of the variable ``name`` of :data:`ENVIRONMENT` (``""`` when unset or empty); ``ValueError``
    naming the variable and its allowed values when the value is outside them (blanks included)."""
    raw = os.environ.get(name, "")
    what, ok = ENVIRONMENT[name]
    if raw and not ok(raw.strip()):
        raise ValueError(f"the environment variable {name} must be {what}, or unset (got {raw!r})")
    return raw.strip()


def env_flag(name: str) -> bool:
    """A yes/no variable of :data:`ENVIRONMENT` through :func:`env`: True for 1, true, yes or on."""
    return env(name).lower() in ("1", "true", "yes", "on")


def check_environment() -> None:
    """Every variable of :data:`ENVIRONMENT` through :func:`env` (the first bad one raises)."""
    for name in ENVIRONMENT:
        env(name)
