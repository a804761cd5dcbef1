r"""The paper's claims as data: one :class:`Claim` per claim (or per reading of one), looked up by its id.

Each claim holds a stable ``id``, the paper's words and where they stand, the reading it tests, the kind of
evidence its verdict is (:data:`EVIDENCE`), the book's block that forces or guarantees it, the appendix section
behind its project decisions, and its rule: a small function of the results that returns an :class:`Outcome`
(verdict, measured value, and for a row that differs from the paper the measured cause). :func:`verdicts` applies
every rule; the chapters, the tests, the CLI's ``report.md`` and the appendix links find a row by its ``id``.

The package holds the registry and nothing that presents it (tables and figures are :mod:`attn_lib.report`'s):

* ``claims.toml`` -- the claims as data, in the report's order: one ``[[claim]]`` table per claim, with the fields of
  :class:`Claim` (id, where, title, words, reading, evidence, basis, section, needs, rule, fails_if, weak);
* :mod:`~attn_lib.claims.claim` -- the machinery: :class:`Claim`, :class:`Outcome`, the registry :data:`CLAIMS`, the
  :func:`claim` decorator and :func:`~attn_lib.claims.claim.rule`, which registers a rule under its id with its fields
  from ``claims.toml``;
* one module of rules per figure of the paper: :mod:`~attn_lib.claims.distance` (Figs. 2a, 2b),
  :mod:`~attn_lib.claims.critical` (Fig. 2c), :mod:`~attn_lib.claims.separability` (Fig. 3, Theorem 2),
  :mod:`~attn_lib.claims.sensitivity` (Fig. 4, Corollary 3) and :mod:`~attn_lib.claims.multihead` (the Discussion);
* the statistics the rules read: :mod:`~attn_lib.claims.stats` (the thresholds :data:`THRESHOLDS`, head
  aggregates, fits, the linear-growth rule) and :mod:`~attn_lib.claims.diagnosis` (the critical-N diagnosis).

Adding a claim is one ``[[claim]]`` table in ``claims.toml`` (where it stands there is its place in the report), its
rule function with ``@rule("<id>")`` in the module of its figure (imported below), and its test (a tiny table on which
the rule passes and one on which it fails).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

# the claim modules register their rules in CLAIMS when imported; check_rules then puts CLAIMS in claims.toml's order
# isort: off
from . import distance  # noqa: F401  (Figs. 2a, 2b)
from . import critical  # noqa: F401  (Fig. 2c)
from . import separability  # noqa: F401  (Fig. 3, Theorem 2)
from . import sensitivity  # noqa: F401  (Fig. 4, Corollary 3)
from . import multihead  # noqa: F401  (the Discussion)
from . import training  # noqa: F401  (the abstract's training claim, chapter 8)

# isort: on
from .claim import CLAIMS, COLUMNS, EVIDENCE, NEAR_EMPTY, VERDICTS, Claim, Outcome, check_rules, claim, claim_row  # noqa: F401
from .diagnosis import critical_rows, diagnosis_first_pass, diagnosis_summary, required_rho  # noqa: F401
from .stats import THRESHOLDS, linear_growth, need_results, valid_ks_sampling

check_rules()  # every entry of claims.toml has its rule, and every rule its entry

# what the book shows; the rest (EVIDENCE, VERDICTS, COLUMNS, Outcome, claim_row, tally, diagnosis_first_pass,
# required_rho, ...) is importable from here or from its module
__all__ = [
    "CLAIMS",
    "Claim",
    "claim",
    "verdicts",
    "ids_for",
    "THRESHOLDS",
    "linear_growth",
    "valid_ks_sampling",
    "diagnosis_summary",
    "critical_rows",
]


def ids_for(*experiments: str) -> list[str]:
    """The ids of the claims whose rules read only the named results (e.g. ``ids_for("separability")``: the
    claims of Fig. 3), in :data:`CLAIMS`' order; a claim that needs nothing (an exact computation) is left out."""
    have = set(experiments)
    return [c.id for c in CLAIMS.values() if c.needs and set(c.needs) <= have]


def verdicts(results: dict, thresholds: dict | None = None, *, ids=None) -> pd.DataFrame:
    """Every claim of :data:`CLAIMS` (or those of ``ids``) applied to ``results``, one row each.

    Parameters
    ----------
    results : dict
        :func:`attn_lib.experiments.run_all`'s results; ``"multihead_coverage"`` may be added (chapter 5's
        experiment).
    thresholds : dict, optional
        Overrides of :data:`attn_lib.claims.stats.THRESHOLDS`.
    ids : sequence of str, optional
        Only these claims, in this order.

    Returns
    -------
    pandas.DataFrame
        The :data:`COLUMNS`; index 0..n-1 (look a row up with ``table.set_index("id")``).
    """
    need_results(results)
    chosen = list(CLAIMS) if ids is None else list(ids)
    unknown = [i for i in chosen if i not in CLAIMS]
    if unknown:
        raise ValueError(f"ids must be claim ids of attn_lib.claims.CLAIMS (unknown: {unknown})")
    return pd.DataFrame([claim_row(CLAIMS[i], results, thresholds) for i in chosen], columns=list(COLUMNS))


def tally(table: pd.DataFrame) -> pd.DataFrame:
    """Verdicts counted apart by kind of evidence: index ``evidence`` (in :data:`EVIDENCE`'s order, then
    :data:`~attn_lib.claims.claim.NEAR_EMPTY` and ``n/a``), one column per verdict. An informative row marked as a
    near-empty test (a non-empty ``weak`` column) is counted under ``NEAR_EMPTY``, not with the informative ones."""
    weak = table["weak"].fillna("").astype(str).str.len() > 0 if "weak" in table else np.zeros(len(table), bool)
    kind = np.where(weak & (table["evidence"] == "informative"), NEAR_EMPTY, table["evidence"])
    t = table.assign(evidence=np.where(table["verdict"] == "n/a", "n/a", kind))
    out = t.groupby(["evidence", "verdict"]).size().unstack(fill_value=0)
    order = [e for e in [*EVIDENCE, NEAR_EMPTY, "n/a"] if e in out.index]
    return out.loc[order]
