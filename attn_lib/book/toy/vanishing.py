r"""Synthetic rows for the chapter on vanishing attention: Lemma 1 and Corollary 1 (see the book's appendix
"Reading the paper", §Lemma 1 and §Corollary 1).

Three positive normalisers ``alpha_j = F(z_j) / sum_k F(z_k)`` with ``z = l / T`` (:data:`FAMILIES`), bounded
logits ``l_j in [-a, a]``: uniform draws and the extreme configuration that attains Lemma 1's constants as ``L``
grows, the constants ``C1, C2`` and the quantities ``L min_i alpha_i`` and ``L max_i alpha_i`` checked against
them, Corollary 1 on random queries and keys, the chapter's figure and its temperature slider, and display helpers
for the SymPy derivation. Everything runs on the CPU in float64; every random draw comes from an explicit ``seed``.
"""

from __future__ import annotations

import dataclasses
import functools
import types
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import sympy as sp
import torch
from matplotlib.figure import Figure

from attn_lib import normalizers, theory
from attn_lib._validation import check_choice, check_int, check_positive, check_seed
from attn_lib.layout import FIGURE_WIDTH_IN
from attn_lib.provenance import label_figure

__all__ = [
    "Family",
    "rational",
    "FAMILIES",
    "SOFTMAX",
    "random_logits",
    "extreme_logits",
    "constants",
    "random_check",
    "LmaxCurves",
    "lmax_curves",
    "figure_lmax",
    "figure_temperature",
    # render_temperature: not exported to attn_lib.book.toy (each topic module has its own); call it by module
    "corollary1_table",
    "resolve_min_max",
    "latex_relations",
]

#: Device of every computation here (numpy / torch on the CPU, float64).
DEVICE = "cpu"


def rational(z):
    """``F(z) = 1 + z**2``: positive, smallest at ``z = 0``, largest at ``|z|`` maximal (numpy or torch)."""
    return 1 + z**2


def _scaled(F: Callable, temperature: float, logits):
    return F(logits / temperature)


@dataclasses.dataclass(frozen=True)
class Family:
    """A positive normaliser ``alpha_j = F(z_j) / sum_k F(z_k)``, ``z = l / T``, of Lemma 1.

    Attributes
    ----------
    name : str
        Label used in the chapter's tables and legends.
    F : callable
        Elementwise ``F(z)`` (numpy or torch), strictly positive.
    normalizer : callable
        The :mod:`attn_lib.normalizers` function ``f(logits, temperature=T)`` computing the weights.
    peak, trough : float
        Where ``F(l / T)`` is largest and smallest on ``[-a, a]``, in units of ``a`` (the same for every ``a`` and
        ``T > 0``: the three families are monotone or even in ``z``).
    """

    name: str
    F: Callable
    normalizer: Callable
    peak: float
    trough: float

    def at(self, temperature: float) -> Callable:
        """``l -> F(l / T)``: the function whose extrema on ``[-a, a]`` give Lemma 1's constants."""
        return functools.partial(_scaled, self.F, check_positive("temperature", temperature))

    def weights(self, logits, temperature: float):
        """The weights ``alpha`` of one row ``logits`` (shape ``(L,)``) at temperature ``T``; shape ``(L,)``."""
        return self.normalizer(logits, temperature=temperature)


#: Name of the softmax family (``F = exp``).
SOFTMAX = "softmax, F = exp"

#: The three positive normalisers of the chapter's check, in display order.
FAMILIES: Mapping[str, Family] = types.MappingProxyType(
    {
        SOFTMAX: Family(SOFTMAX, torch.exp, normalizers.softmax, peak=1.0, trough=-1.0),
        "softplus": Family("softplus", torch.nn.functional.softplus, normalizers.get("general"), peak=1.0, trough=-1.0),
        "rational, F = 1 + z²": Family(
            "rational, F = 1 + z²", rational, normalizers.get("general", F=rational), peak=1.0, trough=0.0
        ),
    }
)


# ---- argument checks -------------------------------------------------------------------------------------
def _lengths(lengths: Any) -> np.ndarray:
    try:
        arr = np.asarray(lengths).ravel()
    except (TypeError, ValueError):
        raise ValueError(f"lengths must be a non-empty sequence of integers >= 1 (got {lengths!r})") from None
    if arr.size == 0:
        raise ValueError("lengths must be a non-empty sequence of integers >= 1 (got an empty sequence)")
    return np.array([check_int("lengths", v.item() if hasattr(v, "item") else v, low=1) for v in arr], dtype=int)


def _families(families: Iterable[str] | None) -> list[Family]:
    if families is None:
        return list(FAMILIES.values())
    if isinstance(families, str):
        families = [families]
    chosen = [FAMILIES[check_choice("families", name, tuple(FAMILIES))] for name in families]
    if not chosen:
        raise ValueError(f"families must name at least one of {list(FAMILIES)} (got an empty sequence)")
    return chosen


def _family(family: str | Family) -> Family:
    if isinstance(family, Family):
        return family
    return FAMILIES[check_choice("family", family, tuple(FAMILIES))]


def _data_label(a: float) -> str:
    return f"synthetic logits, uniform on [-{a:g}, {a:g}]"


# ---- rows ------------------------------------------------------------------------------------------------
def random_logits(lengths: Sequence[int], a: float, seed: int = 0) -> dict[int, np.ndarray]:
    """One row of logits uniform on ``[-a, a]`` per length, drawn in order from ``default_rng(seed)``.

    Parameters
    ----------
    lengths : sequence of int >= 1
        Context lengths ``L``.
    a : float > 0
        Logit bound.
    seed : int >= 0

    Returns
    -------
    dict
        ``{L: ndarray (L,)}``, float64.
    """
    Ls = _lengths(lengths)
    a = check_positive("a", a)
    rng = np.random.default_rng(check_seed("seed", seed))
    return {int(L): rng.uniform(-a, a, size=int(L)) for L in Ls}


def extreme_logits(family: str | Family, L: int, a: float, largest: bool = True) -> np.ndarray:
    """The worst case of Lemma 1: one logit where ``F`` is largest and ``L - 1`` where it is smallest.

    Chapter 1, ``prop-lemma1-sharp``; tested by
    ``tests/test_toy_vanishing.py::TestExtremeLogits::test_largest_weight_is_the_closed_form``.

    With ``largest=False`` the mirror image: one logit where ``F`` is smallest, the rest where it is largest. As
    ``L`` grows, ``L max_i alpha_i`` (resp. ``L min_i alpha_i``) of these rows tends to ``C2`` (resp. ``C1``).

    Parameters
    ----------
    family : str or Family
        A key of :data:`FAMILIES`.
    L : int >= 1
    a : float > 0
    largest : bool

    Returns
    -------
    ndarray (L,)
        Float64 logits in ``[-a, a]``; the special one is at index 0.
    """
    fam = _family(family)
    L = check_int("L", L, low=1)
    a = check_positive("a", a)
    top, rest = fam.peak * a, fam.trough * a
    if not largest:
        top, rest = rest, top
    logits = np.full(L, rest, dtype=np.float64)
    logits[0] = top
    return logits


# ---- constants and checks --------------------------------------------------------------------------------
def constants(a: float, temperature: float, families: Iterable[str] | None = None) -> pd.DataFrame:
    """Lemma 1's constants ``C1 = m_F / M_F`` and ``C2 = M_F / m_F`` of each family, found numerically.

    Parameters
    ----------
    a : float > 0
        Logit bound.
    temperature : float > 0
    families : iterable of str, optional
        Keys of :data:`FAMILIES` (default: all three).

    Returns
    -------
    DataFrame
        Index ``family``; columns ``C1``, ``C2`` (from :func:`attn_lib.theory.lemma1_constants`).
    """
    a = check_positive("a", a)
    T = check_positive("temperature", temperature)
    rows = {fam.name: theory.lemma1_constants(fam.at(T), a) for fam in _families(families)}
    out = pd.DataFrame.from_dict(rows, orient="index", columns=["C1", "C2"])
    out.index.name = "family"
    return out


def random_check(
    a: float,
    temperature: float,
    lengths: Sequence[int],
    draws: int,
    seed: int = 0,
    families: Iterable[str] | None = None,
) -> pd.DataFrame:
    """``L min_i alpha_i``, ``L max_i alpha_i`` and the row sum on rows of logits uniform on ``[-a, a]``.

    One ``default_rng(seed)`` serves every family, length and draw, in that order.

    Parameters
    ----------
    a : float > 0
    temperature : float > 0
    lengths : sequence of int >= 1
    draws : int >= 1
        Rows per length and family.
    seed : int >= 0
    families : iterable of str, optional
        Keys of :data:`FAMILIES` (default: all three).

    Returns
    -------
    DataFrame
        One row per (family, L, draw): columns ``family``, ``L``, ``draw``, ``L·min α``, ``L·max α``, ``row sum``.
    """
    a = check_positive("a", a)
    T = check_positive("temperature", temperature)
    Ls = _lengths(lengths)
    draws = check_int("draws", draws, low=1)
    rng = np.random.default_rng(check_seed("seed", seed))
    rows = []
    for fam in _families(families):
        for L in Ls:
            for k in range(draws):
                alpha = fam.weights(rng.uniform(-a, a, size=int(L)), T)
                rows.append(
                    {
                        "family": fam.name,
                        "L": int(L),
                        "draw": k,
                        "L·min α": L * alpha.min(),
                        "L·max α": L * alpha.max(),
                        "row sum": alpha.sum(),
                    }
                )
    return pd.DataFrame(rows)


@dataclasses.dataclass(frozen=True)
class LmaxCurves:
    """``L max_i alpha_i`` against ``L`` for the chapter's figure (see :func:`lmax_curves`).

    Attributes
    ----------
    a, temperature : float
    seed : int
    constants : DataFrame
        Index family; columns ``C1``, ``C2``.
    random : DataFrame
        Index ``L``, one column per family: ``L max_i alpha_i`` on one uniform row per length.
    worst_max : DataFrame
        Same shape: ``L max_i alpha_i`` on :func:`extreme_logits` (``largest=True``).
    worst_min : DataFrame
        Same shape: ``L min_i alpha_i`` on the mirrored worst case (``largest=False``).
    ssmax_worst : Series
        Index ``L``: ``L max_i alpha_i`` of SSMax on the softmax worst case.
    """

    a: float
    temperature: float
    seed: int
    constants: pd.DataFrame
    random: pd.DataFrame
    worst_max: pd.DataFrame
    worst_min: pd.DataFrame
    ssmax_worst: pd.Series

    @property
    def lengths(self) -> np.ndarray:
        """The context lengths, shape ``(n,)``."""
        return self.random.index.to_numpy()


def _l_times(weights, L: int, reduce: str) -> float:
    w = np.asarray(weights, dtype=np.float64)
    return float(L * (w.max() if reduce == "max" else w.min()))


def lmax_curves(
    a: float, temperature: float, lengths: Sequence[int], seed: int = 0, families: Iterable[str] | None = None
) -> LmaxCurves:
    """Compute the curves of the chapter's figure.

    Parameters
    ----------
    a : float > 0
        Logit bound.
    temperature : float > 0
    lengths : sequence of int >= 1
    seed : int >= 0
        Seed of :func:`random_logits` (one row per length, shared by every family and temperature).
    families : iterable of str, optional
        Keys of :data:`FAMILIES` (default: all three).

    Returns
    -------
    LmaxCurves
    """
    a = check_positive("a", a)
    T = check_positive("temperature", temperature)
    fams = _families(families)
    rows = random_logits(lengths, a, seed)
    index = pd.Index(list(rows), name="L")
    random, worst_max, worst_min = ({f.name: [] for f in fams} for _ in range(3))
    for fam in fams:
        for L, logits in rows.items():
            random[fam.name].append(_l_times(fam.weights(logits, T), L, "max"))
            worst_max[fam.name].append(_l_times(fam.weights(extreme_logits(fam, L, a), T), L, "max"))
            worst_min[fam.name].append(_l_times(fam.weights(extreme_logits(fam, L, a, largest=False), T), L, "min"))
    ssmax = normalizers.get("ssmax")
    ssmax_worst = pd.Series(
        [_l_times(ssmax(extreme_logits(SOFTMAX, L, a), temperature=T), L, "max") for L in rows],
        index=index,
        name="SSMax",
    )
    return LmaxCurves(
        a=a,
        temperature=T,
        seed=int(seed),
        constants=constants(a, T, [f.name for f in fams]),
        random=pd.DataFrame(random, index=index),
        worst_max=pd.DataFrame(worst_max, index=index),
        worst_min=pd.DataFrame(worst_min, index=index),
        ssmax_worst=ssmax_worst,
    )


# ---- figures ---------------------------------------------------------------------------------------------
def _log_axes(ax, ylabel: str = r"$L\cdot\max_i \alpha_i$") -> None:
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("context length L")
    ax.set_ylabel(ylabel)


def figure_lmax(curves: LmaxCurves) -> Figure:
    """Lemma 1's figure: ``L max_i alpha_i`` on random rows (solid) and the worst case (dotted) for each family,
    its ``C2`` (dashed), and SSMax on the worst case (grey), on log-log axes.

    Parameters
    ----------
    curves : LmaxCurves

    Returns
    -------
    matplotlib Figure (not managed by pyplot; show it with :func:`attn_lib.book.chapter.show_figure`).
    """
    if not isinstance(curves, LmaxCurves):
        raise ValueError(f"curves must be an LmaxCurves (from lmax_curves), got {type(curves).__name__}")
    fig = Figure(figsize=(FIGURE_WIDTH_IN, 4.2))
    ax = fig.subplots()
    Ls = curves.lengths
    for name, color in zip(curves.random.columns, ["C0", "C1", "C2"]):
        ax.plot(Ls, curves.random[name], "o-", ms=3, color=color, label=f"{name}: random logits")
        ax.plot(Ls, curves.worst_max[name], ":", color=color, label="    worst case")
        ax.axhline(curves.constants.loc[name, "C2"], ls="--", lw=1, color=color)
    ax.plot(Ls, curves.ssmax_worst, "-", color="0.5", label="SSMax (L among its parameters): worst case")
    _log_axes(ax)
    ax.set_title(
        f"Lemma 1: $L\\cdot\\max_i\\alpha_i$ stays below $C_2$ (dashed); a = {curves.a:g}, T = {curves.temperature:g}"
    )
    ax.legend(fontsize=7, loc="upper left")
    return label_figure(fig, model="none", text=_data_label(curves.a), device=DEVICE, seed=curves.seed)


def figure_temperature(curves: LmaxCurves) -> Figure:
    """One frame of the temperature slider: softmax's ``L max_i alpha_i`` on random rows and on the worst case,
    the trivial bound ``L`` and ``C2 = e^{2a/T}``.

    Parameters
    ----------
    curves : LmaxCurves
        With the softmax family among its columns.

    Returns
    -------
    matplotlib Figure (not managed by pyplot).
    """
    if not isinstance(curves, LmaxCurves) or SOFTMAX not in curves.random:
        raise ValueError(f"curves must be an LmaxCurves with the family {SOFTMAX!r} (from lmax_curves)")
    fig = Figure(figsize=(FIGURE_WIDTH_IN, 4))
    ax = fig.subplots()
    Ls = curves.lengths
    C2 = curves.constants.loc[SOFTMAX, "C2"]
    ax.plot(Ls, curves.random[SOFTMAX], "o-", ms=3, label="random logits")
    ax.plot(Ls, curves.worst_max[SOFTMAX], ":", color="C3", label="worst case")
    ax.plot(Ls, Ls, "-", lw=0.8, color="0.6", label=r"$L\cdot\max_i\alpha_i \leq L$ (trivial)")
    ax.axhline(C2, ls="--", color="C3", lw=1, label=rf"$C_2 = e^{{2a/T}}$ = {C2:.3g}")
    _log_axes(ax)
    ax.set_ylim(0.5, 3e5)
    ax.set_title(f"softmax, a = {curves.a:g}, temperature T = {curves.temperature:g}")
    ax.legend(fontsize=8, loc="upper left")
    return label_figure(fig, model="none", text=_data_label(curves.a), device=DEVICE, seed=curves.seed)


def render_temperature(temperature: float, *, a: float, lengths: Sequence[int], seed: int = 0) -> Figure:
    """The temperature slider's figure at ``T``: :func:`figure_temperature` of softmax's :func:`lmax_curves`.

    Parameters
    ----------
    temperature : float > 0
    a : float > 0
    lengths : sequence of int >= 1
    seed : int >= 0

    Returns
    -------
    matplotlib Figure
    """
    return figure_temperature(lmax_curves(a, temperature, lengths, seed, families=[SOFTMAX]))


# ---- Corollary 1 -----------------------------------------------------------------------------------------
def corollary1_table(dim: int, lengths: Sequence[int], temperature: float, seed: int = 0) -> pd.DataFrame:
    r"""Softmax on random queries and keys against Corollary 1's bounds.

    For each ``L`` in order, draws ``q ~ N(0, I_d)`` and ``K ~ N(0, I_d)^L`` from one seeded
    :class:`torch.Generator` (float64), computes ``alpha = softmax(K q / T)`` and
    ``Delta = ||q||_2 max_j ||k_j||_2`` (:func:`attn_lib.theory.corollary1_delta`), and the bounds
    ``e^{-2 Delta/T}/L`` and ``e^{2 Delta/T}/L`` (:func:`attn_lib.theory.corollary1_bounds`).

    Parameters
    ----------
    dim : int >= 1
        Dimension ``d`` of queries and keys.
    lengths : sequence of int >= 1
    temperature : float > 0
    seed : int >= 0

    Returns
    -------
    DataFrame
        Index ``L``; columns ``Δ``, ``max |l_j|``, ``min α``, ``max α``, ``lower``, ``upper`` and, for display,
        ``Δ/T``, ``max |l_j|/T``, ``L·min α``, ``L·max α``, ``e^(2Δ/T) = L·upper``.
    """
    d = check_int("dim", dim, low=1)
    Ls = _lengths(lengths)
    T = check_positive("temperature", temperature)
    gen = torch.Generator().manual_seed(check_seed("seed", seed))
    rows = []
    for L in Ls:
        q = torch.randn(d, generator=gen, dtype=torch.float64)
        K = torch.randn(int(L), d, generator=gen, dtype=torch.float64)
        logits = (K @ q).numpy()
        alpha = normalizers.softmax(logits, temperature=T)
        delta = theory.corollary1_delta(q, K)
        lower, upper = theory.corollary1_bounds(int(L), delta, T)
        top = float(np.abs(logits).max())
        rows.append(
            {
                "L": int(L),
                "Δ": delta,
                "max |l_j|": top,
                "min α": alpha.min(),
                "max α": alpha.max(),
                "lower": lower,
                "upper": upper,
                "Δ/T": delta / T,
                "max |l_j|/T": top / T,
                "L·min α": L * alpha.min(),
                "L·max α": L * alpha.max(),
                "e^(2Δ/T) = L·upper": L * upper,
            }
        )
    return pd.DataFrame(rows).set_index("L")


# ---- SymPy display helpers -------------------------------------------------------------------------------
def _pick(node: sp.Basic) -> sp.Basic:
    """The argument of a ``Min``/``Max`` node that SymPy proves extreme, or the node itself if it cannot."""
    smaller = isinstance(node, sp.Min)
    best = node.args[0]
    for other in node.args[1:]:
        diff = sp.simplify(other - best)
        if diff.is_negative if smaller else diff.is_positive:
            best = other
        elif not (diff.is_nonnegative if smaller else diff.is_nonpositive):
            return node
    return best


def resolve_min_max(expr: Any) -> sp.Basic:
    r"""Replace every ``Min``/``Max`` in ``expr`` whose arguments SymPy can order by the extreme argument.

    SymPy leaves ``Min(exp(-a/T), exp(a/T))`` unevaluated even for positive ``a`` and ``T``; the order follows
    from the sign of the simplified difference (here ``-2 sinh(a/T) < 0``), which SymPy decides from the symbols'
    assumptions. A ``Min``/``Max`` whose order SymPy cannot decide is kept.

    Parameters
    ----------
    expr : SymPy expression or relational

    Returns
    -------
    SymPy expression of the same kind, e.g. ``exp(-a/T)`` for ``Min(exp(-a/T), exp(a/T))`` with ``a, T > 0``.
    """
    try:
        expr = sp.sympify(expr, strict=True)
    except sp.SympifyError:
        raise ValueError(f"expr must be a SymPy expression (got {expr!r})") from None
    if not isinstance(expr, sp.Basic):
        raise ValueError(f"expr must be a SymPy expression (got {expr!r})")
    return expr.replace(lambda e: isinstance(e, (sp.Min, sp.Max)), _pick)


def latex_relations(label: str, relations: Sequence[Any]) -> str:
    r"""LaTeX for a text label followed by SymPy relations side by side: ``\text{label}\quad r_1,\qquad r_2``.

    Parameters
    ----------
    label : str
    relations : non-empty sequence of SymPy objects

    Returns
    -------
    str
        For :class:`IPython.display.Math`.
    """
    if not isinstance(label, str):
        raise ValueError(f"label must be a string (got {label!r})")
    if isinstance(relations, (str, bytes, sp.Basic)) or not isinstance(relations, Sequence) or not relations:
        raise ValueError(f"relations must be a non-empty sequence of SymPy objects (got {relations!r})")
    body = r",\qquad ".join(sp.latex(r) for r in relations)
    return rf"\text{{{label}}}\quad {body}"
