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
it (and so report it as set by the environment). Results do not change: the spin count decides only how a waiting
thread waits. ``ATTN_LIB_TUNE_OMP=0`` switches it off.

Measured on the 2-core build machine (``benchmarks/README.md``, "Issue 23, seventh round"), libgomp's default against
3,000: the per-layer metrics with one of the two cores kept busy by another process ran 1.58-1.76 times their idle
time instead of 2.03-2.50 (plain calls), and the paper-profile reproduction took 97.5 s instead of 118.4 s (one run
each); idle, the profile took 68.6-73.5 s against 72.2-75.9 s, with 10 % less CPU (one 3,000 run took 86.5 s).
``OMP_WAIT_POLICY=PASSIVE`` (no spinning at all) helped the metrics as much but slowed the forward passes with a
swapped normaliser, which run many short torch operations one after the other, by 30-50 %; with 3,000 spins those
stayed within the machine's noise.
"""

from __future__ import annotations

import os
import platform
import sys

__all__ = ["ENV", "SPIN_COUNT", "USER_VARIABLES", "TUNED", "tune_openmp", "openmp_state"]

#: Environment variable; ``0``, ``false``, ``no`` or ``off`` leaves libgomp's defaults alone.
ENV = "ATTN_LIB_TUNE_OMP"
#: Iterations an idle libgomp thread spins before it sleeps (libgomp's default: 300,000).
SPIN_COUNT = 3000
#: The variables through which the environment already decides how libgomp's threads wait (when not empty).
USER_VARIABLES = ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")
TUNED = f"GOMP_SPINCOUNT={SPIN_COUNT}, set by attn_lib ({ENV}=0 switches it off)"

_STATE: str | None = None


def _libgomp_loaded() -> str | None:
    """The path of a libgomp that the loader would reuse for torch (soname ``libgomp.so.1``) if one is mapped into
    this process already, when a new spin count would not be read; ``None`` otherwise. Copies vendored under other
    sonames (``libgomp-<hash>.so.1``) do not count: torch still loads, and initialises, its own."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            paths = {line.split()[-1] for line in f if "/" in line}
    except OSError:  # no /proc: judge by torch, the usual first user of libgomp
        return "torch" if "torch" in sys.modules else None
    return next((p for p in sorted(paths) if os.path.basename(p).startswith("libgomp.so.")), None)


def _plan() -> str | None:
    """Why the setting does not apply, or ``None`` when it does."""
    if os.environ.get(ENV, "").strip().lower() in ("0", "false", "no", "off"):
        return f"libgomp defaults ({ENV}=0)"
    given = [f"{v}={os.environ[v]}" for v in USER_VARIABLES if os.environ.get(v, "").strip()]
    if given:
        return f"as the environment sets it ({', '.join(given)})"
    if platform.system() != "Linux":
        return "platform defaults (not Linux)"
    loaded = _libgomp_loaded()
    if loaded:
        return f"libgomp defaults (OpenMP was loaded before attn_lib was imported: {loaded})"
    return None


def tune_openmp() -> bool:
    """Apply the setting of the module docstring once per process.

    Returns
    -------
    bool
        ``True`` when the spin count was set (now or at an earlier call), ``False`` when it does not apply: switched
        off by ``ATTN_LIB_TUNE_OMP``, set by the environment, not Linux, or libgomp already loaded
        (:func:`openmp_state` says which).
    """
    global _STATE
    if _STATE is None:
        _STATE = _plan()
        if _STATE is None:
            os.environ["GOMP_SPINCOUNT"] = str(SPIN_COUNT)
            _STATE = TUNED
    return _STATE == TUNED


def openmp_state() -> str:
    """One line for ``python -m attn_lib info``: how OpenMP's idle threads wait in this process."""
    tune_openmp()
    return _STATE
