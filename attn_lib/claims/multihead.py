"""The rules of the claims of the Discussion (multi-head coverage) and of the paper's setting (other GPT-2 sizes);
their fields are in claims.toml."""

from __future__ import annotations

import math

import pandas as pd

from .claim import judged, na_if, prf_ref, rule


# ---- Discussion: multi-head coverage --------------------------------------------------------------------------------
@rule("multihead-rule-arithmetic")
def _mh_arith(results, th):
    import sympy as sp  # imported only for this exact check

    p, H0, target = sp.nsimplify(th["multihead_p"]), int(th["multihead_H"]), sp.nsimplify(th["multihead_target"])
    c = 1 - (1 - p) ** H0
    H = sp.ceiling(sp.log(1 - target) / sp.log(1 - p))
    meas = f"1 − (1 − {p})^{H0} = {c} = {float(c):.3f}; smallest H reaching {float(target):g}: {H}"
    cause = f"the paper's arithmetic fails for p = {p}, H = {H0}, coverage {target}"
    return judged(c >= target and H == H0, meas, cause, "guarantee")


def coverage_decomposition(df, target: float = 0.99) -> dict:
    """The numbers behind the multi-head row, from :func:`attn_lib.experiments.multihead_coverage`'s table ``df``.

    ``p``: the separable fraction per head, mean ``N_s/N`` over heads, rows and layers (the statistic chapter 5 and
    the row use); ``c1``, ``c3``: the measured coverage of the head-averaged top-``N`` after 1 and 3 heads (mean over
    layers); ``share = c1 / p``, how much of a head's own separable set lies in the target; ``indep_p = 1 − (1 −
    p)³`` and ``indep_c1 = 1 − (1 − c1)³`` (independent heads with rate ``p``, and with the rate one head covers);
    ``H99``: the first H reaching ``target``. The shortfall ``target − c3`` splits exactly into ``from_p = target −
    indep_p``, ``from_share = indep_p − indep_c1`` (a head covers less of the target than its ``p``) and
    ``from_overlap = indep_c1 − c3`` (the heads' sets overlap more than independence allows; negative: less)."""
    c = df.groupby("H")["coverage"].mean()
    p = float(df.groupby("layer")["fraction"].first().mean()) if "fraction" in df else math.nan
    c1, c3 = float(c.get(1, math.nan)), float(c.get(3, math.nan))
    indep_p, indep_c1 = 1 - (1 - p) ** 3, 1 - (1 - c1) ** 3
    return dict(
        p=p,
        c1=c1,
        c3=c3,
        share=c1 / p if p > 0 else math.nan,
        indep_p=indep_p,
        indep_c1=indep_c1,
        from_p=target - indep_p,
        from_share=indep_p - indep_c1,
        from_overlap=indep_c1 - c3,
        H99=next((int(h) for h, v in c.items() if v >= target), None),
    )


@rule("multihead-rule-model")
def _mh_model(results, th):
    df = results["multihead_coverage"]
    na_if(3 not in set(df["H"]), "fewer than 3 heads per layer")
    d = coverage_decomposition(df)
    meas = (
        f"c(3) = {d['c3']:.3f} (mean over layers); one head covers c(1) = {d['c1']:.3f} of the target against its "
        f"own p = {d['p']:.3f} (mean N_s/N over heads, rows and layers), a share {d['share']:.2f}; 99 % reached at "
        f"H = {d['H99'] or 'never'}"
    )
    cause = (
        f"0.99 − c(3) = {0.99 - d['c3']:.3f} = {d['from_p']:+.3f} (p = {d['p']:.3f}, not 0.8) "
        f"{d['from_share']:+.3f} (one head covers {d['share']:.2f} of its own p inside the target) "
        f"{d['from_overlap']:+.3f} (overlap between heads, beyond independence) ({prf_ref('rem-coverage')}); "
        f"independent heads give 1 − (1 − p)³ = {d['indep_p']:.3f} with the measured p and 1 − (1 − c(1))³ = "
        f"{d['indep_c1']:.3f} with the measured c(1) = {d['c1']:.3f}"
    )
    return judged(d["c3"] >= 0.99, meas, cause)


# ---- the paper's setting: other GPT-2 sizes -------------------------------------------------------------------------
#: GPT-2 small and the larger variants the paper's footnote speaks of.
GPT2_SMALL, GPT2_LARGER = "gpt2", ("gpt2-medium", "gpt2-large", "gpt2-xl")


@rule("gpt2-variants-same-trends")
def _gpt2_variants(results, th):
    """Reads ``results["gpt2_variant_verdicts"]`` (``model``, ``id``, ``verdict``: the claims tables of GPT-2 small and
    of larger variants, e.g. from ``reproduce --model gpt2 --compare gpt2-medium``'s results.json)."""
    df = results.get("gpt2_variant_verdicts")
    na_if(
        df is None or not len(df) or GPT2_SMALL not in set(df["model"]) or not set(df["model"]) & set(GPT2_LARGER),
        "not testable in one offline run: it needs GPT-2 small and a larger variant; to test it, run `attn-lib "
        "reproduce --model gpt2 --compare gpt2-medium --profile paper` (likewise gpt2-large, gpt2-xl) where the "
        "Hugging Face Hub is reachable, and read the side-by-side table's agree column on the rows of Figs. 2–4",
    )
    figs = df[df["id"].str.match(r"(fig[234]|thm[12]|cor3)") & (df["verdict"] != "n/a")]
    wide = figs.pivot_table(index="id", columns="model", values="verdict", aggfunc="first")
    others = [m for m in GPT2_LARGER if m in wide.columns]
    both = wide.dropna(subset=[GPT2_SMALL])
    differ = sorted(
        i for i in both.index for m in others if pd.notna(both.loc[i, m]) and both.loc[i, m] != both.loc[i, GPT2_SMALL]
    )
    meas = f"{len(both)} rows of Figs. 2–4 judged on GPT-2 small and {', '.join(others)}; {len(differ)} differ"
    return judged(not differ, meas, f"the verdicts differ on {', '.join(differ)}: see each row's causes on both models")
