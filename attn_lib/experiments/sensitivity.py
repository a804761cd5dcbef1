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

from .. import jacobian as _jac
from .. import metrics as M
from .._validation import SEED_MAX, check_int, check_positive_list, check_seed
from ..metrics.layer import row_blocks
from .passes import Experiment, RowsAnalysis, SharedLayer, layer_mask, sens_row_indices

# RawSensitivityParams: derived from a profile's SensitivityParams by profile_params, not built by hand
__all__ = ["SensitivityParams", "gradient_sensitivity", "gradient_sensitivity_raw"]


#: Seeds of the direction draws: draw ``k`` of layer ``l`` uses ``seed + l + DRAW_STRIDE * k`` (draw 0: ``seed + l``).
DRAW_STRIDE = 1000


class SensitivityAnalysis(RowsAnalysis):
    """Algorithm 5 (:func:`gradient_sensitivity`): its table's rows, per (direction draw, T, eps, layer, head)."""

    def __init__(self, params: SensitivityParams, meta: dict):
        self.meta, self.length, self.seed, self.sens_rows = meta, params.L, params.seed, params.rows
        self.T, self.E, self.draws = list(params.temperatures), list(params.eps_values), params.direction_seeds
        self.row_idx = sens_row_indices(self.length, self.sens_rows)
        self.rows: list[dict] = []

    def layer(self, sh: SharedLayer):
        la, L = sh.la, self.length
        logits = la.logits[0, :, :L, :L].to(torch.float64)
        mask = torch.broadcast_to(layer_mask(la)[..., :L, :L].to(logits.device), logits.shape)
        sub = None if len(self.row_idx) == L else torch.as_tensor(self.row_idx)
        x = logits if sub is None else logits[:, sub]
        visible = (x != -math.inf) & (mask if sub is None else mask[:, sub])
        gap, top2 = _top_two(x, visible)
        with M._engine.large_ops():  # log-sum-exps over every row at every T: worth the workers' threads
            self._extra = _model_examples(x, visible, top2, self.T, self.E)
        self._extra.update(gap_min=gap.amin(-1), log10_range=_log10_lemma2_factor(x, visible))
        for k in range(self.draws):
            seed = (self.seed + la.layer + DRAW_STRIDE * k) % (SEED_MAX + 1)
            v = _jac.random_directions(x.shape, visible.cpu(), seed=seed, dtype=torch.float64, device=x.device)
            g, valid = M.sensitivity_rows(logits, self.T, self.E, mask=mask, direction=v, rows=sub)
            v2 = v.gather(-1, top2)  # the direction at the two largest logits: |v_1 - v_2| is the two-token factor
            self._add(la.layer, k, g.cpu(), valid.cpu(), gap.cpu(), (v2[..., 0] - v2[..., 1]).abs().cpu())

    def _add(self, layer: int, draw: int, g, valid, gap, v_diff) -> None:
        """Table rows of one layer and draw: ``g`` ``(nT, nE, H, R)``, ``valid`` ``(H, R)``, ``gap`` ``(H, R)`` the
        top-two logit gap, ``v_diff`` ``(H, R)`` the two-token factor ``|v_1 - v_2|`` of the direction."""
        L = self.length
        stride = 1 if len(self.row_idx) == L else max(1, L // self.sens_rows)
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
        # near ties: rows whose top-two gap (in the units of T) is below T, and the share of sum g they carry
        T3 = Tt.view(-1, 1, 1)
        tied = (gap.unsqueeze(0) < T3) & valid  # (nT, H, R)
        g_tied = (g * tied.unsqueeze(1)).sum(-1) / g.sum(-1).clamp(min=1e-300)  # (nT, nE, H)
        # two-token prediction (only the top two weights respond, linear regime): sqrt2 q(1-q) |v1 - v2| / T
        q = torch.sigmoid(-gap.unsqueeze(0) / T3)
        pred = torch.where(valid, math.sqrt(2) * q * (1 - q) * v_diff / T3, 0).sum(-1) / cnt
        # Lemma 2 along the step: g <= max over the path of ||J||_2 <= e^{(range + 2 eps)/T} / T (1/t + 1/sqrt t)
        ex = self._extra
        log10_bound = (ex["log10_range"][0] + 2 * Et * math.log10(math.e)) / Tt - torch.log10(Tt) + ex["log10_range"][1]
        log10_g = torch.log10(g.clamp(min=1e-300))
        above_l2 = ((log10_g > log10_bound + 1e-9) & valid & (g > 0)).sum(-1)
        margin = torch.where(valid & (g > 0), log10_bound - log10_g, math.nan).nanmedian(-1).values
        cols = dict(
            n_rows=valid.sum(-1), g=mean, g_row_max=gmax, bound_corrected=corr[..., 0], bound_paper=paper[..., 0]
        )
        cols.update(rows_violating_corrected=viol, rows_above_paper=over, rows_gap_below_T=tied.sum(-1).unsqueeze(1))
        cols.update(g_share_gap_below_T=g_tied, g_two_token=pred.unsqueeze(1), gap_min=ex["gap_min"].cpu())
        cols.update(draw=torch.tensor(draw), rows_above_lemma2=above_l2, lemma2_log10_margin=margin)
        cols.update(sqrt5_ratio_max=ex["sqrt5_max"], rows_sqrt5_half=ex["sqrt5_half"])
        # each column (nT, nE, H); .item() gives an int or a float as its dtype says
        cols = {k: np.broadcast_to(x.numpy(), (len(self.T), len(self.E), H)) for k, x in cols.items()}
        for a, T in enumerate(self.T):
            for b, e in enumerate(self.E):
                for h in range(H):
                    row = dict(self.meta, L=L, T=T, eps=e, layer=layer, head=h)
                    self.rows.append(dict(row, **{k: x[a, b, h].item() for k, x in cols.items()}, row_stride=stride))


def _top_two(x: torch.Tensor, visible: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The gap between the two largest visible logits of each row ``(H, R)`` (``inf`` with fewer than two), and their
    positions ``(H, R, 2)``."""
    top = torch.where(visible, x, torch.tensor(-math.inf, dtype=x.dtype, device=x.device)).topk(2, dim=-1)
    return (top.values[..., 0] - top.values[..., 1]).nan_to_num(math.inf), top.indices


def _log10_lemma2_factor(x: torch.Tensor, visible: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per row ``(H, R)``: ``log10(e) (l_max - l_min)`` over the visible logits, and ``log10(1/t + 1/sqrt t)``
    (Lemma 2's bound for softmax is ``e^{(l_max - l_min)/T} / T (1/t + 1/sqrt t)``)."""
    big = torch.where(visible, x, -math.inf).amax(-1)
    small = torch.where(visible, x, math.inf).amin(-1)
    t = visible.sum(-1).clamp(min=1).to(x.dtype)
    return torch.where(visible.sum(-1) >= 2, big - small, 0.0) * math.log10(math.e), torch.log10(1 / t + 1 / t.sqrt())


def log_sums(x: torch.Tensor, last: list[int], temps: list) -> torch.Tensor:
    """``(2, nT, H, R)``: per ``T``, ``log sum_i e_i`` and ``log sum_i e_i^2``, ``e_i = exp(x_i / T)``, over the columns
    ``0..last[r]`` of each row of ``x`` ``(H, R, L)`` (``<= 0``; ``-inf`` adds nothing), by row blocks that wide."""
    impl = M._engine.choose("log_sums", "auto", x.device.type == "cpu" and x.dtype == torch.float64)
    if impl is not None:
        return impl(x, last, temps)
    logs = torch.empty(2, len(temps), *x.shape[:2], dtype=x.dtype, device=x.device)
    for first, stop, width in row_blocks(last, 1 << 14):
        for a, T in enumerate(temps):
            e = torch.exp(x[:, first:stop, :width] / T)
            logs[0, a, :, first:stop], logs[1, a, :, first:stop] = e.sum(-1).log(), torch.linalg.vecdot(e, e).log()
    return logs


def _model_examples(x: torch.Tensor, visible: torch.Tensor, top2: torch.Tensor, temps: list, eps_list: list) -> dict:
    """The paper's sqrt(5) eps example on the model's rows: the largest logit lowered by ``2 eps`` and the second
    raised by ``eps`` (a change of norm ``sqrt5 eps``); per ``(T, eps, head)`` the row maximum of
    ``||Delta alpha|| / (3 sqrt2 eps / (4T))`` and the number of rows where it is at least 1/2.

    Only two logits move, so every other weight is scaled by ``e^{-D}``, ``D`` the change of the row's log-sum-exp:
    ``||Delta alpha||^2 = (p_1 expm1(d_1 - D))^2 + (p_2 expm1(d_2 - D))^2 + expm1(-D)^2 S``, ``d = (-2 eps, eps)/T``,
    ``S`` the sum of the other weights' squares (one softmax per ``T``, then O(1) per row and ``eps``; ``D`` from the
    row maximum by log1p, by a log-sum-exp where the exponentials overflow). Tested against the definition,
    :func:`~attn_lib.metrics.sensitivity.softmax_change` on the whole row (``tests/test_sqrt5_on_the_model.py``)."""

    valid = visible.sum(-1) >= 2
    x = torch.where(visible, x, torch.tensor(-math.inf, dtype=x.dtype, device=x.device))
    rmax = torch.zeros(len(temps), len(eps_list), x.shape[0], dtype=x.dtype)
    half = torch.zeros_like(rmax, dtype=torch.long)
    x1 = x.gather(-1, top2[..., :1])  # the row maximum: every logit is measured from it (no rounding of x / T)
    gap = x1.squeeze(-1) - x.gather(-1, top2[..., 1:]).squeeze(-1)  # >= 0 (inf with a single visible token)
    others = (x - x1).scatter(-1, top2, -math.inf)  # the other logits, <= 0; their weights without 1 - p_1 - p_2
    # both log-sum-exps per T (of others / T and 2 others / T) from one exponential e = exp((others - m) / T) in [0, 1],
    # m the largest other logit (0 if none): lse_rest = m / T + log sum e, lse_sq = 2 m / T + log sum e^2
    m = others.amax(-1, keepdim=True).nan_to_num(neginf=0.0)
    last = torch.where(visible, torch.arange(x.shape[-1], device=x.device), -1).amax(-1).amax(0).tolist()
    logs, m = log_sums(others - m, last, temps), m.squeeze(-1)
    for a, T in enumerate(temps):  # log Z = log1p(e^{-gap/T} + S') from the row maximum
        lse_rest, lse_sq = m / T + logs[0, a], 2 * m / T + logs[1, a]
        log_z = torch.log1p(torch.exp(-gap / T) + lse_rest.exp())
        lp = torch.stack([-log_z, -gap / T - log_z], dim=-1)  # log p_1, log p_2
        p = lp.exp()
        log_rest, log_sq = lse_rest - log_z, lse_sq - 2 * log_z  # log S, log of the sum of the others' squares
        S = log_rest.exp()
        for b, e in enumerate(eps_list):
            # D = d_1 + G, measured from the row maximum's token (as softmax_change does), so that p_1's change keeps
            # its digits when p_1 is close to 1: G = log1p(p_2 expm1(d_2 - d_1) + S expm1(-d_1))
            if 3 * e / T <= 700:
                G = torch.log1p(p[..., 1] * math.expm1(3 * e / T) + S * math.expm1(2 * e / T))
            else:  # expm1 would overflow: the same sum from the exponentials (no cancellation: e^{3 eps/T} > e^700),
                # and a log-sum-exp where those overflow too
                a1, a2 = lp[..., 1] + 3 * e / T, log_rest + 2 * e / T
                u = torch.exp(a1.clamp(max=700)) + torch.exp(a2.clamp(max=700)) - p[..., 1] - S
                lse = torch.logsumexp(torch.stack([lp[..., 0], a1, a2]), dim=0)
                G = torch.where(torch.maximum(a1, a2) < 700, torch.log1p(u), lse)
            z = torch.stack([-G, 3 * e / T - G], dim=-1)  # d - D for the two moved tokens
            # a weight that grows more than e-fold is formed directly (p expm1(z) would be 0 * inf below the range)
            top = torch.where(z > 1, torch.exp(lp + z.clamp(min=1)) - p, p * torch.expm1(z.clamp(max=1)))
            zo = 2 * e / T - G  # the other weights' z
            rest_sq = torch.where(
                zo > 1,
                torch.exp(2 * zo.clamp(min=1) + log_sq) * torch.expm1(-zo.clamp(min=1)).square(),
                torch.expm1(zo.clamp(max=1)).square() * log_sq.exp(),
            )
            norm = (top.square().sum(-1) + rest_sq).sqrt()
            r = torch.where(valid, norm / (3 * math.sqrt(2) * e / (4 * T)), 0.0)
            rmax[a, b] = r.amax(-1).cpu()
            half[a, b] = (r >= 0.5).sum(-1).cpu()
    return {"sqrt5_max": rmax, "sqrt5_half": half}


class RawSensitivityAnalysis(SensitivityAnalysis):
    """Algorithm 5 with ``T`` on the raw scores ``q . k`` instead of the logits ``q . k / sqrt(d)``: softmax((qk + eps
    v)/T) = softmax((l + (eps/sqrt d) v)/(T/sqrt d)), so it runs at ``T/sqrt(d)``, ``eps/sqrt(d)`` and reports ``g``
    per unit of raw score (divided by ``sqrt d``) against the raw ``T`` and ``eps``."""

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
        df = df.assign(g_two_token=df["g_two_token"] / c, gap_min=df["gap_min"] * c)  # the top-two gap in raw units
        # the bounds in raw units: min{1/(2T), sqrt2/eps} and min{1/(4T), sqrt2} of the raw T and eps
        df["bound_corrected"] = np.minimum(1 / (2 * df["T"]), math.sqrt(2) / df["eps"])
        df["bound_paper"] = np.minimum(1 / (4 * df["T"]), math.sqrt(2))
        # rows above the paper's bound were counted in scaled units, where that bound differs: not carried over
        return df.drop(columns=["rows_above_paper"]).assign(temperature_base="raw q.k", head_dim=int(round(c * c)))


@dataclasses.dataclass(frozen=True)
class SensitivityParams(Experiment):
    """Parameters of Algorithm 5 (:func:`gradient_sensitivity`): window length ``L >= 2``; the grid
    ``temperatures`` x ``eps_values`` of ``g(T, eps)`` (each > 0; a single number is one value); ``seed`` in
    [0, 2**64 - 1] of the directions; ``rows >= 0``, the row set ``R`` (every ``max(1, L // rows)``-th row ending at the
    last, :func:`sens_row_indices`; 0: every row); ``direction_seeds`` in [1, 1000], independent draws of the
    directions (column ``draw``; draw ``k`` of layer ``l`` is seeded with ``seed + l + 1000 k``), so that a verdict can
    report its spread over the draws."""

    name: ClassVar[str] = "gradient_sensitivity"
    analysis_class: ClassVar[type] = SensitivityAnalysis

    L: int = 1024
    temperatures: tuple[float, ...] = tuple(np.logspace(-3, 2, 21))
    eps_values: tuple[float, ...] = (1e-3, 1e-1, 10.0)
    seed: int = 0
    rows: int = 0
    direction_seeds: int = 1

    def __post_init__(self):
        self.set_checked(
            L=check_int("L", self.L, low=2),
            temperatures=tuple(check_positive_list("temperatures", self.temperatures)),
            eps_values=tuple(check_positive_list("eps_values", self.eps_values)),
            seed=check_seed("seed", self.seed),
            rows=check_int("rows", self.rows, low=0),
            direction_seeds=check_int("direction_seeds", self.direction_seeds, low=1, high=1000),
        )


@dataclasses.dataclass(frozen=True)
class RawSensitivityParams(SensitivityParams):
    """Parameters of :func:`gradient_sensitivity_raw`: those of :class:`SensitivityParams` and ``head_dim >= 1``."""

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
    """Algorithm 5 / Fig. 4: per (T, eps, layer, head) the row-mean ``g`` of the finite-difference sensitivity (rows
    with ``t >= 2``; one seeded unit direction per row, reused for every ``T`` and ``eps``, seed ``seed + layer``), its
    row maximum, the corrected bound ``min(1/(2T), sqrt2/eps)`` with the number of rows violating it (must be 0), and
    the paper's ``min(1/(4T), sqrt2)`` with the number of rows above it. The paper's ``g(T, eps)`` is the max over heads
    of ``g``. With ``rows`` > 0 the directions are drawn for the subsampled rows of ``R`` only (column ``row_stride``);
    with ``direction_seeds`` > 1 it all repeats for each draw (column ``draw``, 0 = the seed above). Near ties:
    ``rows_gap_below_T`` counts the rows whose two largest logits differ by less than ``T``, ``g_share_gap_below_T`` is
    the share of the head's summed ``g`` they carry, and ``g_two_token`` the row mean predicted when only the top two
    weights respond (``sqrt2 q (1 - q) |v_1 - v_2| / T``, ``q = sigmoid(-gap/T)``).""",
    returns="""One row per (draw, T, eps, layer, head): ``L, T, eps, layer, head, n_rows, g, g_row_max, bound_corrected,
    bound_paper, rows_violating_corrected, rows_above_paper, rows_gap_below_T, g_share_gap_below_T, g_two_token, draw,
    row_stride`` plus ``model, text, device``.""",
    example="``L=64``",
)


def gradient_sensitivity_raw(
    handle, text, params: SensitivityParams | None = None, *, start: int = 0, cache=None, **overrides
) -> pd.DataFrame:
    """Algorithm 5 with ``T`` and ``eps`` on the raw scores ``q . k`` (the other reading of Fig. 4's T axis; Reading
    the paper, §The sensitivity metric), arguments as for :func:`gradient_sensitivity`; the model's scale is taken as
    ``1/sqrt(head_dim)`` (GPT-2, Llama, BERT). Its table in raw units (``g`` per unit of raw score), without
    ``rows_above_paper``, with ``temperature_base`` and ``head_dim`` saying so."""
    raw = RawSensitivityParams.of(SensitivityParams.build(params, **overrides), handle)
    return raw.run(handle, text, start=start, cache=cache)
