"""Synthetic instances, toy models and per-row statistics that the chapters use for their checks, one module per
topic (the chapters call these functions; they define none of their own).

* :mod:`attn_lib.book.toy.vanishing` -- bounded logits and the extremal rows of Lemma 1 and Corollary 1;
* :mod:`attn_lib.book.toy.distance` -- random rows for Theorem 1 and Corollary 2;
* :mod:`attn_lib.book.toy.separability` -- the sphere model of Assumptions 1-2 and Theorem 2;
* :mod:`attn_lib.book.toy.sensitivity` -- rows and perturbations for Lemma 2, Corollary 3 and the sqrt(5) example;
* :mod:`attn_lib.book.toy.multihead` -- multi-head coverage and the normaliser comparison.

Every name in the five modules' ``__all__`` is also a name of this package (e.g. ``attn_lib.book.toy.random_row``);
``tests/test_toy_package.py`` checks that no two modules export the same name.
"""

from .._names import module_names, package_names
from . import distance, multihead, sensitivity, separability, vanishing

__all__, __getattr__, __dir__ = package_names(
    __name__, module_names(vanishing, distance, separability, sensitivity, multihead)
)
