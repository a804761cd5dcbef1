r"""The toy sphere model of the chapter on geometric separability (Assumptions 1-2, the definition of :math:`N_s`
and Theorem 2): points uniform on the sphere, the experimental radius :math:`\rho_{\min}`, three hand-made rows for
the strict convention :math:`r\uparrow\rho_{\min}`, the toy model's per-row and per-N statistics (the empirical
:math:`N_s/N`, Theorem 2's bounds in the paper's form and the valid Hoeffding form at a Monte-Carlo
:math:`\mathbb EX_i`), and the figure and pre-rendered slider over temperatures.

The one-row quantities come from :mod:`attn_lib.theory` (its separability and Theorem 2 functions); this module
only draws the instances and collects the numbers. Everything runs in float64 on the CPU, and every draw derives
from an explicit seed, so the tables are the same run to run. The book's appendix "Reading the paper"
(§Assumptions 1 and 2, §Distinguishable tokens, §Theorem 2) gives the reconstructed formulas and the conventions.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd
import torch
from matplotlib.figure import Figure
from scipy.spatial.distance import pdist

from attn_lib import metrics, theory
from attn_lib._validation import check_int, check_positive
from attn_lib.layout import FIGURE_WIDTH_IN
from attn_lib.provenance import label_figure

from ..widgets import precomputed_slider

__all__ = [
    "TOY_N",
    "sphere_points",
    "rho_min",
    "convention_cases",
    "convention_table",
    "exact_ball_flags",
    "ball_test_layer",
    "ball_test_table",
    "toy_row",
    "toy_stats",
    "toy_means",
    "toy_summary",
    "ToySummary",
    # render_temperature: not exported to attn_lib.book.toy (each topic module has its own); call it by module
    "temperature_slider",
]

#: The N grid of the paper's Fig. 3, the default N grid of the toy model.
TOY_N = (1, 2, 4, 8, 16, 32, 64)

#: Columns of :func:`toy_stats` that :func:`toy_means` averages per N.
_MEAN_COLUMNS = [
    "fraction",
    "lower",
    "upper_paper",
    "upper_valid",
    "upper_valid_M",
    "mean_X",
    "mean_mu",
    "mean_xi",
    "r",
    "top_mass",
]


def _rng(rng: Any) -> np.random.Generator:
    if isinstance(rng, np.random.Generator):
        return rng
    if isinstance(rng, (bool, np.bool_)) or not isinstance(rng, (int, np.integer)) or rng < 0:
        raise ValueError(f"rng must be a numpy Generator or an integer seed >= 0 (got {rng!r})")
    return np.random.default_rng(int(rng))


def sphere_points(rng: Any, n: int, d: int, *, radius: float = 1.0) -> np.ndarray:
    """Draw ``n`` independent points uniformly on the sphere of the given radius in ``R^d`` (Assumption 1).

    The points are normalised standard Gaussians, whose direction is uniform on the sphere.

    Parameters
    ----------
    rng : numpy.random.Generator or int >= 0
        Generator to draw from (advanced by ``n * d`` normals), or a seed for a new one.
    n : int >= 1
        Number of points.
    d : int >= 1
        Dimension of the space (the sphere is :math:`S^{d-1}`).
    radius : float > 0
        Radius :math:`M` of the sphere.

    Returns
    -------
    numpy.ndarray (n, d), float64
        One point per row, each of norm ``radius`` (to rounding).
    """
    gen = _rng(rng)
    n = check_int("n", n, low=1)
    d = check_int("d", d, low=1)
    radius = check_positive("radius", radius)
    x = gen.normal(size=(n, d))
    return radius * x / np.linalg.norm(x, axis=-1, keepdims=True)


def rho_min(alpha: Any, X: Any, N: int):
    r"""The experimental radius of Algorithm 4: the smallest distance from the context vector to a non-selected
    token,

    .. math:: \rho_{\min}=\min_{j\notin I_N}\|\alpha_jx_j-s\|_2,\qquad s=\sum_{i\in I_N}\alpha_ix_i .

    Parameters
    ----------
    alpha : array (..., L)
        Non-negative weights of one row (or a batch of rows).
    X : array (..., L, d)
        The vectors :math:`x_j`.
    N : int in [1, L]
        Size of the top-N set :math:`I_N` (ties to the lower index, as :func:`attn_lib.theory.top_n_indices`).

    Returns
    -------
    float or numpy.ndarray (...)
        :math:`\rho_{\min}`; ``inf`` when ``N = L`` (no token is left out).
    """
    s = theory.context_vector(alpha, X, N)  # validates alpha, X and N
    a = np.asarray(alpha, dtype=np.float64)
    x = np.asarray(X, dtype=np.float64)
    D = np.linalg.norm(a[..., None] * x - s[..., None, :], axis=-1)
    rho = np.where(theory.top_n_mask(a, N), np.inf, D).min(-1)
    return float(rho) if rho.ndim == 0 else rho


def convention_cases(seed: int = 0) -> dict[str, tuple[np.ndarray, np.ndarray, int, float]]:
    r"""Three small rows for the unit cases of the strict convention :math:`r\uparrow\rho_{\min}`.

    * ``"all selected inside (N = 3)"``: weights ``(0.3, 0.3, 0.3, 0.05, 0.05)`` on ``e1, e1, e1, -e1, -e1``, so
      ``s = 0.9 e1``, the selected tokens are at distance 0.6 and the others at 0.95: :math:`N_s/N = 1`;
    * ``"one selected outside (N = 3)"``: the third selected vector flipped to ``-e1``, so it lies at 0.6 while
      :math:`\rho_{\min} = 0.35`: :math:`N_s/N = 2/3`;
    * ``"N = 1 (random row)"``: softmax of 10 standard-normal logits and 10 points on :math:`S^3`, drawn from
      ``numpy.random.default_rng(seed)``: :math:`N_s/N = 1`, since :math:`D_1 = 0`.

    Parameters
    ----------
    seed : int >= 0
        Seed of the random row.

    Returns
    -------
    dict
        name -> ``(alpha (L,), X (L, d), N, expected N_s/N)``; the expected values are derived by hand above.
    """
    rng = np.random.default_rng(check_int("seed", seed, low=0))
    e1 = np.eye(2)[0]
    alpha_u = np.array([0.3, 0.3, 0.3, 0.05, 0.05])
    alpha_1 = theory.softmax_np(rng.normal(size=10))
    X_1 = sphere_points(rng, 10, 4)
    return {
        "all selected inside (N = 3)": (alpha_u, np.array([e1, e1, e1, -e1, -e1]), 3, 1.0),
        "one selected outside (N = 3)": (alpha_u, np.array([e1, e1, -e1, -e1, -e1]), 3, 2 / 3),
        "N = 1 (random row)": (alpha_1, X_1, 1, 1.0),
    }


def convention_table(cases: Mapping[str, tuple]) -> pd.DataFrame:
    r"""The separable fraction of each case under the strict convention, and :math:`N_s` under the literal reading.

    Parameters
    ----------
    cases : mapping
        name -> ``(alpha (L,), X (L, d), N, expected)`` as returned by :func:`convention_cases`.

    Returns
    -------
    pandas.DataFrame
        Index ``case`` (the names); columns ``rho_min`` (:func:`rho_min`), ``N_s/N (r -> rho_min)``
        (:func:`attn_lib.theory.separability` with ``r=None``), ``N_s (closed ball at r = rho_min)``
        (:func:`attn_lib.theory.distinguishable_count` with ``r = rho_min`` exactly) and ``expected N_s/N``.
    """
    if not isinstance(cases, Mapping) or not cases:
        raise ValueError("cases must be a non-empty mapping name -> (alpha, X, N, expected), as convention_cases()")
    rows = []
    for name, case in cases.items():
        if not isinstance(case, tuple) or len(case) != 4:
            raise ValueError(f"cases[{name!r}] must be a tuple (alpha, X, N, expected) (got {case!r})")
        alpha, X, N, expected = case
        r = rho_min(alpha, X, N)
        rows.append(
            {
                "case": name,
                "rho_min": r,
                "N_s/N (r -> rho_min)": theory.separability(alpha, X, N),
                "N_s (closed ball at r = rho_min)": theory.distinguishable_count(alpha, X, N, r=r),
                "expected N_s/N": float(expected),
            }
        )
    return pd.DataFrame(rows).set_index("case")


def exact_ball_flags(layer: Any, N: int) -> torch.Tensor:
    r"""Algorithm 4's strict test :math:`D_i<\rho_{\min}` for each selected token of a causal layer, in exact rational
    arithmetic (:class:`fractions.Fraction`) on the layer's float64 weights and vectors, compared as
    :math:`D_i^2<\min_{j\notin I_N}D_j^2`: ``(H, L, N)`` bool, ``False`` in rows with fewer than ``N + 1`` tokens.
    ``O(H L^2 d)`` fractions: for small layers."""
    ld, N = layer, check_int("N", N, low=1, high=layer.L - 1)
    order = ld.order(N)
    out = torch.zeros(ld.H, ld.L, N, dtype=torch.bool)
    for h in range(ld.H):
        X = [[Fraction(v) for v in row] for row in ld.values[h].tolist()]
        for r in range(N, ld.L):
            a = [Fraction(w) for w in ld.alpha[h, r, : r + 1].tolist()]
            sel = order[h, r].tolist()
            s = [sum(a[j] * X[j][k] for j in sel) for k in range(ld.d)]
            D2 = [sum((a[i] * X[i][k] - s[k]) ** 2 for k in range(ld.d)) for i in range(r + 1)]
            rho2 = min(D2[i] for i in range(r + 1) if i not in sel)
            out[h, r] = torch.tensor([D2[j] < rho2 for j in sel])
    return out


def ball_test_layer(temperature: float, *, L: int = 32, d: int = 6, seed: int = 0):
    """The random causal layer of :func:`ball_test_table`: two heads, standard normal logits divided by
    ``temperature > 0`` and standard normal vectors put on the unit sphere (``torch.Generator().manual_seed(seed)``),
    ``L`` in [2, 64] tokens in ``d >= 1`` dimensions; the same vectors and logits at every temperature."""
    T, L, d = check_positive("temperature", temperature), check_int("L", L, low=2, high=64), check_int("d", d, low=1)
    g = torch.Generator().manual_seed(check_int("seed", seed, low=0))
    logits = torch.randn(2, L, L, generator=g, dtype=torch.float64)
    logits = logits.masked_fill(~torch.ones(L, L, dtype=torch.bool).tril(), -np.inf)
    values = torch.randn(2, L, d, generator=g, dtype=torch.float64)
    return metrics.unit_layer(metrics.LayerData.from_logits(logits, values, temperature=T))


def ball_test_table(
    temperatures: Sequence[float] = (1.0, 0.1, 0.01), *, N: int = 8, L: int = 32, d: int = 6, seed: int = 0
) -> pd.DataFrame:
    r"""How Algorithm 4's strict test fares in float64 against exact arithmetic (:func:`exact_ball_flags`), on the
    layer of :func:`ball_test_layer` at each temperature ``T > 0``, with ``N`` in [1, L - 1].

    Columns: ``selected tokens`` (in rows with ``t >= N + 1``), ``below 1e-16 of the top`` (those whose weight is
    below ``1e-16`` times their row's top weight), ``distance form wrong`` (tests that differ from exact arithmetic
    when the rounded distances are compared, ``||a_i - s|| < min_j ||a_j - s||``, every distance by the same float64
    formula) and ``excess form wrong (<engine>)`` (the same for :func:`attn_lib.metrics.separability_metrics`, which
    compares ``D_i^2 - ||s||^2``), for ``torch`` and, where an accelerator is registered, ``numba``."""
    temps = [check_positive("temperatures", T) for T in temperatures]
    N, L = check_int("N", N, low=1, high=31), check_int("L", L, low=N + 1, high=64)
    engines = ["torch"] + (["numba"] if metrics._engine.accelerated("separability_metrics") else [])
    rows = []
    for T in temps:
        ld = ball_test_layer(T, L=L, d=d, seed=seed)
        exact, order = exact_ball_flags(ld, N), ld.order(N)
        valid = (torch.arange(L) >= N)[None, :, None].expand(2, L, N)
        a = ld.alpha.unsqueeze(-1) * ld.values.unsqueeze(1)  # (2, L, L, d): a_j = alpha_j x_j in each row
        selected = torch.zeros(ld.alpha.shape, dtype=torch.bool).scatter_(-1, order, True)
        D = torch.linalg.vector_norm(a - (a * selected.unsqueeze(-1)).sum(-2, keepdim=True), dim=-1)
        rho = torch.where(ld.mask & ~selected, D, np.inf).amin(-1, keepdim=True)  # from the same rounded distances
        direct = (D.gather(-1, order) < rho) & valid
        sp = {e: metrics.separability_metrics(ld, N=N, normalize=False, engine=e) for e in engines}
        small = ld.alpha.gather(-1, order) < 1e-16 * ld.alpha.amax(-1, keepdim=True)
        rows.append(
            {
                "T": T,
                "selected tokens": int(valid.sum()),
                "below 1e-16 of the top": int((small & valid).sum()),
                "distance form wrong": int((direct != exact).sum()),
                **{f"excess form wrong ({e})": int((sp[e].flags != exact).sum()) for e in engines},
            }
        )
    return pd.DataFrame(rows).set_index("T")


def toy_row(
    k: int, temperature: float, *, seed: int = 0, d: int = 64, L: int = 256, M: float = 1.0
) -> tuple[np.ndarray, np.ndarray]:
    r"""Trial ``k`` of the toy model: ``L`` vectors uniform on :math:`S^{d-1}(M)`, a uniform unit query ``q`` and
    the weights :math:`\alpha=\mathrm{softmax}(l/T)` with :math:`l_j=\sqrt d\,\langle x_j,q\rangle`.

    The vectors and the query depend on ``(seed, k)`` only (``numpy.random.default_rng([seed, k])``), so every
    temperature sees the same geometry. For ``M = 1`` the logits are approximately standard normal.

    Parameters
    ----------
    k : int >= 0
        Trial number.
    temperature : float > 0
        Softmax temperature :math:`T`.
    seed : int >= 0
        Seed shared by all trials.
    d : int >= 2
        Dimension.
    L : int >= 2
        Number of tokens.
    M : float > 0
        Radius of the sphere.

    Returns
    -------
    (numpy.ndarray (L,), numpy.ndarray (L, d))
        The weights ``alpha`` (summing to one) and the vectors ``X``.
    """
    k = check_int("k", k, low=0)
    seed = check_int("seed", seed, low=0)
    d = check_int("d", d, low=2)
    L = check_int("L", L, low=2)
    rng = np.random.default_rng([seed, k])
    X = sphere_points(rng, L, d, radius=M)
    q = sphere_points(rng, 1, d)[0]
    return theory.softmax_np(np.sqrt(d) * X @ q, temperature=temperature), X


def _ratio_max(num: np.ndarray, den: np.ndarray) -> float:
    """max_i num_i / den_i with 0/0 = 0 (a token with den_i = 0 must have num_i = 0; otherwise the ratio is inf)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(den > 0, num / np.where(den > 0, den, 1.0), np.where(num > 0, np.inf, 0.0))
    return float(ratio.max())


def _trial_rows(
    temperature: float, k: int, n_values: Sequence[int], seed: int, d: int, L: int, M: float, mc_draws: int
) -> list[dict]:
    """The rows of :func:`toy_stats` for one temperature and one trial (one row per N)."""
    a, X = toy_row(k, temperature, seed=seed, d=d, L=L, M=M)
    delta = float(pdist(X).min())
    rows = []
    for N in n_values:
        Xi = theory.selected_offsets(a, X, N)
        xi = theory.theorem2_xi(a, N, M, delta)
        r = rho_min(a, X, N)
        lower, upper = theory.theorem2_bounds(a, N, M, delta, r)
        # Monte-Carlo E X_i: the top-N weights fixed, the N selected vectors redrawn uniformly on the sphere
        aI = a[theory.top_n_indices(a, N)]
        redraw = np.random.default_rng([seed, k, N]).normal(size=(mc_draws, N, d))
        redraw *= M / np.linalg.norm(redraw, axis=-1, keepdims=True)
        mu = theory.selected_offsets(np.broadcast_to(aI, (mc_draws, N)), redraw, N).mean(0)
        beta = aI.sum() - aI
        rows.append(
            dict(
                T=temperature,
                trial=k,
                N=N,
                fraction=theory.separability(a, X, N),
                lower=lower,
                upper_paper=upper,
                upper_valid=theory.theorem2_hoeffding_upper(mu, r, M),
                upper_valid_M=theory.theorem2_hoeffding_upper(mu, r, M, value_range=M),
                mean_X=float(Xi.mean()),
                mean_mu=float(mu.mean()),
                mean_xi=float(xi.mean()),
                r=r,
                delta=delta,
                top_mass=float(aI.sum()),
                X_over_xi=_ratio_max(Xi, xi),
                mu_over_Mbeta=_ratio_max(mu, M * beta),
            )
        )
    return rows


def toy_stats(
    temperatures: float | Sequence[float],
    trials: int,
    *,
    n_values: Sequence[int] = TOY_N,
    seed: int = 0,
    d: int = 64,
    L: int = 256,
    M: float = 1.0,
    mc_draws: int = 64,
) -> pd.DataFrame:
    r"""Per-row statistics of the toy model: one row per temperature, trial and N.

    For each trial :func:`toy_row` draws the geometry; :math:`\delta` is the trial's minimum pairwise distance
    (Assumption 2) and the radius is :math:`r\uparrow\rho_{\min}` (:func:`rho_min`). :math:`\mathbb EX_i` is a
    Monte-Carlo mean over ``mc_draws`` redraws of the N selected vectors on the sphere with the top-N weights kept
    fixed (as Theorem 2 assumes), from ``numpy.random.default_rng([seed, k, N])``.

    Parameters
    ----------
    temperatures : float > 0 or sequence of them
        Softmax temperature(s).
    trials : int >= 1
        Trials (random rows) per temperature; trial ``k`` has the same vectors at every temperature.
    n_values : sequence of int in [1, L - 1]
        The N grid.
    seed, d, L, M
        As in :func:`toy_row` (``seed`` seeds every draw).
    mc_draws : int >= 1
        Monte-Carlo redraws per (trial, N).

    Returns
    -------
    pandas.DataFrame
        ``len(temperatures) * trials * len(n_values)`` rows with columns ``T, trial, N``;
        ``fraction`` (empirical :math:`N_s/N`); ``lower``, ``upper_paper`` (Theorem 2, paper's form);
        ``upper_valid``, ``upper_valid_M`` (valid Hoeffding form at the Monte-Carlo mean, range :math:`2M` and
        :math:`M`); ``mean_X``, ``mean_mu``, ``mean_xi`` (means over :math:`I_N` of :math:`X_i`,
        :math:`\mathbb EX_i` and :math:`\xi_i`); ``r``, ``delta``, ``top_mass`` (:math:`\bar\alpha_N`); and the
        two pointwise checks ``X_over_xi`` :math:`=\max_i X_i/\xi_i` (step 2 of the proof: at most 1) and
        ``mu_over_Mbeta`` :math:`=\max_i \mathbb EX_i/(M\beta_i)` (at most 1), where 0/0 counts as 0.
        ``attrs`` records ``d, L, M, seed, mc_draws`` and ``device`` (``"cpu"``) for the figure's provenance.
    """
    Ts = [temperatures] if np.ndim(temperatures) == 0 else list(temperatures)
    if not Ts:
        raise ValueError("temperatures must be a number > 0 or a non-empty sequence of them")
    Ts = [check_positive("temperatures", T) for T in Ts]
    trials = check_int("trials", trials, low=1)
    L = check_int("L", L, low=2)
    if isinstance(n_values, (str, bytes)) or np.ndim(n_values) != 1 or len(n_values) == 0:
        raise ValueError(f"n_values must be a non-empty sequence of integers in [1, L - 1] (got {n_values!r})")
    n_values = [check_int("n_values", N, low=1, high=L - 1) for N in n_values]
    M = check_positive("M", M)
    mc_draws = check_int("mc_draws", mc_draws, low=1)
    seed = check_int("seed", seed, low=0)
    d = check_int("d", d, low=2)
    rows = [row for T in Ts for k in range(trials) for row in _trial_rows(T, k, n_values, seed, d, L, M, mc_draws)]
    df = pd.DataFrame(rows)
    df.attrs.update(d=d, L=L, M=M, seed=seed, mc_draws=mc_draws, device="cpu")
    return df


def toy_means(stats: pd.DataFrame) -> pd.DataFrame:
    """Means over trials per N of the columns of a :func:`toy_stats` table for one temperature.

    Parameters
    ----------
    stats : pandas.DataFrame
        A :func:`toy_stats` table with a single temperature.

    Returns
    -------
    pandas.DataFrame
        Index ``N``; columns ``fraction, lower, upper_paper, upper_valid, upper_valid_M, mean_X, mean_mu, mean_xi,
        r, top_mass``.
    """
    _check_stats(stats)
    if stats["T"].nunique() != 1:
        raise ValueError(
            f"stats must hold one temperature (got T = {sorted(stats['T'].unique())}); "
            "select one with stats[stats['T'] == T]"
        )
    return stats.groupby("N")[_MEAN_COLUMNS].mean()


@dataclasses.dataclass(frozen=True)
class ToySummary:
    r"""The numbers the chapter states about the per-N means of the toy model (built by :func:`toy_summary`).

    Attributes
    ----------
    n_min, n_max : int
        Ends of the N grid.
    fraction_first, fraction_last : float
        Mean :math:`N_s/N` at ``n_min`` and at ``n_max``.
    lower_positive_up_to : int or None
        Largest N with a positive mean lower bound (``None`` if there is none).
    upper_paper_min, upper_paper_max : float
        Range over N of the mean upper bound in the paper's form.
    n_values : int
        Number of N in the grid.
    bracketed_paper, bracketed_valid : int
        Number of N with lower <= mean :math:`N_s/N` <= upper (paper's form; valid form, range :math:`2M`).
    mu_over_xi_mean, mu_over_xi_min, mu_over_xi_max : float
        Mean, minimum and maximum over the N >= 2 of (mean :math:`\mathbb EX_i`) / (mean :math:`\xi_i`).
    X_over_mu_mean : float
        Mean over the N >= 2 of (mean observed :math:`X_i`) / (mean :math:`\mathbb EX_i`).
    """

    n_min: int
    n_max: int
    fraction_first: float
    fraction_last: float
    lower_positive_up_to: int | None
    upper_paper_min: float
    upper_paper_max: float
    n_values: int
    bracketed_paper: int
    bracketed_valid: int
    mu_over_xi_mean: float
    mu_over_xi_min: float
    mu_over_xi_max: float
    X_over_mu_mean: float


def toy_summary(means: pd.DataFrame) -> ToySummary:
    """Summarise a :func:`toy_means` table in the numbers the chapter states.

    Parameters
    ----------
    means : pandas.DataFrame
        A :func:`toy_means` table (index N, with at least one N >= 2).

    Returns
    -------
    ToySummary
    """
    missing = sorted(set(_MEAN_COLUMNS) - set(getattr(means, "columns", [])))
    if not isinstance(means, pd.DataFrame) or missing or len(means) == 0:
        raise ValueError(f"means must be a non-empty toy_means() table (missing columns: {missing})")
    multi = means.index >= 2
    if not multi.any():
        raise ValueError(f"means must have a row with N >= 2 (got N = {list(means.index)})")
    f = means["fraction"]
    ratio_mu = (means["mean_mu"] / means["mean_xi"])[multi]
    positive = [int(n) for n in means.index if means.loc[n, "lower"] > 0]
    return ToySummary(
        n_min=int(means.index.min()),
        n_max=int(means.index.max()),
        fraction_first=float(f.loc[means.index.min()]),
        fraction_last=float(f.loc[means.index.max()]),
        lower_positive_up_to=max(positive) if positive else None,
        upper_paper_min=float(means["upper_paper"].min()),
        upper_paper_max=float(means["upper_paper"].max()),
        n_values=len(means),
        bracketed_paper=int(((means["lower"] <= f) & (f <= means["upper_paper"])).sum()),
        bracketed_valid=int(((means["lower"] <= f) & (f <= means["upper_valid"])).sum()),
        mu_over_xi_mean=float(ratio_mu.mean()),
        mu_over_xi_min=float(ratio_mu.min()),
        mu_over_xi_max=float(ratio_mu.max()),
        X_over_mu_mean=float((means["mean_X"] / means["mean_mu"])[multi].mean()),
    )


def _check_stats(stats: Any) -> None:
    need = {"T", "N", "fraction", *_MEAN_COLUMNS}
    if not isinstance(stats, pd.DataFrame) or not need <= set(stats.columns) or len(stats) == 0:
        raise ValueError("stats must be a non-empty table from attn_lib.book.toy.separability.toy_stats()")


def render_temperature(temperature: float, stats: pd.DataFrame) -> Figure:
    r"""The slider's figure at one temperature: box plots over trials of the empirical :math:`N_s/N` against N,
    with the means over trials of the lower bound (clipped at -1), the paper's upper bound and the valid Hoeffding
    form at the Monte-Carlo :math:`\mathbb EX_i` (range :math:`2M`).

    Parameters
    ----------
    temperature : float
        One of the temperatures in ``stats["T"]``.
    stats : pandas.DataFrame
        A :func:`toy_stats` table (its ``attrs`` name the geometry and the seed for the provenance footer).

    Returns
    -------
    matplotlib.figure.Figure
        Outside pyplot's state machine, labelled with model ``"none"``, the generator as text, device and seed.
    """

    _check_stats(stats)
    meta = stats.attrs
    if not {"d", "L", "seed", "device"} <= set(meta):
        raise ValueError("stats.attrs must name d, L, seed and device (a table from toy_stats())")
    temps = sorted(stats["T"].unique())
    if temperature not in temps:
        raise ValueError(f"temperature must be one of the temperatures of stats {temps} (got {temperature!r})")
    df = stats[stats["T"] == temperature]
    Ns = sorted(int(n) for n in df["N"].unique())
    pos = np.arange(len(Ns))
    fig = Figure(figsize=(FIGURE_WIDTH_IN, 4.2))
    ax = fig.subplots()
    ax.boxplot(
        [df[df.N == n]["fraction"] for n in Ns],
        positions=pos,
        widths=0.5,
        patch_artist=True,
        boxprops=dict(facecolor="tab:green", alpha=0.4),
        medianprops=dict(color="darkgreen"),
    )
    m = df.groupby("N").mean(numeric_only=True)
    ax.plot(pos, m["upper_paper"], "^-", color="tab:red", ms=4, label="upper, paper's form (heuristic)")
    ax.plot(pos, m["upper_valid"], "s--", color="tab:orange", ms=4, label="upper, valid form at MC E X_i (R = 2M)")
    ax.plot(pos, m["lower"].clip(lower=-1), "v-", color="tab:purple", ms=4, label="lower (clipped at -1)")
    ax.set_xticks(pos, [str(n) for n in Ns])
    ax.set_ylim(-1.05, 1.05)
    ax.set_xlabel("selected tokens N")
    ax.set_ylabel(r"$N_s/N$")
    ax.set_title(
        f"toy sphere model, T = {temperature:g}: top-N mass at N = {Ns[-1]} is {m.loc[Ns[-1], 'top_mass']:.2f}"
    )
    ax.legend(fontsize=7, loc="lower left")
    ax.grid(alpha=0.3)
    text = f"synthetic: uniform on S^{meta['d'] - 1}, L={meta['L']}, softmax of sqrt(d) x·q"
    return label_figure(fig, model="none", text=text, device=meta["device"], seed=meta["seed"])


def temperature_slider(stats: pd.DataFrame, *, value: float | None = None, description: str = "temperature T"):
    """A pre-rendered slider over the temperatures of ``stats``, one :func:`render_temperature` figure each.

    Parameters
    ----------
    stats : pandas.DataFrame
        A :func:`toy_stats` table with one or more temperatures.
    value : float, optional
        The temperature shown first (default: the smallest).
    description : str
        The slider's label.

    Returns
    -------
    attn_lib.book.widgets.PrecomputedSlider
        Works in a live kernel and in the static book (see :func:`attn_lib.book.widgets.precomputed_slider`).
    """

    _check_stats(stats)
    temps = [float(T) for T in sorted(stats["T"].unique())]
    return precomputed_slider(temps, lambda T: render_temperature(T, stats), description=description, value=value)
