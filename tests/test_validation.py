"""Tests for attn_lib._validation: the argument checks every layer shares."""

from __future__ import annotations

import os
import re
from unittest import mock

import numpy as np
import pytest
import torch

from attn_lib._validation import (
    SEED_MAX,
    check_finite,
    check_int,
    check_nonnegative,
    check_positive,
    check_probability,
    check_seed,
)

NOT_NUMBERS = ["2", "abc", b"1", True, False, np.bool_(True), torch.tensor(True), None, [1.0], 1j]


@pytest.mark.parametrize("check", [check_positive, check_nonnegative, check_probability, check_finite])
@pytest.mark.parametrize("value", NOT_NUMBERS, ids=repr)
def test_real_checks_reject_strings_booleans_and_non_numbers(check, value):
    with pytest.raises(ValueError, match="^x must be"):
        check("x", value)


@pytest.mark.parametrize("value", [0.5, 1, np.float32(0.5), np.int64(1), torch.tensor(0.5), np.array(0.5)])
def test_real_checks_accept_real_scalars(value):
    assert check_positive("x", value) == float(value)
    assert check_probability("x", value) == float(value)


def test_check_finite_range():
    assert check_finite("c", -3.5) == -3.5
    for bad in (float("nan"), float("inf"), -float("inf")):
        with pytest.raises(ValueError, match="c must be a finite real number"):
            check_finite("c", bad)


@pytest.mark.parametrize("value", [3, np.int64(3), np.uint8(3), torch.tensor(3), 3.0, np.float64(3.0)], ids=repr)
def test_check_int_accepts_integers(value):
    v = check_int("n", value)
    assert v == 3 and type(v) is int


@pytest.mark.parametrize(
    "value",
    [2.7, 1.5, "3", True, np.bool_(False), torch.tensor(2.5), torch.tensor([1, 2]), float("inf"), float("nan"), None],
    ids=repr,
)
def test_check_int_rejects_fractions_strings_and_booleans(value):
    with pytest.raises(ValueError, match="^n must be an integer"):
        check_int("n", value)


def test_check_int_range_message():
    with pytest.raises(ValueError, match=r"n must be an integer in \[1, 5\] \(got 9\)"):
        check_int("n", 9, low=1, high=5)


def test_check_seed_range():
    assert check_seed("seed", SEED_MAX) == 2**64 - 1
    torch.Generator().manual_seed(check_seed("seed", SEED_MAX))  # the whole accepted range works in torch
    for bad in (-1, 2**64, 2**70, 1.5):
        with pytest.raises(ValueError, match=r"seed must be an integer in \[0, 18446744073709551615\]"):
            check_seed("seed", bad)


def test_prepare_output_dir(tmp_path):
    from attn_lib._validation import prepare_output_dir

    assert prepare_output_dir("--out", tmp_path) == tmp_path
    new = tmp_path / "a" / "b"
    assert prepare_output_dir("--out", str(new)) == new and new.is_dir() and not list(new.iterdir())
    f = tmp_path / "file.txt"
    f.write_text("x")
    with pytest.raises(ValueError, match=r"^--out '.*file.txt' exists and is not a folder$"):
        prepare_output_dir("--out", f)
    with pytest.raises(ValueError, match=r"^--out '.*file.txt/sub' cannot be used as an output folder: Not a dir"):
        prepare_output_dir("--out", f / "sub")
    for bad in ("", "  ", None, 3):
        with pytest.raises(ValueError, match="^out must be a folder path"):
            prepare_output_dir("out", bad)


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux's /proc")
def test_prepare_output_dir_that_cannot_be_created():
    from attn_lib._validation import prepare_output_dir

    # /proc refuses new folders even for root (a permission check alone would pass there)
    with pytest.raises(ValueError, match=r"^--out '/proc/attn_lib_out' cannot be used as an output folder: "):
        prepare_output_dir("--out", "/proc/attn_lib_out")


# ------------------------------------------------------------------------------------------------------------------
# environment variables: one table, one reader
# ------------------------------------------------------------------------------------------------------------------
def _bad_value(name: str):
    """Values outside the set of variable ``name``, by class: other words, relative or $VARIABLE paths, non-counts,
    blanks."""
    from hypothesis import strategies as st

    from attn_lib._validation import ENVIRONMENT

    blank = st.sampled_from([" ", "\t", "  \n"])
    text = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\0"), min_size=1)  # environ-safe
    words = {
        "ATTN_LIB_OFFLINE": ("1", "true", "yes", "on", "0", "false", "no", "off"),
        "ATTN_LIB_ENGINE": ("auto", "numba", "torch"),
        "ATTN_LIB_PROFILE": ("paper", "quick"),
    }
    if name in words:
        return st.one_of(blank, text.filter(lambda v: v.strip().lower() not in words[name]))
    if name in ("ATTN_LIB_CACHE_DIR", "ATTN_LIB_MODEL_DIR"):
        rel = st.from_regex(r"[A-Za-z0-9_.$][A-Za-z0-9_./$-]{0,20}", fullmatch=True)
        return st.one_of(blank, rel, rel.map(lambda v: "$HOME/" + v))
    if name == "GOMP_SPINCOUNT":
        return st.one_of(blank, text.filter(lambda v: not re.fullmatch(r"\d+[kKMG]?|INFINITE|INFINITY", v.strip())))
    assert name in ENVIRONMENT
    return blank


def test_property_environment_values_outside_their_set_are_value_errors_naming_variable_and_values():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from attn_lib._validation import ENVIRONMENT, env

    @given(st.sampled_from(sorted(ENVIRONMENT)).flatmap(lambda n: st.tuples(st.just(n), _bad_value(n))))
    @settings(max_examples=300, deadline=None)
    def check(case):
        name, value = case
        with mock.patch.dict(os.environ, {name: value}), pytest.raises(ValueError) as exc:
            env(name)
        msg = str(exc.value)
        assert msg.startswith(f"the environment variable {name} must be {ENVIRONMENT[name][0]}, or unset (got ")

    check()


@pytest.mark.parametrize(
    "name, value, expected",
    [
        ("ATTN_LIB_OFFLINE", " Yes ", "Yes"),
        ("ATTN_LIB_OFFLINE", "off", "off"),
        ("ATTN_LIB_ENGINE", "TORCH", "TORCH"),
        ("ATTN_LIB_CACHE_DIR", "~/c", "~/c"),
        ("ATTN_LIB_MODEL_DIR", "/abs/$HOME/m", "/abs/$HOME/m"),
        ("GOMP_SPINCOUNT", "3000", "3000"),
        ("GOMP_SPINCOUNT", "INFINITE", "INFINITE"),
        ("ATTN_LIB_MODEL", " gpt2 ", "gpt2"),
        ("ATTN_LIB_PROFILE", "", ""),
    ],
)
def test_environment_values_in_their_set(monkeypatch, name, value, expected):
    from attn_lib._validation import check_environment, env, env_flag

    monkeypatch.setenv(name, value)
    assert env(name) == expected
    check_environment()
    if name == "ATTN_LIB_OFFLINE":
        assert env_flag(name) is (expected != "off")


def test_environment_table_matches_the_readers():
    """The words of the table are the values the library's readers know."""
    from attn_lib._validation import ENVIRONMENT
    from attn_lib.experiments import PROFILES
    from attn_lib.metrics._engine import ENGINES

    for name, values in (("ATTN_LIB_PROFILE", PROFILES), ("ATTN_LIB_ENGINE", ENGINES)):
        assert ENVIRONMENT[name][0] == "one of " + ", ".join(values)


@pytest.mark.parametrize(
    "name, value, call",
    [
        ("ATTN_LIB_CACHE_DIR", "relative/cache", "attn_lib.cache:cache_dir"),
        ("ATTN_LIB_CACHE_DIR", "$HOME/cache", "attn_lib.cache:results_dir"),
        ("ATTN_LIB_MODEL_DIR", "models", "attn_lib.cache:model_dir"),
        ("ATTN_LIB_OFFLINE", "perhaps", "attn_lib.corpus:load_text"),
        ("GOMP_SPINCOUNT", "abc", "attn_lib.process:state"),
        ("ATTN_LIB_PROFILE", "huge", "attn_lib.book.chapter:settings"),
        ("ATTN_LIB_MODEL", "  ", "attn_lib.book.chapter:settings"),
    ],
)
def test_readers_of_the_environment_name_the_variable(monkeypatch, tmp_path, name, value, call):
    import importlib

    monkeypatch.delenv("ATTN_LIB_MODEL_DIR", raising=False)
    monkeypatch.setenv("ATTN_LIB_CACHE_DIR", str(tmp_path))  # no cached War and Peace: the offline switch is read
    monkeypatch.setenv(name, value)
    module, func = call.split(":")
    with pytest.raises(ValueError, match=f"^the environment variable {name} must be .*got {re.escape(repr(value))}"):
        getattr(importlib.import_module(module), func)()
