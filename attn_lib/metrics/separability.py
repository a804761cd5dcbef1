r"""Geometric separability (Definition, Theorem 2; Algorithm 4) for every head and row (Reading the paper,
§Separability)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .._validation import check_positive
from ._engine import choose, coarse_threads, run_blocks
from .layer import LayerData, as_layer, check_n, zero_invalid

__all__ = ["separability_metrics"]


@dataclass
class SeparabilityRows:
    """Per-(head, row) results of :func:`separability_metrics`; every tensor is ``(H, L)``, in the layer's dtype
    unless noted, and 0 where not valid (``delta`` excepted)."""

    N: int  #: the top-``N`` size
    valid: torch.Tensor  #: bool: ``t >= N + 1``
    fraction: torch.Tensor  #: ``N_s / N`` with ``r`` ↑ ``rho_min``
    flags: torch.Tensor  #: bool ``(H, L, min(N, L))``: whether the rank-``k`` selected token is separable
    lower: torch.Tensor  #: Theorem 2's lower bound (paper's form) at ``r = rho_min``
    upper: torch.Tensor  #: Theorem 2's upper bound (paper's form) at ``r = rho_min``
    r: torch.Tensor  #: the radius ``rho_min``
    delta: torch.Tensor  #: running minimum pairwise distance of the visible tokens


def unit_layer(layer: LayerData, M: float = 1.0) -> LayerData:
    """A new layer sharing ``layer``'s weights, mask and top-``N`` order, with every value vector scaled to norm
    ``M > 0`` (Assumption 1; zero vectors stay zero)."""
    M = check_positive("M", M)
    norms = torch.linalg.vector_norm(layer.values, dim=-1, keepdim=True)
    out = LayerData.__new__(LayerData)
    out.__dict__.update(layer.__dict__)
    out.values = M * layer.values / torch.where(norms > 0, norms, 1.0)
    out._gram = out._zdot = out._cummax = None
    return out


@coarse_threads
def running_min_distance(layer: LayerData) -> torch.Tensor:
    """``delta`` ``(H, L)``: the minimum pairwise distance among the tokens visible to each row (0 for rows with fewer
    than two), for prefix masks by a running minimum over rows, for other masks row by row."""
    H, L = layer.H, layer.L
    last = torch.broadcast_to(layer.last, (H, L)).clamp(min=0)
    impl = choose("running_min_distance", "auto", layer.kernels_apply)
    if impl is not None:  # min_{j < k <= c} ||x_j - x_k||^2 per column c, without (H, L, L) temporaries
        running = impl(layer)
        running[:, 0] = math.inf
        min_sq = running.gather(1, last)
    else:
        dist_sq = layer.gdiag.unsqueeze(-1) + layer.gdiag.unsqueeze(-2) - 2 * layer.gram
        below_diagonal = torch.ones(L, L, dtype=torch.bool, device=layer.device).tril_(-1)
        if layer.prefix:
            row_min = torch.where(below_diagonal, dist_sq, math.inf).amin(-1)  # (H, L): min over j < k, for each k
            # the min over pairs (j < k <= c) for each column c, read at each row's last visible column
            min_sq = torch.cummin(row_min, dim=-1).values.gather(1, last)
        else:
            visible_all = torch.broadcast_to(layer.mask, (H, L, L))
            min_sq = torch.empty(H, L, dtype=layer.dtype, device=layer.device)
            for r in range(L):  # general masks only (not used by the experiments)
                visible = visible_all[:, r]
                pairs = visible.unsqueeze(-1) & visible.unsqueeze(-2) & below_diagonal
                min_sq[:, r] = torch.where(pairs, dist_sq, math.inf).amin(dim=(-2, -1))
    return torch.where(torch.isfinite(min_sq), min_sq, 0.0).clamp(min=0).sqrt()


@coarse_threads
def separability_metrics(
    layer,
    values=None,
    N: int = 4,
    *,
    mask=None,
    M: float = 1.0,
    normalize: bool = True,
    delta: torch.Tensor | None = None,
    engine: str = "auto",
) -> SeparabilityRows:
    r"""``N_s/N`` with ``r`` ↑ ``rho_min`` (strict convention; each test on the excesses, :func:`separation`), token
    by token (``flags``), and Theorem 2's bounds at ``r = rho_min``.

    Valid rows: ``t >= N + 1``. The lower bound is clipped below at ``-1`` (anything ``<= 0`` is vacuous); a row
    with ``rho_min = 0`` gets ``-1``. ``M``: sphere radius of Assumption 1; ``normalize`` first puts every value vector
    on that sphere (Algorithm 4's "normalize"); ``delta`` ``(H, L)``: minimum pairwise distances (default
    :func:`running_min_distance` of the normalised layer). The accelerator is ``sep_prefix``.
    """
    ld, N, M = as_layer(layer, values, mask), check_n(N), check_positive("M", M)
    impl = choose("separability_metrics", engine, ld.kernels_apply)
    ld = unit_layer(ld, M) if normalize else ld
    valid = torch.broadcast_to(ld.t, (ld.H, ld.L)) >= N + 1
    delta = running_min_distance(ld) if delta is None else delta
    order = ld.order(min(N, ld.L))
    flags, rho_min = (impl or separation)(ld, order)
    flags = flags & valid.unsqueeze(-1)
    lower, upper = _theorem2_bounds(ld.alpha.gather(-1, order), delta, rho_min, N, M)
    rows = zero_invalid(valid, fraction=flags.sum(-1).to(ld.dtype) / N, lower=lower, upper=upper, r=rho_min)
    return SeparabilityRows(N=N, valid=valid, flags=flags, delta=delta, **rows)


def _theorem2_bounds(top_weights: torch.Tensor, delta, rho_min, N: int, M: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Theorem 2 (paper's form) at ``r = rho_min``: ``(lower, upper)`` ``(H, L)`` from the top-``N`` weights."""
    others = top_weights.sum(-1, keepdim=True) - top_weights  # beta_i = sum_{j != i} alpha_j
    others_sq = (top_weights * top_weights).sum(-1, keepdim=True) - top_weights * top_weights
    delta_c = delta.clamp(max=2 * M).unsqueeze(-1)
    xi = ((M * M - delta_c * delta_c / 2) * others * others + delta_c * delta_c / 2 * others_sq).clamp(min=0).sqrt()
    lower = torch.where(rho_min > 0, 1.0 - xi.sum(-1) / (rho_min.clamp(min=1e-300) * N), -1.0).clamp(min=-1.0)
    upper = torch.exp(-((xi - rho_min.unsqueeze(-1)).clamp(min=0) ** 2) / (2 * M * M)).mean(-1)
    return lower, upper


def separation(ld: LayerData, order: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(separable, rho)`` in row blocks (Algorithm 4): ``separable`` ``(H, L, n)``, whether each selected token has
    ``D_i = ||a_i - s|| < rho``; ``rho`` ``(H, L)``: ``rho_min``, the smallest ``D_j`` of a visible non-selected token
    (0, and every token flagged, where none: callers mask such rows). Each test compares the excesses ``e_i = D_i^2 -
    ||s||^2 = alpha_i^2 ||x_i||^2 - 2 alpha_i s . x_i``, formed without ``||s||^2``: exact even where ``D_i`` equals
    ``||s||`` to float64's resolution (tiny weights, low temperature; Reading the paper, §The ball test)."""
    separable = torch.zeros(order.shape, dtype=torch.bool, device=ld.device)
    rho_min = torch.zeros(ld.H, ld.L, dtype=ld.dtype, device=ld.device)

    def block(rows_block: torch.Tensor, width: int) -> None:  # consecutive rows that see at most ``width`` columns
        rows, alpha, visible, top, s, s_dot_x = ld.top_block(order, rows_block, width)
        sq_norms = (ld.values[:, :width] * ld.values[:, :width]).sum(-1)  # (H, W)
        excess = torch.addcmul(alpha * alpha * sq_norms[:, None, :], alpha, s_dot_x, value=-2.0)  # D_i^2 - ||s||^2
        selected = torch.zeros(alpha.shape, dtype=torch.bool, device=ld.device).scatter_(-1, top, True)
        least = torch.where(visible & ~selected, excess, math.inf).amin(-1)  # (H, B); inf: no such token
        separable[:, rows] = excess.gather(-1, top) < least.unsqueeze(-1)
        rho = (least + (s * s).sum(-1)).clamp_(min=0).sqrt_()
        rho_min[:, rows] = torch.where(torch.isfinite(least), rho, 0.0)

    run_blocks(block, ld.blocks(per_row=2))
    return separable, rho_min
