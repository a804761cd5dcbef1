r"""The paper's claims as data: one :class:`Claim` per claim (or per reading of one), looked up by its stable ``id``:
the paper's words, the reading tested, its kind of evidence (:data:`EVIDENCE`), the book's block that forces or
guarantees it, the appendix section behind its decisions, and its rule, a function of the results returning an
:class:`Outcome`. :func:`verdicts` applies every rule.

The claims stand in ``claims.toml`` (the report's order); :mod:`~attn_lib.claims.claim` holds the machinery, one module
per figure holds the rules (imported below: distance, Figs. 2a-2b; critical, Fig. 2c; separability, Fig. 3 and Theorem
2; sensitivity, Fig. 4 and Corollary 3; multihead, the Discussion; training, the abstract's training claim), and
:mod:`~attn_lib.claims.stats` and :mod:`~attn_lib.claims.diagnosis` the statistics they read. Adding a claim: its
``[[claim]]`` table, its rule with ``@rule("<id>")`` in its figure's module, and a test on which the rule passes and one
on which it fails.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

# the claim modules register their rules in CLAIMS when imported; check_rules then puts CLAIMS in claims.toml's order
# isort: off
from . import distance, critical, separability, sensitivity, multihead, training  # noqa: F401

# isort: on
from .claim import CLAIMS, COLUMNS, EVIDENCE, NEAR_EMPTY, VERDICTS, Claim, Outcome, check_rules, claim, claim_row  # noqa: F401
from .diagnosis import critical_rows, diagnosis_first_pass, diagnosis_summary, required_rho  # noqa: F401
from .stats import THRESHOLDS, linear_growth, need_results, valid_ks_sampling

check_rules()  # every entry of claims.toml has its rule, and every rule its entry

# what the book shows; the rest (EVIDENCE, Outcome, claim_row, tally, ...) is importable from here or its module
__all__ = ["CLAIMS", "Claim", "claim", "verdicts", "ids_for", "THRESHOLDS", "linear_growth", "valid_ks_sampling"]
__all__ += ["diagnosis_summary", "critical_rows"]


def ids_for(*experiments: str) -> list[str]:
    """The ids of the claims whose rules read only the named results (``ids_for("separability")``: Fig. 3's), in
    :data:`CLAIMS`' order; a claim that needs nothing (an exact computation) is left out."""
    have = set(experiments)
    return [c.id for c in CLAIMS.values() if c.needs and set(c.needs) <= have]


def verdicts(results: dict, thresholds: dict | None = None, *, ids=None) -> pd.DataFrame:
    """Every claim of :data:`CLAIMS` (or those of ``ids``, in that order) applied to ``results``
    (:func:`attn_lib.experiments.run_all`'s, perhaps with ``"multihead_coverage"``), with ``thresholds`` overriding
    :data:`~attn_lib.claims.stats.THRESHOLDS`: one row per claim, the :data:`COLUMNS`, index 0..n-1."""
    need_results(results)
    chosen = list(CLAIMS) if ids is None else list(ids)
    unknown = [i for i in chosen if i not in CLAIMS]
    if unknown:
        raise ValueError(f"ids must be claim ids of attn_lib.claims.CLAIMS (unknown: {unknown})")
    return pd.DataFrame([claim_row(CLAIMS[i], results, thresholds) for i in chosen], columns=list(COLUMNS))


def tally(table: pd.DataFrame) -> pd.DataFrame:
    """Verdicts counted apart by kind of evidence: index ``evidence`` (:data:`EVIDENCE`'s order, then
    :data:`~attn_lib.claims.claim.NEAR_EMPTY` and ``n/a``), one column per verdict. An informative row with a
    non-empty ``weak`` column is counted under ``NEAR_EMPTY``."""
    weak = table["weak"].fillna("").astype(str).str.len() > 0 if "weak" in table else np.zeros(len(table), bool)
    kind = np.where(weak & (table["evidence"] == "informative"), NEAR_EMPTY, table["evidence"])
    t = table.assign(evidence=np.where(table["verdict"] == "n/a", "n/a", kind))
    out = t.groupby(["evidence", "verdict"]).size().unstack(fill_value=0)
    return out.loc[[e for e in [*EVIDENCE, NEAR_EMPTY, "n/a"] if e in out.index]]
