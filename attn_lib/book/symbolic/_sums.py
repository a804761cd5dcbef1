"""SymPy helpers shared by the modules of :mod:`attn_lib.book.symbolic`."""

from __future__ import annotations

import sympy as sp
from sympy.simplify.simplify import factor_sum


def sum_linear(term, limits):
    """``Sum(term, limits)`` evaluated by SymPy: split over the terms of ``term``, constants factored out."""
    total = sp.expand(sp.Sum(sp.expand(term), limits)).doit()
    return total.replace(lambda e: isinstance(e, sp.Sum), factor_sum)
