"""Algorithm 3 (Fig. 2c): the critical ``N``, the first ``N`` at which a two-sample KS test over heads no longer
separates the per-head means of d~ from those of an expectation form (E1, E2 or the Monte-Carlo E[d~]), for every
window length (:func:`critical_n`, the trace; :func:`critical_n_summary`, the critical ``N`` per length)."""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
import time
import warnings
from typing import ClassVar

import numpy as np
import pandas as pd
import torch

from .. import metrics as M
from .._validation import check_bool, check_choice, check_int, check_int_list, check_probability, check_seed, check_size
from .passes import Experiment, SharedLayer, layer_mask, sens_row_indices

# CriticalSeedsParams: derived from a profile's CriticalNParams by profile_params, not built by hand
__all__ = ["CriticalNParams", "critical_n", "critical_n_summary", "critical_n_mc_seeds"]

#: The expectation forms of the critical-N scan: E1, E2 and the Monte-Carlo estimate of E[d~].
CRITICAL_FORMS = ("e1", "e2", "mc")


class CriticalAnalysis:
    """Algorithm 3: incremental scan and two-sample KS tests for every ``(L, N <= cap(L))``, over all heads and over
    key/value groups (Reading the paper, §The critical N)."""

    def __init__(self, params: CriticalNParams, meta: dict, groups=None):
        self.params, self.meta, self.lengths = params, meta, list(params.lengths)
        self.caps = {L: max(1, min(L - 1, int(math.floor(L * params.crit_fraction)))) for L in self.lengths}
        self.n_cap = max(self.caps.values())
        self.forms, self.stop_early = list(params.forms), params.stop_early
        self.timing_parts = {"mc_scan_s": 0.0} if self._mc_forms() else {}  # the Monte-Carlo scan's own time
        self.Lmax = max(self.lengths)
        self.row_sets = {int(L): sens_row_indices(int(L), params.crit_rows) for L in self.lengths}
        self.rows = torch.as_tensor(np.unique(np.concatenate(list(self.row_sets.values()))))
        self.row_masks = torch.zeros(len(self.lengths), self.Lmax, dtype=torch.bool)
        for i, L in enumerate(self.lengths):
            self.row_masks[i, torch.as_tensor(self.row_sets[L])] = True
        self.groups = groups  # key/value group of each head, or None (every head its own group)
        self.store: list = []  # per layer: (packed float32 causal logits, values, causal, mask)
        first_hi = min(self.n_cap, params.stage) if self.stop_early else self.n_cap
        self.stage_ranges: list[tuple[int, int]] = [(1, first_hi)]
        self.per_layer: list[dict] = []  # index by layer order: form -> list of (H, nL, n) blocks

    def _mc_seed(self, form: str) -> int | None:
        """The seed of a Monte-Carlo form (``"mc"``: the parameters' own; ``"mc@s"``: ``s``), ``None`` for E1, E2."""
        if form == "mc":
            return self.params.seed
        return int(form[3:]) if form.startswith("mc@") else None

    def _mc_forms(self) -> list[str]:
        return [f for f in self.forms if self._mc_seed(f) is not None]

    def _scan_layer(self, ld: M.LayerData, lo: int, hi: int, sh: SharedLayer | None = None) -> dict:
        """The stage ``lo..hi`` of a layer; in the pass (``sh``) critical_n and critical_n_mc_seeds share its scan."""
        rows = self.rows[self.rows < ld.L]
        key = ("topn_scan", lo, hi, self.params.p, tuple(rows.tolist()))
        scan = functools.partial(M.topn_scan, ld, n_max=hi, n_min=lo, p=self.params.p, rows=rows)
        sc = scan() if sh is None else sh.get(key, scan)
        Lm = min(self.Lmax, ld.L)
        # validity depends only on the row and N (not on the head): one 0/1 weight per (L, row, N)
        weights = (sc.valid[0, :Lm].unsqueeze(0) & self.row_masks[:, :Lm].unsqueeze(-1)).to(torch.float64)
        count = weights.sum(1)  # (nL, n)
        out = {"count": np.broadcast_to(count.cpu().numpy(), (ld.H, *count.shape)).copy()}
        # each L's weighted mean over its own rows only: for each L, the positions of its rows in ``rows``
        pos = [torch.searchsorted(rows, torch.as_tensor(r[r < ld.L])) for r in map(self.row_sets.get, self.lengths)]
        masks = [weights[i, rows[p_]].unsqueeze(0) for i, p_ in enumerate(pos)]  # each (1, R_L, n)

        def per_length_sums(x: torch.Tensor) -> torch.Tensor:  # (H, R, n) -> (H, nL, n)
            return torch.stack([(x.index_select(1, p_) * m).sum(1) for p_, m in zip(pos, masks, strict=True)], 1)

        for f in ["d_tilde", *(f for f in self.forms if self._mc_seed(f) is None)]:  # the Monte-Carlo forms below
            out[f] = (per_length_sums(getattr(sc, f)[:, rows]) / count.clamp(min=1)).cpu().numpy()
        for f in self._mc_forms():
            # Monte-Carlo E[d~] on the same rows and N: per-head means per L, and their standard errors (the rows'
            # samples are independent)
            t0 = time.perf_counter()
            mc_mean, mc_se = self._mc_scan(ld, rows, lo, hi, self._mc_seed(f))
            out[f] = (per_length_sums(mc_mean) / count.clamp(min=1)).cpu().numpy()
            var = per_length_sums(mc_se.square()) / count.clamp(min=1).square()
            out[f"{f}_var"] = var.cpu().numpy()  # variance of each per-head mean
            self.timing_parts["mc_scan_s"] += time.perf_counter() - t0
        return out  # each (H, nL, n)

    def _mc_scan(self, ld: M.LayerData, rows: torch.Tensor, lo: int, hi: int, seed: int | None = None) -> tuple:
        """``(mean, stderr)`` ``(H, R, n)`` of the Monte-Carlo scan on ``rows`` with ``seed`` (default the parameters'):
        ``mc_samples`` orders per row (stratified with ``mc_stratify``), ``mc_short_samples`` for the few rows of at
        most ``mc_short_t`` visible tokens."""
        pr = self.params
        seed = pr.seed if seed is None else seed
        t = torch.broadcast_to(ld.t, (ld.H, ld.L))[0, rows.to(ld.device)].cpu()
        short = t <= pr.mc_short_t if pr.mc_short_samples else torch.zeros(rows.shape, dtype=torch.bool)
        mean = torch.zeros(ld.H, rows.numel(), hi - lo + 1, dtype=torch.float64, device=ld.device)
        stderr = torch.zeros_like(mean)
        for sel, K in ((short, pr.mc_short_samples), (~short, pr.mc_samples)):
            if not bool(sel.any()):
                continue
            mc = M.expected_distance_mc_scan(
                ld, n_max=hi, n_min=lo, rows=rows[sel], n_samples=K, seed=seed, stratify=pr.mc_stratify
            )
            idx = sel.nonzero().flatten().to(ld.device)
            mean[:, idx], stderr[:, idx] = mc.mean, mc.stderr
        return mean, stderr

    def layer(self, sh: SharedLayer):
        ld = sh.layer()
        lo, hi = self.stage_ranges[0]
        self.per_layer.append({"layer": sh.la.layer, "H": ld.H, "blocks": [self._scan_layer(ld, lo, hi, sh)]})
        if self.stop_early and hi < self.n_cap:
            la = sh.la
            Lm = min(self.Lmax, ld.L)
            lg = la.logits[0, :, :Lm, :Lm].float()
            tri = torch.tril_indices(Lm, Lm)
            causal = bool((layer_mask(la)[..., :Lm, :Lm] == torch.ones(Lm, Lm, dtype=torch.bool).tril()).all())
            packed = lg[:, tri[0], tri[1]].clone() if causal else lg.clone()
            mask = None if causal else layer_mask(la)[..., :Lm, :Lm].clone()
            self.store.append((packed, la.values[0, :, :Lm].float().clone(), causal, mask))

    def _rebuild(self, i) -> M.LayerData:
        packed, vals, causal, mask = self.store[i]
        if causal:
            H, Lm = packed.shape[0], vals.shape[1]
            tri = torch.tril_indices(Lm, Lm)
            lg = torch.full((H, Lm, Lm), -math.inf, dtype=torch.float32)
            lg[:, tri[0], tri[1]] = packed
            return M.LayerData.from_logits(lg, vals)
        return M.LayerData.from_logits(packed, vals, mask=mask)

    def _samples(self, key: str, variance: bool = False) -> dict[str, np.ndarray]:
        """Per-head means ``(heads, nL, n)`` of the last stage over all layers, and their key/value-group means (with
        ``variance``: ``key`` holds variances of head means, and the group entries are variances of group means)."""
        out = {"heads": np.concatenate([pl["blocks"][-1][key] for pl in self.per_layer], axis=0)}
        if self.groups is not None:
            per_group = []
            for pl in self.per_layer:
                x, g = pl["blocks"][-1][key], self.groups
                means = [
                    x[g == k].sum(0) / (g == k).sum() ** 2 if variance else x[g == k].mean(0) for k in np.unique(g)
                ]
                per_group.append(np.stack(means, 0))
            out["kv_groups"] = np.concatenate(per_group, axis=0)
        return out

    def _ks(self, lo, hi, found):
        """The KS rows of the stage ``lo..hi``, in the order (L, N, sampling, form); ``found`` gets each first passing
        ``N``. One vectorised ``ks_2samp`` per block of ``N`` (the same p-values as one call per ``N``)."""
        cat = {f: self._samples(f) for f in ["d_tilde", *self.forms]}
        mc_var = {f: self._samples(f"{f}_var", variance=True) for f in self._mc_forms()}
        cnt = np.concatenate([pl["blocks"][-1]["count"] for pl in self.per_layer], axis=0)
        keyed = []
        for li, L in enumerate(self.lengths):
            # the N of this stage that are tested: within the scan limit, and with a row of length > N at this L
            ks = [k for k, N in enumerate(range(lo, hi + 1)) if N <= self.caps[L] and (cnt[:, li, k] > 0).all()]
            for si, sampling in enumerate(cat["d_tilde"]):
                for fi, f in enumerate(self.forms):
                    if found.get((L, f, sampling)) is None or not self.stop_early:
                        rows = self._ks_rows(cat, mc_var, cnt, li, L, ks, lo, sampling, f, found)
                        keyed += [((li, k, si, fi), row) for k, row in rows]
        return [row for _, row in sorted(keyed, key=lambda kr: kr[0])]

    def _ks_rows(self, cat, mc_var, cnt, li, L, ks, lo, sampling, f, found, block=64):
        """``(k, row)`` for the tests of one (L, sampling, form) at the stage's indices ``ks``."""
        from scipy.stats import ks_2samp  # slow to import: only when the tests run

        a_all, b_all = cat["d_tilde"][sampling][:, li], cat[f][sampling][:, li]
        for start in range(0, len(ks), block):
            idx = ks[start : start + block]
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                res = ks_2samp(a_all[:, idx], b_all[:, idx], axis=0)
            for j, k in enumerate(idx):
                if caught:  # a warning (e.g. the asymptotic p-value) for some N of the block, maybe past the first
                    # passing N: test N by N, so that only the tested N warn
                    res_k = ks_2samp(a_all[:, k], b_all[:, k])
                    stat, pv = float(res_k.statistic), float(res_k.pvalue)
                else:
                    stat, pv = float(res.statistic[j]), float(res.pvalue[j])
                a, b = a_all[:, k], b_all[:, k]
                rel_se = float("nan")  # the largest standard error of a Monte-Carlo sample value, relative to it
                if f in mc_var:
                    rel_se = float(np.max(np.sqrt(mc_var[f][sampling][:, li, k]) / np.maximum(np.abs(b), 1e-300)))

                row = dict(self.meta, L=L, N=lo + k, form=f, sampling=sampling, statistic=stat, p_value=pv)
                row.update(n_samples=len(a), n_rows=int(cnt[0, li, k]), mean_d_tilde=float(a.mean()))
                yield k, dict(row, mean_form=float(b.mean()), mc_rel_se=rel_se, alpha=self.params.alpha)
                if pv >= self.params.alpha and found.get((L, f, sampling)) is None:
                    found[(L, f, sampling)] = lo + k
                    if self.stop_early:
                        return

    def finish(self) -> pd.DataFrame:
        found: dict = {}
        lo, hi = self.stage_ranges[0]
        rows = self._ks(lo, hi, found)
        while hi < self.n_cap and self.stop_early:
            samplings = ["heads"] + (["kv_groups"] if self.groups is not None else [])
            keys = itertools.product(self.lengths, self.forms, samplings)
            if all(found.get(k) is not None or self.caps[k[0]] <= hi for k in keys):
                break
            lo, hi = hi + 1, min(self.n_cap, 2 * hi)
            self.stage_ranges.append((lo, hi))
            with M.block_parallel():  # as in the pass: no per-operation thread barriers
                for i, pl in enumerate(self.per_layer):
                    pl["blocks"].append(self._scan_layer(self._rebuild(i), lo, hi))
            rows += self._ks(lo, hi, found)
        self.store.clear()
        return pd.DataFrame(rows)


@dataclasses.dataclass(frozen=True)
class CriticalNParams(Experiment):
    r"""Parameters of Algorithm 3 (:func:`critical_n`).

    ``lengths``: window lengths ``L >= 4`` (prefixes of one window). ``alpha`` in (0, 1): the KS level; the paper's
    text and caption say 0.01 (Reading the paper, §The KS test). ``crit_fraction`` in (0, 1]: the scan limit, ``N =
    1..min(L - 1, floor(crit_fraction L))``; 1.0 scans up to ``L - 1``, so no result is censored by it. ``forms``: a
    non-empty subset of :data:`CRITICAL_FORMS` tested against d~; ``"mc"`` is the Monte-Carlo estimate of
    :math:`\mathbb E_{I_N}[\tilde d]`, the ground truth of E1 (Reading the paper, §Expectation forms). ``p``
    (``"L-1"``, ``"L"``): E1's inclusion probability. ``stage >= 1``: the ``N`` range of the first stage, scanned in
    the pass (a later stage, needed only if some ``(L, form)`` has no critical ``N`` by then, rebuilds every layer
    from stored logits). ``stop_early``: end each trace at its first passing ``N``. ``crit_rows >= 0``: every
    ``max(1, L // crit_rows)``-th row per ``L``, ending at the last (0: every row). ``mc_samples >= 1``: random subsets
    ``K`` per row of ``"mc"`` (fewer than Figs. 2a and 2b use: the scan costs ``O(K t^2)`` per row, Reading the paper,
    §The critical N); ``seed`` in [0, 2**64 - 1]: theirs; ``mc_stratify``: stratify them on each row's largest weight
    (``K`` pairs of orders, :func:`~attn_lib.metrics.expected_distance_mc_scan`). ``mc_short_samples >= 0`` orders
    (0: ``mc_samples``) for the rows of at most ``mc_short_t`` visible tokens.
    """

    name: ClassVar[str] = "critical_n"
    multi_length: ClassVar[bool] = True
    analysis_class: ClassVar[type] = CriticalAnalysis
    grouped: ClassVar[bool] = True

    lengths: tuple[int, ...] = (32, 64, 128, 256, 512, 1024)
    alpha: float = 0.01
    crit_fraction: float = 1.0
    forms: tuple[str, ...] = CRITICAL_FORMS
    p: str = "L-1"
    stage: int = 1023
    stop_early: bool = True
    crit_rows: int = 0
    mc_samples: int = 8
    seed: int = 0
    mc_stratify: bool = False
    mc_short_t: int = 0
    mc_short_samples: int = 0

    def __post_init__(self):
        lengths = tuple(check_int_list("lengths", self.lengths, low=2))
        if min(lengths) < 4:
            raise ValueError(f"lengths must be integers >= 4 for the critical-N scan (got {min(lengths)})")
        alpha = check_probability("alpha", self.alpha, open_low=True, open_high=True)
        crit_fraction = check_probability("crit_fraction", self.crit_fraction, open_low=True)
        forms = [self.forms] if isinstance(self.forms, str) else self.forms
        forms = tuple(check_choice("forms", f, list(CRITICAL_FORMS)) for f in forms)
        if not forms:
            raise ValueError(f"forms must be a non-empty subset of {list(CRITICAL_FORMS)}")
        check_choice("p", self.p, ["L-1", "L"])
        check_bool("stop_early", self.stop_early)
        check_bool("mc_stratify", self.mc_stratify)
        stage = check_int("stage", self.stage, low=1)
        crit_rows = check_int("crit_rows", self.crit_rows, low=0)
        per_row = max(lengths) * (crit_rows or max(lengths))  # random keys of one order over the scanned rows
        mc_samples = check_size("mc_samples", self.mc_samples, per_item=per_row)
        self.set_checked(
            lengths=lengths,
            alpha=alpha,
            crit_fraction=crit_fraction,
            forms=forms,
            stage=stage,
            crit_rows=crit_rows,
            mc_samples=mc_samples,
            seed=check_seed("seed", self.seed),
            mc_short_t=check_int("mc_short_t", self.mc_short_t, low=0),
            mc_short_samples=check_size("mc_short_samples", self.mc_short_samples, per_item=per_row, low=0),
        )

    def key_params(self) -> dict:
        """Every field but ``crit_rows`` when every row is used, and the Monte-Carlo ones when ``"mc"`` does not run."""
        out = super().key_params()
        if not self.crit_rows:
            del out["crit_rows"]
        if "mc" not in self.forms:
            del out["mc_samples"], out["seed"], out["mc_stratify"], out["mc_short_t"], out["mc_short_samples"]
        elif not self.mc_short_samples:
            del out["mc_short_t"], out["mc_short_samples"]
        return out


critical_n = CriticalNParams.public(
    r"""Algorithm 3 / Fig. 2c: the KS trace. For every ``L``, every ``N = 1..min(L - 1, floor(crit_fraction L))`` and
    every form (E1, E2, the Monte-Carlo expectation): the two-sample Kolmogorov-Smirnov test (``scipy.stats.ks_2samp``)
    between the per-head row means of d~ and of the form. It runs over all heads of all layers (``sampling="heads"``)
    and over key/value groups (``"kv_groups"``: the mean of the query heads that share a key/value head), the valid test
    under grouped-query attention, where heads of a group are not independent (Reading the paper, §The critical N). The
    per-row values come from :func:`attn_lib.metrics.topn_scan` (d~, E1, E2) and
    :func:`attn_lib.metrics.expected_distance_mc_scan` (``"mc"``: ``mc_samples`` random subsets per row for every ``N``,
    the prefixes of random orders), both incremental in ``N``, on the same rows. The critical ``N`` is the *first* ``N``
    with ``p >= alpha``; with ``stop_early`` the trace of each ``(L, form, sampling)`` ends there. The scan runs in
    stages (``1..stage`` during the forward pass, then doubling, rebuilding each layer from its stored float32 logits)
    until every ``(L, form, sampling)`` has its critical ``N`` or reached ``L - 1``.""",
    returns="""One row per test: ``L, N, form, sampling, statistic, p_value, n_samples, n_rows, mean_d_tilde, mean_form,
    mc_rel_se`` (``"mc"`` only, else NaN: the largest standard error of a Monte-Carlo sample value relative to that
    value), ``alpha`` plus ``model, text, device``. :func:`critical_n_summary` extracts the critical ``N``.""",
    example="``lengths=[16], forms=['e1']``",
)


def critical_n_summary(trace: pd.DataFrame, alpha: float | None = None, crit_fraction: float = 1.0) -> pd.DataFrame:
    """Critical ``N`` per ``(L, form, sampling)`` of a :func:`critical_n` trace (without a ``sampling`` column:
    ``"heads"``) at the KS level ``alpha`` (default: the trace's), for the trace's scan limit ``crit_fraction``: a table
    ``L, form, sampling, n_star`` (first ``N`` with ``p >= alpha``), ``censored`` (no such ``N`` up to the scan limit;
    ``n_star`` is then the limit), ``ratio = n_star / L``, ``n_scanned``, ``limit`` (the scan limit)."""

    columns = ["L", "form", "sampling", "n_star", "censored", "ratio", "n_scanned", "limit"]
    if alpha is not None:
        alpha = check_probability("alpha", alpha, open_low=True, open_high=True)
    crit_fraction = check_probability("crit_fraction", crit_fraction, open_low=True)
    if trace is not None and not isinstance(trace, pd.DataFrame):
        raise ValueError(f"trace must be critical_n's table, a pandas DataFrame (got {type(trace).__name__})")
    if trace is None or len(trace) == 0:
        return pd.DataFrame(columns=columns)
    need = {"L", "form", "N", "p_value"} | ({"alpha"} if alpha is None else set())
    if not need <= set(trace.columns):
        raise ValueError(f"trace must be critical_n's table (missing columns {sorted(need - set(trace.columns))})")
    if alpha is None:
        alpha = check_probability("trace's alpha", trace["alpha"].iloc[0], open_low=True, open_high=True)
    if "sampling" not in trace:
        trace = trace.assign(sampling="heads")
    out = []
    meta = {k: trace[k].iloc[0] for k in ("model", "text", "device") if k in trace}
    for (L, f, sampling), g in trace.groupby(["L", "form", "sampling"], sort=True):
        g = g.sort_values("N")
        hit = g[g["p_value"] >= alpha]
        cap = max(1, min(int(L) - 1, int(math.floor(L * crit_fraction))))
        n_star, cens = (int(hit["N"].iloc[0]), False) if len(hit) else (cap, True)
        row = dict(meta, L=int(L), form=f, sampling=sampling, n_star=n_star, censored=cens, ratio=n_star / L)
        out.append(dict(row, n_scanned=int(g["N"].max()), limit=cap))
    return pd.DataFrame(out)


class CriticalSeedsAnalysis(CriticalAnalysis):
    """The Monte-Carlo form of Algorithm 3 for the extra seeds ``seed + 1, ..., seed + mc_seeds - 1`` (forms
    ``"mc@s"``, d~ scanned once for all of them); :meth:`finish` gives the critical ``N`` of each seed."""

    def __init__(self, params: CriticalSeedsParams, meta: dict, groups=None):
        super().__init__(params, meta, groups)
        self.forms = [f"mc@{params.seed + k}" for k in range(1, params.mc_seeds)]

    def finish(self) -> pd.DataFrame:
        trace = super().finish()
        pr = self.params
        sm = critical_n_summary(trace, pr.alpha, pr.crit_fraction)
        if not len(sm):
            return sm
        se = []
        for r in sm.itertuples():
            hit = trace[(trace["L"] == r.L) & (trace["form"] == r.form) & (trace["sampling"] == r.sampling)]
            hit = hit[hit["N"] == r.n_star]
            se.append(float(hit["mc_rel_se"].iloc[0]) if len(hit) else math.nan)
        seeds = sm["form"].str.slice(3).astype(int)
        return sm.assign(form="mc", seed=seeds, mc_rel_se=se).sort_values(["seed", "L", "sampling"], ignore_index=True)


@dataclasses.dataclass(frozen=True)
class CriticalSeedsParams(CriticalNParams):
    """Parameters of :func:`critical_n_mc_seeds`: those of :class:`CriticalNParams` (but ``forms``) and ``mc_seeds`` in
    [2, 64], the seeds of the Monte-Carlo verdict: :func:`critical_n`'s ``seed`` and the ``mc_seeds - 1`` after it."""

    name: ClassVar[str] = "critical_n_mc_seeds"
    analysis_class: ClassVar[type] = CriticalSeedsAnalysis

    forms: tuple[str, ...] = ("mc",)
    mc_seeds: int = 5

    def __post_init__(self):
        super().__post_init__()
        self.set_checked(forms=("mc",), mc_seeds=check_int("mc_seeds", self.mc_seeds, low=2, high=64))

    @classmethod
    def of(cls, params: CriticalNParams, mc_seeds: int) -> CriticalSeedsParams:
        """The parameters of ``params`` (a :class:`CriticalNParams`) with ``mc_seeds`` seeds in all."""
        keep = {f.name: getattr(params, f.name) for f in dataclasses.fields(CriticalNParams) if f.name != "forms"}
        return cls(**keep, mc_seeds=mc_seeds)


critical_n_mc_seeds = CriticalSeedsParams.public(
    """The critical ``N`` of the Monte-Carlo form for the seeds ``seed + 1, ..., seed + mc_seeds - 1`` of the random
    subsets (the rows, ``N`` grid, KS test and samples of :func:`critical_n`, whose own trace holds ``seed``): the
    spread of the Monte-Carlo critical ``N`` over seeds (Reading the paper, §The critical N).""",
    returns="""One row per ``(seed, L, sampling)``: the columns of :func:`critical_n_summary` (``form`` is ``"mc"``),
    ``seed`` and ``mc_rel_se`` (the largest relative standard error of a Monte-Carlo sample value at ``n_star``).""",
    example="``lengths=[16], mc_seeds=3``",
)
