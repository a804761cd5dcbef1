"""Algorithm 4 (Fig. 3): the separable fraction ``N_s/N`` of the top-``N`` tokens and Theorem 2's bounds
(:func:`separability`)."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import pandas as pd

from .. import metrics as M
from .._validation import check_int, check_positive
from .passes import Experiment, SharedLayer, check_n_values

__all__ = ["SeparabilityParams", "separability"]


#: The row means of each (N, layer, head), in the table's column order.
_COLUMNS = ("fraction", "lower", "upper", "r", "delta")


class SeparabilityAnalysis:
    """Algorithm 4: per (N, layer, head) row means of ``N_s/N``, Theorem 2's bounds, ``r`` and ``delta``."""

    def __init__(self, params: SeparabilityParams, meta: dict):
        self.meta, self.length, self.n_values, self.M = meta, params.L, list(params.n_values), params.M
        self.rows: list[dict] = []

    def layer(self, sh: SharedLayer):
        ld = sh.layer()
        u = sh.get(("unit", self.M), lambda: M.unit_layer(ld, self.M))
        delta = sh.get(("delta", self.M), lambda: M.running_min_distance(u))
        L = self.length
        for N in self.n_values:
            sp = M.separability_metrics(u, N=N, M=self.M, normalize=False, delta=delta)
            means = {k: M.masked_mean(getattr(sp, k)[:, :L], sp.valid[:, :L]) for k in _COLUMNS}
            cnt = means["fraction"][1]
            for h in range(ld.H):
                if int(cnt[h]) == 0:
                    continue
                cols = {k: float(m[h]) for k, (m, _) in means.items()}
                self.rows.append(dict(self.meta, L=L, N=N, layer=sh.la.layer, head=h, n_rows=int(cnt[h]), **cols))

    def finish(self) -> pd.DataFrame:
        return pd.DataFrame(self.rows)


@dataclasses.dataclass(frozen=True)
class SeparabilityParams(Experiment):
    """Parameters of Algorithm 4 (:func:`separability`).

    Attributes
    ----------
    L : int >= 2
        Window length.
    n_values : tuple of int in [1, L - 1]
    M : float > 0
        Radius of the normalised value vectors.
    """

    name: ClassVar[str] = "separability"
    analysis_class: ClassVar[type] = SeparabilityAnalysis

    L: int = 1024
    n_values: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)
    M: float = 1.0

    def __post_init__(self):
        L = check_int("L", self.L, low=2)
        self.set_checked(L=L, n_values=tuple(check_n_values(self.n_values, L)), M=check_positive("M", self.M))


separability = SeparabilityParams.public(
    """Algorithm 4 / Fig. 3: per (N, layer, head) row-means of ``N_s/N`` (``fraction``), Theorem 2's ``lower`` and
    ``upper`` bounds (paper's form; upper is heuristic, §Theorem 2), radius ``r = rho_min`` and ``delta``; value vectors
    normalised to radius ``M``; ``delta`` the running minimum pairwise distance (§Which vectors (project decision)).

    Returns
    -------
    pandas.DataFrame
        One row per (N, layer, head): ``L, N, layer, head, n_rows, fraction, lower, upper, r, delta`` plus ``model,
        text, device``.
    """,
    example="``L=64``",
)
