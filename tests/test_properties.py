"""Property-based tests (hypothesis) over public entry points: any input gives either a correct result or a
``ValueError`` that names the parameter, never another exception, a hang or a NaN (issue 21)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

pytestmark = pytest.mark.numerical  # run twice by `make test`: with the accelerator, and --without-numba

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from attn_lib import experiments as B  # noqa: E402
from attn_lib import jacobian as jb  # noqa: E402
from attn_lib import metrics as M  # noqa: E402
from attn_lib import normalizers as nz  # noqa: E402
from attn_lib import theory as th  # noqa: E402
from attn_lib._validation import check_int, check_positive, check_probability  # noqa: E402
from attn_lib.book.swap_view import setting_of  # noqa: E402

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)

#: scalars a careless user might pass for a number
ODD_SCALARS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.booleans(),
    st.none(),
    st.text(max_size=4),
    st.just(np.float32(0.5)),
    st.just(np.int64(3)),
    st.just(torch.tensor(2.0)),
    st.just(torch.tensor([1.0, 2.0])),
    st.just(1 + 2j),
    st.lists(st.integers(), max_size=2),
)


def _raises_value_error_naming(fn, name: str):
    """Run ``fn``; a ValueError must mention ``name``; anything else but success is a failure. Returns the result
    (or None after a ValueError)."""
    try:
        return fn()
    except ValueError as exc:
        assert name in str(exc), f"ValueError does not name {name!r}: {exc}"
        return None


# ------------------------------------------------------------------------------------------------------------------
# the validation helpers themselves
# ------------------------------------------------------------------------------------------------------------------
@SETTINGS
@given(v=ODD_SCALARS)
def test_check_helpers_return_a_valid_number_or_a_value_error(v):
    r = _raises_value_error_naming(lambda: check_positive("tau", v), "tau")
    assert r is None or (math.isfinite(r) and r > 0)
    r = _raises_value_error_naming(lambda: check_int("count", v, low=0, high=100), "count")
    assert r is None or (isinstance(r, int) and 0 <= r <= 100)
    r = _raises_value_error_naming(lambda: check_probability("prob", v), "prob")
    assert r is None or 0 <= r <= 1
    if isinstance(v, bool):
        assert r is None  # a bool is not a number


# ------------------------------------------------------------------------------------------------------------------
# normalisers
# ------------------------------------------------------------------------------------------------------------------
NAMES = [n for n in nz.available() if n != "general"]

row_values = st.floats(min_value=-1e4, max_value=1e4, allow_nan=False, width=64)


@SETTINGS
@given(
    name=st.sampled_from(NAMES),
    rows=st.integers(1, 3),
    L=st.integers(1, 7),
    data=st.data(),
    T=st.one_of(st.floats(min_value=1e-3, max_value=1e3), ODD_SCALARS),
)
def test_normalisers_give_weights_or_a_value_error(name, rows, L, data, T):
    x = torch.tensor(data.draw(st.lists(row_values, min_size=rows * L, max_size=rows * L)), dtype=torch.float64)
    x = x.view(rows, L)
    mask = torch.tensor(data.draw(st.lists(st.booleans(), min_size=rows * L, max_size=rows * L))).view(rows, L)
    f = nz.get(name, k=2) if name == "topk" else nz.get(name)
    w = _raises_value_error_naming(lambda: f(x, T, mask=mask), "temperature")
    if w is None:
        return
    assert w.shape == x.shape and bool(torch.isfinite(w).all())
    assert bool((w >= 0).all()) and bool((w[~mask] == 0).all())
    s, has = w.sum(-1), mask.any(-1)
    if nz.spec(name).sums_to_one:
        torch.testing.assert_close(s[has], torch.ones_like(s[has]), atol=1e-9, rtol=0)
    elif name == "sa_softmax":  # its factor in [0, 1] scales softmax: rows sum to at most one (0 for one logit < 0)
        assert bool((s <= 1 + 1e-9).all())


@SETTINGS
@given(bad=st.one_of(st.floats(allow_nan=True), st.just(float("inf")), st.just(float("-inf"))))
def test_normalisers_on_non_finite_logits(bad):
    x = torch.tensor([[0.5, bad, -1.0]], dtype=torch.float64)
    for name in NAMES:
        f = nz.get(name, k=2) if name == "topk" else nz.get(name)
        w = _raises_value_error_naming(lambda f=f: f(x, 1.0), "logits")
        if w is not None:
            assert bool(torch.isfinite(w).all()), name


# ------------------------------------------------------------------------------------------------------------------
# theory (one row, float64) against the batched metrics
# ------------------------------------------------------------------------------------------------------------------
@SETTINGS
@given(L=st.integers(2, 9), d=st.integers(1, 4), N=ODD_SCALARS | st.integers(0, 12), seed=st.integers(0, 10**6))
def test_distance_of_one_row_or_a_value_error(L, d, N, seed):
    g = np.random.default_rng(seed)
    alpha = g.dirichlet(np.ones(L))
    X = g.normal(size=(L, d))
    r = _raises_value_error_naming(lambda: th.distance(alpha, X, N), "N")
    if r is None:
        return
    assert np.isfinite(r) and r >= 0
    ref = th.theorem1_dmax(alpha, X, int(N))
    assert r <= ref + 1e-9  # Theorem 1(a): d~ <= d_max


@SETTINGS
@given(
    H=st.integers(1, 2),
    L=st.integers(2, 10),
    N=st.integers(-2, 12) | ODD_SCALARS,
    seed=st.integers(0, 10**6),
    engine=st.sampled_from(["auto", "torch", *(["numba"] if M._engine.accelerated("distance_metrics") else [])]),
)
def test_distance_metrics_or_a_value_error(H, L, N, seed, engine):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(H, L, L, generator=g, dtype=torch.float64) * 2
    causal = torch.ones(L, L, dtype=torch.bool).tril()
    ld = M.LayerData.from_logits(logits.masked_fill(~causal, -math.inf), torch.randn(H, L, 3, generator=g))
    r = _raises_value_error_naming(lambda: M.distance_metrics(ld, N=N, engine=engine), "N")
    if r is None:
        return
    for f in ("d_tilde", "e1", "e2"):
        v = getattr(r, f)
        assert bool(torch.isfinite(v).all()), f
    assert bool((r.d_tilde[r.valid] <= r.d_max[r.valid] + 1e-9).all())


@SETTINGS
@given(L=st.integers(2, 12), n_max=st.integers(-3, 40) | ODD_SCALARS, seed=st.integers(0, 1000))
def test_topn_scan_or_a_value_error(L, n_max, seed):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(1, L, L, generator=g, dtype=torch.float64)
    causal = torch.ones(L, L, dtype=torch.bool).tril()
    ld = M.LayerData.from_logits(logits.masked_fill(~causal, -math.inf), torch.randn(1, L, 2, generator=g))
    r = _raises_value_error_naming(lambda: M.topn_scan(ld, n_max=n_max, engine="torch"), "n_max")
    if r is not None:
        assert r.valid.shape[-1] == int(n_max) <= L - 1 and bool(torch.isfinite(r.d_tilde).all())


# ------------------------------------------------------------------------------------------------------------------
# beyond and jacobian
# ------------------------------------------------------------------------------------------------------------------
@SETTINGS
@given(
    w=st.one_of(
        st.lists(st.floats(min_value=-1, max_value=10) | st.just(float("nan")), min_size=1, max_size=6),
        st.integers(1, 6).flatmap(lambda n: st.just([1.0 / n] * n)),  # distributions too
        st.just([0.0, 0.0]),
    ),
    T=st.floats(min_value=1e-3, max_value=10) | ODD_SCALARS,
)
def test_spectral_norm_of_a_distribution_or_a_value_error(w, T):
    try:
        r = B.weights.softmax_type_spectral_norm([w], T)
    except ValueError as exc:
        assert "weights" in str(exc) or "temperature" in str(exc), exc
        return
    a = torch.tensor(w, dtype=torch.float64)
    J = (torch.diag(a) - torch.outer(a, a)) / float(T)
    torch.testing.assert_close(r[0], torch.linalg.matrix_norm(J, ord=2), atol=1e-9, rtol=1e-9)


@SETTINGS
@given(label=st.text(max_size=14) | st.sampled_from(["top-3", "top-16", "softmax T=0.5", "top-x", "softmax T=1e9"]))
def test_swap_setting_labels_parse_or_a_value_error(label):
    prof = B.BEYOND_PROFILES["quick"]
    s = _raises_value_error_naming(lambda: setting_of(label, prof), "setting")
    if s is None:
        return
    if s["normalizer"] == "topk":
        assert 1 <= s["k"] <= prof.swap_length and s["setting"] == f"top-{s['k']}"
    if s["normalizer"] == "softmax" and s["setting"].startswith("softmax T="):
        assert math.isfinite(s["T"]) and s["T"] > 0


@SETTINGS
@given(
    T=st.floats(min_value=1e-3, max_value=1e3) | ODD_SCALARS,
    eps=st.floats(min_value=1e-6, max_value=10) | ODD_SCALARS,
    seed=st.integers(0, 100),
)
def test_sensitivity_or_a_value_error(T, eps, seed):
    x = torch.randn(3, 5, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    try:
        g = jb.sensitivity(x, T, eps, seed=seed)
    except ValueError as exc:
        assert "temperature" in str(exc) or "eps" in str(exc), exc
        return
    assert bool(torch.isfinite(g).all()) and bool((g >= 0).all())
    assert bool((g <= min(1 / (2 * float(T)), math.sqrt(2) / float(eps)) + 1e-9).all())  # Corollary 3 (corrected)


# ------------------------------------------------------------------------------------------------------------------
# the result cache's keys
# ------------------------------------------------------------------------------------------------------------------
json_leaf = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), st.text(max_size=5))
json_like = st.recursive(
    json_leaf,
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=3), kids, max_size=3),
    max_leaves=8,
)


@SETTINGS
@given(value=st.one_of(json_like, st.dictionaries(st.integers() | st.text(max_size=2), json_leaf, max_size=4)))
def test_cache_round_trips_every_value_it_accepts(tmp_path_factory, value):
    import pickle

    import attn_lib.cache as K

    root = tmp_path_factory.mktemp("c")
    first = K.ResultCache(root).get_or_compute({"k": 1}, lambda: value)
    again = K.ResultCache(root).get_or_compute({"k": 1}, lambda: pytest.fail("recomputed"))
    # what comes back is what the first call returned (JSON turns tuples into lists, nothing else changes)
    assert pickle.dumps(again) == pickle.dumps(first)  # (bytes: NaN == NaN here)
    if isinstance(value, dict):
        assert len(again) == len(value)  # no two keys merged


# ------------------------------------------------------------------------------------------------------------------
# devices, dtypes, token windows, input ids, the coverage simulation
# ------------------------------------------------------------------------------------------------------------------
@SETTINGS
@given(dev=st.text(max_size=10) | st.sampled_from(["cpu", "cuda:0", "cuda:-1", "mps", "CPU", " cpu", "cuda:x"]))
def test_resolve_device_or_a_value_error(dev):
    from attn_lib.models import resolve_device

    r = _raises_value_error_naming(lambda: resolve_device(dev), "device")
    assert r is None or isinstance(r, torch.device)


@SETTINGS
@given(dt=st.text(max_size=10) | ODD_SCALARS | st.sampled_from(["float64", "bfloat16", torch.float16, torch.int8]))
def test_resolve_dtype_or_a_value_error(dt):
    from attn_lib.models.handle import resolve_dtype

    r = _raises_value_error_naming(lambda: resolve_dtype(dt), "dtype")
    assert r is None or (isinstance(r, torch.dtype) and r.is_floating_point)


@SETTINGS
@given(
    length=st.integers(-2, 50) | ODD_SCALARS,
    n_windows=st.integers(-1, 5) | ODD_SCALARS,
    start=st.integers(-3, 60) | ODD_SCALARS,
)
def test_token_windows_or_a_value_error(tiny_gpt2, length, n_windows, start):
    from attn_lib.corpus import token_windows

    text = "The quick brown fox jumps over the lazy dog. " * 2  # 90 byte tokens
    try:
        w = token_windows(tiny_gpt2.tokenizer, text, length, n_windows=n_windows, start=start)
    except ValueError as exc:
        assert any(n in str(exc) for n in ("length", "n_windows", "start")), exc
        return
    assert tuple(w.shape) == (int(n_windows), int(length))


@SETTINGS
@given(ids=st.lists(st.integers(-3, 300), max_size=6) | ODD_SCALARS | st.lists(st.lists(st.integers(0, 5), max_size=3)))
def test_prepare_input_ids_or_a_value_error(tiny_gpt2, ids):
    from attn_lib.capture import prepare_input_ids

    r = _raises_value_error_naming(lambda: prepare_input_ids(tiny_gpt2, ids), "input_ids")
    if r is not None:
        assert r.dtype == torch.long and r.dim() == 2 and int(r.min()) >= 0 and int(r.max()) < 256


@SETTINGS
@given(p=ODD_SCALARS | st.floats(0, 1), H=ODD_SCALARS | st.integers(0, 50), n=ODD_SCALARS | st.integers(1, 2000))
def test_multihead_coverage_simulation_or_a_value_error(p, H, n):
    try:
        r = th.multihead_coverage_simulation(p, H, n_trials=n)
    except ValueError as exc:
        assert any(k in str(exc) for k in ("p ", "p must", "H ", "H must", "n_trials")), exc
        return
    assert 0.0 <= r <= 1.0


# ------------------------------------------------------------------------------------------------------------------
# the CLI: any value of a flag gives exit 0 or one error line and exit 2, never a traceback
# ------------------------------------------------------------------------------------------------------------------
FLAG_VALUES = st.one_of(
    st.sampled_from(["0", "-1", "1", "2", "8", "1e3", "nan", "inf", "", " ", "x", "0,1", "99", "-0", "2.5", "top-2"]),
    st.text(alphabet="0123456789-.,e~/ xa", max_size=6),
)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(
    flag=st.sampled_from(["--length", "--windows", "--start", "--layers", "--temperature", "--normalizer", "--dtype"]),
    value=FLAG_VALUES,
)
def test_cli_capture_flags_never_give_a_traceback(tiny_gpt2, tmp_path_factory, flag, value):
    import contextlib
    import io
    import os

    import attn_lib.models as models
    from attn_lib.cli import main

    real = models.load_model

    def fake(name="gpt2", device="auto", dtype=None, **kw):
        models.handle.resolve_dtype(dtype)  # the real checks of --dtype
        return tiny_gpt2

    models.load_model = fake
    old = os.environ.get("ATTN_LIB_CACHE_DIR")
    os.environ["ATTN_LIB_CACHE_DIR"] = str(tmp_path_factory.mktemp("cli"))
    err = io.StringIO()
    args = ["capture", "--text", "botchan", "-q", "--no-cache"] + (["--length", "8"] if flag != "--length" else [])
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            try:
                code = main([*args, f"{flag}={value}"])
            except SystemExit as exc:  # argparse's own usage errors
                code = exc.code
    finally:
        models.load_model = real
        if old is None:
            os.environ.pop("ATTN_LIB_CACHE_DIR", None)
        else:
            os.environ["ATTN_LIB_CACHE_DIR"] = old
    text = err.getvalue()
    assert code in (0, 2), (code, text)
    assert "Traceback" not in text
    errors = [line for line in text.splitlines() if "error:" in line]
    assert code == 0 or len(errors) == 1, text
