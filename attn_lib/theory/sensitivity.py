"""Lemma 2, Corollary 3 and the sqrt(5) eps example: Jacobians of the normalisers (chapter 4; Reading the paper,
§Lemma 2 and §Corollary 3)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from .._validation import check_finite, check_positive, check_size
from ._inputs import as_output, eval_F, logits_array, positive_array


def softmax_np(logits: Any, temperature: float = 1.0) -> np.ndarray:
    """Stable float64 softmax over the last axis (log-sum-exp shift), for the theory checks."""
    l = logits_array(logits)
    T = check_positive("temperature", temperature)
    e = np.exp((l - l.max(-1, keepdims=True)) / T)
    return e / e.sum(-1, keepdims=True)


def softmax_jacobian_np(logits: Any, temperature: float = 1.0) -> np.ndarray:
    r"""``J = (diag alpha - alpha alpha^T) / T`` ``(..., L, L)`` in float64 numpy (Reading the paper, §Corollary 3)."""
    T = check_positive("temperature", temperature)
    a = softmax_np(logits, T)
    return (np.einsum("...i,ij->...ij", a, np.eye(a.shape[-1])) - a[..., :, None] * a[..., None, :]) / T


def _F_dF(F: Callable, dF: Callable | None, l: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if not callable(F):
        raise ValueError(f"F must be callable (got {type(F).__name__})")
    Fv = eval_F(F, l, None)
    if not np.all(np.isfinite(Fv)) or np.any(Fv <= 0):
        raise ValueError("F must return finite values > 0 at every logit (scheme (3) needs a positive F)")
    if dF is None:
        h = 1e-6 * (1.0 + np.abs(l))
        dFv = (eval_F(F, l + h, None) - eval_F(F, l - h, None)) / (2 * h)
    else:
        if not callable(dF):
            raise ValueError(f"dF must be callable or None (got {type(dF).__name__})")
        dFv = eval_F(dF, l, None)
    if not np.all(np.isfinite(dFv)):
        raise ValueError("dF must return finite values")
    return Fv, dFv


def lemma2_jacobian(F: Callable, dF: Callable | None, logits: Any) -> np.ndarray:
    r"""Exact Jacobian ``(..., L, L)`` of scheme (3) (Reading the paper, §Lemma 2, standard quotient rule):

    .. math:: J_{ij}=\frac{F'(l_j)(\delta_{ij}-\alpha_i)}{S},\qquad J=\frac1S\big(\mathrm{diag}(F')-\alpha F'^{\top}\big),
              \quad S=\sum_kF(l_k).

    ``dF = None`` uses a central finite difference for ``F'``.

    Chapter 4, ``lem-jacobian``: the numpy reference (of :func:`attn_lib.jacobian.general_jacobian` and
    :func:`attn_lib.book.symbolic.lemma2_jacobian`); tested by
    ``tests/test_theory.py::test_lemma2_jacobian_against_autograd``.
    """
    l = logits_array(logits)
    Fv, dFv = _F_dF(F, dF, l)
    S = Fv.sum(-1, keepdims=True)
    a = Fv / S
    return (np.einsum("...j,ij->...ij", dFv, np.eye(l.shape[-1])) - a[..., :, None] * dFv[..., None, :]) / S[..., None]


def lemma2_jacobian_bound(F: Callable, dF: Callable | None, logits: Any):
    r"""Lemma 2's bound (Reading the paper, §Lemma 2, reconstructed):

    .. math:: \|J\|_2\le\max_j|F'(l_j)|\Big(\frac{1}{L\min_jF(l_j)}+\frac{1}{\sqrt L\,\min_jF(l_j)}\Big).

    For softmax it reads ``e^{(l_max - l_min)/T} / T (1/L + 1/sqrt(L))``, so Corollary 3 does not follow from it.

    Chapter 4, ``lem-jacobian``; tested by ``tests/test_theory.py::test_lemma2_bound_5000_cases``.
    """
    l = logits_array(logits)
    Fv, dFv = _F_dF(F, dF, l)
    L = l.shape[-1]
    mF = Fv.min(-1)
    return as_output(np.abs(dFv).max(-1) * (1.0 / (L * mF) + 1.0 / (math.sqrt(L) * mF)))


def corollary3_paper(T: Any):
    r"""Corollary 3 in the paper's form (Reading the paper, §Corollary 3, stated): :math:`\min\{1/(4T),\sqrt2\}`; it
    is **not** a valid spectral-norm bound (see :func:`corollary3_counterexample`).

    Chapter 4, ``cor-softmax-jacobian``; tested by ``tests/test_theory.py::test_corollary3_forms_and_counterexample``.
    """
    return as_output(np.minimum(1.0 / (4 * positive_array(T)), math.sqrt(2)))


def corollary3_corrected(T: Any, eps: Any = None) -> dict:
    r"""Corrected constants for the softmax Jacobian (Reading the paper, §Corollary 3, project-derived):

    * ``entrywise``: :math:`|J_{ij}|\le 1/(4T)`;
    * ``row``: :math:`\|\nabla_\ell\alpha_i\|_2\le\sqrt2/(4T)`;
    * ``spectral``: :math:`\|J\|_2\le 1/(2T)` (attained at a two-way tie);
    * with ``eps``: ``finite_difference``
      :math:`\|\alpha(\ell+\varepsilon v)-\alpha(\ell)\|_2\le\min\{\varepsilon/(2T),\sqrt2\}` and ``sensitivity``
      :math:`g(T,\varepsilon)\le\min\{1/(2T),\sqrt2/\varepsilon\}`.

    Chapter 4, ``prop-softmax-constants`` (of :func:`attn_lib.book.symbolic.corollary3_bounds_symbolic`); tested by
    ``tests/test_theory.py::test_finite_difference_bound_20000_cases``.
    """
    t = positive_array(T)
    out = {
        "entrywise": as_output(1 / (4 * t)),
        "row": as_output(math.sqrt(2) / (4 * t)),
        "spectral": as_output(1 / (2 * t)),
    }
    if eps is not None:
        e = positive_array(eps, "eps")
        out["finite_difference"] = as_output(np.minimum(e / (2 * t), math.sqrt(2)))
        out["sensitivity"] = as_output(np.minimum(1 / (2 * t), math.sqrt(2) / e))
    return out


def corollary3_counterexample(T: float = 1.0, eps: float = 1e-6) -> dict:
    r"""The two-way-tie counterexample to the spectral-norm reading of Corollary 3 (Reading the paper, §Corollary 3).

    At ``l = (0, 0)``: ``J = [[1, -1], [-1, 1]] / (4T)`` and ``||J||_2 = 1/(2T) > min{1/(4T), sqrt 2}`` for every
    ``T > 0``; the finite-difference ratio along ``v = (1, -1)/sqrt 2`` is ``~ 1/(2T)`` (``0.5, 5, 50`` at
    ``T = 1, 0.1, 0.01``), above the paper's curve (``0.25, 1.41, 1.41``). Returns ``J``, ``spectral_norm``,
    ``paper_bound``, ``corrected_bound`` and ``fd_ratio``.

    Chapter 4, ``prop-softmax-constants`` (item 3); tested by
    ``tests/test_theory.py::test_corollary3_forms_and_counterexample``.
    """
    Tv, e = check_positive("temperature", T), check_positive("eps", eps)
    l0 = np.zeros(2)
    J = softmax_jacobian_np(l0, Tv)
    v = np.array([1.0, -1.0]) / math.sqrt(2)
    fd = float(np.linalg.norm(softmax_np(l0 + e * v, Tv) - softmax_np(l0, Tv)) / e)
    return {
        "J": J,
        "spectral_norm": float(np.linalg.norm(J, 2)),
        "paper_bound": corollary3_paper(Tv),
        "corrected_bound": 1 / (2 * Tv),
        "fd_ratio": fd,
    }


def sqrt5_example(c: float, eps: float, T: float, L: int) -> dict:
    r"""The :math:`\sqrt5\,\varepsilon` example of the paper's §2.3 (Reading the paper, §The sqrt(5) eps example,
    reconstructed).

    .. math:: \ell^{(1)}=(c+\varepsilon,c,0,\dots,0),\quad\ell^{(2)}=(c-\varepsilon,c+\varepsilon,0,\dots,0),
              \quad\|\ell^{(1)}-\ell^{(2)}\|_2=\sqrt5\,\varepsilon

    Near a dominant tie the linearisation gives :math:`\|\Delta\alpha\|_2\approx\frac{3\sqrt2}{4}\frac{\varepsilon}{T}`.
    Returns ``l1, l2, logit_distance, delta_alpha`` (exact softmax difference norm), ``ratio``
    (``delta_alpha / eps``), ``linearised`` (``||J(l1)(l1 - l2)||``) and ``tie_approximation`` (``3 sqrt2 eps / (4T)``).
    """
    c, e, Tv = check_finite("c", c), check_positive("eps", eps), check_positive("temperature", T)
    L = check_size("L", L, low=2)
    l1 = np.concatenate([[c + e, c], np.zeros(L - 2)])
    l2 = np.concatenate([[c - e, c + e], np.zeros(L - 2)])
    da = float(np.linalg.norm(softmax_np(l1, Tv) - softmax_np(l2, Tv)))
    lin = float(np.linalg.norm(softmax_jacobian_np(l1, Tv) @ (l1 - l2)))
    return {
        "l1": l1,
        "l2": l2,
        "logit_distance": float(np.linalg.norm(l1 - l2)),
        "delta_alpha": da,
        "ratio": da / e,
        "linearised": lin,
        "tie_approximation": 3 * math.sqrt(2) * e / (4 * Tv),
    }
