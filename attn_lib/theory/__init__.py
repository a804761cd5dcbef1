r"""Reference implementations of every result of the paper, for concrete inputs (float64, numpy): readable reference
definitions, of which :mod:`attn_lib.metrics` holds the fast batched versions.

One function per result, named after the paper's numbering, in one module per topic (a chapter of the book):
:mod:`~attn_lib.theory.vanishing` (chapter 1), :mod:`~attn_lib.theory.distance_bound` (chapter 2),
:mod:`~attn_lib.theory.separation` (chapter 3), :mod:`~attn_lib.theory.sensitivity` (chapter 4) and
:mod:`~attn_lib.theory.coverage` (chapter 5), every public name re-exported here; each docstring gives the formula
and the section of the book's appendix *Reading the paper* that explains it, marked as stated by the paper,
reconstructed, or a project decision.

Conventions: one query row has ``alpha`` ``(L,)`` (non-negative weights; the results assume they sum to one, as
softmax weights do) and ``X`` ``(L, d)`` (the vectors ``x_i``; values ``v_i`` by default, §Which vectors); leading
batch dimensions are accepted everywhere (``alpha (..., L)``, ``X (..., L, d)``), and scalars come back as Python
floats for a single row, arrays ``(...)`` for a batch. ``a_i = alpha_i x_i``, ``z = sum_i a_i``, ``I_N`` = top-N set
with ties to the lower index (stable sort, §Notation), ``s = sum_{i in I_N} a_i`` (Eq. 6),
``abar = sum_{i in I_N} alpha_i``. torch tensors are converted to float64 numpy arrays; bad input raises
``ValueError`` naming the argument and the allowed range.
"""

from __future__ import annotations

from .coverage import heads_for_coverage, multihead_coverage, multihead_coverage_simulation
from .distance_bound import (
    context_vector,
    corollary2_e1_bound,
    corollary2_e2_identity,
    corollary2_limits,
    corollary2_linear_bounds,
    corollary2_random_bound,
    distance,
    dmax_from_parts,  # noqa: F401  (helper)
    expectation_e1,
    expectation_e2,
    expected_distance_exact,
    expected_distance_mc,
    jensen_gap_bound,
    jensen_gap_exact,
    theorem1_dmax,
    top_n_indices,
    top_n_mask,
)
from .sensitivity import (
    corollary3_corrected,
    corollary3_counterexample,
    corollary3_paper,
    lemma2_jacobian,
    lemma2_jacobian_bound,
    softmax_jacobian_np,  # noqa: F401  (helper)
    softmax_np,  # noqa: F401  (helper)
    sqrt5_example,
)
from .separation import (
    distinguishable_count,
    selected_offsets,
    separability,
    theorem2_bounds,
    theorem2_hoeffding_upper,
    theorem2_xi,
)
from .vanishing import corollary1_bounds, corollary1_delta, lemma1_bounds, lemma1_constants

# the results of the paper in its order (softmax_np, softmax_jacobian_np and dmax_from_parts: importable helpers)
__all__ = ["lemma1_constants", "lemma1_bounds", "corollary1_delta", "corollary1_bounds"]  # Lemma 1, Corollary 1
__all__ += ["top_n_indices", "top_n_mask", "context_vector", "distance", "theorem1_dmax"]  # Theorem 1
# the expectation forms and their gaps
__all__ += ["expectation_e1", "jensen_gap_bound", "expectation_e2", "expected_distance_mc", "expected_distance_exact"]
__all__ += ["jensen_gap_exact"]
# Corollary 2
__all__ += ["corollary2_linear_bounds", "corollary2_random_bound", "corollary2_e1_bound", "corollary2_limits"]
__all__ += ["corollary2_e2_identity"]
__all__ += ["selected_offsets", "distinguishable_count", "separability", "theorem2_xi", "theorem2_bounds"]  # Theorem 2
__all__ += ["theorem2_hoeffding_upper"]
# Lemma 2, Corollary 3
__all__ += ["lemma2_jacobian", "lemma2_jacobian_bound", "corollary3_paper", "corollary3_corrected"]
__all__ += ["corollary3_counterexample", "sqrt5_example"]
__all__ += ["multihead_coverage", "heads_for_coverage", "multihead_coverage_simulation"]  # multi-head coverage
