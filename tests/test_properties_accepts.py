"""Property tests for the classes of silent accepts (issue 35, item 11), drawn by class rather than by example:
a grades.csv cell that a spreadsheet would run as a formula, a repository URL outside ASCII's DNS names, a count of
heads that is not a whole number, an environment variable outside its set of values, a cache or model folder that is
relative or holds an unexpanded variable, a device this machine lacks or that holds no data, and a file that is not
text. The examples of the issue are tests elsewhere (tests/test_assignments.py,
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


# ------------------------------------------------------------------------------------------------------------------
# environment variables: a value outside the variable's set is a ValueError naming the variable, never a default
# ------------------------------------------------------------------------------------------------------------------
#: Each enumerated variable's values, written here (not read from attn_lib._validation.ENVIRONMENT), so that a
#: variable that starts accepting more fails this test.
ENV_WORDS = {
    "ATTN_LIB_OFFLINE": ("1", "true", "yes", "on", "0", "false", "no", "off"),
    "ATTN_LIB_ENGINE": ("auto", "numba", "torch"),
    "ATTN_LIB_PROFILE": ("paper", "quick"),
}
SPIN = r"\d+[kKMG]?|INFINITE|INFINITY"
#: Words a user might try: a library that starts accepting one of them (outside a variable's set) fails the test.
PLAUSIBLE_WORDS = ("fast", "slow", "none", "default", "cpu", "cuda", "y", "n", "t", "f", "2", "-1", "enabled",
                   "disabled", "full", "small", "gpt2", "maybe", "perhaps", "offline", "online", "numpy", "jit")  # fmt: skip


def _env_value(name: str, value: str):
    """``attn_lib._validation.env(name)`` with ``name`` set to ``value`` (the variable restored after)."""
    import os

    from attn_lib._validation import env

    old = os.environ.get(name)
    os.environ[name] = value
    try:
        return env(name)
    finally:
        if old is None:
            del os.environ[name]
        else:
            os.environ[name] = old


def _refused(name: str, value: str) -> bool:
    try:
        _env_value(name, value)
    except ValueError as exc:
        assert name in str(exc), str(exc)
        return True
    return False


_ENV_TEXT = st.text(st.characters(blacklist_characters="\0", blacklist_categories=("Cs",)), max_size=12)


@SETTINGS
@given(name=st.sampled_from(sorted(ENV_WORDS)), data=st.data())
def test_property_an_enumerated_variable_accepts_its_words_only(name, data):
    word = data.draw(st.sampled_from(ENV_WORDS[name]))
    cased = "".join(c.upper() if data.draw(st.booleans()) else c for c in word)
    assert _env_value(name, f" {cased}\t") == cased  # any case, blanks around
    other = data.draw(_ENV_TEXT)
    assume(other.strip() and other.strip().lower() not in ENV_WORDS[name])
    assert _refused(name, other)


@pytest.mark.parametrize("name", sorted(ENV_WORDS))
def test_every_plausible_word_outside_a_variables_set_is_refused(name):
    for word in PLAUSIBLE_WORDS:
        assert _refused(name, word) is (word not in ENV_WORDS[name]), word


@SETTINGS
@given(value=_ENV_TEXT | st.from_regex(SPIN, fullmatch=True))
def test_property_gomp_spincount_is_a_count_or_refused(value):
    import re

    ok = not value or re.fullmatch(SPIN, value.strip()) is not None  # empty: unset; blanks alone are refused
    assert _refused("GOMP_SPINCOUNT", value) is not ok


@SETTINGS
@given(
    name=st.sampled_from(["ATTN_LIB_CACHE_DIR", "ATTN_LIB_MODEL_DIR"]),
    value=_ENV_TEXT | st.sampled_from(["$HOME/x", "${HOME}/cache", "results", "./c", "../c", "%APPDATA%", "/tmp/c"]),
)
def test_property_a_cache_folder_is_absolute_or_starts_with_a_tilde(name, value):
    v = value.strip()
    ok = not value or v.startswith("~") or v.startswith("/")  # empty: unset; blanks alone are refused
    assert _refused(name, value) is not ok


# ------------------------------------------------------------------------------------------------------------------
# devices: one that this machine lacks, or that holds no data, is a ValueError naming the device
# ------------------------------------------------------------------------------------------------------------------
@SETTINGS
@given(
    kind=st.sampled_from(["cpu", "cuda", "mps", "meta", "xpu", "xla", "hpu", "mtia"]),
    index=st.none() | st.integers(0, 4) | st.integers(0, 99),
)
def test_property_a_device_is_present_here_or_refused(kind, index):
    import torch

    from attn_lib.models import resolve_device

    name = kind if index is None else f"{kind}:{index}"
    if kind == "cpu":
        present = index in (None, 0)
    elif kind == "cuda":
        present = torch.cuda.is_available() and (index is None or index < torch.cuda.device_count())
    elif kind == "mps":
        present = torch.backends.mps.is_available() and index in (None, 0)
    else:  # meta holds no data; the others have no backend on the machines this project runs on
        present = False
    try:
        dev = resolve_device(name)
    except ValueError as exc:
        assert not present and "device" in str(exc), str(exc)
    else:
        assert present, f"{name} accepted as {dev}"
        assert torch.zeros(1, device=dev).cpu().item() == 0  # it holds data


# ------------------------------------------------------------------------------------------------------------------
# texts: a file that is not UTF-8 text, or holds a NUL byte, is a ValueError naming it
# ------------------------------------------------------------------------------------------------------------------
@SETTINGS
@given(data=st.binary(max_size=64), text=st.text(max_size=20))
def test_property_a_file_that_is_not_text_is_refused(tmp_path_factory, data, text):
    from attn_lib.corpus import read_text_file

    path = tmp_path_factory.mktemp("texts") / "t.txt"
    for raw in (data, text.encode("utf-8"), text.encode("utf-8") + b"\0" + data):
        path.write_bytes(raw)
        try:
            decoded = raw.decode("utf-8")
        except UnicodeDecodeError:
            decoded = None
        try:
            got = read_text_file("--text", path)
        except ValueError as exc:
            assert "--text" in str(exc) and (decoded is None or "\0" in decoded), str(exc)
        else:
            assert got == decoded and "\0" not in got


# ------------------------------------------------------------------------------------------------------------------
# the stand-in's conversion: reused only for the very GGUF file it came from, whatever byte of it changes
# ------------------------------------------------------------------------------------------------------------------
@SETTINGS
@given(data=st.binary(min_size=1, max_size=256), where=st.integers(0, 255), flip=st.integers(1, 255))
def test_property_a_gguf_with_any_other_byte_is_not_reused(tmp_path_factory, data, where, flip):
    import hashlib
    import os

    from attn_lib.models import offline as O

    folder = tmp_path_factory.mktemp("standin")
    gguf = folder / "model.gguf"
    gguf.write_bytes(data)
    os.utime(gguf, ns=(10**18, 10**18))
    (folder / "model.safetensors").write_bytes(b"x")
    (folder / "config.json").write_text("{}")
    meta = dict(format=1, gguf_size=len(data), gguf_sha256=hashlib.sha256(data).hexdigest())
    (folder / O._META).write_text(json.dumps(meta))
    assert O._standin_meta_ok(folder, gguf) == meta  # the file it came from: reused
    i = where % len(data)
    other = data[:i] + bytes([data[i] ^ flip]) + data[i + 1 :]  # the same size, one byte changed
    gguf.write_bytes(other)
    os.utime(gguf, ns=(10**18 + 1, 10**18 + 1))
    assert O._standin_meta_ok(folder, gguf) is None
