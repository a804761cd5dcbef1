"""Figures, claims and the reproduction report of a run (Reading the paper, §Rows, heads and figures).

The package reads top-down:

* :mod:`~attn_lib.report.claims` -- the paper's claims as data (:data:`CLAIMS`, one :class:`Claim` per id) and
  :func:`verdicts`, which applies every rule; :func:`tally` counts the verdicts apart by kind of evidence. The
  machinery (:class:`Claim`, :class:`Outcome`, the registry) is :mod:`~attn_lib.report.claim`; the claims are in one
  module per figure: ``claims_distance`` (Figs. 2a, 2b), ``claims_critical`` (Fig. 2c), ``claims_separability``
  (Fig. 3), ``claims_sensitivity`` (Fig. 4) and ``claims_multihead`` (the Discussion);
* :mod:`~attn_lib.report.critical` -- the critical-N diagnosis (``prop-e1-crossing`` of chapter 6);
* :mod:`~attn_lib.report.reproduction` -- the reproduction report's tables (one model, or several side by side);
* :mod:`~attn_lib.report.figures` -- the paper's Figs. 2a, 2b, 2c, 3 and 4, each labelled with model, text and
  device; :mod:`~attn_lib.report.output` -- ``report.md``, ``results.json`` and the figures written to a folder;
* :mod:`~attn_lib.report.separability` -- the per-N summary behind Fig. 3;
* :mod:`~attn_lib.report.beyond` -- ``compare-normalizers``' tables and figures (chapter 7);
* :mod:`~attn_lib.report._common` -- the thresholds and the helpers they all share.

The chapters' own tables are in :mod:`attn_lib.book.tables`.

Verdicts describe *the model that was run*: the offline stand-in is not GPT-2, and every table says which model
produced it.
"""

from __future__ import annotations

from ._common import (
    CRITICAL_FORM_NAMES,
    KS_SAMPLING,
    THRESHOLDS,
    label,
    linear_growth,
    sensitivity_curves,
    valid_ks_sampling,
)
from .beyond import beyond_limits_markdown, beyond_swap_table, figure_beyond_limits, figure_beyond_swap, render_swap_row
from .claims import CLAIMS, EVIDENCE, VERDICTS, Claim, Outcome, ids_for, tally, verdicts
from .critical import (
    critical_rows,
    diagnosis_first_pass,
    diagnosis_markdown,
    diagnosis_summary,
    figure_critical_diagnosis,
    required_rho,
)
from .figures import (
    FIGURES,
    figure_critical_n,
    figure_distance_vs_length,
    figure_distance_vs_n,
    figure_sensitivity,
    figure_separability,
    save_figure,
    write_figures,
)
from .output import markdown_report, results_json, write_report
from .reproduction import (
    VERDICT_COLOURS,
    claim_details_markdown,
    figure_verdicts,
    model_column,
    reproduction_table,
    short_cause,
    side_by_side,
    side_by_side_markdown,
    tally_markdown,
)
from .separability import separability_per_n

__all__ = [
    "THRESHOLDS",
    "CLAIMS",
    "EVIDENCE",
    "VERDICTS",
    "Claim",
    "Outcome",
    "verdicts",
    "tally",
    "ids_for",
    "linear_growth",
    "CRITICAL_FORM_NAMES",
    "KS_SAMPLING",
    "valid_ks_sampling",
    "sensitivity_curves",
    "label",
    "diagnosis_summary",
    "diagnosis_first_pass",
    "diagnosis_markdown",
    "required_rho",
    "critical_rows",
    "figure_critical_diagnosis",
    "FIGURES",
    "figure_distance_vs_length",
    "figure_distance_vs_n",
    "figure_critical_n",
    "figure_separability",
    "figure_sensitivity",
    "write_figures",
    "save_figure",
    "separability_per_n",
    "results_json",
    "markdown_report",
    "write_report",
    "reproduction_table",
    "tally_markdown",
    "claim_details_markdown",
    "figure_verdicts",
    "VERDICT_COLOURS",
    "short_cause",
    "model_column",
    "side_by_side",
    "side_by_side_markdown",
    "beyond_limits_markdown",
    "figure_beyond_limits",
    "figure_beyond_swap",
    "beyond_swap_table",
    "render_swap_row",
]
