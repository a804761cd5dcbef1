"""Robustness, round two (issue 21): every case a careless or hostile user found, each a regression test.

Sections follow the issue: silent wrong results, hangs and runaway resources, CLI tracebacks, errors only after the
work, and the inputs that were accepted silently or raised the wrong exception type.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import small_profile

import attn_lib.cache as K

KEY = {"experiment": "robust", "params": {"N": 5}}


# ------------------------------------------------------------------------------------------------------------------
# result cache
# ------------------------------------------------------------------------------------------------------------------
def test_cache_keeps_dict_values_whose_keys_json_would_merge(tmp_path):
    value = {1: "a", "1": "b"}
    cache = K.ResultCache(tmp_path)
    assert cache.get_or_compute(KEY, lambda: value) == value
    again = K.ResultCache(tmp_path).get_or_compute(KEY, lambda: pytest.fail("recomputed a stored value"))
    assert again == value and set(again) == {1, "1"}


def test_cache_nested_int_keys_come_back_as_ints(tmp_path):
    value = {"rows": [{0: 1.5, 2: 2.5}]}
    cache = K.ResultCache(tmp_path)
    cache.get_or_compute(KEY, lambda: value)
    assert K.ResultCache(tmp_path).get(KEY) == value


@pytest.mark.parametrize("what", ["entry", "prefix-folder", "entry-link"])
def test_cache_repairs_a_file_where_an_entry_folder_belongs(tmp_path, what):
    cache = K.ResultCache(tmp_path)
    calls = []
    cache.get_or_compute(KEY, lambda: calls.append(1) or {"v": 1})
    path = cache.path_for(KEY)
    target = path if what != "prefix-folder" else path.parent
    import shutil

    shutil.rmtree(target)
    if what == "entry-link":
        (tmp_path / "elsewhere").write_text("x")
        target.symlink_to(tmp_path / "elsewhere")
    else:
        target.write_text("not a folder")
    assert cache.get_or_compute(KEY, lambda: calls.append(1) or {"v": 1}) == {"v": 1}
    assert cache.last_status in ("invalid", "miss") and len(calls) == 2
    # repaired: the next call is a hit, nothing recomputed
    assert cache.get_or_compute(KEY, lambda: calls.append(1) or {"v": 1}) == {"v": 1}
    assert cache.last_status == "hit" and len(calls) == 2 and path.is_dir()


def test_result_cache_root_must_be_a_path():
    with pytest.raises(ValueError, match="root must be a path"):
        K.ResultCache(root=123)


@pytest.mark.parametrize("var", ["ATTN_LIB_CACHE_DIR", "ATTN_LIB_MODEL_DIR"])
def test_tilde_of_an_unknown_user_in_the_cache_variables_is_a_value_error(monkeypatch, var):
    monkeypatch.setenv(var, "~nosuchuser_attn_lib/cache")
    with pytest.raises(ValueError, match=f"{var}.*home folder cannot be found"):
        K.model_dir() if var == "ATTN_LIB_MODEL_DIR" else K.cache_dir()


def test_tilde_of_an_unknown_user_in_an_output_folder_is_a_value_error():
    from attn_lib._validation import prepare_output_dir

    with pytest.raises(ValueError, match="out '~nosuchuser_attn_lib/x' starts with a '~'"):
        prepare_output_dir("out", "~nosuchuser_attn_lib/x")


# ------------------------------------------------------------------------------------------------------------------
# run_all: no call with unusual arguments stores a result that a normal call reads back
# ------------------------------------------------------------------------------------------------------------------
def _tiny_profile():

    return small_profile(
        "robust",
        lengths=(8, 16),
        L=16,
        N=2,
        n_values=(1, 2, 4),
        sep_n_values=(1, 2, 4),
        temperatures=(0.1, 1.0),
        eps_values=(0.1,),
        mc=(4, 4),
        stage=2,
        crit_fraction=0.25,
    )


TEXT = "Well, Prince, so Genoa and Lucca are now just family estates of the Buonapartes. " * 8


def _same_tables(a: dict, b: dict, names) -> None:
    for n in names:
        pd.testing.assert_frame_equal(a[n].reset_index(drop=True), b[n].reset_index(drop=True), check_dtype=False)


@pytest.fixture(scope="module")
def plain_results(tiny_gpt2):
    from attn_lib import experiments as E

    return E.run_all(tiny_gpt2, TEXT, _tiny_profile())


def test_run_all_duplicated_experiments_analyse_once_and_do_not_poison_the_cache(tiny_gpt2, tmp_path, plain_results):
    from attn_lib import experiments as E
    from attn_lib.cache import ResultCache

    cache = ResultCache(tmp_path)
    odd = E.run_all(tiny_gpt2, TEXT, _tiny_profile(), cache, experiments=["critical_n", "separability", "critical_n"])
    assert list(odd) == ["critical_n", "separability", "critical_n_summary"]
    _same_tables(odd, plain_results, ["critical_n", "separability", "critical_n_summary"])
    later = E.run_all(tiny_gpt2, TEXT, _tiny_profile(), cache)  # reads the two stored tables back
    _same_tables(later, plain_results, [*E.jobs.EXPERIMENTS, "critical_n_summary"])


def test_an_experiment_run_alone_is_timed_like_run_alls(tiny_gpt2, tmp_path, plain_results):
    """One experiment computed alone (chapter 4 calls ``gradient_sensitivity`` itself) is the cache entry run_all reads
    later (chapter 6 reads every table through run_all): it must carry the same ``attrs["timing"]``, or the runtime
    table, which needs a row per algorithm, loses that algorithm (the cause: ``Experiment.run`` stored no timing)."""
    from attn_lib import experiments as E
    from attn_lib.book import tables
    from attn_lib.cache import ResultCache

    cache = ResultCache(tmp_path)
    for name in E.jobs.EXPERIMENTS:  # each alone, through its own Experiment.run
        alone = E.jobs.profile_params(tiny_gpt2, _tiny_profile(), 0)[name].run(tiny_gpt2, TEXT, cache=cache)
        timing = alone.attrs["timing"]
        assert set(timing) >= set(plain_results[name].attrs["timing"]), name
        assert timing["experiments_in_pass"] == [name] and timing["analysis_s"] > 0, name
    later = E.run_all(tiny_gpt2, TEXT, _tiny_profile(), cache)
    _same_tables(later, plain_results, list(E.jobs.EXPERIMENTS))
    times = tables.runtime_table(later)
    assert len(times) == len(tables.PAPER_TABLE1) and (times["here: analysis (s)"] > 0).all()


@pytest.mark.parametrize(
    "bad, match",
    [([], "at least one"), (["critical_n", "nope"], "experiments must be one of"), (5, "experiments must be None")],
)
def test_run_all_experiments_argument(tiny_gpt2, bad, match):
    from attn_lib import experiments as E

    with pytest.raises(ValueError, match=match):
        E.run_all(tiny_gpt2, TEXT, _tiny_profile(), experiments=bad)


def test_run_all_threads_are_bounded_by_the_machine(tiny_gpt2):
    from attn_lib import experiments as E
    from attn_lib._validation import max_threads

    with pytest.raises(ValueError, match=rf"threads must be an integer in \[1, {max_threads()}\]"):
        E.run_all(tiny_gpt2, TEXT, _tiny_profile(), experiments=["separability"], threads=max_threads() + 1)


def test_block_parallel_workers_are_bounded_by_the_machine():
    from attn_lib import metrics as M
    from attn_lib._validation import max_threads

    with pytest.raises(ValueError, match="workers must be an integer in"), M.block_parallel(5000 + max_threads()):
        pass


try:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st
except ImportError:  # pragma: no cover
    given = None


if given is not None:
    from attn_lib.experiments.jobs import EXPERIMENTS as _EXPS

    @settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(
        names=st.lists(st.sampled_from(_EXPS), min_size=1, max_size=7),
        single=st.booleans(),
    )
    def test_property_no_experiments_list_stores_what_a_plain_call_would_not_compute(
        tiny_gpt2, plain_results, tmp_path_factory, names, single
    ):
        """Whatever list of experiments (repeats, any order, one name as a string): each table stored in the cache is
        exactly what a plain run_all computes, so a later plain call reads back the right results."""
        from attn_lib import experiments as E
        from attn_lib.cache import ResultCache

        cache = ResultCache(tmp_path_factory.mktemp("prop"))
        arg = names[0] if single else names
        odd = E.run_all(tiny_gpt2, TEXT, _tiny_profile(), cache, experiments=arg)
        wanted = list(dict.fromkeys([arg] if single else names))
        assert [k for k in odd if k != "critical_n_summary"] == wanted
        _same_tables(odd, plain_results, wanted)
        later = E.run_all(tiny_gpt2, TEXT, _tiny_profile(), cache)
        _same_tables(later, plain_results, [*_EXPS, "critical_n_summary"])


# ------------------------------------------------------------------------------------------------------------------
# capture from several threads
# ------------------------------------------------------------------------------------------------------------------
def test_capture_from_two_threads_loses_no_layer_and_restores_the_model(tiny_gpt2):
    """Thread A's capture ends while thread B's is between layers: B must still see every layer, and the model must
    end on its own attention implementation (before: A restored eager under B, B then restored the capture)."""
    import threading

    from attn_lib.capture import capture_attention

    model = tiny_gpt2.model
    before = model.config._attn_implementation
    ids = torch.arange(10)
    a_in, b_in, a_done = threading.Event(), threading.Event(), threading.Event()
    seen = {"A": [], "B": []}
    errors = []

    def cb_a(la):
        seen["A"].append(la.layer)
        if la.layer == 0:
            a_in.set()
            assert b_in.wait(60), "thread B never started its capture"

    def cb_b(la):
        seen["B"].append(la.layer)
        if la.layer == 0:
            b_in.set()
            assert a_done.wait(60), "thread A never finished"

    def run_a():
        try:
            capture_attention(tiny_gpt2, ids, cb_a)
        except BaseException as exc:
            errors.append(exc)
        finally:
            a_done.set()

    def run_b():
        try:
            assert a_in.wait(60)
            capture_attention(tiny_gpt2, ids, cb_b)
        except BaseException as exc:
            errors.append(exc)
        finally:
            b_in.set()

    threads = [threading.Thread(target=run_a), threading.Thread(target=run_b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    assert seen == {"A": [0, 1], "B": [0, 1]}
    assert model.config._attn_implementation == before


def test_many_concurrent_captures_give_every_layer_and_restore_the_model(tiny_gpt2):
    from concurrent.futures import ThreadPoolExecutor

    from attn_lib.capture import collect_attention

    before = tiny_gpt2.model.config._attn_implementation
    ids = torch.arange(12)
    ref = collect_attention(tiny_gpt2, ids, keep_qk=False)
    with ThreadPoolExecutor(4) as pool:
        runs = list(pool.map(lambda _: collect_attention(tiny_gpt2, ids, keep_qk=False), range(16)))
    for run in runs:
        assert [la.layer for la in run] == [0, 1]
        for a, b in zip(run, ref):
            assert torch.equal(a.weights, b.weights)
    assert tiny_gpt2.model.config._attn_implementation == before


# ------------------------------------------------------------------------------------------------------------------
# beyond: the encoder, the spectral norm, masks, settings, table checks
# ------------------------------------------------------------------------------------------------------------------
def _beyond_toy():
    from attn_lib import experiments as B

    return B.BeyondProfile(
        name="toy",
        lengths=(8, 16),
        rows_per_length=3,
        n_distance=2,
        crit_grid=(1, 2, 4, 8),
        sep_n=(1, 2, 4),
        temperatures=(0.1, 1.0),
        eps_values=(1e-3,),
        k_values=(2,),
        swap_length=16,
        swap_lengths=(8, 16),
        k_grid=(1, 4, 16),
        t_grid=(0.5, 1.0),
    )


@pytest.fixture
def fake_encoder(tiny_gpt2):
    import dataclasses

    return dataclasses.replace(tiny_gpt2, causal=False, model_id="tiny-encoder")


@pytest.mark.parametrize("fn", ["compare_normalizers", "live_swap", "swap_setting"])
def test_beyond_refuses_a_bidirectional_encoder_up_front(fake_encoder, fn, monkeypatch):
    from attn_lib import experiments as B
    from attn_lib.book import swap_view
    from attn_lib.experiments import passes

    monkeypatch.setattr(passes, "run_pass", lambda *a, **k: pytest.fail("ran a pass before refusing the encoder"))
    args = ("top-2",) if fn == "swap_setting" else ()
    with pytest.raises(ValueError, match="needs a causal language model.*tiny-encoder is a bidirectional encoder"):
        getattr(swap_view if fn == "swap_setting" else B, fn)(fake_encoder, TEXT, *args, profile=_beyond_toy())


def test_spectral_norm_refuses_weights_that_are_not_a_distribution():
    from attn_lib import experiments as B

    with pytest.raises(ValueError, match="weights must form a distribution.*sums to 10"):
        B.weights.softmax_type_spectral_norm([[5.0, 5.0]])
    # a distribution, and a fully masked (all-zero) row, are fine: [0.5, 0.5] has lambda = 1/2
    got = B.weights.softmax_type_spectral_norm([[0.5, 0.5], [0.0, 0.0]])
    assert got[0].item() == pytest.approx(0.5) and got[1].item() == 0.0
    with pytest.raises(ValueError, match="L >= 1"):
        B.weights.softmax_type_spectral_norm(torch.zeros(2, 0))


def test_row_metrics_mask_must_be_boolean_or_zero_one():
    from attn_lib import experiments as B

    w = torch.full((1, 2, 3), 1 / 3, dtype=torch.float64)
    V = torch.randn(1, 3, 2, dtype=torch.float64)
    with pytest.raises(ValueError, match="mask must be boolean"):
        B.weights.row_metrics(w, V, 0.5 * torch.ones(2, 3), [1])
    with pytest.raises(ValueError, match="mask must be"):
        B.weights.row_metrics(w, V, torch.ones(5, 7, dtype=torch.bool), [1])
    a = B.weights.row_metrics(w, V, torch.ones(2, 3), [1])
    b = B.weights.row_metrics(w, V, torch.ones(2, 3, dtype=torch.bool), [1])
    assert all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize(
    "setting, match",
    [
        ("top- 16", "setting must be"),
        ("top-+16", "setting must be"),
        ("top-16 ", "setting must be"),
        ("softmax T= 0.5", "setting must be"),
        ("softmax T=nan", "setting must be"),
        ("softmax T=inf", "setting must be"),
        ("softmax T=1_0", "setting must be"),
        ("top-100000", r"k must be an integer in \[1, 16\]"),
        ("top-17", r"k must be an integer in \[1, 16\]"),
        ("softmax T=-0.5", "T must be a finite number > 0"),
    ],
)
def test_swap_setting_labels_are_parsed_strictly(tiny_gpt2, setting, match):
    from attn_lib.book import swap_view

    with pytest.raises(ValueError, match=match):
        swap_view.swap_setting(tiny_gpt2, TEXT, setting, profile=_beyond_toy(), start=0)


def test_swap_setting_accepts_well_formed_off_grid_labels(tiny_gpt2):
    from attn_lib.book import swap_view

    kw = dict(profile=_beyond_toy(), start=0)
    assert swap_view.swap_setting(tiny_gpt2, TEXT, "top-16", **kw).iloc[0]["k"] == 16
    assert swap_view.swap_setting(tiny_gpt2, TEXT, "softmax T=.5", **kw).iloc[0]["T"] == 0.5
    assert swap_view.swap_setting(tiny_gpt2, TEXT, "softmax T=2e-1", **kw).iloc[0]["T"] == 0.2


@pytest.mark.parametrize("alpha", [5, 1, 0, -0.1, float("nan"), True])
def test_critical_n_from_heads_alpha_is_a_level_in_0_1(alpha):
    from attn_lib import experiments as B

    df = pd.DataFrame(
        {"metric": ["d_tilde", "e1"], "normalizer": "softmax", "L": 8, "N": 1, "layer": 0, "head": 0, "value": 1.0}
    )
    with pytest.raises(ValueError, match="alpha"):
        B.critical_n_from_heads(df, alpha=alpha)


def test_limits_summary_without_g_rows_is_a_value_error():
    from attn_lib import experiments as B

    rows = []
    for N in (1, 2):
        for h in range(3):
            for m in ("d_tilde", "e1"):
                rows.append(dict(metric=m, normalizer="softmax", L=8, N=N, layer=0, head=h, value=float(h + N)))
    for L in (4, 8):
        rows.append(dict(metric="max_alpha", normalizer="softmax", L=L, N=None, layer=0, head=0, value=1 / L))
    rows.append(dict(metric="sep_fraction", normalizer="softmax", L=8, N=2, layer=0, head=0, value=1.0))
    df = pd.DataFrame(rows).assign(T=np.nan, eps=np.nan)
    with pytest.raises(ValueError, match=r"no rows for \['g'\]"):
        B.limits_summary(df)
    with pytest.raises(ValueError, match="T and eps"):
        B.limits_summary(df.drop(columns=["T", "eps"]))


# ------------------------------------------------------------------------------------------------------------------
# CLI: compare-normalizers says up front what the text lacks, and takes --start
# ------------------------------------------------------------------------------------------------------------------
@pytest.fixture
def cli_tiny(monkeypatch, tiny_gpt2):
    import attn_lib.models as models

    monkeypatch.setattr(models, "load_model", lambda name="gpt2", device="auto", dtype=None, **kw: tiny_gpt2)
    return tiny_gpt2


def _one_error_line(capsys, command):
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"attn-lib {command}: error:"), err
    assert "Traceback" not in err[0]
    return err[0]


def test_cli_compare_normalizers_short_text_fails_before_any_work(capsys, tmp_cache, cli_tiny, tmp_path, monkeypatch):
    from attn_lib.cli import main
    from attn_lib.experiments import jobs

    monkeypatch.setattr(jobs, "compare_normalizers", lambda *a, **k: pytest.fail("compared before checking the text"))
    short = tmp_path / "short.txt"
    short.write_text("a few words " * 30)  # 360 byte tokens
    assert (
        main(["compare-normalizers", "--profile", "quick", "--text", str(short), "--out", str(tmp_path / "o"), "-q"])
        == 2
    )
    line = _one_error_line(capsys, "compare-normalizers")
    assert "has 360 tokens" in line and "--start 32768" in line and "use --start between 128" in line


def test_cli_compare_normalizers_start_chooses_the_held_out_window(capsys, tmp_cache, cli_tiny, tmp_path):
    from attn_lib.cli import main

    short = tmp_path / "short.txt"
    short.write_text(TEXT * 2)
    out = tmp_path / "o"
    assert (
        main(
            [
                "compare-normalizers",
                "--profile",
                "quick",
                "--text",
                str(short),
                "--out",
                str(out),
                "--start",
                "128",
                "-q",
            ]
        )
        == 0
    )
    assert (out / "swap_losses.csv").stat().st_size > 0


def test_cli_compare_normalizers_refuses_the_encoder_in_one_line(capsys, tmp_cache, monkeypatch, tiny_gpt2, tmp_path):
    import dataclasses

    import attn_lib.models as models
    from attn_lib.cli import main

    enc = dataclasses.replace(tiny_gpt2, causal=False, model_id="sentence-transformers/all-MiniLM-L6-v2")
    monkeypatch.setattr(models, "load_model", lambda *a, **k: enc)
    args = ["compare-normalizers", "--profile", "quick", "--model", "sentence-transformers/all-MiniLM-L6-v2"]
    assert main([*args, "--text", "botchan", "--out", str(tmp_path / "o"), "-q"]) == 2
    assert "needs a causal language model" in _one_error_line(capsys, "compare-normalizers")


# ------------------------------------------------------------------------------------------------------------------
# numba: kernels compiled in this run against kernels loaded from numba's cache
# ------------------------------------------------------------------------------------------------------------------
#: Documented in docs/ARCHITECTURE.md (§Layers, the engines): a freshly compiled kernel and the same kernel loaded from
#: numba's on-disk cache may differ in the last bits of a reduction (LLVM vectorises the fastmath sums differently),
#: seen only in E1's Jensen-gap bound ``e1_gap``, below 5e-11 relative; every other column is identical.
KERNEL_CACHE_RTOL = 1e-9

_PROBE = """
import sys, numpy as np, torch
from attn_lib import metrics as M
g = torch.Generator().manual_seed(0)
H, L, d = 4, 96, 16
logits = torch.randn(H, L, L, generator=g, dtype=torch.float64) * 3
vals = torch.randn(H, L, d, generator=g, dtype=torch.float64)
mask = torch.ones(L, L, dtype=torch.bool).tril()
ld = M.LayerData.from_logits(logits.masked_fill(~mask, -float("inf")), vals)
out = {}
for N in (1, 5, 20):
    r = M.distance_metrics(ld, N=N, engine="numba")
    for f in ("d_tilde", "e1", "e1_gap", "e2", "d_max"):
        v = getattr(r, f, None)
        if v is not None:
            out[f"{f}_{N}"] = np.asarray(v, dtype=np.float64)
np.savez(sys.argv[1], **out)
"""


def test_kernels_compiled_now_and_loaded_from_numbas_cache_agree_to_the_documented_tolerance(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba"), PYTHONPATH=str(Path(__file__).parents[1]))
    probe = tmp_path / "probe.py"
    probe.write_text(_PROBE)
    for name in ("compiled", "cached"):  # the first run compiles and writes the cache, the second loads it
        subprocess.run([sys.executable, str(probe), str(tmp_path / f"{name}.npz")], env=env, check=True)
    assert any((tmp_path / "numba").rglob("*.nbi")), "numba wrote no cache: the second run did not load one"
    a, b = np.load(tmp_path / "compiled.npz"), np.load(tmp_path / "cached.npz")
    assert sorted(a.files) == sorted(b.files)
    for f in a.files:
        x, y = a[f], b[f]
        assert np.array_equal(np.isfinite(x), np.isfinite(y)), f
        ok = np.isfinite(x)
        if not f.startswith("e1_gap"):
            assert np.array_equal(x[ok], y[ok]), f  # only the gap bound's reduction may differ
        np.testing.assert_allclose(y[ok], x[ok], rtol=KERNEL_CACHE_RTOL, atol=0, err_msg=f)


# ------------------------------------------------------------------------------------------------------------------
# corpus: the Gutenberg markers on runs of blank lines
# ------------------------------------------------------------------------------------------------------------------
def test_gutenberg_line_patterns_never_run_over_a_newline_at_a_line_start():
    """The cause of the quadratic search: at each line start ``^\\s*`` ran over every following blank line. A match
    attempt at one line start must stay on that line."""
    from attn_lib import corpus as C

    for pat, line in [
        (C._START, "*** START OF THE PROJECT GUTENBERG EBOOK X ***"),
        (C._END, "*** END OF THE PROJECT GUTENBERG EBOOK X ***"),
        (C._END_OLD, "End of the Project Gutenberg EBook of X"),
    ]:
        assert pat.match(line) and pat.match("  " + line)
        assert pat.match("\n\n" + line) is None  # old: matched from position 0, across the blank lines
        m = pat.search("text\n\n\n" + line + "\nmore")
        assert m and m.group(0).strip() == line


def test_a_text_of_300000_blank_lines_is_an_empty_text(tmp_path):
    from attn_lib import corpus as C

    blank = tmp_path / "b.txt"
    blank.write_text("\n" * 300_000)
    with pytest.raises(ValueError, match="the text is empty"):
        C.load_text(str(blank))
    marked = "\n" * 300_000 + "*** START OF THE PROJECT GUTENBERG EBOOK X ***\nbody\n" + "\n" * 300_000
    assert C.strip_gutenberg(marked) == "body\n"
    assert C.strip_gutenberg("\n" * 300_000 + "plain") == "plain\n"


# ------------------------------------------------------------------------------------------------------------------
# resource parameters capped by the input or the machine
# ------------------------------------------------------------------------------------------------------------------
def _layer12():
    from attn_lib import metrics as M

    g = torch.Generator().manual_seed(0)
    logits = torch.randn(2, 12, 12, generator=g, dtype=torch.float64)
    mask = torch.ones(12, 12, dtype=torch.bool).tril()
    return M.LayerData.from_logits(logits.masked_fill(~mask, -float("inf")), torch.randn(2, 12, 4, generator=g))


@pytest.mark.parametrize("fn", ["topn_scan", "expected_distance_mc_scan"])
def test_scans_cap_n_max_at_l_minus_one(fn):
    from attn_lib import metrics as M

    ld = _layer12()
    with pytest.raises(ValueError, match=r"n_max must be an integer in \[1, 11\] \(got 100000000\)"):
        getattr(M, fn)(ld, n_max=10**8)
    with pytest.raises(ValueError, match=r"n_min must be an integer in \[1, 11\]"):
        getattr(M, fn)(ld, n_min=12, n_max=12)
    assert getattr(M, fn)(ld, n_max=11).valid.shape[-1] == 11


def test_entmax_n_iter_is_capped():
    from attn_lib import normalizers as nz

    with pytest.raises(ValueError, match=r"n_iter must be an integer in \[1, 1000\] \(got 1000000000\)"):
        nz.entmax_alpha(torch.randn(4), n_iter=10**9)
    w = nz.entmax_alpha(torch.randn(3, 5, dtype=torch.float64), n_iter=1000)
    torch.testing.assert_close(w.sum(-1), torch.ones(3, dtype=torch.float64))


def test_multihead_coverage_simulation_size_is_capped_and_chunking_keeps_the_value():
    from attn_lib import theory as th

    with pytest.raises(ValueError, match="n_trials must be an integer in"):
        th.multihead_coverage_simulation(0.5, 10**5, n_trials=10**7)
    # the chunked draw is the same stream as one (n, H) draw
    rng = np.random.default_rng(3)
    n, H = 300_000, 20  # 6M draws: more than one chunk
    want = float((rng.random((n, H)) < 0.05).any(axis=1).mean())
    assert th.multihead_coverage_simulation(0.05, H, n_trials=n, seed=3) == want


# ------------------------------------------------------------------------------------------------------------------
# models: revision, broken folders, the model folder
# ------------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["smollm2", "local"])
def test_load_model_refuses_a_revision_it_cannot_apply(name, tmp_path, monkeypatch):
    from attn_lib import models

    monkeypatch.setattr(models.loading, "load_standin", lambda *a, **k: pytest.fail("loaded the stand-in anyway"))
    if name == "local":
        (tmp_path / "config.json").write_text("{}")
        name = str(tmp_path)
    with pytest.raises(ValueError, match="revision='no-such' cannot apply"):
        models.load_model(name, device="cpu", revision="no-such")
    with pytest.raises(ValueError, match="revision must be None or a non-empty"):
        models.load_model("gpt2", device="cpu", revision=5)


def test_the_packaged_encoder_is_not_passed_off_as_another_revision(monkeypatch, offline):
    from attn_lib import models

    monkeypatch.setattr(models.loading, "load_pretrained", lambda *a, **k: (_ for _ in ()).throw(OSError("not cached")))
    monkeypatch.setattr(models.loading, "load_encoder_packaged", lambda *a, **k: pytest.fail("used the packaged copy"))
    with pytest.raises(models.ModelUnavailableError, match="one fixed revision"):
        models.load_model(models.offline.ENCODER_NAME, device="cpu", revision="abc123")


def test_a_model_folder_with_an_invalid_config_is_a_value_error(tmp_path):
    from attn_lib import models

    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ValueError, match="is not a loadable model"):
        models.load_model(str(tmp_path), device="cpu")


def test_a_model_name_with_an_unknown_users_home_is_a_value_error():
    from attn_lib import models

    with pytest.raises(ValueError, match="is not a model name"):
        models.load_model("~nosuchuser_attn_lib/model", device="cpu")


def test_model_dir_that_is_a_file_names_the_variable(tmp_path, monkeypatch):
    from attn_lib import models

    try:
        models.offline.standin_gguf_path()
    except models.ModelUnavailableError:
        pytest.skip("the offline stand-in's package is not installed")
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv("ATTN_LIB_MODEL_DIR", str(blocker))
    with pytest.raises(ValueError, match="ATTN_LIB_MODEL_DIR .* exists and is not a folder"):
        models.load_model("smollm2", device="cpu")
    monkeypatch.setenv("ATTN_LIB_MODEL_DIR", str(blocker / "sub"))
    with pytest.raises(ValueError, match="ATTN_LIB_MODEL_DIR .* cannot be used"):
        models.load_model("smollm2", device="cpu")


# ------------------------------------------------------------------------------------------------------------------
# CLI: one line, exit 2, never a traceback
# ------------------------------------------------------------------------------------------------------------------
def test_cli_tilde_of_an_unknown_user_in_the_cache_variable_is_one_line(tmp_path):
    import os
    import subprocess
    import sys

    env = dict(os.environ, ATTN_LIB_CACHE_DIR="~nosuchuser_attn_lib/cache", HF_HUB_OFFLINE="1", ATTN_LIB_OFFLINE="1")
    for args in (["info"], ["reproduce", "--help"]):
        r = subprocess.run([sys.executable, "-m", "attn_lib", *args], env=env, capture_output=True, text=True)
        assert "Traceback" not in r.stderr, r.stderr
        if args == ["info"]:
            assert r.returncode == 2
            lines = r.stderr.strip().splitlines()
            assert len(lines) == 1 and "ATTN_LIB_CACHE_DIR" in lines[0] and "home folder cannot be found" in lines[0]
        else:
            assert r.returncode == 0 and "<ATTN_LIB_CACHE_DIR>/results" in r.stdout


def test_cli_tilde_of_an_unknown_user_in_out_and_text_is_one_line(capsys, tmp_cache, cli_tiny):
    from attn_lib.cli import main

    assert main(["reproduce", "--out", "~nosuchuser_attn_lib/out", "-q"]) == 2
    assert "--out '~nosuchuser_attn_lib/out' starts with a '~'" in _one_error_line(capsys, "reproduce")
    assert main(["capture", "--length", "2", "--text", "~nosuchuser_attn_lib/t.txt", "-q"]) == 2
    assert "source '~nosuchuser_attn_lib/t.txt' starts with a '~'" in _one_error_line(capsys, "capture")


def test_cli_threads_are_bounded_by_the_machine(capsys):
    from attn_lib._validation import max_threads
    from attn_lib.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["reproduce", "--threads", str(max_threads() + 1)])
    assert exc.value.code == 2
    assert f"--threads must be an integer in [1, {max_threads()}]" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------------------------------
# errors before the work, not after it
# ------------------------------------------------------------------------------------------------------------------
@pytest.fixture
def no_run_all(monkeypatch):
    from attn_lib.experiments import jobs

    monkeypatch.setattr(jobs, "run_all", lambda *a, **k: pytest.fail("ran the experiments before the check"))


@pytest.mark.parametrize("formats, match", [(("exe",), "formats must be one of"), ((), "at least one"), (5, "formats")])
def test_run_reproduce_checks_formats_before_any_work(tiny_gpt2, tmp_path, no_run_all, formats, match):
    from attn_lib import experiments as E

    with pytest.raises(ValueError, match=match):
        E.run_reproduce(profile=_tiny_profile(), out=tmp_path, handle=tiny_gpt2, text_obj=TEXT, formats=formats)


def test_a_single_format_name_is_one_format_not_its_letters():
    from attn_lib.experiments import jobs

    assert jobs.check_formats("png") == ("png",)
    assert jobs.check_formats(["svg", "png", "svg"]) == ("svg", "png")


def test_run_reproduce_checks_the_models_to_compare_before_any_work(tiny_gpt2, tmp_path, no_run_all, offline):
    from attn_lib import experiments as E
    from attn_lib.models import ModelUnavailableError

    kw = dict(profile=_tiny_profile(), out=tmp_path, handle=tiny_gpt2, text_obj=TEXT)
    with pytest.raises(ModelUnavailableError, match="compare: model 'nobody/x' is not in the local"):
        E.run_reproduce(compare=["nobody/x"], **kw)
    with pytest.raises(ValueError, match="compare: name="):
        E.run_reproduce(compare=["not a model!"], **kw)
    assert not any(tmp_path.iterdir())


def test_run_all_says_in_the_profiles_terms_that_the_text_is_too_short(tiny_gpt2, monkeypatch):
    from attn_lib import experiments as E
    from attn_lib.experiments import passes

    monkeypatch.setattr(passes, "run_pass", lambda *a, **k: pytest.fail("ran a pass on a text that is too short"))
    with pytest.raises(ValueError, match="text 'custom' has 10 tokens; profile 'robust' needs 16 .*longest window"):
        E.run_all(tiny_gpt2, "0123456789", _tiny_profile())


# ------------------------------------------------------------------------------------------------------------------
# jacobian: the sensitivity's direction and normaliser, numpy-valued F
# ------------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("fn", ["sensitivity", "sensitivity_grid"])
@pytest.mark.parametrize("scale, match", [(0.0, "unit 2-norm.*norm 0"), (100.0, "unit 2-norm.*norm 100")])
def test_sensitivity_direction_must_be_a_unit_vector(fn, scale, match):
    from attn_lib import jacobian as jb

    x = torch.randn(3, 6, dtype=torch.float64)
    v = jb.random_directions(x.shape, seed=1) * scale
    args = (1.0, 1e-3) if fn == "sensitivity" else ([1.0], [1e-3])
    with pytest.raises(ValueError, match=match):
        getattr(jb, fn)(x, *args, direction=v)
    ok = getattr(jb, fn)(x, *args, direction=jb.random_directions(x.shape, seed=1))
    assert torch.isfinite(torch.as_tensor(ok)).all()


@pytest.mark.parametrize("fn", ["sensitivity", "sensitivity_grid"])
@pytest.mark.parametrize(
    "bad, match",
    [
        (lambda x, temperature=1.0, dim=-1, mask=None: x.sum(-1), "shape of the logits"),
        (lambda x, temperature=1.0, dim=-1, mask=None: x * float("nan"), "non-finite weights"),
    ],
)
def test_sensitivity_normaliser_must_return_finite_weights_per_position(fn, bad, match):
    from attn_lib import jacobian as jb

    x = torch.randn(3, 6, dtype=torch.float64)
    args = (1.0, 1e-3) if fn == "sensitivity" else ([1.0], [1e-3])
    with pytest.raises(ValueError, match=match):
        getattr(jb, fn)(x, *args, normalizer=bad)


def test_jacobian_of_a_numpy_valued_general_normaliser():
    from attn_lib import jacobian as jb
    from attn_lib import normalizers as nz

    f = nz.make_general(lambda z: np.exp(np.asarray(z)))  # general accepts it: F(z) = exp(z) is softmax
    x = torch.randn(2, 5, dtype=torch.float64)
    torch.testing.assert_close(f(x, 1.0), nz.softmax(x, 1.0))
    torch.testing.assert_close(jb.jacobian(f, x, 0.7), jb.softmax_jacobian(x, 0.7), atol=1e-9, rtol=1e-8)
    g = nz.make_general(lambda z: torch.exp(z.detach()))  # detached: autograd would say the derivative is 0
    torch.testing.assert_close(jb.jacobian(g, x), jb.softmax_jacobian(x), atol=1e-9, rtol=1e-8)


@pytest.mark.parametrize("scale", [0.0, 100.0])
def test_sensitivity_rows_direction_must_be_a_unit_vector(scale):
    from attn_lib import jacobian as jb
    from attn_lib import metrics as M

    L = 6
    x = torch.randn(2, L, L, dtype=torch.float64).masked_fill(~torch.ones(L, L, dtype=torch.bool).tril(), -np.inf)
    vis = torch.isfinite(x)
    v = jb.random_directions(x.shape, vis, seed=0)
    with pytest.raises(ValueError, match="unit 2-norm"):
        M.sensitivity_rows(x, [1.0], [1e-3], direction=v * scale)
    g, _ = M.sensitivity_rows(x, [1.0], [1e-3], direction=v)
    ref, _ = M.sensitivity_rows(x, [1.0], [1e-3], seed=0)
    torch.testing.assert_close(g, ref)


# ------------------------------------------------------------------------------------------------------------------
# critical_n_summary
# ------------------------------------------------------------------------------------------------------------------
def _trace():
    return pd.DataFrame({"L": 8, "form": "e1", "N": [1, 2, 3], "p_value": [0.001, 0.2, 0.5], "alpha": 0.01})


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"alpha": 5}, "alpha must be in"),
        ({"alpha": 0}, "alpha must be in"),
        ({"alpha": True}, "alpha"),
        ({"crit_fraction": -3}, "crit_fraction must be in"),
        ({"crit_fraction": 0}, "crit_fraction must be in"),
    ],
)
def test_critical_n_summary_checks_its_levels(kw, match):
    from attn_lib import experiments as E

    with pytest.raises(ValueError, match=match):
        E.critical_n_summary(_trace(), **kw)


@pytest.mark.parametrize("bad", [pd.DataFrame({"x": [1]}), _trace().drop(columns=["alpha"]), [1, 2]])
def test_critical_n_summary_of_a_wrong_table_is_a_value_error(bad):
    from attn_lib import experiments as E

    with pytest.raises(ValueError, match="trace must be critical_n's table"):
        E.critical_n_summary(bad)


def test_critical_n_summary_still_summarises():
    from attn_lib import experiments as E

    s = E.critical_n_summary(_trace())
    assert s["n_star"].tolist() == [2] and not s["censored"].any()


# ------------------------------------------------------------------------------------------------------------------
# capture, tokenize and the CLI's --normalizer
# ------------------------------------------------------------------------------------------------------------------
def test_capture_refuses_an_all_zero_attention_mask(tiny_gpt2):
    from attn_lib.capture import capture_attention

    with pytest.raises(ValueError, match="at least one token"):
        capture_attention(tiny_gpt2, torch.arange(6).view(2, 3), attention_mask=torch.tensor([[1, 1, 0], [0, 0, 0]]))


def test_capture_refuses_a_normaliser_that_returns_nan(tiny_gpt2):
    from attn_lib.capture import capture_attention

    before = tiny_gpt2.model.config._attn_implementation

    def nan_norm(logits, temperature=1.0, dim=-1, mask=None):
        return torch.full_like(logits, float("nan"))

    with pytest.raises(ValueError, match="'nan_norm' returned non-finite weights .* in layer 0"):
        capture_attention(tiny_gpt2, torch.arange(5), normalizer=nan_norm)
    assert tiny_gpt2.model.config._attn_implementation == before


@pytest.mark.parametrize("bad", [-5, 0, 2.5, "3", True])
def test_tokenize_max_tokens_is_a_positive_integer(tiny_gpt2, bad):
    from attn_lib.corpus import tokenize

    with pytest.raises(ValueError, match="max_tokens must be an integer"):
        tokenize(tiny_gpt2.tokenizer, "some words here", max_tokens=bad)
    assert len(tokenize(tiny_gpt2.tokenizer, "some words here", max_tokens=4)) == 4


@pytest.mark.parametrize(
    "value, match",
    [
        ("bogus", "--normalizer 'bogus' is not a normaliser; use one of"),
        ("topk", "--normalizer topk needs k: write --normalizer top-<k>"),
        ("top-0", "k must be an integer >= 1"),
    ],
)
def test_cli_normalizer_is_checked_in_the_flags_terms_before_loading(capsys, monkeypatch, value, match):
    import attn_lib.models as models
    from attn_lib.cli import main

    monkeypatch.setattr(models, "load_model", lambda *a, **k: pytest.fail("loaded a model before checking"))
    assert main(["capture", "--normalizer", value, "-q"]) == 2
    line = _one_error_line(capsys, "capture")
    assert match in line and "get(" not in line


def test_cli_capture_with_top_k(capsys, tmp_cache, cli_tiny):
    from attn_lib.cli import main

    assert main(["capture", "--text", "botchan", "--length", "16", "--normalizer", "top-2", "--json", "-q"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["params"]["normalizer"] == "top-2" and len(data["rows"]) == 2


def test_spectral_norm_of_a_list_is_computed_in_float64():
    """Found by the property tests: torch.as_tensor rounded a list of Python floats to float32 first."""
    from attn_lib import experiments as B

    got = B.weights.softmax_type_spectral_norm([[1 / 3, 1 / 3, 1 / 3]], 0.5)
    assert got.dtype == torch.float64 and abs(got.item() - 2 / 3) < 1e-12
    for bad in ("abc", [[1 + 1j, 0]], torch.tensor([[True, False]])):
        with pytest.raises(ValueError, match="weights"):
            B.weights.softmax_type_spectral_norm(bad)


# ------------------------------------------------------------------------------------------------------------------
# beyond the list: grids given as one value or as nothing, and the other resource parameters
# ------------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("bad", [None, 2.5, float("nan"), True, torch.tensor(3.5), "8", []])
def test_grid_parameters_are_value_errors_naming_them(tiny_gpt2, bad):
    from attn_lib import experiments as B
    from attn_lib import experiments as E

    with pytest.raises(ValueError, match="lengths"):
        E.distance_vs_length(tiny_gpt2, TEXT, N=2, lengths=bad)
    with pytest.raises(ValueError, match="n_values"):
        E.distance_vs_n(tiny_gpt2, TEXT, L=16, n_values=bad)
    with pytest.raises(ValueError, match="lengths"):
        B.weights.row_sample(bad, 2)
    if not (isinstance(bad, list) and not bad):  # no top-k at all is allowed
        with pytest.raises(ValueError, match="k_values"):
            B.normalizer_settings(bad)


def test_grid_parameters_accept_one_integer(tiny_gpt2):
    from attn_lib import experiments as B
    from attn_lib import normalizers as nz
    from attn_lib._validation import check_int_list

    assert check_int_list("x", np.int64(4)) == [4] and check_int_list("x", torch.tensor(5)) == [5]
    assert check_int_list("x", (3, 1, 3)) == [1, 3]
    assert list(B.weights.row_sample(8, 2)) == [8]
    assert list(B.normalizer_settings(3)) == ["softmax", "top-3", *nz.available(compared=True)[1:]]


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: __import__("attn_lib.theory").theory.sqrt5_example(1.0, 0.1, 1.0, 10**12), "L"),
        (lambda: __import__("attn_lib.theory").theory.lemma1_constants(np.exp, 1.0, grid=10**12), "grid"),
        (
            lambda: __import__("attn_lib.theory").theory.expected_distance_mc(
                np.ones(6) / 6, np.eye(6), 2, n_samples=10**12
            ),
            "n_samples",
        ),
        (
            lambda: __import__("attn_lib.theory").theory.expected_distance_exact(
                np.ones(6) / 6, np.eye(6), 2, max_subsets=10**12
            ),
            "max_subsets",
        ),
    ],
)
def test_theory_resource_parameters_are_capped(call, name):
    with pytest.raises(ValueError, match=f"{name} must be an integer in"):
        call()


def test_metrics_resource_parameters_are_capped():
    from attn_lib import metrics as M

    ld = _layer12()
    with pytest.raises(ValueError, match="n_samples must be an integer in"):
        M.expected_distance_mc(ld, N=1, n_samples=10**12)
    with pytest.raises(ValueError, match="n_samples must be an integer in"):
        M.expected_distance_mc_scan(ld, n_max=3, n_samples=10**12)
    with pytest.raises(ValueError, match="permutations must be an integer in"):
        M.coverage_metrics(ld, N=2, permutations=10**12)


def test_experiment_resource_parameters_are_capped_before_the_pass(tiny_gpt2, monkeypatch):
    from attn_lib import experiments as E
    from attn_lib.experiments import passes

    monkeypatch.setattr(passes, "run_pass", lambda *a, **k: pytest.fail("ran a pass"))
    with pytest.raises(ValueError, match="mc_samples must be an integer in"):
        E.critical_n(tiny_gpt2, TEXT, lengths=[8], forms=["mc"], mc_samples=10**12)
    with pytest.raises(ValueError, match="mc_samples must be an integer in"):
        E.distance_vs_length(tiny_gpt2, TEXT, N=2, lengths=[8, 16], mc_samples=10**12)
    with pytest.raises(ValueError, match="permutations must be an integer in"):
        E.multihead_coverage(tiny_gpt2, TEXT, L=16, N=2, permutations=10**12)


def test_capture_flags_are_booleans(tiny_gpt2):
    from attn_lib.capture import capture_attention

    for kw in ({"keep_qk": "no"}, {"keep_qk": 0}, {"stop_early": "x", "layers": [0]}):
        with pytest.raises(ValueError, match=f"{next(iter(kw))} must be True or False"):
            capture_attention(tiny_gpt2, torch.arange(4), lambda la: None, **kw)


@pytest.mark.parametrize("bias", [True, "1", float("nan")])
def test_sigmoid_bias_is_a_finite_number_not_a_bool(bias):
    from attn_lib import normalizers as nz

    with pytest.raises(ValueError, match="bias must be a finite real number"):
        nz.sigmoid(torch.randn(4), bias=bias)


@pytest.mark.parametrize(
    "shape, match", [(torch.tensor(3), "shape must be a sequence"), ((10**6, 10**6), "random draws")]
)
def test_random_directions_shape_is_checked(shape, match):
    from attn_lib import jacobian as jb

    with pytest.raises(ValueError, match=match):
        jb.random_directions(shape)


def test_cli_capture_reads_the_text_before_loading_the_model(capsys, monkeypatch, tmp_path):
    import attn_lib.models as models
    from attn_lib.cli import main

    monkeypatch.setattr(models, "load_model", lambda *a, **k: pytest.fail("loaded the model before the text"))
    blank = tmp_path / "b.txt"
    blank.write_text("\n" * 1000)
    assert main(["capture", "--length", "2", "--text", str(blank), "-q"]) == 2
    assert "the text is empty" in _one_error_line(capsys, "capture")


def test_load_inputs_reads_the_text_before_loading_the_model(monkeypatch):
    import attn_lib.models as models
    from attn_lib import experiments as E

    monkeypatch.setattr(models, "load_model", lambda *a, **k: pytest.fail("loaded the model before the text"))
    with pytest.raises(ValueError, match="neither a known text"):
        E.load_inputs("gpt2", "/no/such/text.txt")


if given is not None:

    @settings(max_examples=5, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(
        names=st.lists(st.sampled_from(_EXPS), min_size=1, max_size=4),
        start=st.sampled_from([0, 3]),
        seed=st.sampled_from([0, 1]),
        threads=st.sampled_from([None, 1]),
    )
    def test_property_a_cached_table_is_what_the_same_plain_call_computes(
        tiny_gpt2, tmp_path_factory, names, start, seed, threads
    ):
        """The cache as a whole: after a run with any experiments list, start, seed and thread count, a plain call
        with the same start and seed reads back exactly what it would compute without a cache."""
        from attn_lib import experiments as E
        from attn_lib.cache import ResultCache

        cache = ResultCache(tmp_path_factory.mktemp("prop2"))
        E.run_all(tiny_gpt2, TEXT, _tiny_profile(), cache, experiments=names, start=start, seed=seed, threads=threads)
        cached = E.run_all(tiny_gpt2, TEXT, _tiny_profile(), cache, experiments=names, start=start, seed=seed)
        fresh = E.run_all(tiny_gpt2, TEXT, _tiny_profile(), None, experiments=names, start=start, seed=seed)
        _same_tables(cached, fresh, [n for n in fresh])


@pytest.mark.parametrize("kw, match", [({"handle": "gpt2"}, "handle must be"), ({"text": 5}, "text must be")])
def test_make_key_checks_handle_and_text(kw, match):
    with pytest.raises(ValueError, match=match):
        K.make_key("x", **kw)


def test_cache_size_helpers_check_their_input():
    with pytest.raises(ValueError, match="path must be a path"):
        K.dir_size(None)
    with pytest.raises(ValueError, match="n must be"):
        K.format_bytes(None)
    assert K.format_bytes(1536) == "1.5 KiB"


def test_blank_attn_lib_model_names_the_variable(monkeypatch):
    from attn_lib.book import chapter

    monkeypatch.setenv("ATTN_LIB_MODEL", "   ")
    with pytest.raises(ValueError, match="ATTN_LIB_MODEL"):
        chapter.settings()
    monkeypatch.setenv("ATTN_LIB_MODEL", " gpt2 ")
    assert chapter.settings().model == "gpt2"


# ------------------------------------------------------------------------------------------------------------------
# issue 35: a figure's dpi is bounded by the pixels it renders (dpi=1e6 was std::bad_alloc)
# ------------------------------------------------------------------------------------------------------------------
def test_property_figure_resolution_is_bounded_by_its_pixel_count():
    import matplotlib.pyplot as plt
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from attn_lib.provenance import MAX_PIXELS, figure_to_png

    fig = plt.figure(figsize=(2.0, 1.5))
    fig.add_subplot().plot([0, 1])
    top = (MAX_PIXELS / 3.0) ** 0.5  # the largest dpi for a 2 x 1.5 in figure

    @given(st.floats(min_value=top * 1.0001, max_value=1e300))
    @settings(max_examples=50, deadline=None)
    def too_large(dpi):
        with pytest.raises(ValueError, match=rf"^{re.escape(f'dpi={dpi:g}')} renders this 2 x 1.5 in figure as over "):
            figure_to_png(fig, dpi=dpi)

    try:
        too_large()
        assert figure_to_png(fig, dpi=20).startswith(b"\x89PNG")
    finally:
        plt.close(fig)


def test_widget_dpi_of_a_million_is_a_value_error_naming_dpi():
    import matplotlib.pyplot as plt

    from attn_lib.book import widgets

    with pytest.raises(ValueError, match="^dpi=1e[+]06 renders"):
        widgets.precomputed_slider([1], lambda v: plt.figure(figsize=(3, 2)), description="x", dpi=1e6)
