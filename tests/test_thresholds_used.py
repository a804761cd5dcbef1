"""Every threshold of the claims' rules is read by a rule: a threshold that no rule reads is a stated rule that is
never applied (``mc_se_max`` was one)."""

from __future__ import annotations

import re
from pathlib import Path

import attn_lib.claims as C
from attn_lib.claims.stats import THRESHOLDS


def test_every_threshold_is_read_by_a_rule():
    src = "".join(p.read_text() for p in Path(C.__file__).parent.glob("*.py") if p.name != "stats.py")
    rules = " ".join(c.rule + " " + c.fails_if for c in C.CLAIMS.values())
    unused = [k for k in THRESHOLDS if not re.search(rf"""\[["']{k}["']\]""", src) and "{" + k not in rules]
    assert not unused, f"thresholds no rule reads: {unused}"


def test_the_check_sees_an_unused_threshold(monkeypatch):
    monkeypatch.setitem(THRESHOLDS, "never_read_anywhere", 1.0)
    src = "".join(p.read_text() for p in Path(C.__file__).parent.glob("*.py") if p.name != "stats.py")
    assert not re.search(r"""\[["']never_read_anywhere["']\]""", src)
