r"""Beyond softmax: every normaliser of :mod:`attn_lib.normalizers` measured on the paper's limits, on the same model
logits, and swapped into the live model (the book's chapter "Beyond softmax").

Two experiments, each one table cached with :class:`~attn_lib.cache.ResultCache` and labelled with model, text and
device like the other experiments:

* :func:`compare_normalizers` -- ONE forward pass with the model's own softmax (the captured logits are the model's;
  nothing is swapped). Every layer's logits of a sample of query rows are normalised by each normaliser of
  :data:`NORMALIZERS`, and the weights are measured on the paper's limits:

  - vanishing attention (Lemma 1): ``max_j alpha_tj`` and ``t max_j alpha_tj`` against the row length ``t``;
  - the distance ``d~`` at ``N`` and its expectation ``E1`` under a random top-``N`` (Theorem 1), the critical ``N``
    (the first ``N`` of a grid at which a two-sample KS test over heads no longer separates ``d~`` from ``E1``);
  - the separability ``N_s/N`` (Definition of ``N_s``, Theorem 2) on unit value vectors;
  - the sensitivity ``g(T, eps)`` (Algorithm 5) by finite differences, and the spectral norm of the analytic Jacobian
    where one exists (softmax and top-k: :func:`softmax_type_spectral_norm`).

  **Non-softmax weights.** Every quantity is the appendix's definition with ``alpha`` replaced by the normaliser's
  weights: ``I_N`` is the ``N`` largest weights (ties to the lower index), ``a_i = alpha_i x_i``,
  ``s = sum_{I_N} a_i``, ``d~ = sum_{i visible, not in I_N} ||a_i - s||``, and ``E1`` is the same formula in the
  weights. The derivations of Theorem 1 do not use ``sum alpha = 1``, so ``d~ <= d_max`` and ``E1`` keep their meaning
  for weights that do not sum to one (sigmoid, softmax1, softpick, SA-softmax); Lemma 1 and Corollary 3 are statements
  about the normalised family of Eq. (3) and do not apply to them.

* :func:`live_swap` -- the normaliser replaces softmax in every head of every layer at inference (no retraining), one
  forward pass per setting on **held-out** text (tokens from :data:`HELD_OUT_START` on, which no other experiment of
  the book reads); the next-token loss and perplexity at every ``L`` of a grid up to the window length (nested
  prefixes of one window: position ``r`` of a causal model depends only on tokens ``0..r``), plus, for the book's
  sliders, the attention row of one chosen head and its ``d~``.

Rows. A causal row ``t`` (``t`` visible tokens) is identical in every prefix longer than ``t``, so the sample of rows of
length ``L`` is taken from the one pass at the largest length: :func:`row_sample` picks ``rows_per_length`` rows with
``t`` in ``(L/2, L]`` (evenly spaced, ending at ``t = L``). Each row uses its own ``t`` (the convention of the other
experiments, Reading the paper, §Causal masking).
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Sequence

import numpy as np
import pandas as pd
import torch

from . import jacobian as _jac
from . import normalizers as _nz
from ._validation import check_choice, check_int, check_int_list, check_positive, check_probability, check_seed

__all__ = [
    "NORMALIZERS",
    "HELD_OUT_START",
    "BeyondProfile",
    "BEYOND_PROFILES",
    "row_sample",
    "row_metrics",
    "softmax_type_spectral_norm",
    "critical_n_from_heads",
    "compare_normalizers",
    "limits_summary",
    "live_swap",
    "swap_setting",
    "live_renderer",
    "SwapResult",
    "run_compare",
]

#: First token of the held-out text of :func:`live_swap` (the other experiments read the first windows of the text).
HELD_OUT_START = 32768

#: The compared normalisers: label -> (name in :mod:`attn_lib.normalizers`, bound parameters). The top-k values are
#: set per profile (``BeyondProfile.k_values``); see :func:`normalizer_settings`.
NORMALIZERS: dict[str, tuple[str, dict]] = _nz.Settings(_nz.COMPARED)  # type: ignore[assignment]  # live view

#: Normalisers whose Jacobian is ``(diag alpha - alpha alpha^T) / T`` (analytic; the top-k form holds off ties).
ANALYTIC_JACOBIAN = _nz.SOFTMAX_TYPE_JACOBIAN


@dataclasses.dataclass(frozen=True)
class BeyondProfile:
    """Grids of the chapter "Beyond softmax".

    Attributes
    ----------
    lengths : tuple of int
        Row lengths ``L`` of the limits comparison (rows with ``t`` in ``(L/2, L]``).
    rows_per_length : int
        Rows sampled per ``L``.
    n_distance : int
        ``N`` of the distance ``d~`` against ``L`` (the paper's ``N = 5``).
    crit_grid : tuple of int
        ``N`` values scanned for the critical ``N`` (those ``< L`` at each ``L``). Not ``N = L - 1``: there ``d~`` and
        ``E1`` nearly coincide by construction (``p = 1``, one token left out), so a KS pass would say little.
    sep_n : tuple of int
        ``N`` values of ``N_s/N`` (at the largest ``L``).
    temperatures, eps_values : tuple of float
        Grid of ``g(T, eps)``.
    k_values : tuple of int
        The ``k`` of top-k in the comparison.
    swap_length : int
        Window of :func:`live_swap`.
    swap_lengths : tuple of int
        ``L`` at which the swap's loss is reported (prefixes of the window).
    k_grid, t_grid : tuple
        The top-k and temperature sweeps of :func:`live_swap` (the sliders' positions).
    ks_alpha : float
        Level of the KS test.
    """

    name: str
    lengths: tuple[int, ...]
    rows_per_length: int
    n_distance: int
    crit_grid: tuple[int, ...]
    sep_n: tuple[int, ...]
    temperatures: tuple[float, ...]
    eps_values: tuple[float, ...]
    k_values: tuple[int, ...]
    swap_length: int
    swap_lengths: tuple[int, ...]
    k_grid: tuple[int, ...]
    t_grid: tuple[float, ...]
    ks_alpha: float = 0.01

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


#: Largest (H, R, C, L) block of :func:`row_metrics` (entries; 4M float64 = 32 MB per tensor).
_BLOCK_ELEMS = 1 << 22

_CRIT = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768)

BEYOND_PROFILES: dict[str, BeyondProfile] = {
    "paper": BeyondProfile(
        name="paper",
        lengths=(32, 64, 128, 256, 512, 1024),
        rows_per_length=8,
        n_distance=5,
        crit_grid=_CRIT,
        sep_n=(1, 2, 4, 8, 16, 32, 64),
        temperatures=(0.01, 0.1, 1.0, 10.0),
        eps_values=(1e-3, 1e-1, 10.0),
        k_values=(4, 16, 64),
        swap_length=1024,
        swap_lengths=(32, 64, 128, 256, 512, 1024),
        k_grid=(1, 4, 16, 64, 256, 1024),
        t_grid=(0.25, 0.5, 1.0, 2.0, 4.0),
    ),
    "quick": BeyondProfile(
        name="quick",
        lengths=(16, 32, 64, 128),
        rows_per_length=4,
        n_distance=5,
        crit_grid=tuple(n for n in _CRIT if n < 128),
        sep_n=(1, 2, 4, 8, 16, 32),
        temperatures=(0.01, 0.1, 1.0, 10.0),
        eps_values=(1e-3, 1e-1, 10.0),
        k_values=(4, 16),
        swap_length=128,
        swap_lengths=(16, 32, 64, 128),
        k_grid=(1, 2, 4, 8, 16, 32, 64, 128),
        t_grid=(0.25, 0.5, 1.0, 2.0, 4.0),
    ),
}


def _beyond_profile(profile) -> BeyondProfile:
    if isinstance(profile, BeyondProfile):
        return profile
    check_choice("profile", profile, list(BEYOND_PROFILES))
    return BEYOND_PROFILES[profile]


def _k_list(k_values) -> list[int]:
    """The ``k`` of top-k in the order given, without repeats (an empty list means no top-k)."""
    if isinstance(k_values, (str, bytes)) or not hasattr(k_values, "__iter__") or getattr(k_values, "ndim", None) == 0:
        k_values = [k_values]
    return list(dict.fromkeys(check_int("k_values", k, low=1) for k in k_values))


def normalizer_settings(k_values: Sequence[int] = (4, 16, 64)) -> dict[str, tuple[str, dict]]:
    """Label -> (name, params) of every compared normaliser, with top-k at each ``k`` of ``k_values``.

    Parameters
    ----------
    k_values : sequence of int
        The ``k`` of top-k (each ``>= 1``).

    Returns
    -------
    dict
        ``{"softmax": ("softmax", {}), "top-4": ("topk", {"k": 4}), ..., "softpick": ("softpick", {})}``.
    """
    out = {"softmax": NORMALIZERS["softmax"]}
    for k in _k_list(k_values):
        out[f"top-{k}"] = ("topk", {"k": k})
    out.update({lab: v for lab, v in NORMALIZERS.items() if lab != "softmax"})
    return out


# ----------------------------------------------------------------------------------------------------------------
# per-row metrics (batched, float64)
# ----------------------------------------------------------------------------------------------------------------
def row_sample(lengths: Sequence[int], rows_per_length: int) -> dict[int, np.ndarray]:
    """Rows (0-based query indices, row ``r`` sees ``t = r + 1`` tokens) sampled for each ``L``.

    Parameters
    ----------
    lengths : sequence of int
        Each ``>= 2``.
    rows_per_length : int
        ``>= 1``; at most ``ceil(L/2)`` rows are taken for a given ``L``.

    Returns
    -------
    dict
        ``L -> (R_L,)`` int array: rows with ``t`` evenly spaced in ``(L/2, L]``, the last one ``t = L``.
    """
    n = check_int("rows_per_length", rows_per_length, low=1)
    out = {}
    for L in check_int_list("lengths", lengths, low=2):
        lo = L // 2  # t > L/2  <=>  r >= L // 2
        r = np.unique(np.round(np.linspace(L - 1, lo, num=min(n, L - lo))).astype(np.int64))
        out[L] = np.sort(r)
    return out


def _top_rank(w: torch.Tensor, vis: torch.Tensor) -> torch.Tensor:
    """Rank of each entry in its row by weight, descending, ties to the lower index; invisible entries last."""
    key = torch.where(vis, w, torch.full((), -1.0, dtype=w.dtype))
    order = torch.sort(key, dim=-1, descending=True, stable=True).indices
    rank = torch.empty_like(order)
    rank.scatter_(-1, order, torch.arange(w.shape[-1]).expand_as(order))
    return rank


def _bool_mask(mask) -> torch.Tensor:
    """``mask`` as a bool tensor; a numeric mask must hold only 0 and 1 (0.5 is not 'visible')."""
    m = torch.as_tensor(mask)
    if m.dtype == torch.bool:
        return m
    if m.is_complex() or not bool(((m == 0) | (m == 1)).all()):
        raise ValueError("mask must be boolean (True = visible) or hold only 0 and 1")
    return m.to(torch.bool)


def _mask_fits(mask, shape) -> bool:
    try:
        torch.broadcast_shapes(tuple(torch.as_tensor(mask).shape), tuple(shape))
    except RuntimeError:
        return False
    return torch.as_tensor(mask).dim() in (2, 3)


def row_metrics(weights, values, mask, n_values: Sequence[int], *, unit: bool = False) -> dict[str, torch.Tensor]:
    r"""``d~``, ``E1`` and ``N_s/N`` of a batch of rows for several ``N``, for any non-negative weights.

    With ``a_i = alpha_i x_i``, ``I_N`` the ``N`` largest weights (ties to the lower index), ``s = sum_{I_N} a_i``,
    ``z = sum_i a_i`` and ``t`` visible tokens:

    .. math:: \tilde d = \sum_{i \notin I_N} \|a_i - s\|,\quad
              E_1 = \frac{t-N}{t}\sum_i \|(1+p)a_i - p z\|,\ p = \frac{N}{t-1},\quad
              \frac{N_s}{N} = \frac{|\{i\in I_N: \|a_i - s\| < \min_{j\notin I_N}\|a_j - s\|\}|}{N}

    (the sums over visible ``i``; Reading the paper, §Distance, §The expectation, §The separability definition).

    Parameters
    ----------
    weights : tensor, shape (H, R, L)
        Non-negative, finite weights (0 where masked).
    values : tensor, shape (H, L, d)
        The vectors ``x_i`` of each head.
    mask : bool tensor, shape (R, L) or (H, R, L)
        ``True`` = visible (a numeric mask must hold only 0 and 1).
    n_values : sequence of int
        ``N`` values, each ``>= 1``.
    unit : bool
        Put every ``x_i`` on the unit sphere first (the separability convention, ``M = 1``).

    Returns
    -------
    dict
        ``d_tilde``, ``e1``, ``sep`` (``N_s/N``), ``valid`` (``t >= N + 1``): each ``(H, R, len(n_values))``
        float64 (``valid`` bool); invalid entries are 0.
    """
    w = torch.as_tensor(weights).to(torch.float64)
    V = torch.as_tensor(values).to(torch.float64)
    if w.dim() != 3 or V.dim() != 3 or V.shape[0] != w.shape[0] or V.shape[1] != w.shape[2]:
        raise ValueError(
            f"weights must be (H, R, L) and values (H, L, d) with the same H and L "
            f"(got {tuple(w.shape)} and {tuple(V.shape)})"
        )
    vis = torch.broadcast_to(_bool_mask(mask), w.shape) if _mask_fits(mask, w.shape) else None
    if vis is None:
        raise ValueError(f"mask must be (R, L) or (H, R, L) for weights of shape {tuple(w.shape)}")
    if not bool(torch.isfinite(w).all()) or bool((w[vis] < 0).any()):
        raise ValueError("weights must be finite and non-negative")
    ns = [check_int("n_values", n, low=1) for n in n_values]
    if unit:
        V = V / torch.linalg.vector_norm(V, dim=-1, keepdim=True).clamp(min=1e-300)
    w = torch.where(vis, w, torch.zeros((), dtype=w.dtype))
    t = vis.sum(-1).to(torch.float64)  # (H, R)
    gdiag = (V * V).sum(-1)  # (H, L)
    a_sq = w * w * gdiag.unsqueeze(1)  # ||a_i||^2
    z = torch.einsum("hrl,hld->hrd", w, V)
    zx = torch.einsum("hld,hrd->hrl", V, z)  # z . x_i
    z_sq = (z * z).sum(-1, keepdim=True)
    rank = _top_rank(w, vis)
    H, R, L = w.shape
    out = {k: torch.zeros(H, R, len(ns), dtype=torch.float64) for k in ("d_tilde", "e1", "sep")}
    out["valid"] = torch.zeros(H, R, len(ns), dtype=torch.bool)
    zero = torch.zeros((), dtype=torch.float64)
    # every N of a block at once, on (H, R, C, L) tensors (a block holds at most _BLOCK_ELEMS entries)
    per_block = max(1, _BLOCK_ELEMS // max(1, H * R * L))
    wv, visv, a_sq4, wzx = w.unsqueeze(2), vis.unsqueeze(2), a_sq.unsqueeze(2), (w * zx).unsqueeze(2)
    t3, z_sq4 = t.unsqueeze(-1), z_sq.unsqueeze(-1)
    for c0 in range(0, len(ns), per_block):
        nb = ns[c0 : c0 + per_block]
        n_i = torch.as_tensor(nb).view(1, 1, -1, 1)
        n_f = torch.as_tensor(nb, dtype=torch.float64)  # (C,)
        top = (rank.unsqueeze(2) < n_i) & visv  # (H, R, C, L): the N largest weights of each row
        s = torch.einsum("hrcl,hld->hrcd", wv * top, V)
        sx = torch.einsum("hld,hrcd->hrcl", V, s)
        s_sq = (s * s).sum(-1, keepdim=True)
        dist = (a_sq4 - 2 * wv * sx + s_sq).clamp(min=0).sqrt()  # ||a_i - s||
        rest = visv & ~top
        d_tilde = torch.where(rest, dist, zero).sum(-1)  # (H, R, C)
        pp = (n_f / (t3 - 1).clamp(min=1)).unsqueeze(-1)  # p = N / (t - 1)
        e1_terms = ((1 + pp) ** 2 * a_sq4 - 2 * pp * (1 + pp) * wzx + pp**2 * z_sq4).clamp(min=0).sqrt()
        e1 = (t3 - n_f) / t3.clamp(min=1) * torch.where(visv, e1_terms, zero).sum(-1)
        rho = torch.where(rest, dist, torch.full((), math.inf, dtype=dist.dtype)).amin(-1, keepdim=True)
        sep = ((dist < rho) & top).sum(-1).to(torch.float64) / n_f
        valid = t3 >= n_f + 1
        sl = slice(c0, c0 + len(nb))
        out["d_tilde"][..., sl] = torch.where(valid, d_tilde, zero)
        out["e1"][..., sl] = torch.where(valid, e1, zero)
        out["sep"][..., sl] = torch.where(valid, sep, zero)
        out["valid"][..., sl] = valid
    return out


#: How far from 1 the row sums of :func:`softmax_type_spectral_norm`'s weights may be (float32 softmax rows of 10^5
#: tokens sum to 1 within about 1e-5).
_DIST_TOL = 1e-4


def softmax_type_spectral_norm(weights, temperature: float = 1.0, *, iterations: int = 100) -> torch.Tensor:
    r"""Spectral norm of :math:`J = (\mathrm{diag}\,\alpha - \alpha\alpha^\top)/T`, one value per row, exactly.

    This is the Jacobian of softmax and (off ties) of top-k (:func:`attn_lib.jacobian.softmax_jacobian`,
    :func:`attn_lib.jacobian.topk_jacobian`). ``diag(alpha) - alpha alpha^T`` is positive semi-definite and its largest
    eigenvalue ``lambda`` is the root in ``[alpha_(2), alpha_(1)]`` of the secular equation
    :math:`\sum_i \alpha_i^2/(\alpha_i - \lambda) = 1` (``alpha_(1) >= alpha_(2)`` the two largest weights), found by
    bisection in float64 in ``O(L)`` per row and step; no ``L x L`` matrix is formed.

    Parameters
    ----------
    weights : tensor, shape (..., L)
        Softmax or top-k weights (non-negative, each row summing to one within 1e-4, or all zero for a fully masked
        row); anything else is a ``ValueError``, since the formula holds only for a distribution.
    temperature : float
        ``T > 0``.
    iterations : int
        Most bisection steps (100 reach float64 resolution; it stops early once every interval is down to two
        adjacent floats).

    Returns
    -------
    torch.Tensor
        ``(...)`` float64: ``lambda / T``.
    """
    T = check_positive("temperature", temperature)
    iterations = check_int("iterations", iterations, low=1)
    # float64 from the start: torch.as_tensor of a list of Python floats would round them to float32 first
    kind = str(getattr(weights, "dtype", ""))
    if "bool" in kind or "complex" in kind:
        raise ValueError(f"weights must be real numbers (got dtype {kind})")
    try:
        a = (
            weights.to(torch.float64)
            if isinstance(weights, torch.Tensor)
            else torch.as_tensor(np.asarray(weights, dtype=np.float64))
        )
    except (TypeError, ValueError, RuntimeError):
        raise ValueError(
            f"weights must be a real tensor or array of shape (..., L) (got {type(weights).__name__})"
        ) from None
    if a.dim() < 1 or a.shape[-1] == 0 or not bool(torch.isfinite(a).all()) or bool((a < 0).any()):
        raise ValueError("weights must be a finite, non-negative tensor of shape (..., L) with L >= 1")
    sums = a.sum(-1)
    off = ~((sums - 1).abs() <= _DIST_TOL) & ~(sums == 0)
    if bool(off.any()):
        bad = float(sums[off].flatten()[0])
        raise ValueError(
            "weights must form a distribution: every row must sum to 1 (within "
            f"{_DIST_TOL:g}), or be all zero for a fully masked row (a row sums to {bad:.6g}); the formula holds only "
            "for softmax and top-k weights"
        )
    if a.shape[-1] == 1:
        return torch.zeros(a.shape[:-1], dtype=torch.float64)
    top2 = torch.topk(a, 2, dim=-1).values
    lo, hi = top2[..., 1].clone(), top2[..., 0].clone()
    a2 = a * a
    for i in range(iterations):
        mid = 0.5 * (lo + hi)
        if i % 8 == 7 and not bool(((mid > lo) & (mid < hi)).any()):
            break  # every interval is down to adjacent floats: more steps cannot move a midpoint
        diff = a - mid.unsqueeze(-1)
        # terms with alpha_i = lambda cannot occur strictly inside (lo, hi) except at ties, where hi - lo = 0
        safe = torch.where(diff == 0, torch.full_like(diff, math.inf), diff)
        f = (a2 / safe).sum(-1) - 1.0
        up = f > 0
        hi = torch.where(up, mid, hi)
        lo = torch.where(up, lo, mid)
    return 0.5 * (lo + hi) / T


# ----------------------------------------------------------------------------------------------------------------
# the limits comparison
# ----------------------------------------------------------------------------------------------------------------
class _CompareAnalysis:
    """Per layer: every normaliser on the sampled rows; per head means per ``L`` (tidy rows)."""

    def __init__(self, meta: dict, prof: BeyondProfile, settings: dict, seed: int):
        self.meta, self.prof, self.settings, self.seed = meta, prof, settings, seed
        self.row_sets = row_sample(prof.lengths, prof.rows_per_length)  # ascending L
        self.Lmax = max(prof.lengths)
        self.out: list[dict] = []

    def _add(self, label, name, metric, layer, values, **where):
        for h, v in enumerate(values):
            self.out.append(
                dict(
                    self.meta,
                    normalizer=label,
                    family=name,
                    metric=metric,
                    layer=layer,
                    head=h,
                    value=float(v),
                    **where,
                )
            )

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
            # the grid's N below L, not N = L - 1: there p = 1 and only the row t = L is valid, so d~ = ||2 a_j - z||
            # and E1 is the row mean of ||2 a_i - z||; the two nearly coincide by construction (a KS pass says little)
            ns = [n for n in ns_all if n < L]
            per_L.append((L, torch.as_tensor(rs + 1, dtype=torch.float64), lg, vis, ns))
        for label, (name, params) in self.settings.items():
            f = _nz.get(name, **params)
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
            # one seeded direction per row, reused for every T and eps (Algorithm 5)
            grid = _jac.sensitivity_grid(
                lg,
                prof.temperatures,
                prof.eps_values,
                normalizer=f,
                mask=vis,
                seed=(self.seed + la.layer) % 2**63,
                dtype=torch.float64,
            )
            for i, T in enumerate(prof.temperatures):
                for j, e in enumerate(prof.eps_values):
                    self._add(label, name, "g", la.layer, grid[i, j].mean(-1), L=L, T=T, eps=e)
                if name in ANALYTIC_JACOBIAN:
                    jn = softmax_type_spectral_norm(f(lg, T, dim=-1, mask=vis), T).amax(-1)
                    self._add(label, name, "jac_norm", la.layer, jn, L=L, T=T)

    def finish(self) -> pd.DataFrame:
        df = pd.DataFrame(self.out)
        for c in ("L", "N"):
            if c in df:
                df[c] = df[c].astype("Int64")
        return df


def _require_causal(handle, what: str) -> None:
    """``ValueError`` for a bidirectional encoder, up front: these experiments are defined for causal models only."""
    if not bool(getattr(handle, "causal", True)):
        prefix = (
            "it samples rows of every length from one pass, as nested prefixes (row t sees tokens 0..t-1), which a "
            "bidirectional model does not have"
        )
        loss = "it measures the next-token loss of a language model, which a bidirectional encoder has no head for"
        why = {"compare_normalizers": prefix, "live_swap": loss}.get(what, f"{prefix}; and {loss}")
        raise ValueError(
            f"model: {what} needs a causal language model, and {getattr(handle, 'model_id', 'this model')} is a "
            f"bidirectional encoder ({why}); use a causal model such as gpt2 or smollm2"
        )


def _check_cache(cache):
    from .experiments import _check_cache as check

    return check(cache)


def compare_normalizers(handle, text, *, profile="quick", seed: int = 0, start: int = 0, cache=None) -> pd.DataFrame:
    """The paper's limits for every normaliser on the same model logits (one forward pass; see the module docstring).

    Parameters
    ----------
    handle : attn_lib.models.ModelHandle
        The model (its own softmax runs; the logits are captured).
    text : attn_lib.corpus.Text or str
        The text; the window is its first ``max(profile.lengths)`` tokens from ``start``.
    profile : {"paper", "quick"} or BeyondProfile
        Grids (:data:`BEYOND_PROFILES`).
    seed : int
        Seed of the sensitivity directions (``seed + layer``).
    start : int
        First token of the window.
    cache : attn_lib.cache.ResultCache, optional
        Reuse a stored result of the same code, model, text and parameters.

    Returns
    -------
    pandas.DataFrame
        Tidy, one row per (normaliser, metric, layer, head and grid point): columns ``model, text, device,
        normalizer`` (label, e.g. ``"top-16"``), ``family`` (name in :mod:`attn_lib.normalizers`), ``metric``
        (``max_alpha``, ``L_max_alpha``, ``d_tilde``, ``e1``, ``sep_fraction``, ``g``, ``jac_norm``), ``layer, head,
        value`` and the grid columns ``L, N, T, eps`` (missing where they do not apply). Per-head values are means
        over the sampled rows of that ``L``.
    """
    from .experiments import _key, _meta, _run_pass

    prof = _beyond_profile(profile)
    _require_causal(handle, "compare_normalizers")
    seed = check_seed("seed", seed)
    start = check_int("start", start, low=0)
    if max(prof.lengths) > int(handle.max_length):
        raise ValueError(
            f"profile lengths must be <= the model's context {handle.max_length} (got {max(prof.lengths)})"
        )
    settings = normalizer_settings(prof.k_values)
    cache = _check_cache(cache)

    def compute():
        a = _CompareAnalysis(_meta(handle, text), prof, settings, seed)
        _run_pass(handle, text, [_LayerOnly(a)], max(prof.lengths), start)
        return a.finish()

    if cache is None:
        return compute()
    key = _key("compare_normalizers", handle, text, start=start, seed=seed, profile=prof.as_dict(), settings=settings)
    return cache.get_or_compute(key, compute)


class _LayerOnly:
    """Adapter: experiments' passes hand a per-layer memo; this analysis needs only the captured layer."""

    def __init__(self, a):
        self.a = a

    def layer(self, sh) -> None:
        self.a.layer(sh.la)


def critical_n_from_heads(df: pd.DataFrame, alpha: float = 0.01) -> pd.DataFrame:
    """Critical ``N`` per (normaliser, ``L``): the first ``N`` of the scanned grid at which the two-sample KS test
    over heads does not separate the per-head means of ``d~`` and ``E1`` (``p >= alpha``).

    Parameters
    ----------
    df : pandas.DataFrame
        :func:`compare_normalizers`' table (rows with ``metric`` ``d_tilde`` and ``e1``).
    alpha : float
        KS level.

    Returns
    -------
    pandas.DataFrame
        ``normalizer, L, n_star, censored`` (no scanned ``N`` passed; ``n_star`` is then the largest scanned),
        ``ratio = n_star / L``, ``n_heads``.
    """
    from scipy.stats import ks_2samp

    need = {"metric", "normalizer", "L", "N", "layer", "head", "value"}
    if not isinstance(df, pd.DataFrame) or not need <= set(df.columns):
        raise ValueError(f"df must be compare_normalizers' table (columns {sorted(need)})")
    a = check_probability("alpha", alpha, open_low=True, open_high=True)
    sub = df[df["metric"].isin(["d_tilde", "e1"])]
    wide = sub.pivot_table(index=["normalizer", "L", "N", "layer", "head"], columns="metric", values="value")
    rows = []
    for (lab, L), g in wide.groupby(level=["normalizer", "L"], sort=False):
        n_star, cens, last = None, True, None
        for N, gn in g.groupby(level="N"):
            last = int(N)
            if ks_2samp(gn["d_tilde"].to_numpy(), gn["e1"].to_numpy()).pvalue >= a:
                n_star, cens = int(N), False
                break
        n_star = last if n_star is None else n_star
        rows.append(
            dict(
                normalizer=lab,
                L=int(L),
                n_star=n_star,
                censored=cens,
                ratio=n_star / int(L),
                n_heads=len(g.xs(last, level="N")),
            )
        )
    return pd.DataFrame(rows)


def limits_summary(df: pd.DataFrame, alpha: float = 0.01) -> pd.DataFrame:
    """One row per normaliser, one column per limit (the chapter's table), from :func:`compare_normalizers`' table.

    Columns: ``max_alpha_slope`` (least-squares slope of log mean ``max alpha`` against log ``L``: ``-1`` is the
    ``1/L`` vanishing of Lemma 1, ``0`` a weight that does not vanish), ``d_tilde`` (mean over heads at the largest
    ``L`` and the profile's ``N``), ``d_tilde_slope`` (log-log slope of that mean against ``L``), ``n_star`` and
    ``n_star_ratio`` (critical ``N`` at the largest ``L``, ``censored`` if no grid ``N`` passed), ``sep_fraction``
    (median over heads of ``N_s/N`` at the largest ``N`` of the grid), ``g_low_T`` and ``g_T1`` (the paper's ``g``:
    max over heads of the row mean, at the smallest ``T`` and at ``T = 1``, smallest ``eps``), ``jac_norm_T1``
    (largest analytic spectral norm at ``T = 1``, NaN where no analytic Jacobian is used).

    Parameters
    ----------
    df : pandas.DataFrame
        :func:`compare_normalizers`' table.
    alpha : float
        KS level of the critical ``N``.

    Returns
    -------
    pandas.DataFrame
        Indexed by normaliser label, in the table's order.
    """
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
        out.append(
            dict(
                normalizer=lab,
                max_alpha_slope=slope,
                d_tilde=float(dL.loc[Lmax]),
                d_tilde_slope=d_slope,
                n_star=int(c["n_star"]),
                n_star_censored=bool(c["censored"]),
                n_star_ratio=float(c["ratio"]),
                sep_n=n_sep,
                sep_fraction=float(sp[sp["N"] == n_sep]["value"].median()),
                g_low_T=float(gmax.iloc[0]),
                low_T=float(gmax.index[0]),
                g_T1=float(gmax.loc[1.0]) if 1.0 in gmax.index else math.nan,
                eps=e0,
                jac_norm_T1=float(jn.max()) if len(jn) else math.nan,
            )
        )
    return pd.DataFrame(out).set_index("normalizer")


# ----------------------------------------------------------------------------------------------------------------
# the live swap
# ----------------------------------------------------------------------------------------------------------------
@dataclasses.dataclass
class SwapResult:
    """What :func:`live_swap` measured.

    Attributes
    ----------
    losses : pandas.DataFrame
        One row per (setting, ``L``): ``model, text, device, setting, normalizer, k, T, L, loss, perplexity,
        n_predictions`` (mean next-token cross-entropy in nats over the first ``L - 1`` predictions of the window).
    rows : pandas.DataFrame
        One row per setting: ``setting, normalizer, k, T, layer, head, row, attention`` (the row's weights, a
        float64 array of length ``row + 1``), ``d_tilde`` (of that row at ``N``), ``N``, ``loss`` (at the full window).
    """

    losses: pd.DataFrame
    rows: pd.DataFrame


def _swap_settings(prof: BeyondProfile) -> list[dict]:
    out = [dict(setting="softmax (model)", normalizer=None, params={}, k=None, T=1.0)]
    for lab, (name, params) in normalizer_settings(prof.k_values).items():
        if lab != "softmax":
            out.append(dict(setting=lab, normalizer=name, params=params, k=params.get("k"), T=1.0))
    for k in prof.k_grid:
        if k not in prof.k_values:
            out.append(dict(setting=f"top-{k}", normalizer="topk", params={"k": k}, k=k, T=1.0))
    for T in prof.t_grid:
        out.append(dict(setting=f"softmax T={T:g}", normalizer="softmax", params={}, k=None, T=float(T)))
    return out


def _swap_args(handle, profile, layer, head, start, N) -> tuple:
    """Validated ``(profile, window length, layer, head, start, N)`` of :func:`live_swap` and :func:`swap_setting`."""
    prof = _beyond_profile(profile)
    _require_causal(handle, "live_swap")
    Lw = check_int("swap_length", prof.swap_length, low=2, high=int(handle.max_length))
    layer = handle.n_layers // 2 if layer is None else check_int("layer", layer, low=0, high=handle.n_layers - 1)
    head = check_int("head", head, low=0, high=handle.n_heads - 1)
    start = check_int("start", start, low=0)
    N = check_int("N", N, low=1, high=Lw - 2)
    return prof, Lw, layer, head, start, N


def _swap_pass(handle, ids, s: dict, meta: dict, *, layer: int, head: int, N: int, swap_lengths) -> tuple:
    """One forward pass of :func:`live_swap` with the setting ``s``: (loss rows per ``L``, the recorded row)."""
    from .capture import capture_attention

    Lw = ids.shape[-1]
    kept = {}

    def cb(la):
        kept["w"] = la.weights[0, head, Lw - 1].to(torch.float64).cpu()
        kept["v"] = la.values[0, head].to(torch.float64).cpu()

    norm = None if s["normalizer"] is None else _nz.get(s["normalizer"], **s["params"])
    out = capture_attention(handle, ids, cb, normalizer=norm, temperature=s["T"], layers=layer, keep_qk=False)
    logp = torch.log_softmax(out.logits[0, :-1].to(torch.float64), dim=-1)
    nll = -logp.gather(-1, ids[0, 1:].to(logp.device).view(-1, 1)).view(-1).cpu()
    base = dict(meta, setting=s["setting"], normalizer=s["normalizer"] or "softmax", k=s["k"], T=s["T"])
    losses = []
    for L in swap_lengths:
        if L > Lw:
            continue
        loss = float(nll[: L - 1].mean())
        losses.append(dict(base, L=int(L), loss=loss, perplexity=math.exp(loss), n_predictions=L - 1))
    w = kept["w"]
    m = row_metrics(w.view(1, 1, -1), kept["v"].unsqueeze(0), torch.ones(1, 1, Lw, dtype=torch.bool), [N])
    rec = dict(
        base,
        layer=layer,
        head=head,
        row=Lw - 1,
        attention=w.numpy(),
        N=N,
        d_tilde=float(m["d_tilde"][0, 0, 0]),
        loss=float(nll.mean()),
    )
    return losses, rec


def live_swap(
    handle,
    text,
    *,
    profile="quick",
    layer: int | None = None,
    head: int = 0,
    start: int = HELD_OUT_START,
    N: int = 5,
    cache=None,
) -> SwapResult:
    """Every normaliser, top-k over a ``k`` grid and softmax over a ``T`` grid, swapped into every head at inference.

    One forward pass per setting over the window of ``profile.swap_length`` tokens of ``text`` from token ``start``
    (held-out by default); no weight of the model changes. ``"softmax (model)"`` is the model's own attention.

    Parameters
    ----------
    handle : attn_lib.models.ModelHandle
    text : attn_lib.corpus.Text or str
    profile : {"paper", "quick"} or BeyondProfile
    layer : int, optional
        Layer of the recorded attention row (default: the middle layer).
    head : int
        Head of the recorded row.
    start : int
        First token of the window (default :data:`HELD_OUT_START`).
    N : int
        ``N`` of the recorded row's ``d~``.
    cache : attn_lib.cache.ResultCache, optional

    Returns
    -------
    SwapResult
    """
    from .experiments import _key, _meta, text_window

    prof, Lw, layer, head, start, N = _swap_args(handle, profile, layer, head, start, N)
    cache = _check_cache(cache)
    settings = _swap_settings(prof)

    def compute():
        meta = _meta(handle, text)
        ids = text_window(handle, text, Lw, start)
        losses, recs = [], []
        for s in settings:
            lo, rec = _swap_pass(handle, ids, s, meta, layer=layer, head=head, N=N, swap_lengths=prof.swap_lengths)
            losses.extend(lo)
            recs.append(rec)
        return SwapResult(pd.DataFrame(losses), pd.DataFrame(recs))

    if cache is None:
        return compute()
    key = _key(
        "live_swap",
        handle,
        text,
        start=start,
        layer=layer,
        head=head,
        N=N,
        profile=prof.as_dict(),
        settings=[{k: v for k, v in s.items()} for s in settings],
    )
    return cache.get_or_compute(key, compute)


def _setting_of(label: str, prof: BeyondProfile) -> dict:
    """The :func:`live_swap` setting named ``label``: one of the profile's, ``"top-<k>"`` or ``"softmax T=<T>"``."""
    known = {s["setting"]: s for s in _swap_settings(prof)}
    allowed = (
        f"one of {list(known)}, 'top-<k>' with an integer k in [1, {prof.swap_length}] (the window), or "
        "'softmax T=<T>' with a number T > 0 (digits, no spaces or sign)"
    )
    if not isinstance(label, str):
        raise ValueError(f"setting must be {allowed} (got {label!r})")
    if label in known:
        return known[label]
    m = re.fullmatch(r"top-([0-9]+)", label)
    if m:
        # k >= the window is softmax on every row: refuse a label that would claim to be something else
        k = check_int("setting's k", int(m.group(1)), low=1, high=prof.swap_length)
        return dict(setting=f"top-{k}", normalizer="topk", params={"k": k}, k=k, T=1.0)
    m = re.fullmatch(r"softmax T=(-?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?)", label)
    if m:
        T = check_positive("setting's T", float(m.group(1)))
        return dict(setting=f"softmax T={T:g}", normalizer="softmax", params={}, k=None, T=T)
    raise ValueError(f"setting must be {allowed} (got {label!r})")


def swap_setting(
    handle,
    text,
    setting: str,
    *,
    profile="quick",
    layer: int | None = None,
    head: int = 0,
    start: int = HELD_OUT_START,
    N: int = 5,
) -> pd.DataFrame:
    """One setting of :func:`live_swap`, computed now (one forward pass, no cache): the row :func:`live_swap` records.

    Parameters
    ----------
    setting : str
        A setting of ``live_swap`` for this profile (e.g. ``"top-16"``, ``"sparsemax"``, ``"softmax T=0.5"``), or any
        ``"top-<k>"`` or ``"softmax T=<T>"`` off the profile's grids.
    handle, text, profile, layer, head, start, N
        As for :func:`live_swap` (the window is ``profile.swap_length`` tokens from ``start``).

    Returns
    -------
    pandas.DataFrame
        One row with the columns of :attr:`SwapResult.rows`.
    """
    from .experiments import _meta, text_window

    prof, Lw, layer, head, start, N = _swap_args(handle, profile, layer, head, start, N)
    s = _setting_of(setting, prof)
    ids = text_window(handle, text, Lw, start)
    _, rec = _swap_pass(handle, ids, s, _meta(handle, text), layer=layer, head=head, N=N, swap_lengths=())
    return pd.DataFrame([rec])


def live_renderer(handle, text, rows: pd.DataFrame, *, sweep: str = "k", **swap_kw):
    """``render(setting) -> Figure`` that computes the setting now with :func:`swap_setting`, for the ``live`` argument
    of :func:`attn_lib.book.widgets.precomputed_slider`: in a live kernel, moving the slider reruns the model.

    The figure is :func:`attn_lib.report.render_swap_row` with the freshly computed row in place of the stored one in
    ``rows`` (a :attr:`SwapResult.rows`; the rest of the sweep panel comes from it). ``swap_kw`` are passed to
    :func:`swap_setting` (``profile``, ``layer``, ``head``, ``start``, ``N``); use the values ``rows`` was made with.
    """
    from .report import render_swap_row

    check_choice("sweep", sweep, ["k", "T"])

    def render(setting: str):
        new = swap_setting(handle, text, setting, **swap_kw)
        label = new["setting"].iloc[0]
        merged = pd.concat([rows[rows["setting"] != label], new], ignore_index=True)
        return render_swap_row(merged, label, sweep=sweep)

    return render


# ----------------------------------------------------------------------------------------------------------------
# the command (python -m attn_lib compare-normalizers)
# ----------------------------------------------------------------------------------------------------------------
def _check_text_length(handle, text, prof: BeyondProfile, start: int) -> None:
    """Before any work: the text must hold the comparison's window (tokens from 0) and the swap's (from ``start``)."""
    from .corpus import tokenize

    need = max(max(prof.lengths), start + prof.swap_length)
    have = len(tokenize(handle.tokenizer, text, max_tokens=need))
    if have >= need:
        return
    name = getattr(text, "name", "text")
    if have < max(prof.lengths):
        raise ValueError(
            f"text {name!r} has {have} tokens; the comparison needs {max(prof.lengths)} (profile {prof.name!r}): "
            "use a longer text or --profile quick"
        )
    room, lc = have - prof.swap_length, max(prof.lengths)
    if room >= lc:
        hint = f"use --start between {lc} (the first token after the comparison's window) and {room}"
    elif room >= 0:
        hint = f"use --start {room} or less (the held-out window then overlaps the comparison's), or a longer text"
    else:
        hint = f"use a text of at least {prof.swap_length} tokens"
    raise ValueError(
        f"text {name!r} has {have} tokens; the live swap's held-out window needs tokens {start}..{need - 1} "
        f"(--start {start} plus the window of {prof.swap_length}): {hint}"
    )


def run_compare(
    model: str = "gpt2",
    *,
    device: str = "auto",
    profile: str = "paper",
    out="results-beyond",
    text: str = "war-and-peace",
    use_cache: bool = True,
    start: int = HELD_OUT_START,
    say=None,
) -> dict:
    """Run :func:`compare_normalizers` and :func:`live_swap` and write the table and figures into ``out``.

    Files: ``limits.md`` / ``limits.csv`` / ``limits.json`` (normalisers x limits, :func:`limits_summary`),
    ``compare.csv`` (the tidy table), ``critical_n.csv``, ``swap_losses.csv`` and ``swap.md`` (held-out loss and
    perplexity), ``limits.png/.svg`` and ``swap.png/.svg``; each figure and the JSON name model, text and device.

    Parameters
    ----------
    model, device, text :
        As for :func:`attn_lib.experiments.load_inputs` (offline, GPT-2 resolves to the stand-in).
    profile : {"paper", "quick"}
    out : path
        Output folder, checked (and created) before any work.
    use_cache : bool
        Use the result cache.
    start : int
        First token of the live swap's held-out window (default :data:`HELD_OUT_START`, so the text needs
        ``start + profile.swap_length`` tokens; a shorter text can use e.g. ``start = max(profile.lengths)``, the
        first token after the comparison's window). Checked, with the text's length, before any work.
    say : callable, optional
        Called with one-line progress messages.

    Returns
    -------
    dict
        ``out`` (the folder), ``files`` (names written), ``notes`` (offline fallbacks), ``summary`` (the table),
        ``seconds``.
    """
    import json
    import time

    from . import report as R
    from ._validation import prepare_output_dir
    from .cache import ResultCache
    from .experiments import load_inputs

    out_dir = prepare_output_dir("out", out)
    prof = _beyond_profile(profile)
    if not isinstance(use_cache, bool):
        raise ValueError(f"use_cache must be True or False (got {use_cache!r})")
    start = check_int("start", start, low=0)
    if say is not None and not callable(say):
        raise ValueError(f"say must be callable or None (got {say!r})")
    say = say or (lambda msg: None)
    t0 = time.perf_counter()
    handle, text_obj, notes = load_inputs(model, text, device=device)
    _require_causal(handle, "compare-normalizers")
    _check_text_length(handle, text_obj, prof, start)
    cache = ResultCache() if use_cache else None
    say(f"model: {handle.describe()}; text: {text_obj.name}; profile {prof.name!r}")
    say("comparing every normaliser on the model's logits (one forward pass) ...")
    df = compare_normalizers(handle, text_obj, profile=prof, cache=cache)
    say("swapping each normaliser into the live model (one forward pass per setting) ...")
    sw = live_swap(handle, text_obj, profile=prof, start=start, cache=cache)
    summary = limits_summary(df, prof.ks_alpha)
    crit = critical_n_from_heads(df, prof.ks_alpha)
    swap_t = R.beyond_swap_table(sw.losses)
    meta = {k: str(df[k].iloc[0]) for k in ("model", "text", "device")}
    files = []

    def write(name: str, content: str) -> None:
        (out_dir / name).write_text(content, encoding="utf-8")
        files.append(name)

    prov = R.label(meta)
    write("limits.md", f"# Normalisers on the paper's limits\n\n{prov}\n\n{R.beyond_limits_markdown(summary)}\n")
    summary.to_csv(out_dir / "limits.csv")
    files.append("limits.csv")
    write(
        "limits.json",
        json.dumps(
            dict(meta, profile=prof.as_dict(), limits=json.loads(summary.reset_index().to_json(orient="records"))),
            indent=1,
        ),
    )
    df.to_csv(out_dir / "compare.csv", index=False)
    crit.to_csv(out_dir / "critical_n.csv", index=False)
    sw.losses.to_csv(out_dir / "swap_losses.csv", index=False)
    files += ["compare.csv", "critical_n.csv", "swap_losses.csv"]
    write("swap.md", f"# Held-out loss with each normaliser swapped in\n\n{prov}\n\n{swap_t.to_markdown()}\n")
    for name, fig in (("limits", R.figure_beyond_limits(df, crit)), ("swap", R.figure_beyond_swap(sw.losses))):
        for ext in ("png", "svg"):
            R.save_figure(fig, out_dir / f"{name}.{ext}", dpi=110, bbox_inches="tight")
            files.append(f"{name}.{ext}")
    return dict(out=out_dir, files=files, notes=notes, summary=summary, seconds=time.perf_counter() - t0)
