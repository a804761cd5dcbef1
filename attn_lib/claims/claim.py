"""The machinery of the claims (:mod:`attn_lib.claims`): :class:`Claim`, :class:`Outcome`, the registry
:data:`CLAIMS`, and :func:`rule`, which registers a rule under its id with its fields from ``claims.toml``."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from importlib.resources import files

import pandas as pd

from .stats import THRESHOLDS

#: The kinds of evidence a verdict can be; the report counts them apart.
EVIDENCE = {
    "informative": "a test that could have failed on this model",
    "forced": "forced by a proposition of the book: the data cannot decide it",
    "guarantee": "a theorem that holds for any weights: a check of the code, not of the paper",
    "finding": "a statement of this build about the paper, with its proof",
}
#: The verdicts of each kind of evidence (``"n/a"``: the results lack the data).
VERDICTS = {
    "informative": ("reproduced", "not reproduced", "no verdict"),
    "forced": ("agrees (forced)", "differs (forced)"),
    "guarantee": ("holds", "violated"),
    "finding": ("finding", "refuted"),
}


@dataclass(frozen=True)
class Outcome:
    """What a rule found: verdict, measured value, and (for a row that differs, or has no verdict) its cause. The
    kind of evidence is not a rule's to set: it is the :class:`Claim`'s, fixed before any data."""

    verdict: str
    measured: str
    cause: str = ""
    numbers: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Claim:
    """One claim of the paper, or one reading of it."""

    id: str  #: stable identifier (``"fig2c-critical-e1"``); rows, links and tests use it
    where: str  #: where the paper says it (``"Fig. 2c"``, ``"§4.4"``, ``"Discussion"``)
    title: str  #: the claim in a few words
    words: str  #: the paper's words (short quote or paraphrase)
    reading: str  #: the reading this row tests, where the paper allows several
    evidence: str  #: a key of :data:`EVIDENCE`
    basis: str  #: the book's block (``prf`` label) forcing or guaranteeing the verdict; ``""`` if informative
    section: str  #: the label of the appendix section behind the row's project decisions
    needs: tuple  #: the results the rule reads
    rule: str  #: the rule in words
    fails_if: str  #: for an informative row: the outcome that would have failed it
    evaluate: Callable  #: ``evaluate(results, thresholds) -> Outcome``
    #: why an informative row is a near-empty test (it could hardly have failed), counted apart by the tally; or ``""``
    weak: str = ""


#: Every claim, by id, in the report's order.
CLAIMS: dict[str, Claim] = {}


def claim(
    id,
    *,
    where,
    title,
    words,
    evidence,
    section,
    needs,
    rule,
    reading="",
    basis="",
    fails_if="",
    weak="",
    evaluate=None,
):
    """Register ``evaluate(results, thresholds) -> Outcome`` as claim ``id`` (without ``evaluate``: the decorated
    function); the other arguments are :class:`Claim`'s fields."""
    if evidence not in EVIDENCE:
        raise ValueError(f"evidence must be one of {list(EVIDENCE)} (got {evidence!r})")
    if evidence == "informative" and not fails_if:
        raise ValueError(f"claim {id!r}: an informative claim says what outcome would have failed it")
    if evidence != "informative" and not basis:
        raise ValueError(f"claim {id!r}: a {evidence} row names the book's block it rests on")
    if weak and evidence != "informative":
        raise ValueError(f"claim {id!r}: only an informative claim can be a near-empty test (weak=...)")

    def register(fn):
        if id in CLAIMS:
            raise ValueError(f"claim {id!r} is registered twice")
        CLAIMS[id] = Claim(
            id, where, title, words, reading, evidence, basis, section, tuple(needs), rule, fails_if, fn, str(weak)
        )
        return fn

    return register if evaluate is None else register(evaluate)


def _load(text: str) -> dict[str, dict]:
    """The ``[[claim]]`` tables of a ``claims.toml`` text, by id, in the file's order, checked for their keys."""
    known = {f.name for f in fields(Claim)} - {"id", "evaluate"}
    out: dict[str, dict] = {}
    for entry in tomllib.loads(text)["claim"]:
        entry = dict(entry)
        cid = entry.pop("id")
        if cid in out:
            raise ValueError(f"claims.toml: claim {cid!r} is listed twice")
        if set(entry) - known:
            raise ValueError(f"claims.toml: claim {cid!r} has unknown fields {sorted(set(entry) - known)}")
        out[cid] = entry
    return out


#: The fields of every claim (all but ``id`` and ``evaluate``), by id, from ``claims.toml``: the report's order.
DATA: dict[str, dict] = _load(files(__package__).joinpath("claims.toml").read_text(encoding="utf-8"))


def _fill(cid: str, text: str, values: dict) -> str:
    """``text`` with each ``{NAME}`` or ``{NAME:spec}`` (a name in capitals) replaced by ``values[NAME]``."""

    def one(m: re.Match) -> str:
        if m[1] not in values:
            raise ValueError(f"claim {cid!r}: claims.toml names {{{m[1]}}}, which its @rule does not give")
        return format(values[m[1]], m[2] or "")

    return re.sub(r"\{([A-Z][A-Z0-9_]*)(?::([^{}]*))?\}", one, text)


def rule(id: str, **values) -> Callable:
    """Register the decorated ``evaluate(results, thresholds) -> Outcome`` as the rule of claim ``id``, with its
    fields from ``claims.toml``. ``values``: the module constants that the entry's texts name as ``{NAME}``."""
    if id not in DATA:
        raise ValueError(f"id must be a claim of attn_lib/claims/claims.toml (got {id!r}: no entry)")
    meta = {k: _fill(id, v, values) if isinstance(v, str) else v for k, v in DATA[id].items()}
    unused = [k for k in values if not any(f"{{{k}" in v for v in DATA[id].values() if isinstance(v, str))]
    if unused:
        raise ValueError(f"claim {id!r}: claims.toml never names {unused}")
    return claim(id, **meta)


def check_rules() -> None:
    """Check that every entry of ``claims.toml`` has its rule and every rule its entry; put :data:`CLAIMS` in the
    file's order."""
    missing, extra = [i for i in DATA if i not in CLAIMS], [i for i in CLAIMS if i not in DATA]
    if missing or extra:
        raise ValueError(f"claims.toml and the rules disagree: no rule for {missing}, no entry for {extra}")
    CLAIMS.update({i: CLAIMS.pop(i) for i in DATA})


def prf_ref(label: str) -> str:
    return f"{{prf:ref}}`{label}`"


def has_results(results: dict, *names: str) -> bool:
    """Whether every result ``names`` is a non-empty table."""
    return all(isinstance(results.get(n), pd.DataFrame) and len(results[n]) for n in names)


class NotJudged(Exception):
    """Raised (by :func:`na_if`) when the results lack what a rule reads: its row says ``"n/a"``."""


def na_if(lacking, why: str) -> None:
    """Raise :class:`NotJudged` with ``why`` (the row's measured text) when ``lacking`` is true."""
    if lacking:
        raise NotJudged(why)


def judged(ok, measured: str, cause: str, kind: str = "informative", numbers: dict | None = None) -> Outcome:
    """The first verdict of evidence ``kind`` in :data:`VERDICTS` when ``ok``, else its second one, with ``cause``."""
    return Outcome(VERDICTS[kind][0 if ok else 1], measured, "" if ok else cause, numbers or {})


# ---- applying one rule ---------------------------------------------------------------------------------------------
#: The columns of a row (:func:`claim_row`): the claim's id, where, title (``claim``), words (``paper``), reading and
#: evidence, the outcome's verdict, measured value and cause, then the claim's rule, fails_if, basis, section, weak.
COLUMNS = (
    "id",
    "where",
    "claim",
    "paper",
    "reading",
    "evidence",
    "verdict",
    "measured",
    "cause",
    "rule",
    "fails_if",
    "basis",
    "section",
    "weak",
)

#: The tally's label of an informative row marked as a near-empty test (:attr:`Claim.weak`).
NEAR_EMPTY = "near-empty test"


def claim_row(c: Claim, results: dict, thresholds: dict | None = None) -> dict:
    """One claim applied to ``results``: a dict with the :data:`COLUMNS` (``"n/a"`` where data are missing)."""
    th = dict(THRESHOLDS, **(thresholds or {}))
    if all(has_results(results, n) for n in c.needs):
        try:
            out = c.evaluate(results, th)
        except NotJudged as exc:
            out = Outcome("n/a", str(exc))
        except KeyError as exc:  # a table without a column the rule reads
            out = Outcome("n/a", f"not judged: the results lack the column {exc.args[0]!r}")
        except Exception as exc:  # one failing rule: its row says so, and every other row stands
            if isinstance(exc, TypeError) and "evidence" in str(exc):  # the kind is the claim's: fail loudly
                why = "which was removed: a row's kind of evidence is its Claim's, fixed before any data"
                raise TypeError(f"claim {c.id!r}: its rule passes Outcome(evidence=...), {why}") from exc
            out = Outcome("n/a", f"not judged: the rule failed ({type(exc).__name__}: {exc})")
    else:
        out = Outcome("n/a", "not run: needs " + ", ".join(n for n in c.needs if not has_results(results, n)))
    evidence = c.evidence
    if out.verdict != "n/a" and out.verdict not in VERDICTS[evidence]:
        out = Outcome("n/a", f"not judged: the rule gave the verdict {out.verdict!r} for evidence {evidence!r}")
    fails_if = c.fails_if if evidence == "informative" else ""
    values = (c.id, c.where, c.title, c.words, c.reading, evidence, out.verdict, out.measured, out.cause)
    return dict(zip(COLUMNS, (*values, c.rule.format(**th), fails_if, c.basis, c.section, c.weak), strict=True))
