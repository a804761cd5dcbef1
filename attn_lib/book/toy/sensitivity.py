r"""Synthetic rows and perturbations for the chapter on gradient sensitivity (Lemma 2, Corollary 3 and the
:math:`\sqrt5\,\varepsilon` example), the paper's form of Corollary 3 next to the corrected one, the temperature
slider's figure, and a LaTeX helper (:func:`tex`) for SymPy output.

Everything here is float64 on the CPU and seeded. Each function returns the raw numbers (one row per random
instance) so that the chapter asserts the bounds on them; the ``*_summary`` functions only condense those numbers
into the tables the chapter shows. The references are :mod:`attn_lib.theory` (one-row closed forms) and
:mod:`attn_lib.jacobian` (the library's Jacobians); see the book's appendix "Reading the paper", §Lemma 2 and
§Corollary 3, for the reconstructed statements and the corrected constants.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd
import sympy as sp
from matplotlib.figure import Figure

from attn_lib import jacobian, normalizers, theory
from attn_lib._validation import check_int, check_nonnegative, check_positive, check_probability
from attn_lib.claims.stats import require_columns
from attn_lib.layout import FIGURE_WIDTH_IN
from attn_lib.provenance import label_figure

from .vanishing import rational

__all__ = [
    "NICE_NAMES",
    "tex",
    "sqrt5_table",
    "lemma2_families",
    "lemma2_instances",
    "lemma2_summary",
    "corollary3_random_norms",
    "corollary3_random_differences",
    "corollary3_random_summary",
    "counterexample_table",
    "corollary3_side_by_side",
    "tie_row",
    "temperature_sweep",
    # render_temperature: not exported to attn_lib.book.toy (each topic module has its own); call it by module
]

SQRT2 = math.sqrt(2)

#: LaTeX for the plain-text symbol names that :mod:`attn_lib.book.symbolic` uses in its derivations.
NICE_NAMES = {
    "||diag(F')||_2": r"\|\mathrm{diag}(F')\|_2",
    "max|F'|": r"\max_j|F'(l_j)|",
    "||alpha F'^T||_2": r"\|\alpha F'^{\top}\|_2",
    "minF": r"\min_j F(l_j)",
    "||grad alpha_1||_2": r"\|\nabla_\ell\alpha_1\|_2",
    "||J||_2": r"\|J\|_2",
}


# ---- helpers ---------------------------------------------------------------------------------------------------
def _rng(seed: Any) -> np.random.Generator:
    """``seed`` as a numpy Generator: an int >= 0 seeds a new one; a Generator is used (and advanced) as is."""
    if isinstance(seed, np.random.Generator):
        return seed
    return np.random.default_rng(check_int("seed", seed, low=0))


def _temperatures(name: str, values: Any) -> np.ndarray:
    arr = np.atleast_1d(np.asarray(values, dtype=np.float64))
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-d sequence of numbers > 0 (got {values!r})")
    if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise ValueError(f"{name} must hold finite numbers > 0 (got {values!r})")
    return arr


def _row(row: Any) -> np.ndarray:
    r = np.asarray(row, dtype=np.float64)
    if r.ndim != 1 or r.size < 2 or not np.all(np.isfinite(r)):
        raise ValueError(f"row must be a 1-d array of at least 2 finite logits (got shape {r.shape})")
    return r


# ---- display ---------------------------------------------------------------------------------------------------
def tex(expr: Any, names: dict[str, str] | None = None) -> str:
    r"""LaTeX of a SymPy expression, with readable names for plain-text symbols.

    Parameters
    ----------
    expr : sympy.Basic or sympy.MatrixBase
        An expression, relation or matrix (e.g. ``symbolic.lemma2_jacobian()["bound"]``).
    names : dict str -> str, optional
        LaTeX for symbol names; default :data:`NICE_NAMES`. Symbols not in it keep SymPy's rendering.

    Returns
    -------
    str
        ``sympy.latex(expr)`` with every free symbol named in ``names`` written as its LaTeX.
    """
    if not isinstance(expr, (sp.Basic, sp.MatrixBase)):
        raise ValueError(f"expr must be a SymPy expression or matrix (got {type(expr).__name__})")
    names = NICE_NAMES if names is None else names
    if not isinstance(names, dict) or not all(isinstance(v, str) for v in names.values()):
        raise ValueError("names must be a dict from symbol name to LaTeX string")
    symbol_names = {s: names[s.name] for s in expr.free_symbols if getattr(s, "name", None) in names}
    return sp.latex(expr, symbol_names=symbol_names)


# ---- the sqrt(5) eps example -----------------------------------------------------------------------------------
def sqrt5_table(
    c: float = 1.0, eps: float = 1e-3, temperatures: Sequence[float] = (1.0, 0.1, 0.01), lengths: Sequence[int] = (2, 5)
) -> pd.DataFrame:
    r"""The :math:`\sqrt5\,\varepsilon` example for each length and temperature (:func:`attn_lib.theory.sqrt5_example`).

    Parameters
    ----------
    c : float
        Level of the two leading logits.
    eps : float > 0
        Size of the perturbation.
    temperatures : sequence of float > 0, length nT
    lengths : sequence of int >= 2, length nL
        Row lengths; the logits beyond the first two are 0.

    Returns
    -------
    DataFrame, nL * nT rows, index ``(L, T)``
        Columns ``‖ℓ¹−ℓ²‖₂/ε`` (:math:`\sqrt5`), ``‖Δα‖/ε exact`` (the exact softmax difference),
        ``‖J(ℓ¹)(ℓ¹−ℓ²)‖/ε`` (the linearisation) and ``3√2/(4T)`` (the two-way-tie approximation).
    """
    eps = check_positive("eps", eps)
    Ts = _temperatures("temperatures", temperatures)
    Ls = [check_int("lengths", L, low=2) for L in np.atleast_1d(lengths)]
    if not Ls:
        raise ValueError("lengths must hold at least one integer >= 2")
    rows = []
    for L in Ls:
        for T in Ts:
            r = theory.sqrt5_example(c, eps, float(T), L)
            rows.append(
                {
                    "L": L,
                    "T": float(T),
                    "‖ℓ¹−ℓ²‖₂/ε": r["logit_distance"] / eps,
                    "‖Δα‖/ε exact": r["ratio"],
                    "‖J(ℓ¹)(ℓ¹−ℓ²)‖/ε": r["linearised"] / eps,
                    "3√2/(4T)": r["tie_approximation"] / eps,
                }
            )
    return pd.DataFrame(rows).set_index(["L", "T"])


# ---- Lemma 2 on random rows ------------------------------------------------------------------------------------
def _sigmoid(z):
    return 1 / (1 + np.exp(-z))


def _softplus(z):
    return np.logaddexp(0, z)


def _rational_derivative(z):
    return 2 * z


def lemma2_families() -> dict[str, tuple[Callable, Callable, Callable]]:
    r"""The three positive normalisers of the Lemma 2 check: :math:`e^z` (softmax), softplus and :math:`1+z^2`.

    Returns
    -------
    dict name -> (F, dF, normaliser)
        ``F`` and its derivative ``dF`` as numpy functions of :math:`z=l/T`, and the library normaliser
        ``f(logits, temperature=)`` that :func:`attn_lib.jacobian.jacobian` differentiates on its own.
    """
    return {
        "exp (softmax)": (np.exp, np.exp, normalizers.softmax),
        "softplus": (_softplus, _sigmoid, normalizers.get("general")),
        "1 + z²": (rational, _rational_derivative, normalizers.make_general(rational)),
    }


def _at_temperature(F: Callable, T: float, x):
    """``F(x / T)``: the normaliser's ``F`` as a function of the logit."""
    return F(x / T)


def _derivative_at_temperature(dF: Callable, T: float, x):
    """``d/dx F(x / T) = F'(x / T) / T``."""
    return dF(x / T) / T


def lemma2_instances(n_per_family: int = 1000, seed: Any = 0) -> pd.DataFrame:
    r"""Lemma 2's exact Jacobian and bound on random logit rows, for each family of :func:`lemma2_families`.

    Each instance draws a length :math:`L\in[2,30]`, a temperature :math:`T=10^u` with :math:`u\in[-0.5,1]`, a
    scale :math:`s\in[0.1,3]` and logits :math:`l\sim\mathcal N(0,s^2)^L` (in that order, from one stream; the
    families use consecutive blocks). It evaluates :func:`attn_lib.theory.lemma2_jacobian` (closed form),
    :func:`attn_lib.theory.lemma2_jacobian_bound` and, independently, :func:`attn_lib.jacobian.jacobian`.

    Parameters
    ----------
    n_per_family : int >= 1
        Random instances per family.
    seed : int >= 0 or numpy.random.Generator

    Returns
    -------
    DataFrame, 3 * n_per_family rows
        Columns ``family``, ``L``, ``T``, ``spectral`` (:math:`\|J\|_2` of the closed form), ``bound`` (Lemma 2's
        bound), ``max_abs_diff`` (largest :math:`|J-J_{\mathrm{lib}}|`) and ``logits`` (the row, ndarray (L,)).
    """
    n = check_int("n_per_family", n_per_family, low=1)
    rng = _rng(seed)
    rows = []
    for name, (F, dF, f) in lemma2_families().items():
        for _ in range(n):
            L = int(rng.integers(2, 31))
            T = float(10 ** rng.uniform(-0.5, 1))
            logits = rng.normal(scale=float(rng.uniform(0.1, 3)), size=L)
            F_T = functools.partial(_at_temperature, F, T)
            dF_T = functools.partial(_derivative_at_temperature, dF, T)
            J = theory.lemma2_jacobian(F_T, dF_T, logits)
            J_lib = jacobian.jacobian(f, logits, temperature=T)
            rows.append(
                {
                    "family": name,
                    "L": L,
                    "T": T,
                    "spectral": float(np.linalg.norm(J, 2)),
                    "bound": float(theory.lemma2_jacobian_bound(F_T, dF_T, logits)),
                    "max_abs_diff": float(np.abs(J - J_lib).max()),
                    "logits": logits,
                }
            )
    return pd.DataFrame(rows)


def lemma2_summary(instances: pd.DataFrame, rtol: float = 1e-9) -> pd.DataFrame:
    r"""One row per family of :func:`lemma2_instances`: how many instances, how many violate the bound, and the
    largest :math:`\|J\|_2/\text{bound}` and :math:`|J-J_{\mathrm{lib}}|`.

    Parameters
    ----------
    instances : DataFrame
        The output of :func:`lemma2_instances`.
    rtol : float >= 0
        A violation is ``spectral > bound * (1 + rtol)``.

    Returns
    -------
    DataFrame indexed by ``F`` (the family, in order of appearance)
        Columns ``instances``, ``violations``, ``largest ‖J‖₂ / bound``, ``largest |J − J_lib|``.
    """
    rtol = check_nonnegative("rtol", rtol)
    require_columns(instances, "instances", ("family", "spectral", "bound", "max_abs_diff"))
    d = instances.assign(
        ratio=instances["spectral"] / instances["bound"],
        violation=instances["spectral"] > instances["bound"] * (1 + rtol),
    )
    g = d.groupby("family", sort=False)
    out = pd.DataFrame(
        {
            "instances": g.size(),
            "violations": g["violation"].sum().astype(int),
            "largest ‖J‖₂ / bound": g["ratio"].max(),
            "largest |J − J_lib|": g["max_abs_diff"].max(),
        }
    )
    out.index.name = "F"
    return out


# ---- Corollary 3 on random rows --------------------------------------------------------------------------------
def corollary3_random_norms(
    n: int = 5000, seed: Any = 0, *, tie_fraction: float = 0.3, temperature: float = 1.0
) -> pd.DataFrame:
    r"""Norms of the softmax Jacobian (:func:`attn_lib.jacobian.jacobian_norms`) on random logit rows.

    Each row draws :math:`L\in[2,30]` and logits :math:`l\sim\mathcal N(0,s^2)^L` with :math:`s=10^u`,
    :math:`u\in[-1,1]`; with probability ``tie_fraction`` the largest logit is moved to within
    :math:`\mathcal N(0,(10^{-3})^2)` of the second largest (a near two-way tie, where the spectral norm approaches
    :math:`1/(2T)`).

    Parameters
    ----------
    n : int >= 1
        Number of rows.
    seed : int >= 0 or numpy.random.Generator
    tie_fraction : float in [0, 1]
    temperature : float > 0

    Returns
    -------
    DataFrame, n rows
        Columns ``L``, ``tie`` (bool), ``spectral`` (:math:`\|J\|_2`), ``entrywise`` (:math:`\max|J_{ij}|`) and
        ``row`` (:math:`\max_i\|\nabla_\ell\alpha_i\|_2`) and ``logits`` (the row, ndarray (L,)).
    """
    n = check_int("n", n, low=1)
    p = check_probability("tie_fraction", tie_fraction)
    T = check_positive("temperature", temperature)
    rng = _rng(seed)
    rows = []
    for _ in range(n):
        L = int(rng.integers(2, 31))
        logits = rng.normal(scale=float(10 ** rng.uniform(-1, 1)), size=L)
        tie = bool(rng.random() < p)
        if tie:
            i, j = np.argsort(logits)[-2:]
            logits[i] = logits[j] + rng.normal(scale=1e-3)
        norms = jacobian.jacobian_norms(jacobian.jacobian("softmax", logits, temperature=T))
        rows.append({"L": L, "tie": tie, **{k: float(v) for k, v in norms.items()}, "logits": logits})
    return pd.DataFrame(rows)


def corollary3_random_differences(n: int = 5000, seed: Any = 0) -> pd.DataFrame:
    r"""Finite differences :math:`\|\alpha(\ell+\varepsilon v)-\alpha(\ell)\|_2` of softmax on random rows,
    next to the corrected bound :math:`\min\{\varepsilon/(2T),\sqrt2\}`.

    Each case draws :math:`L\in[2,30]`, :math:`T=10^u` with :math:`u\in[-3,2]`, :math:`\varepsilon=10^w` with
    :math:`w\in[-3,1]`, logits :math:`\mathcal N(0,s^2)^L` with :math:`s=10^x`, :math:`x\in[-2,1]`, and a
    Gaussian unit direction :math:`v`; the difference comes from :func:`attn_lib.jacobian.sensitivity` with that
    direction.

    Parameters
    ----------
    n : int >= 1
        Number of cases.
    seed : int >= 0 or numpy.random.Generator

    Returns
    -------
    DataFrame, n rows
        Columns ``L``, ``T``, ``eps``, ``difference`` (:math:`\|\Delta\alpha\|_2`), ``bound``
        (:func:`attn_lib.theory.corollary3_corrected`'s ``finite_difference``), ``ratio`` (difference / bound),
        ``logits`` and ``direction`` (ndarrays (L,)).
    """
    n = check_int("n", n, low=1)
    rng = _rng(seed)
    rows = []
    for _ in range(n):
        L = int(rng.integers(2, 31))
        T = float(10 ** rng.uniform(-3, 2))
        eps = float(10 ** rng.uniform(-3, 1))
        logits = rng.normal(scale=float(10 ** rng.uniform(-2, 1)), size=L)
        v = rng.normal(size=L)
        v /= np.linalg.norm(v)
        diff = float(jacobian.sensitivity(logits, T, eps, direction=v)) * eps
        bound = float(theory.corollary3_corrected(T, eps=eps)["finite_difference"])
        rows.append(
            {
                "L": L,
                "T": T,
                "eps": eps,
                "difference": diff,
                "bound": bound,
                "ratio": diff / bound,
                "logits": logits,
                "direction": v,
            }
        )
    return pd.DataFrame(rows)


def corollary3_random_summary(norms: pd.DataFrame, differences: pd.DataFrame, temperature: float = 1.0) -> pd.DataFrame:
    r"""The largest values of :func:`corollary3_random_norms` and :func:`corollary3_random_differences`, next to
    the corrected bounds (:func:`attn_lib.theory.corollary3_corrected`).

    Parameters
    ----------
    norms : DataFrame
        The output of :func:`corollary3_random_norms`, computed at ``temperature``.
    differences : DataFrame
        The output of :func:`corollary3_random_differences`.
    temperature : float > 0
        Temperature of ``norms``.

    Returns
    -------
    DataFrame, 4 rows
        Columns ``largest observed`` and ``bound``; the last row is the largest difference / bound ratio (bound 1).
    """
    T = check_positive("temperature", temperature)
    require_columns(norms, "norms", ("spectral", "entrywise", "row"))
    require_columns(differences, "differences", ("ratio",))
    b = theory.corollary3_corrected(T)
    return pd.DataFrame(
        {
            "largest observed": [
                norms["entrywise"].max(),
                norms["row"].max(),
                norms["spectral"].max(),
                differences["ratio"].max(),
            ],
            "bound": [b["entrywise"], b["row"], b["spectral"], 1.0],
        },
        index=[f"|J_ij| (T={T:g})", f"‖∇α_i‖₂ (T={T:g})", f"‖J‖₂ (T={T:g})", "‖Δα‖₂ / min{ε/(2T), √2}"],
    )


# ---- the paper's form next to the corrected constants ----------------------------------------------------------
def counterexample_table(temperatures: Sequence[float] = (1.0, 0.1, 0.01), eps: float = 1e-6) -> pd.DataFrame:
    r"""The two-way tie :math:`\ell=(0,0)` at each temperature (:func:`attn_lib.theory.corollary3_counterexample`).

    Parameters
    ----------
    temperatures : sequence of float > 0, length nT
    eps : float > 0
        Step of the finite difference along the eigenvector :math:`(1,-1)/\sqrt2`.

    Returns
    -------
    DataFrame, nT rows, index ``T``
        Columns ``‖J‖₂ at the tie``, ``finite-difference ratio``, ``paper: min{1/(4T), √2}``, ``corrected: 1/(2T)``.
    """
    Ts = _temperatures("temperatures", temperatures)
    rows = []
    for T in Ts:
        ce = theory.corollary3_counterexample(float(T), eps=eps)
        rows.append(
            {
                "T": float(T),
                "‖J‖₂ at the tie": ce["spectral_norm"],
                "finite-difference ratio": ce["fd_ratio"],
                "paper: min{1/(4T), √2}": float(ce["paper_bound"]),
                "corrected: 1/(2T)": float(ce["corrected_bound"]),
            }
        )
    return pd.DataFrame(rows).set_index("T")


def corollary3_side_by_side(temperatures: Sequence[float], eps_values: Sequence[float] = ()) -> pd.DataFrame:
    r"""Corollary 3 in the paper's form and with the corrected constants, on a grid of temperatures.

    Parameters
    ----------
    temperatures : sequence of float > 0, length nT
    eps_values : sequence of float > 0
        One column of the bound :math:`\min\{1/(2T),\sqrt2/\varepsilon\}` on :math:`g(T,\varepsilon)` per value.

    Returns
    -------
    DataFrame, nT rows, index ``T``
        Columns ``paper: min{1/(4T), √2}``, ``entrywise 1/(4T)``, ``row √2/(4T)``, ``spectral 1/(2T)``, one
        ``g bound, ε=…: min{1/(2T), √2/ε}`` per ``eps`` and ``‖J‖₂ at a tie`` (the spectral norm that softmax
        reaches at :math:`\ell=(0,0)`, computed from the Jacobian).
    """
    Ts = _temperatures("temperatures", temperatures)
    eps_arr = _temperatures("eps_values", eps_values) if len(np.atleast_1d(eps_values)) else np.array([])
    corr = theory.corollary3_corrected(Ts)
    side = pd.DataFrame(
        {
            "paper: min{1/(4T), √2}": np.atleast_1d(theory.corollary3_paper(Ts)),
            "entrywise 1/(4T)": np.atleast_1d(corr["entrywise"]),
            "row √2/(4T)": np.atleast_1d(corr["row"]),
            "spectral 1/(2T)": np.atleast_1d(corr["spectral"]),
        },
        index=pd.Index(Ts, name="T"),
    )
    for e in eps_arr:
        side[f"g bound, ε={e:g}: min{{1/(2T), √2/ε}}"] = np.atleast_1d(
            theory.corollary3_corrected(Ts, eps=float(e))["sensitivity"]
        )
    side["‖J‖₂ at a tie"] = [theory.corollary3_counterexample(float(T))["spectral_norm"] for T in Ts]
    return side


# ---- the temperature slider ------------------------------------------------------------------------------------
def tie_row(L: int = 8, gap: float = 0.05, seed: Any = 0) -> np.ndarray:
    r"""A row of ``L`` standard-normal logits in decreasing order whose two largest entries differ by ``gap``.

    The draws are sorted in decreasing order and the second entry is set to ``first - gap``.

    Parameters
    ----------
    L : int >= 3
    gap : float >= 0
        Must be smaller than the gap between the largest and the third-largest draw.
    seed : int >= 0 or numpy.random.Generator

    Returns
    -------
    ndarray (L,), float64, in decreasing order.
    """
    L = check_int("L", L, low=3)
    gap = check_nonnegative("gap", gap)
    row = np.sort(_rng(seed).normal(size=L))[::-1].copy()
    if row[0] - gap < row[2]:
        raise ValueError(
            f"gap must be at most {row[0] - row[2]:.4g} for this seed and L (got {gap:g}): "
            "the second logit would fall below the third"
        )
    row[1] = row[0] - gap
    return row


def temperature_sweep(row: Any, temperatures: Any = None) -> pd.DataFrame:
    r"""Norms of the softmax Jacobian of one logit row over a grid of temperatures, with both forms of
    Corollary 3.

    Parameters
    ----------
    row : array (L,), L >= 2
    temperatures : array (nT,) of float > 0, optional
        Default: 121 log-spaced values from :math:`10^{-3}` to :math:`10^2`.

    Returns
    -------
    DataFrame, nT rows
        Columns ``T``, ``spectral``, ``entrywise``, ``row`` (:func:`attn_lib.jacobian.jacobian_norms`),
        ``paper`` (:func:`attn_lib.theory.corollary3_paper`) and ``bound_spectral``, ``bound_entrywise``,
        ``bound_row`` (:func:`attn_lib.theory.corollary3_corrected`).
    """
    r = _row(row)
    Ts = np.logspace(-3, 2, 121) if temperatures is None else _temperatures("temperatures", temperatures)
    J = np.stack([jacobian.jacobian("softmax", r, temperature=float(T)) for T in Ts])
    norms = jacobian.jacobian_norms(J)
    corr = theory.corollary3_corrected(Ts)
    out = pd.DataFrame({"T": Ts, **{k: np.asarray(norms[k]) for k in ("spectral", "entrywise", "row")}})
    out["paper"] = np.atleast_1d(theory.corollary3_paper(Ts))
    for k in ("spectral", "entrywise", "row"):
        out[f"bound_{k}"] = np.atleast_1d(corr[k])
    return out


def render_temperature(
    temperature: float,
    row: Any,
    sweep: pd.DataFrame | None = None,
    *,
    seed: int | None = None,
    text: str | None = None,
    device: str = "cpu",
):
    r"""The temperature slider's figure: the softmax weights of ``row`` at ``temperature`` (left), and the norms of
    the Jacobian over all temperatures with the corrected bounds and the paper's curve (right).

    Parameters
    ----------
    temperature : float > 0
        The slider's position, marked on the right panel.
    row : array (L,), L >= 2
        The logit row (drawn in the given order).
    sweep : DataFrame, optional
        :func:`temperature_sweep` of ``row``; computed on the default grid when omitted.
    seed : int, optional
        Seed that produced ``row``, for the provenance footer.
    text : str, optional
        What the row is, for the footer; default ``"synthetic logit row (L tokens, top-2 gap …)"``.
    device : str

    Returns
    -------
    matplotlib.figure.Figure
        Two panels, labelled with :func:`attn_lib.provenance.label_figure` (model ``"none"``).
    """

    T = check_positive("temperature", temperature)
    r = _row(row)
    sw = temperature_sweep(r) if sweep is None else sweep
    require_columns(sw, "sweep", ("T", "spectral", "entrywise", "row", "paper"))
    if text is None:
        top = np.sort(r)[::-1]
        text = f"synthetic logit row ({r.size} tokens, top-2 gap {top[0] - top[1]:.3g})"
    w = normalizers.softmax(r, temperature=T)
    n = {k: float(v) for k, v in jacobian.jacobian_norms(jacobian.jacobian("softmax", r, temperature=T)).items()}
    fig = Figure(figsize=(FIGURE_WIDTH_IN, 3.6))
    ax0, ax1 = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1, 1.5]})
    ax0.bar(np.arange(1, r.size + 1), w, color="tab:blue")
    ax0.set_ylim(0, 1)
    ax0.set_xlabel("token (logits in decreasing order)")
    ax0.set_ylabel(r"softmax weight $\alpha_j$")
    ax0.set_title(f"T = {T:g}: largest weight {w.max():.3f}")
    _sweep_panel(ax1, sw, T, n)
    fig.tight_layout()
    return label_figure(fig, model="none", text=text, device=device, seed=seed)


_CURVES = (
    ("spectral", "tab:red", r"$\|J\|_2$", r"$1/(2T)$", 0.5),
    ("row", "tab:purple", r"$\max_i\|\nabla\alpha_i\|_2$", r"$\sqrt{2}/(4T)$", SQRT2 / 4),
    ("entrywise", "tab:green", r"$\max_{ij}|J_{ij}|$", r"$1/(4T)$", 0.25),
)


def _sweep_panel(ax, sw: pd.DataFrame, T: float, n: dict) -> None:
    """Right panel of :func:`render_temperature`: norms over T, corrected bounds (dotted), paper's curve (dashed)."""
    Ts = sw["T"].to_numpy()
    for k, color, label, _, _ in _CURVES:
        ax.plot(Ts, sw[k], color=color, label=label)
    for _, color, _, bound_label, c in _CURVES:
        ax.plot(Ts, c / Ts, ":", color=color, label=bound_label)
    ax.plot(Ts, sw["paper"], "k--", lw=1, label=r"paper: $\min\{1/(4T),\sqrt{2}\}$")
    ax.axvline(T, color="0.5", lw=0.8)
    for k, color, _, _, _ in _CURVES:
        ax.plot([T], [n[k]], "o", color=color, ms=5)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_ylim(1e-4, 1e3)
    ax.set_xlabel("temperature T")
    verdict = "above" if n["spectral"] > float(theory.corollary3_paper(T)) else "below"
    ax.set_title(rf"$\|J\|_2$ = {n['spectral']:.3g} ({verdict} the paper's curve)")
    ax.legend(fontsize=7, ncol=2, loc="upper right")
    ax.grid(alpha=0.3)
