"""Command line: ``python -m attn_lib`` (installed as ``attn-lib``); each subcommand's help says what it does.

User errors (bad arguments, an unusable ``--out``, a model or text that cannot be had) end with one line on stderr
and exit status 2, never a traceback. Warnings (e.g. the offline fallbacks) are printed as ``attn-lib: NOTE:`` lines.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import logging
import math
import platform
import re
import sys
import textwrap
import warnings
from collections.abc import Sequence

from tqdm.auto import tqdm

from . import __version__, process
from ._validation import check_environment, check_int, check_positive, max_threads, prepare_output_dir
from .cache import ResultCache, describe_cache, format_bytes, results_dir
from .errors import ModelUnavailableError, TextUnavailableError

__all__ = ["main"]


def _checked(check, name: str = "", *, convert=int, **limits):
    """An argparse ``type``: ``check(name, convert(text), **limits)`` of :mod:`attn_lib._validation`; text that does
    not parse is checked as it is, so the message says what was typed (argparse names the flag when ``name`` is "")."""

    def parse(s: str):
        value = s
        with contextlib.suppress(ValueError):
            value = convert(s)
        try:
            return check(name, value, **limits)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc).strip()) from None

    return parse


def _threads(s: str) -> int:
    v = _checked(check_int, "--threads", low=1)(s)
    if v > max_threads():
        raise argparse.ArgumentTypeError(
            f"--threads must be an integer in [1, {max_threads()}] (the CPUs this process may use) (got {v})"
        )
    return v


def _cli_names() -> list[str]:
    """The registered names ``--normalizer`` takes: all but ``general`` (its ``F`` is a function)."""
    from . import normalizers as nz  # lazy: torch; `attn-lib --help` stays fast

    return [n for n in nz.available() if n != "general"]


def _cli_normalizer(value: str | None):
    """``--normalizer``: a name of :mod:`attn_lib.normalizers`, or ``top-<k>`` / ``topk:<k>`` for top-k."""
    if value is None:
        return None
    from . import normalizers as nz  # lazy: torch; `attn-lib --help` stays fast

    names = _cli_names()
    if m := re.fullmatch(r"(?:top-|topk:|topk=)([0-9]+)", value.strip()):
        k = int(m.group(1))
        if k < 1:
            raise ValueError(f"--normalizer {value}: k must be an integer >= 1, e.g. --normalizer top-16")
        return nz.get("topk", k=k)
    if value == "topk":
        raise ValueError("--normalizer topk needs k: write --normalizer top-<k>, e.g. --normalizer top-16")
    if value not in names:
        raise ValueError(f"--normalizer {value!r} is not a normaliser; use one of {names}, or top-<k> (e.g. top-16)")
    return value


def _layers(s: str) -> list[int]:
    try:
        return [int(x) for x in s.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"layers must be comma-separated integers, e.g. 0,5,11 (got {s!r})") from None


def _note(message) -> None:
    """An ``attn-lib: NOTE:`` line on stderr (through tqdm: a progress bar is not broken)."""
    tqdm.write(f"attn-lib: NOTE: {message}", file=sys.stderr)


@contextlib.contextmanager
def _warnings_as_notes():
    """Every warning raised inside shown as a NOTE line."""
    with warnings.catch_warnings():  # restores showwarning on exit
        warnings.showwarning = lambda message, category, filename, lineno, file=None, line=None: _note(message)
        yield


def _cmd_info(args) -> int:
    import torch  # lazy, with the three below (all import torch): `attn-lib --help` stays fast
    import transformers

    from . import metrics  # with torch (lazy, as below)
    from .corpus import available_texts
    from .models import offline_models, resolve_device, resolve_name
    from .models.handle import available_devices
    from .models.offline import STANDIN_NAME

    print(
        f"attn_lib {__version__}  (python {platform.python_version()}, torch {torch.__version__}, "
        f"transformers {transformers.__version__})"
    )
    print(f"devices available: {', '.join(available_devices())}")
    try:
        print(f"device {args.device!r} -> {resolve_device(args.device)}")
    except ValueError as exc:
        print(f"device {args.device!r} -> error: {exc}")
    res = resolve_name(args.model)
    text = {
        "standin": f"the offline stand-in {STANDIN_NAME} (requested directly)",
        "local": f"local folder {res['target']}",
        "hf-cache": f"{res['target']} from the local Hugging Face cache",
        "hub": f"{res['target']} downloaded from the Hugging Face Hub",
        "packaged": f"{res['target']} from its packaged copy {res.get('path', '')} (the real model, offline)",
        "fallback": f"NOT AVAILABLE offline -> the offline stand-in {STANDIN_NAME} will be used instead "
        f"(offline_fallback=True; the Hub is unreachable and {args.model!r} is not cached)",
        "unavailable": "not cached and the Hub is unreachable: loading it will fail",
    }[res["kind"]]
    print(f"model {args.model!r} -> {text}")
    print("models that resolve offline:")
    for m in offline_models():
        state = f"{m['where']}" + (f"; {m['detail']}" if m["detail"] else "") if m["available"] else m["detail"]
        print(f"  {m['name']}: {m['role']}, {'available' if m['available'] else 'unavailable'}: {state}")
    print("texts: " + "; ".join(f"{k}: {v}" for k, v in available_texts().items()))
    c = describe_cache()
    print(f"cache: {c['cache_dir']} ({format_bytes(c['cache_bytes'])}; set ATTN_LIB_CACHE_DIR to move it)")
    print(f"  models:  {c['model_dir']} ({format_bytes(c['model_bytes'])}; ATTN_LIB_MODEL_DIR)")
    print(f"  results: {c['results_dir']} ({format_bytes(c['results_bytes'])})")
    print(f"accelerators: {metrics._engine.accelerators()}")
    settings = process.state()
    print(f"memory allocator: {settings['allocator']}")
    print(f"OpenMP threads waiting: {settings['openmp']}")
    return 0


def _cmd_capture(args) -> int:
    from . import capture_summary  # lazy: torch and transformers; `attn-lib --help` stays fast

    normalizer = _cli_normalizer(args.normalizer)  # before loading anything
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        handle, text, t_load = capture_summary.load_inputs(  # the text first: a bad --text fails before the model
            args.model,
            args.text,
            device=args.device,
            dtype=args.dtype,
            offline_fallback=not args.no_fallback,
            quiet=args.quiet,
        )
    for message in dict.fromkeys([*handle.notes, *(str(w.message) for w in caught)]):  # quiet keeps them in notes
        _note(message)
    if args.length > handle.max_length:
        raise ValueError(
            f"--length {args.length} exceeds the context of {handle.model_id} ({handle.max_length} "
            f"tokens): use --length <= {handle.max_length}; to cover more text use consecutive windows, "
            f"e.g. --length {handle.max_length} --windows {math.ceil(args.length / handle.max_length)}"
        )
    job = capture_summary.prepare_capture(
        handle,
        text,
        length=args.length,
        windows=args.windows,
        start=args.start,
        normalizer=normalizer,
        normalizer_name=args.normalizer,
        temperature=args.temperature,
        layers=args.layers,
    )
    _print_capture_header(job, t_load, file=sys.stderr if args.json else sys.stdout)  # --json: stdout is the JSON
    result = job.run(use_cache=not args.no_cache, progress=not args.quiet)
    if args.json:
        print(json.dumps(job.document(result), indent=1))
    else:
        _print_capture_table(job, result)
    return 0


def _print_capture_header(job, t_load: float, file) -> None:
    h, p = job.handle, job.params
    lines = [
        f"model: {h.describe()}" + ("   <-- OFFLINE STAND-IN, not the requested model" if h.is_standin else ""),
        f"       {h.n_layers} layers x {h.n_heads} heads ({h.n_kv_heads} key/value heads), "
        f"head dim {h.head_dim}, context {h.max_length}; revision {h.revision}; loaded in {t_load:.1f} s",
        f"text:  {job.text.name} ({job.text.source}); {p['windows']} window(s) of {p['length']} tokens from token "
        f"{p['start']}",
        f"normaliser: {p['normalizer'] or 'model softmax'}, temperature {p['temperature']:g}",
    ]
    print("\n".join(lines), file=file)


def _print_capture_table(job, result: dict) -> None:
    h, length, windows = job.handle, job.params["length"], job.params["windows"]
    print(
        f"\nper-layer summary over {h.n_heads} heads and query rows 2..{length} "
        f"(uniform attention over L keys has entropy log L = {math.log(length):.2f} nats):"
    )
    print(f"{'layer':>5}  {'max weight':>10}  {'mean row max':>12}  {'entropy':>8}  {'first-token mass':>16}")
    for r in result["rows"]:
        print(
            f"{r['layer']:>5}  {r['max_weight']:>10.4f}  {r['mean_row_max']:>12.4f}  {r['entropy']:>8.3f}  "
            f"{r['first_token_mass']:>16.4f}"
        )
    status = {"hit": "from the result cache (--no-cache recomputes)", "disabled": "computed (cache bypassed)"}
    print(
        f"capture: {result['seconds']:.1f} s for {windows} forward pass(es) of {length} tokens; "
        f"{status.get(result['cache'], 'computed')}"
    )
    if h.is_standin:
        print(f"NOTE: this ran on the offline stand-in {h.model_id}, not {h.requested}.")


def _import_with_progress(modules: Sequence[str], enabled: bool) -> None:
    """Import the heavy libraries behind a progress bar (torch alone takes seconds on a cold start)."""
    with tqdm(total=len(modules), desc="loading libraries", unit="module", file=sys.stderr, disable=not enabled) as bar:
        for name in modules:
            bar.set_postfix_str(name)
            try:
                importlib.import_module(name)
            except ImportError:
                if name.startswith("attn_lib"):
                    raise
            bar.update(1)


def _begin(args, modules: Sequence[str], tail: str = ""):
    """``reproduce``'s and ``compare-normalizers``' start: ``--out`` checked before any work, the first progress line,
    the heavy imports. Returns ``(out folder, say)``; ``say`` prints a progress line on stderr unless ``--quiet``."""
    out_dir = prepare_output_dir("--out", args.out)

    def say(msg: str) -> None:
        if not args.quiet:
            print(f"attn-lib {args.command}: {msg}", file=sys.stderr, flush=True)

    say(f"profile {args.profile!r}, model {args.model!r}, text {args.text!r} -> {out_dir}/{tail}")
    _import_with_progress(modules, not args.quiet)
    return out_dir, say


def _cmd_reproduce(args) -> int:
    _begin(args, ["torch", "transformers", "numba", "attn_lib.experiments"], " (progress on stderr, summary on stdout)")
    from . import experiments  # the experiments layer (imported by _begin)

    out = experiments.run_reproduce(
        model=args.model,
        device=args.device,
        profile=args.profile,
        out=args.out,
        text=args.text,
        use_cache=not args.no_cache,
        threads=args.threads,
        progress=not args.quiet,
        compare=args.compare or (),
    )
    if out is not None and not isinstance(out, int):
        print(out)
    return out if isinstance(out, int) else 0


def _cmd_compare_normalizers(args) -> int:
    out_dir, say = _begin(args, ["torch", "transformers", "attn_lib.experiments"])
    from . import experiments  # the experiments layer (imported by _begin)

    res = experiments.run_compare(
        args.model,
        device=args.device,
        profile=args.profile,
        out=out_dir,
        text=args.text,
        use_cache=not args.no_cache,
        start=experiments.swap.HELD_OUT_START if args.start is None else args.start,
        say=say,
    )
    for note in res["notes"]:
        _note(note)
    print((res["out"] / "limits.md").read_text(encoding="utf-8"))
    print(f"wrote {len(res['files'])} files to {res['out']}/ in {res['seconds']:.1f} s: {', '.join(res['files'])}")
    return 0


_ENV_HELP = """environment variables:
  ATTN_LIB_CACHE_DIR  root of the caches (default: the user cache folder, e.g. ~/.cache/attn_lib)
  ATTN_LIB_MODEL_DIR  where the converted offline stand-in is kept (default: <cache>/models)
  ATTN_LIB_OFFLINE    1 (or true, yes, on): never probe the network; GPT-2 then resolves to the offline stand-in
  ATTN_LIB_ENGINE     auto (default: the compiled numba kernels of attn_lib.accel on CPU), torch (float64 tensor
                      code) or numba
  ATTN_LIB_MODEL      model the book's chapters load (default gpt2; the CLI takes --model)
  ATTN_LIB_PROFILE    grids the book's chapters use, paper (default) or quick (the CLI takes --profile)
  GOMP_SPINCOUNT, GLIBC_TUNABLES  process settings, as --tune-process makes them (see info)
  HF_HOME, HF_HUB_OFFLINE, TRANSFORMERS_OFFLINE  as for Hugging Face transformers
A value outside its set (e.g. a relative cache folder) stops every command with one line naming the variable."""


class _Parser(argparse.ArgumentParser):
    """argparse's parser (descriptions shown as written); ``later(parser)`` runs once, before the first
    :meth:`format_help`: help naming the normalisers imports torch, which a parse or ``--version`` never needs."""

    def __init__(self, *args, later=None, **kwargs):
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(*args, **kwargs)
        self._later = later

    def format_help(self) -> str:
        if self._later is not None:
            later, self._later = self._later, None
            later(self)
        return super().format_help()


def build_parser() -> argparse.ArgumentParser:
    """The ``attn-lib`` parser; each subcommand's builder sets ``func`` to its command."""
    p = _Parser(
        prog="attn-lib",
        description="attn_lib: 'Limitations of Normalization in Attention Mechanism' (Mudarisov et al., 2025), "
        "executable.\n\ninfo shows what would run where, capture runs one forward pass with attention "
        "capture,\nreproduce runs the paper's five experiments and writes figures and a report,\n"
        "compare-normalizers measures every normaliser on the paper's limits,\ntrain-sweep trains small "
        "GPT-2-architecture models with each normaliser and temperature (chapter 8).",
        epilog="examples:\n  attn-lib info\n  attn-lib capture --length 1024\n"
        "  attn-lib reproduce --out results/\n\n" + _ENV_HELP,
    )
    p.add_argument("--version", action="version", version=f"attn_lib {__version__}")
    p.add_argument("-v", "--verbose", action="store_true", help="more logging")
    p.add_argument(
        "--tune-process",
        action="store_true",
        help="shorten GNU OpenMP's idle spinning and keep freed memory for "
        "reuse (Linux; attn_lib.process): faster on a busy machine, more resident memory; results are unchanged",
    )
    sub = p.add_subparsers(dest="command", metavar="{info,capture,reproduce,compare-normalizers,train-sweep}")
    for add in (_add_info, _add_capture, _add_reproduce, _add_compare_normalizers, _add_train_sweep):
        add(sub)
    return p


def _model_args(sp, quiet_help: str) -> None:
    """--model, --device, --text, --no-cache and -q/--quiet, as every subcommand but info takes them."""
    sp.add_argument(
        "--model",
        default="gpt2",
        help="gpt2 (default), gpt2-medium/-large/-xl, a Hugging Face causal LM id, a local "
        "folder, or smollm2 (the offline stand-in)",
    )
    sp.add_argument("--device", default="auto", help="auto (CUDA, then MPS, then CPU), cpu, cuda, cuda:N, mps")
    sp.add_argument(
        "--text",
        default="war-and-peace",
        help="war-and-peace (default; offline: the shipped 'botchan'), botchan, "
        "or a path to a UTF-8 text file (at most 32 MiB)",
    )
    sp.add_argument("--no-cache", action="store_true", help="bypass the result cache")
    sp.add_argument("-q", "--quiet", action="store_true", help=quiet_help)


def _add_info(sub) -> None:
    sp = sub.add_parser(
        "info",
        help="device, model resolution, cache location and size",
        description="Print the attn_lib, torch and transformers versions, the devices here, how --device and "
        "--model\nresolve, the offline stand-in's status, the texts and the cache folders with their "
        "sizes.\nNo model is loaded or downloaded.",
        epilog="example:\n  attn-lib info --model gpt2-medium --device cuda",
    )
    sp.add_argument(
        "--model",
        default="gpt2",
        help="model name to resolve (default gpt2): says whether it is in the local "
        "Hugging Face cache, would be downloaded, or falls back to the offline stand-in SmolLM2-135M-Instruct; a "
        "GPT-2 size, a Hugging Face id, a local folder or smollm2",
    )
    sp.add_argument(
        "--device",
        default="auto",
        help="device to check (default auto = CUDA, then Apple MPS, then CPU; or cpu, "
        "cuda, cuda:N, mps): prints what it resolves to here, or why it is not available",
    )
    sp.set_defaults(func=_cmd_info)


def _add_capture(sub) -> None:
    def later(_):
        norm.help = norm.help.replace("{names}", ", ".join(n for n in _cli_names() if n != "topk"))

    sp = sub.add_parser(
        "capture",
        later=later,
        help="one forward pass with attention capture; per-layer summary",
        description="Run the model once over --windows windows of --length tokens of --text with attention "
        "capture,\nand print per layer: the largest attention weight, the mean row maximum, the mean "
        "row entropy\n(nats) and the mean weight on the first token (over heads and query rows 2..L). "
        "Says which model\nactually ran. Results are cached; --no-cache recomputes.",
        epilog="examples:\n  attn-lib capture --length 1024\n"
        "  attn-lib capture --length 256 --normalizer sparsemax --temperature 0.5 --layers 0,5 --json",
    )
    _model_args(sp, "no progress bar")
    sp.add_argument(
        "--length", type=_checked(check_int, "--length", low=1), default=1024, help="tokens per window (default 1024)"
    )
    sp.add_argument(
        "--windows",
        type=_checked(check_int, "--windows", low=1),
        default=1,
        help="number of consecutive windows (default 1)",
    )
    sp.add_argument(
        "--start", type=_checked(check_int, low=0), default=0, help="first token of the first window (default 0)"
    )
    sp.add_argument("--dtype", default=None, help="float32 (default), float64, bfloat16, float16")
    norm = sp.add_argument(
        "--normalizer",
        default=None,
        help="replace softmax in the live model by this normaliser of "
        "attn_lib.normalizers: {names}, or top-<k> (e.g. top-16) (default: the model's own softmax)",
    )
    sp.add_argument(
        "--temperature",
        type=_checked(check_positive, convert=float),
        default=1.0,
        help="temperature on top of the model's logits (default 1 = the model's own weights)",
    )
    sp.add_argument("--layers", type=_layers, default=None, help="comma-separated layers to report (default all)")
    sp.add_argument("--no-fallback", action="store_true", help="fail instead of using the offline stand-in")
    sp.add_argument("--json", action="store_true", help="print JSON instead of a table")
    sp.set_defaults(func=_cmd_capture)


def _add_reproduce(sub) -> None:
    try:
        results_folder = str(results_dir())
    except ValueError:  # e.g. ATTN_LIB_CACHE_DIR=~nosuchuser/...: the command itself reports it in one line
        results_folder = "<ATTN_LIB_CACHE_DIR>/results"
    sp = sub.add_parser(
        "reproduce",
        help="run the paper's experiments (Algorithms 1-5) and write figures and a report",
        description="Run Algorithms 1-5 of the paper (distance vs L and vs N, critical N, separability, gradient\n"
        "sensitivity) on one model and text in a single forward pass, and chapter 5's multi-head coverage in a\n"
        "second one, and write into --out:\n"
        "  fig2a_distance_vs_length, fig2b_distance_vs_n, fig2c_critical_n, fig3_separability,\n"
        "  fig4_sensitivity   the five figures, as .png and .svg\n"
        "  results.json       every table, the verdicts, the model, text, profile and timings\n"
        "  report.md          a summary in words by figure, the tally by kind of evidence, the claims (id,\n"
        "                     the paper's words, kind, verdict, measured, cause) and the critical-N diagnosis\n"
        "                     of every model that ran, each claim in detail, and the figures\n"
        "Each experiment's result is cached under the result cache folder,\n"
        f"  {results_folder}\n"
        "(<ATTN_LIB_CACHE_DIR>/results), keyed by model, text, parameters and the attn_lib code, so "
        "a\nrepeated run is fast; --no-cache recomputes. Progress goes to stderr, the summary to "
        "stdout.",
        epilog="examples:\n  attn-lib reproduce --out results/\n"
        "  attn-lib reproduce --profile quick --model gpt2 --out results-quick/",
    )
    _model_args(sp, "no progress bars")
    sp.add_argument(
        "--profile",
        choices=["paper", "quick"],
        default="paper",
        help="paper (default): the paper's grids, L up to 1024; benchmarks/README.md ('whole paper profile', "
        "empty result cache, offline stand-in, kernels cached) measured 226 s (about 4 min) on an idle 2-core machine on "
        "2026-12-05, with 5 seeds of every random draw; quick: small grids, L up to 128, for a smoke run",
    )
    sp.add_argument(
        "--out", default="results", help="output folder (default ./results), created if needed; checked before any work"
    )
    sp.add_argument(
        "--compare",
        action="append",
        metavar="MODEL",
        default=None,
        help="also run MODEL (repeatable), e.g. sentence-transformers/all-MiniLM-L6-v2 (a bidirectional "
        "encoder, offline from its packaged copy): report.md gets one verdict column per model and the "
        "figures a second panel",
    )
    sp.add_argument(
        "--threads",
        type=_threads,
        default=None,
        help="worker threads for the analyses, at most the CPUs of this process (default: torch's setting)",
    )
    sp.set_defaults(func=_cmd_reproduce)


def _add_compare_normalizers(sub) -> None:
    def later(parser):
        from . import normalizers as nz  # the help names the registered normalisers (imports torch): help only

        what = textwrap.fill(
            f"Measure {nz.describe(nz.available(compared=True))}, and top-k at several k, on the same model logits (vanishing "
            "weight, d~ and critical N, N_s/N, g(T, eps)), and swap each into every head of the live model "
            "(held-out loss and perplexity; top-k over k, softmax over T).",
            100,
        )
        parser.description = parser.description.replace("{what}", what)

    sp = sub.add_parser(
        "compare-normalizers",
        later=later,
        help="every normaliser on the paper's limits and swapped into the live model; table and figures",
        description="{what}" + " Writes into --out:\n"
        "  limits.md, limits.csv, limits.json   the table (normalisers x limits)\n"
        "  compare.csv, critical_n.csv         the tidy per-head data and the critical N per L\n"
        "  swap_losses.csv, swap.md            the live swap\n"
        "  limits.png/.svg, swap.png/.svg      the figures (labelled with model, text and device)\n"
        "Results are cached like reproduce's; --no-cache recomputes.",
        epilog="examples:\n  attn-lib compare-normalizers --out beyond/\n"
        "  attn-lib compare-normalizers --profile quick --model gpt2 --out beyond-quick/",
    )
    _model_args(sp, "no progress lines")
    sp.add_argument(
        "--profile",
        choices=["paper", "quick"],
        default="paper",
        help="paper (default): L up to 1024, the live swap on 512 held-out tokens; quick: L up to 128, for a smoke run",
    )
    sp.add_argument(
        "--out", default="results-beyond", help="output folder (default ./results-beyond), created if needed"
    )
    sp.add_argument(
        "--start",
        type=_checked(check_int, low=0),
        default=None,
        help="first token of the live swap's held-out window (default 32768, so the text needs 32768 + the "
        "window's tokens; checked before any work). A shorter text can use e.g. --start 1024 (quick: 128), the "
        "first token after the comparison's window",
    )
    sp.set_defaults(func=_cmd_compare_normalizers)


def _cmd_train_sweep(args) -> int:
    out_dir = prepare_output_dir("--out", args.out)
    _import_with_progress(["torch", "transformers", "attn_lib.training"], not args.quiet)
    from . import training  # the training layer (imported above, behind the bar)
    from .report import training as report_training  # matplotlib: only this command draws

    cache = ResultCache(enabled=not args.no_cache)
    device = "cuda" if args.device else "cpu"
    reference = None
    if not args.no_limits and args.reference != "none":  # loaded first: a bad name fails before any training
        from .models import load_model

        reference = load_model(args.reference, device="cpu", quiet=args.quiet)
    runs = training.run_sweep(args.profile, device=device, cache=cache, workers=args.workers, progress=not args.quiet)
    # the trained models' whole context, at most the book's window (every profile trains on at least 64 positions)
    window = min(training.LIMITS_WINDOW, *(r.summary["size"]["n_positions"] for r in runs.values()))
    limits = None if args.no_limits else training.trained_limits(runs, window=window, reference=reference, cache=cache)
    made = report_training.write_sweep(out_dir, training.sweep_tables(runs), profile=args.profile, limits=limits)
    print("\n".join(str(p) for p in made.values()))
    return 0


def _add_train_sweep(sub) -> None:
    sp = sub.add_parser(
        "train-sweep",
        help="train GPT-2-architecture models with each normaliser and temperature (chapter 8)",
        description="Train small GPT-2-architecture models from scratch on the shipped text (bytes) with softmax at "
        "T = 0.03 ... 10 (a factor on GPT-2's 1/sqrt(d)) and with every registered normaliser at T = 1, and judge "
        "the abstract's training claim. quick: 5 seeds per T, 1 per normaliser, 100 steps; full: 5 seeds each, "
        "400 steps. Then the paper's limits on every trained model with its own normaliser, next to --reference's. "
        "Writes results.json, train_runs.csv, train_curves.csv, train_limits.csv, figures and report.md into --out. "
        "Each run is cached; --no-cache retrains.",
        epilog="examples:\n  attn-lib train-sweep --out train/\n  attn-lib train-sweep --profile full --workers 2",
    )
    sp.add_argument("--profile", choices=["quick", "full"], default="quick", help="quick (default, the book's) or full")
    sp.add_argument("--device", action="store_true", help="train on the GPU (CUDA) with the larger 'gpu' size")
    sp.add_argument("--out", default="results-train", help="output folder (default ./results-train)")
    sp.add_argument(
        "--workers",
        type=_checked(check_int, "--workers", low=1, high=64),
        default=1,
        help="processes training in parallel on the CPU (one thread each; the results do not change)",
    )
    sp.add_argument(
        "--reference",
        default="smollm2",
        metavar="MODEL",
        help="pretrained model whose limits sit next to the trained heads' (default smollm2, the offline stand-in; "
        "'none': no reference row)",
    )
    sp.add_argument("--no-limits", action="store_true", help="skip the paper's limits on the trained heads")
    sp.add_argument("--no-cache", action="store_true", help="bypass the result cache")
    sp.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    sp.set_defaults(func=_cmd_train_sweep)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m attn_lib`` and ``attn-lib``; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(None if argv is None else list(argv))
    if not getattr(args, "command", None):
        parser.print_help()
        return 2
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="attn-lib: %(message)s", stream=sys.stderr
    )
    try:
        check_environment()  # every ATTN_LIB_* (and GOMP_SPINCOUNT) value in its set, before any work
        if args.tune_process:  # before the command imports torch, which loads OpenMP
            process.tune()
        with _warnings_as_notes():
            return int(args.func(args) or 0)
    except (ValueError, ModelUnavailableError, TextUnavailableError, OSError) as exc:
        print(f"attn-lib {args.command}: error: {' '.join(str(exc).split()) or type(exc).__name__}", file=sys.stderr)
        return 1 if isinstance(exc, OSError) else 2  # OSError: a file system the user pointed at, not a bad argument
    except KeyboardInterrupt:
        print("attn-lib: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
