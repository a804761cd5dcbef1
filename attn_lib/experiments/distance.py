"""Algorithms 1 and 2 (Figs. 2a, 2b): d~, d_max, E1 (+ its Jensen gap), E2 and the Monte-Carlo E[d~] against the window
length ``L`` at fixed ``N`` (:func:`distance_vs_length`) and against ``N`` at fixed ``L`` (:func:`distance_vs_n`)."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence
from typing import ClassVar

import numpy as np
import pandas as pd
import torch

from .. import metrics as M
from .._validation import check_choice, check_int, check_int_list, check_seed, check_size
from .passes import Experiment, SharedLayer, check_n_values

__all__ = ["DistanceVsLengthParams", "DistanceVsNParams", "distance_vs_length", "distance_vs_n"]


def _prefix_means(x: torch.Tensor, valid: torch.Tensor, lengths: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """Per-head mean of ``x`` ``(H, R, ...)`` over the valid rows ``r < L`` for each ``L``: ``(H, nL, ...)`` means and
    counts."""
    xs = torch.where(valid, x, torch.zeros((), dtype=x.dtype))
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    bounds = [0] + [int(lengths[i]) for i in order]
    # one sum per segment [L_prev, L) of rows, then a cumulative sum over the few segments (no full-size cumsum)
    s = torch.stack([xs[:, a:b].sum(1) for a, b in itertools.pairwise(bounds)], 1).cumsum(1)
    c = torch.stack([valid[:, a:b].sum(1) for a, b in itertools.pairwise(bounds)], 1).cumsum(1).to(torch.float64)
    back = torch.as_tensor([order.index(i) for i in range(len(lengths))])
    s, c = s.index_select(1, back), c.index_select(1, back)
    return (s / c.clamp(min=1)).cpu().numpy(), c.cpu().numpy()


class DistanceAnalysis:
    """Algorithms 1 and 2: per (L, N, layer, head) means of every distance quantity."""

    def __init__(self, params: DistanceVsLengthParams | DistanceVsNParams, meta: dict):
        self.params, self.meta, self.kind = params, meta, "length" if params.multi_length else "n"
        self.lengths = list(params.lengths) if params.multi_length else [params.L]
        self.n_values = [params.N] if params.multi_length else list(params.n_values)
        self.mc_map = {L: np.arange(0, L, max(1, L // params.mc_rows)) for L in self.lengths if params.mc_samples > 0}
        self.rows: list[dict] = []

    def layer(self, sh: SharedLayer):
        ld = sh.layer()
        Lmax = max(self.lengths)
        for N in self.n_values:
            dm = sh.dist(N, self.params.p)
            valid = dm.valid[:, :Lmax]
            viol = valid & (dm.d_tilde[:, :Lmax] > dm.d_max[:, :Lmax] * (1 + 1e-9) + 1e-12)
            x_max = sh.get("x_max", lambda: _row_max_norm(ld))
            cols = dict(d_tilde=dm.d_tilde, d_max=dm.d_max, e1=dm.e1, e1_plus_gap=dm.e1 + dm.e1_gap, e1_gap=dm.e1_gap)
            cols.update(e2=dm.e2, s_norm=dm.s_norm, alpha_bar=dm.alpha_bar, x_max=x_max, indiv=_individual_terms(sh, N))
            means = {k: _prefix_means(v[:, :Lmax], valid, self.lengths)[0] for k, v in cols.items()}
            if self.kind == "n":  # the same rows at every N: those valid at the largest N of the grid
                common = valid & (ld.t[:, :Lmax] >= max(self.n_values) + 1)
                for k, v in _bound_factors(dm, cols).items():  # the counts are those of the rows, the same for all
                    means[f"{k}_common"], common_counts = _prefix_means(v[:, :Lmax], common, self.lengths)
            _, counts = _prefix_means(dm.d_tilde[:, :Lmax], valid, self.lengths)
            nviol, _ = _prefix_means(viol.to(torch.float64), torch.ones_like(viol), self.lengths)
            mc = self._mc_means(ld, N) if self.params.mc_samples > 0 else {}
            for li, L in enumerate(self.lengths):
                for h in range(ld.H):
                    row = dict(self.meta, L=L, N=N, layer=sh.la.layer, head=h, n_rows=int(counts[h, li]))
                    row.update({k: float(m[h, li]) for k, m in means.items()})
                    if self.kind == "n":
                        row["n_rows_common"] = int(common_counts[h, li])
                    row["dmax_violations"] = int(round(nviol[h, li] * L))
                    if mc:
                        row["mc_rows"] = int(mc["mc"][li][1][h])
                        row.update({k: float(v[li][0][h]) for k, v in mc.items()})
                    self.rows.append(row)

    def _mc_means(self, ld: M.LayerData, N: int) -> dict:
        """The Monte-Carlo E[d~] per length, ``{"mc": ..., "mc_seed1": ..., ...}`` for the seeds ``seed``, ``seed + 1``,
        ... (``mc_seeds`` in all), each ``{L index: (head means, row counts)}``."""
        allrows = np.unique(np.concatenate([self.mc_map[L] for L in self.lengths]))
        pos = {int(r): i for i, r in enumerate(allrows)}
        out = {}
        for k in range(self.params.mc_seeds):
            mcr = M.expected_distance_mc(
                ld, N=N, rows=torch.as_tensor(allrows), n_samples=self.params.mc_samples, seed=self.params.seed + k
            )
            per = {}
            for li, L in enumerate(self.lengths):
                sel = torch.as_tensor([pos[int(r)] for r in self.mc_map[L]])
                mv, mcnt = M.masked_mean(mcr.mean[:, sel], mcr.valid[:, sel])
                per[li] = (mv.cpu().numpy(), mcnt.cpu().numpy())
            out["mc" if k == 0 else f"mc_seed{k}"] = per
        return out

    def finish(self) -> pd.DataFrame:
        df = pd.DataFrame(self.rows)
        return df[df["n_rows"] > 0].reset_index(drop=True) if len(df) else df


def _individual_terms(sh: SharedLayer, N: int) -> torch.Tensor:
    r"""``(H, L)``: Corollary 2 (i)'s leading term :math:`\frac{t-N}{t}\sum_i\|\alpha_ix_i\|_2` of each row of the
    layer ``sh`` (E1 minus its remainder ``R``, chapter 2); the sums, the same at every ``N``, computed once."""
    ld = sh.layer()
    weighted = sh.get("weighted_norms", lambda: (ld.alpha * ld.gdiag.clamp(min=0).sqrt().unsqueeze(1)).sum(-1))
    t = ld.t.to(weighted.dtype)
    return (t - N).clamp(min=0) / t.clamp(min=1) * weighted


def _bound_factors(dm, cols: dict) -> dict:
    r"""The quantities averaged on the rows common to every ``N``: d~ and d_max, and the factors of d_max's leading
    term :math:`(t-N)\,\bar\alpha_N\max_{i\in I_N}\|x_i\|` (Theorem 1 (a)) with ``||s_N||`` (d~'s slope)."""
    out = {k: cols[k] for k in ("d_tilde", "d_max", "alpha_bar", "s_norm")}
    tmn = (dm.t - dm.N).clamp(min=0).to(dm.d_tilde.dtype)
    out.update(t_minus_n=tmn, max_norm=dm.max_norm, dmax_lead=tmn * dm.alpha_bar * dm.max_norm)
    return out


def _row_max_norm(ld: M.LayerData) -> torch.Tensor:
    """``(H, L)``: the largest norm of a visible value vector in each row, the scale of the bounds of
    ``prop-random-bounded`` (chapter 2)."""
    norms = ld.gdiag.clamp(min=0).sqrt().unsqueeze(1)  # (H, 1, L)
    return torch.where(ld.mask, norms, torch.zeros((), dtype=norms.dtype)).amax(-1)


@dataclasses.dataclass(frozen=True)
class _DistanceParams(Experiment):
    """What Algorithms 1 and 2 share: E1's inclusion probability and the Monte-Carlo estimate of E[d~]."""

    analysis_class: ClassVar[type] = DistanceAnalysis

    p: str = "L-1"
    mc_samples: int = 64
    mc_rows: int = 32
    seed: int = 0
    mc_seeds: int = 1

    def _check_shared(self, longest: int) -> None:
        check_choice("p", self.p, ["L-1", "L"])
        mc_rows = check_int("mc_rows", self.mc_rows, low=1)
        # (rows, samples, L) random keys per layer, capped so a typo is a ValueError, not a MemoryError
        try:
            mc_samples = check_size("mc_samples", self.mc_samples, per_item=mc_rows * longest, low=0)
        except ValueError as exc:  # name every parameter that sets the cap
            raise ValueError(
                f"{exc}: the draws grow as mc_samples x mc_rows ({mc_rows}) x the longest window ({longest}); lower "
                "mc_samples, mc_rows or the window lengths"
            ) from None
        mc_seeds = check_int("mc_seeds", self.mc_seeds, low=1, high=64)
        self.set_checked(mc_rows=mc_rows, mc_samples=mc_samples, seed=check_seed("seed", self.seed), mc_seeds=mc_seeds)


@dataclasses.dataclass(frozen=True)
class DistanceVsLengthParams(_DistanceParams):
    """Parameters of Algorithm 1 (:func:`distance_vs_length`): ``N`` in [1, min(lengths) - 1]; window ``lengths >= 2``
    (prefixes of one window; sorted, without repeats); ``p`` (``"L-1"``, ``"L"``): E1's inclusion probability;
    ``mc_samples >= 0`` random subsets per row of the Monte-Carlo E[d~] (0: none) on every ``max(1, L // mc_rows)``-th
    row (``mc_rows >= 1``); ``seed`` in [0, 2**64 - 1]; ``mc_seeds`` in [1, 64]: column ``mc`` uses ``seed``,
    ``mc_seed1 ... mc_seed{mc_seeds-1}`` the seeds after it (the spread of the verdicts that read ``mc``)."""

    name: ClassVar[str] = "distance_vs_length"
    multi_length: ClassVar[bool] = True

    N: int = 5
    lengths: tuple[int, ...] = (32, 64, 128, 256, 512, 1024)

    def __post_init__(self):
        lengths = tuple(check_int_list("lengths", self.lengths, low=2))
        self.set_checked(lengths=lengths, N=check_int("N", self.N, low=1, high=min(lengths) - 1))
        self._check_shared(max(lengths))


@dataclasses.dataclass(frozen=True)
class DistanceVsNParams(_DistanceParams):
    """Parameters of Algorithm 2 (:func:`distance_vs_n`): window length ``L >= 2``, ``n_values`` in [1, L - 1], the
    others as for :class:`DistanceVsLengthParams`."""

    name: ClassVar[str] = "distance_vs_n"

    L: int = 1024
    n_values: tuple[int, ...] = (1, 5, 10, 20, 100)

    def __post_init__(self):
        L = check_int("L", self.L, low=2)
        self.set_checked(L=L, n_values=tuple(check_n_values(self.n_values, L)))
        self._check_shared(L)


distance_vs_length = DistanceVsLengthParams.public(
    """Algorithm 1 / Fig. 2a: per (L, layer, head) row-means of d~, d_max, E1, E1 + gap, E2, Monte-Carlo E[d~] (``mc``,
    on every ``max(1, L // mc_rows)``-th row, ``mc_samples`` subsets; 0 disables it) and the number of rows with ``d~ >
    d_max`` (must be 0). Rows with ``t < N + 1`` are skipped (§Causal masking). One forward pass at
    ``max(lengths)``.""",
    returns="""One row per (L, layer, head): ``L, N, layer, head, n_rows, d_tilde, d_max, e1, e1_plus_gap, e1_gap, e2,
    s_norm, alpha_bar, x_max, indiv, dmax_violations`` (``mc, mc_rows`` when ``mc_samples > 0``, and ``mc_seed1, ...``
    with ``mc_seeds > 1``) plus ``model, text, device``; ``indiv`` is Corollary 2 (i)'s leading term (t − N)/t · Σ_i
    ‖α_i x_i‖.""",
    example="``N=2``",
)


distance_vs_n = DistanceVsNParams.public(
    """Algorithm 2 / Fig. 2b: the quantities of :func:`distance_vs_length` at fixed ``L`` for each ``N``.""",
    returns="""One row per (N, layer, head): the columns of :func:`distance_vs_length`, and ``d_tilde_common``,
    ``d_max_common`` and ``n_rows_common`` on the rows valid at the largest ``N`` (the same rows at every ``N``), with,
    on those rows, the factors of d_max's leading term (t − N)·ᾱ_N·max_{i∈I_N} ‖x_i‖: ``t_minus_n_common``,
    ``alpha_bar_common``, ``max_norm_common``, their product ``dmax_lead_common``, and ``s_norm_common`` (d~'s slope
    ``||s_N||``).""",
    example="``L=64``",
)
