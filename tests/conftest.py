"""Shared fixtures.

* The test suite never touches the network: ``HF_HUB_OFFLINE`` and ``ATTN_LIB_OFFLINE`` are set before transformers
  is imported (an uncached ``from_pretrained`` would otherwise retry for minutes when the Hub is unreachable). Tests
  of the online code paths mock the network instead.
* ``tiny_gpt2`` / ``tiny_llama``: session-scoped random-init :class:`~attn_lib.models.ModelHandle` objects (2 layers,
  4 heads of dimension 8, context 128, the 256-symbol byte tokenizer; the Llama one uses grouped-query attention with
  2 key/value heads). They are shared: a test may run them (captures restore the attention implementation) but must
  not change their weights or config.
* ``tmp_cache``: points ``ATTN_LIB_CACHE_DIR`` (and so the result and text caches) at a fresh temporary folder.
  ``ATTN_LIB_MODEL_DIR`` is left alone so slow tests reuse the converted stand-in.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ATTN_LIB_OFFLINE", "1")

import sys

import pytest


def pytest_addoption(parser):
    parser.addoption(
        "--without-numba",
        action="store_true",
        help="run as on a machine without numba (sys.modules['numba'] = None before attn_lib is imported): every "
        "metric runs its torch definition; `make test` runs the tests marked `numerical` this way too",
    )


def pytest_configure(config):
    if config.getoption("--without-numba"):
        if any(name == "attn_lib" or name.startswith("attn_lib.") for name in sys.modules):
            raise pytest.UsageError("--without-numba: attn_lib was imported before the option could take effect")
        sys.modules["numba"] = None  # `import numba` now raises ImportError: attn_lib.accel registers nothing


def _background_modules(items) -> list:
    """The test modules among ``items`` that define ``start_background(config)``: a slow setup that mostly waits
    (tests/test_bare_install.py: pip building a clean venv), started once the session has collected them."""
    mods = {getattr(item, "module", None) for item in items}
    return [m for m in mods if m is not None and callable(getattr(m, "start_background", None))]


def pytest_collection_modifyitems(config, items):
    """The tests of a module with a background setup go last (a stable sort), so that its setup overlaps the other
    tests (pytest-xdist's ``--dist loadfile`` hands out the files with the most tests first, and this one has two).

    With --without-numba, a test that compares the compiled kernels with the torch definitions (marked ``accel``,
    or parametrised with ``"numba"``) has nothing to compare: it is skipped, and says why."""
    background = set(_background_modules(items))
    if background:
        items.sort(key=lambda item: getattr(item, "module", None) in background)
    if not config.getoption("--without-numba"):
        return
    skip = pytest.mark.skip(reason="compares the compiled kernels with torch: nothing to compare without numba")
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if item.get_closest_marker("accel") or any(isinstance(v, str) and v == "numba" for v in params.values()):
            item.add_marker(skip)


def pytest_collection_finish(session):
    """Start the background setups of the modules this session will run (after ``-m``/``-k`` deselection; each
    setup runs once per test run, under pytest-xdist too: the module keys it by the run's id)."""
    if session.config.option.collectonly:
        return
    for module in _background_modules(session.items):
        module.start_background(session.config)


def pytest_report_header(config):
    return (
        "numba: blocked (--without-numba), every metric runs its torch definition"
        if config.getoption("--without-numba")
        else None
    )


def naive_scan(layer, values=None, n_max: int = 16, *, n_min: int = 1, mask=None, p="L-1"):
    """The reference for ``attn_lib.metrics.topn_scan`` (same arguments and result): ``distance_metrics`` recomputed
    from scratch for every ``N``, with no incremental update."""
    import numpy as np
    import torch

    from attn_lib.metrics import distance_metrics
    from attn_lib.metrics.layer import as_layer
    from attn_lib.metrics.scan import ScanRows

    ld = as_layer(layer, values, mask)
    per_n = [distance_metrics(ld, N=N, p=p, with_dmax=False) for N in range(n_min, n_max + 1)]
    stacked = {name: torch.stack([getattr(r, name) for r in per_n], -1) for name in ("valid", "d_tilde", "e1", "e2")}
    return ScanRows(n_values=np.arange(n_min, n_max + 1), **stacked)


def figure_provenance(fig):
    """The footer ``attn_lib.provenance.label_figure`` added to ``fig``, on one line, or ``None``."""
    from matplotlib.text import Text

    from attn_lib.provenance import PROVENANCE_GID

    for t in fig.texts:
        if isinstance(t, Text) and t.get_gid() == PROVENANCE_GID:
            return t.get_text().replace("\n", " ")  # label_figure breaks a long footer at spaces
    return None


def tiny_gpt2_config(**overrides):
    from transformers import GPT2Config

    kw = dict(
        n_layer=2,
        n_head=4,
        n_embd=32,
        n_positions=128,
        vocab_size=256,
        bos_token_id=0,
        eos_token_id=0,
        initializer_range=0.2,
    )
    kw.update(overrides)
    return GPT2Config(**kw)


def tiny_llama_config(**overrides):
    from transformers import LlamaConfig

    kw = dict(
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        hidden_size=32,
        intermediate_size=64,
        max_position_embeddings=128,
        vocab_size=256,
        bos_token_id=0,
        eos_token_id=0,
        pad_token_id=0,
        initializer_range=0.2,
    )
    kw.update(overrides)
    return LlamaConfig(**kw)


def small_profile(name, *, lengths, L, N, n_values, sep_n_values, temperatures, eps_values, mc, stage, crit_fraction):
    """A small :class:`attn_lib.experiments.Profile` for the tests: the grid ``lengths`` (Figs. 2a, 2c), the fixed
    window ``L`` (Figs. 2b, 3, 4, the diagnosis), ``N`` of Fig. 2a, the ``n_values`` of Figs. 2b and 3, the
    Monte-Carlo ``mc = (samples, rows)`` of Figs. 2a and 2b, and the critical-N scan's ``stage`` and ``crit_fraction``;
    every other parameter at its dataclass's default."""
    from attn_lib import experiments as E

    kw = dict(mc_samples=mc[0], mc_rows=mc[1])
    return E.Profile(
        name=name,
        distance_vs_length=E.DistanceVsLengthParams(N=N, lengths=lengths, **kw),
        distance_vs_n=E.DistanceVsNParams(L=L, n_values=n_values, **kw),
        critical_n=E.CriticalNParams(lengths=lengths, crit_fraction=crit_fraction, stage=stage),
        separability=E.SeparabilityParams(L=L, n_values=sep_n_values),
        gradient_sensitivity=E.SensitivityParams(L=L, temperatures=temperatures, eps_values=eps_values),
        critical_n_diagnosis=E.DiagnosisParams(L=L),
    )


@pytest.fixture(scope="session")
def tiny_gpt2():
    from attn_lib.models import from_config

    return from_config(tiny_gpt2_config(), device="cpu", seed=0, name="tiny-gpt2")


@pytest.fixture(scope="session")
def tiny_llama():
    from attn_lib.models import from_config

    return from_config(tiny_llama_config(), device="cpu", seed=0, name="tiny-llama")


@pytest.fixture(params=["gpt2", "llama"])
def tiny_handle(request, tiny_gpt2, tiny_llama):
    """Each tiny model in turn."""
    return tiny_gpt2 if request.param == "gpt2" else tiny_llama


@pytest.fixture
def tmp_cache(tmp_path, monkeypatch):
    """A fresh ``ATTN_LIB_CACHE_DIR`` for this test."""
    root = tmp_path / "attn_lib_cache"
    monkeypatch.setenv("ATTN_LIB_CACHE_DIR", str(root))
    return root


@pytest.fixture
def offline(monkeypatch):
    """The Hugging Face Hub and Project Gutenberg are unreachable (without waiting for a probe)."""
    import attn_lib.corpus as corpus
    import attn_lib.models.loading as loading

    monkeypatch.setattr(loading, "hub_reachable", lambda timeout=None: False)
    monkeypatch.setattr(corpus, "_host_reachable", lambda host, timeout=None: False)
