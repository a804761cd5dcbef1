"""attn_lib.experiments on tiny random-init models (fast), and one paper-profile run on a tiny GPT-2 with a
1024-token context (slow)."""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import sys
import tempfile

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import naive_scan, small_profile, tiny_gpt2_config

from attn_lib import claims
from attn_lib import experiments as E
from attn_lib import metrics as M
from attn_lib.book.chapter import describe_inputs
from attn_lib.experiments import inputs, jobs, passes
from attn_lib.models import from_config

TEXT = (
    "Well, Prince, so Genoa and Lucca are now just family estates of the Buonapartes. But I warn you, if you "
    "don't tell me that this means war, I will not believe it. "
) * 12

PROFILE = small_profile(
    "test",
    lengths=(8, 16, 32),
    L=32,
    N=2,
    n_values=(1, 2, 4, 20),
    sep_n_values=(1, 2, 4, 16),
    temperatures=(1e-3, 1e-2, 0.1, 1.0, 10.0),
    eps_values=(1e-3, 0.1, 10.0),
    mc=(4, 4),
    stage=2,
    crit_fraction=0.25,
)


@pytest.fixture
def gpt2_small(tiny_gpt2):
    """The session-wide tiny random-init GPT-2 of conftest.py (2 layers x 4 heads)."""
    return tiny_gpt2


@pytest.fixture
def llama_small(tiny_llama):
    return tiny_llama


@pytest.fixture
def handle(tiny_handle):
    return tiny_handle


@contextlib.contextmanager
def _captured_output():
    """Collects what the block writes to stdout and stderr into the dict it yields (keys "out", "err"), as pytest's
    ``capfd`` does (module-scoped fixtures cannot use it): Python-level writes (``sys.stdout``/``sys.stderr``, hence
    print, tqdm and warnings) and writes to file descriptors 1 and 2 (C extensions, subprocesses)."""
    got = {}
    py_out, py_err = io.StringIO(), io.StringIO()
    with tempfile.TemporaryFile() as fd_out, tempfile.TemporaryFile() as fd_err:
        sys.stdout.flush()
        sys.stderr.flush()
        saved = [os.dup(1), os.dup(2)]
        try:
            os.dup2(fd_out.fileno(), 1)
            os.dup2(fd_err.fileno(), 2)
            with contextlib.redirect_stdout(py_out), contextlib.redirect_stderr(py_err):
                yield got
        finally:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)
            for key, py, fd_file in (("out", py_out, fd_out), ("err", py_err, fd_err)):
                fd_file.seek(0)
                got[key] = py.getvalue() + fd_file.read().decode(errors="replace")


@pytest.fixture(scope="module")
def reproduced(tmp_path_factory, tiny_llama):
    """One ``run_reproduce`` of PROFILE on the tiny Llama with every default but the figure formats (progress off, the
    result cache on, in a fresh folder), shared by the tests that inspect its outputs, its silence and its cache.
    Returns ``(info, out folder, cache folder, captured output)``."""
    root = tmp_path_factory.mktemp("reproduced")
    out, cache = root / "out", root / "cache"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ATTN_LIB_CACHE_DIR", str(cache))
        with _captured_output() as captured:
            info = E.run_reproduce(
                profile=PROFILE, out=out, handle=tiny_llama, text_obj=inputs.as_text(TEXT), formats=("png",)
            )
    return info, out, cache, captured


def _capture(h, ids):
    from attn_lib.capture import collect_attention

    return collect_attention(h, ids, keep_qk=False)


def test_prefix_capture_equals_capture_of_prefix(handle):
    """Causality: rows r < L of a long window equal those of the L-prefix (the nested-prefix reuse)."""
    ids = E.text_window(handle, TEXT, 32)
    full = _capture(handle, ids)
    pre = _capture(handle, ids[:, :12])
    for a, b in zip(full, pre):
        la = a.logits[0, :, :12, :12]
        lb = b.logits[0]
        fin = torch.isfinite(lb)
        assert (torch.isfinite(la) == fin).all()
        assert torch.allclose(la[fin], lb[fin], atol=1e-5, rtol=1e-5)
        assert torch.allclose(a.values[0, :, :12], b.values[0], atol=1e-5, rtol=1e-5)
        wa = M.LayerData.from_logits(a.logits[0], a.values[0]).alpha[:, :12, :12]
        wb = M.LayerData.from_logits(b.logits[0], b.values[0]).alpha
        assert torch.allclose(wa, wb, atol=1e-6)


def _naive_critical(h, lengths, alpha, forms=("e1", "e2"), frac=1.0):
    """Naive critical-N: recompute every N from scratch (conftest.naive_scan) per layer, prefix per L."""
    from scipy.stats import ks_2samp

    ids = E.text_window(h, TEXT, max(lengths))
    per_layer = []
    for la in _capture(h, ids):
        ld = M.LayerData.from_logits(la.logits[0], la.values[0])
        per_layer.append(naive_scan(ld, n_max=max(1, int(max(lengths) * frac))))
    out = {}
    for L in lengths:
        cap = max(1, min(L - 1, int(math.floor(L * frac))))
        for f in forms:
            n_star = None
            for N in range(1, cap + 1):
                a, b = [], []
                for sc in per_layer:
                    v = sc.valid[:, :L, N - 1]
                    for h_ in range(v.shape[0]):
                        if v[h_].any():
                            a.append(float(sc.d_tilde[h_, :L, N - 1][v[h_]].mean()))
                            b.append(float(getattr(sc, f)[h_, :L, N - 1][v[h_]].mean()))
                if ks_2samp(a, b).pvalue >= alpha:
                    n_star = N
                    break
            out[(L, f)] = n_star if n_star is not None else cap
    return out


def test_incremental_ks_scan_matches_naive(gpt2_small):
    lengths = [8, 16, 32]
    trace = E.critical_n(gpt2_small, TEXT, lengths=lengths, stage=2, stop_early=True)
    full = E.critical_n(gpt2_small, TEXT, lengths=lengths, stop_early=False)
    s1 = E.critical_n_summary(trace).set_index(["L", "form", "sampling"])
    s2 = E.critical_n_summary(full).set_index(["L", "form", "sampling"])
    assert (s1["n_star"] == s2["n_star"]).all() and (s1["censored"] == s2["censored"]).all()
    m = trace.merge(full, on=["L", "N", "form", "sampling"], suffixes=("", "_full"))
    assert len(m) == len(trace)
    assert np.allclose(m["p_value"], m["p_value_full"]) and np.allclose(m["mean_form"], m["mean_form_full"])
    naive = _naive_critical(gpt2_small, lengths, 0.01)
    for (L, f), n in naive.items():
        assert int(s1.loc[(L, f, "heads"), "n_star"]) == n, (L, f)
    # without grouped-query attention every head is its own key/value group: the two samplings coincide
    assert gpt2_small.n_kv_heads == gpt2_small.n_heads
    assert (s1.xs("heads", level="sampling")["n_star"] == s1.xs("kv_groups", level="sampling")["n_star"]).all()
    for c in ("model", "text", "device"):
        assert c in trace


def test_distance_experiments_tables(gpt2_small):
    df = E.distance_vs_length(gpt2_small, TEXT, N=2, lengths=[8, 16, 32], mc_samples=4, mc_rows=4)
    assert set(df["L"]) == {8, 16, 32}
    assert len(df) == 3 * gpt2_small.n_layers * gpt2_small.n_heads  # L x layers x heads
    for c in ("model", "text", "device", "d_tilde", "d_max", "e1", "e1_plus_gap", "e2", "mc", "dmax_violations"):
        assert c in df
    assert (df["dmax_violations"] == 0).all()
    assert (df["d_max"] >= df["d_tilde"] - 1e-12).all()
    assert df[["d_tilde", "e1", "e2", "mc"]].notna().all().all()
    # the L = 16 row is the mean over rows r < 16 of the full-window per-row values
    ids = E.text_window(gpt2_small, TEXT, 32)
    la = _capture(gpt2_small, ids)[1]
    dm = M.distance_metrics(M.LayerData.from_logits(la.logits[0], la.values[0]), N=2)
    mean, _ = M.masked_mean(dm.d_tilde[:, :16], dm.valid[:, :16])
    got = df[(df.L == 16) & (df.layer == 1)].sort_values("head")["d_tilde"].to_numpy()
    assert np.allclose(got, mean.numpy(), rtol=1e-9)
    dn = E.distance_vs_n(gpt2_small, TEXT, L=32, n_values=[1, 4], mc_samples=0)
    assert set(dn["N"]) == {1, 4} and "mc" not in dn


def test_separability_reports_the_undecided_share_at_each_temperature(gpt2_small):
    """``underflow_T=<T>``: the share of selected tokens lighter than 2^-982, whose tests float64's range may decide
    (Reading the paper, §The ball test): none at T = 1, some where logits / T spread over thousands."""
    sp = E.separability(gpt2_small, TEXT, L=32, n_values=[2, 8], temperatures=[1e-4, 1.0], temperature_n=[8])
    at8 = sp[sp["N"] == 8]
    assert at8["underflow_T=1"].eq(0).all() and at8["underflow_T=0.0001"].gt(0).any()
    assert at8["underflow_T=0.0001"].le(1).all() and sp.loc[sp["N"] == 2, "underflow_T=1"].isna().all()


def test_separability_and_sensitivity_tables(llama_small):
    sp = E.separability(llama_small, TEXT, L=32, n_values=[1, 2, 8])
    assert set(sp["N"]) == {1, 2, 8}
    assert ((sp["fraction"] >= 0) & (sp["fraction"] <= 1)).all()
    assert (sp.loc[sp.N == 1, "fraction"] == 1).all()
    gs = E.gradient_sensitivity(llama_small, TEXT, L=32, temperatures=[0.01, 1.0], eps_values=[1e-3, 10.0])
    assert len(gs) == 2 * 2 * llama_small.n_layers * llama_small.n_heads
    assert (gs["rows_violating_corrected"] == 0).all()
    assert (gs["g"] <= gs["bound_corrected"] * (1 + 1e-9)).all()
    for c in ("model", "text", "device"):
        assert c in sp and c in gs
    assert (gs["row_stride"] == 1).all() and (gs["n_rows"] == 31).all()


def test_sensitivity_row_subset(llama_small):
    """``rows`` (a profile's ``gradient_sensitivity.rows``): every k-th row ending at the last; same g as the full metric on
    those rows with the same directions."""
    assert E.passes.sens_row_indices(32, 8).tolist() == [3, 7, 11, 15, 19, 23, 27, 31]
    assert E.passes.sens_row_indices(32, 0).tolist() == list(range(32))
    assert E.passes.sens_row_indices(10, 64).tolist() == list(range(10))
    gs = E.gradient_sensitivity(llama_small, TEXT, L=32, temperatures=[0.01, 1.0], eps_values=[1e-3], rows=8)
    assert (gs["row_stride"] == 4).all() and (gs["n_rows"] == 8).all()
    assert (gs["rows_violating_corrected"] == 0).all()
    from attn_lib.capture import collect_attention

    las = collect_attention(llama_small, E.text_window(llama_small, TEXT, 32), keep_qk=False)
    la = las[0]
    rows = torch.as_tensor(E.passes.sens_row_indices(32, 8))
    g, valid = M.sensitivity_rows(
        la.logits[0], [0.01, 1.0], [1e-3], mask=passes.layer_mask(la), seed=0 + la.layer, rows=rows
    )
    got = gs[(gs.layer == la.layer)].sort_values(["T", "head"])
    ref = (g.sum(-1) / valid.sum(-1)).reshape(-1).numpy()  # (T, eps=1, H) row-means
    assert np.allclose(got["g"].to_numpy(), ref, rtol=1e-9)


def test_run_all_threads_argument_restores_torch_threads(gpt2_small):
    n0 = torch.get_num_threads()
    res = E.run_all(gpt2_small, TEXT, PROFILE, None, experiments=["separability"], threads=1)
    assert len(res["separability"]) > 0 and torch.get_num_threads() == n0
    with pytest.raises(ValueError, match="threads"):
        E.run_all(gpt2_small, TEXT, PROFILE, None, experiments=["separability"], threads=0)


def test_run_all_one_pass_and_cache(tmp_path, gpt2_small, monkeypatch):
    from attn_lib.cache import ResultCache

    calls = []
    real = passes.run_pass
    monkeypatch.setattr(passes, "run_pass", lambda *a, **k: calls.append(1) or real(*a, **k))
    cache = ResultCache(root=tmp_path / "c")
    res = E.run_all(gpt2_small, TEXT, PROFILE, cache)
    assert len(calls) == 1  # all five experiments in one forward pass
    assert set(res) == set(E.jobs.EXPERIMENTS) | {"critical_n_summary"}
    for k, v in res.items():
        assert isinstance(v, pd.DataFrame) and len(v) > 0, k
        assert {"model", "text", "device"} <= set(v.columns), k
    res2 = E.run_all(gpt2_small, TEXT, PROFILE, cache)
    assert len(calls) == 1  # everything from the cache
    for k in E.jobs.EXPERIMENTS:
        pd.testing.assert_frame_equal(res[k].reset_index(drop=True), res2[k].reset_index(drop=True), check_dtype=False)
    monkeypatch.setattr(M.settings, "default_engine", "torch")  # another engine: not served from the cache
    E.run_all(gpt2_small, TEXT, PROFILE, cache)
    assert len(calls) == 2


def test_critical_n_and_its_seeds_scan_each_layer_once_in_the_pass(gpt2_small, monkeypatch):
    """critical_n and critical_n_mc_seeds share the layer's d~/E1/E2 scan in the pass (one topn_scan per layer fewer
    than the two run apart) and give the tables each gives on its own."""
    calls = []
    real = M.topn_scan
    monkeypatch.setattr(M, "topn_scan", lambda *a, **k: calls.append(1) or real(*a, **k))
    names = ["critical_n", "critical_n_mc_seeds"]
    both = E.run_all(gpt2_small, TEXT, PROFILE, experiments=names)
    together = len(calls)
    alone = {n: E.run_all(gpt2_small, TEXT, PROFILE, experiments=[n])[n] for n in names}
    assert len(calls) - together == together + gpt2_small.n_layers
    for n in names:
        pd.testing.assert_frame_equal(both[n], alone[n])


def test_run_reproduce_writes_outputs(reproduced, llama_small):
    info, out, _, _ = reproduced
    for stem in (
        "fig2a_distance_vs_length",
        "fig2b_distance_vs_n",
        "fig2c_critical_n",
        "fig3_separability",
        "fig4_sensitivity",
    ):
        assert (out / f"{stem}.png").stat().st_size > 0  # SVG output: tests/test_report.py
    data = json.loads((out / "results.json").read_text())
    assert data["meta"]["model"] == llama_small.model_id and "timings_s" in data
    md = (out / "report.md").read_text()
    assert (
        llama_small.model_id in md
        and "| id | the paper's words | this row tests | kind | verdict | measured | cause |" in md
    )
    assert list(info["verdicts"]["id"]) == list(claims.CLAIMS)


def test_bad_experiment_arguments(gpt2_small):
    with pytest.raises(ValueError, match="profile"):
        E.run_all(gpt2_small, TEXT, "bogus")
    with pytest.raises(ValueError, match="lengths"):
        E.distance_vs_length(gpt2_small, TEXT, lengths=[1000])
    with pytest.raises(ValueError, match="lengths"):
        E.distance_vs_length(gpt2_small, TEXT, lengths=[])
    with pytest.raises(ValueError, match="N"):
        E.distance_vs_length(gpt2_small, TEXT, N=8, lengths=[8, 16])
    with pytest.raises(ValueError, match="n_values"):
        E.distance_vs_n(gpt2_small, TEXT, L=16, n_values=[16])
    with pytest.raises(ValueError, match="n_values"):
        E.distance_vs_n(gpt2_small, TEXT, L=16, n_values=[0])
    with pytest.raises(ValueError, match="p"):
        E.distance_vs_n(gpt2_small, TEXT, L=16, n_values=[1], p="x")
    with pytest.raises(ValueError, match="mc_samples"):
        E.distance_vs_n(gpt2_small, TEXT, L=16, n_values=[1], mc_samples=-1)
    with pytest.raises(ValueError, match="alpha"):
        E.critical_n(gpt2_small, TEXT, lengths=[8], alpha=1.5)
    with pytest.raises(ValueError, match="forms"):
        E.critical_n(gpt2_small, TEXT, lengths=[8], forms=["e3"])
    with pytest.raises(ValueError, match="stop_early"):
        E.critical_n(gpt2_small, TEXT, lengths=[8], stop_early="yes")
    with pytest.raises(ValueError, match="lengths"):
        E.critical_n(gpt2_small, TEXT, lengths=[3])
    with pytest.raises(ValueError, match="M"):
        E.separability(gpt2_small, TEXT, L=16, n_values=[1], M=-1)
    with pytest.raises(ValueError, match="temperatures"):
        E.gradient_sensitivity(gpt2_small, TEXT, L=16, temperatures=[0.0])
    with pytest.raises(ValueError, match="eps_values"):
        E.gradient_sensitivity(gpt2_small, TEXT, L=16, eps_values=[])
    with pytest.raises(ValueError, match="experiments"):
        E.run_all(gpt2_small, TEXT, PROFILE, experiments=["nope"])
    with pytest.raises(ValueError, match="use_cache"):
        E.run_reproduce(profile=PROFILE, use_cache="no", handle=gpt2_small, text_obj=inputs.as_text(TEXT))
    with pytest.raises(ValueError, match="text"):
        E.distance_vs_n(gpt2_small, 12345, L=16, n_values=[1])


def test_bad_cache_and_single_temperature(gpt2_small):
    with pytest.raises(ValueError, match="cache must be None or an attn_lib.cache.ResultCache"):
        E.distance_vs_length(gpt2_small, TEXT, lengths=[8], N=2, cache="bogus")  # was an AttributeError
    with pytest.raises(ValueError, match="cache must be None"):
        E.run_all(gpt2_small, TEXT, PROFILE, cache=5)
    with pytest.raises(ValueError, match="temperatures must be a real number > 0"):
        E.gradient_sensitivity(gpt2_small, TEXT, L=16, temperatures="2")
    with pytest.raises(ValueError, match="seed must be an integer in"):
        E.gradient_sensitivity(gpt2_small, TEXT, L=16, seed=2**70)
    # one number is one temperature (was a TypeError: 'int' object is not iterable)
    one = E.gradient_sensitivity(gpt2_small, TEXT, L=16, temperatures=5, eps_values=0.1)
    assert set(one["T"]) == {5.0} and set(one["eps"]) == {0.1}
    many = E.gradient_sensitivity(gpt2_small, TEXT, L=16, temperatures=[5.0], eps_values=[0.1])
    pd.testing.assert_frame_equal(one, many)


def test_run_reproduce_checks_out_before_any_work(tmp_path, monkeypatch, gpt2_small):
    f = tmp_path / "a-file"
    f.write_text("x")
    monkeypatch.setattr(jobs, "run_all", lambda *a, **k: pytest.fail("ran the experiments before checking out"))
    with pytest.raises(ValueError, match="out .*a-file' exists and is not a folder"):
        E.run_reproduce(profile=PROFILE, out=f, handle=gpt2_small, text_obj=inputs.as_text(TEXT))
    monkeypatch.setattr(jobs, "load_inputs", lambda *a, **k: pytest.fail("loaded the model before checking out"))
    with pytest.raises(ValueError, match="cannot be used as an output folder"):
        E.run_reproduce(profile=PROFILE, out=f / "sub")


def test_run_reproduce_defaults_to_the_cli_profile():
    import inspect

    from attn_lib.cli import build_parser

    cli = build_parser().parse_args(["reproduce"])
    assert inspect.signature(E.run_reproduce).parameters["profile"].default == cli.profile == "paper"


def test_progress_is_silent_by_default_and_on_stderr_when_asked(reproduced, tmp_path, llama_small, capfd, monkeypatch):
    from attn_lib.cache import ResultCache

    text = inputs.as_text(TEXT)
    _, _, cache, quiet = reproduced  # run_reproduce with its default progress (the shared run)
    assert quiet["err"] == "" and quiet["out"] == ""  # the chapters need this: stderr in a chapter fails the book build
    monkeypatch.setenv("ATTN_LIB_CACHE_DIR", str(cache))
    capfd.readouterr()
    E.run_reproduce(
        profile=PROFILE,
        out=tmp_path / "b",
        handle=llama_small,
        text_obj=text,
        formats=("png",),
        use_cache=False,
        progress=True,
    )
    err = capfd.readouterr().err
    for what in (
        "forward pass at L=32",
        "2/2 [",
        "finishing the experiments",
        "5/5 [",
        "figures",
        "experiments done in",
        "wrote ",
    ):
        assert what in err, what
    # the shared run filled the result cache: now every experiment says it came from there
    E.run_all(llama_small, text, PROFILE, ResultCache(), progress=True)
    err = capfd.readouterr().err
    assert all(f"{n}: from the result cache (" in err for n in E.jobs.EXPERIMENTS)
    assert "no forward pass" in err and "forward pass at" not in err
    with pytest.raises(ValueError, match="progress must be True or False"):
        E.run_all(llama_small, text, PROFILE, progress="yes")


def test_warm_up_of_some_kernels_and_the_parallel_warm_up_tool(tmp_path):
    """warm_up(names=...) compiles only those kernels (an unknown name is a ValueError naming the parameter), and
    tools/warm_kernels.py splits every kernel over its processes, each once, balanced by compile time."""
    import importlib.util
    import subprocess
    import sys
    from pathlib import Path

    K = pytest.importorskip("attn_lib.accel.kernels", reason="numba not importable")
    with pytest.raises(ValueError, match=r"names must be kernels of .*\['no_such'\]"):
        K.warm_up(names=["no_such"])
    with pytest.raises(ValueError, match="names must be a list of kernel names .*got the string 'order_prefix'"):
        K.warm_up(names="order_prefix")
    root = Path(__file__).parents[1]
    spec = importlib.util.spec_from_file_location("warm_kernels", root / "tools" / "warm_kernels.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    assert set(tool.COMPILE_S) == set(K.KERNELS)
    for n in (1, 2, 3, 16):
        groups = tool.split(list(K.KERNELS), n)
        assert sorted(k for g in groups for k in g) == sorted(K.KERNELS) and len(groups) == min(n, len(K.KERNELS))
    two = [sum(tool.COMPILE_S[k] for k in g) for g in tool.split(list(K.KERNELS), 2)]
    assert max(two) <= 0.55 * sum(two)
    assert K.warm_up(names=["sep_prefix", "scan_prefix"]) == ["scan_prefix", "sep_prefix"]  # in KERNELS' order
    r = subprocess.run(
        [sys.executable, str(root / "tools" / "warm_kernels.py"), "--processes", "2"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert r.returncode == 0 and f"warm_kernels: {len(K.KERNELS)} kernels in 2 processes" in r.stdout, r.stderr
    bad = subprocess.run(
        [sys.executable, str(root / "tools" / "warm_kernels.py"), "--processes", "0"], capture_output=True, text=True
    )
    assert bad.returncode == 2 and "--processes must be an integer >= 1" in bad.stderr


def test_kernel_warm_up_compiles_what_the_runs_use(gpt2_small, monkeypatch):
    """The progress bar's "kernels" step is honest: after warm_up a whole run adds no compiled signature."""
    K = pytest.importorskip("attn_lib.accel.kernels", reason="numba not importable")
    monkeypatch.setattr(M.settings, "default_engine", "numba")
    assert K.warm_up() == list(K.KERNELS)
    dispatchers = [
        getattr(K, n)
        for n in (
            "_scan_prefix",
            "_mc_prefix",
            "_mc_scan_prefix",
            "_dist_prefix",
            "_sep_prefix",
            "_running_min",
            "_sens_rows",
            "_log_sums",
            "_order_prefix",
            "_d1_cummax",
            "_crossing_rows",
            "_row_metrics",
        )
    ]
    assert len(dispatchers) == len(K.KERNELS)  # one compiled dispatcher per public kernel
    before = [len(d.signatures) for d in dispatchers]
    E.run_all(gpt2_small, TEXT, PROFILE)
    assert [len(d.signatures) for d in dispatchers] == before


@pytest.fixture(scope="module")
def standin():
    """``load_inputs("gpt2", "war-and-peace")`` offline, loaded once for the slow tests of this module: the offline
    stand-in (SmolLM2-135M, 30 layers x 9 heads) and the offline default text. Returns ``(handle, text, notes,
    captured output of the load)``."""
    with _captured_output() as captured:
        handle, text, notes = E.load_inputs("gpt2", "war-and-peace", device="cpu")
    return handle, text, notes, captured


@pytest.mark.slow
def test_paper_profile_end_to_end_on_a_tiny_gpt2_with_1024_positions(tmp_path, standin):
    """The paper profile's grids (L up to 1024, the critical-N scan's stage 1023, the stratified Monte-Carlo seeds,
    five direction draws) end to end on a random-init GPT-2 with a 1024-token context (1 layer x 2 heads) and the
    offline text. `make test` executes the chapters with the quick profile on the stand-in; this is its run of the
    paper profile, which `make book` runs on the stand-in."""
    h = from_config(tiny_gpt2_config(n_layer=1, n_head=2, n_positions=1024), device="cpu", seed=0, name="tiny-1024")
    info = E.run_reproduce(
        profile="paper", out=tmp_path / "p", use_cache=False, handle=h, text_obj=standin[1], formats=("png",)
    )
    vt = info["verdicts"]
    assert list(vt["id"]) == list(claims.CLAIMS)
    assert set(vt["verdict"]) <= {v for vs in claims.VERDICTS.values() for v in vs} | {"n/a"}
    assert vt.set_index("id").loc["cor3-corrected-bound", "verdict"] == "holds"
    assert h.model_id in (tmp_path / "p" / "report.md").read_text()
    r, P = json.loads((tmp_path / "p" / "results.json").read_text())["results"], E.PROFILES["paper"]
    assert (
        sorted({x["L"] for x in r["distance_vs_length"]}) == sorted({x["L"] for x in r["critical_n"]}) == [*P.lengths]
    )
    assert P.lengths[-1] == h.max_length == 1024
    assert len({x["seed"] for x in r["critical_n_mc_seeds"]}) == P.mc_seeds - 1  # seed 0 is critical_n's
    assert len({x["T"] for x in r["gradient_sensitivity"]}) == len(P.gradient_sensitivity.temperatures) == 21
    assert sorted({x["N"] for x in r["separability"]}) == list(P.separability.n_values)


def test_tables_name_the_offline_standin(gpt2_small, monkeypatch):
    """Every table (hence every figure label) says when the offline stand-in, not the requested model, ran."""
    meta = inputs.table_meta(gpt2_small, TEXT)
    assert "stand-in" not in meta["model"] and meta["model"] == gpt2_small.model_id
    monkeypatch.setattr(gpt2_small, "is_standin", True)
    monkeypatch.setattr(gpt2_small, "requested", "gpt2")
    meta = inputs.table_meta(gpt2_small, TEXT)
    assert meta["model"] == f"{gpt2_small.model_id} (offline stand-in for gpt2)"
    assert set(meta) == {"model", "text", "device"}


def test_describe_inputs_names_model_and_text(gpt2_small):
    lines = describe_inputs(gpt2_small, inputs.as_text(TEXT)).splitlines()
    assert lines[0] == f"model: {gpt2_small.describe()}"
    assert f"{gpt2_small.n_layers} layers x {gpt2_small.n_heads} heads" in lines[1]
    assert lines[2].startswith("text:  ")


def test_load_inputs_rejects_unknown_device():
    with pytest.raises(ValueError, match="device"):
        E.load_inputs("gpt2", device="tpu")


@pytest.mark.slow
def test_load_inputs_is_quiet_and_returns_the_fallback_notes(standin):
    handle, text, notes, captured = standin
    assert captured["err"] == ""
    assert handle.is_standin and any("stand-in" in n for n in notes)
    assert text.name == "botchan" and any("War and Peace" in n for n in notes)


def test_engines_give_the_same_tables(gpt2_small, monkeypatch):
    """All five experiments with the compiled kernels (default on CPU) and with the float64 tensor code
    (ATTN_LIB_ENGINE=torch): the same rows, numbers equal to 1e-6 (the scan's float32 roots), same critical N."""
    a = E.run_all(gpt2_small, TEXT, PROFILE)
    monkeypatch.setattr(M.settings, "default_engine", "torch")
    b = E.run_all(gpt2_small, TEXT, PROFILE)
    for name in [*E.jobs.EXPERIMENTS, "critical_n_summary"]:
        x, y = a[name], b[name]
        assert list(x.columns) == list(y.columns) and len(x) == len(y) > 0, name
        for c in x.columns:
            if pd.api.types.is_float_dtype(x[c]):
                assert np.allclose(x[c], y[c], rtol=1e-6, atol=1e-12, equal_nan=True), (name, c)  # NaN: n/a
            else:
                assert (x[c] == y[c]).all(), (name, c)
    monkeypatch.setattr(M.settings, "default_engine", "fortran")
    with pytest.raises(ValueError, match="ATTN_LIB_ENGINE"):
        E.run_all(gpt2_small, TEXT, PROFILE)


def test_critical_n_ks_over_key_value_groups(llama_small):
    """Grouped-query attention: the KS test also runs on one sample per key/value group (the mean of its query
    heads); heads 0,1 share group 0 and heads 2,3 group 1 in the tiny Llama (4 query heads, 2 key/value heads)."""
    trace = E.critical_n(llama_small, TEXT, lengths=[8, 16], stop_early=False)
    heads = trace[trace["sampling"] == "heads"]
    groups = trace[trace["sampling"] == "kv_groups"]
    assert (heads["n_samples"] == llama_small.n_layers * llama_small.n_heads).all()
    assert (groups["n_samples"] == llama_small.n_layers * llama_small.n_kv_heads).all()
    assert llama_small.n_kv_heads < llama_small.n_heads
    assert passes.kv_groups(4, 2).tolist() == [0, 0, 1, 1] and passes.kv_groups(6, 6).tolist() == list(range(6))
    # group means of the head means: the group samples are averages, so their mean equals the heads' mean
    m = heads.merge(groups, on=["L", "N", "form"], suffixes=("_h", "_g"))
    assert np.allclose(m["mean_d_tilde_h"], m["mean_d_tilde_g"]) and np.allclose(m["mean_form_h"], m["mean_form_g"])


def test_critical_n_scans_up_to_L_minus_1_and_row_stride(gpt2_small):
    trace = E.critical_n(gpt2_small, TEXT, lengths=[16], forms=["e1"], stop_early=False, crit_rows=4)
    assert trace["N"].max() == 15  # N = 1..L-1, no scan limit below it
    assert (trace["n_rows"] <= 4).all()  # every 4th row of 16 (ending at the last one), minus rows with t <= N
    summary = E.critical_n_summary(trace)
    assert (summary["limit"] == 15).all()


def test_run_all_keeps_each_experiments_time_with_its_table(gpt2_small, tmp_path):
    from attn_lib.cache import ResultCache

    cache = ResultCache(tmp_path)
    res = E.run_all(gpt2_small, TEXT, PROFILE, cache=cache, experiments=["distance_vs_length", "separability"])
    for name in ("distance_vs_length", "separability"):
        timing = res[name].attrs["timing"]
        assert timing["analysis_s"] > 0 and timing["shared_pass_s"] >= 0
        assert set(timing["experiments_in_pass"]) == {"distance_vs_length", "separability"}
    again = E.run_all(gpt2_small, TEXT, PROFILE, cache=cache, experiments=["separability"])  # from the cache
    assert again["separability"].attrs["timing"] == res["separability"].attrs["timing"]


@pytest.mark.parametrize("crit_rows", [-1, 1.5, "8"])
def test_critical_n_rejects_a_bad_row_count(gpt2_small, crit_rows):
    with pytest.raises(ValueError, match="crit_rows"):
        E.critical_n(gpt2_small, TEXT, lengths=[16], crit_rows=crit_rows)
