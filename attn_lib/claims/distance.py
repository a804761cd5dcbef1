"""The rules of the claims of Figs. 2a and 2b, the distance against L and against N (their fields: claims.toml)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .claim import Outcome, has_results, judged, na_if, prf_ref, rule
from .diagnosis import diagnosis_summary
from .stats import head_summary, linear_growth


def _means(df: pd.DataFrame, by: str, col: str) -> pd.Series:
    """The head means of ``col`` per value of ``by``."""
    return head_summary(df, by, col).set_index(by)["mean"]


# ---- Fig. 2a: distance against L ----------------------------------------------------------------------------------
def length_fit(df: pd.DataFrame, col: str, th: dict) -> tuple[dict, pd.DataFrame]:
    a = head_summary(df, "L", col)
    return linear_growth(a["L"], a["mean"], th), a


def _growth(results, th, col: str, name: str) -> tuple[pd.DataFrame, dict, pd.DataFrame, str]:
    """The distance table, :func:`length_fit` of ``col`` and its measured text."""
    df = results["distance_vs_length"]
    fit, a = length_fit(df, col, th)
    meas = (
        f"{name}: exponent of L {fit['exponent']:.2f}; grows {fit['growth']:.3g}× while L grows "
        f"{fit['x_growth']:.3g}× (L = {int(a['L'].min())}…{int(a['L'].max())})"
    )
    return df, fit, a, meas


@rule("fig2a-dtilde-linear")
def _fig2a_dtilde(results, th):
    df, fit, _, meas = _growth(results, th, "d_tilde", "d~")
    if fit["linear"]:
        return Outcome("reproduced", meas, numbers=fit)
    s_fit, _ = length_fit(df, "s_norm", th)
    cause = (
        f"d~ ≈ (L − N)‖s_N‖ ({prf_ref('prop-topn-linear')}), and the head-mean ‖s_N‖ has exponent "
        f"{s_fit['exponent']:.2f} in L here"
    )
    return Outcome("not reproduced", meas, cause, numbers=fit)


def _bounded_growth(results, th, col: str, name: str, bound: str, extra: int):
    """E1 or the Monte-Carlo E[d~] against L. A failing row's cause is prop-random-bounded's bound on this run's
    max‖x‖, which caps the endpoint exponent log(growth)/log(L1/L0); the verdict reads the least-squares exponent."""
    df, fit, a, meas = _growth(results, th, col, name)
    if fit["linear"]:
        return Outcome("reproduced", meas, numbers=fit)
    if "x_max" not in df:
        cause = f"the run has no max‖x‖ column for {prf_ref('prop-random-bounded')}"
        return Outcome("not reproduced", meas, cause, numbers=fit)
    e = a.set_index("L")["mean"]
    xm = _means(df, "L", "x_max")
    N = int(df["N"].iloc[0])
    L0, L1 = int(min(e.index)), int(max(e.index))
    cap = (N + extra) * float(xm[L1])  # the bound at the largest L (p <= 1 in every valid row)
    span = math.log(L1 / L0)
    cap_exp = math.log(cap / float(e[L0])) / span if cap > 0 and e[L0] > 0 else math.nan
    end_exp = math.log(float(e[L1]) / float(e[L0])) / span if e[L1] > 0 and e[L0] > 0 else math.nan
    nm = "E[d~]" if col == "mc" else name
    cause = (
        f"{nm} ≤ {bound} ({prf_ref('prop-random-bounded')}), evaluated at {cap:.3g} at L = {L1} (mean max‖x‖ "
        f"{xm[L1]:.3g}, exponent {length_fit(df, 'x_max', th)[0]['exponent']:.2f} in L): from {nm}({L0}) = "
        f"{e[L0]:.3g} that caps the endpoint exponent (ln of {nm} at L = {L1} over {nm} at L = {L0}, divided by "
        f"ln({L1}/{L0})) at {cap_exp:.2f} (measured {end_exp:.2f}; least-squares exponent {fit['exponent']:.2f})"
    )
    if not cap_exp < 1 - th["linear_exponent_tol"]:  # the cap alone does not decide: say where E sits under it
        cap0 = (N + extra) * float(xm[L0])
        cause += (
            f"; the cap alone leaves room on this grid, but it grows with L only as max‖x‖ does, and {nm} sits at "
            f"{e[L0] / cap0:.0%} of it at L = {L0} and {e[L1] / cap:.0%} at L = {L1}"
        )
        if "indiv" in df and col == "e1":
            ind = length_fit(df, "indiv", th)[0]
            cause += (
                f"; E1's leading term (t−N)/t·Σ‖α_i x_i‖ ≤ max‖x‖ ({prf_ref('cor-two-regimes')}) has exponent "
                f"{ind['exponent']:.2f}"
            )
    return Outcome("not reproduced", meas, cause, numbers=fit)


rule("fig2a-e1-linear")(
    lambda results, th: _bounded_growth(results, th, "e1", "E1", "(1+p+N)·max‖x‖ ≤ (N+2)·max‖x‖", 2)
)


@rule("fig2a-mc-linear")
def _fig2a_mc(results, th):
    df = results["distance_vs_length"]
    na_if("mc" not in df, "no Monte-Carlo column in this run")
    out = _bounded_growth(results, th, "mc", "E[d~] (Monte Carlo)", "(1+N)·max‖x‖", 1)
    fits = [length_fit(df, c, th)[0] for c in mc_columns(df)]
    exps = [f["exponent"] for f in fits]
    spread = f"; over {len(fits)} seeds the exponent is {min(exps):.2f} … {max(exps):.2f}"
    return over_seeds(out, [f["linear"] for f in fits], spread, th, "distance_vs_length")


def mc_columns(df: pd.DataFrame) -> list[str]:
    """The Monte-Carlo columns of a distance table, one per seed: ``mc``, ``mc_seed1``, ..."""
    return ["mc", *sorted((c for c in df.columns if c.startswith("mc_seed")), key=lambda c: int(c[7:]))]


def over_seeds(out: Outcome, passes: list, spread: str, th: dict, table: str = "", *, subsets="", agree="") -> Outcome:
    """``out`` (the first seed's outcome) judged over every seed (``passes``: whether each passes), ``spread`` added:
    "no verdict" with fewer than ``mc_min_seeds`` seeds or when they disagree. ``subsets`` and ``agree`` word the
    causes (default: the Monte-Carlo subsets of the distance ``table``)."""
    meas, n = out.measured + spread, len(passes)
    if n < th["mc_min_seeds"]:
        why = f"only {n} seeds of {subsets or f'the Monte-Carlo subsets in {table}'}"
        return Outcome("no verdict", meas, f"{why} (the rule needs {th['mc_min_seeds']})")
    if 0 < sum(passes) < n:
        return Outcome(
            "no verdict", meas, f"the seeds disagree: {sum(passes)} of {n} {agree or f'pass the rule on {table}'}"
        )
    return Outcome(out.verdict, meas, out.cause, numbers=out.numbers)


def _e2_bound_text(df: pd.DataFrame, by: str, at: int, d: float) -> str:
    """prop-e2-tracks' bound (N+1)·max‖x‖ at ``by = at``, next to d~ there."""
    if "x_max" not in df:
        return ""
    g = df[df[by] == at]
    b = float(((g["N"] + 1) * g["x_max"]).mean())
    forces = "below" if b < d else "above"
    return f"; the bound |E2 − d~| ≤ (N+1)·max‖x‖ ({prf_ref('prop-e2-tracks')}) is {b:.4g} at {by} = {at}, {forces} d~ = {d:.4g}"


@rule("fig2a-e2-linear")
def _fig2a_e2(results, th):
    df, fit, a, meas = _growth(results, th, "e2", "E2")
    d = _means(df, "L", "d_tilde")
    gaps = (a.set_index("L")["mean"] - d).abs().div(d)
    L1 = int(max(d.index))
    meas += f"; |E2 − d~|/d~ ≤ {gaps.max():.1%} over L" + _e2_bound_text(df, "L", L1, float(d[L1]))
    d_exp = length_fit(df, "d_tilde", th)[0]["exponent"]
    cause = f"E2 stays within {gaps.max():.1%} of d~ (measured), and d~ itself has exponent {d_exp:.2f}"
    return judged(fit["linear"], meas, cause, numbers=fit)


@rule("lemma1-vanishing")
def _lemma1(results, th):
    _, fit, a, meas = _growth(results, th, "alpha_bar", "ᾱ_N")
    meas = meas.replace("grows", "changes", 1)
    if abs(fit["exponent"] + 1) <= th["linear_exponent_tol"]:
        return Outcome("reproduced", meas, numbers=fit)
    cause = (
        f"the top-N mass does not fall like 1/L: it keeps {fit['growth']:.0%} of its value at L = {int(a['L'].min())} "
        f"while 1/L falls to {1 / fit['x_growth']:.0%}; Lemma 1 needs logits bounded independently of L, which a head "
        "that puts a fixed share of its weight on a few tokens violates"
    )
    if has_results(results, "critical_n_diagnosis"):
        summ = diagnosis_summary(results["critical_n_diagnosis"])
        r = summ[summ["variant"] == summ["variant"].iloc[0]].iloc[0]
        if math.isfinite(r["sink share"]):
            cause += f"; measured: at L = {int(r['L'])} the median head gives the first token {r['sink share']:.0%} of its weight"
    return Outcome("not reproduced", meas, cause, numbers=fit)


@rule("jensen-gap-small")
def _jensen_small(results, th):
    df = results["distance_vs_length"]
    e1 = _means(df, "L", "e1")
    r = _means(df, "L", "e1_gap") / e1
    meas = f"gap bound / E1: {r.min():.1%} … {r.max():.1%} over L = {int(r.index.min())}…{int(r.index.max())}"
    if "mc" in df:
        mc = (_means(df, "L", "mc") - e1) / e1
        meas += f"; (E[d~] − E1)/E1 by Monte Carlo (one draw, not read by the rule): {mc.min():+.1%} … {mc.max():+.1%}"
    if r.max() <= th["jensen_small_rel"]:
        return Outcome("reproduced", meas)
    L = int(r.idxmax())
    g = df[df["L"] == L]
    cause = (
        f"at L = {L} the bound is {r[L]:.0%} of E1 (head means {g['e1_gap'].mean():.4g} against {g['e1'].mean():.4g}): "
        f"the weights are concentrated (mean top-{int(g['N'].iloc[0])} mass ᾱ_N = {g['alpha_bar'].mean():.2f})"
    )
    return Outcome("not reproduced", meas, cause)


@rule("cor2-individual-dominate")
def _cor2_dominate(results, th):
    df = results["distance_vs_length"]
    na_if("indiv" not in df, "not judged: the run has no column indiv (Corollary 2 (i)'s leading term)")
    e1 = _means(df, "L", "e1")
    rem = (e1 - _means(df, "L", "indiv")) / e1
    L1 = int(rem.index.max())
    meas = "remainder R/E1: " + ", ".join(f"L={int(L)}: {v:+.0%}" for L, v in rem.items())
    cause = (
        f"|R| ≤ p·Σ‖z − a_i‖ ≈ N‖z‖ ({prf_ref('cor-two-regimes')}) is not small next to Σ‖α_i x_i‖ on this model: the "
        f"measured R is {rem[L1]:+.0%} of E1 at L = {L1}"
    )
    return judged(abs(rem[L1]) <= th["converge_rel"], meas, cause)


@rule("thm1-bound-holds")
def _thm1_holds(results, th):
    tables = [results[t] for t in ("distance_vs_length", "distance_vs_n") if has_results(results, t)]
    n = sum(int(df["dmax_violations"].sum()) for df in tables)
    meas = f"{n} violating rows of {sum(int(df['n_rows'].sum()) for df in tables)} (Figs. 2a and 2b)"
    cause = f"a theorem fails in {n} rows: a defect of this build's code, cause not identified"
    return judged(n == 0, meas, cause, "guarantee")


@rule("fig2a-bound-conservative")
def _fig2a_conservative(results, th):
    df = results["distance_vs_length"]
    ratio = float(np.nanmedian(df["d_max"] / df["d_tilde"].where(df["d_tilde"] > 0)))
    cause = f"cause not identified: the median d_max/d~ is only {ratio:.3g}"
    return judged(ratio >= th["conservative_ratio"], f"median d_max/d~ = {ratio:.3g}", cause)


# ---- Fig. 2b: distance against N --------------------------------------------------------------------------------
def _n_means(df: pd.DataFrame, col: str) -> tuple[pd.Series, bool]:
    """Head means per N on the rows common to every N (``<col>_common``) when the table has them."""
    common = f"{col}_common" in df
    return _means(df, "N", f"{col}_common" if common else col), common


def _plateau_ns(df, th) -> tuple[int, int]:
    """``plateau_from_n`` and the largest N of the grid (``n/a`` unless the grid has both)."""
    n0, Ns = th["plateau_from_n"], sorted(df["N"].unique())
    na_if(not (n0 in Ns and Ns[-1] > n0), f"the N grid {Ns} lacks N = 20 or a larger N")
    return n0, int(Ns[-1])


@rule("fig2b-plateau")
def _fig2b_plateau(results, th):
    df = results["distance_vs_n"]
    n0, n1 = _plateau_ns(df, th)
    a, common = _n_means(df, "d_tilde")
    rel = abs(a[n1] - a[n0]) / max(abs(a[n0]), 1e-300)
    rows = "same rows at every N" if common else "rows differ between N"
    meas = f"mean d~ ({rows}): N={n0}: {a[n0]:.4g}, N={n1}: {a[n1]:.4g} (change {rel:.1%})"
    if rel <= th["plateau_rel"]:
        return Outcome("reproduced", meas)
    s = _means(df, "N", "s_norm")
    cause = f"d~ ≈ (L − N)‖s_N‖ ({prf_ref('prop-topn-linear')}): mean ‖s_N‖ went {s[n0]:.3g} → {s[n1]:.3g}"
    return Outcome("not reproduced", meas, cause)


#: the factors of d_max's leading term (t − N)·ᾱ_N·max_{i∈I_N}‖x_i‖, and ‖s_N‖ (d~ ≈ (t − N)‖s_N‖), as head means on
#: the rows common to every N: column of distance_vs_n -> name
BOUND_FACTORS = {
    "d_max_common": "d_max",
    "dmax_lead_common": "(t−N)·ᾱ_N·max sel. ‖x‖",
    "t_minus_n_common": "t − N",
    "alpha_bar_common": "ᾱ_N",
    "max_norm_common": "max selected ‖x‖",
    "d_tilde_common": "d~",
    "s_norm_common": "‖s_N‖",
}


def bound_factors(df: pd.DataFrame) -> pd.DataFrame:
    """Per ``N`` (index) of a :func:`~attn_lib.experiments.distance_vs_n` table: the head means of
    :data:`BOUND_FACTORS`, named as there, and ``d_max/d~``."""
    out = df.groupby("N")[[c for c in BOUND_FACTORS if c in df]].mean().rename(columns=BOUND_FACTORS)
    return out.assign(**{"d_max/d~": out["d_max"] / out["d~"]})


def _factors_cause(df: pd.DataFrame, n0: int, n1: int) -> str:
    """What moved d_max/d~ between ``n0`` and ``n1``: each factor's change on the same rows."""
    f = bound_factors(df)
    ch = {c: f.loc[n1, c] / f.loc[n0, c] - 1 for c in f.columns if c != "d_max/d~"}
    lead = "ᾱ_N·max selected ‖x‖/‖s_N‖"
    r0, r1 = (f.loc[n, "ᾱ_N"] * f.loc[n, "max selected ‖x‖"] / f.loc[n, "‖s_N‖"] for n in (n0, n1))
    parts = ", ".join(f"{c} {f.loc[n0, c]:.4g} → {f.loc[n1, c]:.4g} ({ch[c]:+.0%})" for c in BOUND_FACTORS.values())
    top = max(("ᾱ_N", "max selected ‖x‖"), key=lambda c: ch[c])
    out = (
        f"on the same rows, N = {n0} → {n1}: {parts}. d_max's leading term over d~'s, {lead} ((t − N) cancels; "
        f"{prf_ref('thm-distance')}, {prf_ref('prop-topn-linear')}), goes {r0:.3g} → {r1:.3g}"
    )
    if r1 >= r0:
        return out + (
            f": ᾱ_N·max selected ‖x‖ grows {(1 + ch['ᾱ_N']) * (1 + ch['max selected ‖x‖']) - 1:+.0%}, faster than "
            f"‖s_N‖ ({ch['‖s_N‖']:+.0%}); largest rise: {top} ({ch[top]:+.0%})"
        )
    return out + ": the leading terms' ratio falls, so the rise comes from the terms of lower order in t − N"


@rule("fig2b-bound-tightens")
def _fig2b_tightens(results, th):
    df = results["distance_vs_n"]
    n0, n1 = _plateau_ns(df, th)
    d, _ = _n_means(df, "d_tilde")
    b, _ = _n_means(df, "d_max")
    r0, r1 = b[n0] / d[n0], b[n1] / d[n1]
    meas = f"d_max/d~: N={n0}: {r0:.3g}, N={n1}: {r1:.3g}"
    if r1 < r0:
        return Outcome("reproduced", meas)
    missing = sorted(set(BOUND_FACTORS) - set(df.columns))
    cause = f"cause not measured: the run lacks the columns {missing}" if missing else _factors_cause(df, n0, n1)
    return Outcome("not reproduced", meas, cause)


def _gaps(df: pd.DataFrame, col: str) -> tuple[list, pd.Series, pd.Series]:
    Ns = sorted(df["N"].unique())
    d = _means(df, "N", "d_tilde")
    return Ns, d, (_means(df, "N", col) - d).abs() / d.clip(lower=1e-300)


def _converge(results, th, col: str, name: str):
    """Convergence: a gap above converge_rel at the smallest N and within it at the largest."""
    df = results["distance_vs_n"]
    na_if(col not in df, f"no {name} column in this run")
    Ns, d, g = _gaps(df, col)
    n0, n1 = Ns[0], Ns[-1]
    meas = f"|{name} − d~|/d~: N={n0}: {g[n0]:.1%}, N={n1}: {g[n1]:.1%}"
    if g[n0] > th["converge_rel"] >= g[n1]:
        return Outcome("reproduced", meas)
    if g[n0] <= th["converge_rel"]:
        cause = (
            f"{name} is within {th['converge_rel']:.0%} of d~ from N = {n0} on ({g[n0]:.1%}): there is no gap to close"
        )
        if col == "e2":
            cause += f", and none at any N (largest {g.max():.1%})"
            meas += _e2_bound_text(df, "N", n1, float(d[n1]))
        return Outcome("not reproduced", meas, cause)
    parts = []
    if "e1_plus_gap" in df and col in ("mc", "e1"):
        ub = float(_means(df, "N", "e1_plus_gap")[n1])
        parts.append(
            f"E1 + its Jensen-gap bound ({prf_ref('thm-distance')} (b)), an upper bound of E[d~], measures {ub:.4g} at "
            f"N = {n1}, {ub / d[n1]:.0%} of d~ = {d[n1]:.4g}"
        )
    if "x_max" in df:
        xm = float(_means(df, "N", "x_max")[n1])
        L = int(df["L"].iloc[0])
        bound = (1 + n1 / (L - 1) + n1) * xm if col == "e1" else (1 + n1) * xm
        parts.append(
            f"{'(1+p+N)' if col == 'e1' else '(1+N)'}·max‖x‖ ({prf_ref('prop-random-bounded')}) measures {bound:.4g} "
            f"({bound / d[n1]:.0%} of d~)"
        )
    if col == "e1" and has_results(results, "critical_n_diagnosis"):
        summ = diagnosis_summary(results["critical_n_diagnosis"])
        m = summ[summ["variant"] == summ["variant"].iloc[0]]
        near = m.iloc[int(np.argmin(np.abs(m["N"].to_numpy() - n1)))]
        parts.append(
            f"at N = {int(near['N'])} the diagnosis measures E1/d~ = {near['E1/d~']:.2f} with median ‖s_N‖/‖z‖ = "
            f"{near['rho']:.2f}: E1/d~ ≈ (N/(t−1)) · ‖z‖/‖s_N‖ ({prf_ref('prop-e1-crossing')}) stays below 1 until "
            "N/(t−1) nears ‖s_N‖/‖z‖"
        )
    if not parts:
        return Outcome("not reproduced", meas, f"cause not measured: the run has no bound columns for {name}")
    return Outcome("not reproduced", meas, "; ".join(parts))


@rule("fig2b-converge-mc")
def _converge_mc(results, th):
    df = results["distance_vs_n"]
    out = _converge(results, th, "mc", "E[d~] (Monte Carlo)")
    Ns = sorted(df["N"].unique())
    gaps = [_gaps(df, c)[2] for c in mc_columns(df)]
    passes = [bool(g[Ns[0]] > th["converge_rel"] >= g[Ns[-1]]) for g in gaps]
    g1 = [float(g[Ns[-1]]) for g in gaps]
    spread = f"; over {len(g1)} seeds the gap at N={Ns[-1]} is {min(g1):.1%} … {max(g1):.1%}"
    return over_seeds(out, passes, spread, th, "distance_vs_n")


rule("fig2b-converge-e1")(lambda results, th: _converge(results, th, "e1", "E1"))
rule("fig2b-converge-e2")(lambda results, th: _converge(results, th, "e2", "E2"))
