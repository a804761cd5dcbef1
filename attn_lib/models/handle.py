"""Model handles, devices and dtypes, tokenizer checks, and the one ``from_pretrained`` call every loader makes
(shared by :mod:`.loading` and :mod:`.offline`; how a name becomes a handle is told in :mod:`attn_lib.models`)."""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any

import torch

__all__ = ["ModelHandle", "resolve_device"]

# model types loaded with AutoModel (bidirectional encoders) rather than AutoModelForCausalLM
_ENCODER_TYPES = ("bert", "roberta", "xlm-roberta", "distilbert", "mpnet", "electra", "albert", "camembert")
_DTYPES = {
    **dict.fromkeys(("float32", "fp32", "float"), torch.float32),
    **dict.fromkeys(("float64", "fp64", "double"), torch.float64),
    **dict.fromkeys(("bfloat16", "bf16"), torch.bfloat16),
    **dict.fromkeys(("float16", "fp16", "half"), torch.float16),
}


def _mps_available() -> bool:
    mps = getattr(torch.backends, "mps", None)
    return bool(mps is not None and mps.is_available())


def available_devices() -> list[str]:
    """Devices usable here, best first, ending with ``"cpu"``."""
    cuda = [f"cuda:{i}" for i in range(torch.cuda.device_count())] if torch.cuda.is_available() else []
    return cuda + (["mps"] if _mps_available() else []) + ["cpu"]


def resolve_device(device: str | torch.device | None = "auto") -> torch.device:
    """``"auto"`` -> CUDA if present, else Apple MPS, else CPU. An explicit device must exist here: ``ValueError``
    (listing the devices present) for an unparseable name or an absent device (``"cuda"`` without a GPU)."""
    if device is None or (isinstance(device, str) and device.strip().lower() == "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "mps" if _mps_available() else "cpu")
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
        if dev.index not in (None, 0):  # one CPU device: "cpu:3" names nothing here
            raise ValueError(f"device={device!r}: the CPU is one device, 'cpu' (available: {here})")
        return torch.device("cpu")
    if dev.type in ("cuda", "mps"):
        if not (torch.cuda.is_available() if dev.type == "cuda" else _mps_available()):
            raise ValueError(
                f"device={device!r} requested but {'CUDA' if dev.type == 'cuda' else 'Apple MPS'} is not available "
                f"on this machine (available: {here}); use device='auto' or 'cpu'"
            )
        if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ValueError(
                f"device={device!r}: only {torch.cuda.device_count()} CUDA device(s) present (available: {here})"
            )
        return dev
    backend = getattr(torch, dev.type, None)
    if backend is not None and hasattr(backend, "is_available") and backend.is_available():
        return dev
    raise ValueError(f"device={device!r} is not present on this machine (available: {here})")


def resolve_dtype(dtype: str | torch.dtype | None, *, name: str = "dtype") -> torch.dtype:
    """``None`` -> float32 (on every device: the analyses compare weights exactly); strings like ``"bfloat16"``; else
    ``ValueError`` naming ``name``."""
    if dtype is None:
        return torch.float32
    if isinstance(dtype, torch.dtype):
        if not dtype.is_floating_point:
            raise ValueError(f"{name} must be a floating-point dtype (got {dtype})")
        return dtype
    if isinstance(dtype, str) and (key := dtype.strip().lower().removeprefix("torch.")) in _DTYPES:
        return _DTYPES[key]
    raise ValueError(f"{name} must be None or one of {sorted(set(_DTYPES))} (got {dtype!r})")


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
    #: Every one-off notice of this load, in order (with ``load_model(quiet=True)`` the only place they appear).
    notes: list = dataclasses.field(default_factory=list)

    @classmethod
    def from_model(cls, model, tokenizer, **fields) -> ModelHandle:
        """Wrap a loaded ``model``, already on its device in its dtype (set to eval mode here), and its ``tokenizer`` (``None``: token ids only); the architecture
        and ``causal`` are read from the config, ``fields`` are the rest."""
        model.eval()
        causal = not is_encoder_config(model.config)
        return cls(model=model, tokenizer=tokenizer, causal=causal, **fields, **_architecture(model.config))

    def add_notes(self, notes: list[str], stacklevel: int) -> ModelHandle:
        """Keep ``notes`` in :attr:`notes` and raise each as a ``UserWarning`` at ``stacklevel``; returns the handle."""
        self.notes.extend(notes)
        for note in notes:
            warnings.warn(note, UserWarning, stacklevel=stacklevel + 1)
        return self

    def describe(self) -> str:
        """Short human string, e.g. ``"SmolLM2-135M-Instruct (offline stand-in for gpt2) on cpu, float32"``."""
        extra = f" ({self.source})" if self.source else ""
        if self.is_standin:
            extra = f" (offline stand-in for {self.requested})"
        elif not self.causal:
            extra = f" (bidirectional encoder{'; ' + self.source if self.source else ''})"
        return f"{self.model_id}{extra} on {self.device}, {str(self.dtype).removeprefix('torch.')}"

    def summary(self) -> dict:
        """JSON-able description (for result tables and ``attn-lib info``)."""
        out = {k: getattr(self, k) for k in ("requested", "model_id", "revision", "is_standin", "source", "family")}
        out["attention"] = "causal" if self.causal else "bidirectional"
        out.update({k: getattr(self, k) for k in ("n_layers", "n_heads", "n_kv_heads", "head_dim", "max_length")})
        dtype = str(self.dtype).removeprefix("torch.")
        return {**out, "device": str(self.device), "dtype": dtype, "description": self.describe()}

    def cache_key(self) -> dict:
        """The part of a result-cache key that identifies this model."""
        out = {k: getattr(self, k) for k in ("model_id", "revision", "is_standin")}
        return {**out, "dtype": str(self.dtype), "device_type": self.device.type}

    def __repr__(self) -> str:  # the dataclass repr would print the whole model
        return (
            f"ModelHandle({self.describe()!r}, layers={self.n_layers}, heads={self.n_heads}, "
            f"kv_heads={self.n_kv_heads}, head_dim={self.head_dim}, max_length={self.max_length})"
        )


def text_config(config):
    """The language model's part of ``config`` (``config.get_text_config()`` for multimodal configs)."""
    get = getattr(config, "get_text_config", None)
    return get() if callable(get) else config


def _architecture(config) -> dict:
    c = text_config(config)
    n_layers = getattr(c, "num_hidden_layers", None) or getattr(c, "n_layer", None)
    n_heads = getattr(c, "num_attention_heads", None) or getattr(c, "n_head", None)
    hidden = getattr(c, "hidden_size", None) or getattr(c, "n_embd", None)
    n_kv = getattr(c, "num_key_value_heads", None) or n_heads
    head_dim = getattr(c, "head_dim", None) or (hidden // n_heads if hidden and n_heads else None)
    max_len = getattr(c, "max_position_embeddings", None) or getattr(c, "n_positions", None) or 0
    if not (n_layers and n_heads and head_dim):
        raise ValueError(f"cannot read layers/heads/head_dim from config of type {type(config).__name__}")
    sizes = dict(n_layers=n_layers, n_heads=n_heads, n_kv_heads=n_kv, head_dim=head_dim, max_length=max_len)
    return {**{k: int(v) for k, v in sizes.items()}, "family": getattr(c, "model_type", "")}


def is_encoder_config(config) -> bool:
    """Whether ``config`` describes a bidirectional encoder (BERT family, not configured as a decoder)."""
    c = text_config(config)
    return getattr(c, "model_type", "") in _ENCODER_TYPES and not getattr(c, "is_decoder", False)


_PROBE_SENTENCE = "Well, Prince, so Genoa and Lucca are now just family estates."


def check_tokenizer(tokenizer, name: str = "tokenizer") -> None:
    """Raise ``ValueError`` if ``tokenizer`` is empty: offline, ``GPT2TokenizerFast.from_pretrained("gpt2")`` returns
    a tokenizer with (almost) no vocabulary instead of failing, and it encodes any sentence to ``[]``."""
    if tokenizer is None:
        raise ValueError(f"{name} is None: this model handle has no tokenizer; pass token ids directly")
    try:
        n_vocab = len(tokenizer)
    except TypeError:
        n_vocab = getattr(tokenizer, "vocab_size", 0) or 0
    try:
        ids = encode_plain(tokenizer, _PROBE_SENTENCE)
    except Exception as exc:
        raise ValueError(f"{name} cannot encode text ({exc})") from exc
    if n_vocab < 2 or len(ids) == 0:
        raise ValueError(
            f"{name} is empty (vocabulary size {n_vocab}; an English sentence encodes to {len(ids)} tokens). "
            "This is what transformers returns offline for a tokenizer that is not cached (e.g. "
            "GPT2TokenizerFast.from_pretrained('gpt2') without network). Connect once to download it, or use "
            "attn_lib.load_model(), which falls back to the offline stand-in."
        )


def encode_plain(tokenizer, text: str) -> list[int]:
    """Token ids of ``text`` without special tokens (a fast tokenizer's own backend: no "sequence longer than
    model_max_length" warning)."""
    if (backend := getattr(tokenizer, "backend_tokenizer", None)) is not None:
        # a tokenizer.json may switch truncation and padding on (sentence-transformers' encoders: at 128 tokens);
        # all of the text's tokens are wanted, nothing added, and the tokenizer is left as it was
        cut, pad = backend.truncation, backend.padding
        backend.no_truncation()
        backend.no_padding()
        try:
            return backend.encode(text, add_special_tokens=False).ids
        finally:
            if cut is not None:
                backend.enable_truncation(**cut)
            if pad is not None:
                backend.enable_padding(**pad)
    if hasattr(tokenizer, "encode"):
        try:
            return list(tokenizer.encode(text, add_special_tokens=False))
        except TypeError:
            return list(tokenizer.encode(text))
    return list(tokenizer(text)["input_ids"])


def byte_tokenizer():
    """A Hugging Face fast tokenizer with a 256-symbol byte-level vocabulary and no merges, built locally, for
    random-init models with ``vocab_size >= 256``: every UTF-8 byte is one token, so any text encodes."""
    # lazy: tokenizers and transformers are heavy imports; ``import attn_lib`` stays light
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {ch: i for i, ch in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    return PreTrainedTokenizerFast(tokenizer_object=tok, model_max_length=10**9)


def load_pretrained(
    repo: str, device: torch.device, dtype: torch.dtype, *, local_files_only: bool, revision: str | None
):
    """``(model, tokenizer)`` of ``repo`` (a Hub id or a folder) on ``device`` in ``dtype``: a BERT-family encoder as
    the bare ``AutoModel``, anything else as ``AutoModelForCausalLM``."""
    # lazy: transformers is a heavy import; ``import attn_lib`` stays light
    from safetensors import SafetensorError
    from transformers import AutoConfig, AutoModel, AutoModelForCausalLM, AutoTokenizer

    kw: dict[str, Any] = {"local_files_only": local_files_only}
    if revision is not None:
        kw["revision"] = revision
    tok = AutoTokenizer.from_pretrained(repo, **kw)
    check_tokenizer(tok, f"tokenizer of {repo!r}")
    try:
        config = AutoConfig.from_pretrained(repo, **kw)
    except (OSError, ValueError):  # the model loader below reports what is wrong
        config = None
    auto = AutoModel if config is not None and is_encoder_config(config) else AutoModelForCausalLM
    try:
        model, info = auto.from_pretrained(repo, output_loading_info=True, dtype=dtype, **kw)
    except SafetensorError as exc:  # a truncated or corrupt weights file
        raise ValueError(f"the weights of {repo!r} cannot be read: {exc}") from None
    # missing (random-init), unexpected or misshapen weights make another model than the name says: an error
    wrong = {k: list(info.get(k) or ()) for k in ("missing_keys", "unexpected_keys", "mismatched_keys")}
    if any(wrong.values()):
        found = "; ".join(
            f"{len(v)} {k.replace('_', ' ')} ({', '.join(map(str, v[:4]))}{', ...' if len(v) > 4 else ''})"
            for k, v in wrong.items()
            if v
        )
        raise ValueError(f"the weights of {repo!r} do not match its config: {found}")
    return model.to(device), tok


def in_hf_cache(repo_id: str) -> bool:
    try:
        from huggingface_hub import try_to_load_from_cache  # lazy: pulls in requests etc.; keeps attn_lib light

        return isinstance(try_to_load_from_cache(repo_id, "config.json"), str)
    except Exception:
        return False
