"""Compile the numba kernels of attn_lib.accel into numba's on-disk cache, in several processes at once.

A fresh clone has no numba cache, and compiling the kernels takes about 24 s of one core on the 2-core VM (38 s, 15 s
of it ``order_prefix``, while that kernel used ``np.partition``). ``make test-unit`` runs this first, so that its
xdist workers load the kernels instead of each compiling them (about 67 s of CPU, 39 s of wall time, measured in a
fresh clone before that change). With a warm cache each process only
loads its kernels (under a second).

    python tools/warm_kernels.py [--processes 2]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

#: Seconds each kernel took to compile on the 2-core VM (``warm_up``'s callback; used only to balance the processes).
COMPILE_S = {
    "sens_rows": 5.2,
    "order_prefix": 3.3,
    "mc_scan_prefix": 2.9,
    "dist_prefix": 2.7,
    "scan_prefix": 2.1,
    "mc_prefix": 1.8,
    "d1_cummax": 1.5,
    "crossing_rows": 1.3,
    "row_metrics": 1.3,
    "sep_prefix": 1.2,
    "log_sums": 0.7,
    "running_min_sq": 0.3,
}


def split(names: list[str], processes: int) -> list[list[str]]:
    """``names`` in ``processes`` groups of about equal compile time (longest first, each to the lightest group)."""
    groups: list[list[str]] = [[] for _ in range(processes)]
    load = [0.0] * processes
    for n in sorted(names, key=lambda n: -COMPILE_S.get(n, 3.0)):
        i = load.index(min(load))
        groups[i].append(n)
        load[i] += COMPILE_S.get(n, 3.0)
    return [g for g in groups if g]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--processes",
        type=int,
        default=len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1),
        help="processes (default: the cores this process may use)",
    )
    args = ap.parse_args(argv)
    if args.processes < 1:
        ap.error(f"--processes must be an integer >= 1 (got {args.processes})")
    try:
        from attn_lib.accel import kernels
    except ImportError as exc:  # numba missing or broken: attn_lib runs its torch code, nothing to compile
        print(f"warm_kernels: the accelerator does not import ({exc}); nothing to compile")
        return 0
    t0 = time.perf_counter()
    code = "import sys; from attn_lib.accel import kernels; kernels.warm_up(names=sys.argv[1:])"
    jobs = [subprocess.Popen([sys.executable, "-c", code, *g]) for g in split(list(kernels.KERNELS), args.processes)]
    codes = [j.wait() for j in jobs]
    rc = next((1 for c in codes if c != 0), 0)  # a child killed by a signal returns a negative code
    print(f"warm_kernels: {len(kernels.KERNELS)} kernels in {len(jobs)} processes, {time.perf_counter() - t0:.1f} s")
    return rc


if __name__ == "__main__":
    sys.exit(main())
