"""Multi-head coverage with SymPy (chapter 5; Reading the paper, §Multi-head coverage)."""

from __future__ import annotations

import sympy as sp

__all__ = ["multihead_coverage_symbolic"]


def multihead_coverage_symbolic() -> dict:
    r"""Multi-head coverage ``1 - (1 - p)^H`` ("Reading the paper", §Multi-head coverage):
    at ``p = 4/5, H = 3`` it is ``124/125 = 0.992``;
    the smallest ``H`` with coverage ``>= 99/100`` is ``ceil(log(1/100)/log(1/5)) = 3``.
    """
    p = sp.Symbol("p", positive=True)
    H = sp.Symbol("H", positive=True, integer=True)
    c = sp.Symbol("c", positive=True)
    cov = 1 - (1 - p) ** H
    at = cov.subs({p: sp.Rational(4, 5), H: 3})
    Hmin_expr = sp.ceiling(sp.log(1 - c) / sp.log(1 - p))
    Hmin = Hmin_expr.subs({c: sp.Rational(99, 100), p: sp.Rational(4, 5)})
    return {
        "coverage": cov,
        "coverage_p08_H3": at,
        "coverage_p08_H3_float": sp.N(at),
        "H_min": Hmin_expr,
        "H_min_p08_c099": sp.simplify(Hmin),
        "H_min_ratio_value": sp.N(sp.log(sp.Rational(1, 100)) / sp.log(sp.Rational(1, 5))),
    }
