"""SymPy derivations of the paper's results, returned as SymPy objects for step-by-step display.

Every function returns a ``dict`` whose values are SymPy expressions, matrices or ``Eq``/relational objects
(never strings), in the order a chapter shows them. Keys ending in ``_check`` hold an expression that SymPy has
simplified to ``0`` -- the machine-checked part of the derivation; the tests assert them. Inequality steps
(Cauchy-Schwarz, triangle inequality, Markov, Hoeffding) are named in the docstrings; their side conditions are
entries whose value is SymPy's own decision from the symbols' assumptions (``expr.is_nonnegative`` etc., a Python
``bool``), and sums are ``sympy.Sum(...).doit()`` results, never typed-in closed forms.
Each function runs in well under two seconds. One module per topic (a chapter of the book):
:mod:`~attn_lib.book.symbolic.vanishing` (chapter 1), :mod:`~attn_lib.book.symbolic.distance_bound` (chapters 2 and 6),
:mod:`~attn_lib.book.symbolic.separation` (chapter 3), :mod:`~attn_lib.book.symbolic.sensitivity` (chapter 4) and
:mod:`~attn_lib.book.symbolic.coverage` (chapter 5); every public name is re-exported here.

Section names refer to the book's appendix "Reading the paper".
"""

from __future__ import annotations

from .coverage import (
    multihead_coverage_symbolic,
)
from .distance_bound import (
    corollary2_limits_symbolic,
    corollary2_remainder_symbolic,
    e1_crossing_symbolic,
    theorem1_random_variance,
    theorem1_steps,
)
from .sensitivity import (
    corollary3_bounds_symbolic,
    lemma2_jacobian,
    max_alpha_one_minus_alpha,
    softmax_jacobian,
    sqrt5_example_exact,
    two_way_tie_spectral_norm,
)
from .separation import (
    theorem2_expansion,
    theorem2_tail_bounds,
)
from .vanishing import (
    corollary1_from_lemma1,
    lemma1_constants_symbolic,
    lemma1_general,
)

__all__ = [
    "softmax_jacobian",
    "max_alpha_one_minus_alpha",
    "lemma1_constants_symbolic",
    "lemma1_general",
    "corollary1_from_lemma1",
    "two_way_tie_spectral_norm",
    "corollary3_bounds_symbolic",
    "e1_crossing_symbolic",
    "theorem1_steps",
    "theorem1_random_variance",
    "corollary2_limits_symbolic",
    "corollary2_remainder_symbolic",
    "theorem2_expansion",
    "theorem2_tail_bounds",
    "sqrt5_example_exact",
    "lemma2_jacobian",
    "multihead_coverage_symbolic",
]
