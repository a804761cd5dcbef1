"""Tests for attn_lib._validation: the argument checks every layer shares."""

from __future__ import annotations

import os

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
