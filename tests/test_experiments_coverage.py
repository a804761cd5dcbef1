"""attn_lib.experiments.multihead_coverage on a tiny random-init Llama (grouped-query attention, 2 layers x 4 heads):
the table against attn_lib.metrics.coverage_metrics on the captured layers, its invariants, cache and bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest

from attn_lib import experiments as E
from attn_lib import metrics as M
from attn_lib.capture import collect_attention
from attn_lib.experiments import passes

pytestmark = pytest.mark.numerical  # run twice by `make test`: with the accelerator, and --without-numba

TEXT = (
    "Well, Prince, so Genoa and Lucca are now just family estates of the Buonapartes. But I warn you, if you "
    "don't tell me that this means war, I will not believe it. "
) * 12
L, N = 32, 4


@pytest.fixture(scope="module")
def table(tiny_llama):
    return E.multihead_coverage(tiny_llama, TEXT, L=L, N=N, permutations=3, seed=5)


def test_one_row_per_layer_and_head_count(table, tiny_llama):
    assert len(table) == tiny_llama.n_layers * tiny_llama.n_heads
    assert sorted(table["H"].unique()) == list(range(1, tiny_llama.n_heads + 1))
    assert (table["n_rows"] == L - N).all() and (table["permutations"] == 3).all()
    for c in ("model", "text", "device"):
        assert c in table


def test_matches_the_metric_on_the_captured_layers(table, tiny_llama):
    ids = E.text_window(tiny_llama, TEXT, L)
    for la in collect_attention(tiny_llama, ids, keep_qk=False):
        ld = M.LayerData.from_logits(la.logits[0], la.values[0], mask=passes.layer_mask(la))
        cov = M.coverage_metrics(ld, N=N, permutations=3, seed=5 + la.layer)
        got = table[table.layer == la.layer].sort_values("H")
        np.testing.assert_allclose(got["coverage"], cov.coverage[cov.valid].mean(0).numpy(), rtol=1e-12)
        needed = cov.needed[:, cov.valid]
        expected = [float(((needed >= 1) & (needed <= k)).double().mean()) for k in got["H"]]
        np.testing.assert_allclose(got["covered"], expected, rtol=1e-12)
        assert math.isclose(got["fraction"].iloc[0], float(cov.fraction[:, cov.valid].mean()), rel_tol=1e-12)


def test_coverage_is_a_fraction_that_grows_with_heads(table):
    assert table["coverage"].between(0, 1).all() and table["covered"].between(0, 1).all()
    for _, g in table.groupby("layer"):
        g = g.sort_values("H")
        assert (np.diff(g["coverage"]) >= 0).all() and (np.diff(g["covered"]) >= 0).all()


def test_cached_result_is_returned(tiny_llama, tmp_path, monkeypatch):
    from attn_lib.cache import ResultCache

    cache = ResultCache(tmp_path)
    first = E.multihead_coverage(tiny_llama, TEXT, L=16, N=2, permutations=2, cache=cache)
    monkeypatch.setattr(passes, "run_pass", lambda *a, **k: pytest.fail("recomputed instead of read from the cache"))
    again = E.multihead_coverage(tiny_llama, TEXT, L=16, N=2, permutations=2, cache=cache)
    np.testing.assert_allclose(again["coverage"], first["coverage"])


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(L=1), "L"),
        (dict(L=16, N=16), "N"),
        (dict(L=16, N=0), "N"),
        (dict(L=16, N=2, permutations=0), "permutations"),
        (dict(L=16, N=2, seed=-1), "seed"),
    ],
)
def test_bad_arguments_are_refused(tiny_llama, kwargs, name):
    with pytest.raises(ValueError, match=name):
        E.multihead_coverage(tiny_llama, TEXT, **kwargs)
