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


def _measured() -> list[int]:
    """The seconds of the README row "whole `paper` profile" (the current figure), rounded."""
    row = next(line for line in README.read_text().splitlines() if line.startswith("| whole `paper` profile |"))
    return [round(float(x)) for x in re.findall(r"(\d+\.\d) s wall", row)]


def _cited(text: str) -> list[int]:
    return [int(x) for x in re.findall(r"measured (\d+) s", text)]


def test_the_help_cites_the_measured_time():
    assert _measured() and _cited(_profile_help()) == _measured()


def test_the_check_fails_on_an_invented_time():
    for invented in ("paper: measured 90 s on an idle 2-core CPU", "paper: 1.5-2 min"):
        assert _cited(invented) != _measured()
