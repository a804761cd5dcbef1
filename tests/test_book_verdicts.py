"""The book's prose and the claims' verdicts cannot disagree (issue 34, item 5): a chapter states a claim's outcome only
through :func:`attn_lib.report.say` (or another helper fed by the claims table) inside a code cell. Two checks read the
prose of ``book/*.md`` (outside the code cells):

- a sentence that names a claim id next to a verdict word is an error (:func:`stated_verdicts`);
- a sentence that states an outcome against the paper or on the model *without* an id ("the paper's claim is reproduced
  by the model", "this build finds ...", "unlike the paper ...") is an error too (:func:`stated_outcomes`): such a
  sentence cannot be matched to a verdict, so only computed text may say it.

Each checker is shown failing on planted sentences, then applied to every page of the book."""

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


#: Phrases that state an outcome of the reproduction without naming a claim: a verdict against the paper ("agrees with
#: the paper", "unlike the paper", "the paper's claim holds"), or what a run found ("this build finds", "is reproduced on
#: this model"). "The paper's display formula is not reproduced here" states no outcome and is not matched.
OUTCOME_PHRASES = re.compile(
    r"\b(agrees?|disagrees?|differs?|is consistent) (with|from) the paper\b(?!'s)"
    r"|\b(as|unlike) the paper (says|said|claims|claimed|reports|reported|predicts|predicted|finds|found)\b"
    r"|\bthe paper's (claim|prediction|finding)s? (is|are|was|were|holds?|held|fails?|failed)\b"
    r"|\b(this|the) (build|model|stand-in|encoder|decoder|run|reproduction) "
    r"(finds|found|shows|showed|confirms|confirmed|refutes|refuted|reproduces|reproduced|contradicts)\b"
    r"|\b(is|are|was|were) (not )?reproduced (on|by|in|with) (this|the) "
    r"(model|stand-in|build|encoder|decoder|run|reproduction)\b",
    re.IGNORECASE,
)


#: A phrase inside a relative or interrogative clause describes, it does not state: "every row that differs from the
#: paper names its cause", "what this build finds".
_DESCRIBES = re.compile(r"\b(that|which|what|where|whether)\s+$", re.IGNORECASE)


def stated_outcomes(text: str) -> list[str]:
    """The sentences of ``text``'s prose that state an outcome of the reproduction in words (:data:`OUTCOME_PHRASES`).
    No marker exempts a sentence: one that states an outcome names its claim id, so the verdict test reads it."""
    out = []
    for s in sentences(prose(text)):
        if any(not _DESCRIBES.search(s[: m.start()]) for m in OUTCOME_PHRASES.finditer(s)):
            out.append(s)
    return out


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
            "The paper's claim is reproduced by the model in Fig. 3.",  # no claim id: stated_outcomes' case
        ],
    )
    def test_passes_what_states_no_verdict(self, text):
        assert stated_verdicts(text) == []

    @pytest.mark.parametrize(
        "sentence",
        [
            "The paper's claim is reproduced by the model in Fig. 3.",
            "Here the critical N agrees with the paper.",
            "Unlike the paper reports, the weights do not vanish on the stand-in.",
            "As the paper predicts, the sensitivity saturates below T = 0.1.",
            "The stand-in shows a sub-linear critical N.",
            "This build finds no vanishing of the largest weight.",
            "The separability trend is not reproduced on this model.",
            "The bound is, as the paper says, conservative: negative at every N >= 16 (asserted).",  # no marker exempts
        ],
    )
    def test_outcomes_without_an_id_are_flagged(self, sentence):
        assert stated_outcomes(sentence) == [sentence]

    @pytest.mark.parametrize(
        "text",
        [
            "The paper's display formula is not reproduced here.",
            "It agrees with the paper's text and proof outline, and it is checked numerically.",
            "With the stand-in the numbers describe a different model, so they may differ from the paper's.",
            "The second cell confirms the limits of regimes (i) and (ii).",
            "```{code-cell} ipython3\nprint('this build finds b = -0.6')\n```\n",
            "Every row that differs from the paper names its cause.",
            "## Summary: the paper's claims and what this build found",
        ],
    )
    def test_outcome_checker_passes_what_states_no_outcome(self, text):
        assert stated_outcomes(text) == []


@pytest.mark.parametrize("page", sorted(BOOK.glob("*.md")), ids=lambda p: p.name)
def test_no_page_types_a_verdict(page):
    """Every claim's outcome in the book comes from the claims table (report.say, report.summary_markdown, ...)."""
    assert stated_verdicts(page.read_text()) == []
    assert stated_outcomes(page.read_text()) == []
