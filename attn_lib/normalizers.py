"""Attention normalisers behind one interface (Reading the paper, §Notation, Eq. 2-3; the remedies of §Open questions).

Every normaliser is ``f(logits, temperature=1.0, dim=-1, mask=None, **params) -> weights``, acting along ``dim``:

* ``logits``: a torch tensor, numpy array (numpy in, numpy out) or nested list, with any leading batch dimensions.
* ``temperature``: ``T > 0``; every normaliser acts on ``z = l / T`` (the paper's Eq. 2 for softmax).
* ``mask``: optional bool, broadcastable to ``logits``, ``True`` = *visible* (causal: row ``t`` sees ``1..t``).
  Invisible positions, and ``-inf`` logits, get weight exactly ``0`` and do not count in ``n`` (the number of visible
  positions used by ``ssmax`` and ``sigmoid``). A fully masked row is all zeros, by convention (formulas undefined).
* Visible logits must be finite (``NaN`` or ``+inf`` raise ``ValueError``).

Rows sum to one for ``softmax``, ``general``, ``sparsemax``, ``entmax15``, ``entmax_alpha``, ``ssmax``, ``topk``; not
for ``softmax1`` (sum < 1), ``sigmoid`` (any sum in (0, n)), ``softpick`` (sum <= 1, can be 0), ``sa_softmax`` (<= 1).

Stability: exponentials are taken after subtracting the row maximum; the sparse maps run on shifted logits clipped
below at a value provably outside the support (the output is unchanged). Every normaliser is finite for ``T`` in
``[1e-4, 1e4]`` and logits up to ``±1e4`` in float32 and float64.

The registry holds one :class:`Normalizer` entry per normaliser (:func:`register`); every list of names elsewhere is
read from it (:func:`available`); :func:`get` looks a normaliser up by name, :func:`spec` gives its entry.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math
from collections.abc import Callable
from typing import Any

import torch

from . import _rows
from ._validation import check_bool, check_choice, check_finite, check_int, check_positive

# each normaliser (softmax, general, sparsemax, ...) is an entry of the registry: get(name), or the function itself
__all__ = ["Normalizer", "register", "unregister", "spec", "available", "get"]

#: A normaliser's callable: ``f(logits, temperature=1.0, dim=-1, mask=None, **params) -> weights``.
NormalizerFn = Callable[..., Any]


# ---------- softmax and the general family ----------
def softmax(logits, temperature=1.0, dim=-1, mask=None):
    r"""Softmax with temperature (paper Eq. 2; Reading the paper, §Notation), computed with the row maximum subtracted.

    .. math:: \alpha_j = \frac{e^{l_j/T}}{\sum_{k\,\text{visible}} e^{l_k/T}}

    Reference: Vaswani et al. 2017, arXiv:1706.03762; the paper's Eq. (2) with ``T = sqrt(d)`` typical.
    """
    x, visible, T, was_numpy, dim = _rows.prepare(logits, temperature, dim, mask)
    # z <= 0 at visible positions, no overflow for any finite input (its row maximum 0 is subtracted again: exact)
    out = _rows.masked_softmax_lastdim(_rows.scale(x - _rows.row_max(x, visible), T), visible, shifted=True)
    return _rows.finish(out, visible, dim, was_numpy)


def _log_softplus(z: torch.Tensor) -> torch.Tensor:
    """``log(softplus(z))`` without underflow: equals ``z`` (to rounding) for very negative ``z``."""
    sp = torch.nn.functional.softplus(z)
    safe = torch.where(z > -30, sp, torch.ones_like(sp))
    return torch.where(z > -30, torch.log(safe), z + torch.log1p(-0.5 * torch.exp(torch.clamp(z, max=-30))))


def _check_F(F: Any, log_F: Any, theta: Any) -> None:
    """``F``/``log_F`` must be callables (or None); ``theta`` needs one of them (the default softplus has none)."""
    for name, f in (("F", F), ("log_F", log_F)):
        if f is not None and not callable(f):
            raise ValueError(f"{name} must be callable or None (got {type(f).__name__})")
    if theta is not None and F is None and log_F is None:
        raise ValueError(
            f"theta is a parameter of a user-supplied F or log_F (got theta={theta!r} without either); "
            "the default F = softplus takes no parameter"
        )


def general(logits, F=None, temperature=1.0, dim=-1, mask=None, theta=None, *, log_F=None):
    r"""General normaliser of the paper's Eq. (3) (Reading the paper, §Notation, §Lemma 1, §Lemma 2).

    .. math:: \alpha_j = \frac{F(l_j/T,\theta)}{\sum_{k\,\text{visible}} F(l_k/T,\theta)}

    ``F``: an elementwise, strictly positive function of a torch tensor, called as ``F(z)`` or ``F(z, theta)``. It
    must be finite and ``> 0`` at every visible position, else ``ValueError`` (``exp`` overflows and ``softplus``
    underflows in float32 for large ``|l|/T``). ``log_F`` (elementwise ``log F``), instead of or with ``F``, gives the
    stable ``softmax(log_F(l/T))``. Default: ``F = softplus`` (through a stable ``log softplus``). :func:`make_general`
    binds ``F``. Reference: Mudarisov et al. 2025, arXiv:2508.17821.
    """
    _check_F(F, log_F, theta)
    x, visible, T, was_numpy, dim = _rows.prepare(logits, temperature, dim, mask)
    z = _rows.scale_unshifted(x, visible, T, "general")
    if F is None and log_F is None:
        log_F = _log_softplus
    if log_F is not None:
        lw = _rows.call_F(log_F, z, theta, "log_F")
        if bool((visible & ~torch.isfinite(lw)).any()):
            raise ValueError("log_F must return finite values at every visible logit (F must be finite and > 0)")
        return _rows.finish(_rows.masked_softmax_lastdim(lw, visible), visible, dim, was_numpy)
    w = _rows.call_F(F, z, theta, "F")
    bad = visible & ~(torch.isfinite(w) & (w > 0))
    if bool(bad.any()):
        raise ValueError(
            "F must return finite values > 0 at every visible logit (F(l/T) was non-positive or non-finite at "
            f"l/T = {z[bad].flatten()[:3].tolist()}); pass log_F for a stable evaluation"
        )
    w = torch.where(visible, w, torch.zeros((), dtype=w.dtype, device=w.device))
    s = w.sum(dim=-1, keepdim=True)
    return _rows.finish(w / torch.where(s > 0, s, torch.ones_like(s)), visible, dim, was_numpy)


def make_general(F=None, *, log_F=None, theta=None) -> NormalizerFn:
    """Bind ``F`` (and/or ``log_F``, ``theta``) into a normaliser with the common signature.

    ``make_general(torch.exp)`` is softmax; ``make_general(lambda z: 1 + z**2)`` the rational family of Reading the
    paper, §Lemma 1. The result carries ``.F``, ``.log_F`` and ``.theta`` (for the analytic Lemma-2 Jacobian).
    """
    _check_F(F, log_F, theta)

    def f(logits, temperature=1.0, dim=-1, mask=None):
        return general(logits, F, temperature=temperature, dim=dim, mask=mask, theta=theta, log_F=log_F)

    f.F = F  # type: ignore[attr-defined]
    f.log_F = log_F if (log_F is not None or F is not None) else _log_softplus  # type: ignore[attr-defined]
    f.theta = theta  # type: ignore[attr-defined]
    f.__name__ = "general"
    f.__doc__ = general.__doc__
    return f


# ---------- sparse maps (entmax package) ----------
def _sparse_prepare(logits, temperature, dim, mask, floor: float, work_dtype: torch.dtype | None = None):
    """``(z, visible, was_numpy, dim, logits_dtype)``: logits shifted by the row max, scaled, clipped below at
    ``-floor`` (outside the support) and ``-floor`` where masked, computed in ``work_dtype`` if given."""
    x, visible, T, was_numpy, dim = _rows.prepare(logits, temperature, dim, mask)
    dtype = x.dtype
    x = x.to(work_dtype or dtype)
    z = _rows.scale(x - _rows.row_max(x, visible), T).clamp(min=-floor)
    z = torch.where(visible, z, torch.full((), -floor, dtype=z.dtype, device=z.device))
    return z, visible, was_numpy, dim, dtype


def sparsemax(logits, temperature=1.0, dim=-1, mask=None):
    r"""Sparsemax: Euclidean projection of ``l/T`` onto the probability simplex.

    .. math:: \alpha = \arg\min_{p\in\Delta}\|p - l/T\|_2^2 = [\,l/T - \tau\,]_+,\quad \sum_j\alpha_j = 1

    ``entmax.sparsemax`` of the shifted logits clipped below at ``-2`` (``tau >= z_max - 1``, so coordinates
    ``< z_max - 1`` are outside the support). Reference: Martins & Astudillo 2016, arXiv:1602.02068.
    """
    from entmax import sparsemax as _sm  # entmax: imported on first use of a sparse normaliser

    z, visible, was_numpy, dim, _ = _sparse_prepare(logits, temperature, dim, mask, floor=2.0)
    return _rows.finish(_sm(z, dim=-1), visible, dim, was_numpy)


def entmax15(logits, temperature=1.0, dim=-1, mask=None):
    r"""1.5-entmax (Tsallis alpha = 1.5).

    .. math:: \alpha_j = [\,z_j/2 - \tau\,]_+^2,\quad z = l/T,\ \tau \text{ such that } \textstyle\sum_j\alpha_j = 1

    ``entmax.entmax15`` (exact, sort-based) of the shifted logits clipped below at ``-3`` (coordinates ``< z_max - 2``
    are outside the support). Reference: Peters, Niculae & Martins 2019, arXiv:1905.05702.
    """
    from entmax import entmax15 as _e15  # entmax: imported on first use of a sparse normaliser

    z, visible, was_numpy, dim, _ = _sparse_prepare(logits, temperature, dim, mask, floor=3.0)
    return _rows.finish(_e15(z, dim=-1), visible, dim, was_numpy)


def entmax_alpha(logits, temperature=1.0, dim=-1, mask=None, alpha=1.5, n_iter=60):
    r"""alpha-entmax for ``alpha > 1`` by bisection (``entmax.entmax_bisect``).

    .. math:: \alpha_j = [\,(\alpha-1) z_j - \tau\,]_+^{1/(\alpha-1)},\quad z = l/T,\ \textstyle\sum_j\alpha_j = 1

    ``alpha -> 1`` is softmax, ``alpha = 2`` sparsemax. The shifted logits are clipped below at ``-(1/(alpha-1) + 1)``
    (outside the support) and bisected in float64. ``ValueError`` unless ``alpha`` is a finite number ``> 1``.
    Reference: Peters, Niculae & Martins 2019, arXiv:1905.05702.
    """
    from entmax import entmax_bisect  # entmax: imported on first use of a sparse normaliser

    a = check_positive("alpha", alpha)
    if not a > 1:
        raise ValueError(f"alpha must be a finite number > 1 (got {alpha!r}); alpha = 1 is softmax")
    n_iter = check_int("n_iter", n_iter, low=1, high=1000)  # float64 is resolved long before 1000 halvings
    # in float64: the floor 1/(alpha-1) + 1 is ~4.5e15 for alpha just above 1 (beyond float16)
    z, visible, was_numpy, dim, dtype = _sparse_prepare(
        logits, temperature, dim, mask, floor=1.0 / (a - 1.0) + 1.0, work_dtype=torch.float64
    )
    return _rows.finish(entmax_bisect(z, alpha=a, dim=-1, n_iter=n_iter).to(dtype), visible, dim, was_numpy)


# ---------- length-aware and unnormalised variants ----------
def ssmax(logits, temperature=1.0, dim=-1, mask=None, s=0.43):
    r"""Scalable-Softmax (SSMax); chapter 5, ``prop-ssmax-sharpens``, tested by
    ``tests/test_normalizers.py::test_ssmax_is_sharper_than_softmax_from_11_visible_tokens``.

    .. math:: \alpha_j = \frac{n^{s z_j}}{\sum_k n^{s z_k}} = \mathrm{softmax}\big((s\log n)\,z\big)_j,
              \quad z = l/T

    ``n``: the number of *visible* positions of the row (a causal row uses its own ``n = t``; ``n = 1`` gives 1).
    ``s > 0``: the per-head scale (learned in the original; default ``0.43``, the SSMax paper's Fig. 1 (project
    decision)). As ``L`` enters the map, Lemma 1's ``Theta(1/L)`` bound does not apply.
    Reference: Nakanishi 2025, "Scalable-Softmax Is Superior for Attention", arXiv:2501.19399.
    """
    s = check_positive("s", s)
    x, visible, T, was_numpy, dim = _rows.prepare(logits, temperature, dim, mask)
    n = _rows.count(visible, torch.float64).clamp(min=1)
    # s log n capped at the dtype's largest number: an infinite factor would make 0 * inf = NaN at the row maximum
    factor = (s * torch.log(n)).clamp(max=torch.finfo(x.dtype).max).to(x.dtype)
    z = torch.where(visible, _rows.scale(x - _rows.row_max(x, visible), T) * factor, x.new_zeros(()))
    return _rows.finish(_rows.masked_softmax_lastdim(z, visible, shifted=True), visible, dim, was_numpy)


def sa_softmax(logits, temperature=1.0, dim=-1, mask=None, variant="normalized"):
    r"""Self-Adjust Softmax (SA-Softmax), ``variant="normalized"`` (default):

    .. math:: \alpha_j = \frac{z_j - \min(z_{\min},0)}{\max(0,z_{\max}) - \min(z_{\min},0)}\,
              \mathrm{softmax}(z)_j,\quad z = l/T

    ``variant="plain"``: :math:`\alpha_j = z_j\,\mathrm{softmax}(z)_j` (weights scale like ``z``: may be negative).

    Max/min run over visible positions. The normalised factor is in ``[0, 1]``, computed from ``l`` (it is invariant
    to ``T``); when all visible logits are 0 it is 1 (plain softmax; project decision). Rows sum to ``<= 1``
    (normalised) or anything (plain). Reference: Zheng et al. 2025, "Self-Adjust Softmax", arXiv:2502.18277.
    """
    check_choice("variant", variant, ["normalized", "plain"])
    x, visible, T, was_numpy, dim = _rows.prepare(logits, temperature, dim, mask)
    p = _rows.masked_softmax_lastdim(_rows.scale(x - _rows.row_max(x, visible), T), visible, shifted=True)
    if variant == "plain":
        out = _rows.scale_unshifted(x, visible, T, "sa_softmax(variant='plain')") * p
    else:
        # halve before subtracting so that no difference of two finite numbers overflows
        h = x * 0.5
        lo = torch.clamp(-_rows.row_max(-h, visible, detach=False), max=0.0)
        hi = torch.clamp(_rows.row_max(h, visible, detach=False), min=0.0)
        den = hi - lo
        fac = torch.where(den > 0, (h - lo) / torch.where(den > 0, den, torch.ones_like(den)), torch.ones_like(x))
        out = fac.clamp(0.0, 1.0) * p
    return _rows.finish(out, visible, dim, was_numpy)


def softmax1(logits, temperature=1.0, dim=-1, mask=None):
    r"""Softmax off by one ("quiet softmax"): an implicit extra logit fixed at 0.

    .. math:: \alpha_j = \frac{e^{z_j}}{1 + \sum_k e^{z_k}},\quad z = l/T

    computed as ``exp(z_j - m) / (exp(-m) + sum_k exp(z_k - m))``, ``m = max(0, max_k z_k)``. Rows sum to
    ``1 - 1/(1 + sum_k e^{z_k}) < 1`` (a head may attend to nothing).
    Reference: E. Miller, "Attention Is Off By One" (2023, blog); also ``softmax_1`` in Flaxformer.
    """
    x, visible, T, was_numpy, dim = _rows.prepare(logits, temperature, dim, mask)
    # shift by M = max(0, max_k l_k) before scaling: z - m = (l - M) / T <= 0 and -m = -M / T never overflow
    M = torch.clamp(_rows.row_max(x, visible), min=0.0)
    e = torch.where(visible, torch.exp(_rows.scale(x - M, T)), torch.zeros((), dtype=x.dtype, device=x.device))
    return _rows.finish(e / (torch.exp(_rows.scale(-M, T)) + e.sum(dim=-1, keepdim=True)), visible, dim, was_numpy)


def sigmoid(logits, temperature=1.0, dim=-1, mask=None, bias=None):
    r"""Sigmoid attention with the ``-log n`` bias.

    .. math:: \alpha_j = \sigma(z_j + b),\quad b = -\log n,\quad z = l/T

    ``n``: the number of visible positions of the row (``bias`` fixes ``b`` instead). Each weight is in ``(0, 1)``;
    rows do **not** sum to one (about 1 for logits near 0). Reference: Ramapuram et al. 2024, "Theory, Analysis, and
    Best Practices for Sigmoid Self-Attention", arXiv:2409.04431.
    """
    x, visible, T, was_numpy, dim = _rows.prepare(logits, temperature, dim, mask)
    z = _rows.scale(x, T)
    if bias is None:
        b = -torch.log(_rows.count(visible, z.dtype).clamp(min=1))
    else:
        b = torch.tensor(check_finite("bias", bias), dtype=z.dtype, device=z.device)  # a bool is not a number
    return _rows.finish(torch.sigmoid(z + b), visible, dim, was_numpy)


def softpick(logits, temperature=1.0, dim=-1, mask=None, eps=1e-8):
    r"""Softpick (rectified softmax).

    .. math:: \alpha_j = \frac{\mathrm{ReLU}(e^{z_j} - 1)}{\sum_k |e^{z_k} - 1| + \epsilon},\quad z = l/T

    evaluated exactly with numerator and denominator multiplied by ``e^{-m}``, ``m = max(0, max_k z_k)``. Weights are 0
    for ``z_j <= 0``; rows sum to ``<= 1`` (0 for non-positive logits). ``eps > 0`` (``1e-8`` as in the reference code).
    Reference: Zuhri et al. 2025, "Softpick: No Attention Sink, No Massive Activations with Rectified Softmax",
    arXiv:2504.20966.
    """
    eps = check_positive("eps", eps)
    x, visible, T, was_numpy, dim = _rows.prepare(logits, temperature, dim, mask)
    # as in softmax1: shift by M = max(0, max_k l_k) before scaling, so no exponent overflows for any T
    M = torch.clamp(_rows.row_max(x, visible), min=0.0)
    em = torch.exp(_rows.scale(-M, T))
    d = torch.where(visible, torch.exp(_rows.scale(x - M, T)) - em, x.new_zeros(()))
    eps_t = min(eps, torch.finfo(x.dtype).max)  # an eps beyond the dtype's range would give inf * 0 = NaN
    den = d.abs().sum(dim=-1, keepdim=True) + eps_t * em
    den = torch.where(den > 0, den, torch.full_like(den, torch.finfo(x.dtype).tiny))
    return _rows.finish(torch.relu(d) / den, visible, dim, was_numpy)


# ---------- top-k ----------
def _check_k(k: Any) -> int:
    if k is None:
        raise ValueError("k must be given for topk: an integer >= 1 (e.g. get('topk', k=8))")
    return check_int("k", k, low=1)


def _topk_keep(x: torch.Tensor, visible: torch.Tensor, k: int) -> torch.Tensor:
    """Bool (..., L): the ``k`` largest visible entries of each row of ``x`` (last axis), lower index first on ties."""
    L = x.shape[-1]
    if k >= L:
        return visible.clone()
    key = torch.where(visible, x.detach(), torch.full((), -math.inf, dtype=x.dtype, device=x.device))
    # above the k-th largest value (an unsorted top-k: half the time at k = 256) all are kept; of the ties at it, the
    # lowest indices fill the places left (torch.topk promises no order among ties)
    kth = torch.topk(key, k, dim=-1, sorted=False).values.amin(dim=-1, keepdim=True)
    above, tied = key > kth, key == kth
    room = k - above.sum(dim=-1, keepdim=True)
    keep = above | (tied & (torch.cumsum(tied.to(torch.int32), dim=-1) <= room))
    return keep & visible


def topk(logits, temperature=1.0, dim=-1, mask=None, k=None):
    r"""Top-k attention: softmax over the ``k`` largest logits of each row, exactly 0 elsewhere.

    Chapter 7, ``prop-topk-floor``; tested by ``tests/test_topk.py::test_topk_largest_weight_is_at_least_one_over_k``.

    .. math:: \alpha_j = \frac{e^{z_j}\,[j \in K]}{\sum_{i \in K} e^{z_i}},\quad z = l/T,\quad
              K = \text{the } k \text{ largest visible } l_j

    ``k``: an integer ``>= 1``, required (``ValueError`` naming ``k``). A row with at most ``k`` visible positions (the
    early rows of causal attention) is plain softmax; at ties the lower index wins; the selection does not depend on
    ``T``. Off ties the Jacobian is softmax's on the kept set (:func:`attn_lib.jacobian.jacobian`). Reference: Gupta et
    al. 2021, "Memory-efficient Transformers via Top-k Attention", arXiv:2106.06899; recommended by the paper for ``L >>
    k`` (the book's appendix "Reading the paper").
    """
    k = _check_k(k)
    x, visible, T, was_numpy, dim = _rows.prepare(logits, temperature, dim, mask)
    keep = _topk_keep(x, visible, k)
    z = _rows.scale(x - _rows.row_max(x, visible), T)
    out = _rows.masked_softmax_lastdim(torch.where(keep, z, z.new_zeros(())), keep, shifted=True)  # the maximum is kept
    return _rows.finish(out, keep, dim, was_numpy)


# ---------- the registry: every list of names elsewhere is read from it ----------
#: The families of :attr:`Normalizer.family`.
FAMILIES = {
    "eq3": "F(z) / sum F(z) with a positive F, the paper's Eq. (3): Lemma 1 and Corollary 3 apply",
    "sparse": "a projection onto the simplex with exact zeros (sparsemax, entmax)",
    "length-aware": "the number of visible tokens enters the map",
    "top-k": "softmax over the k largest logits, exact zeros elsewhere",
    "unnormalised": "rows need not sum to one",
}

#: Analytic Jacobians: ``"softmax"``, ``(diag alpha - alpha alpha^T) / T`` of the own weights (top-k off ties), and
#: ``"general"``, Lemma 2's form (:func:`make_general`).
JACOBIANS = ("softmax", "general")


@dataclasses.dataclass(frozen=True)
class Normalizer:
    """One registered normaliser: ``name`` (an identifier), ``fn`` (in the common signature), ``family`` (a key of
    :data:`FAMILIES`), ``sums_to_one`` (every non-empty row), ``display`` (in prose and tables, e.g. ``"1.5-entmax"``),
    ``compared`` (in the book's comparisons and ``compare-normalizers``, so it must run without parameters),
    ``jacobian`` (one of :data:`JACOBIANS`; ``None``: autograd)."""

    name: str
    fn: NormalizerFn
    family: str
    sums_to_one: bool
    display: str
    compared: bool = True
    jacobian: str | None = None

    def __post_init__(self) -> None:
        if not (isinstance(self.name, str) and self.name.isidentifier()):
            raise ValueError(f"name must be an identifier such as 'scaled_softmax' (got {self.name!r})")
        if not callable(self.fn):
            raise ValueError(f"fn must be callable (got {type(self.fn).__name__})")
        check_choice("family", self.family, list(FAMILIES))
        check_choice("jacobian", self.jacobian, [*JACOBIANS, None])
        for flag in ("sums_to_one", "compared"):
            check_bool(flag, getattr(self, flag))
        if not (isinstance(self.display, str) and self.display.strip()):
            raise ValueError(f"display must be a non-empty string (got {self.display!r})")


_REGISTRY: dict[str, Normalizer] = {}
_BUILT_IN: frozenset[str] = frozenset()


def register(entry: Normalizer) -> Normalizer:
    """Add ``entry`` (whose ``name`` must be new) after every normaliser already registered, so that :func:`get`,
    :func:`available` and all that reads them see it; sets ``entry.fn.name = entry.name`` and returns ``entry``."""
    if not isinstance(entry, Normalizer):
        raise ValueError(f"entry must be an attn_lib.normalizers.Normalizer (got {type(entry).__name__})")
    if entry.name in _REGISTRY:
        raise ValueError(f"name {entry.name!r} is registered already; unregister it first")
    entry.fn.name = entry.name  # type: ignore[attr-defined]
    _REGISTRY[entry.name] = entry
    return entry


def unregister(name: str) -> Normalizer:
    """Remove the normaliser ``name`` added by :func:`register` and return its entry; built-in ones stay."""
    if name in _BUILT_IN:
        raise ValueError(f"name {name!r} is a built-in normaliser, which cannot be unregistered")
    added = [n for n in _REGISTRY if n not in _BUILT_IN]
    if name not in added:
        raise ValueError(f"name must be a normaliser added by register(); the added ones are {added} (got {name!r})")
    return _REGISTRY.pop(name)


def spec(name: str) -> Normalizer:
    """The registry entry (a :class:`Normalizer`) of the normaliser ``name``, one of :func:`available`."""
    check_choice("name", name, available())
    return _REGISTRY[name]


def available(**where) -> list[str]:
    """The names :func:`get` accepts, in registration order, read at every call; ``**where`` keeps the entries whose
    :class:`Normalizer` fields have these values, e.g. ``available(compared=True)``."""
    fields = [f.name for f in dataclasses.fields(Normalizer) if f.name not in ("name", "fn")]
    for key in where:
        check_choice("where", key, fields)
    return [n for n, e in _REGISTRY.items() if all(getattr(e, k) == v for k, v in where.items())]


def describe(names) -> str:
    """The display names of ``names`` as prose, e.g. ``"softmax, sparsemax and 1.5-entmax"`` (``""`` for none)."""
    shown = [spec(n).display for n in names]
    return ", ".join(shown[:-1]) + (" and " if len(shown) > 1 else "") + (shown[-1] if shown else "")


for _entry in (
    Normalizer("softmax", softmax, "eq3", True, "softmax", jacobian="softmax"),
    Normalizer("general", general, "eq3", True, "general F/ΣF (Eq. 3)", compared=False, jacobian="general"),
    Normalizer("sparsemax", sparsemax, "sparse", True, "sparsemax"),
    Normalizer("entmax15", entmax15, "sparse", True, "1.5-entmax"),
    Normalizer("entmax_alpha", entmax_alpha, "sparse", True, "α-entmax", compared=False),
    Normalizer("ssmax", ssmax, "length-aware", True, "SSMax"),
    Normalizer("sa_softmax", sa_softmax, "unnormalised", False, "SA-softmax"),
    Normalizer("softmax1", softmax1, "unnormalised", False, "softmax1"),
    Normalizer("sigmoid", sigmoid, "unnormalised", False, "sigmoid"),
    Normalizer("softpick", softpick, "unnormalised", False, "softpick"),
    Normalizer("topk", topk, "top-k", True, "top-k", compared=False, jacobian="softmax"),
):
    register(_entry)
_BUILT_IN = frozenset(_REGISTRY)
del _entry


def get(name: str, **params) -> NormalizerFn:
    """The normaliser ``name`` as ``f(logits, temperature=1.0, dim=-1, mask=None)``, with ``.name``; keyword
    ``params`` are bound, e.g. ``get("entmax_alpha", alpha=1.75)``, ``get("general", F=..., log_F=..., theta=...)``,
    ``get("topk", k=8)`` (``k`` is required and checked here: an integer ``>= 1``).
    """
    check_choice("name", name, available())
    if name == "general":
        f = make_general(params.pop("F", None), log_F=params.pop("log_F", None), theta=params.pop("theta", None))
        if params:
            raise ValueError(f"params for 'general' must be among F, log_F, theta (got {sorted(params)})")
        f.name = "general"  # type: ignore[attr-defined]
        return f
    base = _REGISTRY[name].fn
    if name == "topk":
        params["k"] = _check_k(params.get("k"))
    if not params:
        return base
    allowed = [p for p in inspect.signature(base).parameters if p not in ("logits", "temperature", "dim", "mask")]
    if unknown := [k for k in params if k not in allowed]:
        raise ValueError(f"params for {name!r} must be among {allowed} (got {unknown[0]!r})")
    f = functools.partial(base, **params)
    functools.update_wrapper(f, base)
    f.name = name  # type: ignore[attr-defined]
    return f
