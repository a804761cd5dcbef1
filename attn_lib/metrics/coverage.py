r"""Multi-head coverage measured on a layer: how many heads it takes for the union of the heads' separable sets to
cover the top-``N`` of the head-averaged attention. Reading the paper, §Multi-head coverage.

For one layer and query row ``t`` (rows with ``t >= N + 1`` visible tokens):

* the **target** ``T`` is the top-``N`` of the row's head-averaged weights :math:`\bar\alpha=\frac1H\sum_h\alpha^h`;
* head ``h``'s **separable set** ``S_h`` is the set of its own top-``N`` tokens ``i`` with ``D_i < rho_min``, where
  ``D_i = ||alpha_i x_i - s||`` with unit-normalised value vectors ``x`` (:func:`~attn_lib.metrics.unit_layer`),
  ``s`` the head's top-``N`` context vector and ``rho_min`` the smallest ``D_j`` over visible non-selected ``j`` --
  the strict convention of Algorithm 4, so ``|S_h| / N`` is the ``N_s/N`` of
  :func:`~attn_lib.metrics.separability_metrics`;
* the coverage after ``k`` heads, added in a seeded random order ``pi`` per row, is
  :math:`c(k)=|T\cap(S_{\pi_1}\cup\dots\cup S_{\pi_k})|/N`; "heads needed" is the smallest ``k`` with ``c(k) = 1``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .._validation import check_seed, check_size
from ._engine import F64, coarse_threads
from .layer import as_layer, check_n, top_n_order
from .separability import separation, unit_layer

__all__ = ["coverage_metrics"]


@dataclass
class SeparableSets:
    """The separable tokens of every head and row (:func:`separable_sets`)."""

    N: int  #: the top-``N`` size
    order: torch.Tensor  #: ``(H, L, min(N, L))`` int64: each head's top-``N`` columns, largest weight first
    separable: (
        torch.Tensor
    )  #: ``(H, L, min(N, L))`` bool: ``order[h, t, k]`` is separable (``D < rho_min``) in a valid row
    valid: torch.Tensor  #: ``(H, L)`` bool: the row has ``t >= N + 1`` visible tokens


@dataclass
class CoverageRows:
    """Per-row multi-head coverage of one layer (:func:`coverage_metrics`); 0 / ``False`` in rows not ``valid``."""

    N: int  #: the top-``N`` size
    valid: torch.Tensor  #: ``(L,)`` bool: every head's row has ``t >= N + 1`` visible tokens
    target: torch.Tensor  #: ``(L, N)`` int64: top-``N`` columns of the head-averaged weights (the target set ``T``)
    hits: torch.Tensor  #: ``(H, L, N)`` bool: target token ``target[t, k]`` is in head ``h``'s separable set
    perms: torch.Tensor  #: ``(P, L, H)`` int64: the order in which the heads are added, per permutation and row
    coverage: torch.Tensor  #: ``(L, H)``: ``c(k)`` for ``k = 1..H`` heads (column ``k - 1``), mean over the orders
    needed: torch.Tensor  #: ``(P, L)`` int64: the smallest ``k`` with ``c(k) = 1`` per order; 0: all heads fall short
    fraction: torch.Tensor  #: ``(H, L)``: each head's own ``N_s/N`` (``|S_h| / N``)


@coarse_threads
def separable_sets(layer, values=None, N: int = 16, *, mask=None, normalize: bool = True) -> SeparableSets:
    r"""Each head's separable top-``N`` tokens (``N >= 1``): ``D_i < rho_min`` (the strict convention of Algorithm 4).
    ``normalize`` first scales every value vector to unit norm (Algorithm 4's "normalize"; ``False`` when the layer
    already is a :func:`~attn_lib.metrics.unit_layer`)."""
    ld, N = as_layer(layer, values, mask), check_n(N)
    ld = unit_layer(ld) if normalize else ld
    order = ld.order(min(N, ld.L))
    valid = torch.broadcast_to(ld.t, (ld.H, ld.L)) >= N + 1
    separable, _ = separation(ld, order)
    return SeparableSets(N=N, order=order, separable=separable & valid.unsqueeze(-1), valid=valid)


@coarse_threads
def coverage_metrics(
    layer, values=None, N: int = 16, *, mask=None, permutations: int = 8, seed: int = 0, normalize: bool = True
) -> CoverageRows:
    r"""Coverage ``c(k)`` (module doc) on each valid row (every head sees ``t >= N + 1`` tokens; the target's ties go to
    the lower index, among the tokens visible to every head), for ``permutations`` head orders per row drawn with
    ``torch.Generator().manual_seed(seed)`` (``argsort`` of uniform draws ``(P, L, H)``); ``normalize`` as for
    :func:`separable_sets`."""
    ld, N = as_layer(layer, values, mask), check_n(N)
    P = check_size("permutations", permutations, per_item=ld.L * ld.H)  # (P, L, H) orders
    seed = check_seed("seed", seed)
    sets = separable_sets(ld, N=N, normalize=normalize)
    H, L, n = ld.H, ld.L, sets.order.shape[-1]
    valid = sets.valid.all(0)  # (L,)
    target = top_n_order(ld.alpha.mean(0), n, ld.mask.all(0))  # (L, n), among the tokens visible to every head
    # hits[h, t, k]: target token k is one of head h's separable tokens
    same = sets.order.unsqueeze(-1) == target.unsqueeze(0).unsqueeze(-2)  # (H, L, n_head, n_target)
    hits = (same & sets.separable.unsqueeze(-1)).any(-2) & valid.view(1, L, 1)
    perms = torch.rand(P, L, H, generator=torch.Generator().manual_seed(seed), dtype=F64).argsort(-1).to(ld.device)
    rows = torch.arange(L, device=ld.device).view(1, L, 1)
    ordered = hits.permute(1, 0, 2)[rows, perms]  # (P, L, H, n): the heads' hits in the order they are added
    count = (ordered.cumsum(dim=2) > 0).sum(-1)  # (P, L, H): |T ∩ union of the first k sets|
    full = count >= N
    needed = torch.where(full.any(-1), full.to(torch.int64).argmax(-1) + 1, 0)
    return CoverageRows(
        N=N,
        valid=valid,
        target=target,
        hits=hits,
        perms=perms,
        coverage=torch.where(valid.unsqueeze(-1), (count.to(ld.dtype) / N).mean(0), 0.0),  # the mean c(k)
        needed=torch.where(valid.unsqueeze(0), needed, 0),
        fraction=sets.separable.sum(-1).to(ld.dtype) / N,
    )
