r"""Synthetic instances, the sink-token sequence and their figures for the chapter on top-:math:`N` selection and
the distance bound (Theorem 1 and Corollary 2; see the book's appendix "Reading the paper", §Theorem 1(a) and
§Corollary 2): random rows and instances for Theorem 1(a) and fact 1 of Corollary 2, the tight case, small cases
enumerated exactly for Theorem 1(b), a row with an attention sink for Corollary 2 as ``L`` grows, every quantity
against ``N`` for the slider, and the SymPy results of :mod:`attn_lib.book.symbolic` as display lines.

Everything here is float64 NumPy on the CPU with explicit seeds, built on the one-row references of
:mod:`attn_lib.theory`; the functions only draw instances and collect the quantities into tables. The chapter
asserts the inequalities on those tables, so that a failing check shows in the chapter itself.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
import pandas as pd
import sympy as sp
from matplotlib.figure import Figure

from attn_lib import theory
from attn_lib._validation import check_int, check_positive
from attn_lib.layout import FIGURE_WIDTH_IN
from attn_lib.provenance import label_figure

__all__ = [
    "random_row",
    "theorem1_instances",
    "theorem1_tight_case",
    "enumeration_cases",
    "enumeration_errors",
    "sink_row",
    "corollary2_sequence",
    "figure_corollary2_sequence",
    "top_n_curves",
    "figure_top_n",
    "theorem1_steps_latex",
    "random_variance_latex",
    "corollary2_limits_latex",
    "corollary2_remainder_latex",
]

#: Colour and line style of each quantity in the figures of this module.
STYLES = {
    "d~": ("tab:green", "-"),
    "E2": ("tab:cyan", "--"),
    "E1": ("tab:blue", "-"),
    "E1 + gap": ("tab:blue", ":"),
    "Monte Carlo": ("navy", "-."),
    "d_max": ("tab:red", "-"),
    "(1+N) max||x||": ("0.4", "--"),
}


def _seed(seed: Any) -> int:
    return check_int("seed", seed, low=0)


# ---- instances -------------------------------------------------------------------------------------------------
def random_row(L: int, d: int, *, logit_scale: float = 1.5, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    r"""One random row: :math:`\alpha=\mathrm{softmax}(c\,g)` with :math:`g\sim\mathcal N(0,I_L)` and Gaussian vectors.

    Parameters
    ----------
    L : int >= 1
        Number of tokens.
    d : int >= 1
        Dimension of the vectors.
    logit_scale : float > 0
        The factor ``c`` of the standard normal logits (larger: sharper weights).
    seed : int >= 0
        Seed of :func:`numpy.random.default_rng`; the logits are drawn first, then the vectors.

    Returns
    -------
    alpha : ndarray (L,)
        Weights, non-negative and summing to one.
    X : ndarray (L, d)
        Standard normal vectors.
    """
    L, d = check_int("L", L, low=1), check_int("d", d, low=1)
    scale = check_positive("logit_scale", logit_scale)
    rng = np.random.default_rng(_seed(seed))
    alpha = theory.softmax_np(rng.normal(size=L) * scale)
    return alpha, rng.normal(size=(L, d))


def theorem1_instances(n_instances: int = 20_000, *, batch: int = 50, seed: int = 0) -> pd.DataFrame:
    r"""Random instances for Theorem 1(a) and fact 1 of Corollary 2, in groups of ``batch`` rows.

    Each group draws a length :math:`L\in[2,60]`, a top-:math:`N` size :math:`N\in[1,L-1]` and a dimension
    :math:`d\in[2,16]`; each of its rows has softmax weights of random sharpness (logits :math:`\mathcal N(0,1)`
    times :math:`10^u`, :math:`u\sim\mathcal U(-1,2)`) and Gaussian vectors of random scale
    (:math:`10^v`, :math:`v\sim\mathcal U(-1,1)`).

    Parameters
    ----------
    n_instances : int
        Number of rows, a positive multiple of ``batch``.
    batch : int >= 1
        Rows per ``(L, N, d)`` group.
    seed : int >= 0
        Seed of the single :func:`numpy.random.default_rng` stream that draws everything.

    Returns
    -------
    DataFrame (n_instances rows)
        Columns ``group, L, N, d``; ``d_tilde`` (:func:`attn_lib.theory.distance`), ``d_max``
        (:func:`attn_lib.theory.theorem1_dmax`) and ``lin_lower``, ``lin_upper`` (the two sides of fact 1,
        :func:`attn_lib.theory.corollary2_linear_bounds`).
    """
    batch = check_int("batch", batch, low=1)
    n_instances = check_int("n_instances", n_instances, low=batch)
    if n_instances % batch:
        raise ValueError(f"n_instances must be a positive multiple of batch = {batch} (got {n_instances})")
    rng = np.random.default_rng(_seed(seed))
    parts = []
    for g in range(n_instances // batch):
        L = int(rng.integers(2, 61))
        N = int(rng.integers(1, L))
        d = int(rng.integers(2, 17))
        sharp = 10 ** rng.uniform(-1, 2, size=(batch, 1))
        alpha = theory.softmax_np(rng.normal(size=(batch, L)) * sharp)
        X = rng.normal(size=(batch, L, d)) * 10 ** rng.uniform(-1, 1, size=(batch, 1, 1))
        lo, hi = theory.corollary2_linear_bounds(alpha, X, N)
        parts.append(
            pd.DataFrame(
                {
                    "group": g,
                    "L": L,
                    "N": N,
                    "d": d,
                    "d_tilde": theory.distance(alpha, X, N),
                    "d_max": theory.theorem1_dmax(alpha, X, N),
                    "lin_lower": lo,
                    "lin_upper": hi,
                }
            )
        )
    return pd.concat(parts, ignore_index=True)


def theorem1_tight_case(logits=(1, 2, 5, 10, 20, 40), *, L: int = 16, d: int = 8, seed: int = 0) -> pd.DataFrame:
    r"""The case in which Theorem 1(a) is tight: one token with logit ``c``, all others ``0``, and ``N = 1``.

    The vectors are standard normal, and the first one is rescaled to twice the largest norm, so that the
    selected token is the longest. As ``c`` grows, :math:`\tilde d/d_{\max}\to1`.

    Parameters
    ----------
    logits : sequence of float
        The logits ``c`` of the first token, one row of the table each (at least one).
    L : int >= 2
        Number of tokens.
    d : int >= 1
        Dimension of the vectors.
    seed : int >= 0
        Seed of the vectors.

    Returns
    -------
    DataFrame (len(logits) rows, index ``logit c``)
        Columns ``abar_N`` (the selected mass), ``d~``, ``d_max`` and ``d~/d_max``.
    """
    L, d = check_int("L", L, low=2), check_int("d", d, low=1)
    cs = np.asarray(logits, dtype=np.float64).ravel()
    if cs.size == 0 or not np.all(np.isfinite(cs)):
        raise ValueError(f"logits must be a non-empty sequence of finite numbers (got {logits!r})")
    rng = np.random.default_rng(_seed(seed))
    X = rng.normal(size=(L, d))
    X[0] *= 2 * np.linalg.norm(X, axis=1).max() / np.linalg.norm(X[0])
    rows = []
    for c in logits:
        z = np.zeros(L)
        z[0] = c
        a = theory.softmax_np(z)
        dt, dm = theory.distance(a, X, 1), theory.theorem1_dmax(a, X, 1)
        rows.append({"logit c": c, "abar_N": a[0], "d~": dt, "d_max": dm, "d~/d_max": dt / dm})
    return pd.DataFrame(rows).set_index("logit c")


def enumeration_cases(n_cases: int = 300, *, mc_samples: int = 256, seed: int = 0) -> pd.DataFrame:
    r"""Small random cases (:math:`3\le L\le8`) in which :math:`\mathbb E_{I_N}[\tilde d]` is known exactly.

    Each case draws ``L``, ``N`` in ``[1, L-1]``, ``d`` in ``[2, 8]``, softmax weights of random sharpness and
    Gaussian vectors, and evaluates every form of Theorem 1(b) with :mod:`attn_lib.theory`. The Monte-Carlo
    estimate of case ``k`` uses the seed ``seed + k``.

    Parameters
    ----------
    n_cases : int >= 1
        Number of cases.
    mc_samples : int >= 2
        Random subsets of the Monte-Carlo estimate (two at least, for its standard error).
    seed : int >= 0
        Seed of the stream that draws the cases.

    Returns
    -------
    DataFrame (n_cases rows)
        ``L, N``; ``exact`` (enumeration of all subsets), ``e1`` (:math:`p=N/(L-1)`), ``e1_L`` (:math:`p=N/L`),
        ``e2``, ``gap = exact - e1``, ``bound`` and ``crude`` (the Jensen-gap bounds), ``mc`` and ``se`` (the
        Monte-Carlo estimate and its standard error), ``random_bound`` (fact 2: :math:`(1+N)\max_i\|x_i\|_2`),
        ``e1_bound`` (fact 2 for E1) and ``mc_samples``.
    """
    n_cases = check_int("n_cases", n_cases, low=1)
    K = check_int("mc_samples", mc_samples, low=2)
    seed = _seed(seed)
    rng = np.random.default_rng(seed)
    rows = []
    for k in range(n_cases):
        L = int(rng.integers(3, 9))
        N = int(rng.integers(1, L))
        d = int(rng.integers(2, 9))
        a = theory.softmax_np(rng.normal(size=L) * 10 ** rng.uniform(-1, 1.5))
        X = rng.normal(size=(L, d))
        exact = float(theory.expected_distance_exact(a, X, N))
        e1 = float(theory.expectation_e1(a, X, N))
        mc, se = theory.expected_distance_mc(a, X, N, n_samples=K, seed=seed + k, return_stderr=True)
        rows.append(
            dict(
                L=L,
                N=N,
                exact=exact,
                e1=e1,
                e1_L=float(theory.expectation_e1(a, X, N, p="L")),
                e2=float(theory.expectation_e2(a, X, N)),
                gap=exact - e1,
                bound=float(theory.jensen_gap_bound(a, X, N)),
                crude=float(theory.jensen_gap_bound(a, X, N, crude=True)),
                mc=float(mc),
                se=float(se),
                random_bound=float(theory.corollary2_random_bound(a, X, N)),
                e1_bound=float(theory.corollary2_e1_bound(a, X, N)),
                mc_samples=K,
            )
        )
    return pd.DataFrame(rows)


_ENUM_COLUMNS = ("exact", "e1", "e1_L", "e2", "bound", "mc", "mc_samples")


def enumeration_errors(cases: pd.DataFrame) -> pd.DataFrame:
    r"""Mean relative error :math:`|E-\mathbb E[\tilde d]|/\mathbb E[\tilde d]` of each form over the cases.

    Parameters
    ----------
    cases : DataFrame
        The table of :func:`enumeration_cases` (cases with ``exact = 0`` are not allowed).

    Returns
    -------
    DataFrame (5 rows, 1 column ``mean relative error vs exact E[d~]``)
        Rows ``E1, p = N/(L-1)``, ``E1, p = N/L``, ``E1 + gap bound``, ``E2 (heuristic)`` and
        ``Monte Carlo, K = ...``.
    """
    if not isinstance(cases, pd.DataFrame) or not set(_ENUM_COLUMNS) <= set(cases.columns) or not len(cases):
        raise ValueError(f"cases must be a non-empty table of enumeration_cases with columns {list(_ENUM_COLUMNS)}")
    exact = cases["exact"].to_numpy(float)
    if not np.all(exact > 0):
        raise ValueError("cases must have exact > 0 in every row (the relative error divides by it)")
    forms = {
        "E1, p = N/(L-1)": cases["e1"],
        "E1, p = N/L": cases["e1_L"],
        "E1 + gap bound": cases["e1"] + cases["bound"],
        "E2 (heuristic)": cases["e2"],
        f"Monte Carlo, K = {int(cases['mc_samples'].iloc[0])}": cases["mc"],
    }
    err = {name: float(np.mean(np.abs(v.to_numpy(float) - exact) / exact)) for name, v in forms.items()}
    return pd.DataFrame({"mean relative error vs exact E[d~]": err})


def sink_row(L: int, *, d: int = 16, sink: float = 1.0, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    r"""A row with an attention sink: token 1 has logit :math:`\log L+\text{sink}`, the others :math:`\mathcal N(0,1)`.

    The sink keeps a share of the mass that does not vanish as ``L`` grows (a common pattern of trained heads).
    The draws come from :func:`numpy.random.default_rng` seeded with ``[seed, L]``: the logits first, then the
    vectors.

    Parameters
    ----------
    L : int >= 1
        Number of tokens.
    d : int >= 1
        Dimension of the standard normal vectors.
    sink : float
        Offset of the sink's logit above :math:`\log L`.
    seed : int >= 0

    Returns
    -------
    alpha : ndarray (L,)
    X : ndarray (L, d)
    """
    L, d = check_int("L", L, low=1), check_int("d", d, low=1)
    if isinstance(sink, bool) or not isinstance(sink, numbers.Real) or not np.isfinite(sink):
        raise ValueError(f"sink must be a finite real number (got {sink!r})")
    rng = np.random.default_rng([_seed(seed), L])
    logits = rng.normal(size=L)
    logits[0] = np.log(L) + sink
    return theory.softmax_np(logits), rng.normal(size=(L, d))


def corollary2_sequence(
    lengths, *, N: int = 5, d: int = 16, sink: float = 1.0, mc_samples: int = 64, seed: int = 0
) -> pd.DataFrame:
    r"""Every quantity of Theorem 1 and Corollary 2 on :func:`sink_row` for each length, at fixed ``N``.

    Parameters
    ----------
    lengths : sequence of int
        The lengths ``L`` (each > ``N``), distinct.
    N : int >= 1
        Size of the top-``N`` set.
    d, sink, seed
        As in :func:`sink_row`.
    mc_samples : int >= 1
        Random subsets of the Monte-Carlo estimate (seed ``seed``).

    Returns
    -------
    DataFrame (one row per length, index ``L``)
        The quantities ``d~, d_max, E1, E1 + gap, E2, Monte Carlo, (1+N) max||x||``; ``individual`` and
        ``dominance N||z||/sum||a_i||`` (Corollary 2(i)); and the check columns ``remainder``, ``remainder bound``,
        ``remainder bound (loose)`` (Corollary 2(i)), ``E2 - d~``, ``E2 - d~ (identity)`` and
        ``E2 bound (N+1) max||x||`` (fact 3).
    """
    N = check_int("N", N, low=1)
    Ls = [check_int("lengths", L, low=N + 1) for L in np.atleast_1d(np.asarray(lengths, dtype=object))]
    if not Ls or len(set(Ls)) != len(Ls):
        raise ValueError(f"lengths must be a non-empty sequence of distinct integers > N = {N} (got {lengths!r})")
    K = check_int("mc_samples", mc_samples, low=1)
    rows = []
    for L in Ls:
        a, X = sink_row(L, d=d, sink=sink, seed=seed)
        lim = theory.corollary2_limits(a, X, N)
        e2id = theory.corollary2_e2_identity(a, X, N)
        rows.append(
            {
                "L": L,
                "d~": theory.distance(a, X, N),
                "d_max": theory.theorem1_dmax(a, X, N),
                "E1": lim["e1"],
                "E1 + gap": lim["e1"] + theory.jensen_gap_bound(a, X, N),
                "E2": theory.expectation_e2(a, X, N),
                "Monte Carlo": theory.expected_distance_mc(a, X, N, n_samples=K, seed=seed),
                "(1+N) max||x||": theory.corollary2_random_bound(a, X, N),
                "individual": lim["individual"],
                "dominance N||z||/sum||a_i||": lim["dominance_ratio"],
                "remainder": lim["remainder"],
                "remainder bound": lim["remainder_bound"],
                "remainder bound (loose)": lim["remainder_bound_loose"],
                "E2 - d~": e2id["difference"],
                "E2 - d~ (identity)": e2id["identity"],
                "E2 bound (N+1) max||x||": e2id["bound"],
            }
        )
    return pd.DataFrame(rows).set_index("L").astype(float)


def top_n_curves(alpha, X, *, mc_samples: int = 64, seed: int = 0) -> pd.DataFrame:
    r"""Every distance quantity of one row for each :math:`N=1,\dots,L`.

    Parameters
    ----------
    alpha : array (L,)
        Weights of the row.
    X : array (L, d)
        Its vectors.
    mc_samples : int >= 1
        Random subsets of the Monte-Carlo estimate.
    seed : int >= 0
        Seed of the Monte-Carlo estimate (the same for every ``N``).

    Returns
    -------
    DataFrame (L rows, index ``N`` = 1..L)
        Columns ``d~, d_max, E1, E1 + gap, E2, Monte Carlo``.
    """
    a = np.asarray(alpha, dtype=np.float64)
    if a.ndim != 1:
        raise ValueError(f"alpha must be one row of weights, shape (L,) (got shape {a.shape})")
    K, seed = check_int("mc_samples", mc_samples, low=1), _seed(seed)
    Ns = np.arange(1, a.size + 1)
    e1 = [theory.expectation_e1(a, X, n) for n in Ns]
    return pd.DataFrame(
        {
            "d~": [theory.distance(a, X, n) for n in Ns],
            "d_max": [theory.theorem1_dmax(a, X, n) for n in Ns],
            "E1": e1,
            "E1 + gap": [e + theory.jensen_gap_bound(a, X, n) for e, n in zip(e1, Ns)],
            "E2": [theory.expectation_e2(a, X, n) for n in Ns],
            "Monte Carlo": [theory.expected_distance_mc(a, X, n, n_samples=K, seed=seed) for n in Ns],
        },
        index=pd.Index(Ns, name="N"),
    ).astype(float)


# ---- figures (each carries its provenance footer, attn_lib.provenance.label_figure) ----------------------------
def _figure(figsize, ncols=1):
    """A figure outside pyplot's state machine (shown with attn_lib.book.chapter.show_figure or a slider)."""

    fig = Figure(figsize=figsize)
    return fig, fig.subplots(1, ncols)


def figure_corollary2_sequence(table: pd.DataFrame, *, N: int, text: str, seed: int, device: str = "cpu"):
    r"""Corollary 2(i): each quantity of :func:`corollary2_sequence` against ``L`` (log-log axes).

    Parameters
    ----------
    table : DataFrame
        The table of :func:`corollary2_sequence` (index ``L``).
    N : int >= 1
        The fixed ``N`` of the table (for the title).
    text, seed, device
        What produced the data, for the provenance footer (:func:`attn_lib.provenance.label_figure`).

    Returns
    -------
    matplotlib.figure.Figure
    """

    _check_columns("table", table, [c for c in STYLES])
    N = check_int("N", N, low=1)
    fig, ax = _figure((FIGURE_WIDTH_IN, 4.2))
    for col, (color, ls) in STYLES.items():
        ax.plot(table.index, table[col], ls, color=color, marker="o", ms=3, label=col)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("context length L")
    ax.set_ylabel("distance")
    ax.set_title(f"Corollary 2 (i): N = {N} fixed, L growing")
    ax.legend(fontsize=7, ncol=2)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return label_figure(fig, model="none", text=text, device=device, seed=seed)


def figure_top_n(N: int, *, alpha, curves: pd.DataFrame, text: str, seed: int, device: str = "cpu"):
    r"""The top-:math:`N` slider's figure: the sorted weights with :math:`I_N` highlighted, and every curve of
    :func:`top_n_curves` against ``N`` with the current ``N`` marked.

    Parameters
    ----------
    N : int in [1, L]
        The selected ``N`` (one of ``curves.index``).
    alpha : array (L,)
        The row's weights.
    curves : DataFrame (L rows)
        :func:`top_n_curves` of the same row.
    text, seed, device
        What produced the data, for the provenance footer.

    Returns
    -------
    matplotlib.figure.Figure
    """

    a = np.asarray(alpha, dtype=np.float64)
    if a.ndim != 1:
        raise ValueError(f"alpha must be one row of weights, shape (L,) (got shape {a.shape})")
    L = a.size
    N = check_int("N", N, low=1, high=L)
    _check_columns("curves", curves, ["d~", "d_max"])
    if N not in curves.index:
        raise ValueError(f"N must be one of curves.index (got {N})")
    order = np.argsort(-a, kind="stable")
    fig, (ax0, ax1) = _figure((FIGURE_WIDTH_IN, 3.6), ncols=2)
    ax0.bar(np.arange(L), a[order], color=np.where(np.arange(L) < N, "tab:orange", "0.7"))
    ax0.set_yscale("log")
    ax0.set_xlabel("token rank (by weight)")
    ax0.set_ylabel(r"$\alpha$")
    ax0.set_title(rf"top-{N}: mass $\bar\alpha_N$ = {a[order[:N]].sum():.3f}")
    for col, (color, ls) in STYLES.items():
        if col in curves:
            ax1.plot(curves.index, curves[col], ls, color=color, label=col)
            ax1.plot([N], [curves.loc[N, col]], "o", color=color, ms=4)
    ax1.axvline(N, color="0.5", lw=0.8)
    ax1.set_yscale("symlog", linthresh=1e-2)
    ax1.set_ylim(bottom=0)
    ax1.set_xlabel("N")
    ax1.set_ylabel("distance")
    ax1.set_title(f"N = {N}: d~ = {curves.loc[N, 'd~']:.3g}, d_max = {curves.loc[N, 'd_max']:.3g}")
    ax1.legend(fontsize=7)
    ax1.grid(alpha=0.3)
    fig.tight_layout()
    return label_figure(fig, model="none", text=text, device=device, seed=seed)


def _check_columns(name: str, df: Any, columns) -> None:
    if not isinstance(df, pd.DataFrame) or not len(df):
        raise ValueError(f"{name} must be a non-empty pandas DataFrame (got {type(df).__name__})")
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"{name} must have the columns {list(columns)} (missing: {missing})")


# ---- display lines of the SymPy derivations (attn_lib.book.symbolic) -------------------------------------------
class _Result(dict):
    """A result of :mod:`attn_lib.book.symbolic`, named ``name``: reading a key it lacks raises ``ValueError``."""

    def __init__(self, name: str, d: Any):
        if not isinstance(d, dict):
            raise ValueError(f"{name} must be the dict returned by attn_lib.book.symbolic (got {type(d).__name__})")
        super().__init__(d)
        self.name = name

    def __missing__(self, key: str):
        raise ValueError(f"{self.name} must be the dict returned by attn_lib.book.symbolic (missing key: {key!r})")


_PRETTY = {"abar": r"\bar{\alpha}_N", "Sigma_out": r"\Sigma_{\mathrm{out}}"}


def _pretty(expr):
    """``expr`` with the symbols ``abar`` and ``Sigma_out`` renamed to their typeset forms."""
    return expr.subs(
        {s: sp.Symbol(_PRETTY[s.name], positive=True) for s in expr.free_symbols if getattr(s, "name", "") in _PRETTY}
    )


def _decided(flag) -> str:
    """What SymPy decided of a slack or coefficient: ``>= 0``, or undecided."""
    return r"\ \text{(SymPy: }" + (r"\ge 0" if flag is True else r"\text{undecided}") + ")"


def _theorem1_steps_1_2(t1: dict) -> list[str]:
    """``s`` and the bar alpha_N line, and steps 1-2 (identities: the differences SymPy reduced to zero)."""
    tex = sp.latex
    return [
        r"s = " + tex(t1["s"]) + r",\qquad \bar\alpha_N = " + tex(t1["abar"]),
        r"\text{step 1: }\ \alpha_i x_i - s - \Big[\alpha_i\big(x_i - s/\bar\alpha_N\big) - "
        r"\big(1 - \alpha_i/\bar\alpha_N\big)s\Big] = " + tex(t1["step1_check"]),
        r"\text{step 2: }\ x_i - s/\bar\alpha_N = "
        + tex(t1["step2_convex_combination"])
        + r",\quad \text{difference } "
        + tex(t1["step2_check"])
        + r",\quad \sum_j \alpha_j/\bar\alpha_N = "
        + tex(t1["step2_weights_sum"])
        + r",\quad \sum_j \tfrac{\alpha_j}{\bar\alpha_N}d_1 - d_1 = "
        + tex(t1["step2_norm_check"]),
    ]


def _theorem1_steps_3_4(t1: dict) -> list[str]:
    """Steps 3-4 (triangle inequalities: the slack and the coefficient SymPy decided the sign of)."""
    tex = sp.latex
    k = sp.Symbol("k", integer=True, positive=True)
    per_i = _pretty(t1["step4_per_term"].rhs.subs(sp.IndexedBase("alpha")[k], sp.Symbol("alpha_i", positive=True)))
    return [
        r"\text{step 3 (triangle inequality): }\ \|s\|_2 \le "
        + tex(t1["step3_triangle"].rhs)
        + r",\quad \Big[\bar\alpha_N M_I - \big("
        + tex(t1["step3_triangle"].rhs)
        + r"\big)\Big]_{n_j = M_I - t_j} = "
        + tex(t1["step3_slack"])
        + _decided(t1["step3_slack_nonnegative"]),
        r"\text{step 4 (triangle inequality): coefficient } "
        + tex(_pretty(t1["step4_coefficient"]))
        + r"\in[0,1]"
        + _decided(t1["step4_coefficient_nonnegative"] and t1["step4_coefficient_at_most_one"])
        + r",\quad "
        + tex(_pretty(t1["step4_inserted"]))
        + " - ("
        + tex(per_i)
        + ") = "
        + tex(t1["step4_check"]),
    ]


def _theorem1_step5(t1: dict) -> list[str]:
    """Step 5 (the ``Sum`` SymPy evaluated), d_max and its value at N = L."""
    tex = sp.latex
    return [
        r"\text{step 5: }\ \tilde d \le " + tex(_pretty(t1["step5_sum"])) + " = " + tex(_pretty(t1["step5_evaluated"])),
        r"\textstyle\sum_{k} \alpha_k = 1 - \bar\alpha_N:\quad " + tex(_pretty(t1["step5_expanded"])),
        r"d_{\max} = "
        + tex(_pretty(t1["d_max"]))
        + r",\qquad \text{difference } "
        + tex(t1["step5_check"])
        + r",\qquad d_{\max}\big|_{N=L,\ \bar\alpha_N=1} = "
        + tex(t1["at_N_equals_L"]),
    ]


def theorem1_steps_latex(t1: dict) -> list[str]:
    r"""The five proof steps of Theorem 1(a) as LaTeX lines, from :func:`attn_lib.book.symbolic.theorem1_steps`.

    Parameters
    ----------
    t1 : dict
        The result of :func:`attn_lib.book.symbolic.theorem1_steps`.

    Returns
    -------
    list of str (8 lines)
        ``s`` and :math:`\bar\alpha_N`; steps 1-5, each with what SymPy computed: the difference it reduced to zero
        where the step is an identity, the slack it decided is non-negative where the step is an inequality, and
        the ``Sum`` it evaluated in step 5; :math:`d_{\max}` and its value at :math:`N=L`.
    """
    t1 = _Result("t1", t1)
    return [*_theorem1_steps_1_2(t1), *_theorem1_steps_3_4(t1), *_theorem1_step5(t1)]


def random_variance_latex(rv: dict, *, n: int, N: int) -> list[str]:
    r"""Step 5 of the proof of Theorem 1(b) as LaTeX lines, from :func:`attn_lib.book.symbolic.theorem1_random_variance`.

    Parameters
    ----------
    rv : dict
        The result of :func:`attn_lib.book.symbolic.theorem1_random_variance` for ``n`` candidates and ``N`` drawn.
    n, N : int
        The sizes ``rv`` was computed for (shown in the first line).

    Returns
    -------
    list of str (3 lines)
        The inclusion probabilities and the indicator moments; the variance of the sum; the bracket form and
        its difference from the variance.
    """
    rv = _Result("rv", rv)
    n, N = check_int("n", n, low=2), check_int("N", N, low=1, high=n)
    tex = sp.latex
    return [
        rf"n={n},\ N={N}:\quad \Pr(j\in I_N) = "
        + tex(rv["P_single"])
        + r",\quad \Pr(j,k\in I_N) = "
        + tex(rv["P_pair"])
        + r",\quad \mathrm{Var}\,\mathbf 1_j = "
        + tex(rv["variance_indicator"])
        + r" = p(1-p),\quad \mathrm{Cov}(\mathbf 1_j,\mathbf 1_k) = "
        + tex(rv["covariance_indicator"])
        + r" = -\frac{p(1-p)}{n-1}",
        r"\mathrm{Var}\sum_j \mathbf 1_j a_j = \sum_{j,k}\mathrm{Cov}_{jk}G_{jk} = " + tex(rv["variance_of_sum"]),
        r"p(1-p)\Big[\tfrac{n}{n-1}\sum_j G_{jj} - \tfrac{1}{n-1}\sum_{j,k}G_{jk}\Big] = "
        + tex(rv["bracket_form"])
        + r",\qquad \text{difference } "
        + tex(rv["variance_check"]),
    ]


def corollary2_limits_latex(c2: dict) -> list[str]:
    r"""The limits of Corollary 2's two regimes as LaTeX lines, from
    :func:`attn_lib.book.symbolic.corollary2_limits_symbolic`.

    Parameters
    ----------
    c2 : dict
        The result of :func:`attn_lib.book.symbolic.corollary2_limits_symbolic`.

    Returns
    -------
    list of str (2 lines)
        Regime (i), :math:`L\to\infty`, and regime (ii), :math:`N\to L`.
    """
    c2 = _Result("c2", c2)
    tex = sp.latex
    return [
        r"\text{(i)}\quad p = "
        + tex(c2["p"])
        + r"\xrightarrow[L\to\infty]{}"
        + tex(c2["p_limit_L_to_oo"])
        + r",\qquad "
        + tex(c2["outer_factor"])
        + r"\xrightarrow[L\to\infty]{}"
        + tex(c2["outer_limit_L_to_oo"])
        + r",\qquad "
        + tex(c2["per_token_term"])
        + r"\xrightarrow[p\to0]{}"
        + tex(c2["per_token_term_limit_p_to_0"]),
        r"\text{(ii)}\quad " + tex(c2["outer_factor"]) + r"\xrightarrow[N\to L]{}" + tex(c2["outer_limit_N_to_L"]),
    ]


def corollary2_remainder_latex(rem: dict) -> list[str]:
    r"""The remainder bound of Corollary 2(i) as LaTeX lines, from
    :func:`attn_lib.book.symbolic.corollary2_remainder_symbolic`.

    Parameters
    ----------
    rem : dict
        The result of :func:`attn_lib.book.symbolic.corollary2_remainder_symbolic`.

    Returns
    -------
    list of str (4 lines)
        The per-token identity and its difference; the reverse triangle inequality with ``|p| = p``; the outer
        factor's slack; the triangle-inequality sum SymPy evaluated and the bound after ``p = N/(L-1)``.
    """
    rem = _Result("rem", rem)

    def tex(expr) -> str:  # norm symbols are named in LaTeX already: print their names verbatim
        verbatim = {x: x.name for x in expr.free_symbols if getattr(x, "name", "").startswith("\\|")}
        return sp.latex(expr, symbol_names=verbatim)

    sign = r"\ge 0" if rem["outer_slack_nonnegative"] is True else r"\text{undecided}"
    return [
        r"a_1 - p\sum_{j\ne 1}a_j = " + tex(rem["term"].T) + r",\quad \Big[a_i - p\sum_{j\ne i}a_j\Big] - "
        r"\big[a_i - p(z - a_i)\big]\ \text{for every } i:\ " + tex(rem["identity_check"].T),
        r"\text{reverse triangle inequality: } "
        + tex(rem["reverse_triangle"])
        + r",\quad |p|\,\|z-a_i\| - p\,\|z-a_i\| = "
        + tex(rem["homogeneity_check"]),
        r"1 - \frac{L-N}{L} = " + tex(rem["outer_slack"]) + r"\ \text{(SymPy: }" + sign + ")",
        r"\text{triangle inequality, } A_i = \|a_i\|_2:\ |R| \le "
        + tex(rem["triangle_sum"])
        + " = "
        + tex(rem["triangle_sum_evaluated"])
        + r"\ \xrightarrow{p = N/(L-1)}\ "
        + tex(rem["bound"])
        + r",\quad \text{difference to Eq. (i): } "
        + tex(rem["bound_check"]),
    ]
