"""The book's prose and the claims' verdicts cannot disagree (issue 34, item 5): a chapter states a claim's outcome only
through :func:`attn_lib.report.say` (or another helper fed by the claims table) inside a code cell, so a sentence of
``book/*.md`` outside the code cells that names a claim id next to a verdict word is an error.

The checker is shown failing on planted sentences, then applied to every page of the book."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from attn_lib.claims import CLAIMS

BOOK = Path(__file__).resolve().parents[1] / "book"

#: Words that state a verdict (those of attn_lib.claims.VERDICTS, and their usual inflections).
VERDICT_WORDS = re.compile(
    r"\b(reproduced|reproduces|not reproduced|agrees?|differs?|holds|violated|refuted|confirmed|no verdict|"
    r"fails|passes|failed|passed)\b",
    re.IGNORECASE,
)
_ID = re.compile(r"(?<![\w-])([a-z][a-z0-9.]*(?:-[a-z0-9.]+)+)(-\*)?(?![\w-])")
_FENCE = re.compile(r"^(`{3,})(.*)$")


def prose(text: str) -> str:
    """``text`` without its front matter and without the code cells and code blocks (their output is computed)."""
    text = re.sub(r"\A---\n.*?\n---\n", "", text, flags=re.DOTALL)
    out, fence = [], None
    for line in text.splitlines():
        m = _FENCE.match(line.strip())
        if fence is None and m:
            info = m.group(2).strip()
            is_code = info.startswith("{code-cell}") or re.fullmatch(r"[A-Za-z0-9_+-]*", info) is not None
            if is_code:
                fence = m.group(1)
                continue
        elif fence is not None and line.strip() == fence:
            fence = None
            continue
        if fence is None:
            out.append(line)
    return "\n".join(out)


def sentences(text: str) -> list[str]:
    parts = re.split(r"\n\s*\n|(?<=[.!?])\s+(?=[A-Z`*(])", text)
    return [" ".join(p.split()) for p in parts if p.strip()]


def claim_ids_in(sentence: str) -> list[str]:
    """The claim ids a sentence names: exact ids, and wildcards such as ``fig2c-critical-*`` that match some id."""
    found = []
    for m in _ID.finditer(sentence):
        name, star = m.group(1), m.group(2)
        if star:
            found += [i for i in CLAIMS if i.startswith(name + "-")]
        elif name in CLAIMS:
            found.append(name)
    return found


def stated_verdicts(text: str) -> list[str]:
    """The sentences of ``text``'s prose that pair a claim id with a verdict word (the ids themselves, such as
    ``thm1-bound-holds``, are not read as verdict words)."""
    bad = []
    for s in sentences(prose(text)):
        if claim_ids_in(s) and VERDICT_WORDS.search(_ID.sub(" ", s)):
            bad.append(s)
    return bad


class TestChecker:
    def test_flags_a_typed_verdict(self):
        planted = "Intro.\n\nThe row `fig3-saturates` is reproduced on this model, as the paper says.\n"
        assert stated_verdicts(planted) == ["The row `fig3-saturates` is reproduced on this model, as the paper says."]

    @pytest.mark.parametrize(
        "sentence",
        [
            "On the stand-in, fig4-merge holds at every T.",
            "The rows `fig2c-critical-*` differ from the paper.",
            "So `thm1-bound-holds` is violated nowhere.",
        ],
    )
    def test_flags_other_verdict_words_and_wildcards(self, sentence):
        assert stated_verdicts(sentence) == [sentence]

    @pytest.mark.parametrize(
        "text",
        [
            "The rows `fig2c-critical-*` above give what this build finds.",
            "The row `thm1-bound-holds` checks Theorem 1 on every row.",  # the id's own 'holds' is no verdict
            "```{code-cell} ipython3\nprint('fig3-saturates is reproduced')\n```\n",
            "The paper's claim is reproduced by the model in Fig. 3.",  # no claim id
        ],
    )
    def test_passes_what_states_no_verdict(self, text):
        assert stated_verdicts(text) == []


@pytest.mark.parametrize("page", sorted(BOOK.glob("*.md")), ids=lambda p: p.name)
def test_no_page_types_a_verdict(page):
    """Every claim's outcome in the book comes from the claims table (report.say, report.summary_markdown, ...)."""
    assert stated_verdicts(page.read_text()) == []
