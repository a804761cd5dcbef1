"""Lemma 1 and Corollary 1: every weight of a length-independent normaliser is Theta(1/L) (chapter 1;
Reading the paper, §Lemma 1 and §Corollary 1)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .._validation import check_nonnegative, check_positive, check_size
from ._inputs import as_array, as_output, eval_F, lengths_array


def lemma1_constants(F: Callable, a: float, theta: Any = None, grid: int = 2049) -> tuple[float, float]:
    r"""Lemma 1 constants (Reading the paper, §Lemma 1, reconstructed): ``C1 = m_F / M_F``, ``C2 = M_F / m_F``.

    .. math:: m_F=\min_{[-a,a]}F(\cdot,\theta),\quad M_F=\max_{[-a,a]}F(\cdot,\theta),\qquad
              \frac{C_1}{L}\le\alpha_i\le\frac{C_2}{L}

    for every row of scheme (3) with logits in ``[-a, a]`` and ``L`` not among ``theta``. ``F`` is elementwise
    (numpy or torch), called as ``F(l)`` or ``F(l, theta)``. The extrema are found on a ``grid``-point grid over
    ``[-a, a]`` and refined with ``scipy.optimize.minimize_scalar`` (bounded) around the best grid point. For
    ``F = exp(l/T)``, ``C2 = exp(2a/T)``. ``ValueError`` if ``F`` is not finite and > 0 on the interval.

    Chapter 1, ``lem-vanishing``: the numerical reference (:func:`attn_lib.book.symbolic.lemma1_general` derives the
    constants); tested by ``tests/test_theory.py::test_lemma1_constants_and_bounds``.
    """
    from scipy.optimize import minimize_scalar  # here, not at the top: keeps import attn_lib.theory light

    if not callable(F):
        raise ValueError(f"F must be callable (got {type(F).__name__})")
    a = check_nonnegative("a", a)
    grid = check_size("grid", grid, low=3)
    zs = np.linspace(-a, a, grid)
    vals = eval_F(F, zs, theta)
    if not np.all(np.isfinite(vals)) or np.any(vals <= 0):
        raise ValueError("F must return finite values > 0 on [-a, a] (Lemma 1 needs a positive F)")
    if a == 0:
        return 1.0, 1.0

    def scalar(z):
        return float(eval_F(F, np.array([z]), theta)[0])

    h, xatol = zs[1] - zs[0], 1e-12 * max(1.0, a)
    m_F, M_F = float(vals.min()), float(vals.max())
    for sign, k in ((1.0, int(np.argmin(vals))), (-1.0, int(np.argmax(vals)))):
        bounds = (max(-a, zs[k] - h), min(a, zs[k] + h))
        res = minimize_scalar(
            lambda z, sign=sign: sign * scalar(z), bounds=bounds, method="bounded", options={"xatol": xatol}
        )
        v = scalar(float(res.x))
        if not (np.isfinite(v) and v > 0):
            raise ValueError("F must return finite values > 0 on [-a, a] (Lemma 1 needs a positive F)")
        m_F, M_F = (min(m_F, v), M_F) if sign > 0 else (m_F, max(M_F, v))
    return m_F / M_F, M_F / m_F


def lemma1_bounds(F: Callable, a: float, L: Any, theta: Any = None, grid: int = 2049):
    """Lemma 1 as bounds on the weights: ``(C1 / L, C2 / L)``, ``L`` an int or array of ints >= 1 (Reading the paper,
    §Lemma 1). Chapter 1, ``lem-vanishing``; tested by ``tests/test_theory.py::test_lemma1_constants_and_bounds``."""
    C1, C2 = lemma1_constants(F, a, theta=theta, grid=grid)
    Ls = lengths_array(L)
    return as_output(C1 / Ls), as_output(C2 / Ls)


def corollary1_delta(q: Any, K: Any) -> float:
    r"""``Delta = ||q||_2 max_j ||k_j||_2``, so ``|l_j| <= Delta`` (Reading the paper, §Corollary 1, the reconstructed
    reading of ``||k||``). Chapter 1, ``cor-softmax-vanishing``; tested by
    ``tests/test_theory.py::test_corollary1_bounds_hold``."""
    qv, Km = as_array(q, "q"), as_array(K, "K")
    if qv.ndim != 1 or qv.size == 0:
        raise ValueError(f"q must have shape (d,) with d >= 1 (got {qv.shape})")
    if Km.ndim != 2 or Km.shape[1] != qv.shape[0] or Km.shape[0] == 0:
        raise ValueError(f"K must have shape (L, d) with d = {qv.shape[0]} and L >= 1 (got {Km.shape})")
    return float(np.linalg.norm(qv) * np.linalg.norm(Km, axis=1).max())


def corollary1_bounds(L: Any, delta: float, temperature: float):
    r"""Corollary 1 (Reading the paper, §Corollary 1 (stated)): softmax weights satisfy

    .. math:: \frac1L e^{-2\Delta/T}\le\alpha_i\le\frac1L e^{2\Delta/T},\qquad\Delta=\|q\|_2\max_j\|k_j\|_2 .

    Returns ``(lower, upper)``; ``L`` an int or an array of ints (the upper bound may exceed 1 or be ``inf`` when
    ``2 Delta / T`` is large: vacuous, not wrong).

    Chapter 1, ``cor-softmax-vanishing`` (:func:`attn_lib.book.symbolic.corollary1_from_lemma1` derives it); tested by
    ``tests/test_theory.py::test_corollary1_bounds_hold``.
    """
    Ls = lengths_array(L)
    d = check_nonnegative("delta", delta)
    T = check_positive("temperature", temperature)
    with np.errstate(over="ignore"):
        return as_output(np.exp(-2 * d / T) / Ls), as_output(np.exp(2 * d / T) / Ls)
