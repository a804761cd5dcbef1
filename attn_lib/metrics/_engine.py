"""How the metrics run: the tunable settings, the choice between the numba kernels and the float64 torch code, and
the threading of row blocks and kernels.

The settings below are read at call time. Assign them on the package (``attn_lib.metrics.BLOCK_ELEMS = ...``, or
``monkeypatch.setattr(attn_lib.metrics, ...)`` in a test): :mod:`attn_lib.metrics` forwards those assignments here,
so every module of the package sees them.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor

import torch

from .. import _kernels as _kern
from .._validation import check_choice

__all__ = [
    "DEFAULT_ENGINE",
    "BLOCK_ELEMS",
    "SCAN_BLOCK_ELEMS",
    "KERNEL_D1_MAX_N",
    "ORDER_PREFETCH_DIV",
    "SETTINGS",
    "F64",
    "ENGINES",
    "kernels_apply",
    "uses_numba",
    "kernel_threads",
    "block_parallel",
    "large_ops",
    "run_blocks",
]

F64 = torch.float64
#: the values of every ``engine`` argument.
ENGINES = ("auto", "numba", "torch")

#: target number of float64 elements of one (H, rows, W) work block (~4 MB): keeps memory bounded and the
#: working set in cache.
BLOCK_ELEMS = 1 << 19
#: what ``engine="auto"`` means: ``"auto"`` (numba on CPU with prefix masks, torch elsewhere), or ``"torch"`` /
#: ``"numba"`` everywhere they apply. Set by the environment variable ``ATTN_LIB_ENGINE`` (e.g. ``torch`` for float64
#: square roots in the critical-N scan), or assign ``attn_lib.metrics.DEFAULT_ENGINE``.
DEFAULT_ENGINE = os.environ.get("ATTN_LIB_ENGINE", "auto").strip().lower() or "auto"
#: when the compiled top-N order runs, it keeps at least ``L // ORDER_PREFETCH_DIV`` columns per row: the
#: critical-N scan goes up to ``N = L/4``, so one sort per layer serves every experiment (0 disables prefetching).
ORDER_PREFETCH_DIV = 4
#: largest N for which the compiled distance kernel also computes d_1 of Theorem 1(a) (cost N t per row); above it
#: the running-maximum kernel :func:`attn_lib._kernels.d1_cummax` is cheaper.
KERNEL_D1_MAX_N = 64
#: block size of the critical-N scan, whose ~6 work arrays are revisited for every N: small enough to stay in
#: the L2 cache.
SCAN_BLOCK_ELEMS = 1 << 19
#: the names above that :mod:`attn_lib.metrics` forwards to this module.
SETTINGS = ("DEFAULT_ENGINE", "BLOCK_ELEMS", "SCAN_BLOCK_ELEMS", "KERNEL_D1_MAX_N", "ORDER_PREFETCH_DIV")

#: worker threads of :func:`run_blocks` inside :func:`block_parallel` (``None``: ``torch.get_num_threads()``).
_WORKERS: int | None = None


# ----------------------------------------------------------------------------------------------------------
# engine choice
# ----------------------------------------------------------------------------------------------------------
def kernels_apply(device: torch.device, prefix: bool) -> bool:
    """Whether the compiled kernels of :mod:`attn_lib._kernels` can run: CPU tensors, prefix masks (row ``r`` sees
    tokens ``0..t_r-1``), numba importable."""
    return device.type == "cpu" and prefix and _kern.available()


def uses_numba(engine: str, applies: bool, needs: str = "") -> bool:
    """Validate ``engine`` and say whether the compiled kernel runs.

    Parameters
    ----------
    engine : {"auto", "numba", "torch"}
        The caller's ``engine`` argument. ``"auto"`` follows :data:`DEFAULT_ENGINE` and picks numba where it applies.
    applies : bool
        Whether the kernel can run on this input (see :func:`kernels_apply`, plus any condition of the caller).
    needs : str
        The caller's extra condition, for the error message (e.g. ``" and form='sum'"``).

    Returns
    -------
    bool
        ``True`` for the numba kernel, ``False`` for the float64 torch code.
    """
    check_choice("engine", engine, ENGINES)
    if engine == "auto":
        default = DEFAULT_ENGINE
        if default not in ENGINES:
            raise ValueError(f"ATTN_LIB_ENGINE must be one of 'auto', 'numba', 'torch' (got {default!r})")
        return default != "torch" and applies
    if engine == "numba" and not applies:
        raise ValueError(
            f"engine='numba' needs numba, a CPU layer and prefix masks (row r sees tokens 0..t_r-1)"
            f"{needs}; use engine='torch'"
        )
    return engine == "numba"


# ----------------------------------------------------------------------------------------------------------
# threads
# ----------------------------------------------------------------------------------------------------------
def kernel_threads() -> int:
    """Threads for a compiled kernel: the workers of :func:`block_parallel`, else torch's thread count."""
    return _WORKERS or torch.get_num_threads()


@contextlib.contextmanager
def block_parallel(workers: int | None = None):
    """Context: torch runs single-threaded inside, and the row-block loops of the metrics run on ``workers``
    Python threads instead.

    Per-operation OpenMP parallelism pays a thread barrier for every tensor operation; on a shared or busy machine
    a barrier waits for a descheduled thread (milliseconds), which made the layer analyses 10-50x slower than
    single-threaded. Coarse-grained parallelism over row blocks (each milliseconds of work) has no such barriers.

    Parameters
    ----------
    workers : int, optional
        Worker threads for the row blocks and the compiled kernels, at most 8 per CPU of this process; default: the
        workers of an enclosing ``block_parallel``, else the current ``torch.get_num_threads()``.
    """
    global _WORKERS
    prev_threads = torch.get_num_threads()
    prev_workers = _WORKERS
    if workers is not None:
        from .._validation import check_int, max_threads

        # a few more workers than CPUs is allowed (the tests run 3 on 2 cores); thousands are not
        workers = check_int("workers", workers, low=1, high=8 * max_threads())
    _WORKERS = workers if workers is not None else (prev_workers or prev_threads)
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(prev_threads)
        _WORKERS = prev_workers


@contextlib.contextmanager
def large_ops():
    """Inside :func:`block_parallel`: let torch use the worker count again for a few large operations (softmax and
    Gram products over a whole layer), where per-operation threading pays off. Elsewhere: no change."""
    if _WORKERS is None:
        yield
        return
    prev = torch.get_num_threads()
    torch.set_num_threads(_WORKERS)
    try:
        yield
    finally:
        torch.set_num_threads(prev)


def run_blocks(work: Callable[..., None], blocks: Iterable[tuple]) -> None:
    """Call ``work(*block)`` for every block; each call writes its own rows. Inside :func:`block_parallel` the
    blocks are shared out to its worker threads (one torch thread each); elsewhere they run in order."""
    blocks = list(blocks)
    n_threads = _WORKERS or 1
    if n_threads <= 1 or len(blocks) < 2:
        for block in blocks:
            work(*block)
        return
    with ThreadPoolExecutor(max_workers=min(n_threads, len(blocks))) as pool:
        for future in [pool.submit(work, *block) for block in blocks]:
            future.result()
