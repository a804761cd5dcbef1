"""The compiled CPU kernels (numba, :mod:`attn_lib.accel.kernels`) as an accelerator of :mod:`attn_lib.metrics`.

The core never imports this package. It is named in the entry-point group ``attn_lib.accelerators`` of
``pyproject.toml``; :mod:`attn_lib.metrics._engine` imports it the first time a metric looks up a faster
implementation, and on import it registers the functions below under the names of the metrics they implement
(:data:`IMPLEMENTATIONS`). Without numba the import fails with an ImportError, and every metric runs its torch code.

Each function takes what its metric passes (a float64 :class:`~attn_lib.metrics.LayerData` on CPU with prefix masks,
or the metric's prepared tensors), calls a kernel on numpy views and returns tensors: the same quantities as the
metric's torch code, which is their definition (``tests/test_accel.py`` holds every entry to it: 1e-9 relative,
1e-6 for the float32 square roots of the scans).
"""

from __future__ import annotations

import torch

from ..metrics._engine import F64, kernel_threads, large_ops, register, settings
from . import kernels

__all__ = ["IMPLEMENTATIONS", "kernels"]


def distance_metrics(ld, N: int, p, order: torch.Tensor, with_dmax: bool):
    """The six per-row sums of :func:`attn_lib.metrics.distance_metrics` (d~, E1, the Jensen gap, its crude bound,
    E2, ``||s||``) by :func:`kernels.dist_prefix`, and ``(d_1, max_norm)`` by a kernel when ``with_dmax`` (``None``
    when no row is valid: ``N >= L``)."""
    H, L = ld.H, ld.L
    if N >= L:
        return tuple(torch.zeros(H, L, dtype=F64) for _ in range(6)), None
    counts = torch.broadcast_to(ld.t, (H, L)).numpy()
    z_dot_x, z_sq = ld.zdot()
    # d_1 in the kernel costs N t per row: cheaper than the running-maximum kernel for small N
    d1_in_kernel = with_dmax and N <= settings.kernel_d1_max_n
    out = kernels.dist_prefix(
        ld.alpha.numpy(),
        ld.gram.numpy(),
        ld.values.numpy(),
        order.numpy(),
        z_dot_x.numpy(),
        z_sq.numpy(),
        counts,
        N,
        p,
        with_d1=d1_in_kernel,
        threads=kernel_threads(),
    )
    sums = tuple(torch.from_numpy(out[i]) for i in range(6))
    if d1_in_kernel:
        return sums, (torch.from_numpy(out[6]), torch.from_numpy(out[7]))
    if with_dmax:
        d1, max_norm = kernels.d1_cummax(ld.gram.numpy(), order.numpy(), counts, N, threads=kernel_threads())
        return sums, (torch.from_numpy(d1), torch.from_numpy(max_norm))
    return sums, None


def topn_scan(ld, n_min: int, n_max: int, p, rows: torch.Tensor):
    """d~, E1, E2 ``(H, R, n)`` of :func:`attn_lib.metrics.topn_scan` on the given rows by the fused kernel
    :func:`kernels.scan_prefix` (zero where ``t < N + 1``)."""
    order = ld.order(min(n_max, ld.L))
    z_dot_x, z_sq = ld.zdot()
    counts = torch.broadcast_to(ld.t, (ld.H, ld.L))
    outs = kernels.scan_prefix(
        ld.alpha.numpy(),
        ld.gram.numpy(),
        order.numpy(),
        z_dot_x.numpy(),
        z_sq.numpy(),
        counts.numpy(),
        rows.numpy(),
        n_min,
        n_max,
        p,
        threads=kernel_threads(),
    )
    return tuple(torch.from_numpy(out) for out in outs)


def expected_distance_mc(ld, rows: torch.Tensor, subsets: torch.Tensor):
    """``(mean, stderr)`` ``(H, R)`` of :func:`attn_lib.metrics.expected_distance_mc` on the given subsets
    ``(R, K, N)`` by :func:`kernels.mc_prefix`."""
    mean, stderr = kernels.mc_prefix(
        ld.alpha.numpy(),
        ld.gram.numpy(),
        ld.values.numpy(),
        torch.broadcast_to(ld.t, (ld.H, ld.L)).numpy(),
        rows.numpy(),
        subsets.numpy(),
        threads=kernel_threads(),
    )
    return torch.from_numpy(mean), torch.from_numpy(stderr)


def expected_distance_mc_scan(ld, n_min, n_max, rows, perm, control_variate=False, *, pick=None, first=True):
    """``(mean, stderr)`` ``(H, R, n)`` of :func:`attn_lib.metrics.expected_distance_mc_scan` on the orders ``perm``
    by :func:`kernels.mc_scan_prefix` (prefix masks: an order's first ``t`` entries are the row's columns
    ``0..t-1``); with ``pick`` ``(H, R)``, one stratum of the stratified estimator (that token first, or last with
    ``first=False``)."""
    mean, stderr = kernels.mc_scan_prefix(
        ld.alpha.numpy(),
        ld.gram.numpy(),
        perm.numpy(),
        torch.broadcast_to(ld.t, (ld.H, ld.L)).numpy(),
        rows.numpy(),
        n_min,
        n_max,
        threads=kernel_threads(),
        control_variate=control_variate,
        pick=None if pick is None else pick.numpy(),
        first=first,
    )
    return torch.from_numpy(mean), torch.from_numpy(stderr)


def separability_metrics(ld, order: torch.Tensor):
    """``(separable, rho_min)`` ``(H, L, N)``, ``(H, L)`` of :func:`attn_lib.metrics.separability.separation` by
    :func:`kernels.sep_prefix` (``rho_min`` 0 where no token is outside the selection)."""
    H, L, N = ld.H, ld.L, order.shape[-1]
    if N >= L:  # no valid row
        return torch.zeros(H, L, N, dtype=torch.bool), torch.zeros(H, L, dtype=F64)
    counts = torch.broadcast_to(ld.t, (H, L))
    separable, rho = kernels.sep_prefix(
        ld.alpha.numpy(), ld.gram.numpy(), ld.values.numpy(), order.numpy(), counts.numpy(), N, threads=kernel_threads()
    )
    rho = torch.from_numpy(rho)
    return torch.from_numpy(separable), torch.where(torch.isfinite(rho), rho, torch.zeros((), dtype=F64))


def running_min_distance(ld):
    """``min_{j < k <= c} ||x_j - x_k||^2`` ``(H, L)`` for every column ``c`` (0 for ``c = 0``) by
    :func:`kernels.running_min_sq`, for :func:`attn_lib.metrics.running_min_distance`."""
    return torch.from_numpy(kernels.running_min_sq(ld.gram.numpy(), threads=kernel_threads()))


def top_n_order(alpha: torch.Tensor, counts: torch.Tensor, n: int):
    """The top-``n`` order ``(H, L, n)`` of :func:`attn_lib.metrics.top_n_order` for rows ``r`` seeing columns
    ``0..counts[h, r]-1``, by :func:`kernels.order_prefix` (for :meth:`attn_lib.metrics.LayerData.order`)."""
    return torch.from_numpy(kernels.order_prefix(alpha.numpy(), counts.numpy(), n, threads=kernel_threads()))


def sensitivity_rows(x, directions, counts, temps, eps_list):
    """``g`` ``(nT, nE, H, R)`` of :func:`attn_lib.metrics.sensitivity_rows` by the fused kernel
    :func:`kernels.sens_rows` (rows ``i`` see columns ``0..counts[i]-1``)."""
    return torch.from_numpy(
        kernels.sens_rows(x.numpy(), directions.numpy(), counts.numpy(), temps, eps_list, threads=kernel_threads())
    )


def log_sums(x, last, temps):
    """``(2, nT, H, R)`` of :func:`attn_lib.experiments.sensitivity.log_sums` by :func:`kernels.log_sums`."""
    return torch.from_numpy(kernels.log_sums(x.numpy(), last, temps, threads=kernel_threads()))


def crossing_metrics(ns, *, a, v, vis, rank, norms, z_norm, a_norm, zdotx, t) -> dict:
    """The per-``N`` results of :func:`attn_lib.metrics.crossing_metrics` by :func:`kernels.crossing_rows`: ``s_N``
    for every ``N`` by two batched products, then one fused pass per (head, row, N)."""
    H, R, L = a.shape
    n_t = torch.as_tensor(ns).view(1, 1, -1, 1)
    top = (rank.unsqueeze(2) < n_t) & vis.unsqueeze(2)  # (H, R, n, L)
    with large_ops():  # two products over every row and N: worth the workers' threads
        s = ((a.unsqueeze(2) * top).view(H, R * len(ns), L) @ v).view(H, R, len(ns), -1)  # (H, R, n, d)
        sdotx = (s.view(H, R * len(ns), -1) @ v.transpose(1, 2)).view(H, R, len(ns), L)
    s2 = s.square().sum(-1)
    d_tilde, e1, a_out = kernels.crossing_rows(
        a.numpy(),
        vis.numpy(),
        rank.numpy(),
        norms.numpy(),
        sdotx.numpy(),
        zdotx.numpy(),
        z_norm.square().numpy(),
        s2.numpy(),
        t.numpy(),
        ns,
        threads=kernel_threads(),
    )
    valid = (t.view(-1, 1) >= torch.as_tensor(ns).view(1, -1) + 1).unsqueeze(0).expand(H, R, len(ns))
    zero = torch.zeros((), dtype=F64)
    return dict(
        valid=valid,
        d_tilde=torch.from_numpy(d_tilde),
        e1=torch.from_numpy(e1),
        s_norm=torch.where(valid, s2.sqrt(), zero),
        a_out=torch.from_numpy(a_out),
    )


def row_metrics(vis, rank, a_sq, w, sx, wzx, z_sq, s_sq, t, n_values):
    """``(d~, E1, N_s/N)`` ``(H, R, C)`` of :func:`attn_lib.experiments.weights.row_metrics` from its products, by
    :func:`kernels.row_metrics` (any visibility)."""
    sums = kernels.row_metrics(vis, rank, a_sq, w, sx, wzx, z_sq, s_sq, t, n_values)
    return tuple(torch.from_numpy(x) for x in sums)


def warm_up(bar) -> list[str]:
    """Compile (or load from numba's disk cache) every kernel now: :func:`kernels.warm_up` inside
    ``with bar(len(kernels.KERNELS)) as b``, calling ``b.update(1)`` after each kernel."""
    with bar(len(kernels.KERNELS)) as b:
        return kernels.warm_up(lambda name: b.update(1))


#: what this package registers, by metric name (``"warm_up"`` is not a metric; see
#: :data:`attn_lib.metrics._engine.ACCELERATED`).
IMPLEMENTATIONS = {
    "distance_metrics": distance_metrics,
    "topn_scan": topn_scan,
    "expected_distance_mc": expected_distance_mc,
    "expected_distance_mc_scan": expected_distance_mc_scan,
    "separability_metrics": separability_metrics,
    "running_min_distance": running_min_distance,
    "top_n_order": top_n_order,
    "sensitivity_rows": sensitivity_rows,
    "log_sums": log_sums,
    "crossing_metrics": crossing_metrics,
    "row_metrics": row_metrics,
    "warm_up": warm_up,
}

for _name, _fn in IMPLEMENTATIONS.items():
    register(_name, _fn)
