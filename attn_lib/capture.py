"""Streaming capture of attention, layer by layer, through transformers' ``AttentionInterface``.

transformers 5.x hands every attention layer's query, key and value (post-projection; post-RoPE in Llama-style models), the mask and the
model's ``scaling`` to the function registered under ``config._attn_implementation``. attn_lib registers
``"attn_lib_capture"`` (with eager attention's mask builder), which:

1. computes the scores as eager attention does, ``matmul(query, repeat_kv(key)^T) * scaling + mask`` (bit-identical);
2. normalises them with the model's own softmax (in float32, cast back, as eager attention), or with a normaliser of
   :mod:`attn_lib.normalizers` at a temperature, which then *replaces* softmax in the live model (later layers see it);
3. hands a :class:`LayerAttention` to a callback and lets the tensors go: memory stays at one layer;
4. returns the attention output and the weights (``output_attentions=True`` still works).

With the default normaliser the weights are ``torch.equal`` to eager attention's for GPT-2 and Llama-family models in
float32. Not reproduced: GPT-2's optional ``reorder_and_upcast_attn`` (off in every released GPT-2), and GPT-2's softmax
in half precision (run in float32 here, as Llama does). The model's attention implementation is restored when the last
capture on it ends, also after an exception; captures from several threads each report to their own callback.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import torch

from . import _rows, normalizers
from ._validation import check_bool, check_int_list, check_positive
from .models.handle import resolve_dtype, text_config

__all__ = ["LayerAttention", "patched_attention", "capture_attention", "collect_attention"]

#: Name under which the capture function is registered in ``transformers.AttentionInterface``.
IMPLEMENTATION = "attn_lib_capture"


@dataclasses.dataclass
class LayerAttention:
    """What one attention layer computed, for every head (``B`` batch, ``H`` query heads, ``Lq`` queries, ``Lk`` keys,
    ``D`` head dimension): ``layer`` (0-based); ``logits`` ``(B, H, Lq, Lk)``, the scores the model normalises (``q.k``
    times the model's scaling, 1/8 for GPT-2 small, plus any additive bias; ``-inf`` where masked); ``mask``
    ``(B or 1, 1 or H, Lq, Lk)``, True = visible; ``weights`` ``(B, H, Lq, Lk)``, the weights the model used (0 where
    masked); ``values`` ``(B, H, Lk, D)``, expanded for grouped-query attention (query head ``h`` uses key/value head
    ``h // (H / H_kv)``); ``queries`` ``(B, H, Lq, D)``, ``keys`` ``(B, H, Lk, D)``, post-RoPE, before scaling (keys expanded like values); ``normalizer``,
    the name of what produced ``weights`` (``"model"``: the model's softmax) at ``temperature``."""

    layer: int
    logits: torch.Tensor
    mask: torch.Tensor
    weights: torch.Tensor
    values: torch.Tensor
    queries: torch.Tensor | None = None
    keys: torch.Tensor | None = None
    scaling: float = 1.0
    normalizer: str = "model"
    temperature: float = 1.0

    @property
    def n_heads(self) -> int:
        return int(self.weights.shape[1])

    @property
    def length(self) -> int:  # Lk
        return int(self.weights.shape[-1])

    def to(self, dtype: torch.dtype | None = None, device: torch.device | str | None = None) -> LayerAttention:
        """A copy with the float tensors converted (the mask stays bool)."""

        def conv(t):
            return None if t is None else t.to(device=device, dtype=dtype if t.is_floating_point() else None)

        names = ("logits", "mask", "weights", "values", "queries", "keys")
        return dataclasses.replace(self, **{name: conv(getattr(self, name)) for name in names})

    def __repr__(self) -> str:
        return (
            f"LayerAttention(layer={self.layer}, weights={tuple(self.weights.shape)}, "
            f"values={tuple(self.values.shape)}, dtype={self.weights.dtype}, normalizer={self.normalizer!r}, "
            f"temperature={self.temperature})"
        )


@dataclasses.dataclass
class _Session:
    callback: Callable[[LayerAttention], Any] | None
    normalizer: Callable | None
    normalizer_name: str
    temperature: float
    layers: frozenset[int] | None
    normalizer_layers: frozenset[int] | None
    output_dtype: torch.dtype | None
    keep_qk: bool
    stop_after: int | None
    calls: int = 0
    seen: set = dataclasses.field(default_factory=set)


_ACTIVE: contextvars.ContextVar[_Session | None] = contextvars.ContextVar("attn_lib_capture_session", default=None)


class _StopForward(Exception):
    """Raised inside the forward pass once every requested layer was captured (``stop_early=True``)."""


def _visibility(attention_mask, module, q_len: int, k_len: int, device, kwargs) -> tuple[torch.Tensor | None, Any]:
    """(visible bool mask or None for 'all visible', additive float mask or None)."""
    if attention_mask is None:
        is_causal = kwargs.get("is_causal")
        if is_causal or (is_causal is None and getattr(module, "is_causal", False)):  # key j visible from i + k - q
            return torch.ones(q_len, k_len, dtype=torch.bool, device=device).tril(k_len - q_len)[None, None], None
        return None, None
    if attention_mask.dtype == torch.bool:
        return attention_mask[..., :k_len], None
    add = attention_mask[..., :k_len]
    visible = add > torch.finfo(add.dtype).min / 2  # eager masks use finfo.min; -inf also counts as masked
    return visible, add


def _capture_attention_forward(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """The function registered as ``attn_lib_capture`` in ``transformers.AttentionInterface``."""
    from transformers.integrations.sdpa_attention import repeat_kv  # as in every model's eager code

    sess = _ACTIVE.get()
    if kwargs.get("s_aux") is not None or kwargs.get("sinks") is not None:
        raise NotImplementedError("attn_lib capture does not support attention sinks (e.g. gpt-oss)")
    key_r, value_r = (repeat_kv(t, query.shape[1] // key.shape[1]) for t in (key, value))
    if scaling is None:  # as eager attention: 1 / sqrt(head dim)
        scaling = query.size(-1) ** -0.5
    scores = torch.matmul(query, key_r.transpose(2, 3)) * scaling
    if (softcap := kwargs.get("softcap")) is not None:  # Gemma-2 style logit soft-capping, as in its eager code
        scores = torch.tanh(scores / softcap) * softcap
    visible, add = _visibility(attention_mask, module, *scores.shape[-2:], scores.device, kwargs)
    layer, wanted, replace = _route(sess, module)

    masked = scores if add is None else scores + add  # eager: scores + additive mask
    logits = _hide(masked, visible) if wanted else None
    if replace:
        weights = _replaced_weights(sess, masked if logits is None else logits, visible, layer)
    else:  # eager attention's softmax, operation for operation (in float32)
        if add is None and visible is not None:  # bool mask or is_causal without a mask: as eager's finfo.min mask
            masked = masked.masked_fill(~visible, torch.finfo(masked.dtype).min)
        weights = torch.nn.functional.softmax(masked, dim=-1, dtype=torch.float32)
    weights = torch.nn.functional.dropout(weights.to(value.dtype), p=dropout, training=module.training)
    attn_output = torch.matmul(weights, value_r).transpose(1, 2).contiguous()

    if wanted:
        record = LayerAttention(
            layer=int(layer),
            logits=logits,
            mask=_full_visibility(visible, logits),
            weights=weights,
            values=value_r,
            queries=query if sess.keep_qk else None,
            keys=key_r if sess.keep_qk else None,
            scaling=float(scaling),
            normalizer=sess.normalizer_name if replace else "model",
            temperature=sess.temperature if replace else 1.0,
        )
        _report(sess, record)
    return attn_output, weights


def _route(sess: _Session | None, module) -> tuple[Any, bool, bool]:
    """(this layer's index, whether it is reported to the callback, whether its normaliser is replaced)."""
    layer = getattr(module, "layer_idx", None)
    if sess is None:
        return layer, False, False
    if layer is None:
        layer = sess.calls
    sess.calls += 1
    wanted = sess.callback is not None and (sess.layers is None or layer in sess.layers)
    replace = sess.normalizer is not None and (sess.normalizer_layers is None or layer in sess.normalizer_layers)
    return layer, wanted, replace


def _full_visibility(visible: torch.Tensor | None, logits: torch.Tensor) -> torch.Tensor:
    """``visible``, or an all-True ``(1, 1, q_len, k_len)`` mask when every key is visible."""
    if visible is not None:
        return visible
    return torch.ones(1, 1, *logits.shape[-2:], dtype=torch.bool, device=logits.device)


def _hide(masked: torch.Tensor, visible: torch.Tensor | None) -> torch.Tensor:
    """The logits handed to a normaliser: ``-inf`` at invisible positions."""
    return masked if visible is None else masked.masked_fill(~visible, float("-inf"))


#: Elements per block of :func:`_replaced_weights` on the CPU (2 MiB of float32 stays in cache: 3-5x faster).
_CPU_BLOCK_ELEMENTS = 2**19


def _row_blocks(masked: torch.Tensor, visible: torch.Tensor | None) -> list[tuple[int, int, int]]:
    """``(first row, end row, width)`` of :func:`_replaced_weights`' blocks: one on accelerators; on the CPU, blocks of
    about :data:`_CPU_BLOCK_ELEMENTS`, each trimmed to the last key that any of its rows sees."""
    q_len, k_len = masked.shape[-2], masked.shape[-1]
    if masked.device.type != "cpu":
        return [(0, q_len, k_len)]
    rows = max(1, min(q_len, _CPU_BLOCK_ELEMENTS // max(1, masked[..., 0, :].numel())))
    if rows >= _ALIGN:
        rows -= rows % _ALIGN
    if visible is None:
        last = [k_len] * q_len
    else:
        seen = visible.reshape(-1, visible.shape[-2], visible.shape[-1]).any(0)  # (q or 1, k): any batch or head
        seen = torch.broadcast_to(seen, (q_len, k_len))
        # 1 + index of the last visible key of each row (0 for a row that sees nothing)
        last = torch.where(seen.any(-1), k_len - seen.flip(-1).to(torch.int8).argmax(-1), 0).tolist()
    return [(s, min(q_len, s + rows), _aligned(max(last[s : s + rows]), k_len)) for s in range(0, q_len, rows)]


#: Block widths are multiples of this (or the whole row): a row cut after a multiple of 64 keys reduces in the same
#: order as the whole row (the trailing zeros only add 0 to each partial sum), one cut elsewhere does not.
_ALIGN = 64


def _aligned(width: int, k_len: int) -> int:
    return min(k_len, max(_ALIGN, -(-width // _ALIGN) * _ALIGN))


def _row_wise(fn, dtype: torch.dtype) -> bool:
    """Whether :func:`_replaced_weights` may call ``fn`` on blocks of rows: a built-in normaliser (bound parameters
    included) on float32 or float64 logits (in half precision entmax15's rounding depends on the row length)."""
    base = fn.func if isinstance(fn, functools.partial) else fn
    name = getattr(base, "__name__", "")
    return (
        dtype in (torch.float32, torch.float64)
        and name in normalizers.available()
        and name != "general"  # a user's F
        and getattr(normalizers, name, None) is base
    )


def _replaced_weights(sess: _Session, masked: torch.Tensor, visible, layer) -> torch.Tensor:
    """The session's normaliser on the logits, checked for shape and finiteness; where :func:`_row_wise`, on blocks of
    query rows (:func:`_row_blocks`), with the weights of one call on the whole layer bit for bit."""
    blocks = _row_blocks(masked, visible) if _row_wise(sess.normalizer, masked.dtype) else [(0, *masked.shape[-2:])]
    if len(blocks) == 1 and blocks[0][2] == masked.shape[-1]:
        return _checked_weights(sess, masked, visible, layer, masked.shape)
    out = torch.zeros(masked.shape, dtype=masked.dtype, device=masked.device)
    for s, e, w in blocks:
        # a mask of one row (..., 1, k) holds for every query row
        vis = None if visible is None else visible[..., :w] if visible.shape[-2] == 1 else visible[..., s:e, :w]
        out[..., s:e, :w] = _checked_weights(sess, masked[..., s:e, :w], vis, layer, masked.shape)
    return out


def _checked_weights(sess: _Session, masked: torch.Tensor, visible, layer, full_shape) -> torch.Tensor:
    logits = _hide(masked, visible)
    weights = sess.normalizer(logits, temperature=sess.temperature, dim=-1, mask=_full_visibility(visible, logits))
    if not isinstance(weights, torch.Tensor) or weights.shape != logits.shape:
        got = tuple(weights.shape) if isinstance(weights, torch.Tensor) else type(weights).__name__
        if isinstance(weights, torch.Tensor) and logits.shape != full_shape:
            got = f"{got} for the rows {tuple(logits.shape)} of a block"
        raise ValueError(
            f"normalizer {sess.normalizer_name!r} must return a tensor of weights with the shape of "
            f"the logits {tuple(full_shape)} (got {got}) in layer {layer}"
        )
    # one reduction first: the sum is finite unless a weight is NaN or inf (or it overflows: the elementwise check)
    if not bool(torch.isfinite(weights.sum())) and not bool(torch.isfinite(weights).all()):
        raise ValueError(
            f"normalizer {sess.normalizer_name!r} returned non-finite weights (NaN or inf) in layer {layer}; "
            "every later layer and the logits would be NaN"
        )
    return weights


def _report(sess: _Session, rec: LayerAttention) -> None:
    """Hand ``rec`` to the session's callback (in its output dtype); stop the pass once every layer was seen."""
    if sess.output_dtype is not None:
        rec = rec.to(dtype=sess.output_dtype)
    sess.callback(rec)
    sess.seen.add(rec.layer)
    if sess.stop_after is not None and sess.layers is not None and sess.seen >= sess.layers:
        raise _StopForward


@functools.cache
def register() -> str:
    """Register the capture function (and eager attention's mask builder) under :data:`IMPLEMENTATION`; idempotent."""
    from transformers import AttentionInterface  # lazy: heavy; keeps ``import attn_lib`` light
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface, eager_mask

    AttentionInterface.register(IMPLEMENTATION, _capture_attention_forward)
    if IMPLEMENTATION not in ALL_MASK_ATTENTION_FUNCTIONS._global_mapping:
        AttentionMaskInterface.register(IMPLEMENTATION, eager_mask)
    return IMPLEMENTATION


def _model_of(handle_or_model):
    return getattr(handle_or_model, "model", handle_or_model)


def _resolve_normalizer(normalizer, temperature: float) -> tuple[Callable | None, str]:
    if normalizer is None and temperature == 1.0:
        return None, "model"
    if normalizer is None:
        return normalizers.softmax, "softmax"
    if isinstance(normalizer, str):
        return normalizers.get(normalizer), normalizer
    if callable(normalizer):
        return normalizer, getattr(normalizer, "__name__", "custom")
    raise ValueError(f"normalizer must be None, a name from attn_lib.normalizers or a callable (got {normalizer!r})")


def _layer_set(name: str, layers, n_layers: int | None) -> frozenset[int] | None:
    """``layers`` (an int or an iterable; negative counts from the end) as a set of indices; None: every layer."""
    if layers is None:
        return None
    high = None if n_layers is None else n_layers - 1
    items = check_int_list(name, layers, low=-(n_layers or 10**9), high=high)
    return frozenset(v % n_layers if (v < 0 and n_layers) else v for v in items)


#: model id -> [captures in progress, the model's own attention implementation], guarded by _LOCK: the first capture
#: switches the model, the last one out restores it; each thread's session lives in the context variable _ACTIVE.
_USERS: dict[int, list] = {}
_LOCK = threading.Lock()


def _enter(model) -> None:
    with _LOCK:
        if id(model) not in _USERS:
            previous = model.config._attn_implementation
            model.set_attn_implementation(IMPLEMENTATION)
            _USERS[id(model)] = [0, previous]
        _USERS[id(model)][0] += 1


def _leave(model) -> None:
    with _LOCK:
        entry = _USERS[id(model)]
        entry[0] -= 1
        if entry[0] == 0:
            del _USERS[id(model)]
            model.set_attn_implementation(entry[1] if entry[1] not in (None, IMPLEMENTATION) else "eager")


@contextlib.contextmanager
def patched_attention(
    handle_or_model,
    callback: Callable[[LayerAttention], Any] | None = None,
    *,
    normalizer=None,
    temperature: float = 1.0,
    layers: Iterable[int] | int | None = None,
    normalizer_layers: Iterable[int] | int | None = None,
    output_dtype: torch.dtype | None = None,
    keep_qk: bool = True,
    stop_early: bool = False,
) -> Iterator[None]:
    """Inside it, every forward pass of the model (``generate`` too) runs the capture attention; the parameters are
    :func:`capture_attention`'s. The previous attention implementation is restored on exit."""
    model = _model_of(handle_or_model)
    temperature = check_positive("temperature", temperature)
    fn, fn_name = _resolve_normalizer(normalizer, temperature)
    if callback is not None and not callable(callback):
        raise ValueError(f"callback must be callable or None (got {callback!r})")
    c = text_config(model.config)
    n_layers = getattr(c, "num_hidden_layers", None) or getattr(c, "n_layer", None)
    sess = _Session(
        callback=callback,
        normalizer=fn,
        normalizer_name=fn_name,
        temperature=temperature,
        layers=_layer_set("layers", layers, n_layers),
        normalizer_layers=_layer_set("normalizer_layers", normalizer_layers, n_layers),
        output_dtype=None if output_dtype is None else resolve_dtype(output_dtype, name="output_dtype"),  # or "float64"
        keep_qk=check_bool("keep_qk", keep_qk),
        stop_after=1 if check_bool("stop_early", stop_early) else None,
    )
    register()
    _enter(model)
    token = _ACTIVE.set(sess)
    try:
        yield
    finally:
        _ACTIVE.reset(token)
        _leave(model)


def prepare_input_ids(handle, input_ids) -> torch.Tensor:
    """``input_ids`` (1-D or 2-D ints, non-empty, in the vocabulary and the context) as a 2-D LongTensor on the handle's
    device."""
    if isinstance(input_ids, (list, tuple)):
        try:
            input_ids = torch.tensor(input_ids)
        except (TypeError, ValueError, RuntimeError):
            raise ValueError(
                "input_ids must be a list of integer token ids (1-D) or of equal-length lists (2-D)"
            ) from None
    if not isinstance(input_ids, torch.Tensor):
        raise ValueError(f"input_ids must be a tensor or list of token ids (got {type(input_ids).__name__})")
    if input_ids.numel() == 0:  # before the dtype: torch.tensor([]) is a float tensor
        raise ValueError(f"input_ids must contain at least one token (got shape {tuple(input_ids.shape)})")
    if input_ids.is_floating_point() or input_ids.is_complex() or input_ids.dtype == torch.bool:
        raise ValueError(f"input_ids must hold integer token ids (got dtype {input_ids.dtype})")
    if input_ids.ndim == 1:
        input_ids = input_ids.unsqueeze(0)
    if input_ids.ndim != 2:
        raise ValueError(f"input_ids must be 1-D (length,) or 2-D (batch, length) (got shape {tuple(input_ids.shape)})")
    length = input_ids.shape[1]
    model = _model_of(handle)
    if (max_len := getattr(handle, "max_length", None)) and length > max_len:
        raise ValueError(
            f"length={length} exceeds the context of {getattr(handle, 'model_id', 'the model')}: "
            f"length must be in [1, {max_len}]; split the text into windows of at most {max_len} "
            "tokens (attn_lib.corpus.token_windows, or --windows in the CLI)"
        )
    vocab = getattr(model.get_input_embeddings(), "num_embeddings", None)
    lo, hi = int(input_ids.min()), int(input_ids.max())
    if lo < 0 or (vocab is not None and hi >= vocab):
        raise ValueError(f"input_ids must be token ids in [0, {vocab - 1 if vocab else '?'}] (got min {lo}, max {hi})")
    return input_ids.to(device=getattr(handle, "device", None) or next(model.parameters()).device, dtype=torch.long)


def _prepare_attention_mask(attention_mask, ids: torch.Tensor) -> torch.Tensor | None:
    """A ``(batch, length)`` 0/1 padding mask (tensor, array or nested list) as a LongTensor on ``ids``' device."""
    if attention_mask is None:
        return None
    what = f"a (batch, length) tensor or nested list of 0/1 (got {type(attention_mask).__name__})"
    attention_mask = _rows.to_tensor(attention_mask, f"attention_mask must be {what}")
    m = attention_mask
    if m.is_complex():
        raise ValueError(f"attention_mask must hold 0/1 or booleans (got dtype {m.dtype})")
    if m.ndim == 1:
        m = m.unsqueeze(0)
    if tuple(m.shape) != tuple(ids.shape):
        raise ValueError(
            f"attention_mask must have the shape of input_ids {tuple(ids.shape)} (batch, length) "
            f"(got {tuple(attention_mask.shape)})"
        )
    if m.device.type == "meta" or not bool(((m == 0) | (m == 1)).all()):
        raise ValueError("attention_mask must hold only 0 (padding) and 1 (token), or booleans")
    if not bool((m != 0).any(-1).all()):
        raise ValueError("attention_mask must keep at least one token (a 1) in every sequence of the batch")
    return m.to(device=ids.device, dtype=torch.long)


def capture_attention(
    handle,
    input_ids,
    callback: Callable[[LayerAttention], Any] | None = None,
    *,
    attention_mask: torch.Tensor | None = None,
    **options,
):
    """Run ONE forward pass of ``handle`` (a :class:`~attn_lib.models.ModelHandle` or a transformers model) on
    ``input_ids`` (``(length,)`` or ``(batch, length)``, length at most ``handle.max_length``), calling
    ``callback(LayerAttention)`` once per captured layer, in layer order (reduce to metrics to stay at one layer of
    memory). ``attention_mask``: ``(batch, length)``, 1 (or True) = token, 0 = padding. ``options``:

    - ``normalizer``, ``temperature``: ``None`` and ``1.0`` keep the model's own softmax (eager attention's weights
      exactly); a name from :mod:`attn_lib.normalizers` (or a callable ``f(logits, temperature=, dim=, mask=)``) and/or
      ``temperature != 1`` replace softmax in the live model, so later layers see it (``None``: softmax at ``T``);
    - ``layers``: the layers reported (default all; the others still run); ``normalizer_layers``: those replaced;
    - ``output_dtype``: the float dtype handed to ``callback`` (e.g. ``"float64"`` for the theory checks);
    - ``keep_qk``: include queries and keys; ``stop_early`` (with ``layers``): stop after the last of them, and return
      ``None`` instead of the model's output."""
    ids = prepare_input_ids(handle, input_ids)
    am = _prepare_attention_mask(attention_mask, ids)
    if options.get("stop_early") and options.get("layers") is None:
        raise ValueError("stop_early=True needs layers (otherwise every layer must run anyway)")
    with patched_attention(handle, callback, **options):
        try:
            with torch.no_grad():
                return _model_of(handle)(input_ids=ids, attention_mask=am, use_cache=False)
        except _StopForward:
            return None


def collect_attention(handle, input_ids, **kwargs) -> list[LayerAttention]:
    """All layers' :class:`LayerAttention` as a list (for small inputs; large ones should stream with a callback)."""
    out: list[LayerAttention] = []
    capture_attention(handle, input_ids, out.append, **kwargs)
    return out
