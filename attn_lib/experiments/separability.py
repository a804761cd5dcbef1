"""Algorithm 4 (Fig. 3): the separable fraction ``N_s/N`` of the top-``N`` tokens and Theorem 2's bounds
(:func:`separability`)."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import torch

from .. import metrics as M
from .._validation import check_int, check_int_list, check_positive, check_positive_list
from .passes import Experiment, RowsAnalysis, SharedLayer, check_n_values, layer_mask

__all__ = ["SeparabilityParams", "separability"]


#: The row means of each (N, layer, head), in the table's column order.
_COLUMNS = ("fraction", "lower", "upper", "r", "delta")
#: A row is an attention-sink row when its first visible token takes more than this share of the weight.
SINK_WEIGHT = 0.5
#: Selected tokens lighter than this (2^-982, about 2.4e-296) are the ones whose ball test float64's range may decide
#: (0 or subnormal weights; Reading the paper, §The ball test): column ``underflow_T=<T>``.
UNDERFLOW_WEIGHT = 2.0**-982


def rank_columns(N: int) -> list[int]:
    """The ranks ``k`` (1, 2, 4, ..., and ``N``) at which the table reports the share of rank-``k`` tokens inside the
    ball (column ``in_ball_rank_<k>``)."""
    ks = [1 << i for i in range(N.bit_length()) if 1 << i <= N]
    return ks if ks[-1] == N else [*ks, N]


def temperature_column(T: float, what: str = "fraction") -> str:
    """The column of ``N_s/N`` at temperature ``T`` (the model's logits divided by ``T``), or with ``what="underflow"``
    of the share of selected tokens lighter than :data:`UNDERFLOW_WEIGHT`, whose tests float64's range may decide."""
    return f"{what}_T={T:g}"


def _mechanisms(u, sp, N: int, L: int, sink) -> dict:
    """The candidate causes of a falling ``N_s/N`` for one ``N``: per-head ``(mean, count)`` pairs of the fraction on
    short (``t <= L/2``) and long rows, of the share of ``sink`` rows and the fraction on them / the others, and of the
    share of each rank inside the ball (:func:`rank_columns`)."""
    valid = sp.valid[:, :L]
    frac = sp.fraction[:, :L]
    t = torch.broadcast_to(u.t, (u.H, u.L))[:, :L]
    out = {
        "fraction_short": M.masked_mean(frac, valid & (t <= L // 2)),
        "fraction_long": M.masked_mean(frac, valid & (t > L // 2)),
        "sink_share": M.masked_mean(sink.to(frac.dtype), valid),
        "fraction_sink": M.masked_mean(frac, valid & sink),
        "fraction_nonsink": M.masked_mean(frac, valid & ~sink),
    }
    flags = sp.flags[:, :L].to(frac.dtype)
    for k in rank_columns(N):
        out[f"in_ball_rank_{k}"] = M.masked_mean(flags[..., k - 1], valid)
    return out


class SeparabilityAnalysis(RowsAnalysis):
    """Algorithm 4: per (N, layer, head) row means of ``N_s/N``, Theorem 2's bounds, ``r`` and ``delta``."""

    def __init__(self, params: SeparabilityParams, meta: dict):
        self.meta, self.length, self.n_values, self.M = meta, params.L, list(params.n_values), params.M
        self.temperatures = list(params.temperatures)
        self.temperature_n = set(params.temperature_n)
        self.rows: list[dict] = []

    def layer(self, sh: SharedLayer):
        ld = sh.layer()
        u = sh.get(("unit", self.M), lambda: M.unit_layer(ld, self.M))
        delta = sh.get(("delta", self.M), lambda: M.running_min_distance(u))
        L = self.length
        at_T = {  # the same unit vectors (so the same delta), weights softmax(logits / T)
            T: M.LayerData.from_logits(sh.la.logits[0], u.values, mask=layer_mask(sh.la), temperature=T)
            for T in self.temperatures
        }
        first = torch.broadcast_to(u.mask, (u.H, u.L, u.L))[:, :L].to(torch.int8).argmax(-1, keepdim=True)
        sink = u.alpha[:, :L].gather(-1, first).squeeze(-1) > SINK_WEIGHT  # (H, L): the first visible token is a sink
        for N in self.n_values:
            sp = M.separability_metrics(u, N=N, M=self.M, normalize=False, delta=delta)
            means = {k: M.masked_mean(getattr(sp, k)[:, :L], sp.valid[:, :L]) for k in _COLUMNS}
            means.update(_mechanisms(u, sp, N, L, sink))
            for T, lt in at_T.items() if N in self.temperature_n else ():
                fT = M.separability_metrics(lt, N=N, M=self.M, normalize=False, delta=delta).fraction[:, :L]
                means[temperature_column(T)] = M.masked_mean(fT, sp.valid[:, :L])
                light = (lt.alpha.gather(-1, lt.order(N)) < UNDERFLOW_WEIGHT).to(lt.dtype).mean(-1)
                means[temperature_column(T, "underflow")] = M.masked_mean(light[:, :L], sp.valid[:, :L])
            cnt = means["fraction"][1]
            for h in range(ld.H):
                if int(cnt[h]) == 0:
                    continue
                cols = {k: float(m[h]) if int(c[h]) else float("nan") for k, (m, c) in means.items()}
                self.rows.append(dict(self.meta, L=L, N=N, layer=sh.la.layer, head=h, n_rows=int(cnt[h]), **cols))


@dataclasses.dataclass(frozen=True)
class SeparabilityParams(Experiment):
    """Parameters of Algorithm 4 (:func:`separability`): window length ``L >= 2``; ``n_values`` in [1, L - 1];
    ``M > 0``, the radius of the normalised value vectors; ``temperatures > 0`` (``()``: none) at which ``N_s/N`` is
    also computed (weights ``softmax(logits / T)``, the same vectors; columns ``fraction_T=<T>`` and
    ``underflow_T=<T>``, :func:`temperature_column`), at the ``N`` of
    ``temperature_n`` only (each costs a full count; NaN at the others)."""

    name: ClassVar[str] = "separability"
    analysis_class: ClassVar[type] = SeparabilityAnalysis

    L: int = 1024
    n_values: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)
    M: float = 1.0
    temperatures: tuple[float, ...] = (0.01, 0.1)
    temperature_n: tuple[int, ...] = (2, 8, 32)

    def __post_init__(self):
        L = check_int("L", self.L, low=2)
        empty = isinstance(self.temperatures, (tuple, list)) and not self.temperatures
        temps = () if empty else tuple(check_positive_list("temperatures", self.temperatures))
        self.set_checked(
            L=L,
            n_values=tuple(check_n_values(self.n_values, L)),
            M=check_positive("M", self.M),
            temperatures=temps,
            temperature_n=tuple(check_int_list("temperature_n", self.temperature_n, low=1)),
        )


separability = SeparabilityParams.public(
    """Algorithm 4 / Fig. 3: per (N, layer, head) row-means of ``N_s/N`` (``fraction``), Theorem 2's ``lower`` and
    ``upper`` bounds (paper's form; upper is heuristic, §Theorem 2), radius ``r = rho_min`` and ``delta``; value vectors
    normalised to radius ``M``; ``delta`` the running minimum pairwise distance (§Which vectors (project decision)).""",
    returns="""One row per (N, layer, head): ``L, N, layer, head, n_rows, fraction, lower, upper, r, delta``, the
    mechanism columns (``fraction_short`` ... ``in_ball_rank_<k>``), ``fraction_T=<T>`` and ``underflow_T=<T>``, plus
    ``model, text, device``.""",
    example="``L=64``",
)
