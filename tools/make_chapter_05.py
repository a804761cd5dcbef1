"""Write book/05_multihead_and_remedies.ipynb (without outputs) from the cells below.

Run from the repository root:  python tools/make_chapter_05.py
The notebook is the source of truth once committed; this script is kept so the chapter can be regenerated.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from nbgen import LOAD_INPUTS, Chapter  # noqa: E402

chapter = Chapter("05_multihead_and_remedies")
md, code = chapter.md, chapter.code

# ------------------------------------------------------------------------------------------------------------------
md(r"""
# Multi-head coverage and remedies

The earlier chapters found three limits of softmax attention: every weight vanishes like $1/L$ in long contexts,
only part of the selected tokens can be told apart geometrically, and the sensitivity to the logits grows like
$1/T$. This chapter looks at what can be done about them:

1. the paper's argument that several heads cover more than one (multi-head coverage);
2. the normalisers the paper cites as remedies, compared on synthetic logits: which of them escape the $1/L$
   vanishing, how sparse they are, and how sensitive they are as the temperature changes;
3. the same normalisers swapped into a live language model, layer by layer;
4. the paper's conclusions and guidelines, and the questions that remain open.

Sections 1–2 use synthetic data from a fixed seed, in float64 on the CPU.
""")

chapter.colab()

code(r"""
import math
import os

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import sympy as sp
import torch
from IPython.display import Markdown, Math, display

from attn_lib import experiments, jacobian, normalizers, symbolic, theory
from attn_lib.widgets import label_figure, precomputed_slider

# --- model and size settings (section 3) ---------------------------------------------------------
MODEL = os.environ.get("ATTN_LIB_MODEL", "gpt2")        # offline: the SmolLM2-135M stand-in runs
PROFILE = os.environ.get("ATTN_LIB_PROFILE", "quick")   # "quick" (CPU-sized grids) or "paper" (§5g)
TEXT = "war-and-peace"                                  # offline: the shipped default text
GRID = experiments.PROFILES[PROFILE]
SWAP_LENGTH = min(GRID.length_fixed, 256)               # window of the normaliser swap (one pass each)
SWAPS = [None, "ssmax", "entmax15", "sparsemax"]        # None = the model's own softmax

# --- synthetic checks ----------------------------------------------------------------------------
SEED = 0                 # every random draw below derives from this seed
DEVICE = "cpu"           # numpy / torch on the CPU, float64
A = 2.0                  # bounded logits: l_i in [-A, A]
T = 1.0                  # temperature of the length comparison
LS = np.unique(np.logspace(0, 4, 13).round().astype(int))[1:]          # L = 2 ... 10000
NAMES = ["softmax", "sparsemax", "entmax15", "ssmax", "sa_softmax", "softmax1", "sigmoid", "softpick"]
NORM = {name: normalizers.get(name) for name in NAMES}
S_SSMAX = 0.43           # SSMax scale s, the library default
RTOL = 1e-9              # floating-point slack of the inequality checks
print(f"profile {GRID.name!r}: normaliser swap on a window of {SWAP_LENGTH} tokens; "
      f"synthetic: L = {LS[0]} ... {LS[-1]}, logits in [-{A:g}, {A:g}], T = {T:g}, seed {SEED}")
""")

# ------------------------------------------------------------------------------------------------------------------
md(r"""
## Multi-head coverage

**Statement (paper, Discussion).** If the heads of a layer are independent and each one separates a fraction $p$
of the selected tokens, then $H$ heads together separate up to

$$
1-(1-p)^H .
$$

With $p=0.8$, the saturation level that the separability experiment found, about $H=3$ heads reach 99%.

**Exact numbers (reconstructed).** $1-0.2^3=0.992$. The smallest $H$ that reaches a coverage $c$ is
$H=\lceil\log(1-c)/\log(1-p)\rceil$; for $c=0.99$ this is $\lceil2.86\rceil=3$. Independence is an idealisation:
heads of one layer read the same input, and nothing makes their failures independent.

`attn_lib.symbolic.multihead_coverage_symbolic` evaluates both exactly.
""")

code(r"""
mh = symbolic.multihead_coverage_symbolic()
assert mh["coverage_p08_H3"] == sp.Rational(124, 125)
assert mh["H_min_p08_c099"] == 3
display(Math(r"\text{coverage} = " + sp.latex(mh["coverage"]) + r",\qquad p=\tfrac45,\ H=3:\ "
             + sp.latex(mh["coverage_p08_H3"]) + " = " + f"{float(mh['coverage_p08_H3_float']):.3f}"))
display(Math(r"H_{\min}(c) = " + sp.latex(mh["H_min"]) + r",\qquad c = 0.99,\ p = 0.8:\ \left\lceil "
             + f"{float(mh['H_min_ratio_value']):.3f}" + r"\right\rceil = " + sp.latex(mh["H_min_p08_c099"])))
""")

md(r"""
Numerically, `attn_lib.theory.multihead_coverage` and `attn_lib.theory.heads_for_coverage` give the same values,
and a Bernoulli simulation of independent heads (`attn_lib.theory.multihead_coverage_simulation`) agrees with the
formula within four standard errors. The table gives the coverage for a few separation rates and head counts.
""")

code(r"""
N_TRIALS = 200_000
assert np.isclose(theory.multihead_coverage(0.8, 3), 0.992, rtol=0, atol=1e-12)
assert theory.heads_for_coverage(0.8, 0.99) == 3
rows = []
for p in [0.5, 0.7, 0.8, 0.85]:
    for H in [1, 2, 3, 4, 6, 12]:
        exact = theory.multihead_coverage(p, H)
        sim = theory.multihead_coverage_simulation(p, H, n_trials=N_TRIALS, seed=SEED)
        se = math.sqrt(exact * (1 - exact) / N_TRIALS)
        assert abs(sim - exact) <= 4 * se + 1e-12, (p, H, sim, exact)
        rows.append({"p": p, "H": H, "1 − (1 − p)^H": exact, "simulated": sim, "standard error": se})
cov = pd.DataFrame(rows)
need = {p: theory.heads_for_coverage(p, 0.99) for p in [0.5, 0.7, 0.8, 0.85]}
print(f"{N_TRIALS} simulated trials per cell, seed {SEED}; heads needed for 99%: "
      + ", ".join(f"p = {p:g}: {h}" for p, h in need.items()))
(cov.pivot(index="H", columns="p", values="1 − (1 − p)^H")
    .style.format("{:.4f}").format_index("{:g}", axis=1).set_caption("coverage 1 − (1 − p)^H by separation rate p (columns)"))
""")

# ------------------------------------------------------------------------------------------------------------------
md(r"""
## The remedies on synthetic logits

The paper cites sparse and length-aware normalisers as ways around its limits. `attn_lib.normalizers` implements
them behind one interface, each applied to $z=l/T$:

| name | weights | rows sum to | reference |
|---|---|---|---|
| `softmax` | $e^{z_j}/\sum_ke^{z_k}$ | 1 | Vaswani et al. 2017 |
| `sparsemax` | Euclidean projection of $z$ onto the simplex, $[z_j-\tau]_+$ | 1 | Martins & Astudillo 2016 |
| `entmax15` | $[z_j/2-\tau]_+^2$ (1.5-entmax) | 1 | Peters et al. 2019 |
| `ssmax` | $\mathrm{softmax}\big((s\log n)\,z\big)$, $n$ visible tokens | 1 | Nakanishi 2025 (Scalable-Softmax) |
| `sa_softmax` | softmax times a factor in $[0,1]$ that grows with $z_j$ | $\le1$ | Zheng et al. 2025 (Self-Adjust Softmax) |
| `softmax1` | $e^{z_j}/(1+\sum_ke^{z_k})$ | $<1$ | "attention is off by one" |
| `sigmoid` | $\sigma(z_j-\log n)$ | any | Ramapuram et al. 2024 |
| `softpick` | $\mathrm{ReLU}(e^{z_j}-1)/\sum_k|e^{z_k}-1|$ | $\le1$ | Zuhri et al. 2025 |

The paper itself cites sparsemax and $\alpha$-entmax, Scalable-Softmax and Self-Adjust Softmax; the other three are
common alternatives included for comparison.

### Which normalisers escape the $1/L$ vanishing?

Lemma 1 needs a **strictly positive** $F$ whose parameters do **not** include $L$. Softmax, softmax-off-by-one and
Self-Adjust Softmax are positive and length-blind, so their weights stay below $C_2/L$ (the latter two are even
below softmax weight by weight: they only shrink its weights). Sigmoid with bias $-\log n$ is not normalised, but
$\sigma(z-\log n)\le e^{z}/n$, so it vanishes like $1/L$ too. Sparsemax and entmax are not of the form
$F/\sum F$ with a positive $F$: they can give a token weight exactly $1$. SSMax has $L$ among its parameters.

Two kinds of rows, for $L$ from 2 to $10^4$:

- **bounded random logits**, uniform on $[-a,a]$ with $a=2$;
- **one separated logit**: $l_1=a$, all others uniform on $[-a,-a+1]$, so the top logit is at least $3$ above
  every other.

For the separated row the theory predicts exactly what happens. Sparsemax gives the top token weight $1$ as soon
as its logit leads by at least $1$ (entmax-1.5: by at least $2$). SSMax gives it at least
$1/\big(1+(L-1)L^{-3s}\big)$, which tends to $1$ because $3s>1$. Softpick divides by
$\sum_k|e^{z_k}-1|\ge(L-1)(1-e^{-1})$, so its top weight vanishes like $1/L$. The cell asserts each of these, and
the bounds of the previous paragraph, on every row.
""")

code(r"""
rng = np.random.default_rng(SEED)
C1, C2 = theory.lemma1_constants(lambda l: np.exp(l / T), A)         # softmax constant e^(2a/T)
assert np.isclose(C2, math.exp(2 * A / T), rtol=1e-9)


def separated_row(L, rng):
    return np.concatenate([[A], rng.uniform(-A, -A + 1, size=L - 1)])


ROWS = {"bounded random": {L: rng.uniform(-A, A, size=L) for L in LS},
        "one separated": {L: separated_row(L, rng) for L in LS}}
maxw = {kind: pd.DataFrame(index=pd.Index(LS, name="L"), columns=NAMES, dtype=float) for kind in ROWS}
support = {kind: pd.DataFrame(index=pd.Index(LS, name="L"), columns=NAMES, dtype=float) for kind in ROWS}
rowsum = {kind: pd.DataFrame(index=pd.Index(LS, name="L"), columns=NAMES, dtype=float) for kind in ROWS}
for kind, rows_by_L in ROWS.items():
    for L, l in rows_by_L.items():
        w = {name: NORM[name](l, temperature=T) for name in NAMES}
        for name in NAMES:
            maxw[kind].loc[L, name] = w[name].max()
            support[kind].loc[L, name] = (w[name] > 0).sum()
            rowsum[kind].loc[L, name] = w[name].sum()
        # Lemma 1 and the comparisons that follow from it, on every row
        assert L * w["softmax"].max() <= C2 * (1 + RTOL)
        assert (w["softmax1"] <= w["softmax"] * (1 + RTOL)).all()
        assert (w["sa_softmax"] <= w["softmax"] * (1 + RTOL)).all()
        assert L * w["sigmoid"].max() <= math.exp(A / T) * (1 + RTOL)
        if kind == "one separated":
            assert w["sparsemax"][0] == 1.0 and w["entmax15"][0] == 1.0
            assert w["ssmax"][0] >= 1 / (1 + (L - 1) * L ** (-3 * S_SSMAX)) * (1 - RTOL)
            assert w["softpick"][0] <= (math.exp(A / T) - 1) / max(L - 1, 1) / (1 - math.exp(-1)) * (1 + RTOL)

sep = maxw["one separated"]
assert sep["ssmax"].iloc[-1] >= 0.9                     # at L = 10^4 SSMax keeps > 90% on the top token
assert (sep["softmax"].iloc[-1] * LS[-1]) <= C2         # ... while softmax is back to O(1/L)
L_TOP = LS[-1]
summary = pd.DataFrame({f"{kind}: max weight at L={L_TOP}": maxw[kind].loc[L_TOP] for kind in ROWS}
                       | {f"{kind}: L·max weight": maxw[kind].loc[L_TOP] * L_TOP for kind in ROWS})
summary.style.format("{:.3g}").set_caption(f"T = {T:g}, a = {A:g}, seed {SEED}")
""")

code(r"""
COLORS = dict(zip(NAMES, plt.cm.tab10.colors))
fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
for ax, kind in zip(axes, ROWS):
    for name in NAMES:
        ax.plot(LS, maxw[kind][name], "o-", ms=3, color=COLORS[name], label=name)
    ax.plot(LS, np.minimum(1, C2 / LS), "k--", lw=1, label=r"Lemma 1: $C_2/L$")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("context length L")
    ax.set_title({"bounded random": f"bounded random logits, uniform on [-{A:g}, {A:g}]",
                  "one separated": "one separated logit"}[kind], fontsize=10)
    ax.grid(alpha=0.3)
axes[0].set_ylabel(r"largest weight $\max_i\alpha_i$")
axes[1].legend(fontsize=7, loc="lower left")
fig.suptitle(f"Max weight against L (T = {T:g}, a = {A:g})", fontsize=10)
fig.tight_layout()
label_figure(fig, model="none", text=f"synthetic logits, uniform on [-{A:g}, {A:g}] / separated top logit",
             device=DEVICE, seed=SEED)
plt.show()
""")

md(r"""
On bounded random logits every normaliser's largest weight falls as $L$ grows. Softmax and its two shrunken
variants fall like $1/L$; sparsemax and entmax fall more slowly, because they put the whole mass on the handful of
logits nearest the maximum; SSMax sharpens with $\log L$ but the top of $L$ uniform draws crowds together, so it
falls as well. With one clearly separated logit the picture splits: sparsemax and entmax give it all the weight,
SSMax gives it a share that **grows** towards $1$, and the length-blind normalisers, softpick included, dilute it
like $1/L$.

### Sparsity

Sparse normalisers give many tokens exactly zero weight. The table lists the number of tokens with positive weight
on the bounded random rows. Softmax, SSMax, softmax-off-by-one and sigmoid are dense. Self-Adjust Softmax sets
exactly one weight to zero, that of the smallest logit (its factor is $0$ there). Softpick zeroes every
non-positive logit. Sparsemax and entmax keep only the logits close to the maximum. The asserts check each of
these statements and the row sums of the table above.
""")

code(r"""
sup = support["bounded random"]
for L, l in ROWS["bounded random"].items():
    for name in ["softmax", "ssmax", "softmax1", "sigmoid"]:
        assert sup.loc[L, name] == L                               # dense
    assert sup.loc[L, "softpick"] == (l > 0).sum()                  # zero for every l <= 0
    if l.min() < 0 < l.max():
        assert sup.loc[L, "sa_softmax"] == L - 1                    # zero at the smallest logit
    if L >= 10:
        assert sup.loc[L, "sparsemax"] < L and sup.loc[L, "entmax15"] < L
        assert sup.loc[L, "sparsemax"] <= sup.loc[L, "entmax15"]    # sparsemax is the sparser one here
for kind in ROWS:
    rs = rowsum[kind]
    for name in normalizers.SUMS_TO_ONE.intersection(NAMES):
        assert np.allclose(rs[name], 1.0, rtol=1e-12)
    assert (rs["softmax1"] < 1).all() and (rs["softpick"] <= 1 + RTOL).all() and (rs["sa_softmax"] <= 1 + RTOL).all()
frac = sup.div(sup.index.to_numpy(), axis=0)
(sup.loc[[L for L in LS if L in (2, 10, 100, 1000, 10000)]].astype(int)
    .style.set_caption(f"tokens with positive weight, bounded random logits (T = {T:g}, seed {SEED})"))
""")

md(r"""
### Sensitivity against temperature

How strongly do the weights react to a small change of the logits? For a batch of random logit rows and each
temperature, `attn_lib.jacobian.sensitivity` gives $\|f((l+\varepsilon v)/T)-f(l/T)\|_2/\varepsilon$ for a seeded
random unit direction $v$, with $\varepsilon=10^{-3}$; the figure shows the mean over rows. Bounds that hold on
every row, asserted below:

- softmax and softmax-off-by-one: $\min\{\frac1{2T},\frac{\sqrt2}{\varepsilon}\}$ (the previous chapter; softmax-off-by-one's
  Jacobian is a principal submatrix of the softmax Jacobian with one more logit);
- SSMax is softmax at temperature $T/(s\log n)$: $\min\{\frac{s\log n}{2T},\frac{\sqrt2}{\varepsilon}\}$;
- sparsemax and entmax-1.5: $\min\{\frac1T,\frac{\sqrt2}{\varepsilon}\}$. Sparsemax is a Euclidean projection, which
  never increases distances, applied to $l/T$; entmax-1.5's Jacobian is
  $\frac1T\big(\mathrm{diag}(\sqrt\alpha)-\sqrt\alpha\sqrt\alpha^\top/\textstyle\sum_j\sqrt{\alpha_j}\big)$, whose
  norm is at most $\max_j\sqrt{\alpha_j}/T$;
- sigmoid: each weight moves independently with slope $\sigma'\le\frac14$, so $\frac1{4T}$.

Sparse maps have a different failure mode from softmax. Inside a fixed support their Jacobian is a projection (for
sparsemax its eigenvalues are exactly $0$ and $1/T$, checked on one row below), and outside it the gradient is
exactly zero: at a low temperature most rows keep a single token and do not react at all, while rows near a change
of support react at the full rate $1/T$. (At $T=10^{-3}$ many softmax rows are also frozen, for a numerical
reason: their weights are one-hot to machine precision. A mean of exactly $0$ is left out of the log–log plot; the
table below gives the share of frozen rows.)
""")

code(r"""
EPS = 1e-3
T_SENS = np.logspace(-3, 2, 16)
rng = np.random.default_rng(SEED)
N_ROWS, L_ROW = 256, 64
X = rng.normal(size=(N_ROWS, L_ROW))
BOUND = {
    "softmax": lambda t: min(1 / (2 * t), math.sqrt(2) / EPS),
    "softmax1": lambda t: 1 / (2 * t),
    "ssmax": lambda t: min(S_SSMAX * math.log(L_ROW) / (2 * t), math.sqrt(2) / EPS),
    "sparsemax": lambda t: min(1 / t, math.sqrt(2) / EPS),
    "entmax15": lambda t: min(1 / t, math.sqrt(2) / EPS),
    "sigmoid": lambda t: 1 / (4 * t),
}
g_mean = pd.DataFrame(index=pd.Index(T_SENS, name="T"), columns=NAMES, dtype=float)
g_zero = pd.DataFrame(index=pd.Index(T_SENS, name="T"), columns=NAMES, dtype=float)
for t in T_SENS:
    for name in NAMES:
        g = jacobian.sensitivity(X, float(t), EPS, normalizer=NORM[name], seed=SEED)
        if name in BOUND:
            assert (g <= BOUND[name](t) * (1 + RTOL)).all(), (name, t)
        g_mean.loc[t, name] = g.mean()
        g_zero.loc[t, name] = (g == 0).mean()

# sparsemax inside its support: J = (diag(s) - s s^T / |S|) / T, a projection divided by T
t0 = 0.5
J_sp = jacobian.jacobian("sparsemax", X[0], temperature=t0)
eig = np.linalg.eigvalsh((J_sp + J_sp.T) / 2)
k = int((normalizers.sparsemax(X[0], temperature=t0) > 0).sum())
assert np.allclose(J_sp, J_sp.T, atol=1e-12) and k >= 2
assert np.allclose(np.sort(eig)[-(k - 1):], 1 / t0, rtol=1e-9) and np.allclose(np.sort(eig)[:-(k - 1)], 0, atol=1e-9)
print(f"sparsemax on row 0 at T = {t0:g}: support {k}, Jacobian eigenvalues {{0, 1/T = {1 / t0:g}}} "
      f"(multiplicity {k - 1})")

fig, ax = plt.subplots(figsize=(7.5, 4.4))
for name in NAMES:
    ax.plot(T_SENS, g_mean[name].where(g_mean[name] > 0), "o-", ms=3, color=COLORS[name], label=name)
ax.plot(T_SENS, 1 / (2 * T_SENS), "k:", lw=1, label=r"$1/(2T)$")
ax.plot(T_SENS, 1 / T_SENS, "k--", lw=0.8, label=r"$1/T$")
ax.set_xscale("log")
ax.set_yscale("log")
ax.set_xlabel("temperature T")
ax.set_ylabel(r"mean of $\|\Delta\alpha\|_2/\varepsilon$ over rows")
ax.set_title(f"Sensitivity against T ({N_ROWS} rows of {L_ROW} N(0,1) logits, ε = {EPS:g})", fontsize=10)
ax.legend(fontsize=7, ncol=2)
ax.grid(alpha=0.3)
label_figure(fig, model="none", text=f"synthetic logits, N(0, 1), L = {L_ROW}", device=DEVICE, seed=SEED)
plt.show()
show_T = [T_SENS[i] for i in (0, 3, 6, 9, 12, 15)]
(g_zero.loc[show_T].style.format("{:.0%}").format_index("{:.3g}")
    .set_caption(f"share of rows whose weights do not move at all (ε = {EPS:g})"))
""")

md(r"""
### Temperature slider

One row of 16 logits, all eight normalisers side by side. Move the slider to change $T$: softmax and its relatives
go from uniform to one-hot smoothly, sparsemax and entmax drop tokens from their support one by one, and softpick
never gives weight to a non-positive logit. Each panel reports the largest weight, the number of tokens with
positive weight and the row sum. The figures are computed when the book is built, so the slider also works in the
static page.
""")

code(r"""
rng = np.random.default_rng(SEED)
ROW = np.sort(rng.normal(size=16))[::-1].copy()
T_SLIDER = [0.1, 0.25, 0.5, 1.0, 2.0, 4.0]


def render_normalisers(temp):
    fig, axes = plt.subplots(2, 4, figsize=(12, 5), sharex=True, sharey=True)
    for ax, name in zip(axes.ravel(), NAMES):
        w = NORM[name](ROW, temperature=temp)
        ax.bar(np.arange(1, len(ROW) + 1), w, color=COLORS[name])
        ax.set_title(f"{name}\nmax {w.max():.2f} · support {(w > 0).sum()} · sum {w.sum():.2f}", fontsize=8)
        ax.set_ylim(0, 1)
        ax.grid(alpha=0.3, axis="y")
    for ax in axes[1]:
        ax.set_xlabel("token (logits in decreasing order)", fontsize=8)
    fig.suptitle(f"Weights of one row of 16 N(0,1) logits at T = {temp:g}", fontsize=10)
    fig.tight_layout()
    return label_figure(fig, model="none", text="synthetic logit row, N(0, 1), L = 16", device=DEVICE, seed=SEED)


precomputed_slider(T_SLIDER, render_normalisers, description="temperature T", value=1.0)
""")

# ------------------------------------------------------------------------------------------------------------------
md(r"""
## Swapping the normaliser inside a language model

`attn_lib.capture.capture_attention` can replace softmax **inside the live model**: with `normalizer="ssmax"`
every attention layer normalises its own logits with SSMax, and later layers see the result. We run one window
of text through the model once with its own softmax and once with each of SSMax, entmax-1.5 and sparsemax, and
record for every layer the mean over query rows and heads of the attention entropy
$-\sum_j\alpha_j\log\alpha_j$, the largest weight, and the number of tokens with positive weight, together with
the model's next-token loss on the window.

This is an intervention, not a retrained model: the model learned its weights under softmax, so its loss gets
worse when the normaliser changes. What the experiment shows is how the same logits are turned into weights by a
different normaliser, and how the change propagates through the layers.

**Which model runs.** As in the other chapters, `MODEL` defaults to `"gpt2"`; offline, without a cached copy of
GPT-2, `attn_lib.models.load_model` falls back to the **offline stand-in** SmolLM2-135M-Instruct and
`attn_lib.corpus.load_text` to a shipped public-domain text instead of *War and Peace*. The next cell prints what
ran; with the stand-in the numbers describe a different model than the paper's.
""")

code(r"""
from attn_lib.capture import capture_attention

""" + LOAD_INPUTS + r"""ids = experiments.text_window(handle, text, SWAP_LENGTH)
print(f"window: the first {SWAP_LENGTH} tokens")
""")

md(r"""
Per layer, the callback reduces the weights to per-row numbers (float64) and keeps them; the rows of the first
layer are kept for a check. The first layer sees the same input in every run, so its logits are identical, and
there the theory predicts two things exactly. SSMax is softmax with the logits multiplied by $s\log n$, and for a
row with $n$ visible tokens this factor exceeds $1$ once $n\ge11$ (with $s=0.43$). Raising the inverse
temperature of a softmax never increases its entropy and never decreases its largest weight, so on those rows SSMax
must have lower entropy and a larger top weight than softmax. The cell asserts both, row by row.
""")

code(r"""
def row_stats(la):
    w = la.weights[0].to(torch.float64)                         # (heads, rows, keys)
    plogp = torch.where(w > 0, w * torch.log(w.clamp_min(1e-300)), torch.zeros((), dtype=w.dtype))
    return {"entropy": -plogp.sum(-1), "max": w.amax(-1), "support": (w > 0).sum(-1).to(torch.float64),
            "sum": w.sum(-1), "max_logit": la.logits[0].amax(-1).to(torch.float64)}


swap_layers, swap_first, swap_loss = {}, {}, {}
for name in SWAPS:
    label = name or "softmax (model)"
    per_layer = []

    def callback(la, per_layer=per_layer, label=label):
        st = row_stats(la)
        if la.layer == 0:
            swap_first[label] = st
        rows = slice(1, None)                                   # query rows with at least two visible tokens
        per_layer.append({"normaliser": label, "layer": la.layer,
                          **{k: float(st[k][:, rows].mean()) for k in ("entropy", "max", "support")}})

    out = capture_attention(handle, ids, callback, normalizer=name, keep_qk=False)
    swap_loss[label] = float(torch.nn.functional.cross_entropy(out.logits[0, :-1].float(), ids[0, 1:].to(out.logits.device)))
    swap_layers[label] = pd.DataFrame(per_layer)
swap = pd.concat(swap_layers.values(), ignore_index=True)

base, ss = swap_first["softmax (model)"], swap_first["ssmax"]
for label, st in swap_first.items():
    assert torch.equal(st["max_logit"], base["max_logit"])      # layer 0 sees the same logits in every run
    if label in ("softmax (model)", "ssmax", "entmax15", "sparsemax"):
        assert torch.allclose(st["sum"], torch.ones_like(st["sum"]), atol=1e-5)
n_vis = torch.arange(1, SWAP_LENGTH + 1, dtype=torch.float64)
sharper = (S_SSMAX * torch.log(n_vis) > 1).expand_as(base["entropy"])   # rows with n >= 11
TOL = 1e-4                                                  # float32 weights
assert (ss["entropy"][sharper] <= base["entropy"][sharper] + TOL).all()
assert (ss["max"][sharper] >= base["max"][sharper] - TOL).all()
assert (swap_first["sparsemax"]["support"] <= swap_first["entmax15"]["support"]).all()  # sparsemax sparser
print(f"layer 0: {int(sharper.sum())} rows with n >= 11 checked; sparsemax support <= entmax support on every row")
""")

code(r"""
fig, axes = plt.subplots(1, 3, figsize=(13, 4))
for label, df in swap_layers.items():
    for ax, col in zip(axes, ["entropy", "max", "support"]):
        ax.plot(df["layer"], df[col], "o-", ms=3, label=label)
axes[0].set_ylabel("mean entropy (nats)")
axes[1].set_ylabel("mean largest weight")
axes[2].set_ylabel("mean tokens with positive weight")
axes[2].set_yscale("log")
for ax in axes:
    ax.set_xlabel("layer")
    ax.grid(alpha=0.3)
axes[0].legend(fontsize=8)
fig.suptitle(f"Normaliser swapped inside {handle.model_id}: window of {SWAP_LENGTH} tokens", fontsize=10)
fig.tight_layout()
label_figure(fig, model=handle.describe(), text=f"{text.name}, first {SWAP_LENGTH} tokens", device=str(handle.device))
plt.show()

overall = swap.groupby("normaliser", sort=False)[["entropy", "max", "support"]].mean()
overall["next-token loss"] = pd.Series(swap_loss)
display(Markdown(
    f"**Computed ({handle.describe()}; {text.name}; first {SWAP_LENGTH} tokens).** Mean over layers, heads and "
    f"rows. Entropy: " + ", ".join(f"{k} {v:.2f}" for k, v in overall["entropy"].items())
    + ". Largest weight: " + ", ".join(f"{k} {v:.2f}" for k, v in overall["max"].items())
    + ". Next-token loss (nats): " + ", ".join(f"{k} {v:.2f}" for k, v in swap_loss.items()) + "."))
overall.style.format("{:.3g}")
""")

md(r"""
A trained model's heads are already concentrated: many rows put most of their weight on one or a few tokens
(often the first). Sparse normalisers turn that concentration into exact zeros, SSMax sharpens every row whose
length exceeds about ten tokens, and each change raises the loss of a model trained with softmax. The remedies
are meant to be trained with, not swapped in; this experiment only shows what each does to the same logits.

## Conclusions and guidelines of the paper

In our words, the paper concludes that softmax attention is a **selective but capacity-limited aggregator**:

- the distance between the selected and the unselected tokens collapses once the number of selected tokens grows
  in proportion to the context length;
- even for ideal, spherical vectors at most about 80% of the selected tokens can be told apart geometrically;
- the Jacobian grows like $1/T$ (the paper's $1/(4T)$; the spectral norm can reach $1/(2T)$, see the previous
  chapter), so a low temperature buys selectivity with instability.

Its practical guidelines:

- **keep the active set small**, about $N\approx0.06\,L$ tokens, and prefer top-$k$ or sparse attention when $L$
  is much larger than $k$;
- **watch the entropy or the separable fraction $N_s/N$** of each head: a drop to 70–80% marks a saturated head,
  which calls for more heads or a length-aware normaliser;
- **avoid temperatures below about $0.1$**, where the sensitivity follows $1/T$.

As remedies it points to sparsemax and $\alpha$-entmax (Martins & Astudillo 2016), Scalable-Softmax (Nakanishi
2025) and Self-Adjust Softmax (Zheng et al. 2025). For future work it names non-spherical vector distributions,
interactions between queries and between heads, and a single normaliser that is sparse, length-aware and
gradient-stable at the same time. None of the normalisers above is all three: sparsemax and entmax are sparse but
length-blind, SSMax is length-aware but dense, and both sharpen the gradient near ties.

## Open questions

The project could not settle the following from the paper (the full list is in the project's notes):

- the exact display formulas of several results (Theorems 1–2, Corollary 2, Lemma 2, the $\sqrt5\,\varepsilon$
  vectors, the sensitivity $g$); the chapters use reconstructions that are verified numerically, but constants may
  differ from the originals;
- which expectation form Fig. 2 plots, which vectors $x_i$ the experiments use, and how causal masking and short
  rows are handled;
- the unstated experimental settings: intermediate values of $L$, the $L$ of Figs. 3–4, the number of text windows,
  and whether the temperature of Fig. 4 scales raw $q\cdot k$ or the model's scaled logits;
- what Corollary 3's constant was meant to bound, and whether Theorem 2's upper bound has a rigorous proof;
- the KS level (0.01 in the text, 0.05 in Algorithm 3), and what the later versions of the paper changed;
- whether the independence behind the multi-head coverage $1-(1-p)^H$ holds for real heads, which read the same
  input.
""")

chapter.write()
