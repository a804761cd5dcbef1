"""Process settings for long CPU runs, applied only on request: ``import attn_lib`` and ``load_model`` change nothing.

Two settings help the book's 2-core runs (Linux only; results do not change):

* **GNU OpenMP's spin count.** An idle thread of the ``libgomp`` pool that torch and numba share busy-waits
  ``GOMP_SPINCOUNT`` iterations (300,000 by default, milliseconds), taking a core from a busy machine;
  :data:`SPIN_COUNT` makes it sleep after tens of microseconds. libgomp reads it when torch loads it: set it before torch is imported.
* **glibc's allocator.** ``M_MMAP_MAX = 0`` serves the large tensors of a forward pass from the heap instead of fresh,
  zero-filled ``mmap`` pages, and :data:`TRIM_THRESHOLD` keeps freed memory for reuse, at the cost of resident memory.

Ask for them with :func:`tune`, ``attn-lib --tune-process``, or a new process' environment (:data:`ENVIRONMENT`, what
the Makefile sets); :func:`state` says what is in effect (``attn-lib info`` prints it).
"""

from __future__ import annotations

import ctypes
import os
import platform
import sys

from ._validation import check_bool
from ._validation import env as check_env

__all__ = ["tune", "state"]  # ENVIRONMENT: the settings tune() applies, as state() reports them

#: Iterations an idle libgomp thread spins before it sleeps (libgomp's default: 300,000).
SPIN_COUNT = 3000
#: Freed memory glibc keeps for reuse before it returns the top of the heap to the kernel (bytes).
TRIM_THRESHOLD = 1 << 30
#: The same two settings for the environment of a new process (glibc reads its tunables when a process starts).
ENVIRONMENT = {
    "GOMP_SPINCOUNT": str(SPIN_COUNT),
    "GLIBC_TUNABLES": f"glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold={TRIM_THRESHOLD}",
}

_M_TRIM_THRESHOLD = -1  # glibc's malloc.h
_M_MMAP_MAX = -4
#: What :func:`tune` did in this process, by setting (absent until asked).
_DONE: dict[str, str] = {}


def _libgomp_loaded() -> str | None:
    """The path of a ``libgomp.so.*`` already mapped into this process (a new spin count would not be read), or
    ``None``; vendored copies (``libgomp-<hash>.so.1``) do not count: torch still loads its own."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            paths = {line.split()[-1] for line in f if "/" in line}
    except OSError:  # no /proc: judge by torch, the usual first user of libgomp
        return "torch" if "torch" in sys.modules else None
    return next((p for p in sorted(paths) if os.path.basename(p).startswith("libgomp.so.")), None)


def _tune_openmp() -> str:
    given = [f"{v}={os.environ[v]}" for v in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY") if os.environ.get(v, "").strip()]
    check_env("GOMP_SPINCOUNT")  # a value libgomp ignores is an error, not a setting "left as the environment sets it"
    if given:
        return f"left as the environment sets it ({', '.join(given)})"
    if platform.system() != "Linux":
        return "platform defaults (not Linux)"
    if loaded := _libgomp_loaded():
        return f"libgomp defaults (asked too late: OpenMP was loaded before, from {loaded})"
    os.environ["GOMP_SPINCOUNT"] = str(SPIN_COUNT)
    return f"GOMP_SPINCOUNT={SPIN_COUNT}, set by attn_lib.process.tune()"


def _tune_allocator() -> str:
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return "platform defaults (not Linux with glibc)"
    try:
        mallopt = ctypes.CDLL(None).mallopt
        mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
        trim = mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1
        heap = trim and mallopt(_M_MMAP_MAX, 0) == 1  # only after the trim setting took
    except (OSError, AttributeError):
        trim = heap = False
    if heap:
        return f"large blocks from the heap, {TRIM_THRESHOLD >> 30} GiB kept for reuse, set by attn_lib.process.tune()"
    if trim:
        return f"partly tuned: {TRIM_THRESHOLD >> 30} GiB kept for reuse; mallopt refused M_MMAP_MAX"
    return "glibc defaults (mallopt refused)"


def tune(*, openmp: bool = True, allocator: bool = True) -> dict[str, str]:
    """Apply the settings of the module docstring to this process, once each. ``openmp``: set ``GOMP_SPINCOUNT`` in
    the environment unless it or ``OMP_WAIT_POLICY`` is set (only before torch is imported); ``allocator``: glibc's
    ``mallopt``. Returns ``{setting: line}`` for those asked for: what was done, or why nothing was."""
    for name, wanted, apply in (("openmp", openmp, _tune_openmp), ("allocator", allocator, _tune_allocator)):
        if check_bool(name, wanted) and name not in _DONE:
            _DONE[name] = apply()
    return {name: _DONE[name] for name, wanted in (("openmp", openmp), ("allocator", allocator)) if wanted}


def state() -> dict[str, str]:
    """What is in effect here, one line per setting; ``ValueError`` for a ``GOMP_SPINCOUNT`` libgomp ignores."""
    env = {v: os.environ.get(v, "").strip() for v in ("OMP_WAIT_POLICY", "GLIBC_TUNABLES")}
    env["GOMP_SPINCOUNT"] = check_env("GOMP_SPINCOUNT")  # ValueError for a value libgomp ignores
    openmp = _DONE.get("openmp") or (
        ", ".join(f"{v}={env[v]} (from the environment)" for v in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY") if env[v])
        or "libgomp defaults (not tuned; attn_lib.process.tune() or attn-lib --tune-process)"
    )
    allocator = _DONE.get("allocator") or (
        f"GLIBC_TUNABLES={env['GLIBC_TUNABLES']} (from the environment)"
        if "glibc.malloc" in env["GLIBC_TUNABLES"]
        else "glibc defaults (not tuned; attn_lib.process.tune() or attn-lib --tune-process)"
    )
    return {"openmp": openmp, "allocator": allocator}
