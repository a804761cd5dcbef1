"""Checks for the course assignments (``assignments/``) and the index of the book's exercises.

Each ``check_*`` function takes a student's function, calls it on fixed, seeded inputs (its *cases*) and compares
the results with the library's reference (:mod:`attn_lib.theory`, :mod:`attn_lib.normalizers`). It returns
``None`` when the answer is right and raises :class:`AssertionError` whose message starts with ``HINT:`` otherwise.
Each check lists the typical mistakes of its question (a missing ``1/T``, the wrong axis, the smallest weights
instead of the largest, ...) and computes the value each one gives on every case; an answer that gives one mistake's
values on every case gets that mistake's hint. An answer that matches no listed mistake is compared with the usual
slips of the right answer (:data:`~attn_lib.book.exercises.harness.TRANSFORMS`: twice or half of it, the opposite
sign, a transpose, a swapped or reversed order; and those a check adds, a norm along the other axis or ``T`` swapped
with ``1/T``), and one that matches on every case is named. The cases are chosen so that no two listed mistakes or
slips, and none of them and the right answer, give the same values (``tests/test_exercises.py`` checks this for the
public and the hidden seeds, and that every listed mistake and every slip gets its own hint). Every hint ends with
the student's value next to the expected one, at the inputs where they first differ.

The student's function runs under a time limit (:data:`attn_lib.book.exercises.harness.TIME_LIMIT_S`), with its printed output and its warnings
swallowed; whatever it raises (``sys.exit()`` included) and whatever it returns (``None``, complex numbers,
strings) becomes a hint. :func:`feedback` runs a check and *prints* its hint instead of raising it: the assignments'
Otter tests call it, so that a failing test shows the hint and nothing else, never a traceback; in a Jupyter kernel
it also shows the hint as an output of its own, the first line under ``grader.check``.

:func:`exercise_index` reads the exercises of the book's chapters (the ``{exercise}`` blocks) and
:func:`assignment_index` the questions of the assignments; the instructor page builds its tables from both.

One module per chapter holds that chapter's checks (:mod:`~attn_lib.book.exercises.vanishing`,
:mod:`~attn_lib.book.exercises.distance`, :mod:`~attn_lib.book.exercises.separability`,
:mod:`~attn_lib.book.exercises.sensitivity`, :mod:`~attn_lib.book.exercises.multihead`); what they share is in
:mod:`~attn_lib.book.exercises.harness`, :func:`feedback` in :mod:`~attn_lib.book.exercises.grading` and the indexes
in :mod:`~attn_lib.book.exercises.index`. This package names them all (``__all__``).
"""

from .._names import module_names, package_names
from . import grading, harness, index

#: The checks chapter by chapter (:data:`~attn_lib.book.exercises.grading.CHECKS`), what the assignments' tests call,
#: and the indexes for the instructor page.
_NAMES = {
    **grading.CHECKS,
    "feedback": grading.feedback,
    "listed_mistakes": grading.listed_mistakes,
    "SEED": harness.SEED,
    **module_names(index),
}
__all__, __getattr__, __dir__ = package_names(__name__, _NAMES)
