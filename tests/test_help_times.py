"""Help texts state times that a benchmark measured (issue 34): the paper profile's run times in ``reproduce
--help`` are the range of the figures in benchmarks/README.md's row "whole paper profile", rounded to the second."""

from __future__ import annotations

import re
from pathlib import Path

from attn_lib.cli import build_parser

README = Path(__file__).resolve().parents[1] / "benchmarks" / "README.md"


def _profile_help() -> str:
    sub = next(a for a in build_parser()._actions if a.dest == "command" or getattr(a, "choices", None))
    rep = sub.choices["reproduce"]
    return " ".join(next(a for a in rep._actions if a.dest == "profile").help.split())


def _ranges(text: str) -> list[tuple[int, int]]:
    return [(int(a), int(b)) for a, b in re.findall(r"(\d+)-(\d+) s\b", text)]


def _measured_runs(row: str) -> list[list[float]]:
    """The seconds of each day's runs in the README row: the 2026-12-03 runs, then the 2026-12-02 range."""
    head, _, later = row.partition("On 2026-12-02")
    today = [float(x) for x in re.findall(r"(\d+\.\d) s", head)]
    earlier = [float(x) for x in re.findall(r"(\d+\.\d)", later.split("|")[0])]
    return [today, earlier]


def _measured() -> list[tuple[int, int]]:
    row = next(line for line in README.read_text().splitlines() if line.startswith("| whole `paper` profile"))
    return [(round(min(r)), round(max(r))) for r in _measured_runs(row)]


def test_the_help_cites_the_measured_range():
    assert _ranges(_profile_help()) == _measured()


def test_the_check_fails_on_an_invented_range():
    for invented in ("paper: 1.5-2 min on an idle 2-core CPU", "paper: 1-2.5 min (69-133 s measured)"):
        assert _ranges(invented) != _measured()
