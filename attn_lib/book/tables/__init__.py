"""The chapters' own tables and figures of a model run: what only the book shows, apart from the reproduction
report that ``reproduce`` writes (:mod:`attn_lib.report`). One module per chapter:

* :mod:`~attn_lib.book.tables.distance` (chapter 2: the tables of Algorithms 1-3, the critical-N ratio);
* :mod:`~attn_lib.book.tables.separability` (chapter 3: the shape of the median curve of Fig. 3);
* :mod:`~attn_lib.book.tables.sensitivity` (chapter 4: Fig. 4's slopes against Corollary 3's bounds);
* :mod:`~attn_lib.book.tables.multihead` and :mod:`~attn_lib.book.tables.swap` (chapter 5: multi-head coverage,
  the normalisers swapped into the model);
* :mod:`~attn_lib.book.tables.critical` and :mod:`~attn_lib.book.tables.reproduction` (chapter 6: the rows behind
  each critical N, the setting and run times against the paper's, the compact verdict table and the rules);
* :mod:`~attn_lib.book.tables.training` (chapter 8: the sentences on the training sweep).

Every public name is re-exported here (``from attn_lib.book import tables``; ``tables.distance_n_table(df)``).
"""

from __future__ import annotations

from .._names import module_names, package_names
from . import critical, distance, multihead, reproduction, sensitivity, separability, swap, training

__all__, __getattr__, __dir__ = package_names(
    __name__, module_names(distance, separability, sensitivity, multihead, swap, critical, reproduction, training)
)
