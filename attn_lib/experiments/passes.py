r"""The shared forward pass of every experiment, and what an experiment provides to run on it: a frozen dataclass of
its parameters, a subclass of :class:`Experiment`, that names itself (:attr:`Experiment.name`), gives its result-cache
key (:meth:`Experiment.key_params`) and builds its *analysis*, an object with ``layer(shared)`` (called once per layer
of the pass with a :class:`SharedLayer`) and ``finish() -> DataFrame``. :meth:`Experiment.run` runs one experiment,
:func:`run_timed` several in the same passes (:func:`attn_lib.experiments.jobs.run_all`).

* **Nested prefixes.** In a causal model query row ``r`` depends only on tokens ``0..r``: one pass at the largest
  length serves every smaller length of the grids.
* **Bidirectional models.** An experiment with a grid of lengths (:attr:`Experiment.multi_length`) gets one analysis
  and one pass per length (:meth:`Experiment.units`, :func:`plan`).
* **One layer at a time.** The analyses share each layer's float64 :class:`~attn_lib.metrics.LayerData` and distance
  rows through :class:`SharedLayer`, so memory stays at one layer.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import torch

from .. import capture
from .. import metrics as M
from .._validation import check_bool, check_int, check_int_list
from ..cache import make_key
from .inputs import as_text, is_causal, table_meta, text_window

__all__: list[str] = []  # the machinery of the experiments: imported by name, not by a user

SCHEMA = 1  # bump when the tables change (part of every cache key)


# ---- one layer of the pass, shared by its analyses --------------------------------------------------------------
def layer_mask(la) -> torch.Tensor:
    """The visibility mask of a captured layer without its leading batch dimensions: ``(L, L)`` or ``(H, L, L)``."""
    m = la.mask
    while m.dim() > 3:
        m = m[0]
    return m


class SharedLayer:
    """Per-layer memo shared by the analyses of one pass (float64 LayerData, distance rows per N, ...) of the captured
    layer ``la`` (:class:`attn_lib.capture.LayerAttention`)."""

    def __init__(self, la):
        self.la = la
        self._memo: dict = {}

    def get(self, key, fn):
        """The value stored under ``key``, computed by ``fn()`` the first time."""
        if key not in self._memo:
            self._memo[key] = fn()
        return self._memo[key]

    def _build(self, gram: bool) -> M.LayerData:
        la = self.la
        with M._engine.large_ops():  # whole-layer softmax and Gram products: multi-threaded torch pays off here
            ld = M.LayerData.from_logits(la.logits[0], la.values[0], mask=layer_mask(la))
            if gram:
                ld.gram, ld.zdot()
        return ld

    def layer(self) -> M.LayerData:
        """The layer in float64 with its Gram matrix and ``z . x`` products."""
        return self.get("ld", lambda: self._build(gram=True))

    def weights_layer(self) -> M.LayerData:
        """The layer in float64 without the Gram products of :meth:`layer`, unless an analysis has built those."""
        return self._memo["ld"] if "ld" in self._memo else self.get("ld_weights", lambda: self._build(gram=False))

    def dist(self, N: int, p="L-1") -> M.distance.DistanceRows:
        """:func:`attn_lib.metrics.distance_metrics` of the layer at ``N``."""
        return self.get(("dist", N, p), lambda: M.distance_metrics(self.layer(), N=N, p=p))


# ---- the pass ---------------------------------------------------------------------------------------------------
class Progress:
    """Progress for long runs: tqdm bars and status lines on stderr when enabled, nothing at all otherwise (off by
    default in the library, as the book build treats stderr in a chapter as an error; the CLI turns it on)."""

    def __init__(self, enabled: Any = False):
        self.enabled = check_bool("progress", False if enabled is None else enabled)

    def bar(self, **kw):
        from tqdm.auto import tqdm  # tqdm.auto probes for a notebook: loaded only when a bar is made

        return tqdm(file=sys.stderr, disable=not self.enabled, dynamic_ncols=True, **kw)

    def say(self, msg: str) -> None:
        if self.enabled:
            from tqdm.auto import tqdm  # see bar()

            tqdm.write(msg, file=sys.stderr)


def warm_up_kernels(handle, prog: Progress) -> None:
    """Compile the accelerator's kernels before the pass when they will run (CPU, engine auto/numba), with a progress
    bar: the first run compiles them (about 30 s), later runs load them from numba's disk cache."""
    if not prog.enabled or handle.device.type != "cpu" or M.settings.default_engine == "torch":
        return
    warm_up = M._engine.accelerated("warm_up")
    if warm_up is not None:
        warm_up(lambda total: prog.bar(total=total, desc="kernels (compiled on first use, then cached)", unit="kernel"))


def run_pass(
    handle,
    text,
    analyses: list,
    length: int,
    start: int = 0,
    prog: Progress | None = None,
    analysis_seconds: list | None = None,
    **capture_options,
) -> float:
    """One forward pass over ``length`` tokens of ``text`` from token ``start``; every analysis (an object with
    ``layer(shared: SharedLayer)``) sees every layer. Returns the seconds spent; ``analysis_seconds`` (one entry per
    analysis), if given, gets each analysis' own time added; ``capture_options`` go to
    :func:`attn_lib.capture.capture_attention` (``normalizer=``: the pass runs that normaliser in the live model)."""
    prog = prog or Progress(False)
    ids = text_window(handle, text, length, start)
    t0 = time.perf_counter()
    bar = prog.bar(total=handle.n_layers, desc=f"forward pass at L={length}, analysed layer by layer", unit="layer")

    def cb(la):
        sh = SharedLayer(la)
        with M.block_parallel():  # single-threaded torch, parallel row blocks (see metrics.block_parallel)
            for i, a in enumerate(analyses):
                t_a = time.perf_counter()
                a.layer(sh)
                if analysis_seconds is not None:
                    analysis_seconds[i] += time.perf_counter() - t_a
        del sh
        bar.update(1)

    try:
        capture.capture_attention(handle, ids, cb, keep_qk=False, **capture_options)
    finally:
        bar.close()
    return time.perf_counter() - t0


def plan(handle, units: list[tuple[Any, int]]) -> dict[int, list[int]]:
    """Pass length -> indices into ``units`` (``(analysis, pass length)`` pairs) of the analyses that run on it: one
    pass at the largest length for a causal model, one pass per distinct length for a bidirectional one."""
    if is_causal(handle):
        return {max(L for _, L in units): list(range(len(units)))}
    out: dict[int, list[int]] = {}
    for i, (_, L) in enumerate(units):
        out.setdefault(L, []).append(i)
    return dict(sorted(out.items()))


def run_timed(handle, text, made: dict, start: int, prog: Progress | None = None, timings: dict | None = None) -> dict:
    """``{name: table}`` of the experiments ``made`` (name -> its units, :meth:`Experiment.units`), all in the passes of
    :func:`plan`, each timed in ``attrs["timing"]`` (:func:`finish_timed`). ``timings`` gets the seconds of the passes
    (``pass``), of what they share (``shared``) and of each finishing step (``finish_<name>``)."""
    prog, timings = prog or Progress(False), {} if timings is None else timings
    units = [u for n in made for u in made[n]]
    owner = [n for n in made for _ in made[n]]
    per_unit = [0.0] * len(units)  # each analysis' own seconds in the passes
    timings["pass"] = 0.0
    passes = plan(handle, units)
    for L, idx in passes.items():
        own = [0.0] * len(idx)
        timings["pass"] += run_pass(handle, text, [units[i][0] for i in idx], L, start, prog, own)
        for i, t in zip(idx, own):
            per_unit[i] += t
    per_analysis = {n: sum(t for t, o in zip(per_unit, owner) if o == n) for n in made}
    lengths = list(passes)
    info = {  # what the experiments of the passes share
        # the passes' seconds less the analyses' own: forward passes, capture and the layer set-up
        "shared_pass_s": max(0.0, timings["pass"] - sum(per_analysis.values())),
        "pass_length": lengths[0] if len(lengths) == 1 else lengths,  # one pass, or one per length (bidirectional)
        "experiments_in_pass": list(made),
        "device": str(handle.device),
    }
    timings["shared"] = info["shared_pass_s"]
    out = {}
    with prog.bar(total=len(made), desc="finishing the experiments", unit="experiment") as bar:
        for n in made:
            bar.set_postfix_str(n)
            out[n], timings[f"finish_{n}"] = finish_timed(made[n], per_analysis[n], info)
            bar.update(1)
    return out


def finish_timed(units, analysis_s: float, info: dict) -> tuple[pd.DataFrame, float]:
    """``(table, finishing seconds)`` of an experiment from its analyses ``units`` (several, one per length, on a
    bidirectional model). ``attrs["timing"]`` (cached with the table, read by
    :func:`attn_lib.book.tables.runtime_table`) holds ``analysis_s`` (its time in the passes plus the finishing step),
    ``info`` (:func:`run_timed`), threads, when, and the named parts of its time (critical_n: ``mc_scan_s``)."""
    t0 = time.perf_counter()
    df = units[0][0].finish() if len(units) == 1 else pd.concat([a.finish() for a, _ in units], ignore_index=True)
    t_finish = time.perf_counter() - t0
    parts: dict = {}
    for a, _ in units:
        for k, v in getattr(a, "timing_parts", {}).items():
            parts[k] = parts.get(k, 0.0) + v
    df.attrs["timing"] = {
        "analysis_s": analysis_s + t_finish,
        **info,
        "threads": torch.get_num_threads(),
        "computed_at": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        **parts,  # parts of analysis_s
    }
    return df, t_finish


# ---- the result cache -------------------------------------------------------------------------------------------
def cache_key(name: str, handle, text, **params) -> dict:
    """The result-cache key of experiment ``name`` (:func:`attn_lib.cache.make_key`), with the engine setting."""
    # the engine setting is part of the key: numba's float32 roots in the scan differ from torch's in the 7th digit
    return make_key(name, handle=handle, text=as_text(text), schema=SCHEMA, engine=M.settings.default_engine, **params)


def cached(cache, compute: Callable[[], Any], name: str, handle, text, **params):
    """``compute()``, or through ``cache`` (when not None) under :func:`cache_key` of ``name`` and the rest."""
    return compute() if cache is None else cache.get_or_compute(cache_key(name, handle, text, **params), compute)


def check_cache(result_cache):
    """``result_cache`` must be None or a :class:`~attn_lib.cache.ResultCache` (anything with its methods)."""
    if result_cache is not None and not all(
        callable(getattr(result_cache, m, None)) for m in ("get_or_compute", "get", "__contains__")
    ):
        raise ValueError(f"cache must be None or an attn_lib.cache.ResultCache (got {result_cache!r})")
    return result_cache


# ---- what an experiment provides --------------------------------------------------------------------------------
class RowsAnalysis:
    """Base of an analysis whose table is the rows (dicts) its ``layer`` appends to ``self.rows``."""

    def finish(self) -> pd.DataFrame:
        return pd.DataFrame(self.rows)


_PARAMETERS = """
    Parameters
    ----------
    handle, text
        Model handle and text (:func:`~attn_lib.experiments.load_inputs`).
    params : {cls}, optional
        The parameters (defaults and ranges there); default: its defaults.
    start : int >= 0
        The window's first token.
    cache : attn_lib.cache.ResultCache, optional
        Looked up first; a computed table is stored there (keyed by model, text, parameters and library code).
    **overrides
        Fields of :class:`{cls}` that replace those of ``params`` (e.g. {example}).

    Returns
    -------
    pandas.DataFrame
{returns}
    """


class Experiment:
    """Base of the experiments' parameter dataclasses: a subclass is a ``@dataclass(frozen=True)`` whose fields are the
    experiment's parameters with their defaults, checked in ``__post_init__`` (a ``ValueError`` naming the parameter
    and its range); its analysis reads them; a :class:`~attn_lib.experiments.Profile` holds one per experiment."""

    #: the experiment's name: its table in :func:`~attn_lib.experiments.run_all` and its result-cache key
    name: ClassVar[str]
    #: a grid of window lengths (field ``lengths``): on a bidirectional model each length needs its own pass
    multi_length: ClassVar[bool] = False
    #: the analysis' class: ``analysis_class(params, meta)``, with :attr:`grouped` also the key/value group of each head
    analysis_class: ClassVar[type]
    grouped: ClassVar[bool] = False

    def set_checked(self, **values) -> None:
        """Store checked values in the frozen fields (for ``__post_init__``)."""
        for k, v in values.items():
            object.__setattr__(self, k, v)

    def key_params(self) -> dict:
        """The parameters in the result-cache key: every field, tuples as lists."""
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        return {k: list(v) if isinstance(v, tuple) else v for k, v in values.items()}

    def pass_length(self) -> int:
        """Tokens of the window the analysis reads."""
        return max(self.lengths) if self.multi_length else self.L

    @classmethod
    def build(cls, params: Experiment | None = None, **overrides) -> Experiment:
        """``params`` (default: the class's defaults) with ``overrides`` replaced and checked again (what
        ``critical_n(handle, text, params, alpha=0.05)`` runs)."""
        if params is None:
            return cls(**overrides)
        if not isinstance(params, cls):
            raise ValueError(f"params must be a {cls.__name__} (got {type(params).__name__})")
        return dataclasses.replace(params, **overrides) if overrides else params

    @classmethod
    def public(cls, doc: str, returns: str, example: str) -> Callable[..., pd.DataFrame]:
        """The public function ``f(handle, text, params=None, *, start=0, cache=None, **overrides)``: :meth:`run` of
        :meth:`build`. Its docstring: ``doc``, these parameters (``example``: overrides), ``returns`` (the table)."""

        def run(handle, text, params: Experiment | None = None, *, start: int = 0, cache=None, **overrides):
            return cls.build(params, **overrides).run(handle, text, start=start, cache=cache)

        run.__name__ = run.__qualname__ = cls.name
        run.__module__ = cls.__module__
        returns = "\n".join(" " * 8 + line.strip() for line in returns.splitlines())
        run.__doc__ = doc + "\n" + _PARAMETERS.format(cls=cls.__name__, example=example, returns=returns)

        return run

    def fit(self, handle, seed: int | None = None) -> Experiment:
        """These parameters with their grids cut at the model's context (the lengths that fit, or ``L`` cut with the
        ``n_values`` below it), and ``seed`` (if given) for an experiment with a field ``seed``."""
        cap, changes = int(handle.max_length), {}
        if self.multi_length:
            changes["lengths"] = [L for L in self.lengths if L <= cap]
        elif self.L > cap:
            changes["L"] = cap
            if hasattr(self, "n_values"):
                changes["n_values"] = [n for n in self.n_values if n < cap]
        if seed is not None and hasattr(self, "seed"):
            changes["seed"] = seed
        return dataclasses.replace(self, **changes)

    def for_model(self, handle) -> Experiment:
        """These parameters, checked against the model: every window fits its context (``handle.max_length``)."""
        name, lengths = ("lengths", self.lengths) if self.multi_length else ("L", [self.L])
        check_int_list(name, lengths, low=2, high=int(handle.max_length))
        return self

    def analysis(self, handle, meta: dict):
        """The analysis object of one pass (``layer(shared)``, ``finish()``); ``meta`` labels its rows."""
        groups = kv_groups(int(handle.n_heads), int(getattr(handle, "n_kv_heads", 0) or 0))
        return self.analysis_class(self, meta, *([groups] if self.grouped else []))

    def units(self, handle, meta: dict) -> list[tuple[Any, int]]:
        """The ``(analysis, pass length)`` pairs: a causal model has one analysis over every length (row ``r`` is the
        same in every prefix longer than ``r``), a bidirectional one an analysis and a pass per length of a grid."""
        if is_causal(handle) or not self.multi_length:
            return [(self.analysis(handle, meta), self.pass_length())]
        return [(dataclasses.replace(self, lengths=(L,)).analysis(handle, meta), L) for L in self.lengths]

    def run(self, handle, text, *, start: int = 0, cache=None) -> pd.DataFrame:
        """The experiment's table on ``text`` from token ``start`` (a window of :meth:`pass_length` tokens), from
        ``cache`` when it holds it, else computed and stored there under :func:`cache_key` (arguments as for
        :meth:`public`)."""
        params = self.for_model(handle)
        result_cache = check_cache(cache)
        start = check_int("start", start, low=0)

        def compute():  # timed as run_all times its experiments: the table is the same cache entry
            made = {self.name: params.units(handle, table_meta(handle, text))}
            return run_timed(handle, text, made, start)[self.name]

        return cached(result_cache, compute, self.name, handle, text, start=start, **params.key_params())


# ---- rows, heads and grids --------------------------------------------------------------------------------------
def sens_row_indices(L: int, sens_rows: int = 0) -> np.ndarray:
    """Rows of Algorithm 5's set ``R`` at window length ``L``, ascending: every ``max(1, L // sens_rows)``-th row,
    counted back from the last one (``t = L, L - stride, ...``); all rows if ``sens_rows`` is 0 or ``>= L``."""
    st = max(1, L // sens_rows) if sens_rows > 0 else 1
    return np.arange(L - 1, -1, -st)[::-1].copy()


def kv_groups(n_heads: int, n_kv_heads: int) -> np.ndarray:
    """Key/value group of each query head: ``h // (n_heads // n_kv_heads)`` (grouped-query attention as in Llama;
    ``n_kv_heads`` 0 or ``n_heads``: plain multi-head attention)."""

    n_kv = n_kv_heads if n_kv_heads and n_heads % n_kv_heads == 0 else n_heads
    return np.arange(n_heads) // (n_heads // n_kv)


def check_n_values(values, L: int) -> list[int]:
    """``n_values``: ``N`` values in ``[1, L - 1]``, sorted without repeats."""
    out = check_int_list("n_values", values, low=1)
    if max(out) > L - 1:
        raise ValueError(f"n_values must be integers in [1, L-1] = [1, {L - 1}] (got {max(out)})")
    return out
