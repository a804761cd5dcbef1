"""How the metrics run: the :data:`settings`, the choice between accelerated implementations and the torch
definitions, and the threading. A faster implementation for CPU float64 tensors and prefix masks may be registered
under the metric's name (:func:`register`); the metric asks :func:`choose` whether to run it. The core never imports
an accelerator: the packages of the entry-point group ``attn_lib.accelerators`` are imported at the first look-up and
register theirs; one that fails to import leaves the torch definitions in use, and :func:`accelerators` says why."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib.metadata
import os
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor

import torch

from .._validation import check_choice, check_int, max_threads

__all__ = ["settings", "configure"]

F64 = torch.float64
#: the values of every ``engine`` argument.
ENGINES = ("auto", "numba", "torch")


def _env_engine() -> str:
    return os.environ.get("ATTN_LIB_ENGINE", "auto").strip().lower() or "auto"


@dataclasses.dataclass
class Settings:
    """The tunable settings of :mod:`attn_lib.metrics`, read at call time from :data:`settings` (:func:`configure`)."""

    #: what ``engine="auto"`` means (``"auto"``, ``"torch"`` or ``"numba"``); initially ``ATTN_LIB_ENGINE``
    default_engine: str = dataclasses.field(default_factory=_env_engine)
    #: target elements of one (H, rows, W) work block of the torch code (~4 MB in float64)
    block_elems: int = 1 << 19
    #: the same for the critical-N scan, whose ~6 work arrays are revisited for every N (to stay in L2 cache)
    scan_block_elems: int = 1 << 19
    #: largest N for which the compiled distance kernel also computes d_1 (cost N t per row; ``d1_cummax`` above)
    kernel_d1_max_n: int = 64
    #: the compiled top-N order keeps at least ``L // order_prefetch_div`` columns per row (0: only those requested;
    #: 1: each row sorted once, fully, for every experiment of the layer)
    order_prefetch_div: int = 1


#: the settings every module of :mod:`attn_lib.metrics` reads at call time.
settings = Settings()


@contextlib.contextmanager
def configure(**changes):
    """Context: the given :class:`Settings` fields take the given values inside (``ValueError`` for an unknown name
    or a bad value)."""
    names = {f.name for f in dataclasses.fields(Settings)}
    for name, value in changes.items():
        if name not in names:
            raise ValueError(f"configure: unknown setting {name!r}; the settings are {sorted(names)}")
        if name == "default_engine":
            check_choice(name, value, list(ENGINES))
        else:  # block sizes at least 1; kernel_d1_max_n and order_prefetch_div may be 0 (see Settings)
            check_int(name, value, low=0 if name in ("kernel_d1_max_n", "order_prefetch_div") else 1)
    old = {name: getattr(settings, name) for name in changes}
    for name, value in changes.items():
        setattr(settings, name, value)
    try:
        yield settings
    finally:
        for name, value in old.items():
            setattr(settings, name, value)


#: worker threads of :func:`run_blocks` inside :func:`block_parallel` (``None``: ``torch.get_num_threads()``).
_WORKERS: int | None = None


#: the accelerated implementations by metric name, each as its torch code to 1e-9 relative (1e-6: float32 square roots);
#: ``"warm_up"`` is no metric: ``warm_up(bar)`` compiles them, calling ``b.update(1)`` in ``with bar(total) as b``.
ACCELERATED: dict[str, Callable] = {}
#: the entry-point group whose packages register accelerated implementations when imported.
GROUP = "attn_lib.accelerators"
#: ``None`` before the discovery of :data:`GROUP`, then ``{entry-point name: None if it loaded, else why not}``.
_FOUND: dict[str, str | None] | None = None


def register(name: str, fn: Callable) -> None:
    """Register ``fn`` as the accelerated implementation of the metric ``name`` (a later registration replaces it)."""
    if not callable(fn):
        raise ValueError(f"register: fn must be callable (got {fn!r} for {name!r})")
    ACCELERATED[name] = fn


def _discover() -> dict[str, str | None]:
    """Import every accelerator of :data:`GROUP` once, remembering which failed and why (ImportError only)."""
    global _FOUND
    if _FOUND is None:
        found = {}
        for ep in importlib.metadata.entry_points(group=GROUP):
            try:
                ep.load()
                found[ep.name] = None
            except ImportError as exc:
                found[ep.name] = f"{ep.name}: {type(exc).__name__}: {exc}"
        _FOUND = found
    return _FOUND


def accelerated(name: str) -> Callable | None:
    """The registered accelerated implementation of the metric ``name``, or ``None``."""
    _discover()
    return ACCELERATED.get(name)


def accelerators() -> str:
    """The accelerators in use, for ``attn-lib info``: e.g. ``"numba (10 metrics)"``, or ``"none: <why>"``."""
    found = _discover()
    loaded = [name for name, why in found.items() if why is None]
    metrics = sorted(set(ACCELERATED) - {"warm_up"})
    if loaded and metrics:
        return f"{', '.join(loaded)} ({len(metrics)} metrics: {', '.join(metrics)})"
    reasons = [why for why in found.values() if why] or [
        f"no installed package declares the entry-point group {GROUP!r} (pip install -e . registers attn_lib.accel)"
    ]
    return "none: " + "; ".join(reasons)


def choose(name: str, engine: str, applies: bool, needs: str = "") -> Callable | None:
    """Validate ``engine`` and return the accelerated implementation of the metric ``name`` to run (``None``: torch);
    ``applies``: whether it can run on this input (CPU float64, prefix masks, any condition ``needs`` names), else
    ``"numba"`` is a ValueError. ``"auto"`` follows ``settings.default_engine``."""
    check_choice("engine", engine, ENGINES)
    if engine == "auto":
        default = settings.default_engine
        if default not in ENGINES:
            raise ValueError(f"ATTN_LIB_ENGINE must be one of 'auto', 'numba', 'torch' (got {default!r})")
        engine = "torch" if default == "torch" else "auto"
    impl = accelerated(name) if applies and engine != "torch" else None
    if engine == "numba" and impl is None:
        raise ValueError(
            f"engine='numba' needs numba, a CPU float64 layer and prefix masks (row r sees tokens 0..t_r-1)"
            f"{needs}; use engine='torch'"
        )
    return impl


def kernel_threads() -> int:
    """Threads for a compiled kernel: the workers of :func:`block_parallel`, else torch's thread count."""
    return _WORKERS or torch.get_num_threads()


@contextlib.contextmanager
def block_parallel(workers: int | None = None):
    """Context: torch runs single-threaded inside, the metrics' row blocks on ``workers`` Python threads (at most 8
    per CPU; default: an enclosing ``block_parallel``'s, else ``torch.get_num_threads()``). Per-operation threading
    pays a barrier per tensor operation: 10-50x slower on a busy machine (``benchmarks/bench_contention.py``)."""
    global _WORKERS
    prev_threads, prev_workers = torch.get_num_threads(), _WORKERS
    if workers is not None:
        workers = check_int("workers", workers, low=1, high=8 * max_threads())
    _WORKERS = workers if workers is not None else (prev_workers or prev_threads)
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(prev_threads)
        _WORKERS = prev_workers


def coarse_threads(fn: Callable) -> Callable:
    """Decorator of the public metrics: the call runs inside :func:`block_parallel` unless it already does."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if _WORKERS is not None:
            return fn(*args, **kwargs)
        with block_parallel():
            return fn(*args, **kwargs)

    return wrapper


@contextlib.contextmanager
def torch_threads(threads: int | None):
    """torch's intra-op threads set to ``threads`` for the block (``None``: left as they are), restored afterwards."""
    prev = torch.get_num_threads()
    torch.set_num_threads(threads or prev)
    try:
        yield
    finally:
        torch.set_num_threads(prev)


def large_ops():
    """Inside :func:`block_parallel`: torch uses the worker count again, for a few large operations over a whole
    layer where per-operation threading pays off. Elsewhere: no change."""
    return torch_threads(_WORKERS)


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
