"""How long GNU OpenMP's idle threads spin before they sleep (Linux; set when ``attn_lib`` is imported).

torch's CPU operations and numba's compiled kernels (its ``omp`` threading layer) share one GNU OpenMP runtime,
``libgomp``. A thread of its pool that finishes its share of a parallel region early, or waits for the next region,
busy-waits for ``GOMP_SPINCOUNT`` iterations (300,000 by default, milliseconds) before it sleeps. On an idle machine
that only burns spare CPU. On a busy machine the spinning thread takes a core from the thread it waits for, or from
another process of the same job (a second test worker, the browser beside a notebook).

:func:`tune_openmp` sets ``GOMP_SPINCOUNT`` to :data:`SPIN_COUNT` (3,000: tens of microseconds) in this process'
environment. libgomp reads it once, when it is loaded, that is when torch is first imported; so it acts only when
``attn_lib`` is imported before torch (the CLI, the chapters and the test suite do), and it never overrides a spin
count or a wait policy that the environment sets (``GOMP_SPINCOUNT``, ``OMP_WAIT_POLICY``). Child processes inherit
it. Results do not change: the spin count decides only how a waiting thread waits. ``ATTN_LIB_TUNE_OMP=0`` switches
it off.

Measured on the 2-core build machine (``benchmarks/README.md``, "Issue 23, seventh round"), libgomp's default against
3,000: the paper-profile reproduction 72-74 s against 69-74 s idle, with 10 % less CPU; with one core kept busy by
another process 118 s against 97 s; the unit-test suite on two workers 201 s against 176 s. ``OMP_WAIT_POLICY=PASSIVE``
(no spinning at all) helped the metrics as much but slowed the forward passes with a swapped normaliser, which run
many short torch operations one after the other, by 30-50 %; 3,000 spins left those unchanged.
"""

from __future__ import annotations

import os
import sys

__all__ = ["ENV", "SPIN_COUNT", "tune_openmp", "openmp_state"]

#: Environment variable; ``0``, ``false``, ``no`` or ``off`` leaves libgomp's defaults alone.
ENV = "ATTN_LIB_TUNE_OMP"
#: Iterations an idle libgomp thread spins before it sleeps (libgomp's default: 300,000).
SPIN_COUNT = 3000
#: The variables through which the environment already decides how libgomp's threads wait.
USER_VARIABLES = ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")

_STATE: str | None = None


def _libgomp_loaded() -> bool:
    """Whether a libgomp is mapped into this process already (then a new spin count would not be read)."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            return "libgomp" in f.read()
    except OSError:  # no /proc: judge by torch, the usual first user of libgomp
        return "torch" in sys.modules


def _plan() -> str | None:
    """Why the setting does not apply, or ``None`` when it does."""
    if os.environ.get(ENV, "").strip().lower() in ("0", "false", "no", "off"):
        return f"libgomp defaults ({ENV}=0)"
    given = [f"{v}={os.environ[v]}" for v in USER_VARIABLES if v in os.environ]
    if given:
        return f"as the environment sets it ({', '.join(given)})"
    if not sys.platform.startswith("linux"):
        return "platform defaults (not Linux)"
    if _libgomp_loaded():
        return "libgomp defaults (OpenMP was loaded, by torch, before attn_lib was imported)"
    return None


def tune_openmp() -> str:
    """Apply the setting of the module docstring once per process; returns :func:`openmp_state`.

    Returns
    -------
    str
        What was done: the spin count set, or why nothing was (switched off by ``ATTN_LIB_TUNE_OMP``, set by the
        environment, not Linux, or libgomp already loaded).
    """
    global _STATE
    if _STATE is None:
        _STATE = _plan()
        if _STATE is None:
            os.environ["GOMP_SPINCOUNT"] = str(SPIN_COUNT)
            _STATE = f"GOMP_SPINCOUNT={SPIN_COUNT}, set by attn_lib ({ENV}=0 switches it off)"
    return _STATE


def openmp_state() -> str:
    """One line for ``python -m attn_lib info``: how OpenMP's idle threads wait in this process."""
    return tune_openmp()
