"""What every check of :mod:`attn_lib.book.exercises` shares: the seed, the tolerances and the time limit, one input
(:class:`Case`), calling the student's function safely (:func:`call`), judging its answers (:func:`run`), and
:func:`make_check`, which turns a function that builds the cases at a seed into a check.
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import signal
import threading
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from attn_lib import theory
from attn_lib._validation import check_seed

#: Seed of every input the checks draw (fixed: the same inputs, hence the same verdict, on every run).
SEED = 20250824
RTOL = 1e-6
ATOL = 1e-9
#: Seconds one call of the student's function may take before the check gives up with a hint (read at call time;
#: every reference answer takes milliseconds, a first call on a GPU a few seconds).
TIME_LIMIT_S = 30.0


class Case(NamedTuple):
    """One input of a check: the arguments, the right answer and the value of each listed mistake.

    ``mistakes`` maps each hint to the value that mistake gives here; a mistake missing from a case (or ``None``)
    is not judged on it. When the answer matches no listed mistake, the check tries the transformations of the right
    answer: ``transforms``, this case's own (hint -> value, like ``mistakes``: a norm along the other axis, the
    answer at ``1/T`` instead of ``T``), then the generic ones of :data:`TRANSFORMS` that fit ``shape``, except
    those named in ``skip`` (one that gives the same values as the right answer or a listed mistake on every case,
    such as the transpose of a symmetric matrix). ``properties`` are functions ``got -> hint or None``, asked when
    no transformation matches either (rows that do not sum to one, inf or nan, ...); ``generic`` is the hint when
    none applies.
    """

    args: tuple
    expected: Any
    mistakes: dict
    where: str
    shape: tuple
    what: str
    generic: str
    properties: tuple = ()
    transforms: dict | None = None
    skip: frozenset = frozenset()


class Transform(NamedTuple):
    """A generic transformation of the right answer: the hint it gets, the shapes it fits and how it changes the
    answer."""

    hint: str
    fits: Callable[[tuple], bool]
    apply: Callable[[np.ndarray], np.ndarray]


#: The usual slips that turn the right answer into another, by name (the name a :class:`Case` skips them by), in the
#: order the checks try them: after the listed mistakes and the case's own transformations.
TRANSFORMS = {
    "twice": Transform(
        "your answer is exactly twice the right one: look for a factor 2 too many, or a term counted twice",
        lambda shape: True,
        lambda e: 2 * e,
    ),
    "half": Transform(
        "your answer is exactly half the right one: look for a missing factor 2, or a sum over half of the terms",
        lambda shape: True,
        lambda e: e / 2,
    ),
    "sign": Transform(
        "your answer has the opposite sign: look for a sign error, such as a difference taken the wrong way round",
        lambda shape: True,
        lambda e: -e,
    ),
    "transpose": Transform(
        "your answer is the transpose of the right one: swap its two axes (the first index is the row)",
        lambda shape: len(shape) == 2 and shape[0] == shape[1] > 1,
        lambda e: e.T,
    ),
    "swapped": Transform(
        "you returned the two values in the wrong order: swap them",
        lambda shape: tuple(shape) == (2,),
        lambda e: e[::-1],
    ),
    "reversed": Transform(
        "your values are the right ones in reverse order: check the direction of your sort or loop",
        lambda shape: len(shape) == 1 and shape[0] > 2,
        lambda e: e[::-1],
    ),
}


def transformations(cases: list[Case]) -> list[tuple[str, list]]:
    """The transformations a check tries, in order: ``(hint, [value on each case, or None where not judged])``.

    The case's own (:attr:`Case.transforms`) come first, then the generic ones of :data:`TRANSFORMS` that fit a
    case's shape and that it does not skip; one judged on no case is left out.
    """
    unknown = set().union(*(c.skip for c in cases)) - TRANSFORMS.keys()
    if unknown:
        raise ValueError(
            f"skip must name transformations of TRANSFORMS ({', '.join(TRANSFORMS)}); got {sorted(unknown)}"
        )
    own = list(dict.fromkeys(h for c in cases for h in (c.transforms or {})))
    rows = [(h, [(c.transforms or {}).get(h) for c in cases]) for h in own]
    for name, t in TRANSFORMS.items():
        values = [
            t.apply(np.asarray(c.expected, dtype=np.float64)) if t.fits(tuple(c.shape)) and name not in c.skip else None
            for c in cases
        ]
        if any(v is not None for v in values):
            rows.append((t.hint, values))
    return rows


class _TimeUp(BaseException):
    """Raised inside the student's function when its time is up (a BaseException, so `except Exception` misses it)."""


def check_callable(fn: Any) -> None:
    if not callable(fn):
        raise ValueError(f"fn must be the function to check, a callable (got {type(fn).__name__})")


def as_array(out: Any, where: str) -> np.ndarray:
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


def call(fn: Callable, where: str, *args) -> Any:
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


def close(a: np.ndarray, b: Any) -> bool:
    """Whether the answer ``a`` is ``b``: to :data:`RTOL`/:data:`ATOL`, or exactly where ``b`` is a whole number (a
    count of heads or tokens: ``H + 4e-7`` is not ``H``)."""
    exact = np.asarray(b).dtype.kind in "iu"
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape or not np.all(np.isfinite(a)):
        return False
    return bool(np.array_equal(a, b)) if exact else bool(np.allclose(a, b, rtol=RTOL, atol=ATOL))


def num(v: float) -> str:
    return f"{float(v):.6g}"


def shown(got: np.ndarray, expected: Any) -> str:
    """The student's value next to the expected one: whole for up to 6 numbers, else the entry that differs most."""
    exp = np.asarray(expected, dtype=np.float64)
    if got.ndim == 0:
        return f"yours {num(got)}, expected {num(exp)}"
    if got.size <= 6:
        fmt = lambda v: "(" + ", ".join(num(x) for x in v.ravel()) + ")"  # noqa: E731
        return f"yours {fmt(got)}, expected {fmt(exp)}"
    diff = np.where(np.isfinite(got), np.abs(got - exp), np.inf)
    idx = np.unravel_index(int(np.argmax(diff)), got.shape)
    at = ", ".join(str(int(i)) for i in idx)
    return f"entry [{at}] (of shape {got.shape}): yours {num(got[idx])}, expected {num(exp[idx])}"


def run(fn: Callable, cases: list[Case]) -> None:
    """Call ``fn`` on every case and raise the hint of the answer (see :mod:`attn_lib.book.exercises`).

    The hint is the first that fits: a wrong shape; a listed mistake; a transformation of the right answer
    (:func:`transformations`); a property of the first case that differs; its generic hint. A mistake or a
    transformation fits when the answer gives its value on every case where it is judged.
    """
    check_callable(fn)
    gots = []
    for case in cases:
        got = as_array(call(fn, case.where, *case.args), case.where)
        if got.shape != tuple(case.shape):
            raise AssertionError(
                f"HINT: your function returned shape {got.shape} {case.where}, expected {tuple(case.shape)} ({case.what})"
            )
        gots.append(got)
    bad = [i for i, (got, case) in enumerate(zip(gots, cases)) if not close(got, case.expected)]
    if not bad:
        return
    first, got = cases[bad[0]], gots[bad[0]]
    values = f"{first.where[0].upper()}{first.where[1:]}: {shown(got, first.expected)}."
    tried = [(hint, [c.mistakes.get(hint) for c in cases]) for hint in hints(cases)] + transformations(cases)
    for hint, on_cases in tried:
        judged = [(g, value) for g, value in zip(gots, on_cases) if value is not None]
        if judged and all(close(g, value) for g, value in judged):
            raise AssertionError(f"HINT: {hint}. {values}")
    for prop in first.properties:
        hint = prop(got)
        if hint:
            raise AssertionError(f"HINT: {hint}. {values}")
    raise AssertionError(f"HINT: {first.generic}. {values}")


def hints(cases: list[Case]) -> list[str]:
    """The listed mistakes of a check, in order of first appearance."""
    return list(dict.fromkeys(h for c in cases for h in c.mistakes))


def rng(seed: Any) -> np.random.Generator:
    return np.random.default_rng(check_seed("seed", seed))


def row(L: int, d: int, scale: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """One attention row: softmax weights of random logits and random token vectors ``X (L, d)``."""
    alpha = theory.softmax_np(scale * rng.standard_normal(L))
    return alpha, rng.standard_normal((L, d))


def sums_to_one(name: str, extra: str = "") -> Callable:
    def prop(got: np.ndarray) -> str | None:
        if not np.allclose(got.sum(-1), 1.0, rtol=0, atol=1e-9):
            return f"rows of your {name} do not sum to one{extra}"
        return None

    return prop


def finite_prop(why: str) -> Callable:
    def prop(got: np.ndarray) -> str | None:
        return None if np.all(np.isfinite(got)) else f"your function returns inf or nan {why}"

    return prop


def bottom_n_mask(alpha: np.ndarray, N: int) -> np.ndarray:
    """The N SMALLEST weights (the mistake of taking the wrong end of the order)."""
    mask = np.zeros(alpha.size, dtype=bool)
    mask[np.argsort(alpha, kind="stable")[:N]] = True
    return mask


_CHECK_DOC = """{summary}

    Parameters
    ----------
    fn : callable
        {fn_doc}
    seed : int, optional
        Seed of the inputs (the public tests use the default, the hidden tests other seeds).

    Returns
    -------
    None
        Raises ``AssertionError("HINT: ...")`` naming the mistake when the answer is wrong.
    """


def make_check(name: str, cases: Callable[[Any], list[Case]], *, summary: str, fn_doc: str) -> Callable:
    """The check ``name(fn, seed=SEED)``: it runs ``fn`` on ``cases(seed)`` with :func:`run`.

    Parameters
    ----------
    name : str
        The check's name, ``"check_..."`` (its ``__name__``, the name the assignments' tests call it by).
    cases : callable
        ``cases(seed) -> list[Case]``, the inputs and the listed mistakes of the check.
    summary : str
        The first part of the check's docstring: what ``fn`` must compute.
    fn_doc : str
        The description of the parameter ``fn`` (its signature and shapes).

    Returns
    -------
    callable
        ``check(fn, seed=SEED) -> None``, raising ``AssertionError("HINT: ...")`` when the answer is wrong; its
        attribute ``cases`` is ``cases``.
    """

    def check(fn: Callable, seed: int = SEED) -> None:
        run(fn, cases(seed))

    check.__name__ = check.__qualname__ = name
    check.__module__ = cases.__module__
    check.__doc__ = _CHECK_DOC.format(summary=summary, fn_doc=fn_doc)
    check.cases = cases
    return check
