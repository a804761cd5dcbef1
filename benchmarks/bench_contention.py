"""Contention benchmark (issue 23, item 2). Not a test: it prints timings and ratios.

Times a few per-layer metrics of :mod:`attn_lib.metrics` on one random causal layer of ``(heads, L, L)``, first with
the machine as it is, then while ``--busy`` pure-Python spin loops (subprocesses) keep cores busy, and prints the
contended / undisturbed ratio. Each call runs inside :func:`attn_lib.metrics.block_parallel`, as the per-layer
analyses of :mod:`attn_lib.experiments` do, and builds a fresh :class:`attn_lib.metrics.LayerData` (softmax, Gram
matrix, top-N order), so the layer's own set-up is timed too.

    python benchmarks/bench_contention.py                     # 9 heads, L = 256, one busy process
    python benchmarks/bench_contention.py --busy 2 --repeat 20
    NUMBA_THREADING_LAYER=omp python benchmarks/bench_contention.py   # the former threading layer, to compare
    python benchmarks/bench_contention.py --plain --spin-counts 300000 3000   # libgomp's default against attn_lib's

``--spin-counts`` runs the benchmark once per value of ``GOMP_SPINCOUNT`` (how long an idle GNU OpenMP thread spins
before it sleeps; 300,000 is libgomp's default, :data:`attn_lib.process.SPIN_COUNT` what ``attn_lib.process.tune()``
sets),
each in a fresh process, and prints each one's times as ratios to the first one's.

Both the wall time (median of ``--repeat`` calls) and the process' CPU time per call are printed: on a machine that
other jobs share, CPU time and the ratio are what to compare.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import attn_lib.process  # reports how OpenMP's idle threads wait (GOMP_SPINCOUNT from the environment, or libgomp's)

SPIN = "while True:\n    pass\n"


def _layer(heads: int, L: int, d: int, seed: int):
    import torch

    from attn_lib import metrics as M

    g = torch.Generator().manual_seed(seed)
    x = torch.randn(heads, L, L, generator=g, dtype=torch.float64) * 2.0
    x = x.masked_fill(~torch.ones(L, L, dtype=torch.bool).tril(), float("-inf"))
    v = torch.randn(heads, L, d, generator=g, dtype=torch.float64)
    return lambda: M.LayerData.from_logits(x, v)


def _jobs(make):
    from attn_lib import metrics as M

    return {
        "distance_metrics (N=5)": lambda: M.distance_metrics(make(), N=5),
        "separability_metrics (N=5)": lambda: M.separability_metrics(make(), N=5),
        "topn_scan (N=1..64)": lambda: M.topn_scan(make(), n_max=64),
        "mc scan (K=8, N=1..64)": lambda: M.expected_distance_mc_scan(make(), n_max=64, n_samples=8, rows=None, seed=0),
    }


def _time(fn, repeat: int) -> tuple[float, float]:
    """Median wall time and mean CPU time (user + sys of this process) per call, in seconds."""
    walls = []
    c0 = time.process_time()
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        walls.append(time.perf_counter() - t0)
    return statistics.median(walls), (time.process_time() - c0) / repeat


def _compare_spin_counts(args) -> None:
    """Run this benchmark with each ``GOMP_SPINCOUNT`` of ``args.spin_counts`` in a fresh process; print the times
    and their ratios."""
    counts = args.spin_counts
    rest = [f"--heads={args.heads}", f"--length={args.length}", f"--dim={args.dim}", f"--repeat={args.repeat}"]
    rest += [f"--busy={args.busy}", *(["--plain"] if args.plain else [])]
    runs = {}
    for c in counts:
        with tempfile.TemporaryDirectory() as d:
            out = Path(d) / "times.json"
            env = dict(os.environ, GOMP_SPINCOUNT=str(c))
            subprocess.run([sys.executable, __file__, *rest, "--json", str(out)], env=env, check=True)
            runs[c] = json.loads(out.read_text())
    ref = counts[0]
    print(
        f"\nGOMP_SPINCOUNT against {ref}: wall ms idle / busy (busy over idle); the last column, busy over {ref}'s busy"
    )
    for name in runs[ref]:
        cells = []
        for c in counts:
            w0, _, w1, c1 = runs[c][name]
            cells.append(f"{c}: {1e3 * w0:.1f} / {1e3 * w1:.1f} ({w1 / w0:.2f}x; cpu {1e3 * c1:.1f})")
        rel = "  ".join(f"{runs[c][name][2] / runs[ref][name][2]:.2f}" for c in counts[1:])
        print(f"{name:<28}" + "  ".join(cells) + f"  | {rel}")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False
    )
    ap.add_argument("--heads", type=int, default=9)
    ap.add_argument("--length", type=int, default=256)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=10, help="calls per measurement; the median is reported")
    ap.add_argument("--busy", type=int, default=1, help="spinning processes during the contended measurement")
    ap.add_argument(
        "--plain", action="store_true", help="call the metrics as a user does, outside metrics.block_parallel"
    )
    ap.add_argument(
        "--spin-counts",
        type=int,
        nargs="+",
        default=None,
        help="compare these GOMP_SPINCOUNT values, each in a fresh process (the first is the reference)",
    )
    ap.add_argument("--json", default=None, help=argparse.SUPPRESS)  # where --spin-counts' runs leave their times
    args = ap.parse_args(argv)
    if args.spin_counts and min(args.spin_counts) < 0:
        ap.error(f"--spin-counts must be integers >= 0 (got {args.spin_counts})")
    if args.spin_counts and not args.json:  # a run of the comparison (--json) measures, never compares again
        _compare_spin_counts(args)
        return

    import torch

    from attn_lib import metrics as M
    from attn_lib.accel import kernels

    jobs = _jobs(_layer(args.heads, args.length, args.dim, seed=0))
    ctx = contextlib.nullcontext if args.plain else M.block_parallel
    with ctx():
        for fn in jobs.values():  # load (or compile) the kernels, touch the code paths
            fn()
    print(
        f"layer ({args.heads}, {args.length}, {args.length}), d = {args.dim}; cpus: {os.cpu_count()}; "
        f"torch threads: {torch.get_num_threads()}; numba: {kernels.threading_info()}; "
        f"load average: {os.getloadavg()}; {'plain calls' if args.plain else 'inside metrics.block_parallel'}; "
        f"OpenMP threads waiting: {attn_lib.process.state()['openmp']}"
    )
    quiet = {}
    with ctx():
        for name, fn in jobs.items():
            quiet[name] = _time(fn, args.repeat)
    busy = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(args.busy)]
    try:
        time.sleep(0.5)
        loaded = {}
        with ctx():
            for name, fn in jobs.items():
                loaded[name] = _time(fn, args.repeat)
    finally:
        for p in busy:
            p.kill()
            p.wait()
    print(f"\n{'metric':<28}{'as is [ms]':>12}{'cpu [ms]':>10}{'+busy [ms]':>12}{'cpu [ms]':>10}{'ratio':>8}")
    for name in jobs:
        (w0, c0), (w1, c1) = quiet[name], loaded[name]
        print(f"{name:<28}{1e3 * w0:>12.1f}{1e3 * c0:>10.1f}{1e3 * w1:>12.1f}{1e3 * c1:>10.1f}{w1 / w0:>7.2f}x")
    print(f"(contended: {args.busy} spinning process(es); load average after: {os.getloadavg()})")
    if args.json:
        Path(args.json).write_text(json.dumps({n: [*quiet[n], *loaded[n]] for n in jobs}))


if __name__ == "__main__":
    main()
