r"""The paper's Algorithms 1-5 on a real model (Reading the paper, §Decisions for the experiments), as tidy tables, and
every normaliser measured on the paper's limits and swapped into the live model (chapter 7, "Beyond softmax").

Every experiment reads the attention of one token window, and all share the **same forward pass**
(:mod:`~attn_lib.experiments.passes`: nested prefixes of one causal window, one layer at a time). Each returns a
:class:`pandas.DataFrame` whose every row carries ``model``, ``text`` and ``device``, and owns a frozen dataclass of
its parameters (defaults, checks) that its analysis reads. The modules, top-down:

- ``inputs``: :func:`load_inputs`, :func:`text_window`, the labels of every table;
- ``passes``: the shared forward pass, :class:`~attn_lib.experiments.passes.Experiment` (what an experiment provides),
  the result-cache key;
- ``distance``: Algorithms 1-2, :func:`distance_vs_length` (Fig. 2a), :func:`distance_vs_n` (Fig. 2b);
- ``critical``: Algorithm 3, :func:`critical_n` (the KS trace, Fig. 2c), :func:`critical_n_summary`;
- ``separability``: Algorithm 4, :func:`separability` (Fig. 3);
- ``sensitivity``: Algorithm 5, :func:`gradient_sensitivity` (Fig. 4), :func:`gradient_sensitivity_raw`;
- ``coverage``: :func:`multihead_coverage` (chapter 5); ``diagnosis``: :func:`critical_n_diagnosis` (chapter 6);
- ``profiles``: the grids, :data:`PROFILES` (the reproduction's) and :data:`BEYOND_PROFILES` (chapter 7's);
- ``weights``: limits of any weights (``row_sample``, ``row_metrics``, ``softmax_type_spectral_norm``);
- ``normalizers``: :func:`compare_normalizers` and its summaries; ``swap``: :func:`live_swap` (chapter 7; its
  sliders: :mod:`attn_lib.book.swap_view`);
- ``jobs``: :func:`run_all` (every experiment of a profile in one pass, cached), :func:`run_reproduce` (the
  ``reproduce`` command), :func:`run_compare` (``compare-normalizers``).

``from attn_lib import experiments; experiments.run_all(...)``; a module's helpers by its name
(``experiments.swap.HELD_OUT_START``)."""

from __future__ import annotations

from .coverage import CoverageParams, multihead_coverage
from .critical import CriticalNParams, critical_n, critical_n_summary
from .diagnosis import DiagnosisParams, critical_n_diagnosis
from .distance import DistanceVsLengthParams, DistanceVsNParams, distance_vs_length, distance_vs_n
from .inputs import load_inputs, text_window
from .jobs import run_all, run_compare, run_reproduce
from .normalizers import compare_normalizers, critical_n_from_heads, limits_summary, normalizer_settings
from .profiles import BEYOND_PROFILES, PROFILES, BeyondProfile, Profile
from .sensitivity import SensitivityParams, gradient_sensitivity, gradient_sensitivity_raw
from .separability import SeparabilityParams, separability
from .swap import SwapResult, live_swap

__all__ = [
    # grids and inputs
    "Profile",
    "PROFILES",
    "BeyondProfile",
    "BEYOND_PROFILES",
    "load_inputs",
    "text_window",
    # the experiments and their parameters
    "distance_vs_length",
    "DistanceVsLengthParams",
    "distance_vs_n",
    "DistanceVsNParams",
    "critical_n",
    "CriticalNParams",
    "critical_n_summary",
    "separability",
    "SeparabilityParams",
    "gradient_sensitivity",
    "SensitivityParams",
    "gradient_sensitivity_raw",
    "multihead_coverage",
    "CoverageParams",
    "critical_n_diagnosis",
    "DiagnosisParams",
    # beyond softmax
    "normalizer_settings",
    "compare_normalizers",
    "critical_n_from_heads",
    "limits_summary",
    "live_swap",
    "SwapResult",
    # jobs
    "run_all",
    "run_reproduce",
    "run_compare",
]
