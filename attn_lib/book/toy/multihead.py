r"""Multi-head coverage and the remedies of the closing chapter (see the book's appendix "Reading the paper",
§Multi-head coverage): ``1 - (1 - p)^H`` next to a simulation of independent heads; the compared normalisers
(``attn_lib.normalizers.available(compared=True)``) on bounded random rows and on rows with one separated logit as
``L`` grows; their finite-difference sensitivity against temperature with the bound each obeys; the temperature
slider's figure; and a live model whose softmax is replaced by another normaliser (its figure and table are
:mod:`attn_lib.report` functions).

The synthetic parts run on the CPU in float64; every random draw comes from an explicit ``seed``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd
import torch
from matplotlib import colormaps
from matplotlib.figure import Figure

from attn_lib import jacobian, normalizers, theory
from attn_lib._validation import check_choice, check_int, check_positive, check_probability
from attn_lib.capture import capture_attention
from attn_lib.layout import FIGURE_WIDTH_IN
from attn_lib.provenance import label_figure

__all__ = [
    "ROW_KINDS",
    "SSMAX_SCALE",
    "SENSITIVITY_BOUNDED",
    "coverage_table",
    "remedy_rows",
    "RemedyComparison",
    "compare_remedies",
    "figure_max_weight",
    "sensitivity_bound",
    "SensitivitySweep",
    "sensitivity_sweep",
    "figure_sensitivity",
    "render_normalisers",
    "row_stats",
    "SwapResult",
    "normaliser_swap",
]

#: The two kinds of synthetic rows of :func:`remedy_rows`.
ROW_KINDS = ("bounded random", "one separated")
#: SSMax scale ``s`` (the library default of :func:`attn_lib.normalizers.ssmax`).
SSMAX_SCALE = 0.43
#: The bound of :func:`sensitivity_bound` per normaliser: ``(T, n, s, cap) -> bound``, ``cap = sqrt(2)/eps``.
_SENSITIVITY_BOUNDS = {
    "softmax": lambda T, n, s, cap: min(1 / (2 * T), cap),
    "softmax1": lambda T, n, s, cap: 1 / (2 * T),
    "ssmax": lambda T, n, s, cap: min(s * math.log(n) / (2 * T), cap),
    "sparsemax": lambda T, n, s, cap: min(1 / T, cap),
    "entmax15": lambda T, n, s, cap: min(1 / T, cap),
    "sigmoid": lambda T, n, s, cap: 1 / (4 * T),
}
#: Normalisers with a sensitivity bound in :func:`sensitivity_bound`.
SENSITIVITY_BOUNDED = tuple(_SENSITIVITY_BOUNDS)
DEVICE = "cpu"


def _color(name: str):
    """The colour of a compared normaliser (tab10, in registration order); ``None`` for the others."""
    compared, colors = normalizers.available(compared=True), colormaps["tab10"].colors
    i = compared.index(name) if name in compared else len(colors)
    return colors[i] if i < len(colors) else None


def _label(fig: Figure, text: str, seed: int) -> Figure:
    """``fig`` with the provenance footer of synthetic data (:func:`attn_lib.provenance.label_figure`)."""
    return label_figure(fig, model="none", text=text, device=DEVICE, seed=seed)


def _names(names: Iterable[str] | None) -> list[str]:
    if names is None:
        return normalizers.available(compared=True)
    names = [check_choice("names", n, normalizers.available()) for n in ([names] if isinstance(names, str) else names)]
    if not names:
        raise ValueError(f"names must list at least one normaliser of {normalizers.available()} (got none)")
    return names


def _lengths(lengths: Any, low: int = 1) -> np.ndarray:
    arr = np.asarray(lengths).ravel()
    if arr.size == 0:
        raise ValueError(f"lengths must be a non-empty sequence of integers >= {low} (got an empty sequence)")
    return np.array([check_int("lengths", v.item() if hasattr(v, "item") else v, low=low) for v in arr], dtype=int)


# ---- multi-head coverage ---------------------------------------------------------------------------------
def coverage_table(ps: Sequence[float], heads: Sequence[int], n_trials: int, seed: int = 0) -> pd.DataFrame:
    """Coverage ``1 - (1 - p)^H`` of ``H`` independent heads and its Bernoulli simulation.

    Parameters
    ----------
    ps : sequence of float in [0, 1]
        Fraction of the selected tokens that one head separates.
    heads : sequence of int >= 1
        Head counts ``H``.
    n_trials : int >= 1
        Simulated trials per ``(p, H)`` (:func:`attn_lib.theory.multihead_coverage_simulation`, seeded with ``seed``).
    seed : int >= 0

    Returns
    -------
    DataFrame
        One row per ``(p, H)``: columns ``p``, ``H``, ``1 − (1 − p)^H``, ``simulated`` and ``standard error``
        (``sqrt(c (1 - c) / n_trials)`` of the exact coverage ``c``).
    """
    ps = [check_probability("ps", p) for p in ps]
    heads = list(_lengths(heads))
    n = check_int("n_trials", n_trials, low=1)
    if not ps:
        raise ValueError("ps must be a non-empty sequence of probabilities")
    rows = []
    for p in ps:
        for H in heads:
            exact = theory.multihead_coverage(p, int(H))
            rows.append(
                {
                    "p": p,
                    "H": int(H),
                    "1 − (1 − p)^H": exact,
                    "simulated": theory.multihead_coverage_simulation(p, int(H), n_trials=n, seed=seed),
                    "standard error": math.sqrt(exact * (1 - exact) / n),
                }
            )
    return pd.DataFrame(rows)


# ---- the remedies on synthetic rows ----------------------------------------------------------------------
def remedy_rows(lengths: Sequence[int], a: float, seed: int = 0) -> dict[str, dict[int, np.ndarray]]:
    """The chapter's two kinds of synthetic rows, one per length and kind.

    ``"bounded random"``: logits uniform on ``[-a, a]``. ``"one separated"``: ``l_1 = a`` and the others uniform
    on ``[-a, -a + 1]``, so the first logit leads every other by at least ``2a - 1``. One ``default_rng(seed)``
    draws every bounded row first, then every separated row.

    Parameters
    ----------
    lengths : sequence of int >= 2
    a : float >= 1
        Logit bound (``a >= 1`` keeps the separated rows inside ``[-a, a]`` with a lead of at least 1).
    seed : int >= 0

    Returns
    -------
    dict
        ``{kind: {L: ndarray (L,)}}`` for the kinds of :data:`ROW_KINDS`.
    """
    Ls = _lengths(lengths, low=2)
    a = check_positive("a", a)
    if a < 1:
        raise ValueError(f"a must be a number >= 1 (got {a})")
    rng = np.random.default_rng(check_int("seed", seed, low=0))
    bounded = {int(L): rng.uniform(-a, a, size=int(L)) for L in Ls}
    separated = {int(L): np.concatenate([[a], rng.uniform(-a, -a + 1, size=int(L) - 1)]) for L in Ls}
    return {"bounded random": bounded, "one separated": separated}


@dataclasses.dataclass(frozen=True)
class RemedyComparison:
    """Per-row statistics of several normalisers on :func:`remedy_rows` (see :func:`compare_remedies`).

    Attributes
    ----------
    a, temperature : float
    seed : int
    rows : dict
        ``{kind: {L: ndarray (L,)}}``, the logits.
    stats : DataFrame
        Index ``(kind, L, normaliser)``; columns ``max`` (largest weight), ``top`` (weight of the first token, the
        separated one), ``support`` (tokens with positive weight), ``sum`` (row sum) and ``ratio to softmax``
        (``max_j alpha_j / softmax_j``; softmax weights are positive).
    """

    a: float
    temperature: float
    seed: int
    rows: dict
    stats: pd.DataFrame

    def table(self, column: str, kind: str) -> pd.DataFrame:
        """``column`` of :attr:`stats` for one row kind: index ``L``, one column per normaliser."""
        check_choice("column", column, tuple(self.stats.columns))
        check_choice("kind", kind, tuple(self.rows))
        return self.stats[column].xs(kind, level="kind").unstack("normaliser")[self.names]

    @property
    def names(self) -> list[str]:
        """The normalisers compared, in order."""
        return list(dict.fromkeys(self.stats.index.get_level_values("normaliser")))


def compare_remedies(
    lengths: Sequence[int], a: float, temperature: float, seed: int = 0, names: Iterable[str] | None = None
) -> RemedyComparison:
    """Run each normaliser on every row of :func:`remedy_rows` and keep per-row statistics.

    Chapter 5, ``prop-separated-top``; tested by
    ``tests/test_toy_multihead.py::TestCompareRemedies::test_sparse_maps_put_all_weight_on_the_separated_token``.

    Parameters
    ----------
    lengths : sequence of int >= 2
    a : float >= 1
    temperature : float > 0
    seed : int >= 0
    names : iterable of str, optional
        Names of :mod:`attn_lib.normalizers` (default: the compared ones, ``normalizers.available(compared=True)``);
        softmax is always computed for the ratio.

    Returns
    -------
    RemedyComparison
    """
    T = check_positive("temperature", temperature)
    names = _names(names)
    rows = remedy_rows(lengths, a, seed)
    records = []
    for kind, by_length in rows.items():
        for L, logits in by_length.items():
            soft = normalizers.softmax(logits, temperature=T)
            for name in names:
                w = normalizers.get(name)(logits, temperature=T)
                records.append(
                    {
                        "kind": kind,
                        "L": L,
                        "normaliser": name,
                        "max": w.max(),
                        "top": w[0],
                        "support": int((w > 0).sum()),
                        "sum": w.sum(),
                        "ratio to softmax": (w / soft).max(),
                    }
                )
    stats = pd.DataFrame(records).set_index(["kind", "L", "normaliser"])
    return RemedyComparison(a=float(a), temperature=T, seed=int(seed), rows=rows, stats=stats)


def figure_max_weight(comparison: RemedyComparison) -> Figure:
    """Largest weight against ``L`` for every normaliser, one panel per row kind, with Lemma 1's ``C2 / L``.

    ``C2 = e^{2a/T}`` is softmax's constant of Lemma 1 (Corollary 1 with ``Delta = a``).

    Parameters
    ----------
    comparison : RemedyComparison

    Returns
    -------
    matplotlib Figure (not managed by pyplot; show it with :func:`attn_lib.book.chapter.show_figure`).
    """
    if not isinstance(comparison, RemedyComparison):
        raise ValueError(f"comparison must be a RemedyComparison (from compare_remedies), got {type(comparison)}")
    a, T = comparison.a, comparison.temperature
    fig = Figure(figsize=(FIGURE_WIDTH_IN, 3.8))
    axes = fig.subplots(1, 2, sharey=True)
    titles = {
        "bounded random": f"bounded random logits, uniform on [-{a:g}, {a:g}]",
        "one separated": "one separated logit",
    }
    for ax, kind in zip(axes, comparison.rows):
        maxw = comparison.table("max", kind)
        for name in maxw.columns:
            ax.plot(maxw.index, maxw[name], "o-", ms=3, color=_color(name), label=name)
        ax.plot(maxw.index, np.minimum(1, math.exp(2 * a / T) / maxw.index), "k--", lw=1, label=r"Lemma 1: $C_2/L$")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("context length L")
        ax.set_title(titles.get(kind, kind), fontsize=9)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel(r"largest weight $\max_i\alpha_i$")
    axes[1].legend(fontsize=7, loc="lower left")
    fig.suptitle(f"Max weight against L (T = {T:g}, a = {a:g})", fontsize=10)
    fig.tight_layout()
    return _label(fig, f"synthetic logits, uniform on [-{a:g}, {a:g}] / separated top logit", comparison.seed)


# ---- sensitivity against temperature ---------------------------------------------------------------------
def sensitivity_bound(name: str, temperature: float, eps: float, length: int, s: float = SSMAX_SCALE) -> float:
    r"""An upper bound on ``||f((l + eps v)/T) - f(l/T)||_2 / eps`` for a unit ``v`` and any row of ``length`` logits.

    Chapter 5, ``prop-remedy-sensitivity``; tested by
    ``tests/test_toy_multihead.py::TestSensitivityBound::test_holds_on_random_rows``.

    * softmax: ``min(1/(2T), sqrt(2)/eps)`` (spectral norm of its Jacobian ``<= 1/(2T)``; two simplex points are at
      most ``sqrt(2)`` apart);
    * softmax1: ``1/(2T)`` (its Jacobian is a principal submatrix of softmax's with one more logit);
    * ssmax: ``min(s log n/(2T), sqrt(2)/eps)`` (softmax at temperature ``T / (s log n)``);
    * sparsemax, entmax15: ``min(1/T, sqrt(2)/eps)`` (a projection, resp. a Jacobian of norm ``<= max sqrt(alpha)/T``);
    * sigmoid: ``1/(4T)`` (independent weights with slope ``sigma' <= 1/4``).

    Parameters
    ----------
    name : str
        One of :data:`SENSITIVITY_BOUNDED`.
    temperature, eps : float > 0
    length : int >= 1
        Number of logits ``n`` of the row (used by ssmax).
    s : float > 0
        SSMax scale.

    Returns
    -------
    float
    """
    check_choice("name", name, SENSITIVITY_BOUNDED)
    T = check_positive("temperature", temperature)
    e = check_positive("eps", eps)
    n = check_int("length", length, low=1)
    s = check_positive("s", s)
    return _SENSITIVITY_BOUNDS[name](T, n, s, math.sqrt(2) / e)


@dataclasses.dataclass(frozen=True)
class SensitivitySweep:
    """Finite-difference sensitivity of several normalisers over temperatures (see :func:`sensitivity_sweep`).

    Attributes
    ----------
    eps : float
    seed : int
    n_rows, length : int
        Shape of the logit batch.
    stats : DataFrame
        Index ``(T, normaliser)``; columns ``mean``, ``max`` (over rows), ``zero share`` (rows whose weights did not
        move at all) and ``bound`` (:func:`sensitivity_bound`, NaN where there is none).
    """

    eps: float
    seed: int
    n_rows: int
    length: int
    stats: pd.DataFrame

    def table(self, column: str) -> pd.DataFrame:
        """``column`` of :attr:`stats`: index ``T``, one column per normaliser."""
        check_choice("column", column, tuple(self.stats.columns))
        names = list(dict.fromkeys(self.stats.index.get_level_values("normaliser")))
        return self.stats[column].unstack("normaliser")[names]


def sensitivity_sweep(
    logits, temperatures: Sequence[float], eps: float, seed: int = 0, names: Iterable[str] | None = None
) -> SensitivitySweep:
    """``g = ||f((l + eps v)/T) - f(l/T)||_2 / eps`` per row (:func:`attn_lib.jacobian.sensitivity`, seeded unit
    directions ``v``) for each normaliser and temperature, reduced over rows.

    Parameters
    ----------
    logits : array (n_rows, L)
        Float64 logit rows.
    temperatures : sequence of float > 0
    eps : float > 0
    seed : int >= 0
        Seed of the directions.
    names : iterable of str, optional
        Default: the compared ones, ``normalizers.available(compared=True)``.

    Returns
    -------
    SensitivitySweep
    """
    X = np.asarray(logits, dtype=np.float64)
    if X.ndim != 2 or X.shape[1] < 1 or X.shape[0] < 1:
        raise ValueError(f"logits must have shape (n_rows, L) with n_rows, L >= 1 (got {X.shape})")
    temps = [check_positive("temperatures", t) for t in temperatures]
    if not temps:
        raise ValueError("temperatures must be a non-empty sequence of numbers > 0")
    e = check_positive("eps", eps)
    seed = check_int("seed", seed, low=0)
    records = []
    for t in temps:
        for name in _names(names):
            g = np.asarray(jacobian.sensitivity(X, t, e, normalizer=normalizers.get(name), seed=seed))
            bound = sensitivity_bound(name, t, e, X.shape[1]) if name in SENSITIVITY_BOUNDED else float("nan")
            records.append(
                {
                    "T": t,
                    "normaliser": name,
                    "mean": g.mean(),
                    "max": g.max(),
                    "zero share": (g == 0).mean(),
                    "bound": bound,
                }
            )
    return SensitivitySweep(
        eps=e,
        seed=seed,
        n_rows=X.shape[0],
        length=X.shape[1],
        stats=pd.DataFrame(records).set_index(["T", "normaliser"]),
    )


def figure_sensitivity(sweep: SensitivitySweep) -> Figure:
    """Mean sensitivity over rows against ``T`` on log-log axes, with ``1/(2T)`` and ``1/T``; a mean of exactly 0
    (every row frozen) is left out.

    Parameters
    ----------
    sweep : SensitivitySweep

    Returns
    -------
    matplotlib Figure (not managed by pyplot).
    """
    if not isinstance(sweep, SensitivitySweep):
        raise ValueError(f"sweep must be a SensitivitySweep (from sensitivity_sweep), got {type(sweep).__name__}")
    mean = sweep.table("mean")
    T = mean.index.to_numpy(dtype=float)
    fig = Figure(figsize=(FIGURE_WIDTH_IN, 4.4))
    ax = fig.subplots()
    for name in mean.columns:
        ax.plot(T, mean[name].where(mean[name] > 0), "o-", ms=3, color=_color(name), label=name)
    ax.plot(T, 1 / (2 * T), "k:", lw=1, label=r"$1/(2T)$")
    ax.plot(T, 1 / T, "k--", lw=0.8, label=r"$1/T$")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("temperature T")
    ax.set_ylabel(r"mean of $\|\Delta\alpha\|_2/\varepsilon$ over rows")
    ax.set_title(
        f"Sensitivity against T ({sweep.n_rows} rows of {sweep.length} N(0,1) logits, ε = {sweep.eps:g})", fontsize=10
    )
    ax.legend(fontsize=7, ncol=2)
    ax.grid(alpha=0.3)
    return _label(fig, f"synthetic logits, N(0, 1), L = {sweep.length}", sweep.seed)


def render_normalisers(temperature: float, *, row, seed: int, names: Iterable[str] | None = None) -> Figure:
    """The temperature slider's figure: the weights of one logit row under each normaliser, one panel each, with
    the largest weight, the support and the row sum in the panel's title.

    Parameters
    ----------
    temperature : float > 0
    row : array (L,)
        Logits, shown in the given order (the chapter sorts them in decreasing order).
    seed : int >= 0
        Seed that drew ``row`` (for the provenance label).
    names : iterable of str, optional
        At most 8 normalisers (default: the compared ones, ``normalizers.available(compared=True)``).

    Returns
    -------
    matplotlib Figure (not managed by pyplot).
    """
    T = check_positive("temperature", temperature)
    names = _names(names)
    if len(names) > 8:
        raise ValueError(f"names must list at most 8 normalisers (got {len(names)})")
    l = np.asarray(row, dtype=np.float64)
    if l.ndim != 1 or l.size < 1:
        raise ValueError(f"row must be a 1-d array of logits (got shape {l.shape})")
    fig = Figure(figsize=(FIGURE_WIDTH_IN, 8.4))
    axes = fig.subplots(4, 2, sharex=True, sharey=True)
    for ax, name in zip(axes.ravel(), names):
        w = normalizers.get(name)(l, temperature=T)
        ax.bar(np.arange(1, l.size + 1), w, color=_color(name))
        ax.set_title(f"{name}\nmax {w.max():.2f} · support {(w > 0).sum()} · sum {w.sum():.2f}", fontsize=8)
        ax.set_ylim(0, 1)
        ax.grid(alpha=0.3, axis="y")
    for ax in axes.ravel()[len(names) :]:
        ax.set_visible(False)
    for ax in axes[-1]:
        ax.set_xlabel("token (logits in decreasing order)", fontsize=8)
    fig.suptitle(f"Weights of one row of {l.size} N(0,1) logits at T = {T:g}", fontsize=10)
    fig.tight_layout()
    return _label(fig, f"synthetic logit row, N(0, 1), L = {l.size}", check_int("seed", seed, low=0))


# ---- the normaliser swapped inside a live model ----------------------------------------------------------
def row_stats(layer_attention, batch: int = 0) -> dict[str, torch.Tensor]:
    r"""Per-row statistics of one captured layer, in float64.

    Parameters
    ----------
    layer_attention : attn_lib.capture.LayerAttention
        With ``weights`` and ``logits`` of shape ``(B, H, Lq, Lk)``.
    batch : int
        Batch element.

    Returns
    -------
    dict of Tensor (H, Lq)
        ``entropy`` (:math:`-\sum_j \alpha_j \log \alpha_j`, nats, with ``0 log 0 = 0``), ``max``, ``support``
        (weights > 0), ``sum`` and ``max_logit`` (largest visible logit).
    """
    weights, logits = getattr(layer_attention, "weights", None), getattr(layer_attention, "logits", None)
    if not isinstance(weights, torch.Tensor) or not isinstance(logits, torch.Tensor) or weights.ndim != 4:
        raise ValueError("layer_attention must be a LayerAttention with weights and logits of shape (B, H, Lq, Lk)")
    b = check_int("batch", batch, low=0, high=weights.shape[0] - 1)
    w = weights[b].to(torch.float64)
    plogp = torch.where(w > 0, w * torch.log(w.clamp_min(1e-300)), torch.zeros((), dtype=w.dtype))
    return {
        "entropy": -plogp.sum(-1),
        "max": w.amax(-1),
        "support": (w > 0).sum(-1).to(torch.float64),
        "sum": w.sum(-1),
        "max_logit": logits[b].amax(-1).to(torch.float64),
    }


@dataclasses.dataclass(frozen=True)
class SwapResult:
    """What :func:`normaliser_swap` measured.

    Attributes
    ----------
    layers : DataFrame
        One row per (normaliser, layer): ``normaliser``, ``layer``, and the means over heads and query rows 2..L of
        ``entropy``, ``max`` and ``support``; plus ``model``, ``model_id``, ``text``, ``device`` (provenance) and
        ``length``.
    first : dict
        ``{normaliser: row_stats of layer 0}`` (tensors ``(H, L)``).
    loss : dict
        ``{normaliser: next-token cross-entropy (nats) on the window}``.
    """

    layers: pd.DataFrame
    first: dict
    loss: dict


def _swap_label(name: str | None) -> str:
    return name or "softmax (model)"


def normaliser_swap(
    handle, input_ids, swaps: Sequence[str | None] = (None, "ssmax", "entmax15", "sparsemax"), *, text: str = ""
) -> SwapResult:
    """Run the model once per normaliser, with softmax replaced inside every attention layer
    (:func:`attn_lib.capture.capture_attention` with ``normalizer=name``), and reduce each layer to row statistics.

    Parameters
    ----------
    handle : attn_lib.models.ModelHandle
    input_ids : Tensor (1, L)
        One window of token ids, ``L >= 2``.
    swaps : sequence of str or None
        Normaliser names; ``None`` keeps the model's own softmax (labelled ``"softmax (model)"``).
    text : str
        What the window is (for the provenance columns), e.g. ``"War and Peace, first 256 tokens"``.

    Returns
    -------
    SwapResult
    """
    if (
        not isinstance(input_ids, torch.Tensor)
        or input_ids.ndim != 2
        or input_ids.shape[0] != 1
        or input_ids.shape[1] < 2
    ):
        raise ValueError("input_ids must be a (1, L) tensor of token ids with L >= 2")
    swaps = list(swaps)
    if not swaps:
        raise ValueError("swaps must list at least one normaliser name (or None for the model's softmax)")
    for name in swaps:
        if name is not None:
            check_choice("swaps", name, normalizers.available())
    meta = {
        "model": handle.describe(),
        "model_id": getattr(handle, "model_id", handle.describe()),
        "text": text or f"{input_ids.shape[1]} tokens",
        "device": str(handle.device),
        "length": int(input_ids.shape[1]),
    }
    per_layer, first, loss = [], {}, {}
    for name in swaps:
        label = _swap_label(name)

        def keep(la, label=label):
            st = row_stats(la)
            if la.layer == 0:
                first[label] = st
            per_layer.append(
                {
                    "normaliser": label,
                    "layer": la.layer,
                    **{k: float(st[k][:, 1:].mean()) for k in ("entropy", "max", "support")},
                    **meta,
                }
            )

        out = capture_attention(handle, input_ids, keep, normalizer=name, keep_qk=False)
        target = input_ids[0, 1:].to(out.logits.device)
        loss[label] = float(torch.nn.functional.cross_entropy(out.logits[0, :-1].float(), target))
    return SwapResult(layers=pd.DataFrame(per_layer), first=first, loss=loss)
