"""Benchmark of the reproduction (issue 5, "Performance"). Not a test: it prints timings and ratios.

1. On a reduced workload (the first ``--layers`` layers of the model, windows up to ``--length`` tokens, reduced
   grids), times each of Algorithms 1-5 twice: the straightforward per-token loop of the paper's pseudocode
   (``benchmarks/naive_reference.py``, one-row :mod:`attn_lib.theory` calls) and :mod:`attn_lib.experiments`
   (vectorised metrics, incremental critical-N scan), on the same captured attention, and prints the speed-up.
2. Times the whole ``--profile`` reproduction (default ``paper``) in a subprocess, with its peak memory (max RSS),
   unless ``--skip-full``.

    python benchmarks/bench_reproduce.py [--model gpt2] [--layers 2] [--length 256] [--threads 2] [--skip-full]
    python benchmarks/bench_reproduce.py --stages [--device cuda] [--save now.json] [--previous before.json]

``--stages`` instead runs ``--profile`` once in this process (on CUDA when present) and prints the time of each
stage: loading, the shared forward pass with capture and layer set-up, each experiment's analysis, the total and
the CPU time; ``--save`` keeps them as JSON, ``--previous`` prints each as a ratio to such a file.

The forward pass is not part of step 1 (both sides get the same captured tensors); step 2 reports it separately.
Both sides use the same row sets where the profile subsamples rows (Monte-Carlo rows, Algorithm 5's ``R``).
Timings on a shared machine are noisy: the load average is printed with them.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def _load(model: str):
    """``gpt2-random``: GPT-2 small's architecture (12 layers x 12 heads, d = 64, random init, byte tokenizer) --
    the size the performance goal names, offline; anything else goes to :func:`attn_lib.models.load_model`."""
    from attn_lib.models import from_config, load_model

    if model == "gpt2-random":
        from transformers import GPT2Config

        return from_config(GPT2Config(), device="cpu", seed=0, name="random-init GPT-2 small (12 layers x 12 heads)")
    return load_model(model, device="cpu")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--model",
        default="gpt2",
        help="gpt2 (offline: the stand-in), gpt2-random (GPT-2 small's "
        "architecture, random init), or any name load_model accepts",
    )
    ap.add_argument("--layers", type=int, default=2, help="layers of the reduced workload")
    ap.add_argument("--length", type=int, default=256, help="largest L of the reduced workload")
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    ap.add_argument("--profile", default="paper")
    ap.add_argument("--skip-full", action="store_true")
    ap.add_argument("--skip-naive", action="store_true")
    ap.add_argument("--repeat", type=int, default=3, help="attn_lib runs per algorithm; the best is reported")
    ap.add_argument(
        "--stages",
        action="store_true",
        help="only the per-stage times of one in-process run of --profile (CUDA when present)",
    )
    ap.add_argument("--device", default=None, help="for --stages: cpu, cuda (default: cuda when present)")
    ap.add_argument("--save", default=None, help="for --stages: write the stage times to this JSON file")
    ap.add_argument("--previous", default=None, help="for --stages: a JSON file of --save, printed as ratios")
    args = ap.parse_args(argv)

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    if args.stages:
        _stages(args)
        return
    _reduced_workload(args)
    if not args.skip_full:
        _full_run(args)


def _stage_times(model: str, profile: str, device: str) -> dict:
    """Seconds of each stage of one ``run_all(profile)`` in this process: loading, the shared forward pass with
    capture and layer set-up, each experiment's analysis (per-layer work and finishing step), the total, and the
    process CPU time."""
    import torch

    from attn_lib import experiments as E
    from attn_lib.corpus import load_text
    from attn_lib.models import load_model

    c0, t0 = time.process_time(), time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        h = _load(model) if device == "cpu" else load_model(model, device=device)
        text = load_text()
    out = {"load": time.perf_counter() - t0}
    tm: dict = {}
    t1 = time.perf_counter()
    res = E.run_all(h, text, profile, cache=None, timings=tm)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    out["forward + capture + layer set-up"] = tm.get("shared", float("nan"))
    for name, df in res.items():
        timing = getattr(df, "attrs", {}).get("timing")
        if timing:
            out[f"analysis {name}"] = timing["analysis_s"]
            for part, sec in timing.items():
                if part.endswith("_s") and part not in ("analysis_s", "shared_pass_s"):
                    out[f"  of which {part[:-2]}"] = sec
    out["run_all"] = time.perf_counter() - t1
    out["total wall"] = time.perf_counter() - t0
    out["process CPU (user+sys)"] = time.process_time() - c0
    return out


def _stages(args) -> None:
    """Print (and with ``--save`` write) the stage times; with ``--previous``, their ratios to a saved run."""
    import torch

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    print(
        f"'{args.profile}' profile on {device} ({torch.cuda.get_device_name() if device == 'cuda' else 'CPU'}); "
        f"torch threads {torch.get_num_threads()}; cpus {os.cpu_count()}; load average {os.getloadavg()}"
    )
    now = _stage_times(args.model, args.profile, device)
    prev = json.loads(Path(args.previous).read_text())["stages"] if args.previous else {}
    print(f"\n{'stage':<48}{'seconds':>10}" + (f"{'previous':>10}{'ratio':>8}" if prev else ""))
    for name, sec in now.items():
        line = f"{name:<48}{sec:>10.2f}"
        if name in prev and prev[name] > 0:
            line += f"{prev[name]:>10.2f}{sec / prev[name]:>7.2f}x"
        print(line)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2
    print(f"peak memory (max RSS): {peak:.2f} GiB; load average after: {os.getloadavg()}")
    if args.save:
        info = {"device": device, "profile": args.profile, "model": args.model, "stages": now, "peak_rss_gib": peak}
        Path(args.save).write_text(json.dumps(info, indent=1))
        print(f"saved to {args.save}")


def _load_with_text(model: str):
    """The model of ``--model`` and the default text, with the loading time and the machine's state printed."""
    import torch

    from attn_lib.corpus import load_text

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        h = _load(model)
        text = load_text()
        t_load = time.perf_counter() - t0
    print(
        f"model: {h.describe()} (loaded in {t_load:.1f} s); text: {text.name}; torch threads: "
        f"{torch.get_num_threads()}; cpus: {os.cpu_count()}; load average: {os.getloadavg()}"
    )
    return h, text


def _reduced_workload(args) -> None:
    """Step 1 of the module doc: each algorithm by the naive loop and by attn_lib, on the same captured layers."""
    import naive_reference as NR
    import numpy as np

    from attn_lib import experiments as E
    from attn_lib import metrics as M
    from attn_lib.capture import collect_attention
    from attn_lib.experiments import inputs, passes

    h, text = _load_with_text(args.model)

    L = args.length
    lengths = [x for x in (16, 32, 64, 128, 256, 512, 1024) if x <= L]
    ids = E.text_window(h, text, L)
    t0 = time.perf_counter()
    layers = collect_attention(h, ids, layers=list(range(args.layers)), keep_qk=False)
    t_fwd = time.perf_counter() - t0
    heads = sum(la.weights.shape[1] for la in layers)
    print(f"reduced workload: {args.layers} layers, {heads} heads, L <= {L} (capture {t_fwd:.2f} s)\n")
    np_layers = [(la.logits[0].double().numpy(), la.values[0].double().numpy()) for la in layers]

    n2 = [n for n in (1, 5, 10, 20) if n < L]
    n4 = [n for n in (1, 2, 4, 8, 16, 32) if n < L]
    Ts = [float(x) for x in np.logspace(-3, 2, 21)]
    Es = [1e-3, 1e-1, 10.0]
    mc_samples, mc_rows = 8, 8
    sens_rows = min(L, 64)
    mc = dict(mc_samples=mc_samples, mc_rows=mc_rows)
    prof = E.Profile(
        name="bench",
        distance_vs_length=E.DistanceVsLengthParams(N=5, lengths=tuple(lengths), **mc),
        distance_vs_n=E.DistanceVsNParams(L=L, n_values=tuple(n2), **mc),
        critical_n=E.CriticalNParams(lengths=tuple(lengths), crit_fraction=0.25, stage=16),
        separability=E.SeparabilityParams(L=L, n_values=tuple(n4)),
        gradient_sensitivity=E.SensitivityParams(L=L, temperatures=tuple(Ts), eps_values=tuple(Es), rows=sens_rows),
        critical_n_diagnosis=E.DiagnosisParams(L=L),
    )
    sens_idx = [int(r) for r in E.passes.sens_row_indices(L, sens_rows)]
    params = E.jobs.profile_params(h, prof)
    meta = inputs.table_meta(h, text)
    jobs = {
        "1 distance vs L": (
            "distance_vs_length",
            lambda: NR.alg1_distance_vs_length(np_layers, lengths, 5, mc_samples, mc_rows),
        ),
        "2 distance vs N": ("distance_vs_n", lambda: NR.alg2_distance_vs_n(np_layers, L, n2, mc_samples, mc_rows)),
        "3 critical N (KS)": ("critical_n", lambda: NR.alg3_critical_n(np_layers, lengths)),
        "4 separability": ("separability", lambda: NR.alg4_separability(np_layers, L, n4)),
        "5 sensitivity": ("gradient_sensitivity", lambda: NR.alg5_sensitivity(np_layers, L, Ts, Es, rows=sens_idx)),
    }

    def fast(exp):
        a = params[exp].analysis(h, meta)
        with M.block_parallel():  # as experiments.passes.run_pass does for every layer
            for la in layers:
                a.layer(passes.SharedLayer(la))
        return a.finish()

    # one-off cost per process: loading (or, the very first time, compiling) the numba kernels
    t0 = time.perf_counter()
    for exp, _ in jobs.values():
        fast(exp)
    print(
        f"warm-up (numba kernels loaded or compiled, once per process): {time.perf_counter() - t0:.2f} s; "
        f"engine: {M.settings.default_engine}\n"
    )
    _compare(jobs, fast, args.repeat, args.skip_naive)
    print(f"(forward pass of the {args.layers} captured layers at L={L}: {t_fwd:.2f} s)\n")


def _compare(jobs: dict, fast, repeat: int, skip_naive: bool) -> None:
    """Time each algorithm by attn_lib (best of ``repeat``) and by the naive loop (once); print the speed-ups."""
    from attn_lib import experiments as E

    print(f"{'algorithm':<20}{'naive loop [s]':>16}{'attn_lib [s]':>14}{'speed-up':>11}")
    total_naive = total_fast = 0.0
    for name, (exp, naive) in jobs.items():
        t_fast = math.inf
        for _ in range(repeat):  # best of --repeat runs (the naive loop, minutes long, runs once)
            t0 = time.perf_counter()
            df = fast(exp)
            t_fast = min(t_fast, time.perf_counter() - t0)
        if skip_naive:
            print(f"{name:<20}{'-':>16}{t_fast:>14.3f}{'-':>11}")
            continue
        t0 = time.perf_counter()
        ref = naive()
        t_naive = time.perf_counter() - t0
        total_naive += t_naive
        total_fast += t_fast
        print(f"{name:<20}{t_naive:>16.2f}{t_fast:>14.3f}{t_naive / t_fast:>10.0f}x")
        if exp == "critical_n":  # the two must agree
            sm = E.critical_n_summary(df).set_index(["L", "form"])["n_star"].to_dict()
            agree = all(sm.get(k) == v for k, v in ref.items())
            print(f"{'':<20}critical N agree with the naive scan: {agree}")
    if not skip_naive:
        print(f"{'all five':<20}{total_naive:>16.2f}{total_fast:>14.3f}{total_naive / total_fast:>10.0f}x")


def _full_run(args) -> None:
    """Step 2 of the module doc: the whole reproduction in a subprocess, with its peak memory."""
    print(f"full '{args.profile}' reproduction (subprocess, no cache; load average {os.getloadavg()}) ...", flush=True)
    out = Path(os.environ.get("BENCH_OUT", "/tmp/attn_lib_bench_reproduce"))
    code = (
        "import json,time,warnings,sys,torch;warnings.simplefilter('ignore');"
        f"sys.path.insert(0,{str(Path(__file__).resolve().parent)!r});from bench_reproduce import _load;"
        + "from attn_lib.experiments import run_reproduce;t=time.perf_counter();"
        f"i=run_reproduce(handle=_load({args.model!r}),device='cpu',profile={args.profile!r},out={str(out)!r},"
        f"use_cache=False,progress=None,threads={args.threads!r});"
        "print('RESULT'+json.dumps({'wall':time.perf_counter()-t,'timings':i['timings']}))"
    )
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    wall = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024**2  # KiB -> GiB
    line = [x for x in proc.stdout.splitlines() if x.startswith("RESULT")]
    if proc.returncode or not line:
        print(proc.stdout[-2000:], proc.stderr[-4000:])
        raise SystemExit("full reproduction failed")
    res = json.loads(line[0][6:])
    tm = res["timings"]
    print(
        f"full reproduction: {wall:.1f} s wall (process incl. imports); inside: "
        + ", ".join(f"{k} {v:.1f} s" for k, v in tm.items())
    )
    print(f"peak memory (max RSS): {peak:.2f} GiB; outputs in {out}; load average after: {os.getloadavg()}")
    if "pass" in tm:
        print(f"forward pass + per-layer analysis: {tm['pass']:.1f} s; goal: whole reproduction < 120 s on 2 cores")


if __name__ == "__main__":
    main()
