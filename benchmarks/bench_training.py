"""Time the training sweep of chapter 8 (issue 37). Not a test: it prints timings.

Runs ``attn_lib.training.run_sweep(profile)`` without the result cache and prints the wall time, the CPU time of every
run (one thread each) summed, and the load average before and after. On a shared machine the wall time is not a
measurement; the summed CPU time divided by the number of workers estimates the wall time on idle cores (training is
compute-bound and each run is single-threaded).

    python benchmarks/bench_training.py [--profile quick|full] [--workers 2] [--device cpu|cuda]

With ``--device cuda`` (a GPU present) the sweep trains the larger ``gpu`` size there.
"""

from __future__ import annotations

import argparse
import os
import time


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--profile", default="quick", choices=["quick", "full"])
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--device", default="cpu")
    a = p.parse_args()
    from attn_lib import training

    load0 = os.getloadavg()
    t0 = time.perf_counter()
    runs = training.run_sweep(a.profile, device=a.device, workers=a.workers, progress=True)
    wall = time.perf_counter() - t0
    R = training.sweep_tables(runs)["train_runs"]
    cpu = R["cpu_s"].sum()
    print(f"profile {a.profile!r} on {a.device}: {len(R)} runs, {int(R['steps'].iloc[0])} steps each")
    print(f"wall {wall:.1f} s with {a.workers} worker(s); CPU {cpu:.1f} s summed over the runs")
    print(f"idle estimate: {cpu / a.workers:.1f} s of training on {a.workers} idle core(s)")
    print(f"load average before {load0[0]:.1f}, after {os.getloadavg()[0]:.1f}")
    print(R.groupby("normalizer", sort=False)["cpu_s"].median().round(2).to_string())


if __name__ == "__main__":
    main()
