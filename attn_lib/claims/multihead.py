"""The claims of the Discussion, multi-head coverage (registered by :mod:`attn_lib.claims`)."""

from __future__ import annotations

import math

from .claim import Outcome, claim, prf_ref


# ---- Discussion: multi-head coverage --------------------------------------------------------------------------------
@claim(
    "multihead-rule-arithmetic",
    where="Discussion",
    title="p = 0.8 and H = 3 independent heads cover 99 %",
    words="about three heads with p = 0.8 reach 99 %",
    evidence="guarantee",
    basis="rem-coverage",
    section="app-coverage",
    needs=(),
    rule="1 − (1 − {multihead_p})^{multihead_H} ≥ {multihead_target} and ⌈log(1 − c) / log(1 − p)⌉ = H, exactly (SymPy)",
)
def _mh_arith(results, th):
    import sympy as sp  # sympy: imported only for this exact check

    p, H0, target = sp.nsimplify(th["multihead_p"]), int(th["multihead_H"]), sp.nsimplify(th["multihead_target"])
    c = 1 - (1 - p) ** H0
    H = sp.ceiling(sp.log(1 - target) / sp.log(1 - p))
    meas = f"1 − (1 − {p})^{H0} = {c} = {float(c):.3f}; smallest H reaching {float(target):g}: {H}"
    if c >= target and H == H0:
        return Outcome("holds", meas)
    return Outcome("violated", meas, f"the paper's arithmetic fails for p = {p}, H = {H0}, coverage {target}")


@claim(
    "multihead-rule-model",
    where="Discussion",
    title="three heads cover 99 % of the top-N on the model",
    words="about three heads with p = 0.8 reach 99 %",
    reading="the union of the separable sets of 3 heads, measured (chapter 5's experiment)",
    evidence="informative",
    section="app-coverage",
    needs=("multihead_coverage",),
    rule="mean over layers of the measured coverage c(3) ≥ 0.99",
    fails_if="c(3) below 0.99",
)
def _mh_model(results, th):
    df = results["multihead_coverage"]
    c = df.groupby("H")["coverage"].mean()
    if 3 not in c.index:
        return Outcome("n/a", "fewer than 3 heads per layer")
    p = float(df.groupby("layer")["fraction"].first().mean()) if "fraction" in df else math.nan
    H99 = next((int(h) for h, v in c.items() if v >= 0.99), None)
    meas = f"c(3) = {c[3]:.3f} (mean over layers, measured p = {p:.2f}); 99 % reached at H = {H99 or 'never'}"
    if c[3] >= 0.99:
        return Outcome("reproduced", meas)
    indep = 1 - (1 - p) ** 3
    if math.isfinite(indep) and c[3] < indep:
        cause = (
            f"independent heads with the measured p would give 1 − (1 − p)³ = {indep:.3f} and the measured union "
            f"covers {c[3]:.3f}: the heads' separable sets overlap more than independence allows ({prf_ref('rem-coverage')})"
        )
    else:
        cause = (
            f"cause not identified: the measured p = {p:.2f} is below 0.8, and with it even independent heads give "
            f"1 − (1 − p)³ = {indep:.3f}"
        )
    return Outcome("not reproduced", meas, cause)
