"""Distinguishable tokens and Theorem 2 (chapter 3; Reading the paper, §Assumptions, §Distinguishable tokens
and §Theorem 2)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._validation import check_int, check_int_list, check_nonnegative, check_positive
from ._inputs import alpha_and_X, alpha_array, as_array, as_output, check_N, row_norms, rows_and_N
from .distance_bound import top_n_indices, top_n_sum


def selected_offsets(alpha: Any, X: Any, N: int) -> np.ndarray:
    r"""``X_i = ||s - alpha_i x_i||_2 = ||sum_{j in I_N \ {i}} alpha_j x_j||_2`` ``(..., N)`` for ``i in I_N``, in top-N
    order (Reading the paper, §Theorem 2, proof step 1); Theorem 2 bounds these by :func:`theorem2_xi`."""
    a, x = alpha_and_X(alpha, X)
    _, A, s = top_n_sum(a, x, N)
    return row_norms(s[..., None, :] - np.take_along_axis(A, top_n_indices(a, N)[..., None], axis=-2))


def distinguishable_count(alpha: Any, X: Any, N: int, r: float | None = None):
    r"""``N_s``: number of geometrically distinguishable selected tokens (Reading the paper, §Distinguishable tokens,
    reconstructed). With ``D_i = ||a_i - s||_2`` and a radius ``r > 0``:

    .. math:: N_s(r)=\mathbf 1\Big\{\min_{j\notin I_N}D_j>r\Big\}\sum_{i\in I_N}\mathbf 1\{D_i\le r\}.

    ``r=None`` uses the experimental radius ``r = rho_min = min_{j not in I_N} D_j`` with the strict convention
    ``r`` ↑ ``rho_min`` (project decision): ``N_s = |{i in I_N : D_i < rho_min}|`` (``rho_min = inf`` when ``N = L``),
    compared on ``D_i^2 - ||s||^2 = ||a_i||^2 - 2 a_i . s`` (Reading the paper, §The ball test).
    """
    a, x, _, N = rows_and_N(alpha, X, N)
    m, A, s = top_n_sum(a, x, N)
    if r is None:
        excess = (A * A).sum(-1) - 2 * (A * s[..., None, :]).sum(-1)
        cnt = (m & (excess < np.where(m, np.inf, excess).min(-1)[..., None])).sum(-1)
    else:
        D, rv = row_norms(A - s[..., None, :]), check_positive("r", r)
        cnt = np.where(np.where(m, np.inf, D).min(-1) > rv, (m & (D <= rv)).sum(-1), 0)
    cnt = np.asarray(cnt)
    return int(cnt) if cnt.ndim == 0 else cnt


def separability(alpha: Any, X: Any, N: int, r: float | None = None):
    """Separability fraction ``N_s / N`` (Reading the paper, §Distinguishable tokens; ``r=None``: ``r`` ↑ ``rho_min``,
    the strict convention)."""
    count = distinguishable_count(alpha, X, N, r)  # checks alpha, X, N (an integer in [1, L]) and r
    return as_output(np.asarray(count, dtype=np.float64) / int(N))


def theorem2_xi(alpha: Any, N: int, M: float, delta: float) -> np.ndarray:
    r"""Theorem 2's :math:`\xi_i` ``(..., N)`` for ``i in I_N`` in top-N order (Reading the paper, §Theorem 2,
    reconstructed):

    .. math:: \xi_i^2=M^2\!\!\sum_{j\in I_N\setminus\{i\}}\!\!\alpha_j^2+\Big(M^2-\tfrac{\delta^2}{2}\Big)\!\!
              \sum_{\substack{j,k\in I_N\setminus\{i\}\\j\ne k}}\!\!\alpha_j\alpha_k
              =\Big(M^2-\tfrac{\delta^2}{2}\Big)\beta_i^2+\tfrac{\delta^2}{2}\!\!\sum_{j\in I_N\setminus\{i\}}\!\!\alpha_j^2,
              \quad\beta_i=\bar\alpha_N-\alpha_i .

    Under Assumptions 1-2 (``||x_j|| = M``, pairwise distance ``>= delta``) ``X_i <= xi_i`` pointwise. ``M > 0`` and
    ``0 <= delta <= 2M`` are required; a negative ``xi^2`` (only possible when no configuration has that ``delta``)
    is clipped to 0.

    Chapter 3, ``thm-separability`` (SymPy expansion: :func:`attn_lib.book.symbolic.theorem2_expansion`); tested by
    ``tests/test_theory.py::test_theorem2_xi_matches_double_sum``.
    """
    a = alpha_array(alpha)
    N = check_N(N, a.shape[-1])
    M, d = check_positive("M", M), check_nonnegative("delta", delta)
    if d > 2 * M:
        raise ValueError(f"delta must be in [0, 2M] = [0, {2 * M}] (points on the sphere of radius M; got {delta!r})")
    aI = np.take_along_axis(a, top_n_indices(a, N), axis=-1)
    beta = aI.sum(-1, keepdims=True) - aI
    q = (aI**2).sum(-1, keepdims=True) - aI**2
    xi2 = (M**2 - d**2 / 2) * beta**2 + d**2 / 2 * q
    return np.sqrt(np.clip(xi2, 0.0, None))


def theorem2_bounds(alpha: Any, N: int, M: float, delta: float, r: float):
    r"""Theorem 2 (Eq. 11), the paper's form (Reading the paper, §Theorem 2, reconstructed); ``(lower, upper)``:

    .. math:: 1-\frac{1}{rN}\sum_{i\in I_N}\xi_i\;\le\;\frac{\mathbb E[N_s]}{N}\;\le\;
              \frac1N\sum_{i\in I_N}\exp\Big(-\frac{(\xi_i-r)_+^2}{2M^2}\Big).

    The lower bound (Markov) is rigorous when ``r`` keeps every non-selected token outside ``B_r(s)``. The **upper
    bound is heuristic**: the Hoeffding step needs a *lower* estimate of ``E X_i``, but ``xi_i`` is an upper one
    (rigour caveat of §Theorem 2); :func:`theorem2_hoeffding_upper` evaluates the valid form at a given ``E X_i``.

    Chapter 3, ``thm-separability``; tested by ``tests/test_theory.py::test_theorem2_bounds_formula``. Its lower bound
    holds row by row for fixed vectors (chapter 3, ``prop-lower-rowwise``).
    """
    xi = theorem2_xi(alpha, N, M, delta)
    rv = check_positive("r", r)
    M = float(M)
    lower = 1.0 - xi.sum(-1) / (rv * xi.shape[-1])
    upper = np.exp(-(np.clip(xi - rv, 0.0, None) ** 2) / (2 * M**2)).mean(-1)
    return as_output(lower), as_output(upper)


def theorem2_hoeffding_upper(mean_X: Any, r: float, M: float, value_range: float | None = None):
    r"""Valid version of Theorem 2's upper bound at given means ``mu_i = E X_i`` (or lower estimates of them):

    .. math:: \frac{\mathbb E[N_s]}{N}\le\frac1N\sum_i\Pr(X_i\le r)\le
              \frac1N\sum_i\exp\Big(-\frac{2(\mu_i-r)_+^2}{R^2}\Big),

    one-variable Hoeffding with range ``R`` (default ``2M``, the paper's ``exp(-(mu - r)^2 / (2M^2))``; ``R = M`` is
    also valid since ``X_i <= M beta_i <= M``); ``mean_X`` ``(..., N)``.

    Chapter 3, ``prop-valid-upper``; tested by ``tests/test_theory.py::test_theorem2_monte_carlo_on_sphere``.
    """
    mu = as_array(mean_X, "mean_X")
    if mu.ndim == 0 or mu.shape[-1] == 0:
        raise ValueError("mean_X must have shape (..., N) with N >= 1")
    if np.any(mu < 0) or not np.all(np.isfinite(mu)):
        raise ValueError("mean_X must be finite and >= 0")
    rv, M = check_positive("r", r), check_positive("M", M)
    R = 2 * M if value_range is None else check_positive("value_range", value_range)
    return as_output(np.exp(-2 * np.clip(mu - rv, 0.0, None) ** 2 / R**2).mean(-1))


def sphere_separability(
    n_values, temperature: float = 1.0, *, seed: int = 0, trials: int = 64, d: int = 64, L: int = 256
) -> dict[int, float]:
    r"""``{N: mean over trials of N_s/N}`` (:func:`separability`, ``r`` ↑ ``rho_min``) for every ``N`` of ``n_values``
    (in ``[1, L]``) for *ideal spherical embeddings*: per trial (``numpy.random.default_rng(seed)``), ``L`` vectors
    uniform on the unit sphere in ``d`` dimensions (Assumption 1) and fixed weights ``softmax(l / T)`` with standard
    normal logits, drawn independently of the vectors (the weights are fixed in Theorem 2)."""
    T = check_positive("temperature", temperature)
    seed, trials = check_int("seed", seed, low=0), check_int("trials", trials, low=1)
    d, L = check_int("d", d, low=2), check_int("L", L, low=2)
    ns = check_int_list("n_values", n_values, low=1, high=L)
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((trials, L, d))
    X /= np.linalg.norm(X, axis=-1, keepdims=True)
    logits = rng.standard_normal((trials, L)) / T
    alpha = np.exp(logits - logits.max(-1, keepdims=True))  # stable softmax
    alpha /= alpha.sum(-1, keepdims=True)
    return {n: float(np.mean(separability(alpha, X, n))) for n in ns}
