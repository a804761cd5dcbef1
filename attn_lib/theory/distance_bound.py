"""Top-N selection, the distance d~, Theorem 1 and Corollary 2 (chapter 2; Reading the paper, §Notation,
§Theorem 1(a), §Expectation forms and §Corollary 2)."""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np

from .._validation import check_choice, check_int, check_size
from ._inputs import alpha_and_X, alpha_array, as_output, check_N, inclusion_p, row_norms, rows_and_N


def top_n_indices(alpha: Any, N: int) -> np.ndarray:
    """Indices ``(..., N)`` of the ``N`` largest weights of ``alpha (..., L)``, largest first, ties to the lower index
    (stable sort; Reading the paper, §Notation, a project decision); ``N`` an integer in ``[1, L]``."""
    a = alpha_array(alpha)
    N = check_N(N, a.shape[-1])
    return np.argsort(-a, axis=-1, kind="stable")[..., :N]


def top_n_mask(alpha: Any, N: int) -> np.ndarray:
    """Boolean mask ``(..., L)`` of the top-N set ``I_N`` (same tie rule as :func:`top_n_indices`)."""
    a = alpha_array(alpha)
    m = np.zeros(a.shape, dtype=bool)
    np.put_along_axis(m, top_n_indices(a, N), True, axis=-1)
    return m


def top_n_sum(a: np.ndarray, x: np.ndarray, N: Any, m: Any = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(m, A, s)`` of checked rows: the top-N mask (or the given ``m``), ``A = alpha_i x_i`` and ``s`` of Eq. (6)."""
    m = top_n_mask(a, N) if m is None else m
    A = a[..., None] * x
    return m, A, np.einsum("...l,...ld->...d", m.astype(np.float64), A)


def _selection(a: np.ndarray, N: Any, selected: Any) -> tuple[np.ndarray, int]:
    L = a.shape[-1]
    if selected is None:
        if N is None:
            raise ValueError("N must be an integer in [1, L] (got None and no selected set)")
        return top_n_mask(a, N), check_N(N, L)
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
    r"""Context vector of Eq. (6): :math:`s=\sum_{i\in I_N}\alpha_i x_i` ``(..., d)`` (Reading the paper, §Notation)."""
    a, x = alpha_and_X(alpha, X)
    return np.einsum("...l,...ld->...d", a * top_n_mask(a, N), x)


def distance(alpha: Any, X: Any, N: int | None = None, form: str = "sum", selected: Any = None):
    r"""Distance ``d~`` of Eq. (7) (Reading the paper, §Notation and §Decisions for the experiments, decision a;
    reconstructed, a project decision).

    ``form="sum"``: :math:`\tilde d=\sum_{i\notin I_N}\|\alpha_ix_i-s\|_2`; ``form="vector"`` (variant):
    :math:`\|\sum_{i\notin I_N}\alpha_ix_i-s\|_2` (literal; equals ``||s||`` when nothing is left out, and is at most
    ``max ||x||`` for weights that sum to one). ``I_N`` is the top-N set unless ``selected`` (a bool mask ``(..., L)``
    or index array ``(..., N)``) gives another set, e.g. a random one.
    """
    check_choice("form", form, ["sum", "vector"])
    a, x = alpha_and_X(alpha, X)
    m, A, s = top_n_sum(a, x, N, _selection(a, N, selected)[0])
    if form == "sum":
        D = row_norms(A - s[..., None, :])
        return as_output(np.where(m, 0.0, D).sum(axis=-1))
    out = np.einsum("...l,...ld->...d", (~m).astype(np.float64), A)
    return as_output(row_norms(out - s))


def theorem1_dmax(alpha: Any, X: Any, N: int, return_parts: bool = False):
    r"""Theorem 1, fixed top-N set (Reading the paper, §Theorem 1(a) (reconstructed)):

    .. math:: \tilde d\le d_{\max}:=(1-\bar\alpha_N)\,d_1+\Big((L-N)\bar\alpha_N-(1-\bar\alpha_N)\Big)
              \max_{j\in I_N}\|x_j\|_2,\qquad d_1=\max_{i\notin I_N,\,j\in I_N}\|x_i-x_j\|_2 .

    ``1 - abar`` is evaluated as the out-of-set mass ``sum_{i not in I_N} alpha_i`` (identical for rows that sum to
    one; for other non-negative weights the form the proof gives). ``N = L`` gives 0 (``d1 := 0``).
    ``return_parts=True`` returns a dict with ``d_max``, ``d1``, ``abar``, ``out_mass``, ``max_norm``.

    Chapter 2, ``thm-distance`` (a): the reference for ``d_max`` (also the one :func:`attn_lib.book.symbolic.theorem1_steps` checks);
    tested by ``tests/test_theory.py::test_theorem1_dmax_holds_on_20000_instances``.
    """
    a, x, L, N = rows_and_N(alpha, X, N)
    m = top_n_mask(a, N)
    abar = np.where(m, a, 0.0).sum(-1)
    out_mass = np.where(m, 0.0, a).sum(-1)
    norms = row_norms(x)
    max_norm = np.where(m, norms, -np.inf).max(-1)
    idx = top_n_indices(a, N)
    xs = np.take_along_axis(x, idx[..., None], axis=-2)  # (..., N, d)
    sq = norms**2
    sq_sel = np.take_along_axis(sq, idx, axis=-1)
    D2 = sq[..., :, None] + sq_sel[..., None, :] - 2 * np.einsum("...ld,...nd->...ln", x, xs)
    D = np.sqrt(np.clip(D2, 0.0, None))  # ||x_i - x_j||, i any, j in I_N
    d1 = np.where(m[..., :, None], -np.inf, D).max(axis=(-2, -1))
    d1 = np.where(np.isfinite(d1), d1, 0.0)
    dmax = dmax_from_parts(out_mass, d1, abar, max_norm, L - N)
    if return_parts:
        parts = {"d_max": dmax, "d1": d1, "abar": abar, "out_mass": out_mass, "max_norm": max_norm}
        return {k: as_output(v) for k, v in parts.items()}
    return as_output(dmax)


def dmax_from_parts(out_mass, d1, abar, max_norm, outside):
    r"""Theorem 1's :math:`d_{\max}` from its parts: ``out_mass * d1 + (outside * abar - out_mass) * max_norm``, with
    ``out_mass`` :math:`1-\bar\alpha_N`, ``outside`` ``L - N`` and ``max_norm`` :math:`\max_{j\in I_N}\|x_j\|_2`
    (floats, numpy arrays or torch tensors; chapter 2's exercise evaluates it on wrong parts to name a mistake)."""
    return out_mass * d1 + (outside * abar - out_mass) * max_norm


def expectation_e1(alpha: Any, X: Any, N: int, p: Any = "L-1"):
    r"""Expectation form E1 (Reading the paper, §Expectation forms, reconstructed; §Decisions for the experiments, b):

    .. math:: E_1=\frac{L-N}{L}\sum_{i=1}^{L}\Big\|a_i-p\sum_{j\ne i}a_j\Big\|_2
              =\frac{L-N}{L}\sum_i\|(1+p)a_i-pz\|_2

    with ``p = N/(L-1)`` (``p="L-1"``, the exact conditional inclusion probability; then ``E[d~] = E1 + eps`` with
    ``0 <= eps <=`` :func:`jensen_gap_bound`) or ``p = N/L`` (``p="L"``), or a number. ``N = L`` gives 0.

    Chapter 2, ``thm-distance`` (b): the reference for ``E1``; tested by
    ``tests/test_theory.py::test_e1_closed_form_matches_definition_and_gap_zero_at_n_equals_l_minus_1``.
    """
    a, x, L, N = rows_and_N(alpha, X, N)
    if N == L:
        return as_output(np.zeros(a.shape[:-1]))
    pv = inclusion_p(p, N, L)
    A = a[..., None] * x
    z = A.sum(-2)
    return as_output((L - N) / L * row_norms((1 + pv) * A - pv * z[..., None, :]).sum(-1))


def jensen_gap_bound(alpha: Any, X: Any, N: int, p: Any = "L-1", crude: bool = False):
    r"""Upper bound on the Jensen gap ``eps = E[d~] - E1`` (Reading the paper, §Expectation forms, reconstructed):

    .. math:: 0\le\varepsilon\le\frac{L-N}{L}\sum_{i=1}^{L}\sqrt{p(1-p)\Big[\tfrac{L-1}{L-2}\sum_{j\ne i}\|a_j\|^2
              -\tfrac{1}{L-2}\Big\|\sum_{j\ne i}a_j\Big\|^2\Big]}

    (the bracket is the exact variance of the conditional context vector for sampling without replacement);
    ``crude=True`` drops the negative term. The guarantee holds for ``p = N/(L-1)`` (default); other ``p`` just
    evaluate the same expression. ``N >= L-1`` gives 0 (no randomness left given ``i`` is excluded).

    Chapter 2, ``thm-distance`` (b); tested by ``tests/test_theory.py::test_jensen_gap_bound_by_enumeration_300_cases``.
    """
    a, x, L, N = rows_and_N(alpha, X, N)
    if N >= L - 1:
        return as_output(np.zeros(a.shape[:-1]))
    pv = inclusion_p(p, N, L)
    A = a[..., None] * x
    sq = (A**2).sum(-1)
    br = (L - 1) / (L - 2) * (sq.sum(-1, keepdims=True) - sq)
    if not crude:  # minus ||z - a_i||^2 / (L-2)
        br = br - ((A.sum(-2)[..., None, :] - A) ** 2).sum(-1) / (L - 2)
    br = np.clip(br, 0.0, None)
    return as_output((L - N) / L * np.sqrt(pv * (1 - pv) * br).sum(-1))


def expectation_e2(alpha: Any, X: Any, N: int):
    r"""Expectation form E2 (Reading the paper, §Expectation forms, reconstructed, heuristic): replace only the
    exclusion indicator, :math:`E_2=\frac{L-N}{L}\sum_{i=1}^{L}\|\alpha_ix_i-s\|_2` with ``s`` the actual top-N vector.

    Chapter 2, ``prop-e2-tracks``: the reference for ``E2``; tested by
    ``tests/test_theory.py::test_e2_identity_and_bound``.
    """
    a, x, L, N = rows_and_N(alpha, X, N)
    _, A, s = top_n_sum(a, x, N)
    return as_output((L - N) / L * row_norms(A - s[..., None, :]).sum(-1))


def _d_tilde_for_masks(A: np.ndarray, masks: np.ndarray) -> np.ndarray:
    """d~ ``(K, ...)`` of ``A (..., L, d)`` for each of the ``masks (K, ..., L)``."""
    s = np.einsum("k...l,...ld->k...d", masks.astype(np.float64), A)
    D = row_norms(A[None] - s[..., None, :])
    return np.where(masks, 0.0, D).sum(-1)


def expected_distance_mc(alpha: Any, X: Any, N: int, n_samples: int = 64, seed: int = 0, return_stderr: bool = False):
    r"""Monte-Carlo estimate of :math:`\mathbb E_{I_N\sim\mathcal U(I,N)}[\tilde d]` (Eq. 8; the ground truth, a project
    decision, §Expectation forms) from ``n_samples`` uniform N-subsets per row drawn with
    ``numpy.random.default_rng(seed)``; with ``return_stderr=True`` also the standard error ``std / sqrt(K)``.

    Chapter 2, ``thm-distance`` (b); tested by
    ``tests/test_theory.py::test_monte_carlo_matches_enumeration_within_standard_error``.
    """
    a, x, _, N = rows_and_N(alpha, X, N)
    K = check_size("n_samples", n_samples, per_item=max(1, a.size))
    seed = check_int("seed", seed, low=0)
    keys = np.random.default_rng(seed).random((K,) + a.shape)
    ranks = np.argsort(np.argsort(keys, axis=-1, kind="stable"), axis=-1, kind="stable")
    vals = _d_tilde_for_masks(a[..., None] * x, ranks < N)
    mean = vals.mean(0)
    if return_stderr:
        se = vals.std(0, ddof=1) / math.sqrt(K) if K > 1 else np.full(mean.shape, np.inf)
        return as_output(mean), as_output(se)
    return as_output(mean)


def expected_distance_exact(alpha: Any, X: Any, N: int, max_subsets: int = 200_000):
    r"""Exact :math:`\mathbb E_{I_N}[\tilde d]` by enumerating all :math:`\binom LN` subsets (Reading the paper,
    §Expectation forms); ``ValueError`` naming ``L`` beyond ``max_subsets`` (about ``L <= 16`` for every N).

    Chapter 2, ``thm-distance`` (b), the exact left-hand side; tested by
    ``tests/test_theory.py::test_exact_enumeration_matches_brute_force``.
    """
    max_subsets = check_int("max_subsets", max_subsets, low=1, high=10**7)  # enumerated one by one
    a, x, L, N = rows_and_N(alpha, X, N)
    C = math.comb(L, N)
    if C > max_subsets:
        raise ValueError(
            f"L must be small enough for enumeration: comb(L={L}, N={N}) = {C} > max_subsets = {max_subsets}"
        )
    masks = np.zeros((C, L), dtype=bool)
    for k, comb in enumerate(itertools.combinations(range(L), N)):
        masks[k, list(comb)] = True
    masks = np.broadcast_to(masks.reshape((C,) + (1,) * (a.ndim - 1) + (L,)), (C,) + a.shape)
    return as_output(_d_tilde_for_masks(a[..., None] * x, masks).mean(0))


def jensen_gap_exact(alpha: Any, X: Any, N: int):
    """Exact Jensen gap ``eps = E[d~] - E1`` (``p = N/(L-1)``) by enumeration (Reading the paper, §Expectation
    forms)."""
    return as_output(np.asarray(expected_distance_exact(alpha, X, N)) - np.asarray(expectation_e1(alpha, X, N)))


def corollary2_linear_bounds(alpha: Any, X: Any, N: int):
    r"""Project-derived fact 1 of §Corollary 2 (reconstructed; top-N selection: ``d~`` is linear in ``L``):

    .. math:: (L-N)\|s\|_2-(1-\bar\alpha_N)\max_i\|x_i\|_2\le\tilde d\le(L-N)\|s\|_2+(1-\bar\alpha_N)\max_i\|x_i\|_2

    (``1 - abar`` evaluated as the out-of-set mass). Returns ``(lower, upper)``.

    Chapter 2, ``prop-topn-linear``; tested by ``tests/test_theory.py::test_corollary2_facts_hold``.
    """
    a, x, L, N = rows_and_N(alpha, X, N)
    m, _, s = top_n_sum(a, x, N)
    out_mass = np.where(m, 0.0, a).sum(-1)
    mx = row_norms(x).max(-1)
    c = (L - N) * row_norms(s)
    return as_output(c - out_mass * mx), as_output(c + out_mass * mx)


def corollary2_random_bound(alpha: Any, X: Any, N: int):
    r"""Project-derived fact 2 of §Corollary 2 (reconstructed): random selection is bounded in ``L``,
    :math:`\mathbb E_{I_N}[\tilde d]\le(1+N)\max_i\|x_i\|_2`, evaluated as ``(1 + N) (sum_i alpha_i) max_i ||x_i||``.

    Chapter 2, ``prop-random-bounded``, one of the bounds of chapter 6's ``prop-fig2-readings``; tested by
    ``tests/test_theory.py::test_corollary2_facts_hold``.
    """
    a, x, _, N = rows_and_N(alpha, X, N)
    return as_output((1 + N) * a.sum(-1) * row_norms(x).max(-1))


def corollary2_e1_bound(alpha: Any, X: Any, N: int, p: Any = "L-1"):
    r"""Project-derived fact 2 of §Corollary 2 (reconstructed) for E1: :math:`E_1\le(1+p+N)\max_i\|x_i\|_2` (times
    ``sum alpha``), valid for ``p <= N/(L-N)`` (in particular ``p = N/(L-1)`` and ``p = N/L``).

    Chapter 2, ``prop-random-bounded``, one of the bounds of chapter 6's ``prop-fig2-readings``; tested by
    ``tests/test_theory.py::test_corollary2_facts_hold``.
    """
    a, x, L, N = rows_and_N(alpha, X, N)
    pv = 0.0 if N == L else inclusion_p(p, N, L)
    return as_output((1 + pv + N) * a.sum(-1) * row_norms(x).max(-1))


def corollary2_limits(alpha: Any, X: Any, N: int, p: Any = "L-1") -> dict:
    r"""Corollary 2, both regimes (Reading the paper, §Corollary 2, reconstructed). (i) ``N`` fixed, ``L`` large,
    ``p = N/(L-1) -> 0``:

    .. math:: E_1=\underbrace{\frac{L-N}{L}\sum_i\|a_i\|_2}_{\text{individual}}+R,\quad
              |R|\le p\sum_i\|z-a_i\|_2\le\frac{NL}{L-1}\|z\|_2+p\sum_i\|a_i\|_2

    and the individual terms dominate when ``N ||z|| << sum_i alpha_i ||x_i||`` (``dominance_ratio`` small).

    (ii) ``N -> L``: every quantity carries the factor ``(L - N)``; ``outer_factor = (L-N)/L`` and all of d~, d_max,
    E1, E2 are 0 at ``N = L``. Returns a dict with keys ``e1, individual, remainder, remainder_bound,
    remainder_bound_loose, dominance_ratio, outer_factor``.

    Chapter 2, ``cor-two-regimes``; tested by ``tests/test_theory.py::test_corollary2_regimes``.
    """
    a, x, L, N = rows_and_N(alpha, X, N)
    A = a[..., None] * x
    z = A.sum(-2)
    pv = 0.0 if N == L else inclusion_p(p, N, L)
    e1 = np.asarray(expectation_e1(a, x, N, p=p))
    den = row_norms(A).sum(-1)  # sum_i ||a_i||
    indiv = (L - N) / L * den
    out = {
        "e1": e1,
        "individual": indiv,
        "remainder": e1 - indiv,
        "remainder_bound": pv * row_norms(z[..., None, :] - A).sum(-1),
        "remainder_bound_loose": (N * L / (L - 1) if L > 1 else 0.0) * row_norms(z) + pv * den,
        "dominance_ratio": np.where(den > 0, N * row_norms(z) / np.where(den > 0, den, 1.0), np.inf),
    }
    return {k: as_output(v) for k, v in out.items()} | {"outer_factor": (L - N) / L}


def corollary2_e2_identity(alpha: Any, X: Any, N: int) -> dict:
    r"""Project-derived fact 3 of §Corollary 2 (reconstructed): E2 tracks ``d~``,

    .. math:: E_2-\tilde d=\frac{L-N}{L}\sum_{i\in I_N}\|a_i-s\|_2-\frac NL\tilde d,\qquad
              |E_2-\tilde d|\le(N+1)\max_i\|x_i\|_2

    as a dict of ``difference`` (E2 - d~ computed directly), ``identity`` (the right-hand side) and ``bound``
    (``(N+1) (sum alpha) max ||x||``).

    Chapter 2, ``prop-e2-tracks``, one of the bounds of chapter 6's ``prop-fig2-readings``; tested by
    ``tests/test_theory.py::test_e2_identity_and_bound``.
    """
    a, x, L, N = rows_and_N(alpha, X, N)
    m, A, s = top_n_sum(a, x, N)
    D = row_norms(A - s[..., None, :])
    dt = np.where(m, 0.0, D).sum(-1)
    e2 = (L - N) / L * D.sum(-1)
    rhs = (L - N) / L * np.where(m, D, 0.0).sum(-1) - N / L * dt
    out = {"difference": e2 - dt, "identity": rhs, "bound": (N + 1) * a.sum(-1) * row_norms(x).max(-1)}
    return {k: as_output(v) for k, v in out.items()}
