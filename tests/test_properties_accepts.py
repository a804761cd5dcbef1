"""Property tests for three classes of silent accepts (issue 35, item 11), drawn by class rather than by example:
a grades.csv cell that a spreadsheet would run as a formula, a repository URL outside ASCII's DNS names, and a
count of heads that is not a whole number. The examples of the issue are tests elsewhere (tests/test_assignments.py,
tests/test_chapters.py, tests/test_exercises.py); these draw the class around each one."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, assume, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
#: the characters that start a formula in Excel, LibreOffice and Google Sheets (OWASP's CSV-injection list), written
#: here rather than read from the grader, so that a character dropped from its list fails this test
SPREADSHEET_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)


def _module(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


autograde = _module("autograde_tool_props", ROOT / "tools" / "autograde.py")
repo = _module("repository_url_props", ROOT / "book" / "_ext" / "repository_url.py")


# ------------------------------------------------------------------------------------------------------------------
# grades.csv: no cell starts with a character a spreadsheet reads as the start of a formula
# ------------------------------------------------------------------------------------------------------------------
@SETTINGS
@given(
    head=st.sampled_from(SPREADSHEET_FORMULA_STARTS),
    rest=st.text(max_size=20),
    plain=st.text(max_size=20),
)
def test_property_no_grades_cell_starts_a_formula(head, rest, plain):
    risky = head + rest
    safe = autograde._safe_cell(risky)
    assert not safe.startswith(SPREADSHEET_FORMULA_STARTS) and safe == "'" + risky  # shown as the text it was
    if not plain.startswith(SPREADSHEET_FORMULA_STARTS):
        assert autograde._safe_cell(plain) == plain  # anything else is left as it is
    assert autograde._safe_cell(3.5) == 3.5  # numbers stay numbers


# ------------------------------------------------------------------------------------------------------------------
# the repository URL: accepted only as https://HOST/OWNER/NAME in ASCII, and pasted as a literal that reads back
# ------------------------------------------------------------------------------------------------------------------
_LABEL = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,8}[a-z0-9])?", fullmatch=True)
_PART = st.from_regex(r"[A-Za-z0-9_.-]{1,12}", fullmatch=True).filter(lambda p: p not in (".", ".."))
GOOD = st.builds(
    lambda labels, owner, name: f"https://{'.'.join(labels)}/{owner}/{name}",
    st.lists(_LABEL, min_size=2, max_size=3),
    _PART,
    _PART,
)
#: characters that look like ASCII letters but are not: Cyrillic, Greek, full-width and dotless forms
LOOKALIKES = "іорсаехуԁһјӏѕԛԝаеοιαν０ｏｇıſ"


@SETTINGS
@given(url=GOOD)
def test_property_well_formed_ascii_urls_are_accepted_and_read_back_from_their_literal(url):
    assert repo.check_url(url) == url
    assert json.loads(repo.python_literal(url)) == url


@SETTINGS
@given(url=GOOD, data=st.data())
def test_property_a_url_with_any_look_alike_or_non_ascii_character_is_refused(url, data):
    i = data.draw(st.integers(8, len(url) - 1), label="position")  # anywhere after "https://"
    bad = data.draw(st.sampled_from(LOOKALIKES) | st.characters(min_codepoint=128, exclude_categories=("Cs",)))
    forged = url[:i] + bad + url[i + 1 :]
    with pytest.raises(ValueError, match="^url must be https://HOST/OWNER/NAME in ASCII"):
        repo.check_url(forged)


@SETTINGS
@given(url=GOOD, extra=st.sampled_from(["/", "?a=1", "#x", ":8080", "/x/y", "/.", " ", "\n", '"', "'"]))
def test_property_a_url_with_anything_past_owner_and_name_is_refused(url, extra):
    forged = url + extra
    assume(forged != url)
    with pytest.raises(ValueError, match="^url must be"):
        repo.check_url(forged)


# ------------------------------------------------------------------------------------------------------------------
# a count of heads: only the whole number is right, however close a fraction comes
# ------------------------------------------------------------------------------------------------------------------
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(offset=st.floats(1e-12, 0.49) | st.floats(-0.49, -1e-12))
def test_property_a_count_of_heads_off_a_whole_number_is_wrong(offset):
    from attn_lib import theory
    from attn_lib.book import exercises as E

    with pytest.raises(AssertionError, match="HINT"):
        E.check_heads_for_coverage(lambda p, c: theory.heads_for_coverage(p, c) + offset)
