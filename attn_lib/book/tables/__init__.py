"""The chapters' own tables and figures of a model run: what only the book shows, apart from the reproduction
report that ``reproduce`` writes (:mod:`attn_lib.report`). One module per chapter:

* :mod:`~attn_lib.book.tables.distance` (chapter 2: the tables of Algorithms 1-3, the critical-N ratio);
* :mod:`~attn_lib.book.tables.separability` (chapter 3: the shape of the median curve of Fig. 3);
* :mod:`~attn_lib.book.tables.sensitivity` (chapter 4: Fig. 4's slopes against Corollary 3's bounds);
* :mod:`~attn_lib.book.tables.multihead` and :mod:`~attn_lib.book.tables.swap` (chapter 5: multi-head coverage,
  the normalisers swapped into the model);
* :mod:`~attn_lib.book.tables.critical` and :mod:`~attn_lib.book.tables.reproduction` (chapter 6: the rows behind
  each critical N, the setting and run times against the paper's, the compact verdict table and the rules).

Every public name is re-exported here (``from attn_lib.book import tables``; ``tables.distance_n_table(df)``).
"""

from __future__ import annotations

from .critical import critical_rows_table
from .distance import (
    DISTANCE_NAMES,
    critical_n_lines,
    critical_n_ratio,
    distance_length_fits,
    distance_length_means,
    distance_n_table,
    mc_scan_words,
)
from .multihead import figure_multihead_coverage, heads_needed_distribution, multihead_coverage_table
from .reproduction import PAPER_TABLE1, reproduction_markdown, rules_markdown, runtime_table, setting_differences
from .sensitivity import sensitivity_bounds, sensitivity_findings, sensitivity_table
from .separability import separability_shape
from .swap import figure_normaliser_swap, normaliser_swap_findings, normaliser_swap_markdown, normaliser_swap_summary

__all__ = [
    "critical_rows_table",
    "DISTANCE_NAMES",
    "critical_n_lines",
    "critical_n_ratio",
    "distance_length_fits",
    "distance_length_means",
    "distance_n_table",
    "mc_scan_words",
    "figure_multihead_coverage",
    "heads_needed_distribution",
    "multihead_coverage_table",
    "PAPER_TABLE1",
    "reproduction_markdown",
    "rules_markdown",
    "runtime_table",
    "setting_differences",
    "sensitivity_bounds",
    "sensitivity_findings",
    "sensitivity_table",
    "separability_shape",
    "figure_normaliser_swap",
    "normaliser_swap_findings",
    "normaliser_swap_markdown",
    "normaliser_swap_summary",
]
