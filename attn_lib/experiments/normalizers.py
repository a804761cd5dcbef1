r"""Every normaliser of :mod:`attn_lib.normalizers` on the paper's limits, on the same model logits (chapter "Beyond
softmax"): :func:`compare_normalizers` runs ONE forward pass with the model's own softmax (nothing is swapped); every
layer's logits of a sample of query rows (:func:`~attn_lib.experiments.weights.row_sample`) are normalised by each
compared normaliser (:func:`normalizer_settings`), and the weights measured on the paper's limits (summaries:
:func:`critical_n_from_heads`, :func:`limits_summary`):

- vanishing attention (Lemma 1): ``max_j alpha_tj`` and ``t max_j alpha_tj`` against the row length ``t``;
- the distance ``d~`` at ``N``, its expectation ``E1`` under a random top-``N`` (Theorem 1) and the critical ``N``
  (the first ``N`` of a grid at which a two-sample KS test over heads no longer separates the two);
- the separability ``N_s/N`` (Definition of ``N_s``, Theorem 2) on unit value vectors;
- the sensitivity ``g(T, eps)`` (Algorithm 5) by finite differences, and the spectral norm of the analytic Jacobian
  where one exists (softmax and top-k: :func:`~attn_lib.experiments.weights.softmax_type_spectral_norm`).

Rows. A causal row of ``t`` visible tokens is the same in every prefix longer than ``t``, so the rows of length ``L``
come from the one pass at the largest length: ``rows_per_length`` rows with ``t`` evenly spaced in ``(L/2, L]``, ending
at ``t = L``, each with its own ``t`` (Reading the paper, §Causal masking). For weights that do not sum to one, see
:mod:`attn_lib.experiments.weights`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from types import SimpleNamespace

import numpy as np
import pandas as pd
import torch

from .. import jacobian
from .. import normalizers as nz
from .._validation import check_int, check_probability, check_seed
from . import passes
from .inputs import require_causal, table_meta
from .profiles import BeyondProfile, get_beyond_profile
from .weights import row_metrics, row_sample, softmax_type_spectral_norm

__all__ = ["normalizer_settings", "compare_normalizers", "critical_n_from_heads", "limits_summary"]


def normalizer_settings(k_values: Sequence[int] = (4, 16, 64)) -> dict[str, tuple[str, dict]]:
    """Label -> (name, params) of every compared normaliser (``attn_lib.normalizers.available(compared=True)``, the
    label is the name and no parameter is bound), with top-k at each ``k >= 1`` of ``k_values`` (in the order given,
    without repeats; empty: no top-k; per profile: ``BeyondProfile.k_values``) after softmax: ``{"softmax":
    ("softmax", {}), "top-4": ("topk", {"k": 4}), ..., "sparsemax": ("sparsemax", {}), ...}``."""
    if isinstance(k_values, (str, bytes)) or not hasattr(k_values, "__iter__") or getattr(k_values, "ndim", None) == 0:
        k_values = [k_values]
    ks = list(dict.fromkeys(check_int("k_values", k, low=1) for k in k_values))
    out = {"softmax": ("softmax", {})}
    out.update({f"top-{k}": ("topk", {"k": k}) for k in ks})
    out.update({name: (name, {}) for name in nz.available(compared=True) if name != "softmax"})
    return out


# ---- the limits comparison --------------------------------------------------------------------------------------
class CompareAnalysis:
    """Per layer: every normaliser on the sampled rows; per head means per ``L`` (tidy rows)."""

    def __init__(self, meta: dict, prof: BeyondProfile, settings: dict, seed: int):
        self.meta, self.prof, self.settings, self.seed = meta, prof, settings, seed
        self.row_sets = row_sample(prof.lengths, prof.rows_per_length)  # ascending L
        self.Lmax = max(prof.lengths)
        self.out: list[tuple[dict, dict, np.ndarray]] = []

    def _add(self, label, name, metric, layer, values, **where):
        """One table row per head: the labels, ``head`` and ``value`` (one block, expanded in :meth:`finish`)."""
        v = np.asarray(torch.as_tensor(values).detach().to("cpu", torch.float64)).reshape(-1)
        self.out.append((dict(self.meta, normalizer=label, family=name, metric=metric, layer=layer), where, v))

    def layer(self, la) -> None:
        prof = self.prof
        m = la.mask
        while m.dim() > 2:
            m = m[0]
        V = la.values[0][:, : self.Lmax].to(torch.float64)
        ns_all = sorted(set(prof.crit_grid) | {prof.n_distance})
        per_L = []
        for L, rs in self.row_sets.items():
            sel = torch.as_tensor(rs)
            lg = la.logits[0][:, sel, :L].to(torch.float64)  # (H, R_L, L): rows r < L see only columns < L
            vis = m[sel, :L] & torch.isfinite(lg[0])
            # the grid's N below L (at N = L - 1, p = 1 and d~, E1 nearly coincide by construction)
            ns = [n for n in ns_all if n < L]
            per_L.append((L, torch.as_tensor(rs + 1, dtype=torch.float64), lg, vis, ns))
        for label, (name, params) in self.settings.items():
            f = nz.get(name, **params)
            for L, t, lg, vis, ns in per_L:
                w = f(lg, 1.0, dim=-1, mask=vis)
                vmax = w.amax(-1)  # (H, R_L)
                self._add(label, name, "max_alpha", la.layer, vmax.mean(-1), L=L)
                self._add(label, name, "L_max_alpha", la.layer, (vmax * t).mean(-1), L=L)
                met = row_metrics(w, V[:, :L], vis, ns)
                for c, N in enumerate(ns):
                    cnt = met["valid"][..., c].sum(-1).clamp(min=1)
                    self._add(label, name, "d_tilde", la.layer, met["d_tilde"][..., c].sum(-1) / cnt, L=L, N=N)
                    self._add(label, name, "e1", la.layer, met["e1"][..., c].sum(-1) / cnt, L=L, N=N)
            # separability and sensitivity on the rows of the largest L
            L, t, lg, vis, _ = per_L[-1]
            w = f(lg, 1.0, dim=-1, mask=vis)
            sep = row_metrics(w, V[:, :L], vis, [n for n in prof.sep_n if n < L], unit=True)
            for c, N in enumerate(n for n in prof.sep_n if n < L):
                cnt = sep["valid"][..., c].sum(-1).clamp(min=1)
                self._add(label, name, "sep_fraction", la.layer, sep["sep"][..., c].sum(-1) / cnt, L=L, N=N)
            seed = (self.seed + la.layer) % 2**63  # one seeded direction per row, reused for every T and eps (Alg. 5)
            grid = jacobian.sensitivity_grid(
                lg, prof.temperatures, prof.eps_values, normalizer=f, mask=vis, seed=seed, dtype=torch.float64
            )
            for i, T in enumerate(prof.temperatures):
                for j, e in enumerate(prof.eps_values):
                    self._add(label, name, "g", la.layer, grid[i, j].mean(-1), L=L, T=T, eps=e)
                if nz.spec(name).jacobian == "softmax":
                    jn = softmax_type_spectral_norm(f(lg, T, dim=-1, mask=vis), T).amax(-1)
                    self._add(label, name, "jac_norm", la.layer, jn, L=L, T=T)

    def finish(self) -> pd.DataFrame:
        """The tidy table: the columns in the order a list of one dict per row would give (labels, ``head``,
        ``value``, then each grid column where it first appears), a grid column missing from a row left NaN."""
        names = list(self.out[0][0]) + ["head", "value"] if self.out else []
        for _, where, _ in self.out:
            names += [k for k in where if k not in names]
        sizes = [len(v) for _, _, v in self.out]
        cols: dict = {}
        for c in names:  # head and value filled in below, in their place
            cols[c] = [x for fixed, where, v in self.out for x in [fixed.get(c, where.get(c, np.nan))] * len(v)]

        if sizes:
            cols.update(
                head=np.concatenate([np.arange(n) for n in sizes]), value=np.concatenate([v for *_, v in self.out])
            )
        df = pd.DataFrame(cols)
        for c in ("L", "N"):
            if c in df:
                df[c] = df[c].astype("Int64")
        return df


def compare_normalizers(handle, text, *, profile="quick", seed: int = 0, start: int = 0, cache=None) -> pd.DataFrame:
    """The paper's limits for every normaliser on the same model logits (one forward pass of the model's own softmax;
    see the module docstring) over the first ``max(profile.lengths)`` tokens of ``text`` from ``start``. ``profile``:
    ``"paper"``, ``"quick"`` or a :class:`BeyondProfile`; ``seed``: of the sensitivity directions (``seed + layer``);
    ``cache``: a :class:`attn_lib.cache.ResultCache`. Returns a tidy table, one row per (normaliser, metric, layer, head
    and grid point): columns ``model, text, device, normalizer`` (label, e.g. ``"top-16"``), ``family`` (name in
    :mod:`attn_lib.normalizers`), ``metric`` (``max_alpha``, ``L_max_alpha``, ``d_tilde``, ``e1``, ``sep_fraction``,
    ``g``, ``jac_norm``), ``layer, head, value`` and the grid columns ``L, N, T, eps`` (missing where they do not
    apply). Per-head values are means over the sampled rows of that ``L``."""
    prof = get_beyond_profile(profile)
    require_causal(handle, "compare_normalizers")
    seed = check_seed("seed", seed)
    start = check_int("start", start, low=0)
    if max(prof.lengths) > int(handle.max_length):
        raise ValueError(
            f"profile lengths must be <= the model's context {handle.max_length} (got {max(prof.lengths)})"
        )
    settings = normalizer_settings(prof.k_values)
    cache = passes.check_cache(cache)

    def compute():
        a = CompareAnalysis(table_meta(handle, text), prof, settings, seed)
        only_layer = SimpleNamespace(layer=lambda sh: a.layer(sh.la))  # this analysis needs the captured layer only
        passes.run_pass(handle, text, [only_layer], max(prof.lengths), start)
        return a.finish()

    key = dict(start=start, seed=seed, profile=prof.as_dict(), settings=settings)
    return passes.cached(cache, compute, "compare_normalizers", handle, text, **key)


def critical_n_from_heads(df: pd.DataFrame, alpha: float = 0.01) -> pd.DataFrame:
    """Critical ``N`` per (normaliser, ``L``) of :func:`compare_normalizers`' table ``df``: the first ``N`` of the
    grid at which the two-sample KS test over heads does not separate the per-head means of ``d~`` and ``E1`` (``p >=
    alpha``). Returns a table ``normalizer, L, n_star, censored`` (no scanned ``N`` passed; ``n_star`` is then the
    largest scanned), ``ratio = n_star / L``, ``n_heads``."""
    from scipy.stats import ks_2samp  # slow to import: only when the tests run

    need = {"metric", "normalizer", "L", "N", "layer", "head", "value"}
    if not isinstance(df, pd.DataFrame) or not need <= set(df.columns):
        raise ValueError(f"df must be compare_normalizers' table (columns {sorted(need)})")
    a = check_probability("alpha", alpha, open_low=True, open_high=True)
    sub = df[df["metric"].isin(["d_tilde", "e1"])]
    wide = sub.pivot_table(index=["normalizer", "L", "N", "layer", "head"], columns="metric", values="value")
    rows = []
    for (lab, L), g in wide.groupby(level=["normalizer", "L"], sort=False):
        for N, gn in g.groupby(level="N"):  # up to the first N that passes, else the largest scanned
            n_star, passed = int(N), bool(ks_2samp(gn["d_tilde"].to_numpy(), gn["e1"].to_numpy()).pvalue >= a)
            if passed:
                break
        row = dict(normalizer=lab, L=int(L), n_star=n_star, censored=not passed, ratio=n_star / int(L))
        rows.append(dict(row, n_heads=len(g.xs(n_star, level="N"))))
    return pd.DataFrame(rows)


def limits_summary(df: pd.DataFrame, alpha: float = 0.01) -> pd.DataFrame:
    """One row per normaliser, one column per limit (the chapter's table), from :func:`compare_normalizers`' table:
    ``max_alpha_slope`` (least-squares slope of log mean ``max alpha`` against log ``L``: ``-1`` is the
    ``1/L`` vanishing of Lemma 1, ``0`` a weight that does not vanish), ``d_tilde`` (mean over heads at the largest
    ``L`` and the profile's ``N``), ``d_tilde_slope`` (log-log slope of that mean against ``L``), ``n_star`` and
    ``n_star_ratio`` (critical ``N`` at the largest ``L``, ``censored`` if no grid ``N`` passed), ``sep_fraction``
    (median over heads of ``N_s/N`` at the largest ``N`` of the grid), ``g_low_T`` and ``g_T1`` (the paper's ``g``:
    max over heads of the row mean, at the smallest ``T`` and at ``T = 1``, smallest ``eps``), ``jac_norm_T1``
    (largest analytic spectral norm at ``T = 1``, NaN where no analytic Jacobian is used). Indexed by normaliser
    label, in the table's order; ``alpha`` is the KS level of the critical ``N``."""
    crit = critical_n_from_heads(df, alpha)
    if not {"T", "eps"} <= set(df.columns):
        raise ValueError("df must be compare_normalizers' table (columns T and eps are missing)")
    need = ("max_alpha", "d_tilde", "e1", "sep_fraction", "g")
    for lab, d in df.groupby("normalizer", sort=False):
        missing = [m for m in need if not (d["metric"] == m).any()]
        if missing:
            raise ValueError(f"df must be compare_normalizers' table (normaliser {lab!r} has no rows for {missing})")
    Lmax = int(df["L"].max())
    order = list(dict.fromkeys(df["normalizer"]))
    out = []
    for lab in order:
        d = df[df["normalizer"] == lab]
        mx = d[d["metric"] == "max_alpha"].groupby("L")["value"].mean()
        slope = float(np.polyfit(np.log(mx.index.astype(float)), np.log(mx.to_numpy()), 1)[0])
        dd = d[d["metric"] == "d_tilde"]
        n_d = int(dd["N"].min()) if 5 not in set(dd["N"].dropna()) else 5
        dL = dd[dd["N"] == n_d].groupby("L")["value"].mean()
        d_slope = float(np.polyfit(np.log(dL.index.astype(float)), np.log(dL.clip(lower=1e-300).to_numpy()), 1)[0])
        sp = d[d["metric"] == "sep_fraction"]
        n_sep = int(sp["N"].max())
        g = d[d["metric"] == "g"]
        e0 = float(g["eps"].min())
        gmax = g[g["eps"] == e0].groupby("T")["value"].max()
        jn = d[(d["metric"] == "jac_norm") & (d["T"] == 1.0)]["value"]
        c = crit[(crit["normalizer"] == lab) & (crit["L"] == Lmax)].iloc[0]
        row = dict(normalizer=lab, max_alpha_slope=slope, d_tilde=float(dL.loc[Lmax]), d_tilde_slope=d_slope)
        row.update(n_star=int(c["n_star"]), n_star_censored=bool(c["censored"]), n_star_ratio=float(c["ratio"]))
        row.update(sep_n=n_sep, sep_fraction=float(sp[sp["N"] == n_sep]["value"].median()))
        row.update(g_low_T=float(gmax.iloc[0]), low_T=float(gmax.index[0]))
        row.update(g_T1=float(gmax.loc[1.0]) if 1.0 in gmax.index else math.nan, eps=e0)
        out.append(dict(row, jac_norm_T1=float(jn.max()) if len(jn) else math.nan))
    return pd.DataFrame(out).set_index("normalizer")
