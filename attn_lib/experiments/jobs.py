"""The jobs behind the command line, each a few named steps: :func:`run_all` (every experiment of a profile in one
forward pass, with the result cache), :func:`run_reproduce` (the ``reproduce`` command: model, text, every experiment,
figures and report) and :func:`run_compare` (the ``compare-normalizers`` command of the chapter "Beyond softmax")."""

from __future__ import annotations

import contextlib
import json
import time
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path

import pandas as pd

from .. import corpus, models
from .._validation import check_bool, check_choice, check_int, check_threads, prepare_output_dir
from ..cache import ResultCache
from ..metrics._engine import torch_threads
from .coverage import report_coverage_params
from .critical import CriticalNParams, CriticalSeedsParams, critical_n_summary
from .diagnosis import DiagnosisParams
from .distance import DistanceVsLengthParams, DistanceVsNParams
from .inputs import as_text, load_inputs, require_causal, table_meta, with_notes
from .normalizers import compare_normalizers, critical_n_from_heads, limits_summary
from .passes import Experiment, Progress, cache_key, check_cache, plan, run_timed, warm_up_kernels
from .profiles import PROFILES, BeyondProfile, Profile, get_beyond_profile, get_profile
from .sensitivity import RawSensitivityParams, SensitivityParams
from .separability import SeparabilityParams
from .swap import HELD_OUT_START, live_swap

__all__ = ["run_all", "run_reproduce", "run_compare"]

#: The experiments of :func:`run_all`, in the order they run in the pass: name -> parameter class. The last three are
#: the reproduction report's diagnostics: why the critical N is where it is, Fig. 4 with the temperature on the raw
#: scores q . k, the Monte-Carlo critical N over seeds (Reading the paper, §The critical N, §The sensitivity metric).
ALGORITHMS: dict[str, type[Experiment]] = {
    cls.name: cls
    for cls in (
        DistanceVsLengthParams,
        DistanceVsNParams,
        CriticalNParams,
        SeparabilityParams,
        SensitivityParams,
        DiagnosisParams,
        RawSensitivityParams,
        CriticalSeedsParams,
    )
}
EXPERIMENTS = tuple(ALGORITHMS)


def profile_params(handle, profile: Profile, seed: int | None = None) -> dict[str, Experiment]:
    """``{name: parameters}`` of every experiment of :data:`EXPERIMENTS` in ``profile``, grids cut at the context of
    ``handle`` (:meth:`~attn_lib.experiments.passes.Experiment.fit`) and checked against it; ``seed`` (None: each
    one's own) replaces the seed of every experiment that draws random numbers."""
    params = {n: getattr(profile, n, None) for n in EXPERIMENTS}  # and the two derived from the profile's:
    params[RawSensitivityParams.name] = RawSensitivityParams.of(profile.gradient_sensitivity, handle)
    params[CriticalSeedsParams.name] = CriticalSeedsParams.of(profile.critical_n, profile.mc_seeds)
    return {n: params[n].fit(handle, seed).for_model(handle) for n in EXPERIMENTS}


def run_all(
    handle,
    text,
    profile="quick",
    cache=None,
    *,
    start: int = 0,
    seed: int | None = None,
    experiments: Iterable[str] | None = None,
    timings: dict | None = None,
    threads: int | None = None,
    progress: bool = False,
) -> dict[str, pd.DataFrame]:
    """``{name: DataFrame}`` of the ``experiments`` (default all of :data:`EXPERIMENTS`, in the order asked; plus
    ``"critical_n_summary"`` with ``critical_n``) with the grids of ``profile`` (``"paper"``, ``"quick"`` or a
    :class:`Profile`, :func:`profile_params`), in ONE forward pass (:mod:`attn_lib.experiments.passes`) over ``text``
    from token ``start``; those in ``cache`` (a :class:`attn_lib.cache.ResultCache`) are not recomputed. ``seed``: of
    every random part (default: each experiment's own). ``timings`` receives the seconds of the pass and of each
    finishing step. ``threads``: CPU threads (torch's in the pass, row-block workers in the analyses,
    :func:`attn_lib.metrics.block_parallel`), restored afterwards. ``progress``: cache hits and tqdm bars on stderr."""
    prog = Progress(progress)
    cache = check_cache(cache)
    threads = None if threads is None else check_threads("threads", threads)
    prof = get_profile(profile)
    start = check_int("start", start, low=0)
    return _run_all(handle, text, prof, cache, start, seed, check_experiments(experiments), timings, prog, threads)


def _run_all(
    handle, text, prof: Profile, cache, start, seed, names, timings, prog: Progress, threads=None
) -> dict[str, pd.DataFrame]:
    """:func:`run_all` with its arguments checked."""
    params = profile_params(handle, prof, seed)
    keys = {n: cache_key(n, handle, text, start=start, **params[n].key_params()) for n in names}
    results = {n: cache.get(key) for n, key in keys.items() if cache is not None and key in cache}
    for n in results:  # the tables the cache holds already, saying so
        where = f" ({cache.path_for(keys[n])})" if hasattr(cache, "path_for") else ""
        prog.say(f"{n}: from the result cache{where}")
    todo = {n: params[n] for n in names if n not in results}
    if not todo:
        prog.say("every experiment came from the result cache: no forward pass (--no-cache recomputes)")
    else:
        with torch_threads(threads):  # the missing experiments, all in the same passes
            meta = table_meta(handle, text)
            made = {n: p.units(handle, meta) for n, p in todo.items()}
            longest = max(plan(handle, [u for n in made for u in made[n]]))
            check_text_holds(handle, text, longest, start, prof)  # before any work, in the user's terms
            warm_up_kernels(handle, prog)
            computed = run_timed(handle, text, made, start, prog, timings)
        for n, df in computed.items():
            results[n] = df if cache is None else cache.get_or_compute(keys[n], lambda df=df: df)
    if "critical_n" in results:
        cp = params["critical_n"]
        results["critical_n_summary"] = critical_n_summary(results["critical_n"], cp.alpha, cp.crit_fraction)
    return {k: results[k] for k in [*names, "critical_n_summary"] if k in results}


def check_text_holds(handle, text, length: int, start: int, prof: Profile | BeyondProfile) -> None:
    """``ValueError`` up front, in the profile's terms, when ``text`` has fewer than ``start + length`` tokens."""
    t = as_text(text)
    have = len(corpus.tokenize(handle.tokenizer, t.text, max_tokens=start + length))
    if have < start + length:
        short = f" from token start={start}" if start else ""
        raise ValueError(
            f"text {t.name!r} has {have} tokens; profile {prof.name!r} needs {start + length}{short} (its longest "
            f"window, L = {length}): use a longer text, or a profile with shorter windows (e.g. 'quick', L up to "
            f"{max(PROFILES['quick'].lengths)})"
        )


def check_formats(formats) -> tuple[str, ...]:
    """Figure formats, checked before any work: a single name is a tuple of one (not its letters)."""
    import matplotlib.figure  # heavy: loaded only when a reproduction is checked

    supported = sorted(matplotlib.figure.Figure().canvas.get_supported_filetypes())
    return tuple(_check_names("formats", formats, supported, "a list of figure formats"))


def check_experiments(experiments) -> list[str]:
    """The experiments to run, each once (else analysed twice in the pass), in the order given; a name is a list of
    one."""
    if experiments is None:
        return list(EXPERIMENTS)
    return _check_names("experiments", experiments, EXPERIMENTS, "None or a list of names")


def _check_names(name: str, values, choices, what: str) -> list:
    """``values`` (one name or an iterable of names from ``choices``) as a list without repeats, in the order given;
    ``ValueError`` naming ``name`` when it is not iterable (it must be ``what``), holds another name, or is empty."""
    choices = list(choices)
    try:
        out = [check_choice(name, v, choices) for v in ([values] if isinstance(values, str) else values)]
    except TypeError:
        raise ValueError(f"{name} must be {what} from {choices} (got {values!r})") from None
    if not out:
        raise ValueError(f"{name} must name at least one of {choices} (got an empty list)")
    return list(dict.fromkeys(out))


def _check_reproduce_args(profile, use_cache, formats, compare, threads) -> tuple:
    """``(profile, formats, compare, threads)`` of :func:`run_reproduce`, checked before any work."""
    prof = get_profile(profile)
    check_bool("use_cache", use_cache)
    formats = check_formats(formats)
    compare = [compare] if isinstance(compare, str) else list(compare or ())
    if not all(isinstance(c, str) and c.strip() for c in compare):
        raise ValueError(f"compare must be a list of model names (got {compare!r})")
    threads = None if threads is None else check_threads("threads", threads)  # as run_all
    # each model to compare must be loadable now (local cache, reachable Hub, packaged encoder, stand-in), not only
    # after the main model's experiments
    for name in compare:
        try:
            kind = models.resolve_name(name)["kind"]
        except ValueError as exc:
            raise ValueError(f"compare: {exc}") from None
        if kind == "unavailable":
            raise models.ModelUnavailableError(
                f"compare: model {name!r} is not in the local Hugging Face cache and the Hub is unreachable, so it "
                "cannot be loaded (checked before running anything)"
            )
    return prof, formats, compare, threads


def _load_main(model, text, device, handle, text_obj, prog: Progress, timings: dict) -> tuple:
    """``(handle, text, notes)`` of a reproduction: loaded unless given, with the one-off notices of the load."""
    if handle is None:
        prog.say(f"loading model {model!r} and text {text!r} ...")
        t0 = time.perf_counter()
        handle, loaded_text, notes = load_inputs(model, text, device=device, quiet=not prog.enabled)
        timings["load_model"] = time.perf_counter() - t0
        return handle, loaded_text if text_obj is None else text_obj, notes
    return (handle, text_obj, []) if text_obj is not None else (handle, *with_notes(corpus.load_text, text))


def _load_compared(name: str, device, prog: Progress, notes: list) -> tuple:
    """``(handle, seconds)`` of a model to compare; its new notices are added to ``notes`` and warned."""
    prog.say(f"loading model {name!r} to compare ...")
    t0 = time.perf_counter()
    h2, caught = with_notes(models.load_model, name, device=device, quiet=not prog.enabled)
    for note in list(h2.notes) + caught:
        if note not in notes:
            notes.append(note)
            warnings.warn(note, UserWarning, stacklevel=3)
    return h2, time.perf_counter() - t0


def _run_compared(loaded: list, text_obj, prof: Profile, cache, threads, prog: Progress, timings: dict) -> dict:
    """:func:`run_all` on each compared model: ``{report column: {"handle", "results"}}``."""
    from ..report import model_column  # the report layer loads matplotlib: only when a reproduction runs

    others: dict[str, dict] = {}
    for h2, t_load in loaded:
        t0 = time.perf_counter() - t_load
        prog.say(f"model: {h2.describe()}; text: {text_obj.name}; profile: {prof.name}")
        others[model_column(h2)] = {"handle": h2, "results": _run_report(h2, text_obj, prof, cache, prog, threads)}
        timings[f"experiments {h2.model_id}"] = time.perf_counter() - t0
    return others


def _run_report(handle, text_obj, prof: Profile, cache, prog: Progress, threads, timings=None) -> dict:
    """The tables of a reproduction, each from the result cache when it holds it: :func:`run_all`'s and chapter 5's
    multi-head coverage (:func:`~attn_lib.experiments.coverage.report_coverage_params`, seed 0: the table behind the row
    ``multihead-rule-model``)."""
    results = _run_all(handle, text_obj, prof, cache, 0, None, list(EXPERIMENTS), timings, prog, threads)
    params = report_coverage_params(handle, prof)
    key = cache_key(params.name, handle, text_obj, start=0, **params.key_params())
    cached = cache is not None and key in cache
    pass_at = f"one forward pass at L = {params.L} (N = {params.N}, {params.permutations} head orders)"
    prog.say(f"{params.name}: {'from the result cache' if cached else pass_at}")
    t0 = time.perf_counter()
    with torch_threads(threads):
        results["multihead_coverage"] = params.run(handle, text_obj, start=0, cache=cache)
    if timings is not None:
        timings["multihead_coverage"] = time.perf_counter() - t0
    return results


def _write_outputs(results, out: Path, handle, text_obj, prof, timings, formats, others, prog: Progress) -> dict:
    """The figures, ``results.json`` and ``report.md`` (:func:`attn_lib.report.write_report`)."""
    from .. import report as R  # see _run_compared

    t0 = time.perf_counter()
    with prog.bar(total=len(R.FIGURES), desc="figures", unit="figure") as bar:
        info = R.write_report(
            results,
            out,
            handle=handle,
            text=text_obj,
            profile=prof,
            timings=timings,
            formats=formats,
            on_figure=lambda stem: bar.update(1),
            compare=others or None,
        )
    timings["report"] = time.perf_counter() - t0
    return info


def _refresh_json_timings(info: dict, timings: dict) -> None:
    """Write the final timings into ``results.json`` (the report was written before the run's total was known)."""
    with contextlib.suppress(OSError, KeyError, ValueError):
        p = Path(info["json"])
        p.write_text(json.dumps(dict(json.loads(p.read_text()), timings_s=timings), indent=1, default=str))


def run_reproduce(
    model: str = "gpt2",
    device: str = "auto",
    profile: str = "paper",
    out: str | Path = "results",
    text: str = "war-and-peace",
    use_cache: bool = True,
    *,
    handle=None,
    text_obj=None,
    formats: Sequence[str] = ("png", "svg"),
    progress: bool = False,
    threads: int | None = None,
    compare: Sequence[str] = (),
) -> ReproduceResult:
    """The ``reproduce`` command: load ``model`` and ``text`` (:func:`~attn_lib.experiments.load_inputs`; or take
    ``handle`` / ``text_obj``), run :func:`run_all` with ``profile`` (``"paper"``: L up to 1024, ``"quick"``: up to
    128) and chapter 5's multi-head coverage, write the figures (in ``formats``), ``results.json`` and ``report.md``
    into ``out`` (checked writable *before* any work). ``use_cache``: the result cache (under ``ATTN_LIB_CACHE_DIR``).
    ``progress``, ``threads``: as for :func:`run_all`. ``compare``: further models run with the same profile and text,
    each cut at its own context: ``report.md`` gets a side-by-side verdict table (:func:`attn_lib.report.side_by_side`),
    figures 2a-4 a second panel (the first of them), ``results.json`` their tables under ``"compare"``. Returns a :class:`ReproduceResult`:
    output paths, timings, verdicts and ``notes``, the one-off notices of the load, also raised as ``UserWarning``."""
    prof, formats, compare, threads = _check_reproduce_args(profile, use_cache, formats, compare, threads)
    prog = Progress(progress)
    out = prepare_output_dir("out", out)  # before any work: a bad path must not cost the whole run
    t_all = time.perf_counter()
    timings: dict[str, float] = {}
    handle, text_obj, notes = _load_main(model, text, device, handle, text_obj, prog, timings)
    for note in notes:  # the CLI shows these as NOTE lines; in Python they are ordinary warnings
        warnings.warn(note, UserWarning, stacklevel=2)
    prog.say(f"model: {handle.describe()}; text: {text_obj.name}; profile: {prof.name}")
    cache = ResultCache(enabled=use_cache)
    # the models to compare are loaded first: one that cannot be had must fail before the main run, not after it
    loaded = [_load_compared(name, device, prog, notes) for name in compare]
    t0 = time.perf_counter()
    results = _run_report(handle, text_obj, prof, cache, prog, threads, timings)
    timings["experiments"] = time.perf_counter() - t0
    prog.say(f"experiments done in {timings['experiments']:.1f} s")
    others = _run_compared(loaded, text_obj, prof, cache, threads, prog, timings)
    info = _write_outputs(results, out, handle, text_obj, prof, timings, formats, others, prog)
    timings["total"] = time.perf_counter() - t_all
    info.update(timings=timings, notes=notes)
    _refresh_json_timings(info, timings)
    prog.say(f"wrote {info['report']} ({timings['total']:.1f} s in all)")
    return ReproduceResult(info)


class ReproduceResult(dict):
    """What :func:`run_reproduce` returns (a dict: ``out``, ``json``, ``report``, ``figures``, ``verdicts``,
    ``timings``); printing it gives a short summary with the verdict table."""

    def __str__(self) -> str:
        lines = [f"report: {self.get('report')}", f"results: {self.get('json')}"]
        lines.append(f"figures: {', '.join(self.get('figures', {}))}")

        vt = self.get("verdicts")
        if vt is not None and len(vt):
            lines += [
                f"  [{r.verdict}] {r.id}: {r.claim}" + (f" ({r.reading})" if r.reading else "") + f": {r.measured}"
                for r in vt.itertuples()
            ]
        sbs = self.get("side_by_side")
        if sbs is not None and len(sbs):
            labels = ("id", "claim", "reading", "evidence", "weak", "agree", "cause", "section")
            models = [c for c in sbs.columns if c not in labels]
            lines.append("side by side (verdict per model): " + ", ".join(models))
            lines += [f"  [{' | '.join(str(r[m]) for m in models)}] {r['id']}" for _, r in sbs.iterrows()]
        t = self.get("timings") or {}
        if "total" in t:
            lines.append(f"total time: {t['total']:.1f} s")
        return "\n".join(lines)


def _check_compare_text(handle, text, prof: BeyondProfile, start: int) -> None:
    """Before any work: the text must hold the comparison's window (from token 0) and the swap's (from ``start``)."""

    lc = max(prof.lengths)
    check_text_holds(handle, text, lc, 0, prof)
    need = start + prof.swap_length
    have = len(corpus.tokenize(handle.tokenizer, text, max_tokens=need))
    if have >= need:
        return
    room = have - prof.swap_length
    if room >= lc:
        hint = f"use --start between {lc} (the first token after the comparison's window) and {room}"
    elif room >= 0:
        hint = f"use --start {room} or less (the held-out window then overlaps the comparison's), or a longer text"
    else:
        hint = f"use a text of at least {prof.swap_length} tokens"
    raise ValueError(
        f"text {as_text(text).name!r} has {have} tokens; the live swap's held-out window needs tokens {start}..{need - 1} "
        f"(--start {start} plus the window of {prof.swap_length}): {hint}"
    )


def _write_compare(out_dir: Path, prof: BeyondProfile, df: pd.DataFrame, swap_losses: pd.DataFrame) -> tuple:
    """The files of :func:`run_compare`: ``(names written, limits summary)``."""
    from .. import report as R  # see _run_compared

    summary = limits_summary(df, prof.ks_alpha)
    crit = critical_n_from_heads(df, prof.ks_alpha)
    meta = {k: str(df[k].iloc[0]) for k in ("model", "text", "device")}
    prov = R.label(meta)
    limits = json.loads(summary.reset_index().to_json(orient="records"))
    texts = {
        "limits.md": f"# Normalisers on the paper's limits\n\n{prov}\n\n{R.beyond_limits_markdown(summary)}\n",
        "limits.json": json.dumps(dict(meta, profile=prof.as_dict(), limits=limits), indent=1),
        "swap.md": "# Held-out loss with each normaliser swapped in\n\n"
        f"{prov}\n\n{R.beyond_swap_table(swap_losses).to_markdown()}\n",
    }
    for name, content in texts.items():
        (out_dir / name).write_text(content, encoding="utf-8")
    summary.to_csv(out_dir / "limits.csv")
    for name, table in (("compare", df), ("critical_n", crit), ("swap_losses", swap_losses)):
        table.to_csv(out_dir / f"{name}.csv", index=False)
    files = ["limits.md", "limits.csv", "limits.json", "compare.csv", "critical_n.csv", "swap_losses.csv", "swap.md"]
    for name, fig in (("limits", R.figure_beyond_limits(df, crit)), ("swap", R.figure_beyond_swap(swap_losses))):
        for ext in ("png", "svg"):
            R.save_figure(fig, out_dir / f"{name}.{ext}", dpi=110, bbox_inches="tight")
            files.append(f"{name}.{ext}")
    return files, summary


def run_compare(
    model: str = "gpt2",
    *,
    device: str = "auto",
    profile: str = "paper",
    out="results-beyond",
    text: str = "war-and-peace",
    use_cache: bool = True,
    start: int = HELD_OUT_START,
    say=None,
) -> dict:
    """Run :func:`compare_normalizers` and :func:`live_swap` (``profile``: ``"paper"`` or ``"quick"`` of
    :data:`~attn_lib.experiments.BEYOND_PROFILES`; offline, GPT-2 resolves to the stand-in) and write into ``out``
    (checked before any work) ``limits.md`` / ``.csv`` / ``.json`` (:func:`limits_summary`), ``compare.csv`` (the tidy
    table), ``critical_n.csv``, ``swap_losses.csv`` and ``swap.md`` (held-out loss and perplexity), ``limits.png/.svg``
    and ``swap.png/.svg``. ``start``: first token of the swap's held-out window (the text needs ``start +
    profile.swap_length`` tokens; e.g. ``max(profile.lengths)`` for a short text); ``say``: called with one-line
    progress messages. Returns a dict: ``out``, ``files`` (names written), ``notes`` (offline fallbacks), ``summary``
    (the table), ``seconds``."""

    out_dir = prepare_output_dir("out", out)
    prof = get_beyond_profile(profile)
    check_bool("use_cache", use_cache)
    start = check_int("start", start, low=0)
    if say is not None and not callable(say):
        raise ValueError(f"say must be callable or None (got {say!r})")
    say = say or (lambda msg: None)
    t0 = time.perf_counter()
    handle, text_obj, notes = load_inputs(model, text, device=device)
    require_causal(handle, "compare-normalizers")
    _check_compare_text(handle, text_obj, prof, start)
    cache = ResultCache() if use_cache else None
    say(f"model: {handle.describe()}; text: {text_obj.name}; profile {prof.name!r}")
    say("comparing every normaliser on the model's logits (one forward pass) ...")
    df = compare_normalizers(handle, text_obj, profile=prof, cache=cache)
    say("swapping each normaliser into the live model (one forward pass per setting) ...")
    sw = live_swap(handle, text_obj, profile=prof, start=start, cache=cache)
    files, summary = _write_compare(out_dir, prof, df, sw.losses)
    return dict(out=out_dir, files=files, notes=notes, summary=summary, seconds=time.perf_counter() - t0)
