"""What the assignments' Otter tests call: :func:`feedback` runs a check and prints its hint; :func:`listed_mistakes`
names the typical mistakes a check recognises."""

from __future__ import annotations

import sys
from typing import Any

from . import distance, harness, multihead, sensitivity, separability, vanishing

__all__ = ["CASES", "CHECKS", "feedback", "listed_mistakes"]

#: Each check by its name, chapter by chapter.
CHECKS = {
    name: getattr(module, name)
    for module in (vanishing, distance, separability, sensitivity, multihead)
    for name in module.__all__
}
#: Each check and the function that builds its cases at a seed (the tests read the listed mistakes from here).
CASES = {name: check.cases for name, check in CHECKS.items()}


def listed_mistakes(check: Any) -> list[str]:
    """The typical mistakes ``check`` recognises: the hint of each, in the order the check tries them.

    Parameters
    ----------
    check : str or callable
        One of the ``check_*`` functions of :mod:`attn_lib.book.exercises`, or its name.

    Returns
    -------
    list of str
        The hints (without ``HINT:`` and without the values a failing answer adds).

    Raises
    ------
    ValueError
        If ``check`` is not one of the checks.
    """
    name = check if isinstance(check, str) else getattr(check, "__name__", None)
    if name not in CASES or (not isinstance(check, str) and CHECKS[name] is not check):
        raise ValueError(f"check must be one of {', '.join(CHECKS)} or its name (got {check!r})")
    return harness.hints(CASES[name](harness.SEED))


def feedback(check: Any, name: Any, seed: int = harness.SEED, namespace: dict | None = None) -> None:
    """Run ``check`` on the student's function ``name`` and *print* the hint (nothing when the answer is right).

    The assignments' Otter tests call this, not the check itself: a doctest that raises shows a traceback with the
    grading machine's file paths, one that prints shows exactly what it printed. So the failure a student sees in
    ``grader.check`` and the one in Otter's ``results.json`` is the hint alone.

    Parameters
    ----------
    check : str or callable
        One of the ``check_*`` functions of :mod:`attn_lib.book.exercises`, or its name.
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
        Prints one line ``HINT: ...`` when the answer is wrong; in a Jupyter kernel it also shows that line as an
        output of its own, so that it is the first line under ``grader.check`` (see :func:`_show_first`).

    Raises
    ------
    ValueError
        If ``check`` is not one of the checks, or ``name`` is neither a string nor a callable.
    """
    fn_check = CHECKS.get(check) if isinstance(check, str) else check
    if fn_check not in CHECKS.values():
        raise ValueError(f"check must be one of {', '.join(CHECKS)} or its name (got {check!r})")
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
        _show_first(str(exc))
        print(str(exc))


def _show_first(hint: str) -> None:
    """In a Jupyter kernel, show ``hint`` as an output of its own, above the result ``grader.check`` returns.

    Otter's report of a failing test starts with lines of its own (``q1 results:``, ``q1 - 1 result:``, ``Test case
    failed``, the doctest's ``Trying:``/``Expecting``/``Failed example:``) and ends with what the test printed, the
    hint; nothing a test prints or returns can come first in it. A display output published while the test runs is
    shown before the report: IPython's ``publish_display_data`` sends it to the notebook directly (Otter hides
    ``display()`` during a test by emptying the display formatters, which this does not use). Outside a kernel
    (the autograder, a script, a terminal IPython, whose display would go to the captured stdout) nothing is shown.
    """
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is None or getattr(shell, "kernel", None) is None:
        return
    from IPython.display import publish_display_data  # lazy: only inside a notebook kernel

    publish_display_data({"text/plain": hint})
