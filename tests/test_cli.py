"""attn_lib.cli: info, capture (tiny models; the real stand-in in a slow test), reproduce wiring, bad input."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import types

import pytest

import attn_lib.models as M
import attn_lib.models.loading as L
import attn_lib.models.offline as O
from attn_lib.capture_summary import layer_summary
from attn_lib.cli import build_parser, main


def table_rows(out: str) -> list[list[str]]:
    """The per-layer lines of the capture table: layer number and four numbers."""
    rows = []
    for ln in out.splitlines():
        f = ln.split()
        if len(f) == 5 and f[0].isdigit():
            try:
                [float(x) for x in f[1:]]
            except ValueError:
                continue
            rows.append(f)
    return rows


@pytest.fixture
def use_tiny(monkeypatch, tiny_gpt2):
    """``load_model`` returns the tiny GPT-2 (as if it were the requested model)."""
    calls = []

    def fake_load(name="gpt2", device="auto", dtype=None, offline_fallback=True, quiet=False):
        calls.append(dict(name=name, device=device, dtype=dtype, offline_fallback=offline_fallback, quiet=quiet))
        M.resolve_device(device)
        return tiny_gpt2

    monkeypatch.setattr(M, "load_model", fake_load)
    return calls


def test_info(capsys, tmp_cache, offline):
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert "device 'auto' -> cpu" in out
    assert "model 'gpt2' -> NOT AVAILABLE offline -> the offline stand-in SmolLM2-135M-Instruct" in out
    assert f"cache: {tmp_cache}" in out and "ATTN_LIB_CACHE_DIR" in out
    assert "botchan" in out and "war-and-peace" in out


def test_info_bad_device_is_reported(capsys, offline, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert main(["info", "--device", "cuda"]) == 0
    assert "CUDA is not available" in capsys.readouterr().out


def test_capture_table_and_result_cache(capsys, tmp_cache, use_tiny):
    args = ["capture", "--model", "gpt2", "--text", "botchan", "--length", "64", "--windows", "2", "-q"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "model: tiny-gpt2 (random init) on cpu, float32" in out
    assert "text:  botchan" in out and "2 window(s) of 64 tokens" in out
    assert [int(r[0]) for r in table_rows(out)] == [0, 1]
    assert "computed" in out and "STAND-IN" not in out
    assert main(args) == 0
    assert "from the result cache" in capsys.readouterr().out
    assert main(args + ["--no-cache"]) == 0
    assert "cache bypassed" in capsys.readouterr().out
    assert use_tiny[0] == {"name": "gpt2", "device": "auto", "dtype": None, "offline_fallback": True, "quiet": True}


def test_capture_quiet_shows_no_progress_bar_of_transformers(capfd, tmp_cache, tmp_path, tiny_gpt2):
    """-q: transformers' "Loading weights" bar is not written either (a model folder loads through it)."""
    folder = tmp_path / "tiny"
    tiny_gpt2.model.save_pretrained(folder)
    tiny_gpt2.tokenizer.save_pretrained(folder)
    capfd.readouterr()  # save_pretrained's own bar
    base = ["capture", "--model", str(folder), "--text", "botchan", "--length", "16", "--no-cache", "--device", "cpu"]
    assert main([*base, "-q"]) == 0
    err = capfd.readouterr().err
    assert "Loading weights" not in err and "it/s]" not in err, err
    assert main(base) == 0  # the check can fail: without -q the bar is there
    assert "Loading weights" in capfd.readouterr().err


def test_capture_json_normaliser_layers(capsys, tmp_cache, use_tiny):
    assert (
        main(
            [
                "capture",
                "--text",
                "botchan",
                "--length",
                "32",
                "--layers",
                "1",
                "--normalizer",
                "sparsemax",
                "--temperature",
                "0.5",
                "--json",
                "--no-cache",
                "-q",
            ]
        )
        == 0
    )
    data = json.loads(capsys.readouterr().out)
    assert [r["layer"] for r in data["rows"]] == [1]
    assert data["params"]["normalizer"] == "sparsemax" and data["params"]["temperature"] == 0.5
    assert data["model"]["model_id"] == "tiny-gpt2" and data["text"]["name"] == "botchan"
    r = data["rows"][0]
    assert 0 < r["max_weight"] <= 1 and 0 <= r["first_token_mass"] <= 1 and r["entropy"] >= 0


def test_capture_says_when_it_ran_on_the_standin(capsys, tmp_cache, monkeypatch, tiny_llama):
    import dataclasses

    standin = dataclasses.replace(tiny_llama, model_id=O.STANDIN_NAME, requested="gpt2", is_standin=True)
    monkeypatch.setattr(M, "load_model", lambda *a, **k: standin)
    assert main(["capture", "--text", "botchan", "--length", "16", "-q", "--no-cache"]) == 0
    out = capsys.readouterr().out
    assert "(offline stand-in for gpt2)" in out and "OFFLINE STAND-IN" in out
    assert "NOTE: this ran on the offline stand-in SmolLM2-135M-Instruct, not gpt2." in out


def test_layer_summary_values(tiny_gpt2):
    from attn_lib.capture import collect_attention

    rec = collect_attention(tiny_gpt2, list(range(10)))[0]
    s = layer_summary(rec)
    w = rec.weights[..., 1:, :].double()
    assert s["max_weight"] == pytest.approx(float(w.max()))
    assert s["first_token_mass"] == pytest.approx(float(w[..., 0].mean()))
    ent = -(w * w.clamp_min(1e-300).log()).sum(-1).mean()
    assert s["entropy"] == pytest.approx(float(ent), rel=1e-5)


# ------------------------------------------------------------------------------------------------------------------
# bad input: each gets a clear message and exit status 2
# ------------------------------------------------------------------------------------------------------------------
def test_length_beyond_context(capsys, tmp_cache, use_tiny):
    assert main(["capture", "--text", "botchan", "--length", "200", "-q"]) == 2
    err = capsys.readouterr().err
    assert "--length 200 exceeds the context of tiny-gpt2 (128 tokens)" in err and "--windows 2" in err


def test_explicit_windowing_covers_long_text(capsys, tmp_cache, use_tiny):
    assert main(["capture", "--text", "botchan", "--length", "128", "--windows", "3", "-q", "--no-cache"]) == 0
    assert "3 window(s) of 128 tokens" in capsys.readouterr().out


def test_device_not_present(capsys, monkeypatch, use_tiny):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert main(["capture", "--device", "cuda", "-q"]) == 2
    assert "CUDA is not available" in capsys.readouterr().err


def test_unknown_model(capsys, offline):
    assert main(["capture", "--model", "nobody/no-such-model", "--device", "cpu", "-q"]) == 2
    err = capsys.readouterr().err
    assert "nobody/no-such-model" in err and "not in the local Hugging Face cache" in err
    assert main(["capture", "--model", "not a model!", "-q"]) == 2
    assert "is not a model name" in capsys.readouterr().err


def test_gpt2_without_fallback(capsys, offline, monkeypatch):
    monkeypatch.setattr(L, "load_pretrained", lambda *a, **k: (_ for _ in ()).throw(OSError("not cached")))
    assert main(["capture", "--no-fallback", "--device", "cpu", "-q"]) == 2
    assert "offline_fallback=False" in capsys.readouterr().err


def test_empty_and_too_short_text(capsys, tmp_path, tmp_cache, use_tiny):
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    assert main(["capture", "--text", str(empty), "-q"]) == 2
    assert "empty" in capsys.readouterr().err
    short = tmp_path / "short.txt"
    short.write_text("Only a few words.")
    assert main(["capture", "--text", str(short), "--length", "100", "-q"]) == 2
    assert "has only 17 tokens" in capsys.readouterr().err


@pytest.mark.parametrize(
    "args, match",
    [
        (["capture", "--length", "0"], "--length must be an integer >= 1"),
        (["capture", "--length", "x"], "--length must be an integer >= 1"),
        (["capture", "--windows", "0"], "--windows must be an integer >= 1"),
        (["capture", "--temperature", "0"], "must be a finite number > 0"),
        (["capture", "--start", "-3"], "must be an integer >= 0"),
        (["capture", "--layers", "a,b"], "comma-separated integers"),
        (["reproduce", "--profile", "huge"], "invalid choice"),
        (["reproduce", "--threads", "0"], "--threads must be an integer >= 1"),
        (["frobnicate"], "invalid choice"),
    ],
)
def test_argument_errors(capsys, args, match):
    with pytest.raises(SystemExit) as exc:
        main(args)
    assert exc.value.code == 2
    assert match in capsys.readouterr().err


def test_help_texts(capsys):
    import re
    from pathlib import Path

    def help_of(*args):
        with pytest.raises(SystemExit):
            main([*args, "--help"])
        return capsys.readouterr().out

    top = help_of()
    arch = (Path(__file__).parents[1] / "docs" / "ARCHITECTURE.md").read_text()
    table = arch.split("## Environment variables")[1].split("\n\n")[0]  # the library's variables (not the build's)
    documented = sorted(set(re.findall(r"^\| `(ATTN_LIB_[A-Z_]+)`", table, re.M)))
    assert len(documented) >= 6
    for var in documented:  # every variable of docs/ARCHITECTURE.md's table is listed
        assert var in top, var
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    commands = list(sub.choices)
    assert len(commands) >= 5
    described = " ".join(top.split("positional arguments:")[0].split())
    for cmd in commands:  # the description names every subcommand (none left out when one is added)
        assert f"{cmd} " in described, cmd
        text = help_of(cmd)
        assert re.search(r"examples?:\n  attn-lib " + cmd, text), cmd  # an example per subcommand
        assert len(text.split("options:")[0].splitlines()) >= 3, cmd  # a description above the options
    rep = help_of("reproduce")
    for what in (
        "results.json",
        "report.md",
        "fig2a_distance_vs_length",
        ".png and .svg",
        "ATTN_LIB_CACHE_DIR",
        "/results",
        "--no-cache recomputes",
    ):
        assert what in rep, what
    info = " ".join(help_of("info").split())
    assert "--model MODEL model name to resolve" in info and "falls back to the offline stand-in" in info
    assert "--device DEVICE device to check" in info and "CUDA, then Apple MPS, then CPU" in info


def test_no_command_prints_help(capsys):
    assert main([]) == 2
    assert "capture" in capsys.readouterr().out


# ------------------------------------------------------------------------------------------------------------------
# reproduce is wired to attn_lib.experiments.run_reproduce
# ------------------------------------------------------------------------------------------------------------------
@pytest.fixture
def fake_experiments(monkeypatch):
    """``attn_lib.experiments`` replaced by a module whose ``run_reproduce`` records its arguments (and can warn)."""
    seen = []
    fake = types.ModuleType("attn_lib.experiments")

    def run_reproduce(**kw):
        seen.append(kw)
        for note in kw.pop("_notes", None) or fake.notes:
            import warnings

            warnings.warn(note, UserWarning, stacklevel=2)
        return 0

    fake.run_reproduce = run_reproduce
    fake.notes = []
    monkeypatch.setitem(sys.modules, "attn_lib.experiments", fake)
    import attn_lib

    monkeypatch.setattr(attn_lib, "experiments", fake, raising=False)
    fake.seen = seen
    return fake


def test_reproduce_wiring(fake_experiments, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert (
        main(
            [
                "reproduce",
                "--model",
                "gpt2-medium",
                "--device",
                "cpu",
                "--profile",
                "paper",
                "--out",
                "o",
                "--text",
                "botchan",
                "--no-cache",
                "--threads",
                "1",  # at most the machine's CPUs
                "-q",
            ]
        )
        == 0
    )
    assert fake_experiments.seen[-1] == {
        "model": "gpt2-medium",
        "device": "cpu",
        "profile": "paper",
        "out": "o",
        "text": "botchan",
        "use_cache": False,
        "threads": 1,
        "progress": False,
        "compare": (),
    }
    assert (tmp_path / "o").is_dir()  # checked (and created) before the run
    main(["reproduce"])
    seen = fake_experiments.seen[-1]
    assert seen["profile"] == "paper" and seen["use_cache"] is True and seen["text"] == "war-and-peace"
    assert seen["threads"] is None and seen["progress"] is True and seen["out"] == "results"


@pytest.mark.parametrize(
    "make_out, match",
    [
        (lambda p: (p / "f").write_text("x") and p / "f", r"--out '.*f' exists and is not a folder"),
        (lambda p: (p / "f").write_text("x") and p / "f" / "sub", r"--out '.*sub' cannot be used as an output folder"),
    ],
)
def test_reproduce_checks_out_first(fake_experiments, tmp_path, capsys, make_out, match):
    out = make_out(tmp_path)
    assert main(["reproduce", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert fake_experiments.seen == []  # no work done
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("attn-lib reproduce: error: --out ")
    import re

    assert re.search(match, lines[0])


def test_reproduce_notes_are_clean_lines(fake_experiments, tmp_path, capsys):
    fake_experiments.notes = ["'gpt2' is not cached: using the offline stand-in", "War and Peace is not available"]
    assert main(["reproduce", "--out", str(tmp_path / "o"), "-q"]) == 0
    err = capsys.readouterr().err
    assert "attn-lib: NOTE: 'gpt2' is not cached: using the offline stand-in" in err
    assert "attn-lib: NOTE: War and Peace is not available" in err
    assert "UserWarning" not in err and ".py:" not in err  # no raw warning with file and line


def test_reproduce_progress_starts_before_the_heavy_imports(fake_experiments, tmp_path, capsys):
    assert main(["reproduce", "--out", str(tmp_path / "o")]) == 0
    err = capsys.readouterr().err
    first = err.splitlines()[0]
    assert first.startswith("attn-lib reproduce: profile 'paper', model 'gpt2'") and str(tmp_path / "o") in first
    assert "loading libraries" in err and "4/4" in err


@pytest.mark.parametrize(
    "args",
    [
        ["reproduce", "--out", "{file}"],
        pytest.param(
            ["reproduce", "--out", "/proc/attn_lib_no_such_folder"],
            marks=pytest.mark.skipif(not __import__("os").path.isdir("/proc/self"), reason="needs /proc"),
        ),
        ["reproduce", "--profile", "huge"],
        ["capture", "--length", "0"],
        ["capture", "--text", "{missing}", "--length", "8", "--model", "smollm2", "-q"],
        ["capture", "--model", "not a model!", "-q"],
        ["capture", "--model", "nobody/no-such-model", "-q"],
        ["capture", "--device", "tpu:3", "-q"],
        ["info", "--model", "not a model!"],
        ["frobnicate"],
    ],
    ids=lambda a: " ".join(a),
)
def test_user_errors_never_show_a_traceback(args, tmp_path):
    import os

    f = tmp_path / "a-file"
    f.write_text("x")
    args = [a.format(file=f, missing=tmp_path / "missing.txt") for a in args]
    env = dict(os.environ, ATTN_LIB_CACHE_DIR=str(tmp_path / "cache"), HF_HUB_OFFLINE="1", ATTN_LIB_OFFLINE="1")
    r = subprocess.run(
        [sys.executable, "-m", "attn_lib", *args], capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path
    )
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr, r.stderr
    errors = [ln for ln in r.stderr.splitlines() if "error:" in ln]
    assert len(errors) == 1, r.stderr


def _text_file(tmp_path, kind):
    f = tmp_path / f"{kind}.txt"
    if kind == "sparse":
        with open(f, "wb") as out:
            out.truncate(64 << 30)  # 64 GiB, no disk: it was read whole (MemoryError under a memory cap)
    else:
        f.write_bytes({"binary": b"\x00\x01ELF\x00" * 100, "latin1": "Tolstoï, Guerre et paix".encode("latin-1")}[kind])
    return f


@pytest.mark.parametrize(
    "env, args, named",
    [
        ({"ATTN_LIB_OFFLINE": "perhaps"}, ["info"], "ATTN_LIB_OFFLINE"),
        ({"ATTN_LIB_ENGINE": "gpu"}, ["capture", "--model", "smollm2", "-q"], "ATTN_LIB_ENGINE"),
        ({"GOMP_SPINCOUNT": "abc"}, ["info"], "GOMP_SPINCOUNT"),
        ({"GOMP_SPINCOUNT": "abc"}, ["--tune-process", "info"], "GOMP_SPINCOUNT"),
        ({"ATTN_LIB_CACHE_DIR": "relative/cache"}, ["info"], "ATTN_LIB_CACHE_DIR"),
        ({"ATTN_LIB_CACHE_DIR": "$HOME/cache"}, ["reproduce", "--out", "o", "-q"], "ATTN_LIB_CACHE_DIR"),
        ({"ATTN_LIB_MODEL_DIR": "models"}, ["info"], "ATTN_LIB_MODEL_DIR"),
        ({"ATTN_LIB_PROFILE": "huge"}, ["info"], "ATTN_LIB_PROFILE"),
        ({}, ["capture", "--text", "{sparse}", "--model", "smollm2", "-q"], "over the 32.0 MiB cap"),
        ({}, ["capture", "--text", "{binary}", "--model", "smollm2", "-q"], "NUL bytes"),
        ({}, ["capture", "--text", "{latin1}", "--model", "smollm2", "-q"], "not UTF-8"),
    ],
    ids=lambda a: (
        " ".join(f"{k}={v}" for k, v in a.items())
        if isinstance(a, dict)
        else " ".join(a)
        if isinstance(a, list)
        else ""
    ),
)
def test_bad_environment_values_and_texts_are_one_line(env, args, named, tmp_path):
    """Environment variables outside their set and files that are not texts (or are too large): one error line that
    names the problem, exit 2, no traceback (issue 35)."""
    import os

    args = [a.format(**{k: _text_file(tmp_path, k) for k in ("sparse", "binary", "latin1")}) for a in args]
    base = dict(os.environ, ATTN_LIB_CACHE_DIR=str(tmp_path / "cache"), HF_HUB_OFFLINE="1", ATTN_LIB_OFFLINE="1")
    r = subprocess.run(
        [sys.executable, "-m", "attn_lib", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**base, **env},
        cwd=tmp_path,
    )
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    errors = [ln for ln in r.stderr.splitlines() if "error:" in ln]
    assert len(errors) == 1 and named in errors[0], r.stderr


def test_module_entry_point():
    r = subprocess.run([sys.executable, "-m", "attn_lib", "--version"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.startswith("attn_lib ")


_IMPORTS_AFTER = """
import sys
from attn_lib.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print("torch imported:", "torch" in sys.modules)
"""


@pytest.mark.parametrize(
    "args, torch_needed",
    [
        (["--version"], False),
        (["capture", "--length", "0"], False),
        (["reproduce", "--profile", "huge"], False),
        (["frobnicate"], False),
        (["--help"], False),
        (["capture", "--help"], True),  # the help names the registered normalisers
        (["compare-normalizers", "--help"], True),
    ],
    ids=lambda a: " ".join(a) if isinstance(a, list) else str(a),
)
def test_parsing_imports_no_torch(args, torch_needed):
    """``--version``, a usage error and the top-level help answer without importing torch (seconds on a cold start);
    only the subcommand helps that list the normalisers import it, and they still list them."""
    r = subprocess.run([sys.executable, "-c", _IMPORTS_AFTER, *args], capture_output=True, text=True, timeout=120)
    assert r.stdout.strip().endswith(f"torch imported: {torch_needed}"), (r.stdout, r.stderr)
    if torch_needed:
        assert "sparsemax" in r.stdout and "{names}" not in r.stdout and "{what}" not in r.stdout, r.stdout


# ------------------------------------------------------------------------------------------------------------------
# the done-when command, on the real offline stand-in (slow)
# ------------------------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_capture_1024_on_the_standin_says_so(tmp_path):
    import os

    env = dict(os.environ, ATTN_LIB_CACHE_DIR=str(tmp_path / "cache"), HF_HUB_OFFLINE="1", ATTN_LIB_OFFLINE="1")
    if "ATTN_LIB_MODEL_DIR" not in os.environ:  # reuse the converted stand-in of the normal cache
        env["ATTN_LIB_MODEL_DIR"] = str(O.standin_cache_path().parent)
    r = subprocess.run(
        [sys.executable, "-m", "attn_lib", "capture", "--length", "1024", "-q"],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
    )
    assert r.returncode == 0, r.stderr
    assert "SmolLM2-135M-Instruct (offline stand-in for gpt2)" in r.stdout and "OFFLINE STAND-IN" in r.stdout
    assert "1 window(s) of 1024 tokens" in r.stdout
    rows = table_rows(r.stdout)
    assert [int(x[0]) for x in rows] == list(range(30))
    assert all(0 < float(x[1]) <= 1 for x in rows)
    assert "offline stand-in" in r.stderr  # the fallback warning


# ------------------------------------------------------------------------------------------------------------------
# compare-normalizers (the chapter "Beyond softmax"), on the tiny model
# ------------------------------------------------------------------------------------------------------------------
@pytest.fixture
def tiny_for_experiments(monkeypatch, tiny_gpt2):
    """``load_model`` (as the experiments layer calls it, with ``quiet``) returns the tiny GPT-2."""
    monkeypatch.setattr(M, "load_model", lambda name="gpt2", device="auto", dtype=None, **kw: tiny_gpt2)


def test_compare_normalizers_writes_table_and_figures(capsys, tmp_cache, tiny_for_experiments, tmp_path):
    out = tmp_path / "beyond"
    assert main(["compare-normalizers", "--profile", "quick", "--text", "botchan", "--out", str(out), "-q"]) == 0
    stdout = capsys.readouterr().out
    assert "| top-4 |" in stdout and "| softpick |" in stdout
    for name in ("limits.md", "limits.csv", "limits.json", "compare.csv", "swap_losses.csv", "swap.md"):
        assert (out / name).stat().st_size > 0, name
    for name in ("limits", "swap"):
        assert (out / f"{name}.png").read_bytes()[:4] == b"\x89PNG"
        svg = (out / f"{name}.svg").read_text()
        assert "tiny-gpt2" in svg and "botchan" in svg and "cpu" in svg  # model, text and device on the figure
    data = json.loads((out / "limits.json").read_text())
    assert data["model"] == "tiny-gpt2" and data["text"] == "botchan" and data["device"] == "cpu"
    assert {r["normalizer"] for r in data["limits"]} >= {"softmax", "top-4", "top-16", "sparsemax", "sigmoid"}


@pytest.mark.parametrize(
    "args, match",
    [
        (["compare-normalizers", "--profile", "huge"], "invalid choice"),
        (["compare-normalizers", "--nope"], "unrecognized arguments"),
    ],
)
def test_compare_normalizers_argument_errors(capsys, args, match):
    with pytest.raises(SystemExit) as exc:
        main(args)
    assert exc.value.code == 2
    assert match in capsys.readouterr().err


def test_compare_normalizers_bad_out_is_one_line_and_exit_2(capsys, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert main(["compare-normalizers", "--out", str(blocker / "sub"), "-q"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "compare-normalizers: error:" in err[0] and "--out" in err[0]
