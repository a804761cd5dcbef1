"""The reproduction report's summary in words, grouped by the paper's figures (what the paper claims, what this build
found, why the two differ), generated from the claims table: no verdict is typed. :func:`say` is the only way a
chapter states what happened to a claim (``tests/test_book_verdicts.py`` checks it)."""

from __future__ import annotations

import re

import pandas as pd

from ..claims import EVIDENCE, NEAR_EMPTY
from ..claims.stats import require_columns
from ._common import md_text
from .reproduction import plain_roles, short_cause

#: Verdicts that differ from the paper (their rows get a "why" line in the summary).
DIFFERS = ("not reproduced", "differs (forced)", "no verdict", "violated", "refuted")

#: What each group of rows is about (rows whose ``where`` names no figure form their own group).
GROUP_TITLES = {
    "Fig. 2": "distances between the top-N context and the other tokens (Fig. 2, Theorem 1, Corollary 2)",
    "Fig. 3": "geometric separability (Fig. 3, Theorem 2)",
    "Fig. 4": "gradient sensitivity against the temperature (Fig. 4, Corollary 3)",
    "Discussion": "multi-head coverage (Discussion)",
    "§4": "the paper's setting (§4)",
}


def figure_of(where: str) -> str:
    """A row's group: the first ``"Fig. N"`` its ``where`` names (``"Theorem 1, Fig. 2a–b"``: ``"Fig. 2"``), else the
    first part of ``where``."""
    m = re.search(r"Fig\.\s*(\d+)", str(where))
    return f"Fig. {m.group(1)}" if m else str(where).split(",")[0].strip()


def _clip(text: str, limit: int = 220) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit].rsplit(" ", 1)[0] + " …"


def _kind(row) -> str:
    weak = row.get("weak", "")
    return NEAR_EMPTY if row["evidence"] == "informative" and isinstance(weak, str) and weak else row["evidence"]


def _found(t: pd.DataFrame) -> str:
    """``"informative: 2 reproduced (`a`, `b`), 1 not reproduced (`c`); guarantee: 1 holds (`d`)"``."""
    parts = []
    kinds = t.assign(_kind=[_kind(r) for _, r in t.iterrows()])
    for kind in [*EVIDENCE, NEAR_EMPTY]:
        rows = kinds[(kinds["_kind"] == kind) & (kinds["verdict"] != "n/a")]
        if len(rows):
            counts = [
                f"{len(g)} {v} ({', '.join(f'`{i}`' for i in g['id'])})" for v, g in rows.groupby("verdict", sort=False)
            ]
            parts.append(f"{kind}: " + ", ".join(counts))
    na = kinds[kinds["verdict"] == "n/a"]
    if len(na):
        parts.append(f"n/a on this run (the table says why): {', '.join(f'`{i}`' for i in na['id'])}")
    return "; ".join(parts) or "no rows"


def summary_markdown(tables: dict[str, pd.DataFrame] | pd.DataFrame, *, links: bool = True) -> str:
    """The summary in words that opens chapter 6 and ``report.md``, one ``###`` section per group of the paper's
    figures: the paper's words, what each model's rows found (verdicts counted by kind, with their ids) and the first
    clause of the cause of every row that differs. ``tables``: one reproduction table or ``{model label: table}``;
    ``links``: MyST roles stay (the book), else plain labels."""
    if isinstance(tables, pd.DataFrame):
        tables = {"this run": tables}
    if not isinstance(tables, dict) or not tables:
        raise ValueError("tables must be a reproduction table or a non-empty dict {model label: table}")
    for lab, t in tables.items():
        require_columns(t, f"tables[{lab!r}]", ("id", "where", "paper", "evidence", "verdict", "cause"))
    first = next(iter(tables.values()))
    groups = list(dict.fromkeys(figure_of(w) for w in first["where"]))
    out = []
    for g in groups:
        ids = [i for i, w in zip(first["id"], first["where"]) if figure_of(w) == g]
        # the paper's words, each once ("(same sentence)" and the like point back at the words before them)
        words = [w for w in dict.fromkeys(first.set_index("id").loc[ids, "paper"]) if not str(w).startswith("(same")]
        lines = [f"### {g}: {GROUP_TITLES[g]}" if g in GROUP_TITLES else f"### {g}", ""]
        lines.append("- **The paper:** " + "; ".join(words) + ".")
        for lab, t in tables.items():
            who = lab.split(":", 1)[0] if len(tables) > 1 else "this build"
            lines.append(f"- **Found ({who}):** {_found(t[t['id'].isin(ids)])}.")
        why = _why(tables, ids, links)
        if why:
            lines.append("- **Why they differ:**")
            lines += [f"  - {w}" for w in why]
        out.append("\n".join(lines))
    return "\n\n".join(out)


def _why(tables: dict, ids: list, links: bool) -> list[str]:
    """One line per row of ``ids`` that differs from the paper on some model: its id and each model's first clause of
    the cause (one when all agree)."""
    lines = []
    keyed = {lab: t.set_index("id") for lab, t in tables.items()}
    for cid in ids:
        causes = {}
        for lab, t in keyed.items():
            if cid in t.index and t.loc[cid, "verdict"] in DIFFERS:
                c = short_cause(t.loc[cid, "cause"])
                causes[lab.split(":", 1)[0]] = md_text(_clip(c if links else plain_roles(c))) or "no cause given"
        if not causes:
            continue
        if len(set(causes.values())) == 1 and len(causes) == len(keyed):
            lines.append(f"`{cid}`: {next(iter(causes.values()))}")
        else:
            lines.append(f"`{cid}`: " + "; ".join(f"{k}: {v}" if len(keyed) > 1 else v for k, v in causes.items()))
    return lines


def say(table: pd.DataFrame, cid: str) -> str:
    """How prose states claim ``cid``'s outcome in the claims ``table``: ``"the row `cid` (kind) reads **verdict**"``
    (chapters call it in a code cell instead of typing a verdict)."""
    require_columns(table, "table", ("id", "evidence", "verdict"))
    t = table.set_index("id")
    if cid not in t.index:
        raise ValueError(f"cid must be a claim id of the table (got {cid!r})")
    r = t.loc[cid]
    return f"the row `{cid}` ({_kind(r)}) reads **{r['verdict']}**"
