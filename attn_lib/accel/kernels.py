r"""Compiled CPU kernels (numba) for the hot loops of :mod:`attn_lib.metrics`, on layers whose rows see a prefix of
the tokens (causal attention). Each (head, row) is one job; jobs run on ``numba.prange`` threads and the loop inside
a job is sequential, so results do not depend on the number of threads (reproducible run to run).

* :func:`scan_prefix` -- the critical-N scan (Algorithm 3). The same incremental algorithm as the torch code path
  of :func:`attn_lib.metrics.topn_scan` -- adding the ``N``-th top token ``j`` of a row updates
  ``K_i = alpha_i ||x_i||^2 - 2 s . x_i`` by ``-2 alpha_j G_ji`` and ``||s||^2`` by
  ``alpha_j (2 alpha_j G_jj - K_j)`` -- but *fused*: one pass over a row's tokens per ``N`` updates ``K``, takes
  both square roots (d~ and E1) and accumulates the three sums, instead of six passes of tensor operations.

  Precision: everything is float64 except these square roots, which are taken in float32 (twice the SIMD width).
  The argument of each root is formed in float64, so each term ``sqrt(q)`` has a relative error below ``2^-23``
  (rounding to float32, then a correctly rounded root); every sum is a float64 sum of non-negative terms, so d~,
  E1 and E2 carry a relative error below ``1.2e-7`` (tested against the float64 references at ``1e-6``).
* :func:`mc_prefix` -- the Monte-Carlo estimate of ``E[d~]`` for given random subsets (float64 throughout):
  ``s . x_i`` from the ``n`` Gram rows of a subset (or from ``s`` when ``n`` exceeds the head dimension).
* :func:`mc_scan_prefix` -- the Monte-Carlo estimate of ``E[d~]`` for every ``N`` of a range at once (the ``"mc"``
  form of the critical-N scan): each subset is a prefix of a given random order of the row's tokens, so the state
  of :func:`scan_prefix` is updated one token at a time, two ``N`` per pass over the row; ``O(K t^2)`` per row.
  Float64 state, float32 square roots (the precision of :func:`scan_prefix`).
* :func:`dist_prefix` (d~, E1, Jensen gap, E2, d_1 at one N), :func:`sep_prefix` (``N_s/N``, ``rho_min``),
  :func:`order_prefix` (top-N order, ties to the lower index), :func:`running_min_sq` (delta of Algorithm 4):
  float64, the same formulas as the tensor code of :mod:`attn_lib.metrics`.
* :func:`crossing_rows` (the critical-N diagnosis, :func:`attn_lib.metrics.crossing_metrics`) and
  :func:`row_metrics` (the normaliser comparison, :func:`attn_lib.experiments.weights.row_metrics`): the sums over
  each row once the caller's matrix products have formed ``s . x_i``; any visibility, float64. ``row_metrics`` is
  compiled without fastmath so that each distance is the tensor code's expression and ``N_s/N`` compares the same.
* :func:`sens_rows` -- Algorithm 5's finite differences of softmax for every (T, eps), with a vectorised float64
  exponential (:func:`_exp_nonpos_py`).

Each kernel compiles on its first call (about 30 s for all of them on a 2-core CPU) and is cached on disk by numba
(``cache=True``: next to this module, or in the user cache directory if that is read-only).
"""

from __future__ import annotations

import math
import threading

import numba as _nb  # an ImportError here leaves attn_lib on its torch definitions (attn_lib.metrics._engine)
import numpy as np
from llvmlite import ir as _ir
from numba.core import types as _nbt
from numba.extending import intrinsic as _intrinsic

#: numba's threading layer is numba's own choice (``omp`` here, GNU OpenMP) unless the environment variable
#: ``NUMBA_THREADING_LAYER`` names one. ``omp`` spins at its barriers, for as long as ``GOMP_SPINCOUNT`` says, which
#: :func:`attn_lib.process.tune` shortens when asked; the collapse on a busy machine (a 10 ms call taking
#: 250 ms) came from torch's OpenMP pool spinning next to it, which :func:`attn_lib.metrics._engine.coarse_threads` removes
#: (``benchmarks/bench_contention.py``). ``workqueue`` (idle
#: threads sleep) was measured too: slightly better ratios under contention, but slower on idle cores, and its
#: Algorithm 5 values differ from ``omp``'s in the last bits (1e-11 relative), so the default stays. Kernel
#: launches go through :func:`_threads_call`, under one lock, so the workqueue layer's single-launcher rule holds
#: when it is chosen.
#: serialises kernel launches (the workqueue layer must not be entered by two Python threads at once).
_LAUNCH = threading.Lock()

__all__ = [
    "scan_prefix",
    "mc_prefix",
    "mc_scan_prefix",
    "dist_prefix",
    "order_prefix",
    "sep_prefix",
    "running_min_sq",
    "sens_rows",
    "log_sums",
    "d1_cummax",
    "crossing_rows",
    "row_metrics",
    "set_threads",
    "threading_info",
    "warm_up",
]

#: The public kernels, in the order :func:`warm_up` compiles them.
KERNELS = (
    "scan_prefix",
    "dist_prefix",
    "mc_prefix",
    "mc_scan_prefix",
    "order_prefix",
    "sep_prefix",
    "running_min_sq",
    "sens_rows",
    "log_sums",
    "d1_cummax",
    "crossing_rows",
    "row_metrics",
)

#: p modes of :func:`scan_prefix` (inclusion probability of E1): N/(t-1), N/t, a fixed number.
P_MODES = {"L-1": 0, "L": 1}


def threading_info() -> str:
    """numba's threading layer in use (or requested, before the first kernel runs) and its thread count."""
    try:
        layer = _nb.threading_layer()
    except ValueError:  # no parallel kernel has run yet
        layer = f"{_nb.config.THREADING_LAYER} (requested)"
    return f"{layer}, {_nb.get_num_threads()} threads"


def set_threads(n: int) -> int:
    """Use ``n`` numba threads (clipped to ``[1, numba.config.NUMBA_NUM_THREADS]``); returns the previous count."""
    prev = _nb.get_num_threads()
    _nb.set_num_threads(max(1, min(int(n), _nb.config.NUMBA_NUM_THREADS)))
    return prev


def _scan_prefix_py(alpha, G, order, zv, zz, t, rows, n_min, n_max, pmode, pfixed, dt_out, e1_out, e2_out):
    H = alpha.shape[0]
    R = rows.shape[0]
    for job in _prange(H * R):
        h = job // R
        ri = job - h * R
        r = rows[ri]
        W = t[h, r]
        a = alpha[h, r]
        K = np.empty(W)
        A = np.empty(W)
        Bz = np.empty(W)
        keep = np.ones(W)
        for i in range(W):
            ag = a[i] * G[h, i, i]
            K[i] = ag
            A[i] = a[i] * ag
            Bz[i] = a[i] * zv[h, r, i]
        Z = zz[h, r]
        tf = float(W)
        ss = 0.0
        for N in range(1, n_max + 1):
            if N > W - 1:  # rows need t >= N + 1; every later N is invalid too (outputs stay 0)
                break
            # add the N-th top token j (N <= W - 1 < n_ord here): ||s||^2 from the old K_j; K is updated below
            j = order[h, r, N - 1]
            aj = a[j]
            ss += aj * (2.0 * aj * G[h, j, j] - K[j])
            m2 = -2.0 * aj
            Gj = G[h, j]
            keep[j] = 0.0
            if N < n_min:
                for i in range(W):
                    K[i] += m2 * Gj[i]
                continue
            p = _p_incl(pmode, pfixed, N, tf)
            c1 = (1.0 + p) * (1.0 + p)
            c2 = -2.0 * p * (1.0 + p)
            c3 = p * p * Z
            tot = 0.0
            un = 0.0
            e1 = 0.0
            for i in range(W):  # one pass: update K_i, then both roots
                K[i] += m2 * Gj[i]
                d = np.float64(math.sqrt(np.float32(max(ss + a[i] * K[i], 0.0))))
                tot += d
                un += d * keep[i]
                e1 += np.float64(math.sqrt(np.float32(max(c1 * A[i] + c2 * Bz[i] + c3, 0.0))))
            fac = (tf - N) / tf
            k = N - n_min
            dt_out[h, ri, k] = un
            e2_out[h, ri, k] = fac * (un if N == 1 else tot)
            e1_out[h, ri, k] = fac * e1


def _mc_prefix_py(alpha, G, values, t, rows, sub, mean_out, se_out):
    H = alpha.shape[0]
    R = rows.shape[0]
    K = sub.shape[1]
    n = sub.shape[2]
    d = values.shape[2]
    for job in _prange(H * R):
        h = job // R
        ri = job - h * R
        r = rows[ri]
        W = t[h, r]
        if W < n + 1:
            continue
        a = alpha[h, r]
        base = np.empty(W)  # alpha_i^2 ||x_i||^2
        for i in range(W):
            base[i] = a[i] * a[i] * G[h, i, i]
        c = np.empty(W)
        s = np.empty(d)
        mu = 0.0  # Welford running mean and sum of squared deviations over the K subsets
        m2 = 0.0
        for k in range(K):
            # c_i = s . x_i for s = sum_{j in subset} alpha_j x_j: from n Gram rows, or from s when n > d
            if n <= d:
                for i in range(W):
                    c[i] = 0.0
                for q in range(n):
                    j = sub[ri, k, q]
                    aj = a[j]
                    Gj = G[h, j]
                    for i in range(W):
                        c[i] += aj * Gj[i]
            else:
                for e in range(d):
                    s[e] = 0.0
                for q in range(n):
                    j = sub[ri, k, q]
                    aj = a[j]
                    for e in range(d):
                        s[e] += aj * values[h, j, e]
                for i in range(W):
                    ci = 0.0
                    for e in range(d):
                        ci += s[e] * values[h, i, e]
                    c[i] = ci
            ss = 0.0
            for q in range(n):
                j = sub[ri, k, q]
                ss += a[j] * c[j]
            tot = 0.0
            for i in range(W):
                tot += math.sqrt(max(base[i] - 2.0 * a[i] * c[i] + ss, 0.0))
            for q in range(n):
                j = sub[ri, k, q]
                tot -= math.sqrt(max(base[j] - 2.0 * a[j] * c[j] + ss, 0.0))
            dlt = tot - mu
            mu += dlt / (k + 1)
            m2 += dlt * (tot - mu)
        mean_out[h, ri] = mu
        if K > 1:
            se_out[h, ri] = math.sqrt(max(m2, 0.0) / (K - 1) / K)
        else:
            se_out[h, ri] = math.inf


def _scratch_py(n, W):
    # one job's float64 work arrays: rows 1..n (row 0 a gap), W + _PAD long, of one allocation. Separate np.empty
    # arrays lie where the allocator puts them, and a loop that stores into one while it sums over another runs
    # vectorised only if they are more than VF * interleave * 8 bytes (256 here) apart, LLVM's runtime "diff" check,
    # else as the scalar loop, which sums in another order: the last bits followed the heap's history
    return np.empty((n + 1, W + _PAD))


def _mc_order_py(pk, W, jt, mode, out):
    # the order a Monte-Carlo sample adds its tokens in: the first W entries of pk (mode 0); with jt moved to the
    # front (mode 1) or to the last visible position W - 1 (mode 2), the other tokens keeping their order (the
    # two strata of expected_distance_mc_scan(stratify=True))
    if mode == 0:
        for i in range(W):
            out[i] = pk[i]
        return
    pos = 1 if mode == 1 else 0
    for i in range(W):
        v = pk[i]
        if v != jt:
            out[pos] = v
            pos += 1
    out[0 if mode == 1 else W - 1] = jt


def _mc_scan_prefix_py(alpha, G, perm, t, rows, n_min, n_max, pick, mode, mean_out, se_out):
    # Monte-Carlo E[d~] for every N: K random permutations per row; the subset of size N is the permutation's
    # prefix, so adding its N-th token j updates K_i = alpha_i ||x_i||^2 - 2 s . x_i by -2 alpha_j G_ji and ||s||^2
    # by alpha_j (2 alpha_j G_jj - K_j), as in _scan_prefix_py: O(t) per (sample, N), O(K t min(t, n_max)) per row.
    # Two N per pass over the row's tokens (N and N + 1: the state after N is formed in registers and both roots
    # taken), which halves the traffic of the state K.
    H = alpha.shape[0]
    R = rows.shape[0]
    n_samp = perm.shape[1]
    for job in _prange(H * R):
        h = job // R
        ri = job - h * R
        r = rows[ri]
        W = t[h, r]
        top = min(n_max, W - 1)  # rows need t >= N + 1
        if top < n_min:
            continue
        a = alpha[h, r]
        base = np.empty(W)  # alpha_i ||x_i||^2
        for i in range(W):
            base[i] = a[i] * G[h, i, i]
        buf = _scratch(2, W)
        Kst, keep = buf[1], buf[2]
        pk = np.empty(W, dtype=np.int64)
        mu = np.zeros(top - n_min + 1)  # Welford running mean and sum of squared deviations over the samples
        m2 = np.zeros(top - n_min + 1)
        for k in range(n_samp):
            _mc_order(perm[ri, k], W, pick[h, ri], mode, pk)
            for i in range(W):
                Kst[i] = base[i]
                keep[i] = 1.0
            ss = 0.0
            for N in range(1, n_min):  # before the range: the state only
                j = pk[N - 1]
                aj = a[j]
                ss += aj * (2.0 * aj * G[h, j, j] - Kst[j])
                m1 = -2.0 * aj
                Gj = G[h, j]
                keep[j] = 0.0
                for i in range(W):
                    Kst[i] += m1 * Gj[i]
            N = n_min
            while N <= top:
                j1 = pk[N - 1]
                a1 = a[j1]
                ss1 = ss + a1 * (2.0 * a1 * G[h, j1, j1] - Kst[j1])
                m1 = -2.0 * a1
                G1 = G[h, j1]
                keep[j1] = 0.0
                if N + 1 <= top:  # N and N + 1 in one pass
                    j2 = pk[N]
                    a2 = a[j2]
                    k2 = Kst[j2] + m1 * G1[j2]  # K_j2 after N
                    ss2 = ss1 + a2 * (2.0 * a2 * G[h, j2, j2] - k2)
                    m2j = -2.0 * a2
                    G2 = G[h, j2]
                    keep[j2] = 0.0  # j2 is still outside the subset at N: its root is added after the pass
                    u1 = 0.0
                    u2 = 0.0
                    for i in range(W):  # roots in float32, as in _scan_prefix_py
                        k1 = Kst[i] + m1 * G1[i]
                        kk = k1 + m2j * G2[i]
                        Kst[i] = kk
                        u1 += keep[i] * np.float64(math.sqrt(np.float32(max(ss1 + a[i] * k1, 0.0))))
                        u2 += keep[i] * np.float64(math.sqrt(np.float32(max(ss2 + a[i] * kk, 0.0))))
                    u1 += np.float64(math.sqrt(np.float32(max(ss1 + a2 * k2, 0.0))))
                    ss = ss2
                    step = 2
                else:
                    u1 = 0.0
                    u2 = 0.0
                    for i in range(W):
                        Kst[i] += m1 * G1[i]
                        u1 += keep[i] * np.float64(math.sqrt(np.float32(max(ss1 + a[i] * Kst[i], 0.0))))
                    ss = ss1
                    step = 1
                for q in range(step):
                    x = u1 if q == 0 else u2
                    c = N - n_min + q
                    dlt = x - mu[c]
                    mu[c] += dlt / (k + 1)
                    m2[c] += dlt * (x - mu[c])
                N += step
        for q in range(top - n_min + 1):
            mean_out[h, ri, q] = mu[q]
            if n_samp > 1:
                se_out[h, ri, q] = math.sqrt(max(m2[q], 0.0) / (n_samp - 1) / n_samp)
            else:
                se_out[h, ri, q] = math.inf


def _mc_cv_weights_py(P, U, C, W, N, w):
    # the control variate's weights w_i = 1 / (2 sqrt(m_i)) at N (0 where m_i <= 0), m_i = E[Q_i | i not in I] =
    # P_i + q U_i + q2 C_i for a uniform N-subset I of the other W - 1 tokens; returns E[sum_{i not in I} w_i Q_i]
    q = N / (W - 1.0)
    q2 = N * (N - 1.0) / ((W - 1.0) * (W - 2.0)) if N >= 2 else 0.0
    ec = 0.0
    for i in range(W):
        m = P[i] + q * U[i] + q2 * C[i]
        wi = 0.5 / np.float64(math.sqrt(np.float32(m))) if m > 0.0 else 0.0
        w[i] = wi
        ec += wi * m
    return ec * (W - N) / W


def _mc_scan_cv_prefix_py(alpha, G, perm, t, rows, n_min, n_max, pick, mode, mean_out, se_out):
    # _mc_scan_prefix_py with a control variate: each sample is Y = d~ - sum_{i not in I} w_i Q_i + E[...] with
    # Q_i = ||alpha_i x_i - s||^2 (the argument of d~'s root) and w_i = 1 / (2 sqrt(E[Q_i | i not in I])), the
    # first-order Taylor term of the root, whose expectation is exact (_mc_cv_weights_py); E[Y] = E[d~] for any
    # fixed w. One N per pass over the row; weights for every N once per row, O(n t) memory per job.
    H = alpha.shape[0]
    R = rows.shape[0]
    n_samp = perm.shape[1]
    for job in _prange(H * R):
        h = job // R
        ri = job - h * R
        r = rows[ri]
        W = t[h, r]
        top = min(n_max, W - 1)
        if top < n_min:
            continue
        a = alpha[h, r]
        base = np.empty(W)  # alpha_i ||x_i||^2
        ga = np.empty(W)  # sum_j alpha_j G_ij over the visible tokens
        for i in range(W):
            base[i] = a[i] * G[h, i, i]
            acc = 0.0
            for j in range(W):
                acc += G[h, i, j] * a[j]
            ga[i] = acc
        S = 0.0
        Bt = 0.0
        for i in range(W):
            S += a[i] * ga[i]
            Bt += a[i] * base[i]
        P = np.empty(W)
        U = np.empty(W)
        C = np.empty(W)
        for i in range(W):
            pi = a[i] * base[i]  # alpha_i^2 G_ii
            bi = Bt - pi  # sum_{j != i} alpha_j^2 G_jj
            P[i] = pi
            U[i] = bi - 2.0 * a[i] * (ga[i] - base[i])  # - 2 alpha_i sum_{j != i} alpha_j G_ij
            C[i] = S - 2.0 * a[i] * ga[i] + pi - bi  # sum_{j != k, both != i} alpha_j alpha_k G_jk
        nn = top - n_min + 1
        wt = np.empty((nn, W))
        ec = np.empty(nn)
        for c in range(nn):
            ec[c] = _mc_cv_weights(P, U, C, W, n_min + c, wt[c])
        buf = _scratch(2, W)
        Kst, keep = buf[1], buf[2]
        pk = np.empty(W, dtype=np.int64)
        mu = np.zeros(nn)
        m2 = np.zeros(nn)
        for k in range(n_samp):
            _mc_order(perm[ri, k], W, pick[h, ri], mode, pk)
            for i in range(W):
                Kst[i] = base[i]
                keep[i] = 1.0
            ss = 0.0
            for N in range(1, top + 1):
                j = pk[N - 1]
                aj = a[j]
                ss += aj * (2.0 * aj * G[h, j, j] - Kst[j])
                m1 = -2.0 * aj
                Gj = G[h, j]
                keep[j] = 0.0
                if N < n_min:
                    for i in range(W):
                        Kst[i] += m1 * Gj[i]
                    continue
                c = N - n_min
                wc = wt[c]
                u = 0.0
                for i in range(W):
                    Kst[i] += m1 * Gj[i]
                    arg = max(ss + a[i] * Kst[i], 0.0)
                    u += keep[i] * (np.float64(math.sqrt(np.float32(arg))) - wc[i] * arg)
                x = u + ec[c]
                dlt = x - mu[c]
                mu[c] += dlt / (k + 1)
                m2[c] += dlt * (x - mu[c])
        for q in range(nn):
            mean_out[h, ri, q] = mu[q]
            if n_samp > 1:
                se_out[h, ri, q] = math.sqrt(max(m2[q], 0.0) / (n_samp - 1) / n_samp)
            else:
                se_out[h, ri, q] = math.inf


def _row_dots_py(a, Gh, Vh, sel, W, N):
    """``c_i = s . x_i`` for ``i < W``, ``s = sum_{q < N} a_{sel_q} x_{sel_q}``: from ``N`` Gram rows, or from ``s``
    when ``N`` exceeds the dimension ``d`` (cost ``W min(N, d)``)."""
    d = Vh.shape[1]
    c = np.zeros(W)
    if N <= d:
        for q in range(N):
            j = sel[q]
            aj = a[j]
            Gj = Gh[j]
            for i in range(W):
                c[i] += aj * Gj[i]
    else:
        s = np.zeros(d)
        for q in range(N):
            j = sel[q]
            aj = a[j]
            for e in range(d):
                s[e] += aj * Vh[j, e]
        for i in range(W):
            ci = 0.0
            for e in range(d):
                ci += s[e] * Vh[i, e]
            c[i] = ci
    return c


def _row_state_py(a, Gh, Vh, sel, W, N):
    """For one row and its top ``N`` tokens ``sel``: ``c_i = s . x_i`` (:func:`_row_dots_py`), ``||s||^2`` and
    ``keep`` (1.0 for the non-selected tokens, 0.0 for the selected ones)."""
    c = _row_dots(a, Gh, Vh, sel, W, N)
    keep = np.ones(W)
    ss = 0.0
    for q in range(N):
        j = sel[q]
        ss += a[j] * c[j]
        keep[j] = 0.0
    return c, ss, keep


def _p_incl_py(pmode, pfixed, N, tf):
    """E1's inclusion probability for a row with ``tf`` visible tokens: N/(t-1), N/t or a fixed number."""
    if pmode == 0:
        return N / max(tf - 1.0, 1.0)
    if pmode == 1:
        return N / max(tf, 1.0)
    return pfixed


def _sep_prefix_py(alpha, G, values, order, t, N, sep_out, rho_out):
    # the selected tokens with D_j < rho_min (strict), rho_min = min over visible non-selected D_i; each test
    # compares the excesses D^2 - ||s||^2 = a^2 G - 2 a c, which leave ||s||^2 out (metrics.separability.separation)
    H = alpha.shape[0]
    L = alpha.shape[1]
    for job in _prange(H * L):
        h = job // L
        r = job - h * L
        W = t[h, r]
        if W < N + 1:
            continue
        a = alpha[h, r]
        sel = order[h, r]
        c, ss, keep = _row_state(a, G[h], values[h], sel, W, N)
        least = math.inf
        for i in range(W):
            if keep[i] > 0.0:
                least = min(least, a[i] * a[i] * G[h, i, i] - 2.0 * a[i] * c[i])
        for q in range(N):
            j = sel[q]
            sep_out[h, r, q] = a[j] * a[j] * G[h, j, j] - 2.0 * a[j] * c[j] < least
        rho_out[h, r] = math.sqrt(max(ss + least, 0.0))


def _running_min_py(G, out):
    # min squared pairwise distance among tokens 0..c, for every c (0 where c < 1), per head
    H = G.shape[0]
    L = G.shape[1]
    for h in _prange(H):
        run = math.inf
        for c in range(L):
            gc = G[h, c, c]
            for j in range(c):
                v = G[h, j, j] + gc - 2.0 * G[h, c, j]
                if v < run:
                    run = v
            out[h, c] = run if c > 0 else 0.0


def _dist_prefix_py(alpha, G, values, order, zv, zz, t, N, pmode, pfixed, with_d1, out):
    # out: (8, H, L): d_tilde, e1, e1_gap, e1_gap_crude, e2, s_norm, d1, max_norm
    H = alpha.shape[0]
    L = alpha.shape[1]
    for job in _prange(H * L):
        h = job // L
        r = job - h * L
        W = t[h, r]
        if W < N + 1:
            continue
        a = alpha[h, r]
        c, ss, keep = _row_state(a, G[h], values[h], order[h, r], W, N)
        if with_d1:
            # d_1 = max over selected j, visible non-selected i of ||x_i - x_j||; max_norm = max_j ||x_j||
            gdm = np.empty(W)  # ||x_i||^2 for the non-selected tokens, -inf for the selected ones
            for i in range(W):
                gdm[i] = G[h, i, i] if keep[i] > 0.0 else -math.inf
            d1sq = -math.inf
            mx = 0.0
            for q in range(N):
                j = order[h, r, q]
                Gj = G[h, j]
                m = -math.inf
                for i in range(W):  # a plain max-reduction (vectorised)
                    m = max(m, gdm[i] - 2.0 * Gj[i])
                gj = G[h, j, j]
                d1sq = max(d1sq, gj + m)
                mx = max(mx, gj)
            out[6, h, r] = math.sqrt(max(d1sq, 0.0))
            out[7, h, r] = math.sqrt(mx)
        tf = float(W)
        p = _p_incl(pmode, pfixed, N, tf)
        c1 = (1.0 + p) * (1.0 + p)
        c2 = -2.0 * p * (1.0 + p)
        Z = zz[h, r]
        c3 = p * p * Z
        Q = 0.0
        for i in range(W):
            Q += a[i] * a[i] * G[h, i, i]
        den = max(tf - 2.0, 1.0)
        pq = max(p * (1.0 - p), 0.0)
        k1 = pq / den * ((tf - 1.0) * Q - Z)
        k2 = -pq * tf / den
        k3 = 2.0 * pq / den
        k5 = pq * (tf - 1.0) / den
        k4 = k5 * Q
        tot = 0.0
        un = 0.0
        e1 = 0.0
        gap = 0.0
        crude = 0.0
        for i in range(W):
            Ai = a[i] * a[i] * G[h, i, i]
            Bi = a[i] * zv[h, r, i]
            di = math.sqrt(max(Ai - 2.0 * a[i] * c[i] + ss, 0.0))
            tot += di
            un += di * keep[i]
            e1 += math.sqrt(max(c1 * Ai + c2 * Bi + c3, 0.0))
            gap += math.sqrt(max(k1 + k2 * Ai + k3 * Bi, 0.0))
            crude += math.sqrt(max(k4 - k5 * Ai, 0.0))
        fac = (tf - N) / tf
        out[0, h, r] = un
        out[1, h, r] = fac * e1
        if W >= N + 2:
            out[2, h, r] = fac * gap
            out[3, h, r] = fac * crude
        out[4, h, r] = fac * (un if N == 1 else tot)
        out[5, h, r] = math.sqrt(max(ss, 0.0))


def _d1_cummax_py(G, order, t, N, d1_out, mx_out):
    # d_1 = max over selected j, visible non-selected i of ||x_i - x_j||, for large N: per head the running maximum
    # F[j, c] = max_{i <= c} ||x_i - x_j||^2 (and its first argmax) answers each (row, j) in O(1) unless that
    # argmax is itself selected; only then, and only if it could still matter, the exact O(t) maximum
    H = G.shape[0]
    L = G.shape[1]
    for h in _prange(H):
        Gh = G[h]
        F = np.empty((L, L))
        Fi = np.empty((L, L), dtype=np.int64)
        for j in range(L):
            gj = Gh[j, j]
            best = -math.inf
            arg = 0
            for c in range(L):
                v = Gh[c, c] + gj - 2.0 * Gh[j, c]
                if v > best:
                    best = v
                    arg = c
                F[j, c] = best
                Fi[j, c] = arg
        for r in range(L):
            W = t[h, r]
            if W < N + 1:
                continue
            last = W - 1
            sel = order[h, r]
            keep = np.ones(W, dtype=np.bool_)
            mx = 0.0
            for q in range(N):
                keep[sel[q]] = False
                mx = max(mx, Gh[sel[q], sel[q]])
            d1sq = -math.inf
            for q in range(N):  # exact candidates: the farthest token from j is not selected
                j = sel[q]
                if keep[Fi[j, last]]:
                    d1sq = max(d1sq, F[j, last])
            for q in range(N):  # the others: F is an upper bound; recompute exactly only if it beats the best
                j = sel[q]
                if not keep[Fi[j, last]] and F[j, last] > d1sq:
                    gj = Gh[j, j]
                    for i in range(W):
                        if keep[i]:
                            d1sq = max(d1sq, Gh[i, i] + gj - 2.0 * Gh[j, i])
            d1_out[h, r] = math.sqrt(max(d1sq, 0.0))
            mx_out[h, r] = math.sqrt(mx)


def _kth_smallest_py(x, k):
    # the k-th smallest value (0-based) of x, which it reorders (pass a scratch copy): quickselect with a
    # median-of-three pivot and a three-way partition, so rows of equal weights take one pass. The value np.partition
    # would put at k, without np.partition, whose numba implementation took 12 of order_prefix's 15.6 s of compile.
    lo = 0
    hi = x.shape[0] - 1
    while lo < hi:
        a = x[lo]
        b = x[(lo + hi) // 2]
        c = x[hi]
        p = max(min(a, b), min(max(a, b), c))  # the median of the three
        lt = lo
        i = lo
        gt = hi
        while i <= gt:  # x[lo:lt] < p, x[lt:i] == p, x[gt+1:hi+1] > p
            v = x[i]
            if v < p:
                x[i] = x[lt]
                x[lt] = v
                lt += 1
                i += 1
            elif v > p:
                x[i] = x[gt]
                x[gt] = v
                gt -= 1
            else:
                i += 1
        if k < lt:
            hi = lt - 1
        elif k > gt:
            lo = gt + 1
        else:
            return p
    return x[lo]


def _order_prefix_py(alpha, t, n, out):
    # top-n indices per (head, row) among the visible prefix, largest first, ties to the lower index (stable sort)
    H = alpha.shape[0]
    L = alpha.shape[1]
    for job in _prange(H * L):
        h = job // L
        r = job - h * L
        W = t[h, r]
        m = min(n, W)
        neg = -alpha[h, r, :W]
        if 2 * m >= W:  # most of the row: one stable sort
            idx = np.argsort(neg, kind="mergesort")
            for q in range(m):
                out[h, r, q] = idx[q]
        elif m > 0:
            # select, then sort only the selection: the m-th largest value v; every index above v, then the
            # lowest-index ones equal to v; a stable sort of the selection (in index order) by value
            v = -_kth_smallest(neg.copy(), m - 1)
            sel = np.empty(m, dtype=np.int64)
            k = 0
            for i in range(W):
                if -neg[i] > v:
                    sel[k] = i
                    k += 1
            for i in range(W):
                if k >= m:
                    break
                if -neg[i] == v:
                    sel[k] = i
                    k += 1
            perm = np.argsort(neg[sel], kind="mergesort")
            for q in range(m):
                out[h, r, q] = sel[perm[q]]
        # past the visible count: masked positions, lowest index first (as metrics.top_n_order)
        for q in range(m, n):
            out[h, r, q] = W + (q - m)


def _crossing_rows_py(a, vis, rank, norms, sdotx, zdotx, zz, s2, t, ns, dt_out, e1_out, aout_out):
    # the critical-N diagnosis (metrics.crossing_metrics) on R query rows with any visibility: per (head, row, N)
    # d~ over the visible non-top-N tokens, E1 (p = N / (t - 1)) over the visible ones, and A_out; one fused pass
    # over the row per N (the dot products s . x_i and z . x_i come from the caller's matrix products)
    H = a.shape[0]
    R = a.shape[1]
    L = a.shape[2]
    n = ns.shape[0]
    for job in _prange(H * R):
        h = job // R
        r = job - h * R
        tf = float(t[r])
        ar = a[h, r]
        vr = vis[h, r]
        kr = rank[h, r]
        zr = zdotx[h, r]
        Z = zz[h, r]
        for k in range(n):
            N = ns[k]
            if t[r] < N + 1:
                continue
            p = N / max(tf - 1.0, 1.0)
            c1 = (1.0 + p) * (1.0 + p)
            c2 = -2.0 * p * (1.0 + p)
            c3 = p * p * Z
            S2 = s2[h, r, k]
            sr = sdotx[h, r, k]
            dt = 0.0
            e1 = 0.0
            ao = 0.0
            for i in range(L):
                ai = ar[i]
                nm = norms[h, i]
                A = ai * ai * (nm * nm)
                v = 1.0 if vr[i] else 0.0
                o = v if kr[i] >= N else 0.0
                e1 += v * math.sqrt(max(c1 * A + c2 * (ai * zr[i]) + c3, 0.0))
                dt += o * math.sqrt(max(A - 2.0 * ai * sr[i] + S2, 0.0))
                ao += o * (ai * nm)
            dt_out[h, r, k] = dt
            e1_out[h, r, k] = (tf - N) / tf * e1
            aout_out[h, r, k] = ao


def _row_metrics_py(vis, rank, asq, w, sx, wzx, zsq, ssq, t, ns, dt_out, e1_out, sep_out):
    # experiments.row_metrics for C values of N at once (any visibility): per (head, row, N) d~ over the visible
    # tokens of rank >= N, E1 (p = N / (t - 1)) over the visible ones, and N_s/N (top-N tokens strictly closer to s
    # than every other visible token, compared on the excesses D^2 - ||s||^2 as in metrics.separability.separation).
    # Compiled without fastmath: each distance is the tensor code's expression, operation for operation.
    H = w.shape[0]
    R = w.shape[1]
    L = w.shape[2]
    C = ns.shape[0]
    for job in _prange(H * R):
        h = job // R
        r = job - h * R
        tr = t[h, r]
        Z = zsq[h, r]
        excess = np.empty(L)
        for c in range(C):
            N = ns[c]
            if tr < N + 1.0:
                continue
            S2 = ssq[h, r, c]
            p = N / max(tr - 1.0, 1.0)
            q1 = (1.0 + p) * (1.0 + p)
            q2 = 2.0 * p * (1.0 + p)
            q3 = p * p
            dt = 0.0
            e1 = 0.0
            least = math.inf
            for i in range(L):
                if not vis[h, r, i]:
                    continue
                ex = asq[h, r, i] - 2.0 * w[h, r, i] * sx[h, r, c, i]
                excess[i] = ex
                e1 += math.sqrt(max(q1 * asq[h, r, i] - q2 * wzx[h, r, i] + q3 * Z, 0.0))
                if rank[h, r, i] >= N:
                    dt += math.sqrt(max(ex + S2, 0.0))
                    least = min(least, ex)
            cnt = 0
            for i in range(L):
                if vis[h, r, i] and rank[h, r, i] < N and excess[i] < least:
                    cnt += 1
            dt_out[h, r, c] = dt
            e1_out[h, r, c] = (tr - N) / max(tr, 1.0) * e1
            sep_out[h, r, c] = cnt / N


_INV_LN2 = 1.4426950408889634
_LN2_HI = 6.93147180369123816490e-01  # fdlibm's two-part ln 2
_LN2_LO = 1.90821492927058770002e-10


def _exp_nonpos_py(x):
    """``exp(x)`` for ``x <= 0`` (softmax terms after the shift), vectorisable: ``2^k exp(r)`` with
    ``|r| <= ln2 / 2`` and the Taylor series to degree 13 (truncation below 1e-17); 0 below -708 (where the
    true value is under 1e-307). Inside kernels compiled with reassociation the two-part ``ln 2`` may be folded,
    which costs ``|k| * 5.5e-17`` relative: below 3e-15 for every term above ``e^-40`` (tested)."""
    xc = max(x, -708.0)
    kf = math.floor(xc * _INV_LN2 + 0.5)
    r = (xc - kf * _LN2_HI) - kf * _LN2_LO
    p = 1.0 / 6227020800.0
    p = p * r + 1.0 / 479001600.0
    p = p * r + 1.0 / 39916800.0
    p = p * r + 1.0 / 3628800.0
    p = p * r + 1.0 / 362880.0
    p = p * r + 1.0 / 40320.0
    p = p * r + 1.0 / 5040.0
    p = p * r + 1.0 / 720.0
    p = p * r + 1.0 / 120.0
    p = p * r + 1.0 / 24.0
    p = p * r + 1.0 / 6.0
    p = p * r + 0.5
    p = p * r + 1.0
    p = p * r + 1.0
    scale = _bits_to_f64((np.int64(kf) + 1023) << 52)  # 2^k, k in [-1021, 0]
    return p * scale if x > -708.0 else 0.0


def _expm1_le1_py(x):
    """``expm1(x)`` for ``x <= 1``, vectorisable: the reduction and series of :func:`_exp_nonpos_py`,
    ``exp(r) = 1 + r q(r)``, give ``expm1(r) = r q(r)``, so ``expm1(x) = x q(x)`` for ``|x| <= ln2 / 2`` (no
    cancellation near 0) and ``2^k r q(r) + (2^k - 1)`` beyond (``|expm1(x)| > 0.29``: no digits to lose); -1 below
    -708. Within 4e-16 of numpy's ``expm1`` (tested)."""
    xc = min(max(x, -708.0), 1.0)
    kf = math.floor(xc * _INV_LN2 + 0.5)
    r = (xc - kf * _LN2_HI) - kf * _LN2_LO
    p = 1.0 / 6227020800.0
    p = p * r + 1.0 / 479001600.0
    p = p * r + 1.0 / 39916800.0
    p = p * r + 1.0 / 3628800.0
    p = p * r + 1.0 / 362880.0
    p = p * r + 1.0 / 40320.0
    p = p * r + 1.0 / 5040.0
    p = p * r + 1.0 / 720.0
    p = p * r + 1.0 / 120.0
    p = p * r + 1.0 / 24.0
    p = p * r + 1.0 / 6.0
    p = p * r + 0.5
    p = p * r + 1.0
    em = r * p
    scale = _bits_to_f64((np.int64(kf) + 1023) << 52)  # 2^k, k in [-1021, 1]
    big = scale * em + (scale - 1.0) if x > -708.0 else -1.0
    return em if kf == 0.0 else big


def _sens_rows_py(x, v, t, invT, eps, out):
    # finite-difference sensitivity ||softmax((l + eps v)/T) - softmax(l/T)|| / eps per (T, eps, head, row), the
    # difference formed without cancellation as in attn_lib.metrics.sensitivity.softmax_change:
    # p_i expm1(z_i), z_i = d_i - log1p(sum_j p_j expm1(d_j)), d = c - c_k measured from the row maximum's token k;
    # expm1(z_i) = (expm1(d_i) - e_s) / (1 + e_s) with e_s = sum_j p_j expm1(d_j), so one exponential per token
    H = x.shape[0]
    R = x.shape[1]
    nT = invT.shape[0]
    nE = eps.shape[0]
    for job in _prange(H * R):
        h = job // R
        ri = job - h * R
        W = t[ri]
        if W < 2:
            continue
        xr = x[h, ri]
        vr = v[h, ri]
        m = -math.inf
        k = 0
        vmax = -math.inf
        for i in range(W):
            if xr[i] > m:
                m = xr[i]
                k = i
            vmax = max(vmax, vr[i])
        buf = _scratch(5, W)
        y, e0, p0, d, em = buf[1], buf[2], buf[3], buf[4], buf[5]  # em: expm1(d), reused for the new weights
        for a in range(nT):
            s0 = 0.0
            for i in range(W):
                yi = (xr[i] - m) * invT[a]  # <= 0, the largest (at k) is 0
                y[i] = yi
                ei = _exp_nonpos(yi)
                e0[i] = ei
                s0 += ei
            log_s = math.log(s0)
            for i in range(W):
                p0[i] = e0[i] / s0
            for b in range(nE):
                c = eps[b] * invT[a]
                ck = c * vr[k]
                acc = 0.0
                # every loop below is branch-free (vectorised): where a token may take either form, both are formed
                dmax = c * vmax - ck  # the largest d (c > 0)
                fused = dmax <= 1.0
                if fused:  # every d <= 1, so y + d <= 1: d, expm1(d) and their sum in one pass
                    top = 0.0
                    for i in range(W):  # d_k exactly 0 (a fused multiply-add would leave the rounding of ck)
                        di = c * vr[i] - ck if i != k else 0.0
                        d[i] = di
                        emi = _expm1_le1(di)
                        em[i] = emi
                        acc += e0[i] * emi
                else:
                    top = -math.inf
                    for i in range(W):
                        di = c * vr[i] - ck
                        d[i] = di
                        top = max(top, y[i] + di)
                d[k] = 0.0
                dmax = max(dmax, 0.0)
                if top > 700.0:  # exp(y + d) would overflow: a log-sum-exp (no digits to save there)
                    for i in range(W):
                        acc += _exp_nonpos(y[i] + d[i] - top)
                    shift = top + math.log(acc) - log_s
                    acc = 0.0
                    for i in range(W):
                        z = d[i] - shift
                        far = _exp_nonpos(min(y[i] - log_s + z, 0.0)) - p0[i]
                        dlt = p0[i] * _expm1_le1(z) if z <= 1.0 else far
                        acc += dlt * dlt
                else:
                    if fused:
                        pass
                    elif dmax <= 1.0:
                        for i in range(W):
                            emi = _expm1_le1(d[i])
                            em[i] = emi
                            acc += e0[i] * emi
                    else:  # a token with d > 1: e^(y + d) - e^y formed directly, from e^top (top <= 700)
                        etop = math.exp(top)
                        for i in range(W):
                            di = d[i]
                            emi = _expm1_le1(di)
                            em[i] = emi
                            grown = _exp_nonpos(min(y[i] + di - top, 0.0)) * etop - e0[i]
                            acc += e0[i] * emi if di <= 1.0 else grown
                    es = acc / s0  # expm1(shift), shift = log1p(es)
                    shift = math.log1p(es)
                    inv = 1.0 / (1.0 + es)
                    acc = 0.0
                    if dmax <= 1.0 and dmax - shift <= 1.0:
                        for i in range(W):  # expm1(z) = (expm1(d) - expm1(shift)) / (1 + expm1(shift)): no exponential
                            dlt = p0[i] * ((em[i] - es) * inv)
                            acc += dlt * dlt
                    else:  # z > 1: the new weight is > e times the old one, formed directly (no cancellation)
                        for i in range(W):
                            di = d[i]
                            z = di - shift
                            near = p0[i] * ((em[i] - es) * inv) if di <= 1.0 else p0[i] * _expm1_le1(z)
                            far = _exp_nonpos(min(y[i] - log_s + z, 0.0)) - p0[i]
                            dlt = near if z <= 1.0 else far
                            acc += dlt * dlt
                out[a, b, h, ri] = math.sqrt(acc) / eps[b]


def _log_sums_py(x, width, temps, out):
    # per (T, head, row): log sum_i e_i and log sum_i e_i^2, e_i = exp(x_i / T), over the first width[r] columns of
    # row r of x (H, R, L), whose entries are <= 0 (-inf: e_i = 0); the exponentials by _exp_nonpos (vectorised)
    H = x.shape[0]
    R = x.shape[1]
    nT = temps.shape[0]
    for job in _prange(H * R):
        h = job // R
        r = job - h * R
        xr = x[h, r]
        for a in range(nT):
            s1 = 0.0
            s2 = 0.0
            for i in range(width[r]):
                e = _exp_nonpos(xr[i] / temps[a])
                s1 += e
                s2 += e * e
            out[0, a, h, r] = math.log(s1) if s1 > 0.0 else -math.inf
            out[1, a, h, r] = math.log(s2) if s2 > 0.0 else -math.inf


@_intrinsic
def _bits_to_f64(typingctx, b):
    """Reinterpret an int64 as a float64 (for 2^k in :func:`_exp_nonpos_py`)."""
    sig = _nbt.float64(_nbt.int64)

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], _ir.DoubleType())

    return sig, codegen


_prange = _nb.prange
_PAD = 64  # float64s of gap in each row of _scratch: rows over 512 bytes apart
_FAST = {"reassoc", "contract", "nsz", "arcp"}
_scan_prefix = _nb.njit(parallel=True, cache=True, fastmath=_FAST)(_scan_prefix_py)
_mc_prefix = _nb.njit(parallel=True, cache=True, fastmath=_FAST)(_mc_prefix_py)
_mc_order = _nb.njit(cache=True, inline="always")(_mc_order_py)
_scratch = _nb.njit(cache=True, inline="always")(_scratch_py)
_mc_scan_prefix = _nb.njit(parallel=True, cache=True, fastmath=_FAST)(_mc_scan_prefix_py)
_mc_cv_weights = _nb.njit(cache=True)(_mc_cv_weights_py)
_mc_scan_cv_prefix = _nb.njit(parallel=True, cache=True, fastmath=_FAST)(_mc_scan_cv_prefix_py)
_row_dots = _nb.njit(cache=True, fastmath=_FAST)(_row_dots_py)
_row_state = _nb.njit(cache=True, fastmath=_FAST)(_row_state_py)
_p_incl = _nb.njit(cache=True, inline="always")(_p_incl_py)
_dist_prefix = _nb.njit(parallel=True, cache=True, fastmath=_FAST)(_dist_prefix_py)
_sep_prefix = _nb.njit(parallel=True, cache=True, fastmath=_FAST)(_sep_prefix_py)
_running_min = _nb.njit(parallel=True, cache=True)(_running_min_py)
_exp_nonpos = _nb.njit(cache=True, inline="always", fastmath={"contract"})(_exp_nonpos_py)
_expm1_le1 = _nb.njit(cache=True, inline="always", fastmath={"contract"})(_expm1_le1_py)
_sens_rows = _nb.njit(parallel=True, cache=True, fastmath={"reassoc", "contract", "nsz"})(_sens_rows_py)
_log_sums = _nb.njit(parallel=True, cache=True, fastmath={"reassoc", "contract", "nsz"})(_log_sums_py)
_kth_smallest = _nb.njit(cache=True)(_kth_smallest_py)
_order_prefix = _nb.njit(parallel=True, cache=True)(_order_prefix_py)
_d1_cummax = _nb.njit(parallel=True, cache=True)(_d1_cummax_py)
_crossing_rows = _nb.njit(parallel=True, cache=True, fastmath=_FAST)(_crossing_rows_py)
_row_metrics = _nb.njit(parallel=True, cache=True)(_row_metrics_py)


def _threads_call(fn, threads, *args):
    """Run compiled kernel ``fn(*args)`` on ``threads`` numba threads (then restore the previous count)."""
    with _LAUNCH:
        prev = set_threads(threads) if threads else None
        try:
            fn(*args)
        finally:
            if prev is not None:
                set_threads(prev)


def dist_prefix(alpha, G, values, order, zv, zz, t, N: int, p, with_d1: bool = False, threads: int | None = None):
    """At one ``N``, per (head, row) of a prefix-masked layer (float64): ``(8, H, L)`` array of d~, E1, the Jensen
    gap, its crude bound, E2, ``||s||``, and -- with ``with_d1`` (cost ``N t`` per row) -- ``d_1`` and the largest
    selected norm of Theorem 1(a); zero where ``t < N + 1`` (gap terms also where ``t < N + 2``). Same formulas as
    the torch path of :func:`attn_lib.metrics.distance_metrics`."""
    H, L = alpha.shape[0], alpha.shape[1]
    out = np.zeros((8, H, L))
    pmode, pfixed = (P_MODES[p], 0.0) if isinstance(p, str) else (2, float(p))
    _threads_call(
        _dist_prefix,
        threads,
        np.ascontiguousarray(alpha),
        np.ascontiguousarray(G),
        np.ascontiguousarray(values),
        np.ascontiguousarray(order, np.int64),
        np.ascontiguousarray(zv),
        np.ascontiguousarray(zz),
        np.ascontiguousarray(t, np.int64),
        int(N),
        pmode,
        pfixed,
        bool(with_d1),
        out,
    )
    return out


def order_prefix(alpha, t, n: int, threads: int | None = None):
    """Top-``n`` indices ``(H, L, n)`` of each row's visible prefix, largest weight first, ties to the lower index;
    positions past a row's count are filled with the masked columns in increasing order (as
    :func:`attn_lib.metrics.top_n_order`)."""
    H, L = alpha.shape[0], alpha.shape[1]
    out = np.zeros((H, L, n), dtype=np.int64)
    _threads_call(_order_prefix, threads, np.ascontiguousarray(alpha), np.ascontiguousarray(t, np.int64), int(n), out)
    return out


def mc_prefix(alpha, G, values, t, rows, sub, threads: int | None = None):
    """Monte-Carlo ``E[d~]`` per (head, row) for given subsets on a prefix-masked layer (float64 throughout).

    ``sub`` ``(R, K, n)`` int64: the ``K`` subsets of row ``rows[i]`` (indices ``< t``), shared by all heads.
    Returns ``(mean, stderr)``, each ``(H, R)``; rows with ``t < n + 1`` stay 0.
    """
    H, R = alpha.shape[0], rows.shape[0]
    mean, se = np.zeros((H, R)), np.zeros((H, R))
    _threads_call(
        _mc_prefix,
        threads,
        np.ascontiguousarray(alpha),
        np.ascontiguousarray(G),
        np.ascontiguousarray(values),
        np.ascontiguousarray(t, np.int64),
        np.ascontiguousarray(rows, np.int64),
        np.ascontiguousarray(sub, np.int64),
        mean,
        se,
    )
    return mean, se


def mc_scan_prefix(
    alpha,
    G,
    perm,
    t,
    rows,
    n_min: int,
    n_max: int,
    threads: int | None = None,
    control_variate: bool = False,
    pick=None,
    first: bool = True,
):
    """Monte-Carlo ``E[d~]`` for ``N = n_min..n_max`` at once, per (head, row) of a prefix-masked layer.

    ``perm`` ``(R, K, >= t)`` int64: ``K`` random orders of row ``rows[i]``'s visible tokens ``0..t-1`` (the first
    ``t`` entries of each are a permutation of them), shared by all heads; the ``N``-subset of sample ``k`` is the
    prefix ``perm[i, k, :N]``. ``alpha``, ``G``: ``(H, L, L)`` float64; ``t`` ``(H, L)`` int64. Returns
    ``(mean, stderr)``, each ``(H, R, n_max - n_min + 1)`` float64 (stderr ``std / sqrt(K)``, ``inf`` for ``K = 1``),
    zero where ``t < N + 1``. The state is float64, the square roots float32 (as :func:`scan_prefix`: relative error
    below ``1.2e-7``); cost ``O(K t min(t, n_max))`` per (head, row).

    ``control_variate=True``: each sample is ``d~ - sum_{i not in I} w_i Q_i`` plus that sum's exact expectation
    (``Q_i`` the square under d~'s root, ``w_i = 1 / (2 sqrt(E[Q_i | i not in I]))``): the same expectation, a much
    smaller variance. Compiled on its first use (not part of :data:`KERNELS`); O(t^2 + n t) more work per row.

    ``pick`` ``(H, R)`` int64 (one visible token per head and row): every order of that (head, row) has the token
    moved to its front (``first``) or to its last visible position ``t - 1``, the other tokens keeping their order --
    one stratum of the stratified estimator, for every head in one call; ``None``: the orders as given.
    """
    H, R, nn = alpha.shape[0], rows.shape[0], n_max - n_min + 1
    mean, se = np.zeros((H, R, nn)), np.zeros((H, R, nn))
    if pick is None:
        pick, mode = np.zeros((H, R), dtype=np.int64), 0
    else:
        pick, mode = np.ascontiguousarray(pick, np.int64), 1 if first else 2
        if pick.shape != (H, R):
            raise ValueError(f"pick must have shape (H, R) = {(H, R)} (got {pick.shape})")
    _threads_call(
        _mc_scan_cv_prefix if control_variate else _mc_scan_prefix,
        threads,
        np.ascontiguousarray(alpha),
        np.ascontiguousarray(G),
        np.ascontiguousarray(perm, np.int64),
        np.ascontiguousarray(t, np.int64),
        np.ascontiguousarray(rows, np.int64),
        int(n_min),
        int(n_max),
        pick,
        mode,
        mean,
        se,
    )
    return mean, se


def scan_prefix(alpha, G, order, zv, zz, t, rows, n_min: int, n_max: int, p, threads: int | None = None):
    """d~, E1, E2 for ``N = n_min..n_max`` on the given rows of a prefix-masked layer (numpy arrays).

    ``alpha``, ``G`` (Gram), ``zv`` (``z . x_i``): ``(H, L, L)`` float64; ``order`` ``(H, L, n_ord)`` int64 top
    indices (largest first); ``zz`` ``(H, L)``; ``t`` ``(H, L)`` int64 visible counts (row ``r`` sees columns
    ``0..t-1``); ``rows`` ``(R,)`` int64; ``p`` ``"L-1"``, ``"L"`` or a number. Returns three ``(H, R, n)`` float64
    arrays (d~, E1, E2), zero where ``t < N + 1``.
    """
    H, R, nn = alpha.shape[0], rows.shape[0], n_max - n_min + 1
    outs = [np.zeros((H, R, nn)) for _ in range(3)]
    pmode, pfixed = (P_MODES[p], 0.0) if isinstance(p, str) else (2, float(p))
    _threads_call(
        _scan_prefix,
        threads,
        np.ascontiguousarray(alpha),
        np.ascontiguousarray(G),
        np.ascontiguousarray(order, np.int64),
        np.ascontiguousarray(zv),
        np.ascontiguousarray(zz),
        np.ascontiguousarray(t, np.int64),
        np.ascontiguousarray(rows, np.int64),
        int(n_min),
        int(n_max),
        pmode,
        pfixed,
        *outs,
    )
    return outs


def sep_prefix(alpha, G, values, order, t, N: int, threads: int | None = None):
    """Separability at one ``N`` per (head, row) of a prefix-masked layer (float64): ``(separable, rho_min)``;
    ``separable`` ``(H, L, N)`` bool, whether each selected token is strictly inside ``B_rho(s)``; ``rho_min``
    ``(H, L)``, the smallest distance of a visible non-selected token (``inf`` if none); ``False`` and 0 where
    ``t < N + 1`` (:func:`attn_lib.metrics.separability.separation` flags those rows; its callers mask them). The
    tests compare the excesses as ``separation`` does."""
    H, L = alpha.shape[0], alpha.shape[1]
    sep, rho = np.zeros((H, L, N), dtype=np.bool_), np.zeros((H, L))
    _threads_call(
        _sep_prefix,
        threads,
        np.ascontiguousarray(alpha),
        np.ascontiguousarray(G),
        np.ascontiguousarray(values),
        np.ascontiguousarray(order, np.int64),
        np.ascontiguousarray(t, np.int64),
        int(N),
        sep,
        rho,
    )
    return sep, rho


def running_min_sq(G, threads: int | None = None):
    """``min_{j < k <= c} ||x_j - x_k||^2`` for every column ``c`` (0 for ``c = 0``), per head: ``(H, L)``, from the
    Gram matrix ``(H, L, L)``."""
    out = np.zeros((G.shape[0], G.shape[1]))
    _threads_call(_running_min, threads, np.ascontiguousarray(G), out)
    return out


def sens_rows(x, v, t, temperatures, eps_values, threads: int | None = None):
    """Finite-difference sensitivity per ``(T, eps, head, row)`` (Algorithm 5), float64.

    ``x`` ``(H, R, Lx)`` logits of the rows, ``v`` the unit directions of the same shape, ``t`` ``(R,)`` the number
    of visible tokens of each row (row ``i`` sees columns ``0..t_i-1``). Rows with ``t < 2`` stay 0. Returns
    ``(nT, nE, H, R)``. The difference of the two softmaxes is formed without cancellation, as
    :func:`attn_lib.metrics.sensitivity.softmax_change` does (``expm1``/``log1p`` from the row maximum's token);
    the weights' exponentials by :func:`_exp_nonpos_py` (relative error below 3e-15 above ``e^-40``).
    """
    H, R = x.shape[0], x.shape[1]
    invT = 1.0 / np.asarray(temperatures, dtype=np.float64)
    eps = np.asarray(eps_values, dtype=np.float64)
    out = np.zeros((len(invT), len(eps), H, R))
    _threads_call(
        _sens_rows,
        threads,
        np.ascontiguousarray(x, np.float64),
        np.ascontiguousarray(v, np.float64),
        np.ascontiguousarray(t, np.int64),
        invT,
        eps,
        out,
    )
    return out


def log_sums(x, last, temperatures, threads: int | None = None):
    """``(2, nT, H, R)``: per temperature ``T``, ``log sum_i e_i`` and ``log sum_i e_i^2``, ``e_i = exp(x_i / T)``,
    over the columns ``0..last[r]`` of each row ``r`` of ``x`` ``(H, R, L)``, float64 with entries ``<= 0`` (``-inf``
    adds nothing; ``-inf`` out where every term is 0). Exponentials by :func:`_exp_nonpos_py` (relative error below
    3e-15 above ``e^-40``, the largest term ``e^0``)."""
    temps = np.asarray(temperatures, dtype=np.float64)
    out = np.empty((2, len(temps), x.shape[0], x.shape[1]))
    width = np.asarray(last, dtype=np.int64) + 1
    _threads_call(_log_sums, threads, np.ascontiguousarray(x, np.float64), width, temps, out)
    return out


def d1_cummax(G, order, t, N: int, threads: int | None = None):
    """``(d_1, max_norm)`` of Theorem 1(a) per (head, row), each ``(H, L)`` float64, for a prefix-masked layer with
    its top-``N`` ``order``: the running-maximum method of :func:`attn_lib.metrics._d1_and_norm` (``O(L^2)`` per head
    plus ``O(N)`` per row), for large ``N``. Zero where ``t < N + 1``."""
    H, L = G.shape[0], G.shape[1]
    d1, mx = np.zeros((H, L)), np.zeros((H, L))
    _threads_call(
        _d1_cummax,
        threads,
        np.ascontiguousarray(G),
        np.ascontiguousarray(order, np.int64),
        np.ascontiguousarray(t, np.int64),
        int(N),
        d1,
        mx,
    )
    return d1, mx


def crossing_rows(a, vis, rank, norms, sdotx, zdotx, zz, s2, t, n_values, threads: int | None = None):
    """The per-row sums of :func:`attn_lib.metrics.crossing_metrics` (float64; any visibility): for ``R`` query rows
    and each ``N`` of ``n_values``, d~ (over the visible tokens of rank ``>= N``), E1 (``p = N / (t - 1)``, over the
    visible tokens) and ``A_out = sum alpha_i ||x_i||`` over the visible tokens of rank ``>= N``.

    ``a``, ``rank`` (descending-weight rank of each position), ``vis``, ``zdotx`` (``z . x_i``): ``(H, R, L)``;
    ``norms`` ``(H, L)``; ``sdotx`` ``(H, R, n, L)`` (``s_N . x_i``); ``zz`` ``(H, R)``; ``s2`` ``(H, R, n)``;
    ``t`` ``(R,)`` visible counts. Returns three ``(H, R, n)`` arrays, zero where ``t < N + 1``.
    """
    H, R = a.shape[0], a.shape[1]
    outs = [np.zeros((H, R, len(n_values))) for _ in range(3)]
    _threads_call(
        _crossing_rows,
        threads,
        np.ascontiguousarray(a, np.float64),
        np.ascontiguousarray(vis, np.bool_),
        np.ascontiguousarray(rank, np.int64),
        np.ascontiguousarray(norms, np.float64),
        np.ascontiguousarray(sdotx, np.float64),
        np.ascontiguousarray(zdotx, np.float64),
        np.ascontiguousarray(zz, np.float64),
        np.ascontiguousarray(s2, np.float64),
        np.ascontiguousarray(t, np.int64),
        np.ascontiguousarray(n_values, np.int64),
        *outs,
    )
    return outs


def row_metrics(vis, rank, asq, w, sx, wzx, zsq, ssq, t, n_values, threads: int | None = None):
    """The per-row sums of :func:`attn_lib.experiments.weights.row_metrics` (float64; any visibility): ``(d~, E1,
    N_s/N)``, each ``(H, R, C)`` for the ``C`` values of ``n_values``, zero where ``t < N + 1``.

    ``vis``, ``rank`` (descending-weight rank), ``asq`` (``||alpha_i x_i||^2``), ``w`` (the weights), ``wzx``
    (``alpha_i z . x_i``): ``(H, R, L)``; ``sx`` ``(H, R, C, L)`` (``s_N . x_i``); ``zsq`` ``(H, R)``; ``ssq``
    ``(H, R, C)``; ``t`` ``(H, R)`` float visible counts.
    """
    H, R = w.shape[0], w.shape[1]
    outs = [np.zeros((H, R, len(n_values))) for _ in range(3)]
    _threads_call(
        _row_metrics,
        threads,
        np.ascontiguousarray(vis, np.bool_),
        np.ascontiguousarray(rank, np.int64),
        *(np.ascontiguousarray(x, np.float64) for x in (asq, w, sx, wzx, zsq, ssq, t)),
        np.ascontiguousarray(n_values, np.int64),
        *outs,
    )
    return outs


def _tiny_inputs() -> dict:
    """A valid 1-head, 3-token prefix-masked layer with the dtypes the wrappers above pass to the kernels."""
    H, L = 1, 3
    t = np.array([[1, 2, 3]], dtype=np.int64)  # row r sees columns 0..r
    alpha = np.tril(np.ones((H, L, L))) / t[..., None]
    G = np.broadcast_to(np.eye(L), (H, L, L)).copy()
    values = np.eye(L)[None, :, :2].copy()
    order = np.broadcast_to(np.arange(L, dtype=np.int64), (H, L, L)).copy()
    zv = np.einsum("hrl,hlk->hrk", alpha, G)
    zz = np.einsum("hrk,hrk->hr", zv, alpha)
    rows = np.arange(L, dtype=np.int64)
    return dict(H=H, L=L, t=t, alpha=alpha, G=G, values=values, order=order, zv=zv, zz=zz, rows=rows)


def _warm_crossing(x: dict):
    """:func:`crossing_rows` on the rows of :func:`_tiny_inputs` (for :func:`warm_up`)."""
    a, L = x["alpha"], x["L"]
    vis = np.tril(np.ones((1, L, L), dtype=np.bool_))
    rank = np.broadcast_to(np.arange(L, dtype=np.int64), (1, L, L))
    n = np.array([1], dtype=np.int64)
    zeros = np.zeros((1, L, 1, L))
    return crossing_rows(a, vis, rank, np.ones((1, L)), zeros, x["zv"], x["zz"], zeros[..., 0], x["t"][0], n)


def _warm_row_metrics(x: dict):
    """:func:`row_metrics` on the rows of :func:`_tiny_inputs` (for :func:`warm_up`)."""
    a, L = x["alpha"], x["L"]
    vis = np.tril(np.ones((1, L, L), dtype=np.bool_))
    rank = np.broadcast_to(np.arange(L, dtype=np.int64), (1, L, L))
    n = np.array([1], dtype=np.int64)
    return row_metrics(vis, rank, a, a, np.zeros((1, L, 1, L)), a, x["zz"], np.zeros((1, L, 1)), x["t"] * 1.0, n)


def warm_up(callback=None, names=None) -> list[str]:
    """Compile (or load from numba's on-disk cache) every kernel now, on a tiny input with the argument types of
    real calls, so that a long run can show this step instead of pausing in its first layer.

    ``callback(name)`` is called after each kernel (e.g. to advance a progress bar). ``names``: only these kernels
    (a subset of :data:`KERNELS`; ``tools/warm_kernels.py`` compiles them in several processes at once). Returns the
    kernel names, in order.
    """
    if isinstance(names, str):
        raise ValueError(f"names must be a list of kernel names of {list(KERNELS)} (got the string {names!r})")
    wanted = KERNELS if names is None else tuple(names)
    unknown = sorted(set(wanted) - set(KERNELS))
    if unknown:
        raise ValueError(f"names must be kernels of {list(KERNELS)} (got {unknown})")
    x = _tiny_inputs()
    a, G, vals, order, zv, zz, t, rows = (x[k] for k in ("alpha", "G", "values", "order", "zv", "zz", "t", "rows"))
    steps = [
        ("scan_prefix", lambda: scan_prefix(a, G, order, zv, zz, t, rows, 1, 2, "L-1")),
        ("dist_prefix", lambda: dist_prefix(a, G, vals, order, zv, zz, t, 1, "L-1", with_d1=True)),
        ("mc_prefix", lambda: mc_prefix(a, G, vals, t, rows, np.zeros((x["L"], 2, 1), dtype=np.int64))),
        ("mc_scan_prefix", lambda: mc_scan_prefix(a, G, order[0][:, None, :], t, rows, 1, 2)),
        ("order_prefix", lambda: order_prefix(a, t, 2)),
        ("sep_prefix", lambda: sep_prefix(a, G, vals, order, t, 1)),
        ("running_min_sq", lambda: running_min_sq(G)),
        ("sens_rows", lambda: sens_rows(a, np.ones_like(a) / math.sqrt(3), t[0], [1.0], [0.1])),
        ("log_sums", lambda: log_sums(-a, t[0] - 1, [1.0])),
        ("d1_cummax", lambda: d1_cummax(G, order, t, 1)),
        ("crossing_rows", lambda: _warm_crossing(x)),
        ("row_metrics", lambda: _warm_row_metrics(x)),
    ]
    assert tuple(n for n, _ in steps) == KERNELS
    done = []
    for name, fn in steps:
        if name not in wanted:
            continue
        fn()
        done.append(name)
        if callback is not None:
            callback(name)
    return done
