"""Reference implementations of every result of the paper, for concrete inputs (float64, numpy).

One function per result, named after the paper's numbering; the docstring of each gives the formula and the
section of the book's appendix *Reading the paper* that explains it, marked as stated by the paper, reconstructed,
or a project decision.

Conventions
-----------
* One query row: ``alpha`` has shape ``(L,)`` (non-negative weights; the results assume they sum to one, as
  softmax weights do), ``X`` has shape ``(L, d)`` (the vectors ``x_i``; values ``v_i`` by default, §Which vectors).
  Leading batch dimensions are accepted everywhere: ``alpha (..., L)``, ``X (..., L, d)``; scalars come back as
  Python floats for a single row and as arrays of shape ``(...)`` for a batch.
* ``a_i = alpha_i x_i``, ``z = sum_i a_i``, ``I_N`` = top-N set with ties to the lower index (stable sort, §Notation),
  ``s = sum_{i in I_N} a_i`` (Eq. 6), ``abar = sum_{i in I_N} alpha_i``.
* torch tensors are accepted and converted to float64 numpy arrays.
* Bad input raises ``ValueError`` naming the argument and the allowed range.

These are readable reference definitions; :mod:`attn_lib.metrics` holds the fast batched versions.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ._validation import (
    check_choice,
    check_finite,
    check_int,
    check_nonnegative,
    check_positive,
    check_probability,
    check_seed,
    check_size,
)

__all__ = [
    # Lemma 1 / Corollary 1
    "lemma1_constants",
    "lemma1_bounds",
    "corollary1_delta",
    "corollary1_bounds",
    # top-N and distances
    "top_n_indices",
    "top_n_mask",
    "context_vector",
    "distance",
    # Theorem 1
    "theorem1_dmax",
    "expectation_e1",
    "jensen_gap_bound",
    "expectation_e2",
    "expected_distance_mc",
    "expected_distance_exact",
    "jensen_gap_exact",
    # Corollary 2
    "corollary2_linear_bounds",
    "corollary2_random_bound",
    "corollary2_e1_bound",
    "corollary2_limits",
    "corollary2_e2_identity",
    # separability / Theorem 2
    "selected_offsets",
    "distinguishable_count",
    "separability",
    "theorem2_xi",
    "theorem2_bounds",
    "theorem2_hoeffding_upper",
    # Lemma 2 / Corollary 3 / examples
    "softmax_np",
    "softmax_jacobian_np",
    "lemma2_jacobian",
    "lemma2_jacobian_bound",
    "corollary3_paper",
    "corollary3_corrected",
    "corollary3_counterexample",
    "sqrt5_example",
    "multihead_coverage",
    "heads_for_coverage",
    "multihead_coverage_simulation",
]


# ----------------------------------------------------------------------------------------------------------
# input handling
# ----------------------------------------------------------------------------------------------------------
def _np(x: Any, name: str) -> np.ndarray:
    try:
        import torch

        if isinstance(x, torch.Tensor):
            x = x.detach().cpu().to(torch.float64).numpy()
    except ImportError:  # pragma: no cover
        pass
    try:
        arr = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be an array of real numbers") from None
    return arr


def _alpha(alpha: Any) -> np.ndarray:
    a = _np(alpha, "alpha")
    if a.ndim == 0:
        raise ValueError("alpha must have shape (..., L) with L >= 1 (got a scalar)")
    if a.shape[-1] == 0 or a.size == 0:
        raise ValueError(f"alpha must have shape (..., L) with L >= 1 (got shape {a.shape})")
    if not np.all(np.isfinite(a)):
        raise ValueError("alpha must be finite")
    if np.any(a < 0):
        raise ValueError("alpha must be >= 0 (attention weights)")
    return a


def _alpha_X(alpha: Any, X: Any) -> tuple[np.ndarray, np.ndarray]:
    a = _alpha(alpha)
    x = _np(X, "X")
    if x.ndim != a.ndim + 1 or x.shape[:-1] != a.shape:
        raise ValueError(
            f"X must have shape (..., L, d) matching alpha of shape (..., L) = {a.shape} (got X of shape {x.shape})"
        )
    if x.shape[-1] == 0:
        raise ValueError("X must have d >= 1 columns")
    if not np.all(np.isfinite(x)):
        raise ValueError("X must be finite")
    return a, x


def _N(N: Any, L: int, low: int = 1) -> int:
    return check_int("N", N, low=low, high=L)


def _ret(v: np.ndarray):
    v = np.asarray(v, dtype=np.float64)
    return float(v) if v.ndim == 0 else v


def _norm(v: np.ndarray) -> np.ndarray:
    return np.linalg.norm(v, axis=-1)


def _p(p: Any, N: int, L: int) -> float:
    if isinstance(p, str):
        check_choice("p", p, ["L-1", "L"])
        if p == "L":
            return N / L
        return 1.0 if L == 1 else N / (L - 1)
    return check_probability("p", p)


# ----------------------------------------------------------------------------------------------------------
# Lemma 1 and Corollary 1 (Reading the paper, §Lemma 1 and §Corollary 1)
# ----------------------------------------------------------------------------------------------------------
def _eval_F(F: Callable, z: np.ndarray, theta: Any) -> np.ndarray:
    def call(arg):
        return F(arg) if theta is None else F(arg, theta)

    try:
        out = call(z)
    except TypeError:
        import torch

        out = call(torch.as_tensor(z))
    try:
        import torch

        if isinstance(out, torch.Tensor):
            out = out.detach().cpu().to(torch.float64).numpy()
    except ImportError:  # pragma: no cover
        pass
    out = np.broadcast_to(np.asarray(out, dtype=np.float64), np.shape(z))
    return out


def lemma1_constants(F: Callable, a: float, theta: Any = None, grid: int = 2049) -> tuple[float, float]:
    r"""Lemma 1 constants (Reading the paper, §Lemma 1 (reconstructed)): ``C1 = m_F / M_F``, ``C2 = M_F / m_F``.

    .. math:: m_F=\min_{[-a,a]}F(\cdot,\theta),\quad M_F=\max_{[-a,a]}F(\cdot,\theta),\qquad
              \frac{C_1}{L}\le\alpha_i\le\frac{C_2}{L}

    for every row of scheme (3) with logits in ``[-a, a]`` and ``L`` not among ``theta``. ``F`` is elementwise
    (numpy or torch), called as ``F(l)`` or ``F(l, theta)``. The extrema are found on a ``grid``-point grid over
    ``[-a, a]`` and refined with ``scipy.optimize.minimize_scalar`` (bounded) around the best grid point. For
    ``F = exp(l/T)``, ``C2 = exp(2a/T)``. ``ValueError`` if ``F`` is not finite and > 0 on the interval.
    """
    from scipy.optimize import minimize_scalar

    if not callable(F):
        raise ValueError(f"F must be callable (got {type(F).__name__})")
    a = check_nonnegative("a", a)
    grid = check_size("grid", grid, low=3)
    zs = np.linspace(-a, a, grid)
    vals = _eval_F(F, zs, theta)
    if not np.all(np.isfinite(vals)) or np.any(vals <= 0):
        raise ValueError("F must return finite values > 0 on [-a, a] (Lemma 1 needs a positive F)")
    if a == 0:
        return 1.0, 1.0

    def scalar(z):
        return float(_eval_F(F, np.array([z]), theta)[0])

    h = zs[1] - zs[0]
    m_F, M_F = float(vals.min()), float(vals.max())
    for sign, k in ((1.0, int(np.argmin(vals))), (-1.0, int(np.argmax(vals)))):
        lo, hi = max(-a, zs[k] - h), min(a, zs[k] + h)
        res = minimize_scalar(
            lambda z, sign=sign: sign * scalar(z),
            bounds=(lo, hi),
            method="bounded",
            options={"xatol": 1e-12 * max(1.0, a)},
        )
        v = scalar(float(res.x))
        if not (np.isfinite(v) and v > 0):
            raise ValueError("F must return finite values > 0 on [-a, a] (Lemma 1 needs a positive F)")
        m_F, M_F = (min(m_F, v), M_F) if sign > 0 else (m_F, max(M_F, v))
    return m_F / M_F, M_F / m_F


def lemma1_bounds(F: Callable, a: float, L: Any, theta: Any = None, grid: int = 2049):
    """Lemma 1 as bounds on the weights: ``(C1 / L, C2 / L)`` (Reading the paper, §Lemma 1); ``L`` int or array of ints >= 1."""
    C1, C2 = lemma1_constants(F, a, theta=theta, grid=grid)
    Ls = _L_array(L)
    return _ret(C1 / Ls), _ret(C2 / Ls)


def _L_array(L: Any) -> np.ndarray:
    arr = np.asarray(L)
    if arr.ndim == 0:
        return np.asarray(float(check_int("L", L, low=1)))
    if arr.size == 0:
        raise ValueError("L must be a non-empty integer or array of integers >= 1")
    for v in arr.ravel():
        check_int("L", v.item() if hasattr(v, "item") else v, low=1)
    return arr.astype(np.float64)


def corollary1_delta(q: Any, K: Any) -> float:
    r"""``Delta = ||q||_2 max_j ||k_j||_2`` (Reading the paper, §Corollary 1, reading (reconstructed) of ``||k||``); ``|l_j| <= Delta``."""
    qv = _np(q, "q")
    Km = _np(K, "K")
    if qv.ndim != 1 or qv.size == 0:
        raise ValueError(f"q must have shape (d,) with d >= 1 (got {qv.shape})")
    if Km.ndim != 2 or Km.shape[1] != qv.shape[0] or Km.shape[0] == 0:
        raise ValueError(f"K must have shape (L, d) with d = {qv.shape[0]} and L >= 1 (got {Km.shape})")
    return float(np.linalg.norm(qv) * np.linalg.norm(Km, axis=1).max())


def corollary1_bounds(L: Any, delta: float, temperature: float):
    r"""Corollary 1 (Reading the paper, §Corollary 1 (stated)): softmax weights satisfy

    .. math:: \frac1L e^{-2\Delta/T}\le\alpha_i\le\frac1L e^{2\Delta/T},\qquad\Delta=\|q\|_2\max_j\|k_j\|_2 .

    Returns ``(lower, upper)``; ``L`` may be an int or an array of ints (the upper bound may exceed 1 or be
    ``inf`` when ``2 Delta / T`` is large: the bound is then vacuous, not wrong).
    """
    Ls = _L_array(L)
    d = check_nonnegative("delta", delta)
    T = check_positive("temperature", temperature)
    with np.errstate(over="ignore"):
        lo = np.exp(-2 * d / T) / Ls
        hi = np.exp(2 * d / T) / Ls
    return _ret(lo), _ret(hi)


# ----------------------------------------------------------------------------------------------------------
# top-N selection and distances (Reading the paper, §Notation, §Decisions for the experimentsa)
# ----------------------------------------------------------------------------------------------------------
def top_n_indices(alpha: Any, N: int) -> np.ndarray:
    """Indices of the ``N`` largest weights, largest first, ties to the lower index (stable sort, §Notation (project decision)).

    ``alpha (..., L)`` -> int array ``(..., N)``. ``N`` must be an integer in ``[1, L]``.
    """
    a = _alpha(alpha)
    N = _N(N, a.shape[-1])
    return np.argsort(-a, axis=-1, kind="stable")[..., :N]


def top_n_mask(alpha: Any, N: int) -> np.ndarray:
    """Boolean mask ``(..., L)`` of the top-N set ``I_N`` (same tie rule as :func:`top_n_indices`)."""
    a = _alpha(alpha)
    idx = top_n_indices(a, N)
    m = np.zeros(a.shape, dtype=bool)
    np.put_along_axis(m, idx, True, axis=-1)
    return m


def _selection(a: np.ndarray, N: Any, selected: Any) -> tuple[np.ndarray, int]:
    L = a.shape[-1]
    if selected is None:
        if N is None:
            raise ValueError("N must be an integer in [1, L] (got None and no selected set)")
        return top_n_mask(a, N), _N(N, L)
    sel = np.asarray(selected)
    if sel.dtype == bool:
        if sel.shape != a.shape:
            raise ValueError(f"selected must be a bool mask of shape {a.shape} (got {sel.shape})")
        m = sel
    else:
        if sel.ndim == 0 or sel.shape[:-1] != a.shape[:-1] or not np.issubdtype(sel.dtype, np.integer):
            raise ValueError("selected must be a bool mask (..., L) or an integer index array (..., N)")
        if sel.size and (sel.min() < 0 or sel.max() >= L):
            raise ValueError(f"selected indices must be in [0, {L - 1}]")
        m = np.zeros(a.shape, dtype=bool)
        np.put_along_axis(m, sel, True, axis=-1)
    counts = m.sum(axis=-1)
    if np.any(counts == 0):
        raise ValueError("selected must contain at least one index per row")
    if N is not None and np.any(counts != N):
        raise ValueError(f"selected must contain exactly N = {N} indices per row")
    return m, int(counts.flat[0])


def context_vector(alpha: Any, X: Any, N: int) -> np.ndarray:
    r"""Context vector of Eq. (6): :math:`s=\sum_{i\in I_N}\alpha_i x_i` (Reading the paper, §Notation); shape ``(..., d)``."""
    a, x = _alpha_X(alpha, X)
    m = top_n_mask(a, N)
    return np.einsum("...l,...ld->...d", a * m, x)


def distance(alpha: Any, X: Any, N: int | None = None, form: str = "sum", selected: Any = None):
    r"""Distance ``d~`` of Eq. (7) (Reading the paper, §Notation, decision (Reading the paper, §Decisions for the experiments)a (reconstructed; project decision)).

    ``form="sum"`` (default): :math:`\tilde d=\sum_{i\notin I_N}\|\alpha_ix_i-s\|_2`.

    ``form="vector"`` (variant): :math:`\|\sum_{i\notin I_N}\alpha_ix_i-s\|_2` (literal; equals ``||s||`` when
    nothing is left out, and is at most ``sum_i alpha_i ||x_i|| <= max ||x||`` for weights that sum to one).

    ``I_N`` is the top-N set unless ``selected`` (a bool mask ``(..., L)`` or index array ``(..., N)``) gives
    another set, e.g. a random one.
    """
    check_choice("form", form, ["sum", "vector"])
    a, x = _alpha_X(alpha, X)
    m, _ = _selection(a, N, selected)
    A = a[..., None] * x
    s = np.einsum("...l,...ld->...d", m.astype(np.float64), A)
    if form == "sum":
        D = _norm(A - s[..., None, :])
        return _ret(np.where(m, 0.0, D).sum(axis=-1))
    out = np.einsum("...l,...ld->...d", (~m).astype(np.float64), A)
    return _ret(_norm(out - s))


# ----------------------------------------------------------------------------------------------------------
# Theorem 1 (Reading the paper, §Theorem 1(a))
# ----------------------------------------------------------------------------------------------------------
def theorem1_dmax(alpha: Any, X: Any, N: int, return_parts: bool = False):
    r"""Theorem 1, fixed top-N set (Reading the paper, §Theorem 1(a) (reconstructed)):

    .. math:: \tilde d\le d_{\max}:=(1-\bar\alpha_N)\,d_1+\Big((L-N)\bar\alpha_N-(1-\bar\alpha_N)\Big)
              \max_{j\in I_N}\|x_j\|_2,\qquad d_1=\max_{i\notin I_N,\,j\in I_N}\|x_i-x_j\|_2 .

    ``1 - abar`` is evaluated as the out-of-set mass ``sum_{i not in I_N} alpha_i`` (identical for rows that sum to
    one; for other non-negative weights this is the form the proof gives). ``N = L`` gives 0 (``d1 := 0``).
    ``return_parts=True`` returns a dict with ``d_max``, ``d1``, ``abar``, ``out_mass``, ``max_norm``.
    """
    a, x = _alpha_X(alpha, X)
    L = a.shape[-1]
    N = _N(N, L)
    m = top_n_mask(a, N)
    abar = np.where(m, a, 0.0).sum(-1)
    out_mass = np.where(m, 0.0, a).sum(-1)
    norms = _norm(x)
    max_norm = np.where(m, norms, -np.inf).max(-1)
    idx = top_n_indices(a, N)
    xs = np.take_along_axis(x, idx[..., None], axis=-2)  # (..., N, d)
    sq = norms**2
    D2 = (
        sq[..., :, None]
        + np.take_along_axis(sq, idx, axis=-1)[..., None, :]
        - 2 * np.einsum("...ld,...nd->...ln", x, xs)
    )  # ||x_i - x_j||^2, i any, j in I_N
    D = np.sqrt(np.clip(D2, 0.0, None))
    d1 = np.where(m[..., :, None], -np.inf, D).max(axis=(-2, -1))
    d1 = np.where(np.isfinite(d1), d1, 0.0)
    dmax = out_mass * d1 + ((L - N) * abar - out_mass) * max_norm
    if return_parts:
        return {
            "d_max": _ret(dmax),
            "d1": _ret(d1),
            "abar": _ret(abar),
            "out_mass": _ret(out_mass),
            "max_norm": _ret(max_norm),
        }
    return _ret(dmax)


def expectation_e1(alpha: Any, X: Any, N: int, p: Any = "L-1"):
    r"""Expectation form E1 (Reading the paper, §Expectation forms (reconstructed), decision (Reading the paper, §Decisions for the experiments)b):

    .. math:: E_1=\frac{L-N}{L}\sum_{i=1}^{L}\Big\|a_i-p\sum_{j\ne i}a_j\Big\|_2
              =\frac{L-N}{L}\sum_i\|(1+p)a_i-pz\|_2

    with ``p = N/(L-1)`` (``p="L-1"``, the exact conditional inclusion probability; then
    ``E[d~] = E1 + eps`` with ``0 <= eps <=`` :func:`jensen_gap_bound`) or ``p = N/L`` (``p="L"``), or a number.
    ``N = L`` gives 0.
    """
    a, x = _alpha_X(alpha, X)
    L = a.shape[-1]
    N = _N(N, L)
    if N == L:
        return _ret(np.zeros(a.shape[:-1]))
    pv = _p(p, N, L)
    A = a[..., None] * x
    z = A.sum(-2)
    return _ret((L - N) / L * _norm((1 + pv) * A - pv * z[..., None, :]).sum(-1))


def jensen_gap_bound(alpha: Any, X: Any, N: int, p: Any = "L-1", crude: bool = False):
    r"""Upper bound on the Jensen gap ``eps = E[d~] - E1`` (Reading the paper, §Expectation forms (reconstructed)):

    .. math:: 0\le\varepsilon\le\frac{L-N}{L}\sum_{i=1}^{L}\sqrt{p(1-p)\Big[\tfrac{L-1}{L-2}\sum_{j\ne i}\|a_j\|^2
              -\tfrac{1}{L-2}\Big\|\sum_{j\ne i}a_j\Big\|^2\Big]}

    (the bracket is the exact variance of the conditional context vector for sampling without replacement);
    ``crude=True`` drops the negative term: ``sqrt(p(1-p) (L-1)/(L-2) sum_{j!=i} alpha_j^2 ||x_j||^2)``.
    The guarantee holds for ``p = N/(L-1)`` (default); other ``p`` just evaluate the same expression.
    ``N >= L-1`` gives 0 (no randomness left given ``i`` is excluded).
    """
    a, x = _alpha_X(alpha, X)
    L = a.shape[-1]
    N = _N(N, L)
    if N >= L - 1:
        return _ret(np.zeros(a.shape[:-1]))
    pv = _p(p, N, L)
    A = a[..., None] * x
    sq = (A**2).sum(-1)
    tot = sq.sum(-1, keepdims=True)
    z = A.sum(-2)
    others_sq = tot - sq
    if crude:
        br = (L - 1) / (L - 2) * others_sq
    else:
        rest = ((z[..., None, :] - A) ** 2).sum(-1)
        br = (L - 1) / (L - 2) * others_sq - rest / (L - 2)
    br = np.clip(br, 0.0, None)
    return _ret((L - N) / L * np.sqrt(pv * (1 - pv) * br).sum(-1))


def expectation_e2(alpha: Any, X: Any, N: int):
    r"""Expectation form E2 (Reading the paper, §Expectation forms (reconstructed), heuristic): replace only the exclusion indicator,

    .. math:: E_2=\frac{L-N}{L}\sum_{i=1}^{L}\|\alpha_ix_i-s\|_2,\qquad s \text{ the actual top-}N\text{ vector}.
    """
    a, x = _alpha_X(alpha, X)
    L = a.shape[-1]
    N = _N(N, L)
    m = top_n_mask(a, N)
    A = a[..., None] * x
    s = np.einsum("...l,...ld->...d", m.astype(np.float64), A)
    return _ret((L - N) / L * _norm(A - s[..., None, :]).sum(-1))


def _d_tilde_for_masks(A: np.ndarray, masks: np.ndarray) -> np.ndarray:
    """``A (..., L, d)``, ``masks (K, ..., L)`` -> d~ for each mask, shape ``(K, ...)``."""
    s = np.einsum("k...l,...ld->k...d", masks.astype(np.float64), A)
    D = _norm(A[None] - s[..., None, :])
    return np.where(masks, 0.0, D).sum(-1)


def expected_distance_mc(alpha: Any, X: Any, N: int, n_samples: int = 64, seed: int = 0, return_stderr: bool = False):
    r"""Monte-Carlo estimate of :math:`\mathbb E_{I_N\sim\mathcal U(I,N)}[\tilde d]` (Eq. 8; ground truth (project decision) §Expectation forms).

    ``n_samples`` uniform N-subsets per row drawn with ``numpy.random.default_rng(seed)``; returns the mean (and,
    with ``return_stderr=True``, the standard error ``std / sqrt(K)``).
    """
    a, x = _alpha_X(alpha, X)
    L = a.shape[-1]
    N = _N(N, L)
    K = check_size("n_samples", n_samples, per_item=max(1, np.size(alpha)))
    seed = check_int("seed", seed, low=0)
    rng = np.random.default_rng(seed)
    keys = rng.random((K,) + a.shape)
    ranks = np.argsort(np.argsort(keys, axis=-1, kind="stable"), axis=-1, kind="stable")
    masks = ranks < N
    vals = _d_tilde_for_masks(a[..., None] * x, masks)
    mean = vals.mean(0)
    if return_stderr:
        se = vals.std(0, ddof=1) / math.sqrt(K) if K > 1 else np.full(mean.shape, np.inf)
        return _ret(mean), _ret(se)
    return _ret(mean)


def expected_distance_exact(alpha: Any, X: Any, N: int, max_subsets: int = 200_000):
    r"""Exact :math:`\mathbb E_{I_N}[\tilde d]` by enumerating all :math:`\binom LN` subsets (Reading the paper, §Expectation forms).

    ``ValueError`` naming ``L`` if the number of subsets exceeds ``max_subsets`` (about ``L <= 16`` for every N).
    """
    max_subsets = check_int("max_subsets", max_subsets, low=1, high=10**7)  # enumerated one by one
    a, x = _alpha_X(alpha, X)
    L = a.shape[-1]
    N = _N(N, L)
    C = math.comb(L, N)
    if C > max_subsets:
        raise ValueError(
            f"L must be small enough for enumeration: comb(L={L}, N={N}) = {C} > max_subsets = {max_subsets}"
        )
    masks = np.zeros((C, L), dtype=bool)
    for k, comb in enumerate(itertools.combinations(range(L), N)):
        masks[k, list(comb)] = True
    masks = np.broadcast_to(masks.reshape((C,) + (1,) * (a.ndim - 1) + (L,)), (C,) + a.shape)
    return _ret(_d_tilde_for_masks(a[..., None] * x, masks).mean(0))


def jensen_gap_exact(alpha: Any, X: Any, N: int):
    """Exact Jensen gap ``eps = E[d~] - E1`` (``p = N/(L-1)``) by enumeration (Reading the paper, §Expectation forms)."""
    return _ret(np.asarray(expected_distance_exact(alpha, X, N)) - np.asarray(expectation_e1(alpha, X, N)))


# ----------------------------------------------------------------------------------------------------------
# Corollary 2 (Reading the paper, §Corollary 2)
# ----------------------------------------------------------------------------------------------------------
def corollary2_linear_bounds(alpha: Any, X: Any, N: int):
    r"""Project-derived fact 1 of §Corollary 2 (reconstructed) (top-N selection: ``d~`` is linear in ``L``):

    .. math:: (L-N)\|s\|_2-(1-\bar\alpha_N)\max_i\|x_i\|_2\le\tilde d\le(L-N)\|s\|_2+(1-\bar\alpha_N)\max_i\|x_i\|_2

    (``1 - abar`` evaluated as the out-of-set mass). Returns ``(lower, upper)``.
    """
    a, x = _alpha_X(alpha, X)
    L = a.shape[-1]
    N = _N(N, L)
    m = top_n_mask(a, N)
    s = np.einsum("...l,...ld->...d", m.astype(np.float64), a[..., None] * x)
    out_mass = np.where(m, 0.0, a).sum(-1)
    mx = _norm(x).max(-1)
    c = (L - N) * _norm(s)
    return _ret(c - out_mass * mx), _ret(c + out_mass * mx)


def corollary2_random_bound(alpha: Any, X: Any, N: int):
    r"""Project-derived fact 2 of §Corollary 2 (reconstructed): :math:`\mathbb E_{I_N}[\tilde d]\le(1+N)\max_i\|x_i\|_2` (random
    selection is bounded in ``L``). Evaluated as ``(1 + N) (sum_i alpha_i) max_i ||x_i||`` (same for normalised rows).
    """
    a, x = _alpha_X(alpha, X)
    N = _N(N, a.shape[-1])
    return _ret((1 + N) * a.sum(-1) * _norm(x).max(-1))


def corollary2_e1_bound(alpha: Any, X: Any, N: int, p: Any = "L-1"):
    r"""Project-derived fact 2 of §Corollary 2 (reconstructed) for E1: :math:`E_1\le(1+p+N)\max_i\|x_i\|_2` (times ``sum alpha``).

    Valid for ``p <= N/(L-N)`` (in particular ``p = N/(L-1)`` and ``p = N/L``).
    """
    a, x = _alpha_X(alpha, X)
    L = a.shape[-1]
    N = _N(N, L)
    pv = 0.0 if N == L else _p(p, N, L)
    return _ret((1 + pv + N) * a.sum(-1) * _norm(x).max(-1))


def corollary2_limits(alpha: Any, X: Any, N: int, p: Any = "L-1") -> dict:
    r"""Corollary 2, both regimes (Reading the paper, §Corollary 2 (reconstructed)).

    (i) ``N`` fixed, ``L`` large, ``p = N/(L-1) -> 0``:

    .. math:: E_1=\underbrace{\frac{L-N}{L}\sum_i\|a_i\|_2}_{\text{individual}}+R,\quad
              |R|\le p\sum_i\|z-a_i\|_2\le\frac{NL}{L-1}\|z\|_2+p\sum_i\|a_i\|_2

    and the individual terms dominate when ``N ||z|| << sum_i alpha_i ||x_i||`` (``dominance_ratio`` small).

    (ii) ``N -> L``: every quantity carries the factor ``(L - N)``; ``outer_factor = (L-N)/L`` and all of d~,
    d_max, E1, E2 are 0 at ``N = L``.

    Returns a dict with keys ``e1, individual, remainder, remainder_bound, remainder_bound_loose,
    dominance_ratio, outer_factor``.
    """
    a, x = _alpha_X(alpha, X)
    L = a.shape[-1]
    N = _N(N, L)
    A = a[..., None] * x
    z = A.sum(-2)
    pv = 0.0 if N == L else _p(p, N, L)
    e1 = np.asarray(expectation_e1(a, x, N, p=p))
    na = _norm(A)
    indiv = (L - N) / L * na.sum(-1)
    rb = pv * _norm(z[..., None, :] - A).sum(-1)
    rbl = (N * L / (L - 1) if L > 1 else 0.0) * _norm(z) + pv * na.sum(-1)
    den = na.sum(-1)
    dom = np.where(den > 0, N * _norm(z) / np.where(den > 0, den, 1.0), np.inf)
    return {
        "e1": _ret(e1),
        "individual": _ret(indiv),
        "remainder": _ret(e1 - indiv),
        "remainder_bound": _ret(rb),
        "remainder_bound_loose": _ret(rbl),
        "dominance_ratio": _ret(dom),
        "outer_factor": (L - N) / L,
    }


def corollary2_e2_identity(alpha: Any, X: Any, N: int) -> dict:
    r"""Project-derived fact 3 of §Corollary 2 (reconstructed): E2 tracks ``d~``.

    .. math:: E_2-\tilde d=\frac{L-N}{L}\sum_{i\in I_N}\|a_i-s\|_2-\frac NL\tilde d,\qquad
              |E_2-\tilde d|\le(N+1)\max_i\|x_i\|_2

    Returns a dict with ``difference`` (E2 - d~ computed directly), ``identity`` (the right-hand side) and
    ``bound`` (``(N+1) (sum alpha) max ||x||``).
    """
    a, x = _alpha_X(alpha, X)
    L = a.shape[-1]
    N = _N(N, L)
    m = top_n_mask(a, N)
    A = a[..., None] * x
    s = np.einsum("...l,...ld->...d", m.astype(np.float64), A)
    D = _norm(A - s[..., None, :])
    dt = np.where(m, 0.0, D).sum(-1)
    e2 = (L - N) / L * D.sum(-1)
    rhs = (L - N) / L * np.where(m, D, 0.0).sum(-1) - N / L * dt
    return {"difference": _ret(e2 - dt), "identity": _ret(rhs), "bound": _ret((N + 1) * a.sum(-1) * _norm(x).max(-1))}


# ----------------------------------------------------------------------------------------------------------
# distinguishable tokens and Theorem 2 (Reading the paper, §Assumptions, §Distinguishable tokens and §Theorem 2)
# ----------------------------------------------------------------------------------------------------------
def selected_offsets(alpha: Any, X: Any, N: int) -> np.ndarray:
    r"""``X_i = ||s - alpha_i x_i||_2 = ||sum_{j in I_N \ {i}} alpha_j x_j||_2`` for ``i in I_N``, in top-N order
    (Reading the paper, §Theorem 2, proof step 1); shape ``(..., N)``. Theorem 2 bounds these by :func:`theorem2_xi`.
    """
    a, x = _alpha_X(alpha, X)
    idx = top_n_indices(a, N)
    m = top_n_mask(a, N)
    A = a[..., None] * x
    s = np.einsum("...l,...ld->...d", m.astype(np.float64), A)
    As = np.take_along_axis(A, idx[..., None], axis=-2)
    return _norm(s[..., None, :] - As)


def distinguishable_count(alpha: Any, X: Any, N: int, r: float | None = None):
    r"""``N_s``: number of geometrically distinguishable selected tokens (Reading the paper, §Distinguishable tokens (reconstructed)).

    With ``D_i = ||a_i - s||_2`` and a radius ``r > 0``:

    .. math:: N_s(r)=\mathbf 1\Big\{\min_{j\notin I_N}D_j>r\Big\}\sum_{i\in I_N}\mathbf 1\{D_i\le r\}.

    ``r=None`` uses the experimental radius ``r = rho_min = min_{j not in I_N} D_j`` with the strict convention
    ``r`` ↑ ``rho_min`` (project decision): ``N_s = |{i in I_N : D_i < rho_min}|`` (``rho_min = inf`` when ``N = L``).
    """
    a, x = _alpha_X(alpha, X)
    N = _N(N, a.shape[-1])
    m = top_n_mask(a, N)
    A = a[..., None] * x
    s = np.einsum("...l,...ld->...d", m.astype(np.float64), A)
    D = _norm(A - s[..., None, :])
    rho = np.where(m, np.inf, D).min(-1)
    if r is None:
        cnt = (m & (D < rho[..., None])).sum(-1)
    else:
        rv = check_positive("r", r)
        cnt = np.where(rho > rv, (m & (D <= rv)).sum(-1), 0)
    cnt = np.asarray(cnt)
    return int(cnt) if cnt.ndim == 0 else cnt


def separability(alpha: Any, X: Any, N: int, r: float | None = None):
    """Separability fraction ``N_s / N`` (Reading the paper, §Distinguishable tokens; ``r=None``: ``r`` ↑ ``rho_min``, the strict convention)."""
    a = _alpha(alpha)
    N = _N(N, a.shape[-1])
    return _ret(np.asarray(distinguishable_count(alpha, X, N, r), dtype=np.float64) / N)


def _M_delta(M: Any, delta: Any) -> tuple[float, float]:
    M = check_positive("M", M)
    d = check_nonnegative("delta", delta)
    if d > 2 * M:
        raise ValueError(f"delta must be in [0, 2M] = [0, {2 * M}] (points on the sphere of radius M; got {delta!r})")
    return M, d


def theorem2_xi(alpha: Any, N: int, M: float, delta: float) -> np.ndarray:
    r"""Theorem 2's :math:`\xi_i` for ``i in I_N`` in top-N order, shape ``(..., N)`` (Reading the paper, §Theorem 2 (reconstructed)):

    .. math:: \xi_i^2=M^2\!\!\sum_{j\in I_N\setminus\{i\}}\!\!\alpha_j^2+\Big(M^2-\tfrac{\delta^2}{2}\Big)\!\!
              \sum_{\substack{j,k\in I_N\setminus\{i\}\\j\ne k}}\!\!\alpha_j\alpha_k
              =\Big(M^2-\tfrac{\delta^2}{2}\Big)\beta_i^2+\tfrac{\delta^2}{2}\!\!\sum_{j\in I_N\setminus\{i\}}\!\!\alpha_j^2,
              \quad\beta_i=\bar\alpha_N-\alpha_i .

    Under Assumptions 1-2 (``||x_j|| = M``, pairwise distance ``>= delta``) ``X_i <= xi_i`` pointwise. ``M > 0`` and
    ``0 <= delta <= 2M`` are required; a negative ``xi^2`` (only possible when no configuration has that ``delta``)
    is clipped to 0.
    """
    a = _alpha(alpha)
    N = _N(N, a.shape[-1])
    M, d = _M_delta(M, delta)
    idx = top_n_indices(a, N)
    aI = np.take_along_axis(a, idx, axis=-1)
    beta = aI.sum(-1, keepdims=True) - aI
    q = (aI**2).sum(-1, keepdims=True) - aI**2
    xi2 = (M**2 - d**2 / 2) * beta**2 + d**2 / 2 * q
    return np.sqrt(np.clip(xi2, 0.0, None))


def theorem2_bounds(alpha: Any, N: int, M: float, delta: float, r: float):
    r"""Theorem 2 (Eq. 11), the paper's form (Reading the paper, §Theorem 2 (reconstructed)); returns ``(lower, upper)``:

    .. math:: 1-\frac{1}{rN}\sum_{i\in I_N}\xi_i\;\le\;\frac{\mathbb E[N_s]}{N}\;\le\;
              \frac1N\sum_{i\in I_N}\exp\Big(-\frac{(\xi_i-r)_+^2}{2M^2}\Big).

    The lower bound (Markov) is rigorous when ``r`` keeps every non-selected token outside ``B_r(s)``. The **upper
    bound is heuristic**: the Hoeffding step needs a *lower* estimate of ``E X_i``, but ``xi_i`` is an upper one
    (rigour caveat of §Theorem 2); :func:`theorem2_hoeffding_upper` evaluates the valid form at a given ``E X_i``.
    """
    xi = theorem2_xi(alpha, N, M, delta)
    rv = check_positive("r", r)
    M = float(M)
    lower = 1.0 - xi.sum(-1) / (rv * xi.shape[-1])
    upper = np.exp(-(np.clip(xi - rv, 0.0, None) ** 2) / (2 * M**2)).mean(-1)
    return _ret(lower), _ret(upper)


def theorem2_hoeffding_upper(mean_X: Any, r: float, M: float, value_range: float | None = None):
    r"""Valid version of Theorem 2's upper bound at given means ``mu_i = E X_i`` (or lower estimates of them):

    .. math:: \frac{\mathbb E[N_s]}{N}\le\frac1N\sum_i\Pr(X_i\le r)\le
              \frac1N\sum_i\exp\Big(-\frac{2(\mu_i-r)_+^2}{R^2}\Big),

    one-variable Hoeffding with range ``R`` (default ``2M`` as in the paper, which gives the paper's
    ``exp(-(mu - r)^2 / (2M^2))``; ``R = M`` is also valid since ``X_i <= M beta_i <= M``). ``mean_X`` has shape
    ``(..., N)``.
    """
    mu = _np(mean_X, "mean_X")
    if mu.ndim == 0 or mu.shape[-1] == 0:
        raise ValueError("mean_X must have shape (..., N) with N >= 1")
    if np.any(mu < 0) or not np.all(np.isfinite(mu)):
        raise ValueError("mean_X must be finite and >= 0")
    rv = check_positive("r", r)
    M = check_positive("M", M)
    R = 2 * M if value_range is None else check_positive("value_range", value_range)
    return _ret(np.exp(-2 * np.clip(mu - rv, 0.0, None) ** 2 / R**2).mean(-1))


# ----------------------------------------------------------------------------------------------------------
# Lemma 2 and Corollary 3 (Reading the paper, §Lemma 2 and §Corollary 3)
# ----------------------------------------------------------------------------------------------------------
def _logits(logits: Any, name: str = "logits") -> np.ndarray:
    l = _np(logits, name)
    if l.ndim == 0 or l.shape[-1] == 0:
        raise ValueError(f"{name} must have shape (..., L) with L >= 1")
    if not np.all(np.isfinite(l)):
        raise ValueError(f"{name} must be finite")
    return l


def softmax_np(logits: Any, temperature: float = 1.0) -> np.ndarray:
    """Stable float64 softmax over the last axis (log-sum-exp shift), for the theory checks."""
    l = _logits(logits)
    T = check_positive("temperature", temperature)
    z = (l - l.max(-1, keepdims=True)) / T
    e = np.exp(z)
    return e / e.sum(-1, keepdims=True)


def softmax_jacobian_np(logits: Any, temperature: float = 1.0) -> np.ndarray:
    r"""``J = (diag alpha - alpha alpha^T) / T`` in float64 numpy, shape ``(..., L, L)`` (Reading the paper, §Corollary 3)."""
    T = check_positive("temperature", temperature)
    a = softmax_np(logits, T)
    return (np.einsum("...i,ij->...ij", a, np.eye(a.shape[-1])) - a[..., :, None] * a[..., None, :]) / T


def _F_dF(F: Callable, dF: Callable | None, l: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if not callable(F):
        raise ValueError(f"F must be callable (got {type(F).__name__})")
    Fv = _eval_F(F, l, None)
    if not np.all(np.isfinite(Fv)) or np.any(Fv <= 0):
        raise ValueError("F must return finite values > 0 at every logit (scheme (3) needs a positive F)")
    if dF is None:
        h = 1e-6 * (1.0 + np.abs(l))
        dFv = (_eval_F(F, l + h, None) - _eval_F(F, l - h, None)) / (2 * h)
    else:
        if not callable(dF):
            raise ValueError(f"dF must be callable or None (got {type(dF).__name__})")
        dFv = _eval_F(dF, l, None)
    if not np.all(np.isfinite(dFv)):
        raise ValueError("dF must return finite values")
    return Fv, dFv


def lemma2_jacobian(F: Callable, dF: Callable | None, logits: Any) -> np.ndarray:
    r"""Exact Jacobian of scheme (3) (Reading the paper, §Lemma 2, standard quotient rule):

    .. math:: J_{ij}=\frac{F'(l_j)(\delta_{ij}-\alpha_i)}{S},\qquad J=\frac1S\big(\mathrm{diag}(F')-\alpha F'^{\top}\big),
              \quad S=\sum_kF(l_k).

    ``dF = None`` uses a central finite difference for ``F'``. ``logits (..., L)`` -> ``(..., L, L)``.
    """
    l = _logits(logits)
    Fv, dFv = _F_dF(F, dF, l)
    S = Fv.sum(-1, keepdims=True)
    a = Fv / S
    L = l.shape[-1]
    J = (np.einsum("...j,ij->...ij", dFv, np.eye(L)) - a[..., :, None] * dFv[..., None, :]) / S[..., None]
    return J


def lemma2_jacobian_bound(F: Callable, dF: Callable | None, logits: Any):
    r"""Lemma 2's bound (Reading the paper, §Lemma 2 (reconstructed)):

    .. math:: \|J\|_2\le\max_j|F'(l_j)|\Big(\frac{1}{L\min_jF(l_j)}+\frac{1}{\sqrt L\,\min_jF(l_j)}\Big).

    For softmax it reads ``e^{(l_max - l_min)/T} / T (1/L + 1/sqrt(L))``, so Corollary 3 does not follow from it.
    """
    l = _logits(logits)
    Fv, dFv = _F_dF(F, dF, l)
    L = l.shape[-1]
    mF = Fv.min(-1)
    return _ret(np.abs(dFv).max(-1) * (1.0 / (L * mF) + 1.0 / (math.sqrt(L) * mF)))


def _T_array(T: Any, name: str = "temperature") -> np.ndarray:
    if isinstance(T, (int, float)) and not isinstance(T, bool):
        arr = np.asarray(float(T))
    else:
        raw = np.asarray(T)
        if raw.dtype.kind not in "iuf":  # strings, booleans, objects, complex numbers
            raise ValueError(f"{name} must be a number or array of numbers > 0 (got {T!r})")
        arr = raw.astype(np.float64)
    if arr.size == 0:
        raise ValueError(f"{name} must be a number or non-empty array of numbers > 0")
    if np.any(~np.isfinite(arr)) or np.any(arr <= 0):
        raise ValueError(f"{name} must be finite and > 0 (got {T!r})")
    return arr


def corollary3_paper(T: Any):
    r"""Corollary 3 in the paper's form (Reading the paper, §Corollary 3 (stated)): :math:`\min\{1/(4T),\sqrt2\}`.

    Shown as stated; it is **not** a valid spectral-norm bound (see :func:`corollary3_counterexample`).
    """
    t = _T_array(T)
    return _ret(np.minimum(1.0 / (4 * t), math.sqrt(2)))


def corollary3_corrected(T: Any, eps: Any = None) -> dict:
    r"""Corrected constants for the softmax Jacobian (Reading the paper, §Corollary 3 (project-derived), §Corollary 3):

    * ``entrywise``: :math:`|J_{ij}|\le 1/(4T)`;
    * ``row``: :math:`\|\nabla_\ell\alpha_i\|_2\le\sqrt2/(4T)`;
    * ``spectral``: :math:`\|J\|_2\le 1/(2T)` (attained at a two-way tie);
    * with ``eps``: ``finite_difference`` :math:`\|\alpha(\ell+\varepsilon v)-\alpha(\ell)\|_2\le\min\{\varepsilon/(2T),\sqrt2\}`
      and ``sensitivity`` :math:`g(T,\varepsilon)\le\min\{1/(2T),\sqrt2/\varepsilon\}`.
    """
    t = _T_array(T)
    out = {"entrywise": _ret(1 / (4 * t)), "row": _ret(math.sqrt(2) / (4 * t)), "spectral": _ret(1 / (2 * t))}
    if eps is not None:
        e = _T_array(eps, "eps")
        out["finite_difference"] = _ret(np.minimum(e / (2 * t), math.sqrt(2)))
        out["sensitivity"] = _ret(np.minimum(1 / (2 * t), math.sqrt(2) / e))
    return out


def corollary3_counterexample(T: float = 1.0, eps: float = 1e-6) -> dict:
    r"""The two-way-tie counterexample to the spectral-norm reading of Corollary 3 (Reading the paper, §Corollary 3).

    At ``l = (0, 0)``: ``J = [[1, -1], [-1, 1]] / (4T)`` and ``||J||_2 = 1/(2T) > min{1/(4T), sqrt 2}`` for every
    ``T > 0``; the finite-difference ratio along ``v = (1, -1)/sqrt 2`` is ``~ 1/(2T)`` (``0.5, 5, 50`` at
    ``T = 1, 0.1, 0.01``), above the paper's curve (``0.25, 1.41, 1.41``). Returns ``J``, ``spectral_norm``, ``paper_bound``,
    ``corrected_bound`` and ``fd_ratio``.
    """
    Tv = check_positive("temperature", T)
    e = check_positive("eps", eps)
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
    r"""The :math:`\sqrt5\,\varepsilon` example of the paper's §2.3 (Reading the paper, §The sqrt(5) eps example (reconstructed)).

    .. math:: \ell^{(1)}=(c+\varepsilon,c,0,\dots,0),\quad\ell^{(2)}=(c-\varepsilon,c+\varepsilon,0,\dots,0),
              \quad\|\ell^{(1)}-\ell^{(2)}\|_2=\sqrt5\,\varepsilon

    Near a dominant tie the linearisation gives :math:`\|\Delta\alpha\|_2\approx\frac{3\sqrt2}{4}\frac{\varepsilon}{T}`.
    Returns ``l1, l2, logit_distance, delta_alpha`` (exact softmax difference norm), ``ratio`` (``delta_alpha / eps``),
    ``linearised`` (``||J(l1)(l1 - l2)||``) and ``tie_approximation`` (``3 sqrt2 eps / (4T)``).
    """
    c = check_finite("c", c)
    e = check_positive("eps", eps)
    Tv = check_positive("temperature", T)
    L = check_size("L", L, low=2)
    l1 = np.zeros(L)
    l2 = np.zeros(L)
    l1[:2] = [c + e, c]
    l2[:2] = [c - e, c + e]
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


# ----------------------------------------------------------------------------------------------------------
# multi-head coverage (Reading the paper, §Multi-head coverage)
# ----------------------------------------------------------------------------------------------------------
def multihead_coverage(p: float, H: int) -> float:
    r"""Coverage of ``H`` independent heads that each separate a fraction ``p`` (the paper's multi-head argument):
    :math:`1-(1-p)^H`. ``p = 0.8, H = 3`` gives ``0.992``.
    """
    p = check_probability("p", p)
    H = check_int("H", H, low=0)
    return _coverage(p, H)


def _coverage(p: float, H: int) -> float:
    """``1 - (1 - p)^H`` as ``-expm1(H log1p(-p))``: accurate also when ``1 - p`` rounds to 1 (tiny ``p``)."""
    if H == 0:
        return 0.0
    if p == 1.0:
        return 1.0
    return -math.expm1(H * math.log1p(-p))


def heads_for_coverage(p: float, c: float) -> int:
    r"""Smallest ``H >= 1`` with :math:`1-(1-p)^H\ge c`, i.e. :math:`\lceil\log(1-c)/\log(1-p)\rceil`.

    ``p`` in ``(0, 1]``, ``c`` in ``(0, 1)``. Exact: the closed form is corrected by checking the neighbours in
    floating point (a tolerance of 1e-12 on the coverage absorbs rounding at exact hits such as ``p = 0.8,
    c = 0.96``). The coverage is evaluated as ``-expm1(H log1p(-p))``, so a tiny ``p`` (where ``1 - p`` rounds to
    1) still gets its very large answer (for ``H`` beyond about ``10^12``: the closed form to rounding).
    ``ValueError`` if ``p`` is so small that ``H`` exceeds the float range.
    """
    p = check_probability("p", p, open_low=True)
    c = check_probability("c", c, open_low=True, open_high=True)
    if p == 1.0:
        return 1
    ratio = math.log1p(-c) / math.log1p(-p)
    if not math.isfinite(ratio):
        raise ValueError(f"p is too small (got {p!r}): more than 1e308 heads would be needed for coverage c = {c!r}")
    H = max(1, math.ceil(ratio - 1e-12))
    tol = 1e-12
    # the closed form is within one or two of the answer; the neighbour checks are bounded, never an open loop
    for _ in range(4):
        if H > 1 and _coverage(p, H - 1) >= c - tol:
            H -= 1
    for _ in range(4):
        if _coverage(p, H) < c - tol:
            H += 1
    return H


#: Most random draws (``n_trials * H``) of :func:`multihead_coverage_simulation`: 10^8, about a second.
_COVERAGE_MAX_DRAWS = 10**8


def multihead_coverage_simulation(p: float, H: int, n_trials: int = 100_000, seed: int = 0) -> float:
    """Bernoulli simulation of §Multi-head coverage: fraction of trials in which at least one of ``H`` independent heads
    (each succeeding with probability ``p``) separates the token. Seeded with ``numpy.random.default_rng(seed)``.
    ``n_trials * H`` may be at most 10^8 (``ValueError`` naming ``n_trials`` beyond).
    """
    p = check_probability("p", p)
    H = check_int("H", H, low=0, high=_COVERAGE_MAX_DRAWS)
    n = check_int("n_trials", n_trials, low=1, high=_COVERAGE_MAX_DRAWS // max(H, 1))
    rng = np.random.default_rng(check_seed("seed", seed))
    if H == 0:
        return 0.0
    # in chunks of about 2**22 draws (32 MB): successive draws continue one stream, so the result is the same
    hits, step = 0, max(1, (1 << 22) // H)
    for i in range(0, n, step):
        hits += int((rng.random((min(step, n - i), H)) < p).any(axis=1).sum())
    return hits / n
