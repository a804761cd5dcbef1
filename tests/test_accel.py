"""The accelerator (issue 33): every implementation registered in ``attn_lib.metrics._engine.ACCELERATED`` is held
to the torch definition of its metric, and without numba attn_lib runs on its torch code alone.

* :func:`test_each_accelerated_metric_matches_its_torch_definition`: one case per registered name, on a small random
  layer, the whole metric run with ``default_engine="numba"`` (checked to call the registered implementation) and
  with ``"torch"``: 1e-9 relative, 1e-6 for the scans' float32 square roots (``attn_lib.accel.kernels``). The
  engine-agreement tests of ``test_metrics.py``, ``test_critical.py`` and ``test_beyond.py`` go further (larger
  layers, ties, every ``p``); this one makes sure no registered name goes untested.
* :func:`test_without_numba_the_metrics_and_an_experiment_run_on_torch`: with ``sys.modules["numba"] = None`` set
  before ``import attn_lib``, no implementation is registered, ``attn-lib info``'s reason says why, the metrics give
  the torch path's numbers, and the experiments on a tiny random GPT-2 match the accelerated run.
"""

from __future__ import annotations

import math
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from attn_lib import experiments as E
from attn_lib import metrics as M
from attn_lib.experiments import sensitivity as ES
from attn_lib.experiments import weights as W
from attn_lib.metrics import _engine

ROOT = Path(__file__).resolve().parents[1]


def _logits(H=2, L=24, seed=5):
    g = torch.Generator().manual_seed(seed)
    causal = torch.ones(L, L, dtype=torch.bool).tril()
    return (torch.randn(H, L, L, generator=g, dtype=torch.float64) * 2).masked_fill(~causal, -math.inf)


def _layer(H=2, L=24, d=5, seed=5):
    """A fresh layer (nothing cached): causal softmax weights and random values."""
    g = torch.Generator().manual_seed(seed + 1)
    return M.LayerData.from_logits(_logits(H, L, seed), torch.randn(H, L, d, generator=g, dtype=torch.float64))


def _fields(obj, names):
    return [getattr(obj, n) for n in names]


def _distance():
    out = []
    for N, d1_max_n in ((3, 64), (8, 0)):  # d_1 in the per-row kernel, then by the running-maximum kernel
        with M.configure(kernel_d1_max_n=d1_max_n):
            r = M.distance_metrics(_layer(), N=N)
        out += _fields(r, ("d_tilde", "e1", "e1_gap", "e1_gap_crude", "e2", "s_norm", "d1", "max_norm", "d_max"))
    return out


def _row_metrics():
    ld = _layer()
    rows = [5, 11, 23]
    res = W.row_metrics(ld.alpha[:, rows], ld.values, ld.mask[0, rows], [1, 3, 6], unit=True)
    return [res[k] for k in ("d_tilde", "e1", "sep")]


def _log_sums():
    """The sqrt(5) eps example's sums: logits shifted to a row maximum of 0, the row's largest as -inf (left out, as
    there), at temperatures from 1e-3 (most terms underflow) to 100; every width, and rows left empty."""
    x = _logits(L=24)
    x = (x - x.amax(-1, keepdim=True)).masked_fill(x == x.amax(-1, keepdim=True), -math.inf)
    last = list(range(24))
    return list(ES.log_sums(x, last, [1e-3, 0.1, 1.0, 100.0]))


def _mc_scan():
    out = []
    for cv, strat in ((False, False), (True, True)):
        r = M.expected_distance_mc_scan(_layer(), n_max=8, n_samples=4, control_variate=cv, stratify=strat)
        # the float32 roots round the standard error relative to the distances, not to their (small) spread
        out += [r.mean, r.mean + r.stderr]
    return out


#: name -> (the metric's results as a list of tensors, relative tolerance)
CASES = {
    "distance_metrics": (_distance, 1e-9),
    "topn_scan": (lambda: _fields(M.topn_scan(_layer(), n_max=12, n_min=2), ("d_tilde", "e1", "e2")), 1e-6),
    "expected_distance_mc": (
        lambda: _fields(M.expected_distance_mc(_layer(), N=4, n_samples=6), ("mean", "stderr")),
        1e-9,
    ),
    "expected_distance_mc_scan": (_mc_scan, 1e-6),
    "separability_metrics": (
        lambda: _fields(M.separability_metrics(_layer(), N=4), ("fraction", "flags", "lower", "upper", "r", "delta")),
        1e-9,
    ),
    "running_min_distance": (lambda: [M.running_min_distance(_layer())], 1e-9),
    "top_n_order": (lambda: [_layer().order(7)], 0.0),
    "sensitivity_rows": (lambda: list(M.sensitivity_rows(_logits(), [0.5, 1.0, 4.0], [1e-2, 1.0], seed=2)), 1e-9),
    "log_sums": (_log_sums, 1e-9),
    "crossing_metrics": (
        lambda: _fields(
            M.crossing_metrics(_layer().alpha[:, [4, 15, 23]], _layer().values, [1, 3, 5]),
            ("d_tilde", "e1", "s_norm", "a_out", "valid"),
        ),
        1e-9,
    ),
    "row_metrics": (_row_metrics, 1e-9),
}


def test_every_registered_metric_has_a_case():
    """A newly registered implementation fails here until it has a case in :data:`CASES` (``"warm_up"`` is not a
    metric: ``tests/test_experiments.py`` checks that it compiles what the runs use)."""
    if M._engine.accelerated("distance_metrics") is None:
        pytest.skip(f"no accelerator: {M._engine.accelerators()}")
    assert set(_engine.ACCELERATED) - {"warm_up"} == set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_accelerated_metric_matches_its_torch_definition(name, monkeypatch):
    impl = M._engine.accelerated(name)
    if impl is None:
        pytest.skip(f"no accelerator: {M._engine.accelerators()}")
    calls = []

    def counted(*args, **kwargs):
        calls.append(name)
        return impl(*args, **kwargs)

    monkeypatch.setitem(_engine.ACCELERATED, name, counted)
    run, rtol = CASES[name]
    with M.configure(default_engine="numba"):
        fast = run()
    assert calls, f"the case of {name} never called its accelerated implementation"
    with M.configure(default_engine="torch"):
        ref = run()
    assert len(fast) == len(ref)
    for i, (a, b) in enumerate(zip(fast, ref)):
        if rtol == 0.0 or a.dtype == torch.bool:
            assert torch.equal(a, b), (name, i)
        else:
            torch.testing.assert_close(a, b, rtol=rtol, atol=1e-12, msg=f"{name}, result {i}")


# ------------------------------------------------------------------------------------------------------------------
# without numba
# ------------------------------------------------------------------------------------------------------------------
_NO_NUMBA = r"""
import pickle, sys
sys.modules["numba"] = None  # `import numba` raises ImportError from here on
sys.path.insert(0, sys.argv[2])  # tests/: the tiny GPT-2 config and the profile of the experiment tests
import torch
import attn_lib
from attn_lib import experiments as E
from attn_lib import metrics as M
from attn_lib.models import from_config
from conftest import tiny_gpt2_config
from test_experiments import PROFILE, TEXT

g = torch.Generator().manual_seed(0)
x = torch.randn(2, 16, 16, generator=g, dtype=torch.float64).masked_fill(~torch.ones(16, 16).bool().tril(), -torch.inf)
ld = M.LayerData.from_logits(x, torch.randn(2, 16, 4, generator=g, dtype=torch.float64))
out = {"accelerated": M._engine.accelerated("distance_metrics"), "info": M._engine.accelerators()}
out["d_tilde"] = M.distance_metrics(ld, N=3).d_tilde
out["scan"] = M.topn_scan(ld, n_max=6).e1
try:
    M.distance_metrics(ld, N=3, engine="numba")
except ValueError as exc:
    out["numba_error"] = str(exc)
out["accel_modules"] = sorted(m for m in sys.modules if m.startswith("attn_lib.accel"))
h = from_config(tiny_gpt2_config(), device="cpu", seed=0, name="tiny-gpt2")
out["tables"] = E.run_all(h, TEXT, PROFILE)
with open(sys.argv[1], "wb") as f:
    pickle.dump(out, f)
"""


def _assert_tables_close(a: pd.DataFrame, b: pd.DataFrame, rtol: float, name: str) -> None:
    assert list(a.columns) == list(b.columns) and len(a) == len(b), name
    for col in a.columns:
        x, y = a[col], b[col]
        if pd.api.types.is_float_dtype(x):
            np.testing.assert_allclose(x.to_numpy(), y.to_numpy(), rtol=rtol, atol=1e-12, err_msg=f"{name}.{col}")
        else:
            assert x.tolist() == y.tolist(), (name, col)


def test_without_numba_the_metrics_and_an_experiment_run_on_torch(tmp_path, tiny_gpt2):
    from test_experiments import PROFILE, TEXT  # the profile of the experiment tests (tests/ is on sys.path)

    out_file = tmp_path / "out.pkl"
    r = subprocess.run(
        [sys.executable, "-c", _NO_NUMBA, str(out_file), str(ROOT / "tests")],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    out = pickle.loads(out_file.read_bytes())
    assert out["accelerated"] is None
    assert out["info"].startswith("none: ") and "numba" in out["info"], out["info"]
    assert "engine='numba' needs numba" in out["numba_error"]
    assert out["accel_modules"] == [], "a failed import of attn_lib.accel left modules behind"
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 16, 16, generator=g, dtype=torch.float64)
    x = x.masked_fill(~torch.ones(16, 16).bool().tril(), -torch.inf)
    ld = M.LayerData.from_logits(x, torch.randn(2, 16, 4, generator=g, dtype=torch.float64))
    assert torch.equal(out["d_tilde"], M.distance_metrics(ld, N=3, engine="torch").d_tilde)
    assert torch.equal(out["scan"], M.topn_scan(ld, n_max=6, engine="torch").e1)
    fast = E.run_all(tiny_gpt2, TEXT, PROFILE)  # the default run: the accelerator where numba imports
    assert sorted(fast) == sorted(out["tables"])
    for name, table in fast.items():
        # the critical-N tables pass through the scans' float32 square roots; the others are float64 throughout
        _assert_tables_close(out["tables"][name], table, 1e-6 if "critical" in name else 1e-9, name)
