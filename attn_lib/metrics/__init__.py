r"""Vectorised per-row metrics of the paper, batched over heads and causal query rows (Reading the paper).

:mod:`attn_lib.theory` holds the readable one-row reference definitions; this package computes the same
quantities for a whole layer at once -- every head ``h`` and every query row ``r`` of an attention matrix --
without a Python loop over tokens. Everything is float64.

Inputs (one layer):

* ``weights`` ``(H, L, L)`` -- attention weights, row ``r`` is the query; or ``logits`` with a ``mask`` (softmax
  with temperature ``T`` is then taken in float64);
* ``values`` ``(H, L, d)`` -- the vectors :math:`x_i` (per-head value vectors, Reading the paper, §Distance);
* ``mask`` -- bool, ``True`` = visible, broadcastable to ``(H, L, L)``; default: causal (row ``r`` sees ``0..r``).

Row ``r`` uses only its ``t_r`` visible tokens (``L_t = t``, Reading the paper, §Causal masking). A top-``N``
metric is defined for a row only if ``t_r >= N + 1``; every function returns a ``valid`` mask, and entries of rows
that do not qualify are ``0.0`` (never NaN). Aggregate with :func:`masked_mean`.

One module per experiment; each public function checks its input and runs its torch code, the definition of the
metric, or -- on CPU with prefix masks -- a faster implementation registered by an accelerator (:mod:`attn_lib.accel`,
the compiled numba kernels, which the tests hold to the torch definitions; :mod:`~attn_lib.metrics._engine`):

* :mod:`~attn_lib.metrics.layer` -- :class:`LayerData` (one layer, Gram matrix, top-``N`` order, row blocks),
  :func:`top_n_order`, :func:`masked_mean`;
* :mod:`~attn_lib.metrics.distance` -- :func:`distance_metrics` (d~, d_max, E1 + Jensen gap, E2 at one ``N``);
* :mod:`~attn_lib.metrics.scan` -- :func:`topn_scan` (the same for every ``N`` in a range, incrementally: the
  critical-N scan) and :func:`naive_scan` (its non-incremental reference);
* :mod:`~attn_lib.metrics.montecarlo` -- :func:`expected_distance_mc` (Monte-Carlo E[d~] at one ``N``) and
  :func:`expected_distance_mc_scan` (every ``N`` of a range at once, for the critical-N scan);
* :mod:`~attn_lib.metrics.separability` -- :func:`separability_metrics` (``N_s/N`` and Theorem 2's bounds),
  :func:`unit_layer`, :func:`running_min_distance`;
* :mod:`~attn_lib.metrics.sensitivity` -- :func:`sensitivity_rows` (``g(T, eps)`` per row);
* :mod:`~attn_lib.metrics.coverage` -- :func:`separable_sets` (each head's separable top-``N`` tokens) and
  :func:`coverage_metrics` (multi-head coverage of the head-averaged top-``N``);
* :mod:`~attn_lib.metrics._engine` -- the registry of accelerated implementations and the engine choice
  (:func:`accelerated`, :func:`choose`, :func:`accelerators`, also for :mod:`attn_lib.experiments`), the settings
  below, :func:`block_parallel`, :func:`coarse_threads` and :func:`large_ops`.

Settings: :data:`settings`, one plain :class:`Settings` object that every module reads at call time --
``default_engine`` (what ``engine="auto"`` means; environment variable ``ATTN_LIB_ENGINE``), ``block_elems`` and
``scan_block_elems`` (row-block sizes of the torch code), ``kernel_d1_max_n`` and ``order_prefetch_div``. Change
them for a block with ``with attn_lib.metrics.configure(default_engine="torch"): ...``, or assign an attribute of
``attn_lib.metrics.settings``.
"""

from __future__ import annotations

from ._engine import F64 as F64
from ._engine import (
    Settings,
    accelerated,
    accelerators,
    block_parallel,
    choose,
    coarse_threads,
    configure,
    large_ops,
    settings,
)
from .coverage import CoverageRows, SeparableSets, coverage_metrics, separable_sets
from .crossing import CrossingRows, crossing_metrics
from .distance import DistanceRows, distance_metrics
from .layer import LayerData, masked_mean, top_n_order
from .montecarlo import MCRows, MCScanRows, expected_distance_mc, expected_distance_mc_scan, mc_permutations
from .scan import ScanRows, naive_scan, topn_scan
from .sensitivity import sensitivity_rows
from .separability import SeparabilityRows, running_min_distance, separability_metrics, unit_layer

__all__ = [
    "Settings",
    "settings",
    "configure",
    "LayerData",
    "CrossingRows",
    "crossing_metrics",
    "DistanceRows",
    "ScanRows",
    "MCRows",
    "MCScanRows",
    "SeparabilityRows",
    "SeparableSets",
    "CoverageRows",
    "distance_metrics",
    "topn_scan",
    "naive_scan",
    "expected_distance_mc",
    "expected_distance_mc_scan",
    "mc_permutations",
    "separability_metrics",
    "sensitivity_rows",
    "separable_sets",
    "coverage_metrics",
    "masked_mean",
    "top_n_order",
    "block_parallel",
    "coarse_threads",
    "large_ops",
    "accelerated",
    "accelerators",
    "choose",
    "unit_layer",
    "running_min_distance",
]
