"""Synthetic instances, toy models and per-row statistics that the chapters use for their checks, one module per
topic (the chapters call these functions; they define none of their own).

* :mod:`attn_lib.toy.vanishing` -- bounded logits and the extremal rows of Lemma 1 and Corollary 1;
* :mod:`attn_lib.toy.distance` -- random rows for Theorem 1 and Corollary 2;
* :mod:`attn_lib.toy.separability` -- the sphere model of Assumptions 1-2 and Theorem 2;
* :mod:`attn_lib.toy.sensitivity` -- rows and perturbations for Lemma 2, Corollary 3 and the sqrt(5) example;
* :mod:`attn_lib.toy.multihead` -- multi-head coverage and the normaliser comparison.
"""

from .distance import *  # noqa: F403
from .multihead import *  # noqa: F403
from .sensitivity import *  # noqa: F403
from .separability import *  # noqa: F403
from .vanishing import *  # noqa: F403
