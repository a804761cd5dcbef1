"""Algorithm 5 (Fig. 4): the finite-difference sensitivity ``g(T, eps)`` of attention to its logits, with the
temperature on the model's scaled logits (:func:`gradient_sensitivity`) or on the raw scores ``q . k``
(:func:`gradient_sensitivity_raw`)."""

from __future__ import annotations

import dataclasses
import math
from typing import ClassVar

import numpy as np
import pandas as pd
import torch

from .. import metrics as M
from .._validation import SEED_MAX, check_int, check_positive_list, check_seed
from .passes import Experiment, SharedLayer, layer_mask, sens_row_indices

__all__ = ["SensitivityParams", "RawSensitivityParams", "gradient_sensitivity", "gradient_sensitivity_raw"]


class SensitivityAnalysis:
    """Algorithm 5: per (T, eps, layer, head) the row mean and maximum of ``g`` and the rows above the bounds."""

    def __init__(self, params: SensitivityParams, meta: dict):
        self.meta, self.length, self.seed, self.sens_rows = meta, params.L, params.seed, params.rows
        self.T, self.E = list(params.temperatures), list(params.eps_values)
        self.row_idx = sens_row_indices(self.length, self.sens_rows)
        self.rows: list[dict] = []

    def layer(self, sh: SharedLayer):
        la = sh.la
        L = self.length
        logits = la.logits[0, :, :L, :L]
        sub = None if len(self.row_idx) == L else torch.as_tensor(self.row_idx)
        g, valid = M.sensitivity_rows(
            logits,
            self.T,
            self.E,
            mask=layer_mask(la)[..., :L, :L],
            seed=(self.seed + la.layer) % (SEED_MAX + 1),
            rows=sub,
        )
        stride = 1 if sub is None else max(1, L // self.sens_rows)
        H = g.shape[2]
        cnt = valid.sum(-1).clamp(min=1).to(torch.float64)
        mean = g.sum(-1) / cnt  # (nT, nE, H)
        Tt = torch.as_tensor(self.T, dtype=torch.float64).view(-1, 1, 1, 1)
        Et = torch.as_tensor(self.E, dtype=torch.float64).view(1, -1, 1, 1)
        corr = torch.minimum(1 / (2 * Tt), math.sqrt(2) / Et)
        paper = torch.minimum(1 / (4 * Tt), torch.full_like(Tt, math.sqrt(2)))
        viol = ((g > corr * (1 + 1e-9) + 1e-12) & valid).sum(-1)
        over = ((g > paper * (1 + 1e-9)) & valid).sum(-1)
        gmax = torch.where(valid, g, torch.zeros((), dtype=g.dtype)).amax(-1)
        # plain numpy/python values once (not a tensor operation per table row)
        n_rows = valid.sum(-1).tolist()
        mean_, gmax_, viol_, over_ = (t.numpy() for t in (mean, gmax, viol, over))
        corr_ = corr.view(len(self.T), len(self.E)).tolist()
        paper_ = paper.view(-1).tolist()
        for a, T in enumerate(self.T):
            for b, e in enumerate(self.E):
                for h in range(H):
                    row = dict(self.meta, L=L, T=T, eps=e, layer=la.layer, head=h, n_rows=int(n_rows[h]))
                    row.update(g=float(mean_[a, b, h]), g_row_max=float(gmax_[a, b, h]))
                    row.update(bound_corrected=float(corr_[a][b]), bound_paper=float(paper_[a]))
                    row.update(rows_violating_corrected=int(viol_[a, b, h]), rows_above_paper=int(over_[a, b, h]))
                    self.rows.append(dict(row, row_stride=stride))

    def finish(self) -> pd.DataFrame:
        return pd.DataFrame(self.rows)


class RawSensitivityAnalysis(SensitivityAnalysis):
    """Algorithm 5 with the temperature on the raw scores ``q . k`` instead of the model's scaled logits
    ``q . k / sqrt(d)`` (Reading the paper, §The sensitivity metric): softmax((qk + eps v)/T) equals
    softmax((l + (eps/sqrt d) v)/(T/sqrt d)), so the analysis runs at ``T/sqrt(d)`` and ``eps/sqrt(d)`` and reports
    ``g`` per unit of raw score (divided by ``sqrt d``) against the raw ``T`` and ``eps``."""

    def __init__(self, params: RawSensitivityParams, meta: dict):
        super().__init__(params, meta)
        self.scale = math.sqrt(params.head_dim)
        self.T, self.E = [T / self.scale for T in self.T], [e / self.scale for e in self.E]

    def finish(self) -> pd.DataFrame:
        df = super().finish()
        if not len(df):
            return df
        c = self.scale
        df = df.assign(T=df["T"] * c, eps=df["eps"] * c, g=df["g"] / c, g_row_max=df["g_row_max"] / c)
        # the bounds in raw units: min{1/(2T), sqrt2/eps} and min{1/(4T), sqrt2} of the raw T and eps
        df["bound_corrected"] = np.minimum(1 / (2 * df["T"]), math.sqrt(2) / df["eps"])
        df["bound_paper"] = np.minimum(1 / (4 * df["T"]), math.sqrt(2))
        # rows above the paper's bound were counted in scaled units, where that bound differs: not carried over
        df = df.drop(columns=["rows_above_paper"])
        return df.assign(temperature_base="raw q.k", head_dim=int(round(c * c)))


@dataclasses.dataclass(frozen=True)
class SensitivityParams(Experiment):
    """Parameters of Algorithm 5 (:func:`gradient_sensitivity`).

    Attributes
    ----------
    L : int >= 2
        Window length.
    temperatures, eps_values : tuple of float > 0
        The grid of ``g(T, eps)`` (a single number is one value).
    seed : int in [0, 2**64 - 1]
        Seed of the directions (``seed + layer``).
    rows : int >= 0
        Row set ``R``: every ``max(1, L // rows)``-th row ending at the last (:func:`sens_row_indices`); 0: every row.
    """

    name: ClassVar[str] = "gradient_sensitivity"
    analysis_class: ClassVar[type] = SensitivityAnalysis

    L: int = 1024
    temperatures: tuple[float, ...] = tuple(np.logspace(-3, 2, 21))
    eps_values: tuple[float, ...] = (1e-3, 1e-1, 10.0)
    seed: int = 0
    rows: int = 0

    def __post_init__(self):
        self.set_checked(
            L=check_int("L", self.L, low=2),
            temperatures=tuple(check_positive_list("temperatures", self.temperatures)),
            eps_values=tuple(check_positive_list("eps_values", self.eps_values)),
            seed=check_seed("seed", self.seed),
            rows=check_int("rows", self.rows, low=0),
        )

    def key_params(self) -> dict:
        """Every field, except ``rows`` when every row is used (keeps older keys valid)."""
        out = super().key_params()
        if not self.rows:
            del out["rows"]
        return out


@dataclasses.dataclass(frozen=True)
class RawSensitivityParams(SensitivityParams):
    """Parameters of :func:`gradient_sensitivity_raw`: those of :class:`SensitivityParams` and the model's head
    dimension ``head_dim`` (>= 1), which converts raw scores to the model's logits."""

    name: ClassVar[str] = "gradient_sensitivity_raw"
    analysis_class: ClassVar[type] = RawSensitivityAnalysis

    head_dim: int = 64

    def __post_init__(self):
        super().__post_init__()
        self.set_checked(head_dim=check_int("head_dim", self.head_dim, low=1))

    @classmethod
    def of(cls, params: SensitivityParams, handle) -> RawSensitivityParams:
        """The fields of ``params`` with the head dimension of the model ``handle``."""
        fields = {f.name: getattr(params, f.name) for f in dataclasses.fields(SensitivityParams)}
        return cls(**fields, head_dim=int(handle.head_dim))


gradient_sensitivity = SensitivityParams.public(
    """Algorithm 5 / Fig. 4: per (T, eps, layer, head) the row-mean ``g`` of the finite-difference sensitivity
    (rows with ``t >= 2``; one seeded unit direction per row, reused for every ``T`` and ``eps``, seed
    ``seed + layer``), its row maximum, the corrected bound ``min(1/(2T), sqrt2/eps)`` with the number of rows
    violating it (must be 0), and the paper's ``min(1/(4T), sqrt2)`` with the number of rows above it. The
    paper's ``g(T, eps)`` is the max over heads of ``g``. ``temperatures`` and ``eps_values`` are sequences of
    numbers ``> 0`` (a single number is one value). ``rows`` > 0 subsamples the row set ``R`` (the book's appendix
    "Reading the paper") to every ``max(1, L // rows)``-th row ending at the last (:func:`sens_row_indices`; column
    ``row_stride``); the directions are then drawn for those rows only.

    Returns
    -------
    pandas.DataFrame
        One row per (T, eps, layer, head): ``L, T, eps, layer, head, n_rows, g, g_row_max, bound_corrected,
        bound_paper, rows_violating_corrected, rows_above_paper, row_stride`` plus ``model, text, device``.
    """,
    example="``L=64``",
)


def gradient_sensitivity_raw(
    handle, text, params: SensitivityParams | None = None, *, start: int = 0, cache=None, **overrides
) -> pd.DataFrame:
    """Algorithm 5 with the temperature and the perturbation on the raw scores ``q . k`` (the other reading of the
    base of Fig. 4's T axis; Reading the paper, §The sensitivity metric): the table of
    :func:`gradient_sensitivity` with ``T`` and ``eps`` in raw units, ``g`` per unit of raw score, and the bounds
    in those units; ``temperature_base`` and ``head_dim`` say so. The model's own scale is taken as
    ``1/sqrt(head_dim)`` (GPT-2, Llama and BERT use it). The arguments are those of :func:`gradient_sensitivity`
    (:class:`SensitivityParams`), with ``T`` and ``eps`` in raw units; the table is its table in raw units, without
    ``rows_above_paper``, with ``temperature_base`` and ``head_dim``.
    """
    raw = RawSensitivityParams.of(SensitivityParams.build(params, **overrides), handle)
    return raw.run(handle, text, start=start, cache=cache)
