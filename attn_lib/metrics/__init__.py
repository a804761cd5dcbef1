r"""Vectorised per-row metrics of the paper, batched over heads and causal query rows (Reading the paper).

:mod:`attn_lib.theory` holds the readable one-row reference definitions; this package computes the same quantities
for every head ``h`` and query row ``r`` of a layer at once. Each metric is defined once, by its torch code (the
paper's Appendix-B pseudocode, any device, the dtype of the :class:`LayerData`, float64 by default); on CPU with
prefix masks a faster implementation registered by an accelerator (:mod:`attn_lib.accel`, compiled numba kernels held
to the torch definitions by ``tests/test_accel.py``) may run instead (:mod:`~attn_lib.metrics._engine`).

Shared arguments: ``layer, values, mask`` is a :class:`LayerData`, or raw weights ``(H, L, L)`` (row ``r`` the
query), values ``(H, L, d)`` (the vectors :math:`x_i`, Reading the paper, §Distance) and an optional mask (``True``
= visible; default causal). Row ``r`` uses only its ``t_r`` visible tokens (§Causal masking); a top-``N`` metric is
defined for a row only if ``t_r >= N + 1``: every function returns a ``valid`` mask, entries of other rows are
``0.0`` (aggregate with :func:`masked_mean`). ``engine`` is ``"auto"`` (the accelerator where it applies -- CPU
float64 tensors and prefix masks -- else torch), ``"numba"`` (the accelerator; a ``ValueError`` where it does not
apply) or ``"torch"`` (the definition: any device, dtype and mask). The :data:`settings` are read at call time
(``with attn_lib.metrics.configure(default_engine="torch"): ...`` for a block).
"""

from __future__ import annotations

# block_parallel, masked_mean, top_n_order, running_min_distance and unit_layer: importable here, not in __all__
from ._engine import block_parallel, configure, settings  # noqa: F401
from .coverage import coverage_metrics
from .crossing import crossing_metrics
from .distance import distance_metrics
from .layer import LayerData, masked_mean, top_n_order  # noqa: F401
from .montecarlo import expected_distance_mc, expected_distance_mc_scan
from .scan import topn_scan
from .sensitivity import sensitivity_rows
from .separability import running_min_distance, separability_metrics, unit_layer  # noqa: F401

__all__ = [
    "LayerData",
    "distance_metrics",
    "topn_scan",
    "expected_distance_mc",
    "expected_distance_mc_scan",
    "separability_metrics",
    "coverage_metrics",
    "crossing_metrics",
    "sensitivity_rows",
    "settings",
    "configure",
]
