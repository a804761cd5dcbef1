"""Checks for the course assignments (``assignments/``) and the index of the book's exercises.

Each ``check_*`` function takes a student's function, calls it on fixed, seeded inputs (its *cases*) and compares
the results with the library's reference (:mod:`attn_lib.theory`, :mod:`attn_lib.normalizers`). It returns
``None`` when the answer is right and raises :class:`AssertionError` whose message starts with ``HINT:`` otherwise.
Each check lists the typical mistakes of its question (a missing ``1/T``, the wrong axis, the smallest weights
instead of the largest, ...) and computes the value each one gives on every case; an answer that gives one
mistake's values on every case gets that mistake's hint. The cases are chosen so that no two listed mistakes, and
no mistake and the right answer, give the same values (``tests/test_exercises.py`` checks this for the public and
the hidden seeds, and that every listed mistake gets its own hint). Every hint ends with the student's value next
to the expected one, at the inputs where they first differ.

The student's function runs under a time limit (:data:`TIME_LIMIT_S`), with its printed output and its warnings
swallowed; whatever it raises (``sys.exit()`` included) and whatever it returns (``None``, complex numbers,
strings) becomes a hint. :func:`feedback` runs a check and *prints* its hint instead of raising it: the assignments'
Otter tests call it, so that a failing test shows the hint and nothing else, never a traceback.

:func:`exercise_index` reads the exercises of the book's chapters (the ``{exercise}`` blocks) and
:func:`assignment_index` the questions of the assignments; the instructor page builds its tables from both.
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import math
import re
import signal
import sys
import threading
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

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
    # what the assignments' tests call, and the mistakes each check recognises
    "feedback",
    "listed_mistakes",
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
#: Seconds one call of the student's function may take before the check gives up with a hint (read at call time;
#: every reference answer takes milliseconds, a first call on a GPU a few seconds).
TIME_LIMIT_S = 30.0


# ----------------------------------------------------------------------------------------------------------
# shared machinery
# ----------------------------------------------------------------------------------------------------------
class _Case(NamedTuple):
    """One input of a check: the arguments, the right answer and the value of each listed mistake.

    ``mistakes`` maps each hint to the value that mistake gives here; a mistake missing from a case (or ``None``)
    is not judged on it. ``properties`` are functions ``got -> hint or None``, asked when the answer matches no
    listed mistake (rows that do not sum to one, inf or nan, ...); ``generic`` is the hint when none applies.
    """

    args: tuple
    expected: Any
    mistakes: dict
    where: str
    shape: tuple
    what: str
    generic: str
    properties: tuple = ()


class _TimeUp(BaseException):
    """Raised inside the student's function when its time is up (a BaseException, so `except Exception` misses it)."""


def _check_callable(fn: Any) -> None:
    if not callable(fn):
        raise ValueError(f"fn must be the function to check, a callable (got {type(fn).__name__})")


def _as_array(out: Any, where: str) -> np.ndarray:
    """The student's result as a float64 array (torch tensors are moved to the CPU first); anything that is not real
    numbers becomes a hint."""
    if out is None:
        raise AssertionError(
            f"HINT: your function returned None {where}: replace the `...` by your code and `return` the result"
        )
    if out is Ellipsis:
        raise AssertionError(f"HINT: your function returned `...` {where}: replace the `...` by your code")
    if hasattr(out, "detach") and hasattr(out, "is_complex"):  # a torch tensor, possibly on a GPU
        if out.is_complex():
            raise AssertionError(f"HINT: your function returned complex numbers {where}; the answer is real")
        out = out.detach().cpu().double().numpy()
    try:
        raw = np.asarray(out)
    except Exception:
        raise AssertionError(f"HINT: your function must return numbers {where} (got {type(out).__name__})") from None
    if raw.dtype.kind == "c" or (raw.dtype.kind == "O" and any(isinstance(v, complex) for v in raw.ravel())):
        raise AssertionError(f"HINT: your function returned complex numbers {where}; the answer is real")
    if raw.dtype.kind not in "biufO":
        raise AssertionError(f"HINT: your function must return numbers {where} (got {type(out).__name__})")
    try:
        return np.asarray(raw, dtype=np.float64)
    except (TypeError, ValueError):
        raise AssertionError(f"HINT: your function must return numbers {where} (got {type(out).__name__})") from None


def _limited(fn: Callable, args: tuple, limit: float) -> Any:
    """``fn(*args)``, raising :class:`_TimeUp` after ``limit`` seconds.

    In the main thread (a notebook kernel, ``otter run``, pytest) a ``SIGALRM`` timer interrupts the function, loops
    of Python code and sleeps alike. Elsewhere, or where a timer is already armed, the function runs in a worker
    thread that is asked to stop (an asynchronous :class:`_TimeUp`) when its time is up.
    """
    main = threading.current_thread() is threading.main_thread()
    if main and hasattr(signal, "setitimer") and signal.getitimer(signal.ITIMER_REAL)[0] == 0:

        def on_alarm(signum, frame):
            raise _TimeUp

        previous = signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, limit)
        try:
            return fn(*args)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
    box: dict = {}

    def target():
        try:
            box["value"] = fn(*args)
        except BaseException as exc:  # handed to the caller
            box["error"] = exc

    worker = threading.Thread(target=target, name="attn_lib-exercise-check", daemon=True)
    worker.start()
    worker.join(limit)
    if worker.is_alive():
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(worker.ident), ctypes.py_object(_TimeUp))
        raise _TimeUp
    if "error" in box:
        raise box["error"]
    return box["value"]


def _call(fn: Callable, where: str, *args) -> Any:
    """The student's ``fn(*args)``: its printing and warnings swallowed, any error or a timeout turned into a hint."""
    limit = float(TIME_LIMIT_S)
    try:
        with (
            contextlib.redirect_stdout(io.StringIO()),
            contextlib.redirect_stderr(io.StringIO()),
            warnings.catch_warnings(),
            np.errstate(all="ignore"),
        ):
            warnings.simplefilter("ignore")
            return _limited(fn, args, limit)
    except _TimeUp:
        raise AssertionError(
            f"HINT: your function did not return within {limit:g} s {where}: look for a loop that never ends"
        ) from None
    except KeyboardInterrupt:
        raise
    except SystemExit as exc:
        raise AssertionError(
            f"HINT: your function called sys.exit({exc.code!r}) {where}: `return` the result instead"
        ) from None
    except BaseException as exc:  # any error of the student's code becomes a hint, with its cause chained
        raise AssertionError(f"HINT: your function raised {type(exc).__name__}: {exc} ({where})") from exc


def _close(a: np.ndarray, b: Any) -> bool:
    b = np.asarray(b, dtype=np.float64)
    return a.shape == b.shape and bool(np.all(np.isfinite(a))) and np.allclose(a, b, rtol=RTOL, atol=ATOL)


def _num(v: float) -> str:
    return f"{float(v):.6g}"


def _shown(got: np.ndarray, expected: Any) -> str:
    """The student's value next to the expected one: whole for up to 6 numbers, else the entry that differs most."""
    exp = np.asarray(expected, dtype=np.float64)
    if got.ndim == 0:
        return f"yours {_num(got)}, expected {_num(exp)}"
    if got.size <= 6:
        fmt = lambda v: "(" + ", ".join(_num(x) for x in v.ravel()) + ")"  # noqa: E731
        return f"yours {fmt(got)}, expected {fmt(exp)}"
    diff = np.where(np.isfinite(got), np.abs(got - exp), np.inf)
    idx = np.unravel_index(int(np.argmax(diff)), got.shape)
    at = ", ".join(str(int(i)) for i in idx)
    return f"entry [{at}] (of shape {got.shape}): yours {_num(got[idx])}, expected {_num(exp[idx])}"


def _run(fn: Callable, cases: list[_Case]) -> None:
    """Call ``fn`` on every case and raise the hint of the answer (see the module docstring)."""
    _check_callable(fn)
    gots = []
    for case in cases:
        got = _as_array(_call(fn, case.where, *case.args), case.where)
        if got.shape != tuple(case.shape):
            raise AssertionError(
                f"HINT: your function returned shape {got.shape} {case.where}, expected {tuple(case.shape)} ({case.what})"
            )
        gots.append(got)
    bad = [i for i, (got, case) in enumerate(zip(gots, cases)) if not _close(got, case.expected)]
    if not bad:
        return
    first, got = cases[bad[0]], gots[bad[0]]
    shown = f"{first.where[0].upper()}{first.where[1:]}: {_shown(got, first.expected)}."
    for hint in _hints(cases):
        judged = [(g, c.mistakes[hint]) for g, c in zip(gots, cases) if c.mistakes.get(hint) is not None]
        if judged and all(_close(g, value) for g, value in judged):
            raise AssertionError(f"HINT: {hint}. {shown}")
    for prop in first.properties:
        hint = prop(got)
        if hint:
            raise AssertionError(f"HINT: {hint}. {shown}")
    raise AssertionError(f"HINT: {first.generic}. {shown}")


def _hints(cases: list[_Case]) -> list[str]:
    """The listed mistakes of a check, in order of first appearance."""
    return list(dict.fromkeys(h for c in cases for h in c.mistakes))


def _rng(seed: Any) -> np.random.Generator:
    return np.random.default_rng(check_seed("seed", seed))


def _row(L: int, d: int, scale: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """One attention row: softmax weights of random logits and random token vectors ``X (L, d)``."""
    alpha = theory.softmax_np(scale * rng.standard_normal(L))
    return alpha, rng.standard_normal((L, d))


def _finite_or_none(v: Any) -> Any:
    """A mistake's value, or None where that mistake gives inf or nan (it is then not judged on that case)."""
    arr = np.asarray(v, dtype=np.float64)
    return arr if np.all(np.isfinite(arr)) else None


def _sums_to_one(name: str, extra: str = "") -> Callable:
    def prop(got: np.ndarray) -> str | None:
        if not np.allclose(got.sum(-1), 1.0, rtol=0, atol=1e-9):
            return f"rows of your {name} do not sum to one{extra}"
        return None

    return prop


def _finite_prop(why: str) -> Callable:
    def prop(got: np.ndarray) -> str | None:
        return None if np.all(np.isfinite(got)) else f"your function returns inf or nan {why}"

    return prop


# ----------------------------------------------------------------------------------------------------------
# chapter 1: vanishing attention
# ----------------------------------------------------------------------------------------------------------
def _softmax_rows(z: np.ndarray, axis: int = -1) -> np.ndarray:
    e = np.exp(z - z.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def _cases_stable_softmax(seed: Any) -> list[_Case]:
    l = 3.0 * _rng(seed).standard_normal((4, 7))
    T = 0.5
    z = l / T
    stable = np.exp(z - z.max(-1, keepdims=True))
    colmax = np.exp((l - l.max(0, keepdims=True)) / T)
    where = f"at T = {T} for logits of shape {l.shape}"
    cases = [
        _Case(
            (l.copy(), T),
            theory.softmax_np(l, T),
            {
                "your softmax ignores the temperature: compute softmax(logits / T)": theory.softmax_np(l),
                "you multiplied the logits by T; divide them by T instead": theory.softmax_np(l * T),
                "the temperature divides the logits, not the weights: softmax(logits / T), not softmax(logits) / T": (
                    theory.softmax_np(l) / T
                ),
                "you normalised over the wrong axis: each ROW (the last axis) must sum to one": _softmax_rows(z, 0),
                "you subtracted each COLUMN's maximum (axis=0): subtract each row's, max(axis=-1, keepdims=True)": (
                    colmax / colmax.sum(-1, keepdims=True)
                ),
                "you divided by the sum of the whole array: divide each row by its own sum (axis=-1, keepdims=True)": (
                    stable / stable.sum()
                ),
                "you returned the exponentials themselves: divide each by the sum of its row": np.exp(z),
                "you subtracted the row maximum but did not normalise: divide by the row sum of the exponentials": stable,
            },
            where,
            l.shape,
            "one row of weights per row of logits",
            "your softmax does not match softmax(logits / T)",
            (_finite_prop("for moderate logits"), _sums_to_one("softmax")),
        )
    ]
    overflow = _finite_prop(
        "for logits far from 0: exp overflows or underflows; subtract each row's maximum (axis=-1, keepdims=True) before exponentiating "
        "(the result does not change)"
    )
    mixed = l + np.array([1000.0, -1000.0, 0.0, 500.0])[:, None]
    for big, what in ((l + 1000.0, "near +1000"), (l - 1000.0, "near -1000"), (mixed, "near +1000, -1000, 0, 500")):
        cases.append(
            _Case(
                (big.copy(), 1.0),
                theory.softmax_np(big),
                {},
                f"at T = 1 for logits {what} (one row each)" if big is mixed else f"at T = 1 for logits {what}",
                l.shape,
                "one row of weights per row of logits",
                "softmax is shift-invariant, but yours changes when a constant is added to a row",
                (overflow, _sums_to_one("softmax")),
            )
        )
    return cases


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
    _run(fn, _cases_stable_softmax(seed))


def _cases_lemma1_bounds(seed: Any) -> list[_Case]:
    rng = _rng(seed)
    # T stays away from 1/2, 1/sqrt(2) and 1, where two of the listed mistakes would coincide
    drawn = [(rng.uniform(0.1, 2.0), int(rng.integers(2, 100)), rng.uniform(1.2, 3.0)) for _ in range(2)]
    cases = []
    for a, L, T in [(1.5, 10, 0.4), (2.0, 50, 0.75), (0.5, 7, 2.5), *drawn]:
        lo, hi = theory.lemma1_bounds(lambda z, T=T: np.exp(z / T), a, L)
        g = 2 * a / T
        pair = lambda gap, scale=1 / L: (math.exp(-gap) * scale, math.exp(gap) * scale)  # noqa: E731
        cases.append(
            _Case(
                (a, L, T),
                (lo, hi),
                {
                    "you returned (upper, lower); return (lower, upper)": (hi, lo),
                    "the exponent misses its factor 2: two logits in [-a, a] differ by up to 2a": pair(a / T),
                    "you multiplied by T; the logits enter as l / T": pair(2 * a * T),
                    "you forgot the temperature: the logits enter as l / T, so the exponent is 2a/T, not 2a": pair(
                        2 * a
                    ),
                    "you forgot the 1/L: the bounds are C1/L and C2/L": pair(g, 1.0),
                    "you multiplied by L; the bounds are C1/L and C2/L": pair(g, float(L)),
                },
                f"at a = {a:.6g}, L = {L}, T = {T:.6g}",
                (2,),
                "a pair (lower, upper)",
                "expected (exp(-2a/T)/L, exp(2a/T)/L)",
            )
        )
    return cases


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
    _run(fn, _cases_lemma1_bounds(seed))


# ----------------------------------------------------------------------------------------------------------
# chapter 2: the distance bound
# ----------------------------------------------------------------------------------------------------------
_ROW_CASES = ((12, 5, 1.5, 3), (12, 5, 1.5, 1), (20, 8, 3.0, 6))


def _bottom_n_mask(alpha: np.ndarray, N: int) -> np.ndarray:
    """The N SMALLEST weights (the mistake of taking the wrong end of the order)."""
    mask = np.zeros(alpha.size, dtype=bool)
    mask[np.argsort(alpha, kind="stable")[:N]] = True
    return mask


def _d_tilde_with(A: np.ndarray, sel: np.ndarray) -> float:
    return float(np.linalg.norm(A[~sel] - A[sel].sum(0), axis=1).sum())


def _distance_mistakes(alpha: np.ndarray, X: np.ndarray, N: int) -> dict:
    L = alpha.shape[0]
    top = theory.top_n_mask(alpha, N)
    first = np.zeros(L, dtype=bool)
    first[:N] = True
    A = alpha[:, None] * X
    s = A[top].sum(0)
    D = np.linalg.norm(A - s, axis=1)
    return {
        "you summed over the selected tokens; d~ sums over the tokens i NOT in I_N": D[top].sum(),
        "you forgot the weights: d~ compares alpha_i x_i with s, not x_i": np.linalg.norm(X - s, axis=1)[~top].sum(),
        "I_N is the set of the N LARGEST weights, not the first N positions": _d_tilde_with(A, first),
        "I_N is the set of the N LARGEST weights; you took the N smallest": _d_tilde_with(A, _bottom_n_mask(alpha, N)),
        "d~ is a sum of norms, not the norm of a sum": np.linalg.norm(A[~top].sum(0) - s),
        "d~ sums the norms ||alpha_i x_i - s||, not their squares": (D[~top] ** 2).sum(),
        "s sums only over the selected set I_N, not over all tokens": np.linalg.norm(A - A.sum(0), axis=1)[~top].sum(),
    }


def _cases_distance(seed: Any) -> list[_Case]:
    rng = _rng(seed)
    cases = []
    for L, d, scale, N in _ROW_CASES:
        alpha, X = _row(L, d, scale, rng)
        cases.append(
            _Case(
                (alpha.copy(), X.copy(), N),
                theory.distance(alpha, X, N),
                _distance_mistakes(alpha, X, N),
                f"at L = {L}, N = {N} (alpha of shape ({L},), X of shape ({L}, {d}))",
                (),
                "one number per row",
                "your d~ does not match sum_{i not in I_N} ||alpha_i x_i - s||",
            )
        )
    alpha, X = _row(6, 3, 1.0, rng)
    cases.append(
        _Case(
            (alpha.copy(), X.copy(), 6),
            0.0,
            _distance_mistakes(alpha, X, 6),
            "at L = 6, N = 6 (alpha of shape (6,), X of shape (6, 3))",
            (),
            "one number per row",
            "with N = L nothing is left out, so d~ must be 0",
        )
    )
    return cases


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
    _run(fn, _cases_distance(seed))


def _dmax_with(X: np.ndarray, alpha: np.ndarray, sel: np.ndarray, N: int, count: int | None = None) -> float:
    """Theorem 1's d_max with the selected set ``sel`` and ``count`` tokens outside it (default L - N)."""
    L = alpha.size
    count = L - N if count is None else count
    abar = alpha[sel].sum()
    d1 = np.linalg.norm(X[~sel][:, None, :] - X[sel][None, :, :], axis=-1).max()
    return float((1 - abar) * d1 + (count * abar - (1 - abar)) * np.linalg.norm(X[sel], axis=1).max())


def _cases_dmax(seed: Any) -> list[_Case]:
    rng = _rng(seed)
    cases = []
    for L, d, scale, N in _ROW_CASES:
        alpha, X = _row(L, d, scale, rng)
        p = theory.theorem1_dmax(alpha, X, N, return_parts=True)
        abar, out, d1, mx = p["abar"], p["out_mass"], p["d1"], p["max_norm"]
        top = theory.top_n_mask(alpha, N)
        D = np.linalg.norm(X[:, None, :] - X[None, :, :], axis=-1)
        d1_min = D[~top][:, top].min()
        norms = np.linalg.norm(X, axis=1)
        cases.append(
            _Case(
                (alpha.copy(), X.copy(), N),
                p["d_max"],
                {
                    "you kept only the d1 term; Theorem 1 adds ((L-N) abar - (1-abar)) max_{j in I_N} ||x_j||": out
                    * d1,
                    "d1 is the largest distance between a token OUTSIDE I_N and one INSIDE it, not over all pairs": (
                        out * D.max() + ((L - N) * abar - out) * mx
                    ),
                    "d1 is the LARGEST distance between a token outside I_N and one inside it; you took the smallest": (
                        out * d1_min + ((L - N) * abar - out) * mx
                    ),
                    "the norm term takes the max of ||x_j|| over j in I_N only, not over all tokens": (
                        out * d1 + ((L - N) * abar - out) * norms.max()
                    ),
                    "L - N tokens lie outside I_N, not L - N - 1": _dmax_with(X, alpha, top, N, L - N - 1),
                    "I_N is the set of the N LARGEST weights; you took the N smallest": _dmax_with(
                        X, alpha, _bottom_n_mask(alpha, N), N
                    ),
                    "abar_N is the mass INSIDE I_N; you swapped it with the mass outside, 1 - abar_N": (
                        abar * d1 + ((L - N) * out - abar) * mx
                    ),
                },
                f"at L = {L}, N = {N} (alpha of shape ({L},), X of shape ({L}, {d}))",
                (),
                "one number per row",
                "your d_max does not match (1-abar) d1 + ((L-N) abar - (1-abar)) max_{j in I_N} ||x_j||",
            )
        )
    return cases


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
    _run(fn, _cases_dmax(seed))


# ----------------------------------------------------------------------------------------------------------
# chapter 3: separability
# ----------------------------------------------------------------------------------------------------------
def _tie_row() -> tuple[np.ndarray, np.ndarray, int]:
    """A row where a selected token lies exactly at distance rho_min (strict and non-strict N_s differ)."""
    alpha = np.array([0.3, 0.25, 0.25, 0.1, 0.1])
    X = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 1.0], [-1.0, 0.0], [0.5, -1.0]])
    return alpha, X, 2


def _spread_row() -> tuple[np.ndarray, np.ndarray, int]:
    """A row where a selected token lies between rho_min and the largest distance outside I_N (D = 0.3, 0.4 inside;
    0.35, 2, 1 outside): the radius rho_min and the largest outside distance give different counts."""
    alpha = np.array([0.4, 0.3, 0.1, 0.1, 0.1])
    X = np.array([[1.0, 0.0], [0.0, 1.0], [7.5, 3.0], [4.0, 23.0], [-6.0, 3.0]])
    return alpha, X, 2


def _n_s_with(alpha: np.ndarray, X: np.ndarray, sel: np.ndarray, weighted=True, strict=True, smallest=True) -> int:
    A = (alpha[:, None] if weighted else 1.0) * X
    s = (alpha[:, None] * X)[sel].sum(0)
    D = np.linalg.norm(A - s, axis=1)
    rho = D[~sel].min() if smallest else D[~sel].max()
    return int(np.sum(D[sel] < rho) if strict else np.sum(D[sel] <= rho))


def _cases_distinguishable_count(seed: Any) -> list[_Case]:
    rng = _rng(seed)
    rows = [(*_row(L, d, s, rng), N) for L, d, s, N in ((16, 4, 2.5, 4), (30, 3, 1.0, 10), (8, 2, 0.5, 3))]
    rows += [_tie_row(), _spread_row()]
    cases = []
    for alpha, X, N in rows:
        top = theory.top_n_mask(alpha, N)
        ref = theory.distinguishable_count(alpha, X, N)
        cases.append(
            _Case(
                (alpha.copy(), X.copy(), N),
                ref,
                {
                    "at the radius r = rho_min itself the convention is strict: count D_i < rho_min, not <=": _n_s_with(
                        alpha, X, top, strict=False
                    ),
                    "you forgot the weights: D_i = ||alpha_i x_i - s||, not ||x_i - s||": _n_s_with(
                        alpha, X, top, weighted=False
                    ),
                    "rho_min is the SMALLEST distance of a non-selected token to s, not the largest": _n_s_with(
                        alpha, X, top, smallest=False
                    ),
                    "I_N is the set of the N LARGEST weights; you took the N smallest": _n_s_with(
                        alpha, X, _bottom_n_mask(alpha, N)
                    ),
                },
                f"at L = {alpha.size}, N = {N} (alpha of shape ({alpha.size},), X of shape {X.shape})",
                (),
                "one count per row",
                "your N_s does not match |{i in I_N : D_i < rho_min}|",
            )
        )
    return cases


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
    _run(fn, _cases_distinguishable_count(seed))


_XI_CASES = ((16, 4, 1.0, 0.8), (25, 8, 2.0, 1.5))


def _cases_theorem2_xi(seed: Any) -> list[_Case]:
    rng = _rng(seed)
    cases = []
    for L, N, M, delta in _XI_CASES:
        alpha = theory.softmax_np(2.0 * rng.standard_normal(L))
        order = theory.top_n_indices(alpha, N)
        aI = alpha[order]
        beta = aI.sum() - aI
        q = (aI**2).sum() - aI**2
        abar = aI.sum()
        ref = theory.theorem2_xi(alpha, N, M, delta)
        root = lambda sq: np.sqrt(np.clip(sq, 0, None))  # noqa: E731
        cases.append(
            _Case(
                (alpha.copy(), N, M, delta),
                ref,
                {
                    "beta_i = abar_N - alpha_i leaves token i out; you used abar_N": root(
                        (M**2 - delta**2 / 2) * abar**2 + delta**2 / 2 * q
                    ),
                    "xi_i is a square root: you returned xi_i^2": ref**2,
                    "the sign of delta^2/2 is wrong: xi^2 = (M^2 - delta^2/2) beta^2 + (delta^2/2) sum alpha_j^2": root(
                        (M**2 + delta**2 / 2) * beta**2 - delta**2 / 2 * q
                    ),
                    "the sum runs over j in I_N OTHER than i; you included alpha_i^2": root(
                        (M**2 - delta**2 / 2) * beta**2 + delta**2 / 2 * (aI**2).sum()
                    ),
                    "xi must be in top-N order (largest weight first), not in the order of the positions": ref[
                        np.argsort(order)
                    ],
                },
                f"at L = {L}, N = {N}, M = {M}, delta = {delta}",
                (N,),
                "one xi_i per selected token, in top-N order",
                "your xi does not match sqrt((M^2 - delta^2/2) beta_i^2 + (delta^2/2) sum_{j in I_N, j != i} alpha_j^2)",
            )
        )
    return cases


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
    _run(fn, _cases_theorem2_xi(seed))


def _cases_markov_lower_bound(seed: Any) -> list[_Case]:
    rng = _rng(seed)
    cases = []
    for L, N, M, delta, r in ((16, 4, 1.0, 0.8, 0.5), (25, 8, 2.0, 1.5, 0.9)):
        alpha = theory.softmax_np(2.0 * rng.standard_normal(L))
        xi = theory.theorem2_xi(alpha, N, M, delta).sum()
        lower, _ = theory.theorem2_bounds(alpha, N, M, delta, r)
        cases.append(
            _Case(
                (alpha.copy(), N, M, delta, r),
                lower,
                {
                    "divide the sum of the xi_i by r N, not by r": 1 - xi / r,
                    "divide the sum of the xi_i by r N, not by N": 1 - xi / N,
                    "the bound is 1 - (sum xi_i) / (r N): you returned the fraction without the '1 -'": xi / (r * N),
                    "Markov's inequality divides by r: you multiplied": 1 - xi * r / N,
                },
                f"at L = {L}, N = {N}, M = {M}, delta = {delta}, r = {r}",
                (),
                "one number",
                "your bound does not match 1 - (sum_{i in I_N} xi_i) / (r N)",
            )
        )
    return cases


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
    _run(fn, _cases_markov_lower_bound(seed))


# ----------------------------------------------------------------------------------------------------------
# chapter 4: gradient sensitivity
# ----------------------------------------------------------------------------------------------------------
def _cases_softmax_jacobian(seed: Any) -> list[_Case]:
    l = 2.0 * _rng(seed).standard_normal(6)
    cases = []
    for T in (0.5, 2.0):
        a = theory.softmax_np(l, T)
        a1 = theory.softmax_np(l)
        core = np.diag(a) - np.outer(a, a)
        cases.append(
            _Case(
                (l.copy(), T),
                core / T,
                {
                    "your Jacobian is missing its 1/T factor": core,
                    "you multiplied by T; the Jacobian of softmax(l / T) carries a factor 1/T": core * T,
                    "alpha must be softmax(l / T), not softmax(l)": (np.diag(a1) - np.outer(a1, a1)) / T,
                    "your Jacobian is missing the -alpha alpha^T term": np.diag(a) / T,
                    "your Jacobian is missing the diag(alpha) term": -np.outer(a, a) / T,
                    "the sign is flipped: J = (diag(alpha) - alpha alpha^T) / T": -core / T,
                },
                f"at T = {T} for logits of shape {l.shape}",
                (l.size, l.size),
                "J[i, j] = d alpha_i / d l_j",
                "your Jacobian does not match (diag(alpha) - alpha alpha^T) / T",
            )
        )
    return cases


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
    _run(fn, _cases_softmax_jacobian(seed))


def _cases_jacobian_norm_bound(seed: Any) -> list[_Case]:
    rng = _rng(seed)
    cases = []
    for T in (0.01, 0.3, 1.5, 4.0, *rng.uniform(0.05, 5.0, size=2)):
        T = float(T)
        cases.append(
            _Case(
                (T,),
                theory.corollary3_corrected(T)["spectral"],
                {
                    "that is Corollary 3 as stated, min(1/(4T), sqrt 2); the two-way tie l = (0, 0) has ||J||_2 = "
                    "1/(2T), above it": theory.corollary3_paper(T),
                    "1/(4T) bounds each entry |J_ij|, not the spectral norm": 1 / (4 * T),
                    "sqrt(2)/(4T) bounds a row of J, not the spectral norm": math.sqrt(2) / (4 * T),
                    "1/T holds, but it is not the smallest bound: the tie l = (0, 0) attains 1/(2T)": 1 / T,
                    "the bound shrinks as T grows: 1/(2T), not T/2": T / 2,
                },
                f"at T = {T:.6g}",
                (),
                "one number",
                "expected 1/(2T)",
            )
        )
    return cases


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
    _run(fn, _cases_jacobian_norm_bound(seed))


def _cases_spectral_norm(seed: Any) -> list[_Case]:
    import torch

    rng = _rng(seed)
    cases = []
    for l_np, T in ((2.0 * rng.standard_normal(8), 0.7), (np.zeros(2), 0.25)):
        J = theory.softmax_jacobian_np(l_np, T)
        cases.append(
            _Case(
                (torch.tensor(l_np, dtype=torch.float64), T),
                np.linalg.norm(J, 2),
                {
                    "you returned the Frobenius norm; the spectral norm is the largest singular value": np.linalg.norm(
                        J
                    ),
                    "you returned the largest entry |J_ij|; the spectral norm is the largest singular value": np.abs(
                        J
                    ).max(),
                    "you returned the largest absolute row sum (ord=1 or inf); the spectral norm is ord=2": np.abs(J)
                    .sum(1)
                    .max(),
                    "the Jacobian is taken at softmax(l / T): include T": np.linalg.norm(
                        theory.softmax_jacobian_np(l_np), 2
                    ),
                },
                f"at T = {T} for logits of shape {l_np.shape}",
                (),
                "one number",
                "your spectral norm does not match the largest singular value of J",
            )
        )
    return cases


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
    _run(fn, _cases_spectral_norm(seed))


# ----------------------------------------------------------------------------------------------------------
# chapter 5: multi-head attention and remedies
# ----------------------------------------------------------------------------------------------------------
def _cases_sparsemax(seed: Any) -> list[_Case]:
    from attn_lib import normalizers

    l = 1.2 * _rng(seed).standard_normal((5, 9))
    ref = np.asarray(normalizers.sparsemax(l), dtype=np.float64)
    z = np.sort(l, axis=-1)[:, ::-1]
    k = np.arange(1, l.shape[-1] + 1)
    kk = (1 + k * z > z.cumsum(-1)).sum(-1, keepdims=True)
    tau = (np.take_along_axis(z.cumsum(-1), kk - 1, -1) - 1) / kk

    def negative(got: np.ndarray) -> str | None:
        return (
            "your sparsemax has negative weights: clip l_j - tau at zero, [l_j - tau]_+"
            if np.any(got < -1e-12)
            else None
        )

    return [
        _Case(
            (l.copy(),),
            ref,
            {
                "you projected the columns: sparsemax works on each ROW (the last axis)": np.asarray(
                    normalizers.sparsemax(l, dim=0), dtype=np.float64
                ),
                "that is softmax; sparsemax is the Euclidean projection onto the simplex, with exact zeros": (
                    theory.softmax_np(l)
                ),
                "you did not clip: sparsemax is [l_j - tau]_+, so weights below tau are 0, not negative": l - tau,
            },
            f"for logits of shape {l.shape}",
            l.shape,
            "one row of weights per row of logits",
            "your weights lie on the simplex but are not the closest point to the logits",
            (
                _finite_prop(""),
                negative,
                _sums_to_one(
                    "sparsemax", ": tau must solve sum_j [l_j - tau]_+ = 1 (sort the row and find the support size k)"
                ),
            ),
        )
    ]


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
    _run(fn, _cases_sparsemax(seed))


def _cases_coverage(seed: Any) -> list[_Case]:
    rng = _rng(seed)
    drawn = [(rng.uniform(0.05, 0.95), int(rng.integers(2, 12))) for _ in range(2)]
    cases = []
    for p, H in [(0.8, 3), (0.3, 4), (0.05, 12), *drawn]:
        cases.append(
            _Case(
                (p, H),
                theory.multihead_coverage(p, H),
                {
                    "p**H is the probability that EVERY head covers the token; coverage needs at least one": p**H,
                    "(1-p)**H is the probability that NO head covers the token; coverage is its complement": (1 - p)
                    ** H,
                    "1 - p**H is not it: the heads that miss have probability 1 - p each": 1 - p**H,
                    "H p is the union bound, not the probability (it can exceed 1)": H * p,
                },
                f"at p = {p:.6g}, H = {H}",
                (),
                "one probability",
                "expected 1 - (1-p)^H",
            )
        )
    return cases


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
    _run(fn, _cases_coverage(seed))


def _cases_heads_for_coverage(seed: Any) -> list[_Case]:
    rng = _rng(seed)
    drawn = [(rng.uniform(0.05, 0.9), rng.uniform(0.5, 0.999)) for _ in range(2)]
    cases = []
    for p, c in [(0.8, 0.99), (0.3, 0.9), (0.1, 0.999), (0.5, 0.75), *drawn]:
        H = theory.heads_for_coverage(p, c)
        ratio = math.log(1 - c) / math.log(1 - p)
        cases.append(
            _Case(
                (p, c),
                H,
                {
                    "you rounded down; the smallest H that REACHES c is the ceiling": math.floor(ratio),
                    "H = log(1-c)/log(1-p) must be rounded up to a whole number of heads": ratio,
                    "floor(x) + 1 is one head too many when x is whole: at an exact hit the coverage already equals c; "
                    "round up with the ceiling": math.floor(ratio) + 1,
                },
                f"at p = {p:.6g}, c = {c:.6g}",
                (),
                "one integer",
                "expected the smallest H >= 1 with 1 - (1-p)^H >= c",
            )
        )
    return cases


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
    _run(fn, _cases_heads_for_coverage(seed))


#: Each check and the function that builds its cases at a seed (the tests read the listed mistakes from here).
_CASES = {
    "check_stable_softmax": _cases_stable_softmax,
    "check_lemma1_bounds": _cases_lemma1_bounds,
    "check_distance": _cases_distance,
    "check_dmax": _cases_dmax,
    "check_distinguishable_count": _cases_distinguishable_count,
    "check_theorem2_xi": _cases_theorem2_xi,
    "check_markov_lower_bound": _cases_markov_lower_bound,
    "check_softmax_jacobian": _cases_softmax_jacobian,
    "check_jacobian_norm_bound": _cases_jacobian_norm_bound,
    "check_spectral_norm": _cases_spectral_norm,
    "check_sparsemax": _cases_sparsemax,
    "check_coverage": _cases_coverage,
    "check_heads_for_coverage": _cases_heads_for_coverage,
}

_CHECKS = {name: globals()[name] for name in _CASES}


def listed_mistakes(check: Any) -> list[str]:
    """The typical mistakes ``check`` recognises: the hint of each, in the order the check tries them.

    Parameters
    ----------
    check : str or callable
        One of the ``check_*`` functions of this module, or its name.

    Returns
    -------
    list of str
        The hints (without ``HINT:`` and without the values a failing answer adds).

    Raises
    ------
    ValueError
        If ``check`` is not one of this module's checks.
    """
    name = check if isinstance(check, str) else getattr(check, "__name__", None)
    if name not in _CASES or (not isinstance(check, str) and _CHECKS[name] is not check):
        raise ValueError(f"check must be one of {', '.join(_CHECKS)} or its name (got {check!r})")
    return _hints(_CASES[name](SEED))


def feedback(check: Any, name: Any, seed: int = SEED, namespace: dict | None = None) -> None:
    """Run ``check`` on the student's function ``name`` and *print* the hint (nothing when the answer is right).

    The assignments' Otter tests call this, not the check itself: a doctest that raises shows a traceback with the
    grading machine's file paths, one that prints shows exactly what it printed. So the failure a student sees in
    ``grader.check`` and the one in Otter's ``results.json`` is the hint alone.

    Parameters
    ----------
    check : str or callable
        One of the ``check_*`` functions of this module, or its name.
    name : str or callable
        The student's function, or its name, looked up in ``namespace`` (a name the student never defined, or
        defined as something that is not a function, gets a hint too).
    seed : int, optional
        Seed of the inputs, as for the check.
    namespace : dict, optional
        Where to look ``name`` up; default: the caller's global variables (the notebook's).

    Returns
    -------
    None
        Prints one line ``HINT: ...`` when the answer is wrong.

    Raises
    ------
    ValueError
        If ``check`` is not one of this module's checks, or ``name`` is neither a string nor a callable.
    """
    fn_check = _CHECKS.get(check) if isinstance(check, str) else check
    if fn_check not in _CHECKS.values():
        raise ValueError(f"check must be one of {', '.join(_CHECKS)} or its name (got {check!r})")
    if isinstance(name, str):
        if namespace is None:
            namespace = sys._getframe(1).f_globals
        if name not in namespace:
            print(f"HINT: {name} is not defined: run the cell that defines it (and keep its name, {name})")
            return
        fn = namespace[name]
        if not callable(fn):
            print(f"HINT: {name} must be a function, but it is a {type(fn).__name__}: define it with `def {name}(...)`")
            return
    elif callable(name):
        fn = name
    else:
        raise ValueError(f"name must be the name of the student's function or the function (got {type(name).__name__})")
    try:
        fn_check(fn, seed=seed)
    except AssertionError as exc:
        print(str(exc))


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


def _read_text(path: Path, name: str) -> str:
    """A source file's text, which must be UTF-8."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(
            f"{name}: {path.name} is not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset {exc.start}); "
            "save it as UTF-8"
        ) from None


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
        If ``book_dir`` is not a folder, a chapter is not UTF-8 text, or an exercise breaks the format (names the
        file and the exercise).
    """
    book = _read_dir(book_dir, "book_dir")
    rows = []
    for md in sorted(book.glob("[0-9][0-9]_*.md")):
        text = _read_text(md, "book_dir")
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
_FEEDBACK = re.compile(r"""feedback\(\s*["'](?P<check>check_\w+)["']""")


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
        One dict per question with ``assignment`` (file stem), ``question`` (Otter name), ``points``,
        ``results`` (labels, in order) and ``checks`` (the checks its tests call through :func:`feedback`, in
        order).

    Raises
    ------
    ValueError
        If ``assignments_dir`` is not a folder, an assignment is not UTF-8 text, or a question lacks its name or its
        ``**Practises:**`` line.
    """
    folder = _read_dir(assignments_dir, "assignments_dir")
    import yaml

    rows = []
    for md in sorted(folder.glob("ch[0-9][0-9]_*.md")):
        for m in _QUESTION.finditer(_read_text(md, "assignments_dir")):
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
                    "checks": list(dict.fromkeys(f["check"] for f in _FEEDBACK.finditer(m["body"]))),
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
