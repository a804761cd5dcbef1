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

from .._names import module_names, package_names
from . import coverage, distance_bound, sensitivity, separation, vanishing

__all__, __getattr__, __dir__ = package_names(
    __name__, module_names(vanishing, distance_bound, separation, sensitivity, coverage)
)
