"""CPU allocator settings for long runs over large tensors (Linux with glibc only).

A forward pass at ``L = 1024`` allocates and frees tensors of tens of megabytes per layer (one ``(1, 9, 1024, 1024)``
float32 score tensor is 38 MB). glibc serves every block above its ``mmap`` threshold (at most 32 MB) with a fresh
``mmap`` and returns it to the kernel on ``free``, and it trims the top of the heap after each large ``free``. Every
new tensor then starts on fresh pages, and the kernel zero-fills each page on first touch. On the 2-core build machine,
more than a third of a chapter's run time went to these page faults (system time).

:func:`tune_allocator` asks glibc, through ``mallopt``, to serve large blocks from the heap (``M_MMAP_MAX = 0``) and to
keep up to :data:`TRIM_THRESHOLD` bytes of freed memory at the top of the heap for reuse (``M_TRIM_THRESHOLD``).
Results do not change, only where the memory comes from. The cost is resident memory: freed blocks are reused by the
process instead of being returned to the system, so its resident size stays near its peak (a fresh ``make book``
peaked at 3.6-4.6 GB over three runs, against 3.3 GB before).
:func:`attn_lib.models.load_model` calls it once per process. ``ATTN_LIB_TUNE_MALLOC=0`` switches it off; on other
platforms (macOS, Windows, musl) it does nothing. ``benchmarks/bench_allocator.py`` measures the effect.
"""

from __future__ import annotations

import ctypes
import os
import platform

__all__ = ["ENV", "TRIM_THRESHOLD", "tune_allocator", "allocator_state"]

#: Environment variable; ``0``, ``false``, ``no`` or ``off`` leaves glibc's defaults alone.
ENV = "ATTN_LIB_TUNE_MALLOC"
#: Freed memory glibc keeps for reuse before it returns the top of the heap to the kernel (bytes).
TRIM_THRESHOLD = 1 << 30

_M_TRIM_THRESHOLD = -1  # glibc's malloc.h
_M_MMAP_MAX = -4
_STATE: str | None = None
TUNED = f"tuned: large blocks from the heap, {TRIM_THRESHOLD >> 30} GiB kept for reuse ({ENV}=0 switches it off)"


def _plan() -> str | None:
    """Why the settings do not apply here, or ``None`` when they do."""
    if os.environ.get(ENV, "").strip().lower() in ("0", "false", "no", "off"):
        return f"glibc defaults ({ENV}=0)"
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return "platform defaults (not Linux with glibc)"
    return None


def tune_allocator() -> bool:
    """Apply the settings of the module docstring once per process.

    Returns
    -------
    bool
        ``True`` when glibc accepted both settings (now or at an earlier call), ``False`` when they do not apply:
        switched off by ``ATTN_LIB_TUNE_MALLOC``, not Linux with glibc, or ``mallopt`` refused.
    """
    global _STATE
    if _STATE is None:
        _STATE = _plan()
        if _STATE is None:
            try:
                mallopt = ctypes.CDLL(None).mallopt
                mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
                trim = mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1
                heap = trim and mallopt(_M_MMAP_MAX, 0) == 1  # only after the trim setting took
            except (OSError, AttributeError):
                trim = heap = False
            if heap:
                _STATE = TUNED
            elif trim:
                _STATE = f"partly tuned: {TRIM_THRESHOLD >> 30} GiB kept for reuse; mallopt refused M_MMAP_MAX"
            else:
                _STATE = "glibc defaults (mallopt refused)"
    return _STATE == TUNED


def allocator_state() -> str:
    """One line for ``python -m attn_lib info``: what :func:`tune_allocator` did, or what it will do."""
    if _STATE is not None:
        return _STATE
    why = _plan()
    return why if why is not None else "glibc defaults until a model loads, then " + TUNED
