"""Checks for the course assignments (``assignments/``) and the index of the book's exercises.

Each ``check_*`` function takes a student's function, calls it on fixed, seeded inputs and compares the result with
the library's reference (:mod:`attn_lib.theory`, :mod:`attn_lib.normalizers`). It returns ``None`` when the answer
is right and raises :class:`AssertionError` whose message starts with ``HINT:`` and names what is wrong otherwise:
the typical mistakes (a missing ``1/T``, the wrong axis, an unclipped sparsemax, ...) are recognised by computing
them too and saying which one the answer matches. The Otter tests of the assignments call these checks, so the
hints are unit-tested (``tests/test_exercises.py``) like the rest of the library.

:func:`exercise_index` reads the exercises of the book's chapters (the ``{exercise}`` blocks) and
:func:`assignment_index` the questions of the assignments; the instructor page builds its tables from both.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from attn_lib import theory
from attn_lib._validation import check_seed

__all__ = [
    # chapter 1
    "check_stable_softmax",
    "check_lemma1_bounds",
    # chapter 2
    "check_distance",
    "check_dmax",
    # chapter 3
    "check_distinguishable_count",
    "check_theorem2_xi",
    "check_markov_lower_bound",
    # chapter 4
    "check_softmax_jacobian",
    "check_jacobian_norm_bound",
    "check_spectral_norm",
    # chapter 5
    "check_sparsemax",
    "check_coverage",
    "check_heads_for_coverage",
    # indexes for the instructor page
    "exercise_index",
    "assignment_index",
    "coverage",
    "EXERCISE_KINDS",
    "EXERCISE_DIFFICULTIES",
]

#: Seed of every input the checks draw (fixed: the same inputs, hence the same verdict, on every run).
SEED = 20250824
RTOL = 1e-6
ATOL = 1e-9


# ----------------------------------------------------------------------------------------------------------
# shared machinery
# ----------------------------------------------------------------------------------------------------------
def _check_callable(fn: Any) -> None:
    if not callable(fn):
        raise ValueError(f"fn must be the function to check, a callable (got {type(fn).__name__})")


def _as_array(out: Any, who: str) -> np.ndarray:
    """The student's result as a float64 array (torch tensors are moved to the CPU first)."""
    if out is None:
        raise AssertionError(f"HINT: {who} returned None: replace the `...` by your code and `return` the result")
    if hasattr(out, "detach"):  # a torch tensor, possibly on a GPU
        out = out.detach().cpu().double().numpy()
    try:
        arr = np.asarray(out, dtype=np.float64)
    except (TypeError, ValueError):
        raise AssertionError(f"HINT: {who} must return numbers (got {type(out).__name__})") from None
    return arr


def _call(fn: Callable, who: str, *args) -> Any:
    try:
        return fn(*args)
    except Exception as exc:  # any error of the student's code becomes a hint, with its cause chained
        shown = ", ".join(_short(a) for a in args)
        raise AssertionError(f"HINT: {who}({shown}) raised {type(exc).__name__}: {exc}") from exc


def _short(a: Any) -> str:
    if isinstance(a, np.ndarray):
        return f"<array of shape {a.shape}>"
    return repr(a)


def _close(a: np.ndarray, b: Any) -> bool:
    b = np.asarray(b, dtype=np.float64)
    return a.shape == b.shape and bool(np.all(np.isfinite(a))) and np.allclose(a, b, rtol=RTOL, atol=ATOL)


def _verdict(got: np.ndarray, expected: Any, mistakes: list[tuple[str, Any]], generic: str) -> None:
    """Pass if ``got`` matches ``expected``; else raise the hint of the first mistake it matches, or ``generic``."""
    if _close(got, expected):
        return
    for hint, wrong in mistakes:
        if _close(got, wrong):
            raise AssertionError(f"HINT: {hint}")
    raise AssertionError(f"HINT: {generic}")


def _shape(got: np.ndarray, shape: tuple, who: str, what: str) -> None:
    if got.shape != tuple(shape):
        raise AssertionError(f"HINT: {who} returned shape {got.shape}, expected {tuple(shape)} ({what})")


def _finite(got: np.ndarray, who: str, why: str) -> None:
    if not np.all(np.isfinite(got)):
        raise AssertionError(f"HINT: {who} returned inf or nan {why}")


def _rng(seed: Any) -> np.random.Generator:
    return np.random.default_rng(check_seed("seed", seed))


def _row(L: int, d: int, scale: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """One attention row: softmax weights of random logits and random token vectors ``X (L, d)``."""
    alpha = theory.softmax_np(scale * rng.standard_normal(L))
    return alpha, rng.standard_normal((L, d))


# ----------------------------------------------------------------------------------------------------------
# chapter 1: vanishing attention
# ----------------------------------------------------------------------------------------------------------
def check_stable_softmax(fn: Callable, seed: int = SEED) -> None:
    """Check ``fn(logits, T)``: the softmax of ``logits / T`` over the last axis, computed stably.

    Parameters
    ----------
    fn : callable
        ``fn(logits, T) -> weights`` with ``logits`` a float64 array of shape ``(B, L)``, ``T > 0`` a float, and
        ``weights`` of shape ``(B, L)`` (numpy array or torch tensor), each row summing to one.
    seed : int, optional
        Seed of the inputs (the public tests use the default, the hidden tests other seeds).

    Returns
    -------
    None
        Raises ``AssertionError("HINT: ...")`` naming the mistake when the answer is wrong.
    """
    _check_callable(fn)
    who = "your softmax"
    l = 3.0 * _rng(seed).standard_normal((4, 7))
    got = _as_array(_call(fn, "fn", l.copy(), 1.0), who)
    _shape(got, l.shape, who, "one row of weights per row of logits")
    e = np.exp(l - l.max(0, keepdims=True))
    if _close(got, e / e.sum(0, keepdims=True)):
        raise AssertionError("HINT: you normalised over the wrong axis: each ROW (the last axis) must sum to one")
    if _close(got, np.exp(l)) or _close(got, np.exp(l - l.max(-1, keepdims=True))):
        raise AssertionError("HINT: rows of your softmax do not sum to one: divide by the row sum of the exponentials")
    _finite(got, who, "for moderate logits")
    if not np.allclose(got.sum(-1), 1.0, rtol=0, atol=1e-9):
        raise AssertionError("HINT: rows of your softmax do not sum to one")
    _verdict(got, theory.softmax_np(l), [], "your softmax does not match softmax(logits) at T = 1")

    T = 0.5
    got = _as_array(_call(fn, "fn", l.copy(), T), who)
    _verdict(
        got,
        theory.softmax_np(l, T),
        [
            ("your softmax ignores the temperature: compute softmax(logits / T)", theory.softmax_np(l)),
            ("you multiplied the logits by T; divide them by T instead", theory.softmax_np(l * T)),
        ],
        f"your softmax does not match softmax(logits / T) at T = {T}",
    )

    for shift in (1000.0, -1000.0):
        big = l + shift
        with np.errstate(all="ignore"):
            got = _as_array(_call(fn, "fn", big.copy(), 1.0), who)
        if not np.all(np.isfinite(got)):
            raise AssertionError(
                f"HINT: your softmax returns inf or nan for logits near {shift:+.0f}: exp overflows or underflows; "
                "subtract each row's maximum before exponentiating (the result does not change)"
            )
        _verdict(
            got, theory.softmax_np(big), [], f"softmax is shift-invariant, but yours changes when {shift:+.0f} is added"
        )


def check_lemma1_bounds(fn: Callable, seed: int = SEED) -> None:
    """Check ``fn(a, L, T)``: Lemma 1's bounds ``(C1 / L, C2 / L)`` for softmax with logits in ``[-a, a]``.

    For ``F(l) = exp(l / T)``: ``C1 = exp(-2a/T)`` and ``C2 = exp(2a/T)``.

    Parameters
    ----------
    fn : callable
        ``fn(a, L, T) -> (lower, upper)``, two floats, with ``a >= 0``, ``L >= 1`` an int and ``T > 0``.
    seed : int, optional
        Seed of the inputs (the public tests use the default, the hidden tests other seeds).

    Returns
    -------
    None
        Raises ``AssertionError("HINT: ...")`` naming the mistake when the answer is wrong.
    """
    _check_callable(fn)
    who = "your lemma1_bounds"
    rng = _rng(seed)
    drawn = [(rng.uniform(0.1, 2.0), int(rng.integers(2, 100)), rng.uniform(0.3, 3.0)) for _ in range(2)]
    for a, L, T in [(1.0, 10, 1.0), (2.0, 50, 0.5), (0.5, 7, 2.0), *drawn]:
        got = _as_array(_call(fn, "fn", a, L, T), who)
        _shape(got, (2,), who, "a pair (lower, upper)")
        lo, hi = theory.lemma1_bounds(lambda z, T=T: np.exp(z / T), a, L)
        g = 2 * a / T
        _verdict(
            got,
            (lo, hi),
            [
                ("you returned (upper, lower); return (lower, upper)", (hi, lo)),
                (
                    "the exponent misses its factor 2: two logits in [-a, a] differ by up to 2a",
                    (math.exp(-a / T) / L, math.exp(a / T) / L),
                ),
                ("you multiplied by T; the logits enter as l / T", (math.exp(-2 * a * T) / L, math.exp(2 * a * T) / L)),
                ("you forgot the 1/L: the bounds are C1/L and C2/L", (math.exp(-g), math.exp(g))),
            ],
            f"expected (exp(-2a/T)/L, exp(2a/T)/L) = ({lo:.6g}, {hi:.6g}) at a = {a}, L = {L}, T = {T}",
        )


# ----------------------------------------------------------------------------------------------------------
# chapter 2: the distance bound
# ----------------------------------------------------------------------------------------------------------
_ROW_CASES = ((12, 5, 1.5, 3), (12, 5, 1.5, 1), (20, 8, 3.0, 6))


def _distance_variants(alpha: np.ndarray, X: np.ndarray, N: int) -> list[tuple[str, Any]]:
    L = alpha.shape[0]
    top = theory.top_n_mask(alpha, N)
    first = np.zeros(L, dtype=bool)
    first[:N] = True
    A = alpha[:, None] * X
    s = A[top].sum(0)
    s_all = A.sum(0)
    D = np.linalg.norm(A - s, axis=1)
    return [
        ("you summed over the selected tokens; d~ sums over the tokens i NOT in I_N", D[top].sum()),
        (
            "you forgot the weights: d~ compares alpha_i x_i with s, not x_i",
            np.linalg.norm(X - s, axis=1)[~top].sum(),
        ),
        (
            "I_N is the set of the N LARGEST weights, not the first N positions",
            np.linalg.norm(A - A[first].sum(0), axis=1)[~first].sum(),
        ),
        ("d~ is a sum of norms, not the norm of a sum", np.linalg.norm(A[~top].sum(0) - s)),
        ("s sums only over the selected set I_N, not over all tokens", np.linalg.norm(A - s_all, axis=1)[~top].sum()),
    ]


def check_distance(fn: Callable, seed: int = SEED) -> None:
    r"""Check ``fn(alpha, X, N)``: the distance :math:`\tilde d=\sum_{i\notin I_N}\|\alpha_ix_i-s\|_2` of one row.

    Parameters
    ----------
    fn : callable
        ``fn(alpha, X, N) -> float`` with ``alpha`` of shape ``(L,)`` (weights summing to one), ``X`` of shape
        ``(L, d)`` and ``1 <= N <= L``; ``I_N`` is the top-N set and :math:`s=\sum_{j\in I_N}\alpha_jx_j`.
    seed : int, optional
        Seed of the inputs (the public tests use the default, the hidden tests other seeds).

    Returns
    -------
    None
        Raises ``AssertionError("HINT: ...")`` naming the mistake when the answer is wrong.
    """
    _check_callable(fn)
    who = "your d_tilde"
    rng = _rng(seed)
    for L, d, scale, N in _ROW_CASES:
        alpha, X = _row(L, d, scale, rng)
        got = _as_array(_call(fn, "fn", alpha.copy(), X.copy(), N), who)
        _shape(got, (), who, "one number per row")
        ref = theory.distance(alpha, X, N)
        _verdict(got, ref, _distance_variants(alpha, X, N), f"expected d~ = {ref:.6g} at L = {L}, N = {N}")
    alpha, X = _row(6, 3, 1.0, rng)
    got = _as_array(_call(fn, "fn", alpha, X, 6), who)
    _verdict(got, 0.0, [], "with N = L nothing is left out, so d~ must be 0")


def check_dmax(fn: Callable, seed: int = SEED) -> None:
    r"""Check ``fn(alpha, X, N)``: Theorem 1's bound :math:`d_{\max}` of one row.

    .. math:: d_{\max}=(1-\bar\alpha_N)\,d_1+\big((L-N)\bar\alpha_N-(1-\bar\alpha_N)\big)\max_{j\in I_N}\|x_j\|_2,
              \qquad d_1=\max_{i\notin I_N,\,j\in I_N}\|x_i-x_j\|_2 .

    Parameters
    ----------
    fn : callable
        ``fn(alpha, X, N) -> float`` with ``alpha (L,)``, ``X (L, d)``, ``1 <= N < L``.
    seed : int, optional
        Seed of the inputs (the public tests use the default, the hidden tests other seeds).

    Returns
    -------
    None
        Raises ``AssertionError("HINT: ...")`` naming the mistake when the answer is wrong.
    """
    _check_callable(fn)
    who = "your d_max"
    rng = _rng(seed)
    for L, d, scale, N in _ROW_CASES:
        alpha, X = _row(L, d, scale, rng)
        got = _as_array(_call(fn, "fn", alpha.copy(), X.copy(), N), who)
        _shape(got, (), who, "one number per row")
        p = theory.theorem1_dmax(alpha, X, N, return_parts=True)
        abar, out, d1, mx = p["abar"], p["out_mass"], p["d1"], p["max_norm"]
        D = np.linalg.norm(X[:, None, :] - X[None, :, :], axis=-1)
        norms = np.linalg.norm(X, axis=1)
        _verdict(
            got,
            p["d_max"],
            [
                ("you kept only the d1 term; Theorem 1 adds ((L-N) abar - (1-abar)) max_{j in I_N} ||x_j||", out * d1),
                (
                    "d1 is the largest distance between a token OUTSIDE I_N and one INSIDE it, not over all pairs",
                    out * D.max() + ((L - N) * abar - out) * mx,
                ),
                (
                    "the norm term takes the max of ||x_j|| over j in I_N only, not over all tokens",
                    out * d1 + ((L - N) * abar - out) * norms.max(),
                ),
            ],
            f"expected d_max = {p['d_max']:.6g} at L = {L}, N = {N}",
        )


# ----------------------------------------------------------------------------------------------------------
# chapter 3: separability
# ----------------------------------------------------------------------------------------------------------
def _tie_row() -> tuple[np.ndarray, np.ndarray, int]:
    """A row where a selected token lies exactly at distance rho_min (strict and non-strict N_s differ)."""
    alpha = np.array([0.3, 0.25, 0.25, 0.1, 0.1])
    X = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 1.0], [-1.0, 0.0], [0.5, -1.0]])
    return alpha, X, 2


def check_distinguishable_count(fn: Callable, seed: int = SEED) -> None:
    r"""Check ``fn(alpha, X, N)``: the number ``N_s`` of distinguishable selected tokens, strict convention.

    With :math:`D_i=\|\alpha_ix_i-s\|_2` and :math:`\rho_{\min}=\min_{j\notin I_N}D_j`:
    :math:`N_s=|\{i\in I_N: D_i<\rho_{\min}\}|`.

    Parameters
    ----------
    fn : callable
        ``fn(alpha, X, N) -> int`` with ``alpha (L,)``, ``X (L, d)``, ``1 <= N < L``.
    seed : int, optional
        Seed of the inputs (the public tests use the default, the hidden tests other seeds).

    Returns
    -------
    None
        Raises ``AssertionError("HINT: ...")`` naming the mistake when the answer is wrong.
    """
    _check_callable(fn)
    who = "your n_s"
    rng = _rng(seed)
    cases = [(*_row(L, d, s, rng), N) for L, d, s, N in ((16, 4, 2.5, 4), (30, 3, 1.0, 10), (8, 2, 0.5, 3))]
    cases.append(_tie_row())
    for alpha, X, N in cases:
        got = _as_array(_call(fn, "fn", alpha.copy(), X.copy(), N), who)
        _shape(got, (), who, "one count per row")
        top = theory.top_n_mask(alpha, N)
        A = alpha[:, None] * X
        s = A[top].sum(0)
        D = np.linalg.norm(A - s, axis=1)
        Du = np.linalg.norm(X - s, axis=1)
        rho = D[~top].min()
        _verdict(
            got,
            theory.distinguishable_count(alpha, X, N),
            [
                (
                    "at the radius r = rho_min itself the convention is strict: count D_i < rho_min, not <=",
                    np.sum(top & (rho >= D)),
                ),
                (
                    "you forgot the weights: D_i = ||alpha_i x_i - s||, not ||x_i - s||",
                    np.sum(top & (Du < Du[~top].min())),
                ),
                (
                    "rho_min is the SMALLEST distance of a non-selected token to s, not the largest",
                    np.sum(top & (D < D[~top].max())),
                ),
            ],
            f"expected N_s = {theory.distinguishable_count(alpha, X, N)} (L = {alpha.size}, N = {N})",
        )


def check_theorem2_xi(fn: Callable, seed: int = SEED) -> None:
    r"""Check ``fn(alpha, N, M, delta)``: Theorem 2's :math:`\xi_i` for ``i`` in ``I_N``, in top-N order.

    .. math:: \xi_i^2=\Big(M^2-\tfrac{\delta^2}{2}\Big)\beta_i^2+\tfrac{\delta^2}{2}\sum_{j\in I_N\setminus\{i\}}\alpha_j^2,
              \qquad\beta_i=\bar\alpha_N-\alpha_i .

    Parameters
    ----------
    fn : callable
        ``fn(alpha, N, M, delta) -> xi`` with ``alpha (L,)``, ``1 <= N <= L``, ``M > 0``, ``0 <= delta <= 2M``;
        ``xi`` has shape ``(N,)``, largest weight first.
    seed : int, optional
        Seed of the inputs (the public tests use the default, the hidden tests other seeds).

    Returns
    -------
    None
        Raises ``AssertionError("HINT: ...")`` naming the mistake when the answer is wrong.
    """
    _check_callable(fn)
    who = "your xi"
    rng = _rng(seed)
    for L, N, M, delta in ((16, 4, 1.0, 0.8), (25, 8, 2.0, 1.5)):
        alpha = theory.softmax_np(2.0 * rng.standard_normal(L))
        got = _as_array(_call(fn, "fn", alpha.copy(), N, M, delta), who)
        _shape(got, (N,), who, "one xi_i per selected token, in top-N order")
        aI = alpha[theory.top_n_indices(alpha, N)]
        beta = aI.sum() - aI
        q = (aI**2).sum() - aI**2
        abar = aI.sum()
        ref = theory.theorem2_xi(alpha, N, M, delta)
        _verdict(
            got,
            ref,
            [
                (
                    "beta_i = abar_N - alpha_i leaves token i out; you used abar_N",
                    np.sqrt(np.clip((M**2 - delta**2 / 2) * abar**2 + delta**2 / 2 * q, 0, None)),
                ),
                ("xi_i is a square root: you returned xi_i^2", ref**2),
                (
                    "the sign of delta^2/2 is wrong: xi^2 = (M^2 - delta^2/2) beta^2 + (delta^2/2) sum alpha_j^2",
                    np.sqrt(np.clip((M**2 + delta**2 / 2) * beta**2 - delta**2 / 2 * q, 0, None)),
                ),
                (
                    "xi must be in top-N order (largest weight first), not in the order of the positions",
                    ref[np.argsort(theory.top_n_indices(alpha, N))],
                ),
            ],
            f"expected xi = {np.round(ref, 6)} (L = {L}, N = {N}, M = {M}, delta = {delta})",
        )


def check_markov_lower_bound(fn: Callable, seed: int = SEED) -> None:
    r"""Check ``fn(alpha, N, M, delta, r)``: Theorem 2's lower bound :math:`1-\frac{1}{rN}\sum_{i\in I_N}\xi_i`.

    Parameters
    ----------
    fn : callable
        ``fn(alpha, N, M, delta, r) -> float`` with the arguments of :func:`check_theorem2_xi` and a radius
        ``r > 0``.
    seed : int, optional
        Seed of the inputs (the public tests use the default, the hidden tests other seeds).

    Returns
    -------
    None
        Raises ``AssertionError("HINT: ...")`` naming the mistake when the answer is wrong.
    """
    _check_callable(fn)
    who = "your markov_lower"
    rng = _rng(seed)
    for L, N, M, delta, r in ((16, 4, 1.0, 0.8, 0.5), (25, 8, 2.0, 1.5, 0.9)):
        alpha = theory.softmax_np(2.0 * rng.standard_normal(L))
        got = _as_array(_call(fn, "fn", alpha.copy(), N, M, delta, r), who)
        _shape(got, (), who, "one number")
        xi = theory.theorem2_xi(alpha, N, M, delta)
        lower, _ = theory.theorem2_bounds(alpha, N, M, delta, r)
        _verdict(
            got,
            lower,
            [
                ("divide the sum of the xi_i by r N, not by r", 1 - xi.sum() / r),
                (
                    "the bound is 1 - (sum xi_i) / (r N): you returned the fraction without the '1 -'",
                    xi.sum() / (r * N),
                ),
                ("Markov's inequality divides by r: you multiplied", 1 - xi.sum() * r / N),
            ],
            f"expected {lower:.6g} (L = {L}, N = {N}, M = {M}, delta = {delta}, r = {r})",
        )


# ----------------------------------------------------------------------------------------------------------
# chapter 4: gradient sensitivity
# ----------------------------------------------------------------------------------------------------------
def check_softmax_jacobian(fn: Callable, seed: int = SEED) -> None:
    r"""Check ``fn(logits, T)``: the Jacobian of ``softmax(logits / T)``, :math:`J=(\mathrm{diag}\,\alpha-\alpha\alpha^\top)/T`.

    Parameters
    ----------
    fn : callable
        ``fn(logits, T) -> J`` with ``logits (L,)`` float64 and ``T > 0``; ``J`` has shape ``(L, L)`` with
        ``J[i, j] = d alpha_i / d l_j`` (numpy array or torch tensor, on any device).
    seed : int, optional
        Seed of the inputs (the public tests use the default, the hidden tests other seeds).

    Returns
    -------
    None
        Raises ``AssertionError("HINT: ...")`` naming the mistake when the answer is wrong.
    """
    _check_callable(fn)
    who = "your Jacobian"
    rng = _rng(seed)
    l = 2.0 * rng.standard_normal(6)
    for T in (0.5, 2.0):
        got = _as_array(_call(fn, "fn", l.copy(), T), who)
        _shape(got, (l.size, l.size), who, "J[i, j] = d alpha_i / d l_j")
        a = theory.softmax_np(l, T)
        a1 = theory.softmax_np(l)
        core = np.diag(a) - np.outer(a, a)
        _verdict(
            got,
            core / T,
            [
                ("your Jacobian is missing its 1/T factor", core),
                ("you multiplied by T; the Jacobian of softmax(l / T) carries a factor 1/T", core * T),
                ("alpha must be softmax(l / T), not softmax(l)", (np.diag(a1) - np.outer(a1, a1)) / T),
                ("your Jacobian is missing the -alpha alpha^T term", np.diag(a) / T),
                ("your Jacobian is missing the diag(alpha) term", -np.outer(a, a) / T),
                ("the sign is flipped: J = (diag(alpha) - alpha alpha^T) / T", -core / T),
            ],
            f"expected (diag(alpha) - alpha alpha^T) / T at T = {T}",
        )


def check_jacobian_norm_bound(fn: Callable, seed: int = SEED) -> None:
    """Check ``fn(T)``: the valid spectral-norm bound ``1/(2T)`` on the softmax Jacobian (attained at a tie).

    Parameters
    ----------
    fn : callable
        ``fn(T) -> float`` for a temperature ``T > 0``.
    seed : int, optional
        Seed of the inputs (the public tests use the default, the hidden tests other seeds).

    Returns
    -------
    None
        Raises ``AssertionError("HINT: ...")`` naming the mistake when the answer is wrong.
    """
    _check_callable(fn)
    who = "your bound"
    rng = _rng(seed)
    for T in (0.01, 0.3, 1.0, 4.0, *rng.uniform(0.05, 5.0, size=2)):
        got = _as_array(_call(fn, "fn", T), who)
        _shape(got, (), who, "one number")
        _verdict(
            got,
            theory.corollary3_corrected(T)["spectral"],
            [
                (
                    "that is Corollary 3 as stated, min(1/(4T), sqrt 2); the two-way tie l = (0, 0) has ||J||_2 = 1/(2T), "
                    "above it",
                    theory.corollary3_paper(T),
                ),
                ("1/(4T) bounds each entry |J_ij|, not the spectral norm", 1 / (4 * T)),
                ("sqrt(2)/(4T) bounds a row of J, not the spectral norm", math.sqrt(2) / (4 * T)),
                ("the bound shrinks as T grows: 1/(2T), not T/2", T / 2),
            ],
            f"expected 1/(2T) = {1 / (2 * T):.6g} at T = {T}",
        )


def check_spectral_norm(fn: Callable, seed: int = SEED) -> None:
    """Check ``fn(logits, T)``: the spectral norm ``||J||_2`` of the softmax Jacobian at ``logits / T``.

    Parameters
    ----------
    fn : callable
        ``fn(logits, T) -> float`` with ``logits`` a float64 torch tensor of shape ``(L,)`` on the CPU and
        ``T > 0``; it may move the tensor to another device (``device="auto"``).
    seed : int, optional
        Seed of the inputs (the public tests use the default, the hidden tests other seeds).

    Returns
    -------
    None
        Raises ``AssertionError("HINT: ...")`` naming the mistake when the answer is wrong.
    """
    import torch

    _check_callable(fn)
    who = "your spectral norm"
    rng = _rng(seed)
    for l_np, T in ((2.0 * rng.standard_normal(8), 0.7), (np.zeros(2), 0.25)):
        got = _as_array(_call(fn, "fn", torch.tensor(l_np, dtype=torch.float64), T), who)
        _shape(got, (), who, "one number")
        J = theory.softmax_jacobian_np(l_np, T)
        _verdict(
            got,
            np.linalg.norm(J, 2),
            [
                ("you returned the Frobenius norm; the spectral norm is the largest singular value", np.linalg.norm(J)),
                (
                    "you returned the largest entry |J_ij|; the spectral norm is the largest singular value",
                    np.abs(J).max(),
                ),
                (
                    "the Jacobian is taken at softmax(l / T): include T",
                    np.linalg.norm(theory.softmax_jacobian_np(l_np), 2),
                ),
            ],
            f"expected ||J||_2 = {np.linalg.norm(J, 2):.6g} at T = {T}",
        )


# ----------------------------------------------------------------------------------------------------------
# chapter 5: multi-head attention and remedies
# ----------------------------------------------------------------------------------------------------------
def check_sparsemax(fn: Callable, seed: int = SEED) -> None:
    """Check ``fn(logits)``: sparsemax of each row (Euclidean projection onto the probability simplex).

    Parameters
    ----------
    fn : callable
        ``fn(logits) -> weights`` with ``logits`` a float64 array of shape ``(B, L)``; ``weights`` has the same
        shape, rows on the simplex.
    seed : int, optional
        Seed of the inputs (the public tests use the default, the hidden tests other seeds).

    Returns
    -------
    None
        Raises ``AssertionError("HINT: ...")`` naming the mistake when the answer is wrong.
    """
    from attn_lib import normalizers

    _check_callable(fn)
    who = "your sparsemax"
    l = 1.2 * _rng(seed).standard_normal((5, 9))
    got = _as_array(_call(fn, "fn", l.copy()), who)
    _shape(got, l.shape, who, "one row of weights per row of logits")
    _finite(got, who, "")
    ref = np.asarray(normalizers.sparsemax(l), dtype=np.float64)
    if _close(got, np.asarray(normalizers.sparsemax(l, dim=0), dtype=np.float64)):
        raise AssertionError("HINT: you projected the columns: sparsemax works on each ROW (the last axis)")
    if _close(got, theory.softmax_np(l)):
        raise AssertionError(
            "HINT: that is softmax; sparsemax is the Euclidean projection onto the simplex, with exact zeros"
        )
    if np.any(got < -1e-12):
        raise AssertionError("HINT: your sparsemax has negative weights: clip l_j - tau at zero, [l_j - tau]_+")
    if not np.allclose(got.sum(-1), 1.0, rtol=0, atol=1e-9):
        raise AssertionError(
            "HINT: rows of your sparsemax do not sum to one: tau must solve sum_j [l_j - tau]_+ = 1 "
            "(sort the row and find the support size k)"
        )
    _verdict(got, ref, [], "your weights lie on the simplex but are not the closest point to the logits")


def check_coverage(fn: Callable, seed: int = SEED) -> None:
    """Check ``fn(p, H)``: the probability ``1 - (1 - p)^H`` that at least one of ``H`` independent heads covers a token.

    Parameters
    ----------
    fn : callable
        ``fn(p, H) -> float`` with ``p`` in ``[0, 1]`` and an int ``H >= 1``.
    seed : int, optional
        Seed of the inputs (the public tests use the default, the hidden tests other seeds).

    Returns
    -------
    None
        Raises ``AssertionError("HINT: ...")`` naming the mistake when the answer is wrong.
    """
    _check_callable(fn)
    who = "your coverage"
    rng = _rng(seed)
    drawn = [(rng.uniform(0.05, 0.95), int(rng.integers(2, 12))) for _ in range(2)]
    for p, H in [(0.8, 3), (0.3, 4), (0.05, 12), *drawn]:
        got = _as_array(_call(fn, "fn", p, H), who)
        _shape(got, (), who, "one probability")
        _verdict(
            got,
            theory.multihead_coverage(p, H),
            [
                ("p**H is the probability that EVERY head covers the token; coverage needs at least one", p**H),
                ("(1-p)**H is the probability that NO head covers the token; coverage is its complement", (1 - p) ** H),
                ("1 - p**H is not it: the heads that miss have probability 1 - p each", 1 - p**H),
                ("H p is the union bound, not the probability (it can exceed 1)", H * p),
            ],
            f"expected 1 - (1-p)^H = {theory.multihead_coverage(p, H):.6g} at p = {p}, H = {H}",
        )


def check_heads_for_coverage(fn: Callable, seed: int = SEED) -> None:
    """Check ``fn(p, c)``: the smallest number of heads ``H >= 1`` with ``1 - (1 - p)^H >= c``.

    Parameters
    ----------
    fn : callable
        ``fn(p, c) -> int`` with ``p`` in ``(0, 1)`` and ``c`` in ``(0, 1)``.
    seed : int, optional
        Seed of the inputs (the public tests use the default, the hidden tests other seeds).

    Returns
    -------
    None
        Raises ``AssertionError("HINT: ...")`` naming the mistake when the answer is wrong.
    """
    _check_callable(fn)
    who = "your heads_for_coverage"
    rng = _rng(seed)
    drawn = [(rng.uniform(0.05, 0.9), rng.uniform(0.5, 0.999)) for _ in range(2)]
    for p, c in [(0.8, 0.99), (0.3, 0.9), (0.1, 0.999), (0.5, 0.75), *drawn]:
        got = _as_array(_call(fn, "fn", p, c), who)
        _shape(got, (), who, "one integer")
        H = theory.heads_for_coverage(p, c)
        ratio = math.log(1 - c) / math.log(1 - p)
        _verdict(
            got,
            H,
            [
                ("you rounded down; the smallest H that REACHES c is the ceiling", H - 1),
                ("H = log(1-c)/log(1-p) must be rounded up to a whole number of heads", ratio),
                ("that is one head too many: at an exact hit the coverage already equals c", H + 1),
            ],
            f"expected H = {H} at p = {p}, c = {c}",
        )


# ----------------------------------------------------------------------------------------------------------
# indexes for the instructor page
# ----------------------------------------------------------------------------------------------------------
EXERCISE_KINDS = ("derivation", "implementation", "measurement")
EXERCISE_DIFFICULTIES = ("easy", "medium", "hard")

_EXERCISE = re.compile(r"^(`{3,}|:{3,})\{exercise\}[ \t]*(?P<title>[^\n]*)\n(?P<body>.*?)^\1[ \t]*$", re.M | re.S)
_TITLE = re.compile(r"^(?P<title>.*?)\s*\((?P<kind>[^()·]+?)\s*·\s*(?P<difficulty>[^()·]+?)\)\s*$")
_LABEL = re.compile(r"^:label:\s*(?P<label>\S+)\s*$", re.M)
_LABEL_FORMAT = re.compile(r"ex-(?P<chapter>\d{2})-[a-z0-9][a-z0-9-]*")
_PRF_REF = re.compile(r"\{prf:ref\}`(?:[^`<]*<)?(?P<target>[^`<>]+?)>?`")


def _read_dir(path: Any, name: str) -> Path:
    if not isinstance(path, (str, Path)):
        raise ValueError(f"{name} must be a path to a folder (got {type(path).__name__})")
    p = Path(path)
    if not p.is_dir():
        raise ValueError(f"{name} must be an existing folder (got {str(p)!r})")
    return p


def exercise_index(book_dir: Any = "book") -> list[dict]:
    """The exercises of the chapters ``book_dir/NN_*.md``, in chapter order.

    Reads every ``{exercise}`` block written as ``<title> (<kind> · <difficulty>)`` with a ``:label:`` of the form
    ``ex-NN-slug`` and collects the ``{prf:ref}`` targets of its body.

    Parameters
    ----------
    book_dir : str or Path
        Folder holding the chapters' MyST sources.

    Returns
    -------
    list of dict
        One dict per exercise with ``chapter`` (file stem), ``label``, ``title``, ``kind`` (one of
        :data:`EXERCISE_KINDS`), ``difficulty`` (one of :data:`EXERCISE_DIFFICULTIES`) and ``results`` (the
        ``{prf:ref}`` targets, in order of first appearance).

    Raises
    ------
    ValueError
        If ``book_dir`` is not a folder, or an exercise breaks the format (names the file and the exercise).
    """
    book = _read_dir(book_dir, "book_dir")
    rows = []
    for md in sorted(book.glob("[0-9][0-9]_*.md")):
        text = md.read_text(encoding="utf-8")
        for m in _EXERCISE.finditer(text):
            where = f"{md.name}, exercise {m['title'].strip()!r}"
            t = _TITLE.match(m["title"].strip())
            if not t:
                raise ValueError(f"{where}: the title must end in '(<kind> · <difficulty>)'")
            kind, diff = t["kind"].strip(), t["difficulty"].strip()
            if kind not in EXERCISE_KINDS:
                raise ValueError(f"{where}: kind must be one of {', '.join(EXERCISE_KINDS)} (got {kind!r})")
            if diff not in EXERCISE_DIFFICULTIES:
                raise ValueError(
                    f"{where}: difficulty must be one of {', '.join(EXERCISE_DIFFICULTIES)} (got {diff!r})"
                )
            lab = _LABEL.search(m["body"])
            if not lab or not _LABEL_FORMAT.fullmatch(lab["label"]):
                raise ValueError(f"{where}: needs a ':label: ex-NN-slug' line (NN: the chapter's two digits)")
            if lab["label"][3:5] != md.name[:2]:
                raise ValueError(f"{where}: label {lab['label']!r} does not carry the chapter number {md.name[:2]}")
            results = list(dict.fromkeys(r["target"].strip() for r in _PRF_REF.finditer(m["body"])))
            rows.append(
                {
                    "chapter": md.stem,
                    "label": lab["label"],
                    "title": t["title"],
                    "kind": kind,
                    "difficulty": diff,
                    "results": results,
                }
            )
    return rows


_QUESTION = re.compile(r"#\s*BEGIN QUESTION\s*\n(?P<config>.*?)```(?P<body>.*?)#\s*END QUESTION", re.S)
_PRACTISES = re.compile(r"^\*\*Practises:\*\*(?P<line>[^\n]*)$", re.M)
_BACKTICKED = re.compile(r"`([a-z][a-z0-9-]*)`")


def assignment_index(assignments_dir: Any = "assignments") -> list[dict]:
    """The questions of the assignments ``assignments_dir/chNN_*.md`` and the book results they practise.

    A question is an Otter ``# BEGIN QUESTION`` ... ``# END QUESTION`` block; its prompt carries one line
    ``**Practises:** ... `label` ...`` naming the book's statement labels in backticks.

    Parameters
    ----------
    assignments_dir : str or Path
        Folder holding the assignments' MyST sources.

    Returns
    -------
    list of dict
        One dict per question with ``assignment`` (file stem), ``question`` (Otter name), ``points`` and
        ``results`` (labels, in order).

    Raises
    ------
    ValueError
        If ``assignments_dir`` is not a folder, or a question lacks its name or its ``**Practises:**`` line.
    """
    folder = _read_dir(assignments_dir, "assignments_dir")
    import yaml

    rows = []
    for md in sorted(folder.glob("ch[0-9][0-9]_*.md")):
        for m in _QUESTION.finditer(md.read_text(encoding="utf-8")):
            config = yaml.safe_load(m["config"]) or {}
            if "name" not in config:
                raise ValueError(f"{md.name}: a question has no 'name:' in its BEGIN QUESTION cell")
            p = _PRACTISES.search(m["body"])
            if not p:
                raise ValueError(f"{md.name}, question {config['name']}: needs a '**Practises:** `label`' line")
            rows.append(
                {
                    "assignment": md.stem,
                    "question": str(config["name"]),
                    "points": config.get("points"),
                    "results": _BACKTICKED.findall(p["line"]),
                }
            )
    return rows


def coverage(book_dir: Any = "book", assignments_dir: Any = "assignments") -> list[dict]:
    """Which exercises and assignment questions practise each result, from :func:`exercise_index` and
    :func:`assignment_index`.

    Parameters
    ----------
    book_dir, assignments_dir : str or Path
        The folders of the chapters and of the assignments.

    Returns
    -------
    list of dict
        One dict per result label, in order of first appearance (exercises first, chapter by chapter, then the
        assignments): ``result``, ``exercises`` (exercise labels) and ``questions`` (``"<assignment> <question>"``).
    """
    table: dict[str, dict] = {}

    def row(label: str) -> dict:
        return table.setdefault(label, {"result": label, "exercises": [], "questions": []})

    for ex in exercise_index(book_dir):
        for label in ex["results"]:
            row(label)["exercises"].append(ex["label"])
    for q in assignment_index(assignments_dir):
        for label in q["results"]:
            row(label)["questions"].append(f"{q['assignment']} {q['question']}")
    return list(table.values())
