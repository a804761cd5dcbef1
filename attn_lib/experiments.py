r"""The paper's Algorithms 1-5 on a real model (Reading the paper, §Decisions for the experiments), as tidy tables.

Every experiment needs the attention of one token window; all of them use the **same single forward pass**:

* **Nested prefixes.** Attention is causal, so query row ``r`` of a window of length ``L`` depends only on tokens
  ``0..r``: its logits, weights and value vectors are identical in every prefix of length ``> r`` (tested in
  ``tests/test_experiments.py``). A capture at the largest ``L`` therefore serves every smaller ``L`` of the grid:
  the ``L``-prefix uses rows ``0..L-1`` of it (Reading the paper, §Which vectors (project decision): "for each L, use the first L tokens").
* **Bidirectional models.** In an encoder (``handle.causal`` False) every row sees the whole window, so a shorter
  window is not a prefix of a longer one: an experiment with a grid of lengths gets one forward pass per length
  (Reading the paper, §Causal masking), and every row uses the full visible length.
* **One layer at a time.** The forward pass calls back once per layer; each experiment reduces that layer to
  per-head numbers immediately, so memory stays at one layer (the critical-N scan additionally keeps each layer's
  causal logits in float32 in case its scan has to be continued, see :func:`critical_n`).

Experiments (each returns a :class:`pandas.DataFrame` whose every row carries ``model``, ``text`` and ``device``):

1. :func:`distance_vs_length` -- d~, d_max, E1 (+ Jensen gap), E2 and Monte-Carlo E[d~] against ``L`` at ``N=5``.
2. :func:`distance_vs_n` -- the same against ``N`` at fixed ``L``.
3. :func:`critical_n` -- KS test of per-head means of d~ against E1, E2 and the Monte-Carlo E[d~], for every ``L``
   and ``N`` (trace);
   :func:`critical_n_summary` gives the critical ``N`` per ``L``.
4. :func:`separability` -- ``N_s/N`` and Theorem 2's bounds per head against ``N``.
5. :func:`gradient_sensitivity` -- row-mean ``g(T, eps)`` per head against ``T`` for each ``eps``.

:func:`run_all` runs all five in one forward pass (using :class:`~attn_lib.cache.ResultCache` per experiment) and
:func:`run_reproduce` is the ``reproduce`` command: model + text + all five + figures + report.
Profiles (:data:`PROFILES`): ``paper`` (Reading the paper, §Grids) and ``quick`` (small grids for CPU CI).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import sys
import time
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from . import metrics as M
from ._validation import (
    SEED_MAX,
    check_choice,
    check_int,
    check_int_list,
    check_positive,
    check_probability,
    check_seed,
    check_size,
    check_threads,
    prepare_output_dir,
)

__all__ = [
    "Profile",
    "PROFILES",
    "CRITICAL_FORMS",
    "distance_vs_length",
    "distance_vs_n",
    "critical_n",
    "critical_n_summary",
    "critical_n_diagnosis",
    "DIAGNOSIS_VARIANTS",
    "DIAGNOSIS_FRACTIONS",
    "separability",
    "gradient_sensitivity",
    "gradient_sensitivity_raw",
    "multihead_coverage",
    "run_all",
    "run_reproduce",
    "text_window",
    "load_inputs",
    "describe_inputs",
    "sens_row_indices",
    "EXPERIMENTS",
]

#: The expectation forms of the critical-N scan: E1, E2 and the Monte-Carlo estimate of E[d~].
CRITICAL_FORMS = ("e1", "e2", "mc")
EXPERIMENTS = (
    "distance_vs_length",
    "distance_vs_n",
    "critical_n",
    "separability",
    "gradient_sensitivity",
    # the reproduction report's diagnostics, in the same pass: why the critical N is where it is, and Fig. 4 with the
    # temperature on the raw scores q . k (Reading the paper, §The critical N and §The sensitivity metric)
    "critical_n_diagnosis",
    "gradient_sensitivity_raw",
)
SCHEMA = 1  # bump when the tables change (part of every cache key)


# ----------------------------------------------------------------------------------------------------------------
# profiles
# ----------------------------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Profile:
    """Grids of one reproduction (Reading the paper, §Grids). ``mc_rows``: rows per ``L`` for the Monte-Carlo
    estimate (a fixed stride ``max(1, L // mc_rows)``); ``crit_fraction``: the critical-N scan runs over
    ``N = 1..min(L - 1, floor(crit_fraction L))`` (``1.0``: up to ``L - 1``, never censored by a scan limit);
    ``crit_rows``: rows per ``L`` of the critical-N scan, every ``max(1, L // crit_rows)``-th row ending at the last
    (``0`` = every row); ``scan_stage``: ``N`` range of the first critical-N stage, scanned during the forward pass
    (a later stage, needed only if some ``(L, form)`` has no critical ``N`` by then, rebuilds every layer from stored
    logits; ``paper`` scans the whole range ``1..1023`` in the pass);
    ``sens_rows``: the row set ``R`` of Algorithm 5 (Reading the paper, §The sensitivity metric): every
    ``max(1, L // sens_rows)``-th row, ending at the last row (``0`` = every row); ``crit_mc_samples``: random
    subsets per row ``K`` of the Monte-Carlo expectation in the critical-N scan (form ``"mc"``, every ``N`` at once;
    fewer than ``mc_samples`` because the scan costs ``O(K t^2)`` per row, Reading the paper, §The critical N);
    ``diag_rows``: rows of the critical-N diagnosis at the fixed length (:func:`critical_n_diagnosis`)."""

    name: str
    lengths: tuple[int, ...]
    n_alg1: int
    length_fixed: int
    n_alg2: tuple[int, ...]
    n_alg4: tuple[int, ...]
    temperatures: tuple[float, ...]
    eps_values: tuple[float, ...]
    ks_alpha: float = 0.01
    crit_fraction: float = 0.25
    mc_samples: int = 64
    mc_rows: int = 32
    scan_stage: int = 64
    sens_rows: int = 0
    crit_rows: int = 0
    crit_mc_samples: int = 8
    diag_rows: int = 32

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


PROFILES: dict[str, Profile] = {
    "paper": Profile(
        name="paper",
        lengths=(32, 64, 128, 256, 512, 1024),
        n_alg1=5,
        length_fixed=1024,
        n_alg2=(1, 5, 10, 20, 100),
        n_alg4=(1, 2, 4, 8, 16, 32, 64),
        temperatures=tuple(float(x) for x in np.logspace(-3, 2, 21)),
        eps_values=(1e-3, 1e-1, 10.0),
        ks_alpha=0.01,
        crit_fraction=1.0,
        mc_samples=64,
        mc_rows=32,
        scan_stage=1023,
        sens_rows=128,
        crit_rows=128,
        crit_mc_samples=2,
    ),
    "quick": Profile(
        name="quick",
        lengths=(16, 32, 64, 128),
        n_alg1=5,
        length_fixed=128,
        n_alg2=(1, 5, 10, 20, 40),
        n_alg4=(1, 2, 4, 8, 16, 32),
        temperatures=tuple(float(x) for x in np.logspace(-3, 2, 6)),
        eps_values=(1e-3, 1e-1, 10.0),
        ks_alpha=0.01,
        crit_fraction=1.0,
        mc_samples=16,
        mc_rows=16,
        scan_stage=127,
        crit_mc_samples=16,
    ),
}


def _profile(profile) -> Profile:
    if isinstance(profile, Profile):
        return profile
    check_choice("profile", profile, list(PROFILES))
    return PROFILES[profile]


# ----------------------------------------------------------------------------------------------------------------
# text and passes
# ----------------------------------------------------------------------------------------------------------------
def _text_obj(text):
    """A :class:`attn_lib.corpus.Text` (or anything with ``name``/``text``/``sha256``); a str is wrapped."""
    if isinstance(text, str):
        import hashlib
        from types import SimpleNamespace

        return SimpleNamespace(
            name="custom", text=text, sha256=hashlib.sha256(text.encode()).hexdigest(), source="string"
        )
    for a in ("name", "text", "sha256"):
        if not hasattr(text, a):
            raise ValueError(f"text must be a corpus.Text or a str (missing attribute {a!r})")
    return text


def load_inputs(
    model: str = "gpt2", text: str = "war-and-peace", *, device: str = "auto", dtype=None, quiet: bool = True
):
    """Load a model and a text for an experiment; by default without writing to stderr (the book build forbids it).

    Parameters
    ----------
    model, text, device, dtype:
        As for :func:`attn_lib.models.load_model` and :func:`attn_lib.corpus.load_text`, which validate them.
    quiet:
        ``True`` (default): nothing on stderr. ``False``: transformers' progress bars (e.g. the stand-in's one-off
        conversion) are shown; the notices are still returned, not printed.

    Returns
    -------
    tuple
        ``(handle, text, notes)``: ``notes`` is a list of str, the one-off notices (the stand-in's first conversion,
        the offline stand-in model, the offline default text) that would otherwise be warnings, for the caller to
        show.
    """
    from .corpus import load_text
    from .models import load_model

    if not isinstance(quiet, bool):
        raise ValueError(f"quiet must be True or False (got {quiet!r})")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        text_obj = load_text(text)  # first: a bad text must fail before the model loads
        handle = load_model(model, device=device, dtype=dtype, quiet=quiet)
    notes = list(handle.notes)
    notes += [m for m in (str(w.message) for w in caught) if m not in notes]
    return handle, text_obj, notes


def describe_inputs(handle, text) -> str:
    """Two lines saying which model (and its shape) and which text an experiment runs on."""
    t = _text_obj(text)
    return (
        f"model: {handle.describe()}\n"
        f"       {handle.n_layers} layers x {handle.n_heads} heads, head dimension {handle.head_dim}\n"
        f"text:  {t.name} - {t.source}"
    )


def text_window(handle, text, length: int, start: int = 0) -> torch.Tensor:
    """The first window of ``length`` tokens of ``text`` from token ``start``: ``(1, length)`` ids."""
    length = check_int("length", length, low=2, high=int(handle.max_length))
    start = check_int("start", start, low=0)
    t = _text_obj(text)
    try:
        from .corpus import token_windows
    except ImportError:  # pragma: no cover - corpus layer not installed
        token_windows = None
    if token_windows is not None:
        w = token_windows(handle.tokenizer, t.text, length, n_windows=1, start=start)
        ids = torch.as_tensor(np.asarray(w[0] if isinstance(w, (list, tuple)) else w)).reshape(-1)[:length]
    else:
        enc = handle.tokenizer(t.text)["input_ids"] if callable(handle.tokenizer) else handle.tokenizer.encode(t.text)
        ids = torch.as_tensor(enc[start : start + length])
    if ids.numel() < length:
        raise ValueError(f"text {t.name!r} has fewer than start + length = {start + length} tokens")
    return ids.view(1, -1).long()


def _meta(handle, text) -> dict:
    t = _text_obj(text)
    model = f"{handle.model_id} (offline stand-in for {handle.requested})" if handle.is_standin else handle.model_id
    if not _is_causal(handle):  # every figure and table says that its rows saw the whole window
        model = f"{model} (bidirectional encoder)"
    return {"model": model, "text": t.name, "device": str(handle.device)}


class _Shared:
    """Per-layer memo shared by the analyses of one pass (float64 LayerData, distance rows per N, ...)."""

    def __init__(self, la):
        self.la = la
        self._memo: dict = {}

    def get(self, key, fn):
        if key not in self._memo:
            self._memo[key] = fn()
        return self._memo[key]

    def layer(self) -> M.LayerData:
        la = self.la

        def build():
            with M.large_ops():  # whole-layer softmax and Gram products: multi-threaded torch pays off here
                ld = M.LayerData.from_logits(la.logits[0], la.values[0], mask=_mask(la))
                ld.gram, ld.zdot()
            return ld

        return self.get("ld", build)

    def dist(self, N: int, p="L-1") -> M.DistanceRows:
        return self.get(("dist", N, p), lambda: M.distance_metrics(self.layer(), N=N, p=p))


def _mask(la) -> torch.Tensor:
    m = la.mask
    while m.dim() > 3:
        m = m[0]
    return m


class _Progress:
    """Progress for long runs: tqdm bars and status lines on stderr when enabled, nothing at all otherwise.

    Off by default in the library (the book build treats stderr in a chapter as an error); the CLI turns it on.
    """

    def __init__(self, enabled: Any = False):
        if enabled is None:
            enabled = False
        if not isinstance(enabled, bool):
            raise ValueError(f"progress must be True or False (got {enabled!r})")
        self.enabled = enabled

    def bar(self, **kw):
        from tqdm.auto import tqdm

        return tqdm(file=sys.stderr, disable=not self.enabled, dynamic_ncols=True, **kw)

    def say(self, msg: str) -> None:
        if self.enabled:
            from tqdm.auto import tqdm

            tqdm.write(msg, file=sys.stderr)


def _warm_up_kernels(handle, prog: _Progress) -> None:
    """Compile the numba kernels before the pass when they will run (CPU, engine auto/numba), with a progress bar:
    the first run compiles them (about 30 s), later runs load them from numba's disk cache."""
    from . import _kernels

    if not prog.enabled or handle.device.type != "cpu" or M.DEFAULT_ENGINE == "torch" or not _kernels.available():
        return
    with prog.bar(
        total=len(_kernels.KERNELS), desc="kernels (compiled on first use, then cached)", unit="kernel"
    ) as bar:
        _kernels.warm_up(lambda name: bar.update(1))


def _run_pass(
    handle,
    text,
    analyses: list,
    length: int,
    start: int = 0,
    prog: _Progress | None = None,
    analysis_seconds: list | None = None,
) -> float:
    """One forward pass at ``length``; every analysis sees every layer. Returns the seconds spent; if
    ``analysis_seconds`` (a list, one entry per analysis) is given, each analysis' own time is added to it."""
    from .capture import capture_attention

    prog = prog or _Progress(False)
    ids = text_window(handle, text, length, start)
    t0 = time.perf_counter()
    bar = prog.bar(total=handle.n_layers, desc=f"forward pass at L={length}, analysed layer by layer", unit="layer")

    def cb(la):
        sh = _Shared(la)
        with M.block_parallel():  # single-threaded torch, parallel row blocks (see metrics.block_parallel)
            for i, a in enumerate(analyses):
                t_a = time.perf_counter()
                a.layer(sh)
                if analysis_seconds is not None:
                    analysis_seconds[i] += time.perf_counter() - t_a
        del sh
        bar.update(1)

    try:
        capture_attention(handle, ids, cb, keep_qk=False)
    finally:
        bar.close()
    return time.perf_counter() - t0


def _prefix_means(x: torch.Tensor, valid: torch.Tensor, lengths: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """Per-head mean over rows ``r < L`` (valid only) for each ``L``: ``(H, nL)`` means and counts.

    ``x``/``valid`` ``(H, R, ...)`` over rows ``0..R-1``; trailing dims are kept.
    """
    xs = torch.where(valid, x, torch.zeros((), dtype=x.dtype))
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    bounds = [0] + [int(lengths[i]) for i in order]
    # one sum per segment [L_prev, L) of rows, then a cumulative sum over the few segments (no full-size cumsum)
    s = torch.stack([xs[:, a:b].sum(1) for a, b in itertools.pairwise(bounds)], 1).cumsum(1)
    c = torch.stack([valid[:, a:b].sum(1) for a, b in itertools.pairwise(bounds)], 1).cumsum(1).to(torch.float64)
    back = torch.as_tensor([order.index(i) for i in range(len(lengths))])
    s, c = s.index_select(1, back), c.index_select(1, back)
    return (s / c.clamp(min=1)).cpu().numpy(), c.cpu().numpy()


def sens_row_indices(L: int, sens_rows: int = 0) -> np.ndarray:
    """Rows of Algorithm 5's set ``R`` at window length ``L``: every ``max(1, L // sens_rows)``-th row, counted back
    from the last one (so ``t = L, L - stride, ...``); all rows if ``sens_rows`` is 0 or ``>= L``."""
    st = max(1, L // sens_rows) if sens_rows > 0 else 1
    return np.arange(L - 1, -1, -st)[::-1].copy()


def _mc_rows(lengths: Sequence[int], mc_rows: int) -> dict[int, np.ndarray]:
    """Rows used for the Monte-Carlo estimate at each ``L``: every ``max(1, L // mc_rows)``-th row."""
    out = {}
    for L in lengths:
        st = max(1, L // mc_rows)
        out[L] = np.arange(0, L, st)
    return out


# ----------------------------------------------------------------------------------------------------------------
# analyses (one per experiment): .layer(shared) per layer, .finish() -> DataFrame
# ----------------------------------------------------------------------------------------------------------------
class _DistanceAnalysis:
    """Algorithms 1 and 2: per (L, N, layer, head) means of every distance quantity."""

    def __init__(self, meta, lengths, n_values, *, p, mc_samples, mc_rows, seed, kind):
        self.meta, self.lengths, self.n_values = meta, list(lengths), list(n_values)
        self.p, self.mc_samples, self.seed, self.kind = p, mc_samples, seed, kind
        self.mc_map = _mc_rows(self.lengths, mc_rows) if mc_samples > 0 else {}
        self.rows: list[dict] = []

    def layer(self, sh: _Shared):
        ld = sh.layer()
        Lmax = max(self.lengths)
        for N in self.n_values:
            dm = sh.dist(N, self.p)
            valid = dm.valid[:, :Lmax]
            viol = valid & (dm.d_tilde[:, :Lmax] > dm.d_max[:, :Lmax] * (1 + 1e-9) + 1e-12)
            cols = {
                "d_tilde": dm.d_tilde,
                "d_max": dm.d_max,
                "e1": dm.e1,
                "e1_plus_gap": dm.e1 + dm.e1_gap,
                "e1_gap": dm.e1_gap,
                "e2": dm.e2,
                "s_norm": dm.s_norm,
                "alpha_bar": dm.alpha_bar,
            }
            cols["x_max"] = sh.get("x_max", lambda: _row_max_norm(ld))
            means = {k: _prefix_means(v[:, :Lmax], valid, self.lengths)[0] for k, v in cols.items()}
            if self.kind == "n":  # the same rows at every N: those valid at the largest N of the grid
                common = valid & (ld.t[:, :Lmax] >= max(self.n_values) + 1)
                for k in ("d_tilde", "d_max"):
                    means[f"{k}_common"] = _prefix_means(cols[k][:, :Lmax], common, self.lengths)[0]
                common_counts = _prefix_means(cols["d_tilde"][:, :Lmax], common, self.lengths)[1]
            _, counts = _prefix_means(dm.d_tilde[:, :Lmax], valid, self.lengths)
            nviol, _ = _prefix_means(viol.to(torch.float64), torch.ones_like(viol), self.lengths)
            mc = {}
            if self.mc_samples > 0:
                allrows = np.unique(np.concatenate([self.mc_map[L] for L in self.lengths]))
                mcr = M.expected_distance_mc(
                    ld, N=N, rows=torch.as_tensor(allrows), n_samples=self.mc_samples, seed=self.seed
                )
                pos = {int(r): i for i, r in enumerate(allrows)}
                for li, L in enumerate(self.lengths):
                    sel = torch.as_tensor([pos[int(r)] for r in self.mc_map[L]])
                    mv, mcnt = M.masked_mean(mcr.mean[:, sel], mcr.valid[:, sel])
                    mc[li] = (mv.cpu().numpy(), mcnt.cpu().numpy())
            for li, L in enumerate(self.lengths):
                for h in range(ld.H):
                    row = dict(self.meta, L=L, N=N, layer=sh.la.layer, head=h, n_rows=int(counts[h, li]))
                    for k in means:
                        row[k] = float(means[k][h, li])
                    if self.kind == "n":
                        row["n_rows_common"] = int(common_counts[h, li])
                    row["dmax_violations"] = int(round(nviol[h, li] * L))
                    if mc:
                        row["mc"] = float(mc[li][0][h])
                        row["mc_rows"] = int(mc[li][1][h])
                    self.rows.append(row)

    def finish(self) -> pd.DataFrame:
        df = pd.DataFrame(self.rows)
        return df[df["n_rows"] > 0].reset_index(drop=True) if len(df) else df


def _row_max_norm(ld: M.LayerData) -> torch.Tensor:
    """``(H, L)``: the largest norm of a visible value vector in each row, the scale of the bounds of
    ``prop-random-bounded`` (chapter 2)."""
    norms = ld.gdiag.clamp(min=0).sqrt().unsqueeze(1)  # (H, 1, L)
    return torch.where(ld.mask, norms, torch.zeros((), dtype=norms.dtype)).amax(-1)


class _SeparabilityAnalysis:
    def __init__(self, meta, length, n_values, M_radius):
        self.meta, self.length, self.n_values, self.M = meta, length, list(n_values), M_radius
        self.rows: list[dict] = []

    def layer(self, sh: _Shared):
        ld = sh.layer()
        u = sh.get(("unit", self.M), lambda: M.unit_layer(ld, self.M))
        delta = sh.get(("delta", self.M), lambda: M.running_min_distance(u))
        L = self.length
        for N in self.n_values:
            sp = M.separability_metrics(u, N=N, M=self.M, normalize=False, delta=delta)
            v = sp.valid[:, :L]
            f, cnt = M.masked_mean(sp.fraction[:, :L], v)
            lo, _ = M.masked_mean(sp.lower[:, :L], v)
            up, _ = M.masked_mean(sp.upper[:, :L], v)
            r, _ = M.masked_mean(sp.r[:, :L], v)
            dl, _ = M.masked_mean(sp.delta[:, :L], v)
            for h in range(ld.H):
                if int(cnt[h]) == 0:
                    continue
                self.rows.append(
                    dict(
                        self.meta,
                        L=L,
                        N=N,
                        layer=sh.la.layer,
                        head=h,
                        n_rows=int(cnt[h]),
                        fraction=float(f[h]),
                        lower=float(lo[h]),
                        upper=float(up[h]),
                        r=float(r[h]),
                        delta=float(dl[h]),
                    )
                )

    def finish(self) -> pd.DataFrame:
        return pd.DataFrame(self.rows)


class _SensitivityAnalysis:
    def __init__(self, meta, length, temperatures, eps_values, seed, sens_rows=0):
        self.meta, self.length, self.T, self.E, self.seed = meta, length, list(temperatures), list(eps_values), seed
        self.sens_rows = sens_rows
        self.row_idx = sens_row_indices(length, sens_rows)
        self.rows: list[dict] = []

    def layer(self, sh: _Shared):
        la = sh.la
        L = self.length
        logits = la.logits[0, :, :L, :L]
        sub = None if len(self.row_idx) == L else torch.as_tensor(self.row_idx)
        g, valid = M.sensitivity_rows(
            logits, self.T, self.E, mask=_mask(la)[..., :L, :L], seed=(self.seed + la.layer) % (SEED_MAX + 1), rows=sub
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
                    self.rows.append(
                        dict(
                            self.meta,
                            L=L,
                            T=T,
                            eps=e,
                            layer=la.layer,
                            head=h,
                            n_rows=int(n_rows[h]),
                            g=float(mean_[a, b, h]),
                            g_row_max=float(gmax_[a, b, h]),
                            bound_corrected=float(corr_[a][b]),
                            bound_paper=float(paper_[a]),
                            rows_violating_corrected=int(viol_[a, b, h]),
                            rows_above_paper=int(over_[a, b, h]),
                            row_stride=stride,
                        )
                    )

    def finish(self) -> pd.DataFrame:
        return pd.DataFrame(self.rows)


class _CoverageAnalysis:
    """Multi-head coverage (Reading the paper, §Multi-head coverage): per layer, the mean over valid rows of the
    coverage ``c(H)`` of the head-averaged top-``N`` after ``H`` heads, and the share of (row, order) samples fully
    covered by then, from :func:`attn_lib.metrics.coverage_metrics` (orders seeded with ``seed + layer``)."""

    def __init__(self, meta, length, N, permutations, seed):
        self.meta, self.length, self.N, self.P, self.seed = meta, length, N, permutations, seed
        self.rows: list[dict] = []

    @staticmethod
    def _weights(sh: _Shared) -> M.LayerData:
        """The pass's float64 layer; built without the Gram products of :meth:`_Shared.layer` (coverage does not
        use them) unless another analysis of the pass has built it already."""
        if "ld" in sh._memo:
            return sh._memo["ld"]
        la = sh.la
        with M.large_ops():
            return sh.get("ld_weights", lambda: M.LayerData.from_logits(la.logits[0], la.values[0], mask=_mask(la)))

    def layer(self, sh: _Shared):
        ld = self._weights(sh)
        u = M.unit_layer(ld, 1.0)
        cov = M.coverage_metrics(u, N=self.N, permutations=self.P, seed=self.seed + sh.la.layer, normalize=False)
        valid = cov.valid[: self.length]
        n_rows = int(valid.sum())
        if n_rows == 0:
            return
        curve = cov.coverage[: self.length][valid].mean(0)  # (H,)
        needed = cov.needed[:, : self.length][:, valid]  # (P, rows)
        p_layer = float(cov.fraction[:, : self.length][:, valid].mean())
        for k in range(1, ld.H + 1):
            covered = float(((needed >= 1) & (needed <= k)).to(torch.float64).mean())
            self.rows.append(
                dict(
                    self.meta,
                    L=self.length,
                    N=self.N,
                    layer=sh.la.layer,
                    H=k,
                    n_heads=ld.H,
                    n_rows=n_rows,
                    permutations=self.P,
                    coverage=float(curve[k - 1]),
                    covered=covered,
                    fraction=p_layer,
                )
            )

    def finish(self) -> pd.DataFrame:
        return pd.DataFrame(self.rows)


def _kv_groups(n_heads: int, n_kv_heads: int) -> np.ndarray:
    """Key/value group of each query head: head ``h`` reads key/value head ``h // (n_heads // n_kv_heads)``
    (grouped-query attention as in Llama; ``n_kv_heads == n_heads`` is plain multi-head attention)."""
    n_kv = n_kv_heads if n_kv_heads and n_heads % n_kv_heads == 0 else n_heads
    return np.arange(n_heads) // (n_heads // n_kv)


def _crit_row_sets(lengths: Sequence[int], crit_rows: int) -> dict[int, np.ndarray]:
    """Rows of the critical-N scan at each ``L``: :func:`sens_row_indices` (every ``max(1, L // crit_rows)``-th row,
    ending at the last one; all rows when ``crit_rows`` is 0 or ``>= L``)."""
    return {int(L): sens_row_indices(int(L), crit_rows) for L in lengths}


class _CriticalAnalysis:
    """Algorithm 3: incremental scan and two-sample KS tests for every ``(L, N <= cap(L))``, over all heads and over
    key/value groups (Reading the paper, §The critical N)."""

    def __init__(
        self,
        meta,
        lengths,
        *,
        alpha,
        crit_fraction,
        forms,
        p,
        stage,
        stop_early,
        crit_rows=0,
        groups=None,
        mc_samples=0,
        seed=0,
    ):
        self.meta, self.lengths, self.alpha = meta, sorted(lengths), alpha
        self.mc_samples, self.seed = mc_samples, seed
        self.timing_parts = {"mc_scan_s": 0.0} if "mc" in forms else {}  # the Monte-Carlo scan's own time
        self.caps = {L: max(1, min(L - 1, int(math.floor(L * crit_fraction)))) for L in self.lengths}
        self.n_cap = max(self.caps.values())
        self.forms, self.p, self.stage, self.stop_early = list(forms), p, stage, stop_early
        self.Lmax = max(self.lengths)
        self.row_sets = _crit_row_sets(self.lengths, crit_rows)
        self.rows = torch.as_tensor(np.unique(np.concatenate(list(self.row_sets.values()))))
        self.row_masks = torch.zeros(len(self.lengths), self.Lmax, dtype=torch.bool)
        for i, L in enumerate(self.lengths):
            self.row_masks[i, torch.as_tensor(self.row_sets[L])] = True
        self.groups = groups  # per-layer key/value group of each head, or None (then every head is its own group)
        self.store: list = []  # per layer: (packed float32 causal logits, values, mask)
        self.stage_ranges: list[tuple[int, int]] = []
        first_hi = min(self.n_cap, stage) if stop_early else self.n_cap
        self.stage_ranges.append((1, first_hi))
        self.per_layer: list[dict] = []  # index by layer order: form -> list of (H, nL, n) blocks

    def _scan_layer(self, ld: M.LayerData, lo: int, hi: int) -> dict:
        rows = self.rows[self.rows < ld.L]
        sc = M.topn_scan(ld, n_max=hi, n_min=lo, p=self.p, rows=rows)
        Lm = min(self.Lmax, ld.L)
        # validity depends only on the row and N (not on the head): one 0/1 weight per (L, row, N), and every
        # per-head mean is one batched product (invalid entries of the scan are 0)
        weights = (sc.valid[0, :Lm].unsqueeze(0) & self.row_masks[:, :Lm].unsqueeze(-1)).to(torch.float64)
        count = weights.sum(1)  # (nL, n)
        out = {"count": np.broadcast_to(count.cpu().numpy(), (ld.H, *count.shape)).copy()}
        for f in ["d_tilde", *self.forms]:
            if f == "mc":
                continue
            total = torch.einsum("hrn,lrn->hln", getattr(sc, f)[:, :Lm], weights)
            out[f] = (total / count.clamp(min=1)).cpu().numpy()
        if "mc" in self.forms:
            # Monte-Carlo E[d~] on the same rows and N (same validity t >= N + 1): per-head means over the rows of
            # each L, and the standard error of each mean (the rows' samples are independent)
            t0 = time.perf_counter()
            mc = M.expected_distance_mc_scan(
                ld, n_max=hi, n_min=lo, rows=rows, n_samples=self.mc_samples, seed=self.seed
            )
            w_mc = weights[:, rows]  # (nL, R, n)
            out["mc"] = (torch.einsum("hrn,lrn->hln", mc.mean, w_mc) / count.clamp(min=1)).cpu().numpy()
            var = torch.einsum("hrn,lrn->hln", mc.stderr.square(), w_mc) / count.clamp(min=1).square()
            out["mc_var"] = var.cpu().numpy()  # variance of each per-head mean
            self.timing_parts["mc_scan_s"] += time.perf_counter() - t0
        return out  # each (H, nL, n)

    def layer(self, sh: _Shared):
        ld = sh.layer()
        lo, hi = self.stage_ranges[0]
        self.per_layer.append({"layer": sh.la.layer, "H": ld.H, "blocks": [self._scan_layer(ld, lo, hi)]})
        if self.stop_early and hi < self.n_cap:
            la = sh.la
            Lm = min(self.Lmax, ld.L)
            lg = la.logits[0, :, :Lm, :Lm].float()
            tri = torch.tril_indices(Lm, Lm)
            causal = bool((_mask(la)[..., :Lm, :Lm] == torch.ones(Lm, Lm, dtype=torch.bool).tril()).all())
            packed = lg[:, tri[0], tri[1]].clone() if causal else lg.clone()
            self.store.append(
                (
                    packed,
                    la.values[0, :, :Lm].float().clone(),
                    causal,
                    None if causal else _mask(la)[..., :Lm, :Lm].clone(),
                )
            )

    def _rebuild(self, i) -> M.LayerData:
        packed, vals, causal, mask = self.store[i]
        if causal:
            H = packed.shape[0]
            Lm = vals.shape[1]
            tri = torch.tril_indices(Lm, Lm)
            lg = torch.full((H, Lm, Lm), -math.inf, dtype=torch.float32)
            lg[:, tri[0], tri[1]] = packed
            return M.LayerData.from_logits(lg, vals)
        return M.LayerData.from_logits(packed, vals, mask=mask)

    def _samples(self, key: str, variance: bool = False) -> dict[str, np.ndarray]:
        """Per-head means ``(heads, nL, n)`` of the last stage over all layers, and their key/value-group means;
        with ``variance``, ``key`` holds the variances of the head means and the group entries are the variances
        of the group means."""
        heads = np.concatenate([pl["blocks"][-1][key] for pl in self.per_layer], axis=0)
        out = {"heads": heads}
        if self.groups is not None:
            per_group = []
            for pl in self.per_layer:
                x, g = pl["blocks"][-1][key], self.groups
                if variance:
                    per_group.append(np.stack([x[g == k].sum(0) / (g == k).sum() ** 2 for k in np.unique(g)], 0))
                else:
                    per_group.append(np.stack([x[g == k].mean(0) for k in np.unique(g)], 0))
            out["kv_groups"] = np.concatenate(per_group, axis=0)
        return out

    def _ks(self, lo, hi, found):
        from scipy.stats import ks_2samp

        rows = []
        cat = {f: self._samples(f) for f in ["d_tilde", *self.forms]}
        mc_var = self._samples("mc_var", variance=True) if "mc" in self.forms else None
        cnt = np.concatenate([pl["blocks"][-1]["count"] for pl in self.per_layer], axis=0)
        for li, L in enumerate(self.lengths):
            for k, N in enumerate(range(lo, hi + 1)):
                if N > self.caps[L]:
                    continue
                if not (cnt[:, li, k] > 0).all():  # no row of length > N among this L's rows
                    continue
                for sampling in cat["d_tilde"]:
                    a = cat["d_tilde"][sampling][:, li, k]
                    for f in self.forms:
                        if found.get((L, f, sampling)) is not None and self.stop_early:
                            continue
                        b = cat[f][sampling][:, li, k]
                        res = ks_2samp(a, b)
                        pv = float(res.pvalue)
                        if f == "mc":  # largest standard error of a Monte-Carlo sample value, relative to it
                            se = np.sqrt(mc_var[sampling][:, li, k])
                            rel_se = float(np.max(se / np.maximum(np.abs(b), 1e-300)))
                        else:
                            rel_se = float("nan")
                        rows.append(
                            dict(
                                self.meta,
                                L=L,
                                N=N,
                                form=f,
                                sampling=sampling,
                                statistic=float(res.statistic),
                                p_value=pv,
                                n_samples=len(a),
                                n_rows=int(cnt[0, li, k]),
                                mean_d_tilde=float(a.mean()),
                                mean_form=float(b.mean()),
                                mc_rel_se=rel_se,
                                alpha=self.alpha,
                            )
                        )
                        if pv >= self.alpha and found.get((L, f, sampling)) is None:
                            found[(L, f, sampling)] = N
        return rows

    def finish(self) -> pd.DataFrame:
        found: dict = {}
        rows = []
        lo, hi = self.stage_ranges[0]
        rows += self._ks(lo, hi, found)
        while hi < self.n_cap and self.stop_early:
            samplings = ["heads"] + (["kv_groups"] if self.groups is not None else [])
            if all(
                found.get((L, f, sm)) is not None or self.caps[L] <= hi
                for L in self.lengths
                for f in self.forms
                for sm in samplings
            ):
                break
            lo, hi = hi + 1, min(self.n_cap, 2 * hi)
            self.stage_ranges.append((lo, hi))
            with M.block_parallel():  # as in the pass: no per-operation thread barriers
                for i, pl in enumerate(self.per_layer):
                    ld = self._rebuild(i)
                    pl["blocks"].append(self._scan_layer(ld, lo, hi))
                    del ld
            rows += self._ks(lo, hi, found)
        self.store.clear()
        return pd.DataFrame(rows)


#: Counterfactual layers of the critical-N diagnosis: name -> (softmax temperature on the model's logits, whether
#: the value vector of the first token is set to 0). "model" is the model as it is; "first value 0" removes the
#: attention sink's contribution (GPT-2's sink tokens have small value vectors); the temperatures flatten attention.
DIAGNOSIS_VARIANTS = {"model": (1.0, False), "first value 0": (1.0, True), "T=4": (4.0, False), "T=16": (16.0, False)}
#: N/L grid of the critical-N diagnosis.
DIAGNOSIS_FRACTIONS = (0.01, 0.02, 0.04, 0.06, 0.1, 0.2, 0.4, 0.6, 0.8, 0.9)


class _CrossingAnalysis:
    """The critical-N diagnosis (``prop-e1-crossing``, chapter 6): on the critical-N rows of one window length,
    per (variant, layer, head, N) the row means of d~, E1 and of their leading terms ``(t - N)||s_N||`` and
    ``(t - N) p ||z||``, the median and mean of ``||s_N|| / ||z||``, the first token's mean weight (the sink's
    share), and the number of rows where a bound of the proposition fails (:func:`attn_lib.metrics.crossing_metrics`).
    """

    def __init__(self, meta, length, fractions, rows, variants, groups):
        self.meta, self.L, self.groups = meta, length, groups
        self.n_values = sorted({max(1, min(length - 1, round(f * length))) for f in fractions})
        idx = sens_row_indices(length, rows)
        self.rows = torch.as_tensor(idx[idx >= 2])  # t = r + 1 >= 3 visible tokens in a causal row
        self.variants = dict(variants)
        self.out: list[dict] = []

    def layer(self, sh: _Shared):
        la = sh.la
        L = self.L
        lg = la.logits[0, :, :L, :L][:, self.rows].to(torch.float64)
        mask = _mask(la)[..., :L, :L][..., self.rows, :]
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

            cols = {
                "d_tilde": mean(cr.d_tilde),
                "e1": mean(cr.e1),
                "lead_d_tilde": mean(lead_d),
                "lead_e1": mean(lead_e1),
                "rho_mean": mean(rho),
                "rho_median": med,
                "bound_violations": (bad & valid).sum(1),
            }
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
                    row["bound_violations"] = int(cols["bound_violations"][h, k])
                    row["sink_share"] = float(sink_np[h])
                    row["sink_output_share"] = float(sink_out_np[h])
                    self.out.append(row)

    def finish(self) -> pd.DataFrame:
        return pd.DataFrame(self.out)


class _RawSensitivityAnalysis(_SensitivityAnalysis):
    """Algorithm 5 with the temperature on the raw scores ``q . k`` instead of the model's scaled logits
    ``q . k / sqrt(d)`` (Reading the paper, §The sensitivity metric): softmax((qk + eps v)/T) equals
    softmax((l + (eps/sqrt d) v)/(T/sqrt d)), so the analysis runs at ``T/sqrt(d)`` and ``eps/sqrt(d)`` and reports
    ``g`` per unit of raw score (divided by ``sqrt d``) against the raw ``T`` and ``eps``."""

    def __init__(self, meta, length, temperatures, eps_values, seed, sens_rows, head_dim):
        self.scale = math.sqrt(head_dim)
        self.raw_T, self.raw_E = list(temperatures), list(eps_values)
        super().__init__(
            meta, length, [T / self.scale for T in temperatures], [e / self.scale for e in eps_values], seed, sens_rows
        )

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


# ----------------------------------------------------------------------------------------------------------------
# public experiment functions
# ----------------------------------------------------------------------------------------------------------------
def _key(name: str, handle, text, **params) -> dict:
    from .cache import make_key

    # the engine setting is part of the key: numba's float32 roots in the scan differ from torch's in the 7th digit
    return make_key(name, handle=handle, text=_text_obj(text), schema=SCHEMA, engine=M.DEFAULT_ENGINE, **params)


def _check_lengths(handle, lengths, name="lengths") -> list[int]:
    return check_int_list(name, lengths, low=2, high=int(handle.max_length))


def _check_ns(values, name) -> list[int]:
    return check_int_list(name, values, low=1)


def _make(name: str, handle, text, params: dict):
    """The analysis object, its pass length and its cache key for experiment ``name`` with ``params``."""
    meta = _meta(handle, text)
    if name == "distance_vs_length":
        a = _DistanceAnalysis(
            meta,
            params["lengths"],
            [params["N"]],
            p=params["p"],
            mc_samples=params["mc_samples"],
            mc_rows=params["mc_rows"],
            seed=params["seed"],
            kind="length",
        )
        return a, max(params["lengths"])
    if name == "distance_vs_n":
        a = _DistanceAnalysis(
            meta,
            [params["L"]],
            params["n_values"],
            p=params["p"],
            mc_samples=params["mc_samples"],
            mc_rows=params["mc_rows"],
            seed=params["seed"],
            kind="n",
        )
        return a, params["L"]
    if name == "critical_n":
        n_heads, n_kv = int(handle.n_heads), int(getattr(handle, "n_kv_heads", 0) or handle.n_heads)
        a = _CriticalAnalysis(
            meta,
            params["lengths"],
            alpha=params["alpha"],
            crit_fraction=params["crit_fraction"],
            forms=params["forms"],
            p=params["p"],
            stage=params["stage"],
            stop_early=params["stop_early"],
            crit_rows=params.get("crit_rows", 0),
            groups=_kv_groups(n_heads, n_kv),
            mc_samples=params.get("mc_samples", 0),
            seed=params.get("seed", 0),
        )
        return a, max(params["lengths"])
    if name == "separability":
        return _SeparabilityAnalysis(meta, params["L"], params["n_values"], params["M"]), params["L"]
    if name == "gradient_sensitivity":
        return _SensitivityAnalysis(
            meta, params["L"], params["temperatures"], params["eps_values"], params["seed"], params.get("rows", 0)
        ), params["L"]
    if name == "critical_n_diagnosis":
        n_heads, n_kv = int(handle.n_heads), int(getattr(handle, "n_kv_heads", 0) or handle.n_heads)
        a = _CrossingAnalysis(
            meta, params["L"], params["fractions"], params["rows"], params["variants"], _kv_groups(n_heads, n_kv)
        )
        return a, params["L"]
    if name == "gradient_sensitivity_raw":
        return _RawSensitivityAnalysis(
            meta,
            params["L"],
            params["temperatures"],
            params["eps_values"],
            params["seed"],
            params.get("rows", 0),
            params["head_dim"],
        ), params["L"]
    if name == "multihead_coverage":
        return _CoverageAnalysis(meta, params["L"], params["N"], params["permutations"], params["seed"]), params["L"]
    raise ValueError(f"experiment must be one of {list(EXPERIMENTS)} (got {name!r})")


def _check_cache(cache):
    """``cache`` must be None or a :class:`~attn_lib.cache.ResultCache` (anything with its methods)."""
    if cache is not None and not all(
        callable(getattr(cache, m, None)) for m in ("get_or_compute", "get", "__contains__")
    ):
        raise ValueError(f"cache must be None or an attn_lib.cache.ResultCache (got {cache!r})")
    return cache


def _is_causal(handle) -> bool:
    """Whether the model's attention is causal (nested prefixes share one pass); a bidirectional encoder is not."""
    return bool(getattr(handle, "causal", True))


#: experiments with a grid of window lengths: on a bidirectional model each length needs its own forward pass
_MULTI_LENGTH = ("distance_vs_length", "critical_n")


def _units(name: str, handle, text, params: dict) -> list[tuple[Any, int]]:
    """The ``(analysis, pass length)`` pairs of experiment ``name``.

    Causal model: one analysis over every length (row ``r`` is the same in every prefix longer than ``r``, so the
    pass at the largest length serves them all). Bidirectional model: every row sees the whole window, so a shorter
    window is not a prefix of a longer one; an experiment with a grid of lengths becomes one analysis per length,
    each on its own forward pass of exactly that many tokens."""
    if _is_causal(handle) or name not in _MULTI_LENGTH:
        return [_make(name, handle, text, params)]
    return [_make(name, handle, text, dict(params, lengths=[L])) for L in params["lengths"]]


def _plan(handle, units: list[tuple[Any, int]]) -> dict[int, list[int]]:
    """Pass length -> indices into ``units`` of the analyses that run on it: one pass at the largest length for a
    causal model, one pass per distinct length for a bidirectional one."""
    if _is_causal(handle):
        return {max(L for _, L in units): list(range(len(units)))}
    plan: dict[int, list[int]] = {}
    for i, (_, L) in enumerate(units):
        plan.setdefault(L, []).append(i)
    return dict(sorted(plan.items()))


def _run_units(handle, text, units, start, prog=None, seconds=None) -> float:
    """Run the passes of :func:`_plan`; returns the total seconds (``seconds[i]`` gets analysis ``i``'s own time)."""
    total = 0.0
    for L, idx in _plan(handle, units).items():
        own = [0.0] * len(idx)
        total += _run_pass(handle, text, [units[i][0] for i in idx], L, start, prog, own)
        if seconds is not None:
            for i, t in zip(idx, own):
                seconds[i] += t
    return total


def _timing_parts(units) -> dict:
    """The named parts of an experiment's own time (critical_n: ``mc_scan_s``), summed over its analyses."""
    parts: dict = {}
    for a, _ in units:
        for k, v in getattr(a, "timing_parts", {}).items():
            parts[k] = parts.get(k, 0.0) + v
    return parts


def _finish_units(units) -> pd.DataFrame:
    """One experiment's table from its analyses (several, one per length, on a bidirectional model)."""
    if len(units) == 1:
        return units[0][0].finish()
    return pd.concat([a.finish() for a, _ in units], ignore_index=True)


def _run_one(name, handle, text, params, cache, start):
    cache = _check_cache(cache)
    start = check_int("start", start, low=0)

    def compute():
        units = _units(name, handle, text, params)
        _run_units(handle, text, units, start)
        return _finish_units(units)

    if cache is None:
        return compute()
    return cache.get_or_compute(_key(name, handle, text, start=start, **params), compute)


def _params_distance_vs_length(handle, N, lengths, p, mc_samples, mc_rows, seed):
    lengths = _check_lengths(handle, lengths)
    N = check_int("N", N, low=1, high=min(lengths) - 1)
    check_choice("p", p, ["L-1", "L"])
    mc_rows = check_int("mc_rows", mc_rows, low=1)
    # Monte-Carlo draws: (rows, samples, L) random keys per layer, capped so a typo is a ValueError, not a MemoryError
    mc_samples = check_size("mc_samples", mc_samples, per_item=mc_rows * max(lengths), low=0)
    return dict(
        N=N,
        lengths=lengths,
        p=p,
        mc_rows=mc_rows,
        mc_samples=mc_samples,
        seed=check_seed("seed", seed),
    )


def distance_vs_length(
    handle,
    text,
    *,
    N: int = 5,
    lengths: Sequence[int] = (32, 64, 128, 256, 512, 1024),
    p: str = "L-1",
    mc_samples: int = 64,
    mc_rows: int = 32,
    seed: int = 0,
    start: int = 0,
    cache=None,
) -> pd.DataFrame:
    """Algorithm 1 / Fig. 2a: per (L, layer, head) row-means of d~, d_max, E1, E1 + gap, E2, Monte-Carlo E[d~]
    (``mc``, on every ``max(1, L // mc_rows)``-th row, ``mc_samples`` subsets; 0 disables it) and the number of rows
    with ``d~ > d_max`` (must be 0). Rows with ``t < N + 1`` are skipped (§Causal masking). One forward pass at ``max(lengths)``.
    """
    params = _params_distance_vs_length(handle, N, lengths, p, mc_samples, mc_rows, seed)
    return _run_one("distance_vs_length", handle, text, params, cache, start)


def _params_distance_vs_n(handle, L, n_values, p, mc_samples, mc_rows, seed):
    L = _check_lengths(handle, [L], "L")[0]
    n_values = [n for n in _check_ns(n_values, "n_values")]
    if max(n_values) > L - 1:
        raise ValueError(f"n_values must be integers in [1, L-1] = [1, {L - 1}] (got {max(n_values)})")
    check_choice("p", p, ["L-1", "L"])
    mc_rows = check_int("mc_rows", mc_rows, low=1)
    # Monte-Carlo draws: (rows, samples, L) random keys per layer, capped so a typo is a ValueError, not a MemoryError
    mc_samples = check_size("mc_samples", mc_samples, per_item=mc_rows * L, low=0)
    return dict(
        L=L,
        n_values=n_values,
        p=p,
        mc_rows=mc_rows,
        mc_samples=mc_samples,
        seed=check_seed("seed", seed),
    )


def distance_vs_n(
    handle,
    text,
    *,
    L: int = 1024,
    n_values: Sequence[int] = (1, 5, 10, 20, 100),
    p: str = "L-1",
    mc_samples: int = 64,
    mc_rows: int = 32,
    seed: int = 0,
    start: int = 0,
    cache=None,
) -> pd.DataFrame:
    """Algorithm 2 / Fig. 2b: the quantities of :func:`distance_vs_length` at fixed ``L`` for each ``N``."""
    params = _params_distance_vs_n(handle, L, n_values, p, mc_samples, mc_rows, seed)
    return _run_one("distance_vs_n", handle, text, params, cache, start)


def _params_critical(
    handle, lengths, alpha, crit_fraction, forms, p, stage, stop_early, crit_rows=0, mc_samples=8, seed=0
):
    lengths = _check_lengths(handle, lengths)
    if min(lengths) < 4:
        raise ValueError(f"lengths must be integers >= 4 for the critical-N scan (got {min(lengths)})")
    alpha = check_probability("alpha", alpha, open_low=True, open_high=True)
    crit_fraction = check_probability("crit_fraction", crit_fraction, open_low=True)
    if isinstance(forms, str):
        forms = [forms]
    forms = [check_choice("forms", f, list(CRITICAL_FORMS)) for f in forms]
    if not forms:
        raise ValueError(f"forms must be a non-empty subset of {list(CRITICAL_FORMS)}")
    check_choice("p", p, ["L-1", "L"])
    if not isinstance(stop_early, bool):
        raise ValueError(f"stop_early must be True or False (got {stop_early!r})")
    out = dict(
        lengths=lengths,
        alpha=alpha,
        crit_fraction=crit_fraction,
        forms=forms,
        p=p,
        stage=check_int("stage", stage, low=1),
        stop_early=stop_early,
    )
    crit_rows = check_int("crit_rows", crit_rows, low=0)
    if crit_rows:  # not in the cache key when every row is used
        out["crit_rows"] = crit_rows
    mc_samples = check_size("mc_samples", mc_samples, per_item=max(lengths) * (crit_rows or max(lengths)))
    seed = check_seed("seed", seed)
    if "mc" in forms:  # in the cache key only when the Monte-Carlo form runs
        out.update(mc_samples=mc_samples, seed=seed)
    return out


def critical_n(
    handle,
    text,
    *,
    lengths: Sequence[int] = (32, 64, 128, 256, 512, 1024),
    alpha: float = 0.01,
    crit_fraction: float = 1.0,
    forms: Sequence[str] = ("e1", "e2", "mc"),
    p: str = "L-1",
    stage: int = 1023,
    stop_early: bool = True,
    crit_rows: int = 0,
    mc_samples: int = 8,
    seed: int = 0,
    start: int = 0,
    cache=None,
) -> pd.DataFrame:
    r"""Algorithm 3 / Fig. 2c: the KS trace.

    For every ``L``, every ``N = 1..min(L - 1, floor(crit_fraction L))`` and every form (E1, E2, the Monte-Carlo
    expectation): the two-sample
    Kolmogorov-Smirnov test (``scipy.stats.ks_2samp``) between the per-head row means of d~ and of the form. It runs
    twice: over all heads of all layers (``sampling="heads"``), and over key/value groups (``"kv_groups"``: the mean
    of the query heads that share a key/value head, one sample per group), the valid test under grouped-query
    attention, where heads of a group are not independent (Reading the paper, §The critical N). For a model without
    grouped-query attention the two coincide.

    The per-row values come from :func:`attn_lib.metrics.topn_scan` (d~, E1, E2) and
    :func:`attn_lib.metrics.expected_distance_mc_scan` (``"mc"``: ``mc_samples`` random subsets per row for every
    ``N``, the prefixes of random orders), both incremental in ``N``, on the same rows. The critical ``N`` is the
    *first* ``N`` with ``p >= alpha``; with ``stop_early`` the trace of each ``(L, form, sampling)`` ends there. The
    scan runs in stages (``1..stage`` during the forward pass, then doubling, rebuilding each layer from its stored
    float32 logits) until every ``(L, form, sampling)`` has its critical ``N`` or reached ``L - 1``.

    Parameters
    ----------
    handle, text
        Model handle and text (:func:`load_inputs`).
    lengths : sequence of int >= 4
        Window lengths ``L`` (prefixes of one window).
    alpha : float in (0, 1)
        KS level; the paper's text and caption say 0.01 (Reading the paper, §The KS test).
    crit_fraction : float in (0, 1]
        Scan limit as a fraction of ``L``; ``1.0`` (default) scans up to ``N = L - 1``, so no result is censored by
        a scan limit.
    forms : subset of {"e1", "e2", "mc"}
        The expectation forms tested against d~; ``"mc"`` is the Monte-Carlo estimate of
        :math:`\mathbb E_{I_N}[\tilde d]`, the ground truth of E1 (Reading the paper, §Expectation forms).
    p : {"L-1", "L"}
        E1's inclusion probability.
    stage : int >= 1
        ``N`` range scanned during the forward pass.
    stop_early : bool
        End each trace at its first passing ``N``.
    crit_rows : int >= 0
        Rows per ``L``: every ``max(1, L // crit_rows)``-th row, ending at the last; ``0`` = every row.
    mc_samples : int >= 1
        Random subsets per row ``K`` of the ``"mc"`` form.
    seed : int
        Seed of the Monte-Carlo subsets (``0 <= seed < 2**64``).
    start : int
        Token offset of the window.
    cache : ResultCache, optional

    Returns
    -------
    pandas.DataFrame
        One row per test: ``L, N, form, sampling, statistic, p_value, n_samples, n_rows, mean_d_tilde, mean_form,
        mc_rel_se`` (``"mc"`` only, else NaN: the largest standard error of a Monte-Carlo sample value relative to
        that value), ``alpha`` plus ``model, text, device``. :func:`critical_n_summary` extracts the critical ``N``.
    """
    params = _params_critical(
        handle, lengths, alpha, crit_fraction, forms, p, stage, stop_early, crit_rows, mc_samples, seed
    )
    return _run_one("critical_n", handle, text, params, cache, start)


def critical_n_summary(
    trace: pd.DataFrame, lengths: Sequence[int] | None = None, alpha: float | None = None, crit_fraction: float = 1.0
) -> pd.DataFrame:
    """Critical ``N`` per ``(L, form, sampling)`` of a :func:`critical_n` trace.

    Parameters
    ----------
    trace : pandas.DataFrame
        Output of :func:`critical_n` (a trace without a ``sampling`` column counts as ``"heads"``).
    lengths : sequence of int, optional
        Unused; kept for compatibility.
    alpha : float, optional
        KS level; default: the trace's.
    crit_fraction : float
        The scan limit the trace was made with (``N <= min(L - 1, floor(crit_fraction L))``).

    Returns
    -------
    pandas.DataFrame
        ``L, form, sampling, n_star`` (first ``N`` with ``p >= alpha``), ``censored`` (no such ``N`` up to the scan
        limit; ``n_star`` is then the limit), ``ratio = n_star / L``, ``n_scanned``, ``limit`` (the scan limit).
    """
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
    a = (
        check_probability("trace's alpha", trace["alpha"].iloc[0], open_low=True, open_high=True)
        if alpha is None
        else alpha
    )
    if "sampling" not in trace:
        trace = trace.assign(sampling="heads")
    out = []
    meta = {k: trace[k].iloc[0] for k in ("model", "text", "device") if k in trace}
    for (L, f, sampling), g in trace.groupby(["L", "form", "sampling"], sort=True):
        g = g.sort_values("N")
        hit = g[g["p_value"] >= a]
        cap = max(1, min(int(L) - 1, int(math.floor(L * crit_fraction))))
        if len(hit):
            n_star, cens = int(hit["N"].iloc[0]), False
        else:
            n_star, cens = cap, True
        out.append(
            dict(
                meta,
                L=int(L),
                form=f,
                sampling=sampling,
                n_star=n_star,
                censored=cens,
                ratio=n_star / L,
                n_scanned=int(g["N"].max()),
                limit=cap,
            )
        )
    return pd.DataFrame(out)


def _params_sep(handle, L, n_values, M_radius):
    L = _check_lengths(handle, [L], "L")[0]
    n_values = _check_ns(n_values, "n_values")
    if max(n_values) > L - 1:
        raise ValueError(f"n_values must be integers in [1, L-1] = [1, {L - 1}] (got {max(n_values)})")
    return dict(L=L, n_values=n_values, M=check_positive("M", M_radius))


def separability(
    handle,
    text,
    *,
    L: int = 1024,
    n_values: Sequence[int] = (1, 2, 4, 8, 16, 32, 64),
    M: float = 1.0,
    start: int = 0,
    cache=None,
) -> pd.DataFrame:
    """Algorithm 4 / Fig. 3: per (N, layer, head) row-means of ``N_s/N`` (``fraction``), Theorem 2's ``lower`` and
    ``upper`` bounds (paper's form; upper is heuristic, §Theorem 2), radius ``r = rho_min`` and ``delta``; value vectors
    normalised to radius ``M``; ``delta`` the running minimum pairwise distance (§Which vectors (project decision))."""
    params = _params_sep(handle, L, n_values, M)
    return _run_one("separability", handle, text, params, cache, start)


def _positive_values(values, name) -> list[float]:
    """A number or a non-empty sequence of numbers > 0, as a list of floats (``ValueError`` naming ``name``)."""
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__") or getattr(values, "ndim", None) == 0:
        values = [values]  # one number (a 0-d tensor included); a string is checked (and rejected) as a number below
    out = [check_positive(name, v) for v in values]
    if not out:
        raise ValueError(f"{name} must be a number or a non-empty list of numbers > 0")
    return out


def _params_sens(handle, L, temperatures, eps_values, seed, rows=0):
    L = _check_lengths(handle, [L], "L")[0]
    Ts = _positive_values(temperatures, "temperatures")
    Es = _positive_values(eps_values, "eps_values")
    out = dict(L=L, temperatures=Ts, eps_values=Es, seed=check_seed("seed", seed))
    rows = check_int("rows", rows, low=0)
    if rows:  # not in the cache key when every row is used (keeps older keys valid)
        out["rows"] = rows
    return out


def gradient_sensitivity(
    handle,
    text,
    *,
    L: int = 1024,
    temperatures: Sequence[float] | float = tuple(np.logspace(-3, 2, 21)),
    eps_values: Sequence[float] = (1e-3, 1e-1, 10.0),
    seed: int = 0,
    rows: int = 0,
    start: int = 0,
    cache=None,
) -> pd.DataFrame:
    """Algorithm 5 / Fig. 4: per (T, eps, layer, head) the row-mean ``g`` of the finite-difference sensitivity
    (rows with ``t >= 2``; one seeded unit direction per row, reused for every ``T`` and ``eps``, seed
    ``seed + layer``), its row maximum, the corrected bound ``min(1/(2T), sqrt2/eps)`` with the number of rows
    violating it (must be 0), and the paper's ``min(1/(4T), sqrt2)`` with the number of rows above it. The
    paper's ``g(T, eps)`` is the max over heads of ``g``. ``temperatures`` and ``eps_values`` are sequences of
    numbers ``> 0`` (a single number is one value). ``rows`` > 0 subsamples the row set ``R`` (the book's appendix
    "Reading the paper") to every ``max(1, L // rows)``-th row ending at the last (:func:`sens_row_indices`; column
    ``row_stride``); the directions are then drawn for those rows only."""
    params = _params_sens(handle, L, temperatures, eps_values, seed, rows)
    return _run_one("gradient_sensitivity", handle, text, params, cache, start)


def _params_coverage(handle, L, N, permutations, seed):
    L = _check_lengths(handle, [L], "L")[0]
    N = check_int("N", N, low=1, high=L - 1)
    return dict(
        L=L,
        N=N,
        permutations=check_size("permutations", permutations, per_item=L * int(handle.n_heads)),
        seed=check_int("seed", seed, low=0),
    )


def multihead_coverage(
    handle, text, *, L: int, N: int = 16, permutations: int = 8, seed: int = 0, start: int = 0, cache=None
) -> pd.DataFrame:
    """Multi-head coverage measured on the model (Reading the paper, §Multi-head coverage; one forward pass at
    ``L``).

    For every layer and query row with ``t >= N + 1`` visible tokens, the target is the top-``N`` of the row's
    head-averaged weights; head ``h`` covers the target tokens in its separable set (its own top-``N`` tokens with
    ``D_i < rho_min``, unit value vectors, as Algorithm 4 counts ``N_s``); heads are added in ``permutations``
    random orders per row (seeded with ``seed + layer``). See :func:`attn_lib.metrics.coverage_metrics`.

    Parameters
    ----------
    handle, text
        Model handle and text, as for the other experiments.
    L : int
        Window length, ``2 <= L <= handle.max_length``.
    N : int
        Top-``N`` size, ``1 <= N <= L - 1``.
    permutations : int
        Head orders per row, ``>= 1``.
    seed : int
        Seed of the orders, ``>= 0``.
    start : int
        First token of the window.
    cache : attn_lib.cache.ResultCache, optional
        Result cache (keyed by model, text, parameters and library code).

    Returns
    -------
    pandas.DataFrame
        One row per (layer, ``H``), ``H = 1..n_heads``: ``coverage`` (mean ``c(H)`` over valid rows and orders),
        ``covered`` (share of (row, order) samples with ``c(H) = 1``, i.e. heads needed ``<= H``), ``fraction``
        (the layer's mean ``N_s/N`` over heads and rows), ``n_rows``, ``n_heads``, ``permutations``, ``L``, ``N``,
        ``layer`` and ``model``, ``text``, ``device``.
    """
    params = _params_coverage(handle, L, N, permutations, seed)
    return _run_one("multihead_coverage", handle, text, params, cache, start)


# ----------------------------------------------------------------------------------------------------------------
# all five
# ----------------------------------------------------------------------------------------------------------------
def _params_diagnosis(handle, L, fractions, rows, variants):
    L = _check_lengths(handle, [L], "L")[0]
    if L < 4:
        raise ValueError(f"L must be an integer >= 4 for the critical-N diagnosis (got {L})")
    if isinstance(fractions, (int, float)):
        fractions = [fractions]
    fr = sorted({check_probability("fractions", f, open_low=True, open_high=True) for f in fractions})
    if not fr:
        raise ValueError("fractions must be a non-empty list of numbers in (0, 1)")
    if not isinstance(variants, dict) or not variants:
        raise ValueError("variants must be a non-empty dict {name: (temperature > 0, zero the first value: bool)}")
    out = {}
    for name, spec in variants.items():
        if not isinstance(name, str) or not isinstance(spec, (tuple, list)) or len(spec) != 2:
            raise ValueError(f"variants[{name!r}] must be (temperature > 0, True/False) (got {spec!r})")
        if not isinstance(spec[1], bool):
            raise ValueError(f"variants[{name!r}][1] must be True or False (got {spec[1]!r})")
        out[name] = (check_positive(f"variants[{name!r}] temperature", spec[0]), spec[1])
    return dict(L=L, fractions=fr, rows=check_int("rows", rows, low=0), variants=out)


def critical_n_diagnosis(
    handle,
    text,
    *,
    L: int = 1024,
    fractions: Sequence[float] = DIAGNOSIS_FRACTIONS,
    rows: int = 32,
    variants: dict | None = None,
    start: int = 0,
    cache=None,
) -> pd.DataFrame:
    """Why the critical N is where it is (chapter 6, ``prop-e1-crossing``; Reading the paper, §The critical N).

    On ``rows`` rows of the window of length ``L`` (every ``max(1, L // rows)``-th row, ending at the last; the
    profile's ``diag_rows``, 32 by default: the cost is ``O(H rows L d)`` per ``N`` and variant), for ``N = round(f L)`` for each ``f`` of ``fractions`` and for each counterfactual of ``variants``
    (default :data:`DIAGNOSIS_VARIANTS`: the model, its first token's value vector set to 0, and softmax at
    temperatures 4 and 16 on the model's logits): per (layer, head) the row means of d~, E1, their leading terms
    ``(t - N)||s_N||`` and ``(t - N) p ||z||`` (``p = N/(t-1)``), the median and mean of ``||s_N||/||z||``, the
    first token's mean weight ``sink_share`` and ``bound_violations``, the rows where a bound of the proposition
    fails (none, if the proposition is right).

    Returns
    -------
    pandas.DataFrame
        ``variant, temperature, first_value_zero, L, N, layer, head, kv_group, n_rows, d_tilde, e1, lead_d_tilde,
        lead_e1, rho_mean, rho_median, bound_violations, sink_share, sink_output_share`` (the first token's
        ``alpha_0 ||x_0|| / ||z||``, mean over rows) plus ``model, text, device``.
    """
    params = _params_diagnosis(handle, L, fractions, rows, DIAGNOSIS_VARIANTS if variants is None else variants)
    return _run_one("critical_n_diagnosis", handle, text, params, cache, start)


def _params_sens_raw(handle, L, temperatures, eps_values, seed, rows=0):
    """Algorithm 5's parameters with the head dimension that converts raw scores to the model's logits."""
    return dict(_params_sens(handle, L, temperatures, eps_values, seed, rows), head_dim=int(handle.head_dim))


def gradient_sensitivity_raw(
    handle,
    text,
    *,
    L: int = 1024,
    temperatures: Sequence[float] | float = tuple(np.logspace(-3, 2, 21)),
    eps_values: Sequence[float] = (1e-3, 1e-1, 10.0),
    seed: int = 0,
    rows: int = 0,
    start: int = 0,
    cache=None,
) -> pd.DataFrame:
    """Algorithm 5 with the temperature and the perturbation on the raw scores ``q . k`` (the other reading of the
    base of Fig. 4's T axis; Reading the paper, §The sensitivity metric): the table of
    :func:`gradient_sensitivity` with ``T`` and ``eps`` in raw units, ``g`` per unit of raw score, and the bounds
    in those units; ``temperature_base`` and ``head_dim`` say so. The model's own scale is taken as
    ``1/sqrt(head_dim)`` (GPT-2, Llama and BERT use it)."""
    params = _params_sens_raw(handle, L, temperatures, eps_values, seed, rows)
    return _run_one("gradient_sensitivity_raw", handle, text, params, cache, start)


def _check_text_holds(handle, text, length: int, start: int, prof: Profile) -> None:
    """``ValueError`` up front when ``text`` has fewer than ``start + length`` tokens (the profile's longest window),
    said in the profile's terms rather than as a window ``length`` the user never gave."""
    from .corpus import tokenize

    t = _text_obj(text)
    have = len(tokenize(handle.tokenizer, t.text, max_tokens=start + length))
    if have < start + length:
        short = f" from token start={start}" if start else ""
        raise ValueError(
            f"text {t.name!r} has {have} tokens; profile {prof.name!r} needs {start + length}{short} (its longest "
            f"window, L = {length}): use a longer text, or a profile with shorter windows (e.g. 'quick', L up to "
            f"{max(PROFILES['quick'].lengths)})"
        )


def _check_formats(formats) -> tuple[str, ...]:
    """Figure formats, checked before any work: a single name is a tuple of one (not its letters)."""
    import matplotlib.figure

    supported = sorted(matplotlib.figure.Figure().canvas.get_supported_filetypes())
    if isinstance(formats, str):
        formats = (formats,)
    try:
        out = tuple(dict.fromkeys(formats))
    except TypeError:
        raise ValueError(f"formats must be a list of figure formats from {supported} (got {formats!r})") from None
    if not out:
        raise ValueError(f"formats must name at least one figure format from {supported}")
    for f in out:
        check_choice("formats", f, supported)
    return out


def _check_experiments(experiments) -> list[str]:
    """The experiments to run, each once, in the order given (a name that appears twice would be analysed twice in
    the pass, and the doubled table stored under the normal key); a single name is a list of one."""
    if experiments is None:
        return list(EXPERIMENTS)
    if isinstance(experiments, str):
        experiments = [experiments]
    try:
        names = [check_choice("experiments", e, EXPERIMENTS) for e in experiments]
    except TypeError:
        raise ValueError(
            f"experiments must be None or a list of names from {list(EXPERIMENTS)} (got {experiments!r})"
        ) from None
    if not names:
        raise ValueError(f"experiments must name at least one of {list(EXPERIMENTS)} (got an empty list)")
    return list(dict.fromkeys(names))


def _profile_params(handle, prof: Profile, seed: int = 0) -> dict[str, dict]:
    cap = int(handle.max_length)
    lengths = [L for L in prof.lengths if L <= cap]
    Lf = min(prof.length_fixed, cap)
    return {
        "distance_vs_length": _params_distance_vs_length(
            handle, prof.n_alg1, lengths, "L-1", prof.mc_samples, prof.mc_rows, seed
        ),
        "distance_vs_n": _params_distance_vs_n(
            handle, Lf, [n for n in prof.n_alg2 if n < Lf], "L-1", prof.mc_samples, prof.mc_rows, seed
        ),
        "critical_n": _params_critical(
            handle,
            lengths,
            prof.ks_alpha,
            prof.crit_fraction,
            list(CRITICAL_FORMS),
            "L-1",
            prof.scan_stage,
            True,
            prof.crit_rows,
            prof.crit_mc_samples,
            seed,
        ),
        "separability": _params_sep(handle, Lf, [n for n in prof.n_alg4 if n < Lf], 1.0),
        "gradient_sensitivity": _params_sens(handle, Lf, prof.temperatures, prof.eps_values, seed, prof.sens_rows),
        "critical_n_diagnosis": _params_diagnosis(handle, Lf, DIAGNOSIS_FRACTIONS, prof.diag_rows, DIAGNOSIS_VARIANTS),
        "gradient_sensitivity_raw": _params_sens_raw(
            handle, Lf, prof.temperatures, prof.eps_values, seed, prof.sens_rows
        ),
    }


def run_all(
    handle,
    text,
    profile="quick",
    cache=None,
    *,
    start: int = 0,
    seed: int = 0,
    experiments: Iterable[str] | None = None,
    timings: dict | None = None,
    threads: int | None = None,
    progress: bool = False,
) -> dict[str, pd.DataFrame]:
    """Run Algorithms 1-5 with the grids of ``profile`` in ONE forward pass (nested prefixes, see module doc).

    Experiments found in ``cache`` are not recomputed; the pass runs only the missing ones. Returns
    ``{experiment name: DataFrame}`` (plus ``"critical_n_summary"``). ``timings`` (a dict), if given, receives the
    seconds spent in the pass and in each analysis' finishing step. ``threads``: CPU threads for the run (the
    forward pass uses them as torch intra-op threads, the analyses as row-block workers, see
    :func:`attn_lib.metrics.block_parallel`); default: torch's current setting. Restored afterwards.
    ``progress=True`` shows on stderr which results come from the cache and tqdm bars for the kernel compilation,
    the forward pass (layer by layer) and each experiment's finishing step; ``False`` (default) writes nothing.
    """
    prog = _Progress(progress)
    cache = _check_cache(cache)
    if threads is not None:
        threads = check_threads("threads", threads)
        prev = torch.get_num_threads()
        torch.set_num_threads(threads)
        try:
            return run_all(
                handle,
                text,
                profile,
                cache,
                start=start,
                seed=seed,
                experiments=experiments,
                timings=timings,
                progress=prog.enabled,
            )
        finally:
            torch.set_num_threads(prev)
    prof = _profile(profile)
    start = check_int("start", start, low=0)
    names = _check_experiments(experiments)
    params = _profile_params(handle, prof, seed)
    results: dict[str, pd.DataFrame] = {}
    todo = []
    for n in names:
        key = _key(n, handle, text, start=start, **params[n])
        if cache is not None and key in cache:
            results[n] = cache.get(key)
            prog.say(
                f"{n}: from the result cache ({cache.path_for(key)})"
                if hasattr(cache, "path_for")
                else f"{n}: from the result cache"
            )
        else:
            todo.append(n)
    if not todo:
        prog.say("every experiment came from the result cache: no forward pass (--no-cache recomputes)")
    if todo:
        made = {n: _units(n, handle, text, params[n]) for n in todo}
        units = [u for n in todo for u in made[n]]
        owner = [n for n in todo for _ in made[n]]
        lengths = list(_plan(handle, units))
        _check_text_holds(handle, text, max(lengths), start, prof)  # before any work, in the user's terms
        _warm_up_kernels(handle, prog)
        per_unit = [0.0] * len(units)
        t_pass = _run_units(handle, text, units, start, prog, per_unit)
        per_analysis = [sum(t for t, o in zip(per_unit, owner) if o == n) for n in todo]
        shared = max(0.0, t_pass - sum(per_analysis))  # forward passes, capture and the layer set-up they share
        if timings is not None:
            timings["pass"] = t_pass
            timings["shared"] = shared
        with prog.bar(total=len(made), desc="finishing the experiments", unit="experiment") as bar:
            for n in todo:
                bar.set_postfix_str(n)
                t0 = time.perf_counter()
                df = _finish_units(made[n])
                t_finish = time.perf_counter() - t0
                if timings is not None:
                    timings[f"finish_{n}"] = t_finish
                # how long this experiment took, kept with its table (and so in the result cache)
                df.attrs["timing"] = {
                    "analysis_s": per_analysis[todo.index(n)] + t_finish,
                    "shared_pass_s": shared,
                    # one pass (causal: nested prefixes) or one per window length (bidirectional)
                    "pass_length": lengths[0] if len(lengths) == 1 else lengths,
                    "experiments_in_pass": list(made),
                    "device": str(handle.device),
                    "threads": torch.get_num_threads(),
                    "computed_at": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
                    **_timing_parts(made[n]),  # parts of analysis_s (critical_n: mc_scan_s)
                }
                if cache is not None:
                    key = _key(n, handle, text, start=start, **params[n])
                    df = cache.get_or_compute(key, lambda df=df: df)
                results[n] = df
                bar.update(1)
    if "critical_n" in results:
        cp = params["critical_n"]
        results["critical_n_summary"] = critical_n_summary(
            results["critical_n"], cp["lengths"], cp["alpha"], cp["crit_fraction"]
        )
    return {k: results[k] for k in [*names, "critical_n_summary"] if k in results}


def _check_compare_names(names) -> None:
    """Before any work: each model to compare must be a model name that can be had now (the local cache, the Hub
    when it is reachable, the packaged encoder, the stand-in), not only after the main model's experiments."""
    from .models import ModelUnavailableError, _check_name, resolve_name

    for name in names:
        try:
            _check_name(name)
        except ValueError as exc:
            raise ValueError(f"compare: {exc}") from None
        if resolve_name(name)["kind"] == "unavailable":
            raise ModelUnavailableError(
                f"compare: model {name!r} is not in the local Hugging Face cache and the Hub is unreachable, so it "
                "cannot be loaded (checked before running anything)"
            )


def run_reproduce(
    model: str = "gpt2",
    device: str = "auto",
    profile: str = "paper",
    out: str | Path = "results",
    text: str = "war-and-peace",
    use_cache: bool = True,
    *,
    handle=None,
    text_obj=None,
    formats: Sequence[str] = ("png", "svg"),
    progress: bool = False,
    threads: int | None = None,
    compare: Sequence[str] = (),
) -> dict:
    """The ``reproduce`` command: load ``model`` (offline stand-in if needed) and ``text``, run :func:`run_all`
    with ``profile``, write the five figures (PNG + SVG), ``results.json`` and ``report.md`` into ``out``.

    Parameters
    ----------
    model, device, text:
        As for :func:`load_inputs`.
    profile:
        ``"paper"`` (default, as the CLI: the paper's grids, L up to 1024; 1.5-2 min on an idle 2-core CPU, plus the
        one-off kernel compilation and stand-in conversion on a first run) or ``"quick"`` (small grids, L up to 128),
        or a :class:`Profile`.
    out:
        Output folder; created (and checked to be writable) *before* any work, so a bad path fails at once.
    use_cache:
        Read and write the result cache (:func:`attn_lib.cache.results_dir`, under ``ATTN_LIB_CACHE_DIR``).
    handle, text_obj:
        An already loaded model handle / text (skip loading).
    formats:
        Figure formats.
    progress:
        ``True``: status lines and tqdm progress bars on stderr (loading, kernel compilation, the forward pass layer
        by layer, each experiment, the figures; which results come from the cache). ``False`` (default): nothing
        on stderr except the one-off notices below.
    threads:
        CPU threads for the experiments (see :func:`run_all`).
    compare:
        Further models (names as for ``model``, e.g. ``"sentence-transformers/all-MiniLM-L6-v2"`` next to the
        decoder) run with the same profile and text: ``report.md`` then gets a side-by-side table with one verdict
        column per model (:func:`attn_lib.report.side_by_side`), figures 2a-4 a second panel (the first of them),
        and ``results.json`` their tables under ``"compare"``. The grids of each model are cut at its context
        (512 for the encoder).

    Returns
    -------
    ReproduceResult
        A dict with the output paths, timings, the verdict table and ``notes``: the one-off notices of the load
        (offline stand-in, offline default text, the stand-in's first conversion), which are also raised as
        ``UserWarning`` (the CLI prints them as ``NOTE:`` lines).
    """
    from . import report as R

    prof = _profile(profile)
    if not isinstance(use_cache, bool):
        raise ValueError(f"use_cache must be True or False (got {use_cache!r})")
    formats = _check_formats(formats)
    if isinstance(compare, str):
        compare = [compare]
    compare = list(compare or ())
    if not all(isinstance(c, str) and c.strip() for c in compare):
        raise ValueError(f"compare must be a list of model names (got {compare!r})")
    if threads is not None:
        threads = check_threads("threads", threads)
    _check_compare_names(compare)
    prog = _Progress(progress)
    out = prepare_output_dir("out", out)  # before any work: a bad path must not cost the whole run
    t_all = time.perf_counter()
    timings: dict[str, float] = {}
    notes: list[str] = []
    if handle is None:
        prog.say(f"loading model {model!r} and text {text!r} ...")
        t0 = time.perf_counter()
        handle, loaded_text, notes = load_inputs(model, text, device=device, quiet=not prog.enabled)
        timings["load_model"] = time.perf_counter() - t0
        text_obj = loaded_text if text_obj is None else text_obj
    elif text_obj is None:
        from .corpus import load_text

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            text_obj = load_text(text)
        notes = [str(w.message) for w in caught]
    for note in notes:  # the CLI shows these as NOTE lines; in Python they are ordinary warnings
        warnings.warn(note, UserWarning, stacklevel=2)
    prog.say(f"model: {handle.describe()}; text: {text_obj.name}; profile: {prof.name}")
    from .cache import ResultCache

    cache = ResultCache(enabled=use_cache)
    # the models to compare are loaded first: one that cannot be had must fail before the main run, not after it
    loaded: list = []
    for name in compare:
        prog.say(f"loading model {name!r} to compare ...")
        t0 = time.perf_counter()
        from .models import load_model

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            h2 = load_model(name, device=device, quiet=not prog.enabled)
        notes2 = list(h2.notes) + [str(w.message) for w in caught]
        for note in notes2:
            if note not in notes:
                notes.append(note)
                warnings.warn(note, UserWarning, stacklevel=2)
        loaded.append((h2, time.perf_counter() - t0))
    t0 = time.perf_counter()
    results = run_all(handle, text_obj, prof, cache, timings=timings, threads=threads, progress=prog.enabled)
    timings["experiments"] = time.perf_counter() - t0
    prog.say(f"experiments done in {timings['experiments']:.1f} s")
    others: dict[str, dict] = {}
    for h2, t_load in loaded:
        t0 = time.perf_counter() - t_load
        prog.say(f"model: {h2.describe()}; text: {text_obj.name}; profile: {prof.name}")
        res2 = run_all(h2, text_obj, prof, cache, threads=threads, progress=prog.enabled)
        from .report import model_column

        others[model_column(h2)] = {"handle": h2, "results": res2}
        timings[f"experiments {h2.model_id}"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    with prog.bar(total=len(R.FIGURES), desc="figures", unit="figure") as bar:
        info = R.write_report(
            results,
            out,
            handle=handle,
            text=text_obj,
            profile=prof,
            timings=timings,
            formats=formats,
            on_figure=lambda stem: bar.update(1),
            compare=others or None,
        )
    timings["report"] = time.perf_counter() - t0
    timings["total"] = time.perf_counter() - t_all
    info["timings"] = timings
    info["notes"] = notes
    # refresh the timings in the JSON file
    try:
        p = Path(info["json"])
        data = json.loads(p.read_text())
        data["timings_s"] = timings
        p.write_text(json.dumps(data, indent=1, default=str))
    except (OSError, KeyError, ValueError):
        pass
    prog.say(f"wrote {info['report']} ({timings['total']:.1f} s in all)")
    return ReproduceResult(info)


class ReproduceResult(dict):
    """What :func:`run_reproduce` returns (a dict: ``out``, ``json``, ``report``, ``figures``, ``verdicts``,
    ``timings``); printing it gives a short summary with the verdict table."""

    def __str__(self) -> str:
        lines = [
            f"report: {self.get('report')}",
            f"results: {self.get('json')}",
            f"figures: {', '.join(self.get('figures', {}))}",
        ]
        vt = self.get("verdicts")
        if vt is not None and len(vt):
            lines += [
                f"  [{r.verdict}] {r.id}: {r.claim}" + (f" ({r.reading})" if r.reading else "") + f": {r.measured}"
                for r in vt.itertuples()
            ]
        sbs = self.get("side_by_side")
        if sbs is not None and len(sbs):
            models = [
                c for c in sbs.columns if c not in ("id", "claim", "reading", "evidence", "agree", "cause", "section")
            ]
            lines.append("side by side (verdict per model): " + ", ".join(models))
            lines += [f"  [{' | '.join(str(r[m]) for m in models)}] {r['id']}" for _, r in sbs.iterrows()]
        t = self.get("timings") or {}
        if "total" in t:
            lines.append(f"total time: {t['total']:.1f} s")
        return "\n".join(lines)


from .beyond import compare_normalizers, live_swap  # noqa: E402,F401  (chapter "Beyond softmax"; re-exported)
