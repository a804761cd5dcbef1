"""Jacobians of attention normalisers and the finite-difference sensitivity g(T, eps), on the last axis of ``logits``.

* :func:`jacobian`: ``J[..., i, j] = d alpha_i / d l_j`` (Reading the paper, §Notation "Gradient", §Lemma 2,
  §Corollary 3), analytic for softmax, top-k and the general family (Lemma 2), by autograd for the other normalisers.
* :func:`sensitivity`: the per-row ratio of Reading the paper, §The sensitivity metric (Algorithm 5 / Fig. 4), along
  the seeded unit directions of :func:`random_directions`.
* :func:`jacobian_norms`: spectral, entrywise and row norms of a batch of Jacobians (Reading the paper, §Corollary 3).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from . import _rows
from . import normalizers as _nz
from ._validation import MAX_DRAWS, check_int, check_positive, check_positive_list, check_seed

# random_directions: the seeded unit directions that sensitivity and attn_lib.metrics draw
__all__ = ["jacobian", "softmax_jacobian", "general_jacobian", "autograd_jacobian", "sensitivity", "jacobian_norms"]


def _to_tensor(x: Any, name: str = "logits", dtype: torch.dtype | None = None) -> tuple[torch.Tensor, bool]:
    was_numpy = isinstance(x, np.ndarray)
    t = _rows.real_tensor(x, name)
    if not isinstance(x, torch.Tensor):  # arrays and lists in float64
        t = t.to(torch.float64)
    elif not t.is_floating_point():
        t = t.to(torch.get_default_dtype())
    if dtype is not None:
        t = t.to(dtype)
    if t.dim() == 0:
        raise ValueError(f"{name} must have at least one dimension (got a scalar)")
    if t.shape[-1] == 0:
        raise ValueError(f"{name} must have at least one position along the last axis (got shape {tuple(t.shape)})")
    return t, was_numpy


def _out(t: torch.Tensor, was_numpy: bool):
    return t.detach().cpu().numpy() if was_numpy else t


def _resolve(name_or_fn, params: dict) -> tuple[Callable, str]:
    """``(normaliser, kind)``, ``kind`` one of :data:`attn_lib.normalizers.JACOBIANS` or ``"autograd"``."""
    if isinstance(name_or_fn, str):
        return _nz.get(name_or_fn, **params), _nz.spec(name_or_fn).jacobian or "autograd"
    if not callable(name_or_fn):
        raise ValueError(
            f"name_or_fn must be a normaliser name in {_nz.available()} or a callable (got {type(name_or_fn).__name__})"
        )
    if params:
        raise ValueError("extra params are only accepted with a normaliser name; bind them into the callable")
    if name_or_fn is _nz.softmax:
        return name_or_fn, "softmax"
    if getattr(name_or_fn, "name", None) == "topk" and isinstance(getattr(name_or_fn, "keywords", None), dict):
        return name_or_fn, "softmax"  # from normalizers.get("topk", k=...): softmax's form on the kept set
    if getattr(name_or_fn, "__name__", None) == "general" and hasattr(name_or_fn, "log_F"):
        return name_or_fn, "general"
    return name_or_fn, "autograd"


def softmax_jacobian(logits, temperature=1.0, mask=None):
    r"""Analytic softmax Jacobian :math:`J = (\mathrm{diag}\,\alpha - \alpha\alpha^\top)/T` (Reading the paper,
    §Corollary 3), (..., L, L), symmetric positive semidefinite; masked positions have zero rows and columns."""
    return _softmax_type_jacobian(_nz.softmax, logits, temperature, mask)


def _softmax_type_jacobian(f, logits, temperature, mask):
    r""":math:`(\mathrm{diag}\,\alpha - \alpha\alpha^\top)/T` with ``alpha = f(logits, T)`` (softmax, top-k)."""
    x, was_numpy = _to_tensor(logits)
    T = check_positive("temperature", temperature)
    a = f(x, T, dim=-1, mask=mask)
    return _out((torch.diag_embed(a) - a.unsqueeze(-1) * a.unsqueeze(-2)) / T, was_numpy)


def _log_F_of(f, z: torch.Tensor) -> torch.Tensor:
    """Elementwise ``log F(z)`` of a :func:`~attn_lib.normalizers.make_general` normaliser (torch or numpy valued F)."""
    theta = getattr(f, "theta", None)
    if getattr(f, "log_F", None) is not None:
        return _rows.call_F(f.log_F, z, theta, "log_F").to(z.dtype)
    return torch.log(_rows.call_F(f.F, z, theta, "F").to(z.dtype))


def _log_F_derivative(f, z: torch.Tensor) -> torch.Tensor:
    """Elementwise ``d/dz log F(z)``: by autograd when F is written in torch, else (numpy, detached) by a central
    difference in float64 with step ``1e-6 max(1, |z|)`` (relative error about 1e-10 for smooth F)."""
    zz = z.detach().clone().requires_grad_(True)
    with torch.enable_grad():
        try:
            lw = _log_F_of(f, zz)  # no gradient when F went through numpy
        except (TypeError, RuntimeError, ValueError):  # numpy on a tensor that requires grad
            lw = None
        if lw is not None and lw.requires_grad:
            (g,) = torch.autograd.grad(lw.sum(), zz, allow_unused=True)
            if g is not None:
                return g.detach()
    z64 = z.detach().to(torch.float64)
    h = 1e-6 * z64.abs().clamp(min=1.0)
    d = (_log_F_of(f, z64 + h) - _log_F_of(f, z64 - h)) / (2 * h)
    if not bool(torch.isfinite(d).all()):
        raise ValueError("F must be positive and finite near every visible logit (its log has no derivative there)")
    return d.to(z.dtype)


def general_jacobian(f, logits, temperature=1.0, mask=None):
    r"""Analytic Jacobian of the general normaliser (paper Eq. 3; Reading the paper, §Lemma 2; chapter 4,
    ``lem-jacobian``, reference :func:`attn_lib.theory.lemma2_jacobian`), tested by
    ``tests/test_jacobian.py::test_general_jacobian_lemma2``.

    .. math:: J_{ij} = \frac{F'(l_j)(\delta_{ij}-\alpha_i)}{S}
              = \big(\mathrm{diag}\,\alpha - \alpha\alpha^\top\big)\,\mathrm{diag}(w),\quad
              w_j = \frac{d}{dl_j}\log F(l_j/T) = \frac{F'(l_j/T)}{T\,F(l_j/T)}

    (the second form, using ``F'/S = alpha_j F'/F``, never divides by a tiny ``S``); ``f`` is made by
    :func:`attn_lib.normalizers.make_general`.
    """
    x, was_numpy = _to_tensor(logits)
    T = check_positive("temperature", temperature)
    a = f(x, T, dim=-1, mask=mask)
    z = _rows.scale(torch.where(torch.isfinite(x), x, torch.zeros_like(x)), T)
    w = _log_F_derivative(f, z) / T
    return _out((torch.diag_embed(a) - a.unsqueeze(-1) * a.unsqueeze(-2)) * w.unsqueeze(-2), was_numpy)


def autograd_jacobian(fn, logits, temperature=1.0, mask=None):
    """Jacobian (..., L, L) of any normaliser by autograd, one backward pass of ``sum_rows alpha_i`` per index ``i``
    (rows are independent, so its gradient is, row by row, ``d alpha_i / d l``)."""
    x, was_numpy = _to_tensor(logits)
    T = check_positive("temperature", temperature)
    L = x.shape[-1]
    xx = x.detach().clone().requires_grad_(True)
    with torch.enable_grad():
        y = fn(xx, temperature=T, dim=-1, mask=mask)
        if not isinstance(y, torch.Tensor) or y.shape != xx.shape:
            raise ValueError("name_or_fn must map a tensor of logits to a tensor of weights of the same shape")
        rows = []
        for i in range(L):
            g = None
            if y.requires_grad:
                (g,) = torch.autograd.grad(y[..., i].sum(), xx, retain_graph=i < L - 1, allow_unused=True)
            rows.append(torch.zeros_like(xx) if g is None else g)
    return _out(torch.stack(rows, dim=-2).detach(), was_numpy)


def jacobian(name_or_fn, logits, temperature=1.0, mask=None, **params):
    r"""Jacobian ``J[..., i, j] = d alpha_i / d l_j`` (..., L, L) of a normaliser (Reading the paper, §Notation,
    §Lemma 2 and §Corollary 3); masked positions have zero rows and columns, numpy in gives numpy out.

    Analytic for ``"softmax"``, ``"topk"`` with ``k=...`` (or those callables: top-k's is softmax's on the kept set,
    0 elsewhere, and at a tie of the ``k``-th and ``(k+1)``-th logit that of the side top-k keeps, as autograd gives)
    and ``"general"`` or a :func:`~attn_lib.normalizers.make_general` callable (Lemma 2, :func:`general_jacobian`);
    any other name (``params`` bound as in :func:`attn_lib.normalizers.get`) or callable ``f(logits, temperature=,
    dim=, mask=)`` by autograd (:func:`autograd_jacobian`; at a sparse map's support change the standard generalised
    Jacobian)."""
    f, kind = _resolve(name_or_fn, dict(params))
    if kind == "softmax":
        return _softmax_type_jacobian(f, logits, temperature, mask)
    if kind == "general":
        return general_jacobian(f, logits, temperature, mask)
    return autograd_jacobian(f, logits, temperature, mask)


#: Largest Gaussian draw of :func:`random_directions` cached (float64: 64 MiB). The last two are kept: a reproduction
#: asks for the same draws once per layer (Algorithm 5 and its raw-score twin), 1.2 s of the paper profile.
GAUSSIAN_CACHE_DRAWS = 1 << 23


def _draw_gaussian(shape: tuple, seed: int) -> torch.Tensor:
    return torch.randn(shape, generator=torch.Generator(device="cpu").manual_seed(seed), dtype=torch.float64)


_gaussian_cached = functools.lru_cache(maxsize=2)(_draw_gaussian)


def random_directions(shape, mask=None, seed=0, dtype=torch.float64, device=None) -> torch.Tensor:
    """Seeded random directions of ``shape`` (..., L), ``L >= 1``, of unit 2-norm over the visible positions (``mask``
    bool, ``True`` = visible; a row with none is all zeros): Gaussian draws from a CPU generator seeded with ``seed`` in
    ``[0, 2**64 - 1]`` (not depending on ``device``), zeroed where masked, normalised per row. The same seed gives the
    same directions for every ``T`` and ``eps`` (the book's appendix "Reading the paper")."""
    if isinstance(shape, (str, bytes)) or not hasattr(shape, "__iter__") or getattr(shape, "ndim", None) == 0:
        raise ValueError(f"shape must be a sequence of integers (..., L), e.g. (2, 5) (got {shape!r})")
    shape = tuple(check_int("shape", s, low=0) for s in shape)
    if len(shape) == 0 or shape[-1] == 0:
        raise ValueError(f"shape must have a non-empty last axis (got {shape})")
    if math.prod(shape) > MAX_DRAWS:
        raise ValueError(f"shape {shape} asks for {math.prod(shape)} random draws; at most {MAX_DRAWS} are allowed")
    seed = check_seed("seed", seed)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise ValueError(
            f"dtype must be a floating-point torch dtype such as torch.float64 (got {dtype!r}); "
            "unit directions do not exist in an integer dtype"
        )
    dev = None
    if device is not None:
        try:
            dev = torch.device(device)
            torch.empty(0, device=dev)  # CUDA/MPS requested but absent: AssertionError or RuntimeError from torch
        except Exception as exc:
            raise ValueError(
                f"device must be a device present on this machine, e.g. 'cpu' (got {device!r}: "
                f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__})"
            ) from None
    draw = _gaussian_cached if math.prod(shape) <= GAUSSIAN_CACHE_DRAWS else _draw_gaussian
    v = draw(shape, seed)  # possibly the cached draw: only read below (the division makes a new tensor)
    if mask is not None:
        v = torch.where(_rows.as_mask(mask, shape, "cpu", target="directions"), v, torch.zeros((), dtype=v.dtype))
    n = torch.linalg.vector_norm(v, dim=-1, keepdim=True)
    return (v / torch.where(n > 0, n, 1.0)).to(dtype=dtype, device=dev)


def sensitivity(
    logits, temperature, eps, *, normalizer="softmax", mask=None, seed=0, direction=None, dtype=torch.float64
):
    r"""Finite-difference sensitivity per row (Reading the paper, §The sensitivity metric; Algorithm 5, Fig. 4).

    .. math:: g_t(T,\varepsilon) = \frac{\|f((l_t+\varepsilon v_t)/T) - f(l_t/T)\|_2}{\varepsilon},
              \qquad \|v_t\|_2 = 1 \text{ over the visible positions of row } t

    ``logits`` (..., L), ``mask`` bool (True = visible; ``-inf`` logits count as masked). ``v`` comes from
    :func:`random_directions` with ``seed`` unless ``direction`` (same shape) is given. The caller averages over rows
    and takes the max over heads to get the paper's ``g``. Computed in ``dtype`` (float64: a float32 difference of
    nearby weights loses ~3 digits at ``eps=1e-3``). Returns shape ``logits.shape[:-1]``; a row with no visible
    position gives 0. Corrected bound: ``g <= min(1/(2T), sqrt(2)/eps)`` for softmax (§Corollary 3).
    """
    T, e = check_positive("temperature", temperature), check_positive("eps", eps)
    return _grid(logits, [T], [e], f"eps={eps!r} is", normalizer, mask, seed, direction, dtype)[0, 0]


def visible_unit_directions(v: torch.Tensor, visible: torch.Tensor) -> torch.Tensor:
    """``v`` with 0 where masked, checked finite and of unit 2-norm over the visible positions of every row with one."""
    v = torch.where(visible, v.to(visible.device), torch.zeros((), dtype=v.dtype, device=visible.device))
    if not bool(torch.isfinite(v).all()):
        raise ValueError("direction must be finite")
    norm = torch.linalg.vector_norm(v, dim=-1)
    bad = visible.any(-1) & ~((norm - 1).abs() <= 1e-6)
    if bool(bad.any()):
        raise ValueError(
            "direction must have unit 2-norm over the visible positions of each row (g divides by eps, so a "
            f"direction of norm r scales g by r); a row has norm {float(norm[bad].flatten()[0]):.6g}"
        )
    return v


def _sensitivity_inputs(logits, normalizer, mask, seed, direction, dtype):
    """Validated ``(xs, visible, v, f, was_numpy)``: logits (0 where masked), visibility, directions, normaliser."""
    x, was_numpy = _to_tensor(logits, dtype=dtype)
    f = _nz.get(normalizer) if isinstance(normalizer, str) else normalizer
    if not callable(f):
        raise ValueError(f"normalizer must be a name in {_nz.available()} or a callable")
    if not bool((torch.isfinite(x) | (x == -np.inf)).all()):
        raise ValueError("logits must be finite (or -inf at masked positions)")
    vis = x != -np.inf
    if mask is not None:
        vis = vis & _rows.as_mask(mask, x.shape, x.device)
    if direction is None:
        v = random_directions(x.shape, vis.cpu(), seed=seed, dtype=x.dtype, device=x.device)
    else:
        v, _ = _to_tensor(direction, "direction", dtype=x.dtype)
        if v.shape != x.shape:
            raise ValueError(f"direction must have the shape of logits {tuple(x.shape)} (got {tuple(v.shape)})")
        v = visible_unit_directions(v, vis)
    return torch.where(vis, x, 0.0), vis, v, f, was_numpy


def sensitivity_grid(
    logits, temperatures, eps_values, *, normalizer="softmax", mask=None, seed=0, direction=None, dtype=torch.float64
):
    r""":func:`sensitivity` at every ``(T, eps)`` of a grid, with the same direction ``v`` of each row throughout.

    The normaliser runs once per temperature on all logits together. ``temperatures``, ``eps_values``: non-empty
    sequences of numbers ``> 0``. Returns shape ``(len(temperatures), len(eps_values), *logits.shape[:-1])``.
    """
    Ts, es = check_positive_list("temperatures", temperatures), check_positive_list("eps_values", eps_values)
    return _grid(logits, Ts, es, f"eps_values={es!r} are", normalizer, mask, seed, direction, dtype)


def _grid(logits, Ts: list, es: list, too_large: str, normalizer, mask, seed, direction, dtype):
    """``g`` ``(len(Ts), len(es), ...)`` of checked temperatures and steps (``too_large`` starts the overflow error)."""
    xs, vis, v, f, was_numpy = _sensitivity_inputs(logits, normalizer, mask, seed, direction, dtype)
    stacked = torch.stack([xs] + [xs + e * v for e in es])  # (1 + E, ..., L)
    if not bool(torch.isfinite(stacked).all()):
        raise ValueError(f"{too_large} too large for these logits: l + eps v overflows {xs.dtype}")
    vis_all = vis.expand_as(stacked)
    e_t = torch.tensor(es, dtype=xs.dtype, device=xs.device).view(-1, *([1] * (xs.dim() - 1)))
    g = []
    for T in Ts:
        a = f(stacked, temperature=T, dim=-1, mask=vis_all)
        if not isinstance(a, torch.Tensor) or a.shape != stacked.shape:
            got = tuple(a.shape) if isinstance(a, torch.Tensor) else type(a).__name__
            raise ValueError(
                f"normalizer must return a tensor of weights with the shape of the logits {tuple(stacked.shape)} "
                f"(got {got})"
            )
        if not bool(torch.isfinite(a).all()):
            raise ValueError("normalizer returned non-finite weights (NaN or inf) for these logits")
        g.append(torch.linalg.vector_norm(a[1:] - a[:1], dim=-1) / e_t)
    return _out(torch.stack(g), was_numpy)


def jacobian_norms(J) -> dict:
    """Norms of a batch of Jacobians (..., L, L) (Reading the paper, §Corollary 3), each of shape ``(...)``:
    ``spectral`` (largest singular value), ``entrywise`` (max |J_ij|), ``row`` (max_i ||J_i,:||_2)."""
    Jt, was_numpy = _to_tensor(J, "J")
    if Jt.dim() < 2 or Jt.shape[-1] != Jt.shape[-2]:
        raise ValueError(f"J must have shape (..., L, L) (got {tuple(Jt.shape)})")
    if not bool(torch.isfinite(Jt).all()):
        raise ValueError("J must be finite (found NaN or inf); its norms are undefined")
    res = {
        "spectral": torch.linalg.matrix_norm(Jt, ord=2),
        "entrywise": Jt.abs().amax(dim=(-2, -1)),
        "row": torch.linalg.vector_norm(Jt, dim=-1).amax(dim=-1),
    }
    return {k: _out(v, was_numpy) for k, v in res.items()}
