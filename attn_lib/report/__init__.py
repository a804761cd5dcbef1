"""The reproduction report of a run: its tables, the paper's figures and the files ``reproduce`` and
``compare-normalizers`` write (Reading the paper, §Rows, heads and figures). It only presents: the claims, rules and
statistics are :mod:`attn_lib.claims`'s. Verdicts describe *the model that was run*: the offline stand-in is not
GPT-2, and every table names its model.
"""

from __future__ import annotations

from ._common import CRITICAL_FORM_NAMES, KS_SAMPLING, label, sensitivity_curves  # noqa: F401
from .beyond import beyond_limits_markdown, beyond_swap_table, figure_beyond_limits, figure_beyond_swap
from .critical import diagnosis_markdown, figure_critical_diagnosis
from .figures import (  # noqa: F401
    FIGURES,
    figure_critical_n,
    figure_distance_vs_length,
    figure_distance_vs_n,
    figure_sensitivity,
    figure_separability,
    save_figure,
    write_figures,
)
from .output import markdown_report, results_json, write_report  # noqa: F401
from .reproduction import (  # noqa: F401
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
from .summary import say, summary_markdown

# what the book and the CLI show; the helpers imported above (label, save_figure, FIGURES, ...) are not listed
__all__ = ["figure_distance_vs_length", "figure_distance_vs_n", "figure_critical_n", "figure_separability"]
__all__ += ["figure_sensitivity", "separability_per_n", "sensitivity_curves"]  # the paper's figures
__all__ += ["diagnosis_markdown", "figure_critical_diagnosis"]  # the critical-N diagnosis
__all__ += ["reproduction_table", "tally_markdown", "summary_markdown", "say", "claim_details_markdown"]
__all__ += ["figure_verdicts", "model_column", "side_by_side", "side_by_side_markdown", "write_report"]
__all__ += ["beyond_limits_markdown", "beyond_swap_table", "figure_beyond_limits", "figure_beyond_swap"]  # chapter 7
