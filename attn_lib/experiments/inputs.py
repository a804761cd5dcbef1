"""The inputs of every experiment: a model handle and a text, the token window they read, and the labels every table
carries (``model``, ``text``, ``device``)."""

from __future__ import annotations

import warnings

import numpy as np
import torch

from .. import corpus, models
from .._validation import check_bool, check_int

__all__ = ["load_inputs", "text_window"]


def as_text(text):
    """A :class:`attn_lib.corpus.Text` (or anything with ``name``/``text``/``sha256``); a str is wrapped."""
    if isinstance(text, str):
        return corpus.Text.from_string(text, name="custom", source="string")
    for a in ("name", "text", "sha256"):
        if not hasattr(text, a):
            raise ValueError(f"text must be a corpus.Text or a str (missing attribute {a!r})")
    return text


def load_inputs(
    model: str = "gpt2", text: str = "war-and-peace", *, device: str = "auto", dtype=None, quiet: bool = True
):
    """``(handle, text, notes)`` for an experiment (the arguments as for :func:`attn_lib.models.load_model` and
    :func:`attn_lib.corpus.load_text`, which check them; ``quiet=False`` shows transformers' progress bars on stderr);
    ``notes``: the one-off notices (the stand-in's first conversion, the offline stand-in, the offline default text)
    that would otherwise be warnings, for the caller to show."""
    check_bool("quiet", quiet)
    # the text first: a bad text must fail before the model loads
    (text_obj, handle), caught = with_notes(
        lambda: (corpus.load_text(text), models.load_model(model, device=device, dtype=dtype, quiet=quiet))
    )
    notes = list(handle.notes)
    return handle, text_obj, notes + [m for m in caught if m not in notes]


def with_notes(fn, *args, **kwargs) -> tuple:
    """``(fn(*args, **kwargs), notes)``: ``notes`` the messages of the warnings it raised (the one-off notices)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn(*args, **kwargs)
    return out, [str(w.message) for w in caught]


def text_window(handle, text, length: int, start: int = 0) -> torch.Tensor:
    """``(1, length)`` int64 token ids: the window of ``length`` (in ``[2, handle.max_length]``) tokens of ``text`` (a
    :class:`attn_lib.corpus.Text` or str) from token ``start >= 0``."""
    length = check_int("length", length, low=2, high=int(handle.max_length))
    start = check_int("start", start, low=0)
    t = as_text(text)
    w = corpus.token_windows(handle.tokenizer, t.text, length, n_windows=1, start=start)
    ids = torch.as_tensor(np.asarray(w[0] if isinstance(w, (list, tuple)) else w)).reshape(-1)[:length]
    if ids.numel() < length:
        raise ValueError(f"text {t.name!r} has fewer than start + length = {start + length} tokens")
    return ids.view(1, -1).long()


def table_meta(handle, text) -> dict:
    """The labels of every table row: ``{"model", "text", "device"}``; the model says when it is the offline stand-in
    or a bidirectional encoder (whose rows saw the whole window)."""
    t = as_text(text)
    model = f"{handle.model_id} (offline stand-in for {handle.requested})" if handle.is_standin else handle.model_id
    if not is_causal(handle):
        model = f"{model} (bidirectional encoder)"

    return {"model": model, "text": t.name, "device": str(handle.device)}


def is_causal(handle) -> bool:
    """Whether the model's attention is causal (nested prefixes share one pass); a bidirectional encoder is not."""
    return bool(getattr(handle, "causal", True))


def require_causal(handle, what: str) -> None:
    """``ValueError`` for a bidirectional encoder, up front: these experiments are defined for causal models only."""
    if not is_causal(handle):
        prefix = (
            "it samples rows of every length from one pass, as nested prefixes (row t sees tokens 0..t-1), which a "
            "bidirectional model does not have"
        )
        loss = "it measures the next-token loss of a language model, which a bidirectional encoder has no head for"
        why = {"compare_normalizers": prefix, "live_swap": loss}.get(what, f"{prefix}; and {loss}")
        raise ValueError(
            f"model: {what} needs a causal language model, and {getattr(handle, 'model_id', 'this model')} is a "
            f"bidirectional encoder ({why}); use a causal model such as gpt2 or smollm2"
        )
