"""The Monte-Carlo expectation in the critical-N scan: metrics.expected_distance_mc_scan (kernel, torch path, a
brute-force loop over theory.distance) and its use as form "mc" of experiments.critical_n."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest
import torch
from scipy.stats import ks_2samp

from attn_lib import experiments as E
from attn_lib import metrics as M
from attn_lib import theory as T
from attn_lib.experiments.critical import CriticalAnalysis
from attn_lib.metrics import montecarlo as MC

pytestmark = pytest.mark.numerical  # run twice by `make test`: with the accelerator, and --without-numba

needs_numba = pytest.mark.skipif(
    M._engine.accelerated("expected_distance_mc_scan") is None, reason="no accelerator (numba)"
)


def _layer(H=3, L=12, d=4, seed=0, mask=None):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(H, L, L, generator=g, dtype=torch.float64) * 2
    values = torch.randn(H, L, d, generator=g, dtype=torch.float64)
    if mask is None:
        mask = torch.ones(L, L, dtype=torch.bool).tril()
    return M.LayerData.from_logits(logits.masked_fill(~mask, -math.inf), values)


def _brute_force(ld, rows, perm, n_values):
    """Mean and standard error over the K orders of theory.distance with the prefix of each order as the subset."""
    H = ld.H
    mean = np.zeros((H, len(rows), len(n_values)))
    se = np.zeros_like(mean)
    for h in range(H):
        for ri, r in enumerate(rows):
            vis = ld.mask[0, r].numpy()
            cols = np.flatnonzero(vis)  # the visible tokens, in column order
            a = ld.alpha[h, r].numpy()[cols]
            x = ld.values[h].numpy()[cols]
            pos = {int(c): i for i, c in enumerate(cols)}
            for q, N in enumerate(n_values):
                if len(cols) < N + 1:
                    continue
                vals = [
                    T.distance(a, x, selected=np.array([pos[int(c)] for c in perm[ri, k, :N]]))
                    for k in range(perm.shape[1])
                ]
                mean[h, ri, q] = np.mean(vals)
                se[h, ri, q] = np.std(vals, ddof=1) / math.sqrt(len(vals))
    return mean, se


# expected_distance_mc_scan ---------------------------------------------------------------------------------------
class TestMCScan:
    def test_torch_path_equals_brute_force_over_theory(self):
        ld = _layer()
        rows = [0, 3, 7, 11]
        res = M.expected_distance_mc_scan(ld, n_max=11, rows=rows, n_samples=5, seed=3, engine="torch")
        perm = M.montecarlo.mc_permutations(ld.mask[0][rows], 5, 3).numpy()
        mean, se = _brute_force(ld, rows, perm, res.n_values)
        assert np.allclose(res.mean.numpy(), mean, rtol=1e-10, atol=1e-12)
        assert np.allclose(res.stderr.numpy(), se, rtol=1e-8, atol=1e-12)
        t = np.array(rows) + 1
        assert (res.valid.numpy() == (t[None, :, None] >= res.n_values[None, None, :] + 1)).all()

    @needs_numba
    def test_kernel_equals_torch_path(self):
        """Same orders in both engines; the kernel's float32 square roots cost a relative error below 1.2e-7."""
        ld = _layer(H=4, L=40, d=6, seed=1)
        a = M.expected_distance_mc_scan(ld, n_max=39, n_samples=6, seed=5, engine="numba")
        b = M.expected_distance_mc_scan(ld, n_max=39, n_samples=6, seed=5, engine="torch")
        assert (a.valid == b.valid).all() and a.valid.any()
        assert torch.allclose(a.mean, b.mean, rtol=1e-6, atol=1e-12)
        # the rounding of the standard error is relative to the distances, not to their (possibly tiny) spread
        assert ((a.stderr - b.stderr).abs() <= 1e-6 * b.mean + 1e-12).all()

    def test_prefixes_are_the_subsets_of_expected_distance_mc(self):
        """With all rows, the prefix of length N of each order is exactly the subset expected_distance_mc draws at
        N (same seed and K), so the two estimates agree to rounding."""
        ld = _layer(L=10)
        perm = M.montecarlo.mc_permutations(ld.mask[0], 7, 11)
        res = M.expected_distance_mc_scan(ld, n_max=9, n_samples=7, seed=11, engine="torch")
        t = tuple(ld.t[0].tolist())
        for N in (1, 4, 9):
            subsets = MC._mc_subsets(11, tuple(range(10)), t, 10, N, 7)
            for r in range(N, 10):  # valid rows: t = r + 1 >= N + 1
                for k in range(7):
                    assert set(perm[r, k, :N].tolist()) == set(subsets[r, k].tolist())
            one = M.expected_distance_mc(ld, N=N, n_samples=7, seed=11, engine="torch")
            assert torch.allclose(one.mean, res.mean[..., N - 1], rtol=1e-12, atol=1e-12)
            assert torch.allclose(one.stderr, res.stderr[..., N - 1], rtol=1e-10, atol=1e-12)

    def test_orders_put_the_visible_columns_first(self):
        mask = torch.rand(9, 9, generator=torch.Generator().manual_seed(2)) < 0.6
        mask[:, 0] = True
        perm = M.montecarlo.mc_permutations(mask, 4, 0)
        width = int(torch.where(mask, torch.arange(9), -1).max()) + 1
        assert perm.shape == (9, 4, width)
        for r in range(9):
            cols = set(torch.nonzero(mask[r]).flatten().tolist())
            for k in range(4):
                assert set(perm[r, k, : len(cols)].tolist()) == cols
                assert sorted(perm[r, k].tolist()) == list(range(width))

    def test_general_mask_torch_path_equals_brute_force(self):
        L = 9
        mask = torch.rand(L, L, generator=torch.Generator().manual_seed(4)) < 0.7
        mask[:, 2] = True
        ld = _layer(L=L, mask=mask)
        assert not ld.prefix
        rows = list(range(L))
        res = M.expected_distance_mc_scan(ld, n_max=L - 1, n_samples=4, seed=0)  # auto: torch (not a prefix mask)
        mean, _ = _brute_force(ld, rows, M.montecarlo.mc_permutations(ld.mask[0], 4, 0).numpy(), res.n_values)
        assert np.allclose(res.mean.numpy(), mean, rtol=1e-10, atol=1e-12)

    @pytest.mark.parametrize("engine", ["torch", pytest.param("numba", marks=needs_numba)])
    def test_a_later_range_continues_the_same_estimates(self, engine):
        ld = _layer(L=16)
        full = M.expected_distance_mc_scan(ld, n_max=15, n_samples=3, seed=2, engine=engine)
        part = M.expected_distance_mc_scan(ld, n_min=6, n_max=12, n_samples=3, seed=2, engine=engine)
        assert list(part.n_values) == list(range(6, 13))
        assert torch.allclose(part.mean, full.mean[..., 5:12], rtol=1e-12, atol=0)

    def test_identical_vectors_with_uniform_weights_give_d_tilde_exactly(self):
        """x_i = x and uniform weights: every N-subset has d~ = (t-N)(N-1)/t ||x||, the estimate has no noise."""
        H, L = 2, 8
        x = torch.tensor([3.0, 4.0], dtype=torch.float64)  # ||x|| = 5
        ld = M.LayerData.from_logits(
            torch.zeros(H, L, L, dtype=torch.float64).masked_fill(
                ~torch.ones(L, L, dtype=torch.bool).tril(), -math.inf
            ),
            x.expand(H, L, 2).clone(),
        )
        res = M.expected_distance_mc_scan(ld, n_max=L - 1, n_samples=4, seed=0)
        t = torch.arange(1, L + 1, dtype=torch.float64).view(1, L, 1)
        N = torch.arange(1, L, dtype=torch.float64).view(1, 1, -1)
        expect = torch.where(res.valid, (t - N) * (N - 1) / t * 5.0, torch.zeros(()))
        assert torch.allclose(res.mean, expect, rtol=1e-6, atol=1e-9)

    @pytest.mark.parametrize("bad", [0, -1, 1.5, "8", None])
    def test_rejects_a_bad_sample_count(self, bad):
        with pytest.raises(ValueError, match="n_samples"):
            M.expected_distance_mc_scan(_layer(), n_max=3, n_samples=bad)

    def test_rejects_a_bad_range_seed_and_engine(self):
        ld = _layer()
        with pytest.raises(ValueError, match="n_min"):
            M.expected_distance_mc_scan(ld, n_min=0, n_max=3)
        with pytest.raises(ValueError, match="n_max"):
            M.expected_distance_mc_scan(ld, n_min=4, n_max=3)
        with pytest.raises(ValueError, match="seed"):
            M.expected_distance_mc_scan(ld, n_max=3, seed=-1)
        with pytest.raises(ValueError, match="rows"):
            M.expected_distance_mc_scan(ld, n_max=3, rows=[12])
        with pytest.raises(ValueError, match="engine"):
            M.expected_distance_mc_scan(ld, n_max=3, engine="gpu")


# the critical-N scan with the Monte-Carlo form --------------------------------------------------------------------
class _FakeShared:
    """What _CriticalAnalysis.layer reads from a pass: the layer, its index and the per-layer memo."""

    def __init__(self, ld, index):
        self._ld = ld
        self.la = type("LA", (), {"layer": index})()

    def layer(self):
        return self._ld

    def get(self, key, fn):
        return fn()


def _analysis(lengths, **kw) -> CriticalAnalysis:
    """A critical-N analysis of the ``"mc"`` form on synthetic layers (``mc_samples`` 4 and seed 0 unless given)."""
    params = E.CriticalNParams(lengths=lengths, forms=["mc"], stage=max(lengths), **{"mc_samples": 4, **kw})
    return CriticalAnalysis(params, {"model": "synthetic", "text": "none", "device": "cpu"})


def _critical(layers, lengths, **kw):
    a = _analysis(lengths, **kw)
    for i, ld in enumerate(layers):
        a.layer(_FakeShared(ld, i))
    return a.finish()


def _reference_n_star(layers, L, K, seed, alpha=0.01):
    """First N with KS p >= alpha between the per-head row means of the top-N d~ (theory.distance) and of the
    brute-force Monte-Carlo estimate on the same orders; None if no N <= L - 1 passes."""
    rows = list(range(L))
    for N in range(1, L):
        a, b = [], []
        for ld in layers:
            perm = M.montecarlo.mc_permutations(ld.mask[0][:L], K, seed).numpy()
            mc, _ = _brute_force(ld, rows, perm, [N])
            for h in range(ld.H):
                top = [T.distance(ld.alpha[h, r, : r + 1].numpy(), ld.values[h, : r + 1].numpy(), N) for r in rows[N:]]
                a.append(np.mean(top))
                b.append(mc[h, N:, 0].mean())
        if ks_2samp(a, b).pvalue >= alpha:
            return N
    return None


def test_critical_mc_is_one_when_every_subset_has_the_same_distance():
    """Identical vectors and uniform weights: d~ of the top N equals the Monte-Carlo estimate exactly, so the two
    samples are equal and the first N passes."""
    H, L = 4, 12
    layers = []
    for i in range(3):
        x = torch.tensor([1.0 + i, 2.0], dtype=torch.float64)
        vals = x.expand(H, L, 2) * torch.arange(1, H + 1, dtype=torch.float64).view(H, 1, 1)
        logits = torch.zeros(H, L, L, dtype=torch.float64).masked_fill(
            ~torch.ones(L, L, dtype=torch.bool).tril(), -math.inf
        )
        layers.append(M.LayerData.from_logits(logits, vals))
    summary = E.critical_n_summary(_critical(layers, [12]))
    assert summary["n_star"].tolist() == [1] and not summary["censored"].any()


def test_critical_mc_matches_a_brute_force_ks_scan():
    """Random layers: the first passing N of the pipeline equals that of a loop over theory.distance,
    brute-force Monte Carlo on the same orders and scipy's KS test."""
    layers = [_layer(H=4, L=12, d=3, seed=s) for s in range(4)]
    trace = _critical(layers, [12], mc_samples=3, seed=7)
    summary = E.critical_n_summary(trace)
    n_ref = _reference_n_star(layers, 12, 3, 7)
    assert n_ref is not None and n_ref > 1  # the case is not trivial
    assert summary["n_star"].tolist() == [n_ref] and not summary["censored"].any()
    assert (trace["form"] == "mc").all() and trace["mc_rel_se"].between(0, np.inf).all()


def test_short_rows_and_the_strata_are_the_scans_of_their_row_groups():
    """``mc_short_samples``: the rows with at most ``mc_short_t`` visible tokens get their own scan with that many
    orders, the other rows one with ``mc_samples`` (each stratified with ``mc_stratify``); the per-head means and
    variances of the analysis are those of the two direct scans, bit for bit."""
    ld = _layer(H=3, L=14, d=3, seed=5)
    rows = torch.arange(14)
    an = _analysis([14], mc_samples=2, seed=4, mc_stratify=True, mc_short_t=6, mc_short_samples=7)
    mean, stderr = an._mc_scan(ld, rows, 1, 13)
    short = M.expected_distance_mc_scan(ld, n_max=13, rows=rows[:6], n_samples=7, seed=4, stratify=True)
    long = M.expected_distance_mc_scan(ld, n_max=13, rows=rows[6:], n_samples=2, seed=4, stratify=True)
    assert torch.equal(mean[:, :6], short.mean) and torch.equal(mean[:, 6:], long.mean)
    assert torch.equal(stderr[:, :6], short.stderr) and torch.equal(stderr[:, 6:], long.stderr)
    an.params = dataclasses.replace(an.params, mc_short_samples=0, mc_stratify=False)
    mean0, _ = an._mc_scan(ld, rows, 1, 13)
    assert torch.equal(mean0, M.expected_distance_mc_scan(ld, n_max=13, rows=rows, n_samples=2, seed=4).mean)


@pytest.mark.parametrize(
    "kw, name",
    [
        (dict(mc_stratify="yes"), "mc_stratify"),
        (dict(mc_short_t=-1), "mc_short_t"),
        (dict(mc_short_samples=-2), "mc_short_samples"),
        (dict(mc_short_samples=10**12), "mc_short_samples"),
    ],
)
def test_critical_n_rejects_bad_monte_carlo_options(kw, name):
    with pytest.raises(ValueError, match=name):
        E.CriticalNParams(lengths=[16], **kw)


def test_the_paper_profile_stratifies_and_gives_the_short_rows_more_orders():
    """What the paper profile's Monte-Carlo scan runs with (the standard errors it gives were measured in
    the history of benchmarks/README.md, issue 23's fifth round), and that the cache key changes with each option."""
    prof = E.PROFILES["paper"]
    handle = type("H", (), {"max_length": 2048, "n_heads": 4, "n_kv_heads": 4, "head_dim": 8})()
    params = prof.critical_n.fit(handle)
    assert params.mc_stratify and params.mc_short_t == 128 and params.mc_short_samples > params.mc_samples
    key = params.key_params()
    for change in (dict(mc_stratify=False), dict(mc_short_t=64), dict(mc_short_samples=8)):
        assert dataclasses.replace(params, **change).key_params() != key, change
    quick = E.PROFILES["quick"].critical_n.fit(handle).key_params()
    assert "mc_short_t" not in quick and quick["mc_stratify"] is False


@needs_numba
def test_the_kernel_checks_the_shape_of_its_stratum_tokens():
    from attn_lib.accel import kernels

    ld = _layer(H=2, L=8)
    args = (ld.alpha.numpy(), ld.gram.numpy(), M.montecarlo.mc_permutations(ld.mask[0][[3, 7]], 2, 0).numpy())
    t = torch.broadcast_to(ld.t, (2, 8)).numpy()
    with pytest.raises(ValueError, match=r"pick must have shape \(H, R\) = \(2, 2\)"):
        kernels.mc_scan_prefix(*args, t, np.array([3, 7]), 1, 2, pick=np.zeros((1, 2), dtype=np.int64))


def test_critical_n_rejects_a_bad_sample_count(tiny_gpt2):
    with pytest.raises(ValueError, match="mc_samples"):
        E.critical_n(tiny_gpt2, "some text " * 10, lengths=[16], mc_samples=0)


def test_critical_n_runs_the_mc_form_by_default(tiny_gpt2):
    trace = E.critical_n(tiny_gpt2, "War and peace. " * 20, lengths=[8, 16], mc_samples=4)
    assert set(trace["form"]) == {"e1", "e2", "mc"}
    mc = trace[trace["form"] == "mc"]
    assert mc["mc_rel_se"].notna().all() and trace.loc[trace["form"] != "mc", "mc_rel_se"].isna().all()
    summary = E.critical_n_summary(trace)
    assert isinstance(summary, pd.DataFrame) and set(summary["form"]) == {"e1", "e2", "mc"}


def _exact(ld, rows, n_values):
    """E[d~] by enumerating every N-subset of each row's visible tokens (theory.expected_distance_exact)."""
    a, X = ld.alpha.numpy(), ld.values.numpy()
    return np.array(
        [
            [[T.expected_distance_exact(a[h, r, : r + 1], X[h, : r + 1], N) for N in n_values] for r in rows]
            for h in range(ld.H)
        ]
    )


@pytest.mark.parametrize("engine", ["numba", "torch"])
def test_control_variate_is_unbiased_and_reports_its_standard_error(engine):
    """The control-variate estimator has the exact expectation (its mean over 120 seeds is within 4.5 standard errors
    of the enumerated E[d~] in every cell), the standard error it reports matches the spread of its estimates over
    seeds, and on this layer its spread is smaller than the plain estimator's."""
    if engine == "numba" and M._engine.accelerated("expected_distance_mc_scan") is None:
        pytest.skip("no accelerator (numba)")
    ld = _layer(H=2, L=10, d=3, seed=0)
    rows, n_values = [6, 9], list(range(1, 6))
    exact = _exact(ld, rows, n_values)
    out = {}
    for cv in (False, True):
        runs = [
            M.expected_distance_mc_scan(ld, n_max=5, rows=rows, n_samples=4, seed=s, engine=engine, control_variate=cv)
            for s in range(120)
        ]
        means = np.stack([r.mean.numpy() for r in runs])
        reported = np.sqrt(np.mean(np.stack([r.stderr.numpy() for r in runs]) ** 2, axis=0))
        out[cv] = (means, reported)
        assert all(r.control_variate is cv for r in runs)
    means, reported = out[True]
    spread = means.std(0, ddof=1)
    z = (means.mean(0) - exact) / (spread / math.sqrt(len(means)))
    assert np.abs(z).max() < 4.5
    assert np.all((reported > 0.7 * spread) & (reported < 1.4 * spread))
    assert spread.mean() < 0.5 * out[False][0].std(0, ddof=1).mean()


@needs_numba
@pytest.mark.parametrize("option, not_a_bool", [("control_variate", 1), ("stratify", "yes")])
def test_variance_reduction_engines_agree_and_flag_is_checked(option, not_a_bool):
    """Kernel (float32 roots) and torch path (float64) give the same control-variate and stratified estimates to
    1e-6; the flag must be True or False."""
    ld = _layer(H=3, L=24, d=5, seed=4)
    rows = torch.tensor([3, 11, 23])
    a = M.expected_distance_mc_scan(ld, n_max=12, n_min=2, rows=rows, n_samples=5, seed=7, **{option: True})
    b = M.expected_distance_mc_scan(
        ld, n_max=12, n_min=2, rows=rows, n_samples=5, seed=7, engine="torch", **{option: True}
    )
    assert torch.equal(a.valid, b.valid)
    assert torch.allclose(a.mean, b.mean, rtol=1e-6, atol=1e-9)
    assert torch.allclose(a.stderr, b.stderr, rtol=1e-5, atol=1e-8)
    with pytest.raises(ValueError, match=option):
        M.expected_distance_mc_scan(ld, n_max=3, **{option: not_a_bool})


@pytest.mark.parametrize("engine", ["numba", "torch"])
@pytest.mark.parametrize("cv", [False, True])
def test_stratified_estimator_is_unbiased_and_reports_its_standard_error(engine, cv):
    """Stratified on the largest weight (with or without the control variate): the mean over 120 seeds is within 4.5
    standard errors of the enumerated E[d~] in every cell, the reported standard error matches the spread over
    seeds, and the spread is below the plain estimator's with as many orders (2K: the plain spread at K over
    sqrt(2))."""
    if engine == "numba" and M._engine.accelerated("expected_distance_mc_scan") is None:
        pytest.skip("no accelerator (numba)")
    ld = _layer(H=2, L=10, d=3, seed=0)
    rows, n_values = [6, 9], list(range(1, 6))
    exact = _exact(ld, rows, n_values)
    out = {}
    for strat in (False, True):
        runs = [
            M.expected_distance_mc_scan(
                ld, n_max=5, rows=rows, n_samples=4, seed=s, engine=engine, control_variate=cv and strat, stratify=strat
            )
            for s in range(120)
        ]
        assert all(r.stratified is strat for r in runs)
        out[strat] = (
            np.stack([r.mean.numpy() for r in runs]),
            np.sqrt(np.mean(np.stack([r.stderr.numpy() for r in runs]) ** 2, axis=0)),
        )
    means, reported = out[True]
    spread = means.std(0, ddof=1)
    z = (means.mean(0) - exact) / (spread / math.sqrt(len(means)))
    assert np.abs(z).max() < 4.5
    assert np.all((reported > 0.7 * spread) & (reported < 1.4 * spread))
    assert spread.mean() < out[False][0].std(0, ddof=1).mean() / math.sqrt(2)


# ---- the KS tests of the critical-N scan: one vectorised ks_2samp per block of N ---------------------------------
def _ks_one_call_per_n(an, lo, hi, found):
    """The KS rows as one ``ks_2samp`` call per (L, N, sampling, form), stopping each trace at its first pass: the
    reference the vectorised :meth:`CriticalAnalysis._ks` is held to."""
    from scipy.stats import ks_2samp

    rows = []
    cat = {f: an._samples(f) for f in ["d_tilde", *an.forms]}
    cnt = np.concatenate([pl["blocks"][-1]["count"] for pl in an.per_layer], axis=0)
    for li, L in enumerate(an.lengths):
        for k, N in enumerate(range(lo, hi + 1)):
            if N > an.caps[L] or not (cnt[:, li, k] > 0).all():
                continue
            for sampling in cat["d_tilde"]:
                for f in an.forms:
                    if found.get((L, f, sampling)) is not None and an.stop_early:
                        continue
                    res = ks_2samp(cat["d_tilde"][sampling][:, li, k], cat[f][sampling][:, li, k])
                    rows.append((L, N, sampling, f, float(res.statistic), float(res.pvalue)))
                    if res.pvalue >= an.params.alpha and found.get((L, f, sampling)) is None:
                        found[(L, f, sampling)] = N
    return rows


@pytest.mark.parametrize("stop_early", [True, False])
def test_vectorised_ks_equals_one_call_per_n(stop_early):
    """Same rows, statistics, p-values, order and critical N as one ks_2samp call per N, with traces that pass at
    different N (and one that never passes), across blocks of N."""
    from attn_lib.experiments.critical import CriticalAnalysis

    H, lengths, n = 30, [40, 200], 150
    params = E.CriticalNParams(lengths=lengths, forms=("e1", "e2"), stage=n, stop_early=stop_early)
    an = CriticalAnalysis(params, {}, groups=np.repeat(np.arange(10), 3))
    rng = np.random.default_rng(0)
    d = rng.normal(size=(H, len(lengths), n))
    shift = np.linspace(4.0, 0.0, n)  # the forms approach d~ as N grows: the KS test passes somewhere
    e1 = d + shift + rng.normal(scale=0.1, size=d.shape)
    e2 = d + 3.0  # never passes
    count = np.ones((H, len(lengths), n))
    an.per_layer = [{"layer": 0, "H": H, "blocks": [{"count": count, "d_tilde": d, "e1": e1, "e2": e2}]}]
    found, found_ref = {}, {}
    got = [(r["L"], r["N"], r["sampling"], r["form"], r["statistic"], r["p_value"]) for r in an._ks(1, n, found)]
    want = _ks_one_call_per_n(an, 1, n, found_ref)
    assert got == want and found == found_ref
    assert any(v is not None and v > 64 for v in found.values())  # a pass beyond the first block of N
    assert "e2" not in {f for (_, f, _) in found}  # the trace that never passes ran to the limit


def test_per_length_means_equal_the_weighted_mean_over_every_row():
    """The scan's per-head means at each L (sums over that L's own rows) equal the 0/1-weighted mean over every row
    of the layer, the form they replaced, to 1e-13 relative (only the order of the sums differs)."""
    from attn_lib.experiments.critical import CriticalAnalysis

    g = torch.Generator().manual_seed(2)
    H, L = 3, 48
    logits = torch.randn(H, L, L, generator=g, dtype=torch.float64)
    causal = torch.ones(L, L, dtype=torch.bool).tril()
    ld = M.LayerData.from_logits(logits.masked_fill(~causal, -math.inf), torch.randn(H, L, 5, generator=g).double())
    lengths = [8, 16, 48]
    an = CriticalAnalysis(E.CriticalNParams(lengths=lengths, stage=L, crit_rows=6, mc_samples=3), {})
    out = an._scan_layer(ld, 1, L - 1)
    sc = M.topn_scan(ld, n_max=L - 1, n_min=1, p="L-1", rows=an.rows)
    mc = M.expected_distance_mc_scan(ld, n_max=L - 1, n_min=1, rows=an.rows, n_samples=3, seed=0)
    weights = (sc.valid[0].unsqueeze(0) & an.row_masks.unsqueeze(-1)).double()  # (nL, L, n)
    count = weights.sum(1).clamp(min=1)
    for f in ("d_tilde", "e1", "e2"):
        want = torch.einsum("hrn,lrn->hln", getattr(sc, f), weights) / count
        np.testing.assert_allclose(out[f], want.numpy(), rtol=1e-13, atol=0)
    full = torch.zeros(H, L, L - 1, dtype=torch.float64)
    full[:, an.rows] = mc.mean
    np.testing.assert_allclose(out["mc"], (torch.einsum("hrn,lrn->hln", full, weights) / count).numpy(), rtol=1e-13)
    assert (out["d_tilde"] > 0).any() and (out["count"] > 0).any()
