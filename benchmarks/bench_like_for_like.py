"""The ``paper`` profile's experiments timed like for like against an older commit (issue 33's speed item): the
current code with the draws added since 3cf47e8 switched off (1 Monte-Carlo seed, 1 direction draw, no separability
temperature sweep, no extra-seed critical-N experiment; the coverage pass and the report are not run), against the old
commit's own ``paper`` profile. Not a test: it prints one time per call. Run each side in its own process, alternating:

    python benchmarks/bench_like_for_like.py new [--experiments a,b] [--untuned]
    (cd <worktree of 3cf47e8> && PYTHONPATH=. python /path/to/benchmarks/bench_like_for_like.py old)

``new`` calls ``attn_lib.process.tune()`` first (3cf47e8 tuned the process on import) unless ``--untuned``.
"""

from __future__ import annotations

import argparse
import dataclasses
import time


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("side", choices=["old", "new"], help="old: the checked-out commit's own paper profile")
    ap.add_argument("--experiments", default="", help="comma-separated subset (default: all but critical_n_mc_seeds)")
    ap.add_argument("--untuned", action="store_true", help="new: leave the process settings alone")
    args = ap.parse_args(argv)
    if args.side == "new" and not args.untuned:
        from attn_lib import process

        process.tune()
    import attn_lib.experiments as E
    from attn_lib.experiments import inputs, jobs

    subset = [s for s in args.experiments.split(",") if s] or None
    unknown = sorted(set(subset or ()) - set(jobs.EXPERIMENTS))
    if unknown:
        ap.error(f"--experiments: unknown {unknown}; choose from {list(jobs.EXPERIMENTS)}")
    handle, text, _ = inputs.load_inputs("gpt2", "war-and-peace", device="cpu")
    if args.side == "old":
        profile = "paper"
    else:
        p, R = E.PROFILES["paper"], dataclasses.replace
        profile = R(
            p,
            distance_vs_length=R(p.distance_vs_length, mc_seeds=1),
            distance_vs_n=R(p.distance_vs_n, mc_seeds=1),
            separability=R(p.separability, temperatures=()),
            gradient_sensitivity=R(p.gradient_sensitivity, direction_seeds=1),
        )
        subset = subset or [n for n in jobs.EXPERIMENTS if n != "critical_n_mc_seeds"]
    t0 = time.perf_counter()
    E.run_all(handle, text, profile, None, experiments=subset)
    print(f"{args.side} {'+'.join(subset) if subset else 'all'}: run_all {time.perf_counter() - t0:.1f} s", flush=True)


if __name__ == "__main__":
    main()
