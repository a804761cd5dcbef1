"""Synthetic instances, toy models and per-row statistics that the chapters use for their checks, one module per
topic (the chapters call these functions; they define none of their own).

* :mod:`attn_lib.book.toy.vanishing` -- bounded logits and the extremal rows of Lemma 1 and Corollary 1;
* :mod:`attn_lib.book.toy.distance` -- random rows for Theorem 1 and Corollary 2;
* :mod:`attn_lib.book.toy.separability` -- the sphere model of Assumptions 1-2 and Theorem 2;
* :mod:`attn_lib.book.toy.sensitivity` -- rows and perturbations for Lemma 2, Corollary 3 and the sqrt(5) example;
* :mod:`attn_lib.book.toy.multihead` -- multi-head coverage and the normaliser comparison.

Every public name of the five modules is also a name of this package (e.g. ``attn_lib.book.toy.random_row``), by
star imports of their ``__all__``; ``tests/test_toy_package.py`` checks that no two modules export the same name.
"""

from . import distance, multihead, sensitivity, separability, vanishing
from .distance import *  # noqa: F403
from .multihead import *  # noqa: F403
from .sensitivity import *  # noqa: F403
from .separability import *  # noqa: F403
from .vanishing import *  # noqa: F403

__all__ = [*distance.__all__, *multihead.__all__, *sensitivity.__all__, *separability.__all__, *vanishing.__all__]
