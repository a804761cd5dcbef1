"""The rules of the claims of Fig. 3 and Theorem 2, separability, of the conclusion on separability at low
temperature, and of the KS level in Algorithm 3's header (their fields are in claims.toml)."""

from __future__ import annotations

from functools import lru_cache, partial

import numpy as np
import pandas as pd

from ..theory.separation import sphere_separability
from .claim import Outcome, judged, na_if, prf_ref, rule
from .stats import linfit, separability_stats, valid_ks_sampling


@rule("fig3-saturates")
def _fig3_sat(results, th):
    a = separability_stats(results["separability"])
    tail = a[a.index >= th["sep_from_n"]]
    na_if(not len(tail), "no N ≥ 16 in the grid")
    lo, hi = th["sep_lo"] - th["sep_tol"], th["sep_hi"] + th["sep_tol"]
    meas = "median N_s/N: " + "; ".join(f"N={int(n)}: {m:.2f}" for n, m in a["median"].items())
    out = tail[(tail["median"] < lo) | (tail["median"] > hi)]
    if not len(out):
        return Outcome("reproduced", meas)
    slope = linfit(np.log2(a.index[a.index >= 2].to_numpy(float)), a.loc[a.index >= 2, "median"])[0]
    fall = (
        f"the median keeps falling past N = {th['sep_from_n']} ({slope:+.3f} per doubling of N from N = 2) and "
        f"leaves the band at N = {', '.join(str(int(n)) for n in out.index)}"
    )
    return Outcome("not reproduced", meas, f"{fall}; {saturation_cause(results['separability'], th)}")


def mechanism_table(df: pd.DataFrame) -> pd.DataFrame | None:
    """Per N (index), medians over heads of the candidate causes of a falling ``N_s/N``: the fraction on short (``t <=
    L/2``) and long rows, the share of attention-sink rows, the fraction on sink / other rows, and the share of
    rank-``k`` selected tokens inside the ball (``in_ball_rank_<k>``); ``None`` for a table without these columns."""
    need = ["fraction_short", "fraction_long", "sink_share", "fraction_sink", "fraction_nonsink"]
    if not set(need) <= set(df.columns):
        return None
    ranks = sorted((c for c in df.columns if c.startswith("in_ball_rank_")), key=lambda c: int(c.rsplit("_", 1)[1]))
    return df.groupby("N")[["fraction", *need, *ranks]].median()


def _rank_profile(m: pd.DataFrame) -> tuple[bool, str]:
    """Whether the weight rank carries the fall (no rank's share falls by more than 0.02 as N grows, while the
    last-ranked token's share stays below the fraction), and its words."""
    ranks = [c for c in m.columns if c.startswith("in_ball_rank_")]
    big = m.index.max()
    steady = all((m[c].dropna().diff().dropna() >= -0.02).all() for c in ranks)
    last = {int(n): float(m.loc[n, f"in_ball_rank_{int(n)}"]) for n in m.index if n >= 2}
    below = all(v < float(m.loc[n, "fraction"]) for n, v in last.items())
    at_big = ", ".join(f"rank {c.rsplit('_', 1)[1]}: {m.loc[big, c]:.2f}" for c in ranks if pd.notna(m.loc[big, c]))
    r2 = m["in_ball_rank_2"].dropna() if "in_ball_rank_2" in m else pd.Series(dtype=float)
    words = (
        f"share of the rank-k token inside the ball at N = {int(big)}: {at_big}; the last-ranked token's share at "
        + ", ".join(f"N = {n}: {v:.2f}" for n, v in last.items())
        + (f"; rank 2's share goes {r2.iloc[0]:.2f} → {r2.iloc[-1]:.2f} as N grows" if len(r2) > 1 else "")
    )
    return steady and below, words


def saturation_cause(df: pd.DataFrame, th: dict) -> str:
    """Why the fraction falls out of the paper's band (:func:`mechanism_table`): weight rank, row length and sink
    rows, each with its measured medians and whether it explains the fall."""
    m = mechanism_table(df)
    if m is None:
        return "cause not identified: this table lacks the mechanism columns (row length, sinks, rank)"
    lo = th["sep_lo"] - th["sep_tol"]
    n2, big = (2 if 2 in m.index else m.index.min()), m.index.max()
    long_ok = float(m.loc[big, "fraction_long"]) >= lo
    sink_ok = float(m.loc[big, "fraction_nonsink"]) >= lo
    rank_ok, rank_words = _rank_profile(m)
    # NaN where no short row is valid at that N (an encoder's rows all see L tokens; a short row has t < N + 1)
    short = ["none" if pd.isna(v) else f"{v:.2f}" for v in m.loc[[n2, big], "fraction_short"]]
    short = f" (short rows {short[0]} → {short[1]})" if short != ["none", "none"] else " (no short rows)"
    length = (
        f"row length: on rows longer than L/2 the median goes {m.loc[n2, 'fraction_long']:.2f} → "
        f"{m.loc[big, 'fraction_long']:.2f} from N = {int(n2)} to {int(big)}{short}: "
        + ("explains it" if long_ok else "ruled out")
    )
    sinks = (
        f"attention sinks (first token > 0.5 of the weight; {m.loc[n2, 'sink_share']:.0%} of rows at N = {int(n2)}): on "
        f"the other rows the median goes {m.loc[n2, 'fraction_nonsink']:.2f} → {m.loc[big, 'fraction_nonsink']:.2f}: "
        + ("explains it" if sink_ok else "ruled out")
    )
    rank = f"weight rank: {rank_words}: " + ("explains it" if rank_ok else "ruled out")
    found = [n for n, ok in (("weight rank", rank_ok), ("row length", long_ok), ("attention sinks", sink_ok)) if ok]
    head = f"measured cause: {' and '.join(found)}" if found else "cause not identified"
    if found and found[0] == "weight rank":
        head += (
            " (each added low-weight token is inside the ball less often than the fraction, while the shares of the "
            "ranks already selected do not fall)"
        )
    return f"{head}; {rank}; {length}; {sinks}"


@rule("fig3-declines")
def _fig3_decl(results, th):
    a = separability_stats(results["separability"])
    n0 = th["sep_from_n"]
    na_if(2 not in a.index or n0 not in a.index, f"the N grid lacks N = 2 or N = {n0}")
    m2, m16 = float(a.loc[2, "median"]), float(a.loc[n0, "median"])
    meas = f"median N_s/N: N=2: {m2:.2f}, N={n0}: {m16:.2f}"
    return judged(m16 < m2, meas, f"cause not identified: the median rose by {m16 - m2:.2f} from N = 2")


def _tracks(results, th, col: str, name: str):
    a = separability_stats(results["separability"])
    a = a[a.index >= 2]
    na_if(not len(a), "no N ≥ 2 in the grid")
    vac = a["upper"] >= 1 - 1e-3  # a bound of (nearly) 1 on a fraction holds for anything: no evidence
    if vac.all():
        meas = "median upper bound ≥ 0.999 at every N"
        return Outcome("no verdict", meas, "the bound is vacuous (≈ 1) at every N ≥ 2")
    skipped = [int(n) for n in a.index[vac]]
    a = a[~vac]
    up, emp = a["upper"], a[col]
    dev = (up - emp).abs()
    meas = "; ".join(f"N={int(n)}: bound {u:.2f}, {name} {m:.2f}" for n, u, m in zip(a.index, up, emp))
    if skipped:
        meas += f"; vacuous (≈ 1) at N = {', '.join(map(str, skipped))}"
    cause = (
        f"the median upper bound sits near 1 at every N ({up.min():.2f}–{up.max():.2f}, at most {1 - up.min():.2f} "
        f"below the trivial bound 1), while the {name} falls from {emp.iloc[0]:.2f} at N = {int(a.index[0])} to "
        f"{emp.iloc[-1]:.2f} at N = {int(a.index[-1])}: the bound does not follow the fall; largest gap "
        f"{float(dev.max()):.2f} at N = {int(dev.idxmax())}"
    )
    return judged(float(dev.max()) <= th["track_tol"], meas, cause)


rule("thm2-upper-tracks-max")(lambda results, th: _tracks(results, th, "max", "max"))
rule("thm2-upper-tracks-p90")(lambda results, th: _tracks(results, th, "p90", "p90"))


@rule("thm2-lower-conservative")
def _thm2_lower(results, th):
    df = results["separability"]
    df = df[df["N"] >= 2]
    excess = df["lower"] - df["fraction"]
    over = int((excess > 1e-9).sum())
    a = separability_stats(df)
    pos = [int(n) for n in a.index[a["lower"] > 0]]
    meas = (
        f"{over} of {len(df)} (N, layer, head) with the lower bound above N_s/N (largest lower − N_s/N: "
        f"{float(excess.max()):+.2g}); median lower bound positive at N = {', '.join(map(str, pos)) or 'none'}, "
        "≤ 0 (it says nothing) elsewhere"
    )
    cause = "the lower bound exceeds N_s/N in some row: a defect of this build's code"
    return judged(over == 0, meas, cause, "guarantee")


_SPHERE_N = (16, 32, 64)  # the paper's N past the saturation point (N ≥ 16)
_SPHERE_T = (0.5, 1.0, 2.0)
SPHERE_SEEDS = (0, 1, 2, 3, 4)


@lru_cache(maxsize=8)
def sphere_table(seeds: tuple = SPHERE_SEEDS) -> pd.DataFrame:
    """:func:`~attn_lib.theory.separation.sphere_separability` (ideal spherical vectors, float64) at the N of
    :data:`_SPHERE_N` and the T of :data:`_SPHERE_T`: ``seed, T, N, fraction``."""
    rows = [
        {"seed": sd, "T": T, "N": n, "fraction": f}
        for sd in seeds
        for T in _SPHERE_T
        for n, f in sphere_separability(_SPHERE_N, T, seed=sd, trials=32).items()
    ]
    return pd.DataFrame(rows)


@rule("sep-sphere-80pct")
def _sphere_80(results, th):
    tab = results.get("sphere_separability")  # a run's own table if it carries one, else the simulation now
    tab = sphere_table() if tab is None else tab
    lo, hi = th["sep_lo"] - th["sep_tol"], th["sep_hi"] + th["sep_tol"]
    per_seed = tab.groupby("seed")["fraction"].agg(lambda f: bool(((f >= lo) & (f <= hi)).all()))
    spread = tab.groupby(["T", "N"])["fraction"].agg(["min", "max"])
    meas = "; ".join(f"T={T:g}, N={int(n)}: {r['min']:.2f}–{r['max']:.2f}" for (T, n), r in spread.iterrows())
    meas = f"mean N_s/N over 32 trials, range over {tab['seed'].nunique()} seeds: " + meas
    if per_seed.nunique() > 1:
        why = f"the seeds disagree: in the band for {int(per_seed.sum())} of {len(per_seed)}"
        return Outcome("no verdict", meas, why)
    cause = (
        f"on ideal spherical vectors with fixed weights the fraction keeps falling with N (largest {tab['fraction'].max():.2f}, "
        f"smallest {tab['fraction'].min():.2f} at N ≥ 16), like the model's: no saturation at about 80 %"
    )
    return judged(bool(per_seed.iloc[0]), meas, cause)


@rule("thm2-upper-unproven")
def _thm2_upper_unproven(results, th):
    df = results["separability"]
    df = df[df["N"] >= 2]
    over = int((df["fraction"] > df["upper"] + 1e-12).sum())
    meas = f"{over} of {len(df)} (N, layer, head) with N_s/N above the paper's upper bound"
    return Outcome(
        "finding",
        meas,
        f"step 4 of the proof does not follow ({prf_ref('rem-upper-heuristic')}); a valid form needs E X_i "
        f"({prf_ref('prop-valid-upper')})",
    )


#: The change of the median N_s/N between T = 0.1 and T = 0.01 read as "no change" (the conclusion's rows).
SEP_T_TOL = 0.05


def _low_t(results, th, mode: str):
    df = results["separability"]
    cols = {float(c.split("=", 1)[1]): c for c in df.columns if c.startswith("fraction_T=")}
    na_if(0.1 not in cols or 0.01 not in cols, "the separability table has no columns fraction_T=0.1 and =0.01")
    df = df[df["N"] >= 2].dropna(subset=[cols[0.1], cols[0.01]])
    na_if(not len(df), "no N ≥ 2 with N_s/N at T = 0.1 and T = 0.01")
    m = df.groupby("N")[["fraction", cols[0.1], cols[0.01]]].median()
    meas = "median N_s/N over heads: " + "; ".join(
        f"N={int(n)}: T=1 {r['fraction']:.2f}, T=0.1 {r[cols[0.1]]:.2f}, T=0.01 {r[cols[0.01]]:.2f}"
        for n, r in m.iterrows()
    )
    # a selected token lighter than UNDERFLOW_WEIGHT may have its test decided by float64's range (prf rem-ball-test):
    # each head's N_s/N lies within +- their share, each median within the medians of those ends, and the change at
    # each N within [d_lo, d_hi] (a table without the share columns: the point itself)
    ucol = {T: cols[T].replace("fraction", "underflow", 1) for T in (0.1, 0.01)}
    under = {T: df[c] if c in df else 0.0 * df[cols[T]] for T, c in ucol.items()}
    lo, hi = ({T: (df[cols[T]] + s * under[T]).clip(0, 1).groupby(df["N"]).median() for T in under} for s in (-1, 1))
    d_lo, d_hi, floor = lo[0.01] - hi[0.1], hi[0.01] - lo[0.1], -SEP_T_TOL if mode == "flat" else -np.inf
    inside, outside = (d_lo >= floor) & (d_hi <= SEP_T_TOL), (d_hi < floor) | (d_lo > SEP_T_TOL)
    shares = {T: float(u.groupby(df["N"]).median().max()) for T, u in under.items()}
    light = ", ".join(f"up to {v:.1%} at T = {T:g}" for T, v in shares.items() if v > 0)
    meas += f"; median share of selected tokens lighter than 2.4e-296: {light}" if max(shares.values()) > 0 else ""
    ball, ok = prf_ref("rem-ball-test"), bool(inside.all())
    if not ok and not outside.any():
        n = int((d_hi - d_lo)[~inside].idxmax())
        why = f"float64's range decides: tokens lighter than 2.4e-296 may be ties ({ball}); counted separable or not"
        tail = f"within ±{SEP_T_TOL} or not" if mode == "flat" else f"a rise above {SEP_T_TOL} or not"
        return Outcome("no verdict", meas, f"{why}, the change at N = {n} is {d_lo[n]:+.2f} to {d_hi[n]:+.2f}: {tail}")
    diff = m[cols[0.01]] - m[cols[0.1]]
    ruled_out = f"ruled out: rounding of the ball test ({ball})" + (" and float64's range" if ucol[0.01] in df else "")
    if mode == "gain" and not ok:
        rise = f"at N = {int(diff.idxmax())} the median rises by {diff.max():.2f} from T = 0.1 to 0.01"
        return Outcome("not reproduced", meas, f"{rise}; cause not identified ({ruled_out})")
    if mode == "flat" and ok:
        return Outcome("reproduced", meas)
    change = f"from T = 0.1 to 0.01 the median changes by up to {diff.abs().max():.2f}"
    if mode == "gain":  # reproduced; a fall is said as why no gain is possible
        return Outcome("reproduced", meas, f"a lower T makes it worse: {change}" if diff.min() < -SEP_T_TOL else "")
    return Outcome("not reproduced", meas, f"{change}; cause not identified ({ruled_out})")


rule("concl-sep-saturates-low-t")(partial(_low_t, mode="flat"))
rule("concl-low-t-no-gain")(partial(_low_t, mode="gain"))


@rule("alg3-ks-level")
def _ks_level(results, th):
    df = results["critical_n"]
    df = df[df["form"] == "e1"]
    sampling = valid_ks_sampling(df)  # as fig2c-critical-e1: one sample per key/value group where heads share them
    df = df[df["sampling"] == sampling]
    used = sorted({float(a) for a in df["alpha"]})
    parts, differ = [], []
    for L, g in df.groupby("L"):
        g = g.sort_values("N")
        first = {a: g.loc[g["p_value"] >= a, "N"].min() for a in (used[0], 0.05)}
        n1 = "none" if pd.isna(first[used[0]]) else str(int(first[used[0]]))
        n5 = f"> {int(g['N'].max())} (p < 0.05 up to the scan's end)" if pd.isna(first[0.05]) else str(int(first[0.05]))
        parts.append(f"L={int(L)}: {n1} at α={used[0]:g}, {n5} at 0.05")
        if n1 != n5:
            differ.append(int(L))
    meas = f"the build's level: α = {', '.join(f'{a:g}' for a in used)} (KS over {sampling}); " + "; ".join(parts)
    cause = (
        f"at L = {', '.join(map(str, differ))} the first pass at α = {used[0]:g} has 0.01 ≤ p < 0.05, so the header's "
        "level moves the critical N later"
    )
    return judged(not differ, meas, cause)
