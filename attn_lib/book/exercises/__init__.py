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

The student's function runs under a time limit (:data:`attn_lib.book.exercises.harness.TIME_LIMIT_S`), with its printed output and its warnings
swallowed; whatever it raises (``sys.exit()`` included) and whatever it returns (``None``, complex numbers,
strings) becomes a hint. :func:`feedback` runs a check and *prints* its hint instead of raising it: the assignments'
Otter tests call it, so that a failing test shows the hint and nothing else, never a traceback.

:func:`exercise_index` reads the exercises of the book's chapters (the ``{exercise}`` blocks) and
:func:`assignment_index` the questions of the assignments; the instructor page builds its tables from both.

One module per chapter holds that chapter's checks (:mod:`~attn_lib.book.exercises.vanishing`,
:mod:`~attn_lib.book.exercises.distance`, :mod:`~attn_lib.book.exercises.separability`,
:mod:`~attn_lib.book.exercises.sensitivity`, :mod:`~attn_lib.book.exercises.multihead`); what they share is in
:mod:`~attn_lib.book.exercises.harness`, :func:`feedback` in :mod:`~attn_lib.book.exercises.grading` and the indexes
in :mod:`~attn_lib.book.exercises.index`. This package names them all.
"""

from .distance import check_distance, check_dmax
from .grading import feedback, listed_mistakes
from .harness import SEED
from .index import EXERCISE_DIFFICULTIES, EXERCISE_KINDS, assignment_index, coverage, exercise_index
from .multihead import check_coverage, check_heads_for_coverage, check_sparsemax
from .sensitivity import check_jacobian_norm_bound, check_softmax_jacobian, check_spectral_norm
from .separability import check_distinguishable_count, check_markov_lower_bound, check_theorem2_xi
from .vanishing import check_lemma1_bounds, check_stable_softmax

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
    "SEED",
    # indexes for the instructor page
    "exercise_index",
    "assignment_index",
    "coverage",
    "EXERCISE_KINDS",
    "EXERCISE_DIFFICULTIES",
]
