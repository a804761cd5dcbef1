"""The critical-N diagnosis (chapter 6, ``prop-e1-crossing``; Reading the paper, §The critical N): why the critical
``N`` is where it is, measured on the model and on counterfactual layers (:func:`critical_n_diagnosis`)."""

from __future__ import annotations

import dataclasses
import math
from typing import ClassVar

import pandas as pd
import torch

from .. import metrics as M
from .._validation import check_bool, check_int, check_positive, check_probability
from .passes import Experiment, SharedLayer, layer_mask, sens_row_indices

__all__ = ["DiagnosisParams", "critical_n_diagnosis"]

#: Counterfactual layers of the critical-N diagnosis: name -> (softmax temperature on the model's logits, whether the
#: first token's value vector is set to 0, removing the attention sink's contribution); temperatures flatten attention.
DIAGNOSIS_VARIANTS = {"model": (1.0, False), "first value 0": (1.0, True), "T=4": (4.0, False), "T=16": (16.0, False)}
#: N/L grid of the critical-N diagnosis.
DIAGNOSIS_FRACTIONS = (0.01, 0.02, 0.04, 0.06, 0.1, 0.2, 0.4, 0.6, 0.8, 0.9)


class CrossingAnalysis:
    """The analysis of :func:`critical_n_diagnosis`: per (variant, layer, head, N), from
    :func:`attn_lib.metrics.crossing_metrics`."""

    def __init__(self, params: DiagnosisParams, meta: dict, groups):
        self.meta, self.L, self.groups, self.variants = meta, params.L, groups, params.variants
        self.n_values = sorted({max(1, min(params.L - 1, round(f * params.L))) for f in params.fractions})
        idx = sens_row_indices(params.L, params.rows)
        self.rows = torch.as_tensor(idx[idx >= 2])  # t = r + 1 >= 3 visible tokens in a causal row
        self.out: list[dict] = []

    def layer(self, sh: SharedLayer):
        la = sh.la
        L = self.L
        lg = la.logits[0, :, :L, :L][:, self.rows].to(torch.float64)
        mask = layer_mask(la)[..., :L, :L][..., self.rows, :]
        vals = la.values[0, :, :L].to(torch.float64)
        tiny = 1e-300
        for name, (T, zero_first) in self.variants.items():
            v = vals.clone()
            if zero_first:
                v[:, 0] = 0
            w = torch.softmax(lg.masked_fill(~mask, -math.inf) / T, dim=-1)
            cr = M.crossing_metrics(w, v, self.n_values, mask=mask)
            t = cr.t.to(torch.float64).view(1, -1, 1)
            n = torch.as_tensor(self.n_values, dtype=torch.float64).view(1, 1, -1)
            p = n / (t - 1).clamp(min=1)
            lead_d = (t - n) * cr.s_norm
            lead_e1 = (t - n) * p * cr.z_norm.unsqueeze(-1)
            tol = 1e-9 * (1 + lead_d.abs() + lead_e1.abs())
            bad = ((cr.e1 - lead_e1).abs() > (t - n) / t * (1 + p) * cr.a_sum.unsqueeze(-1) + tol) | (
                (cr.d_tilde - lead_d).abs() > cr.a_out + tol
            )
            rho = cr.s_norm / cr.z_norm.unsqueeze(-1).clamp(min=tiny)
            valid = cr.valid
            cnt = valid.sum(1)  # (H, n)
            med = torch.where(valid, rho, torch.full((), math.nan, dtype=rho.dtype)).nanmedian(1).values

            def mean(x, valid=valid, cnt=cnt):
                return torch.where(valid, x, torch.zeros((), dtype=x.dtype)).sum(1) / cnt.clamp(min=1)

            cols = dict(d_tilde=mean(cr.d_tilde), e1=mean(cr.e1), lead_d_tilde=mean(lead_d), lead_e1=mean(lead_e1))
            cols.update(rho_mean=mean(rho), rho_median=med, bound_violations=(bad & valid).sum(1))
            sink = w[..., 0].mean(1)  # (H,)
            # the sink's share of the output: alpha_0 ||x_0|| / ||z||, mean over rows (0 when its value is zeroed)
            sink_out = (w[..., 0] * v[:, :1].square().sum(-1).sqrt() / cr.z_norm.clamp(min=tiny)).mean(1)
            cols = {k: x.cpu().numpy() for k, x in cols.items()}
            cnt_np, sink_np, sink_out_np = cnt.cpu().numpy(), sink.cpu().numpy(), sink_out.cpu().numpy()
            for h in range(w.shape[0]):
                for k, N in enumerate(self.n_values):
                    if cnt_np[h, k] == 0:
                        continue
                    row = dict(self.meta, variant=name, temperature=T, first_value_zero=zero_first, L=L, N=N)
                    row.update(layer=la.layer, head=h, kv_group=int(self.groups[h]), n_rows=int(cnt_np[h, k]))
                    row.update({c: float(x[h, k]) for c, x in cols.items()})
                    row.update(bound_violations=int(cols["bound_violations"][h, k]), sink_share=float(sink_np[h]))
                    self.out.append(dict(row, sink_output_share=float(sink_out_np[h])))

    def finish(self) -> pd.DataFrame:
        return pd.DataFrame(self.out)


def _check_variants(variants) -> dict:
    """``{name: (temperature > 0, zero the first value: bool)}``, checked."""
    if not isinstance(variants, dict) or not variants:
        raise ValueError("variants must be a non-empty dict {name: (temperature > 0, zero the first value: bool)}")
    out = {}
    for name, spec in variants.items():
        if not isinstance(name, str) or not isinstance(spec, (tuple, list)) or len(spec) != 2:
            raise ValueError(f"variants[{name!r}] must be (temperature > 0, True/False) (got {spec!r})")
        check_bool(f"variants[{name!r}][1]", spec[1])
        out[name] = (check_positive(f"variants[{name!r}] temperature", spec[0]), spec[1])
    return out


@dataclasses.dataclass(frozen=True)
class DiagnosisParams(Experiment):
    """Parameters of :func:`critical_n_diagnosis`: window length ``L >= 4``; ``fractions`` in (0, 1), ``N = round(f L)``
    for each ``f`` (sorted, without repeats); ``rows >= 0``: every ``max(1, L // rows)``-th row, ending at the last (0:
    every row); ``variants``: ``{name: (temperature > 0, zero the first value: bool)}``."""

    name: ClassVar[str] = "critical_n_diagnosis"
    analysis_class: ClassVar[type] = CrossingAnalysis
    grouped: ClassVar[bool] = True

    L: int = 1024
    fractions: tuple[float, ...] = DIAGNOSIS_FRACTIONS
    rows: int = 32
    variants: dict = dataclasses.field(default_factory=lambda: dict(DIAGNOSIS_VARIANTS))

    def __post_init__(self):
        L = check_int("L", self.L, low=2)
        if L < 4:
            raise ValueError(f"L must be an integer >= 4 for the critical-N diagnosis (got {L})")
        fractions = [self.fractions] if isinstance(self.fractions, (int, float)) else self.fractions
        fr = sorted({check_probability("fractions", f, open_low=True, open_high=True) for f in fractions})
        if not fr:
            raise ValueError("fractions must be a non-empty list of numbers in (0, 1)")
        self.set_checked(
            L=L, fractions=tuple(fr), rows=check_int("rows", self.rows, low=0), variants=_check_variants(self.variants)
        )


critical_n_diagnosis = DiagnosisParams.public(
    """Why the critical N is where it is (chapter 6, ``prop-e1-crossing``; Reading the paper, §The critical N). On
    ``rows`` rows of the window (32 by default: the cost is ``O(H rows L d)`` per ``N`` and variant), for each ``N`` of
    ``fractions`` and each counterfactual of ``variants`` (by default the model, its first token's value vector set to
    0, and softmax at temperatures 4 and 16 on the model's logits): per (layer, head) the row means of d~, E1, their
    leading terms ``(t - N)||s_N||`` and ``(t - N) p ||z||`` (``p = N/(t-1)``), the median and mean of
    ``||s_N||/||z||``, the first token's mean weight ``sink_share`` and ``bound_violations``, the rows where a bound of
    the proposition fails (none, if the proposition is right).""",
    returns="""``variant, temperature, first_value_zero, L, N, layer, head, kv_group, n_rows, d_tilde, e1, lead_d_tilde,
    lead_e1, rho_mean, rho_median, bound_violations, sink_share, sink_output_share`` (the first token's ``alpha_0
    ||x_0|| / ||z||``, mean over rows) plus ``model, text, device``.""",
    example="``L=64, rows=8``",
)
