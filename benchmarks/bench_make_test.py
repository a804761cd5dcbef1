"""`make test` from a fresh clone, timed phase by phase (issue 23, item 3). Not a test: it prints timings and ratios.

Clones this checkout's ``HEAD`` into a temporary folder (a fresh clone: no ``.venv``, no numba cache, no built
book), runs ``make test`` there with ``CI=true`` and an empty result cache (``ATTN_LIB_CACHE_DIR``), stamps every line
of its output with the time it arrived, and splits the run into its phases by the commands ``make`` echoes:

    python benchmarks/bench_make_test.py                          # HEAD of this checkout, fresh clone
    python benchmarks/bench_make_test.py --rev 1e79472            # another commit
    python benchmarks/bench_make_test.py --save now.json --previous before.json
    python benchmarks/bench_make_test.py --log old.log            # only split a saved log (its lines stamped)

Prints the seconds of each phase (setup, lint, kernel warm-up, nbval, the ``-W`` build, the browser checks; the unit
tests run alongside the last three and are shown apart, from the line ``make test`` prints when they end; a log from
before that has them as a phase of their own), the whole ``make test``, and each chapter's execution time as nbval stored it in the executed-chapter cache
(``book/conftest.py``). ``--save`` writes them as JSON and ``--previous`` prints each as a ratio to such a file. The
stamped log is kept (``--keep``) or written next to ``--save``. The target is 15 minutes on two cores.

Times on a shared machine drift by 10-20 % over a day (``benchmarks/README.md``): compare runs made back to back.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: (phase, pattern of the first line ``make`` echoes for it), in the order ``make test`` runs them. A phase lasts
#: from its first line to the first line of the next phase found (or the end of the run).
PHASES = [
    ("setup", re.compile(r"-m venv |pip install")),
    ("lint", re.compile(r"/ruff check ")),
    ("kernel warm-up", re.compile(r"tools/warm_kernels\.py$")),
    ("unit tests", re.compile(r'/pytest tests -m "not browser"')),
    ("nbval (chapters)", re.compile(r"/pytest --nbval-lax book")),
    ("-W build", re.compile(r"jupyter-book build .* -W")),
    ("browser checks", re.compile(r"/pytest tests -m browser")),
]
STAMP = re.compile(r"^(\d+(?:\.\d+)?) (.*)$")
#: the line ``make test`` prints when the unit tests, run alongside the chapters (not a phase of its own), end
ALONGSIDE = re.compile(r"^make test: the unit tests (?:passed|failed) in (\d+) s$")
#: the line after the last phase: this script's own, or that of ``.ci/run`` (whose log goes on with make test-colab)
END = re.compile(r"^(make test exited with |ci: make test passed in )")


def split_phases(lines: list[str]) -> dict[str, float]:
    """Seconds of each phase from ``"<unix time> <line>"`` lines; phases not found are left out.

    >>> split_phases(["0 python3 -m venv .venv", "90 .venv/bin/ruff check .", "95 done"])
    {'setup': 90.0, 'lint': 5.0}
    """
    stamped = [(float(m.group(1)), m.group(2)) for m in map(STAMP.match, lines) if m]
    if not stamped:
        raise ValueError("log holds no stamped lines ('<unix seconds> <text>')")
    starts: list[tuple[str, float]] = []
    nxt = 0
    for t, text in stamped:
        for k in range(nxt, len(PHASES)):  # phases appear in order; a later one may be missing
            if PHASES[k][1].search(text):
                starts.append((PHASES[k][0], t))
                nxt = k + 1
                break
    end = next((t for t, text in stamped if END.match(text)), stamped[-1][0])
    out = {}
    for i, (name, t0) in enumerate(starts):
        t1 = starts[i + 1][1] if i + 1 < len(starts) else end
        out[name] = round(t1 - t0, 1)
    return out


def unit_seconds_alongside(lines: list[str]) -> float | None:
    """Seconds of the unit tests that ``make test`` ran alongside the chapters (``None`` for a log from before it did).

    >>> unit_seconds_alongside(["5 make test: the unit tests passed in 540 s"])
    540.0
    """
    found = [m for m in (ALONGSIDE.match(STAMP.sub(r"\2", line)) for line in lines) if m]
    return float(found[0].group(1)) if found else None


def chapter_seconds(cache_dir: Path) -> dict[str, float]:
    """``{chapter: seconds}`` of nbval's executions, from the executed-chapter cache (empty if there is none)."""
    if not (cache_dir / "global.db").is_file():
        return {}
    from jupyter_cache import get_cache

    rows = get_cache(str(cache_dir)).list_cache_records()
    return {Path(r.uri).stem: round(float(r.data.get("execution_seconds", 0.0)), 1) for r in rows}


def run_make_test(rev: str, keep: Path | None) -> tuple[list[str], dict[str, float], int]:
    """Clone ``rev`` of this checkout, run ``make test`` there; the stamped lines, nbval's chapter times, the rc."""
    work = Path(tempfile.mkdtemp(prefix="attn_lib_bench_make_test_"))
    clone = work / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    subprocess.run(["git", "-C", str(clone), "checkout", "-q", rev], check=True)
    env = dict(os.environ, CI="true", ATTN_LIB_CACHE_DIR=str(work / "cache"), PYTHONUNBUFFERED="1")
    lines = []
    t_start = time.time()
    with subprocess.Popen(
        ["make", "test"], cwd=clone, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
    ) as proc:
        for line in proc.stdout:
            lines.append(f"{time.time():.1f} {line.rstrip()}")
        rc = proc.wait()
    lines.append(f"{time.time():.1f} make test exited with {rc} after {time.time() - t_start:.0f} s")
    chapters = chapter_seconds(clone / "_build" / ".executed-by-nbval")
    if keep is not None:
        keep.write_text("\n".join(lines) + "\n")
    shutil.rmtree(work, ignore_errors=True)
    return lines, chapters, rc


def report(phases: dict, chapters: dict, total: float, previous: dict | None, unit: float | None = None) -> None:
    def row(name: str, now: float, before: float | None) -> str:
        ratio = f"{now / before:6.2f}" if before else "      "
        was = f"{before:8.1f}" if before is not None else "        "
        return f"{name:32s} {now:8.1f} {was} {ratio}"

    prev_p = (previous or {}).get("phases", {})
    prev_c = (previous or {}).get("chapters", {})
    print(f"{'phase':32s} {'now [s]':>8s} {'before':>8s} {'ratio':>6s}")
    for name, sec in phases.items():
        print(row(name, sec, prev_p.get(name)))
    if unit is not None:
        print(row("unit tests (in parallel)", unit, (previous or {}).get("unit_alongside")))
    print(row("make test (all phases)", total, (previous or {}).get("total")))
    print(f"15-minute target: {'met' if total <= 900 else 'NOT met'} ({total / 60:.1f} min)")
    if chapters:
        print("\nnbval, per chapter (execution_seconds in the executed-chapter cache)")
        for name, sec in sorted(chapters.items()):
            print(row(name, sec, prev_c.get(name)))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rev", default="HEAD", help="commit of this checkout to clone and test (default HEAD)")
    ap.add_argument("--log", type=Path, default=None, help="split this stamped log instead of running make test")
    ap.add_argument("--keep", type=Path, default=None, help="write the stamped log of the run here")
    ap.add_argument("--save", type=Path, default=None, help="write the phase times to this JSON file")
    ap.add_argument("--previous", type=Path, default=None, help="a JSON file of --save, printed as ratios")
    args = ap.parse_args(argv)
    previous = None
    if args.previous is not None:
        try:
            previous = json.loads(args.previous.read_text())
        except (OSError, ValueError) as exc:
            ap.error(f"--previous must be a JSON file written by --save ({exc})")
    if args.log is not None:
        try:
            lines = args.log.read_text().splitlines()
        except OSError as exc:
            ap.error(f"--log must be a readable file ({exc})")
        chapters, rc = {}, 0
    else:
        if shutil.which("make") is None or shutil.which("git") is None:
            ap.error("make and git are needed to run make test")
        known = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--verify", "--quiet", f"{args.rev}^{{commit}}"], capture_output=True
        )
        if known.returncode != 0:
            ap.error(f"--rev must name a commit of {ROOT} (got {args.rev!r})")
        keep = args.keep or (args.save.with_suffix(".log") if args.save is not None else None)
        lines, chapters, rc = run_make_test(args.rev, keep)
    try:
        phases = split_phases(lines)
    except ValueError as exc:
        print(f"bench_make_test: {exc}", file=sys.stderr)
        return 2
    total, unit = round(sum(phases.values()), 1), unit_seconds_alongside(lines)
    report(phases, chapters, total, previous, unit)
    if rc != 0:
        print(f"\nmake test FAILED (exit {rc}): the times above are of a failed run", file=sys.stderr)
    if args.save is not None:
        args.save.write_text(
            json.dumps(
                {"phases": phases, "unit_alongside": unit, "chapters": chapters, "total": total, "rc": rc}, indent=1
            )
        )
        print(f"saved to {args.save}")
    return 0 if rc == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
