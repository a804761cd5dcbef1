"""Cost per row of every normaliser against softmax (issue 11, "Performance"). Not a test: it prints timings.

Each normaliser of the chapter "Beyond softmax" (softmax, top-k at several k, sparsemax, 1.5-entmax, SSMax,
SA-softmax, softmax1, sigmoid, softpick) is applied to the same causal logits of shape ``(heads, L, L)`` -- one
attention layer of ``--heads`` heads at row length ``--length``, masked like a causal model -- and timed as the best
of ``--repeat`` runs. Printed: milliseconds per call, microseconds per row and the ratio to softmax.

    python benchmarks/bench_normalizers.py [--length 1024] [--heads 9] [--dtype float32] [--repeat 5] [--threads 1]

Timings on a shared machine are noisy: the load average is printed with them.
"""

from __future__ import annotations

import argparse
import os
import time

import torch


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--length", type=int, default=1024)
    p.add_argument("--heads", type=int, default=9)
    p.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--k", type=int, nargs="+", default=[4, 16, 64])
    a = p.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    from attn_lib import experiments, normalizers

    dtype = getattr(torch, a.dtype)
    g = torch.Generator().manual_seed(0)
    L = a.length
    causal = torch.ones(L, L, dtype=torch.bool).tril()
    logits = (torch.randn(a.heads, L, L, generator=g) * 2).to(dtype).masked_fill(~causal, float("-inf"))
    rows = a.heads * L
    print(
        f"logits ({a.heads}, {L}, {L}) {a.dtype}, causal; {torch.get_num_threads()} torch threads; "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    times = {}
    for label, (name, params) in experiments.normalizer_settings(a.k).items():
        f = normalizers.get(name, **params)
        f(logits, mask=causal)  # warm-up
        best = float("inf")
        for _ in range(a.repeat):
            t0 = time.perf_counter()
            f(logits, mask=causal)
            best = min(best, time.perf_counter() - t0)
        times[label] = best
    base = times["softmax"]
    print(f"{'normaliser':<12} {'ms/call':>9} {'us/row':>8} {'x softmax':>10}")
    for label, t in times.items():
        print(f"{label:<12} {t * 1e3:9.1f} {t / rows * 1e6:8.2f} {t / base:10.2f}")


if __name__ == "__main__":
    main()
