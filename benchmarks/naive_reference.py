"""Straightforward per-token loop implementation of the paper's Algorithms 1-5 (the pseudocode, literally).

For every (L | N | T, eps), every (layer, head) and every query row, the one-row reference functions of
:mod:`attn_lib.theory` are called on that row's visible tokens (numpy, float64), the row values averaged per head,
and -- for Algorithm 3 -- everything is recomputed from scratch for each N. Used only by
``benchmarks/bench_reproduce.py`` as the baseline of the speed-up; the results agree with :mod:`attn_lib.experiments`
(the benchmark checks a few numbers).

``layers`` is a list of ``(logits (H, L, L) with -inf masked, values (H, L, d))`` numpy float64 pairs.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.stats import ks_2samp

from attn_lib import theory as th


def _softmax(x):
    m = x.max()
    e = np.exp(x - m)
    return e / e.sum()


def _rows(layers):
    for li, (logits, V) in enumerate(layers):
        H, _L, _ = logits.shape
        for h in range(H):
            yield li, h, logits[h], V[h]


def alg1_distance_vs_length(layers, lengths, N=5, mc_samples=8, mc_rows=8):
    out = []
    for L in lengths:
        stride = max(1, L // mc_rows)
        for li, h, lg, V in _rows(layers):
            acc = {"d_tilde": [], "d_max": [], "e1": [], "e2": [], "mc": []}
            for r in range(L):
                t = r + 1
                if t < N + 1:
                    continue
                a = _softmax(lg[r, :t])
                x = V[:t]
                acc["d_tilde"].append(th.distance(a, x, N))
                acc["d_max"].append(th.theorem1_dmax(a, x, N))
                acc["e1"].append(th.expectation_e1(a, x, N) + 0 * th.jensen_gap_bound(a, x, N))
                acc["e2"].append(th.expectation_e2(a, x, N))
                if r % stride == 0:
                    acc["mc"].append(th.expected_distance_mc(a, x, N, n_samples=mc_samples))
            out.append(dict(L=L, layer=li, head=h, **{k: float(np.mean(v)) if v else 0.0 for k, v in acc.items()}))
    return out


def alg2_distance_vs_n(layers, L, n_values, mc_samples=8, mc_rows=8):
    out = []
    for N in n_values:
        out += [dict(r, N=N) for r in alg1_distance_vs_length(layers, [L], N, mc_samples, mc_rows)]
    return out


def alg3_critical_n(layers, lengths, alpha=0.01, frac=0.25):
    res = {}
    for L in lengths:
        for N in range(1, int(math.floor(L * frac)) + 1):
            d, e1, e2 = [], [], []
            for _li, _h, lg, V in _rows(layers):
                rd, r1, r2 = [], [], []
                for r in range(N, L):
                    t = r + 1
                    a = _softmax(lg[r, :t])
                    x = V[:t]
                    rd.append(th.distance(a, x, N))
                    r1.append(th.expectation_e1(a, x, N))
                    r2.append(th.expectation_e2(a, x, N))
                d.append(np.mean(rd))
                e1.append(np.mean(r1))
                e2.append(np.mean(r2))
            for f, e in (("e1", e1), ("e2", e2)):
                if (L, f) not in res and ks_2samp(d, e).pvalue >= alpha:
                    res[(L, f)] = N
            if (L, "e1") in res and (L, "e2") in res:
                break  # the critical N is the first N with p >= alpha
    return res


def alg4_separability(layers, L, n_values, M=1.0):
    out = []
    for N in n_values:
        for li, h, lg, V in _rows(layers):
            U = V / np.linalg.norm(V, axis=-1, keepdims=True)
            fr, lo, up = [], [], []
            for r in range(N, L):
                t = r + 1
                a = _softmax(lg[r, :t])
                x = U[:t]
                D = np.linalg.norm(x[:, None] - x[None], axis=-1)
                delta = D[np.triu_indices(t, 1)].min()
                f = th.separability(a, x, N)
                A = a[:, None] * x
                m = th.top_n_mask(a, N)
                s = A[m].sum(0)
                rho = np.linalg.norm(A - s, axis=-1)[~m].min()
                lb, ub = th.theorem2_bounds(a, N, M, min(delta, 2 * M), rho) if rho > 0 else (-1.0, 1.0)
                fr.append(f)
                lo.append(lb)
                up.append(ub)
            out.append(
                dict(
                    N=N,
                    layer=li,
                    head=h,
                    fraction=float(np.mean(fr)),
                    lower=float(np.mean(lo)),
                    upper=float(np.mean(up)),
                )
            )
    return out


def alg5_sensitivity(layers, L, temperatures, eps_values, seed=0, rows=None):
    """``rows``: the row set R (default: every row with t >= 2)."""
    rng = np.random.default_rng(seed)
    rows = [r for r in (range(L) if rows is None else rows) if r >= 1]
    out = []
    for T in temperatures:
        for e in eps_values:
            for li, h, lg, _V in _rows(layers):
                gs = []
                for r in rows:
                    t = r + 1
                    v = rng.standard_normal(t)
                    v /= np.linalg.norm(v)
                    l = lg[r, :t]
                    gs.append(np.linalg.norm(_softmax((l + e * v) / T) - _softmax(l / T)) / e)
                out.append(dict(T=T, eps=e, layer=li, head=h, g=float(np.mean(gs))))
    return out
