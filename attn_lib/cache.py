"""On-disk caches: experiment results, and where converted model weights live.

Directories: :func:`cache_dir` (the root), :func:`model_dir` (converted model weights) and :func:`results_dir`.

Result cache
------------
:class:`ResultCache` stores the result of an experiment under a *key*: a JSON-able dict that must say everything the
result depends on -- model id and revision (or the stand-in's file hash), text hash, every parameter -- to which the
cache itself adds the attn_lib version and a format number (:func:`make_key` builds such a dict from a model handle and
a :class:`~attn_lib.corpus.Text`). The key is canonicalised (sorted JSON) and hashed; the entry stores the full key, the
payload and the payload's SHA-256. On read, an entry whose checksum, key, version or format does not match, or whose
payload cannot be decoded, is treated as absent: the value is recomputed and the entry rewritten. It is never trusted.

Values may be JSON-able (dicts with string keys, lists, numbers, strings; they come back as JSON gives them, so tuples
become lists -- the first call returns the same round-tripped value, so a cached and an uncached run look identical),
pandas DataFrames or Series (stored as pickles, unpickled only after the checksum matched), or any other picklable
object. A dict with a non-string key (``{1: 'a', '1': 'b'}``, which JSON would merge into ``{'1': 'b'}``) is pickled.
Writes are atomic (a temporary folder renamed into place), so an interrupted run leaves no half-written entry; a file
or link found where an entry folder belongs is removed and the entry rewritten.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import pickle
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import platformdirs

from ._validation import check_nonnegative, expand_path

__all__ = ["ResultCache", "cache_dir", "model_dir", "results_dir"]

log = logging.getLogger(__name__)

CACHE_ENV = "ATTN_LIB_CACHE_DIR"
MODEL_ENV = "ATTN_LIB_MODEL_DIR"
#: Bumped whenever the on-disk layout of an entry changes; part of every key.
FORMAT_VERSION = 1


def cache_dir() -> Path:
    """Root of attn_lib's caches: ``$ATTN_LIB_CACHE_DIR`` or the platform's user cache folder
    (``platformdirs.user_cache_dir("attn_lib")``)."""
    env = os.environ.get(CACHE_ENV, "").strip()
    if env:
        return expand_path(f"the environment variable {CACHE_ENV}", env)
    return Path(platformdirs.user_cache_dir("attn_lib", appauthor=False))


def model_dir() -> Path:
    """Folder for converted model weights (the offline stand-in's safetensors copy): ``$ATTN_LIB_MODEL_DIR`` or
    ``<cache_dir>/models``."""
    env = os.environ.get(MODEL_ENV, "").strip()
    return expand_path(f"the environment variable {MODEL_ENV}", env) if env else cache_dir() / "models"


def results_dir() -> Path:
    """Folder of the result cache: ``<cache_dir>/results``."""
    return cache_dir() / "results"


def dir_size(path: str | os.PathLike) -> int:
    """Total size in bytes of the files below ``path`` (0 if it does not exist)."""
    p = expand_path("path", path)
    if p.is_file():
        return p.stat().st_size
    total = 0
    for root, _dirs, files in os.walk(p):  # nothing when p does not exist
        for f in files:
            with contextlib.suppress(OSError):  # removed while walking
                total += os.stat(os.path.join(root, f)).st_size
    return total


def format_bytes(n: int) -> str:
    """``1536 -> '1.5 KiB'``."""
    size = check_nonnegative("n", n)
    for unit in ("B", "KiB", "MiB"):
        if size < 1024:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"


def _jsonable(obj: Any) -> Any:
    """Convert keys' values to plain JSON types (tuples, numpy scalars, torch dtypes/devices, paths).

    Non-finite floats stay floats (JSON's ``NaN`` / ``Infinity`` tokens), so ``float("nan")`` and the string ``"nan"``
    are different keys. Sets become lists sorted by each element's canonical JSON, so any set of JSON-able values has
    one canonical order (``{1, "x"}`` included).
    """
    if obj is None or isinstance(obj, (bool, int, str, float)):
        return obj
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            if not isinstance(k, str):
                raise ValueError(f"key: dict keys must be strings (got {k!r})")
            out[k] = _jsonable(v)
        return out
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, (set, frozenset)):
        return sorted((_jsonable(v) for v in obj), key=lambda v: json.dumps(v, sort_keys=True))
    if isinstance(obj, os.PathLike):
        return os.fspath(obj)
    # numpy scalars / 0-d tensors
    if hasattr(obj, "item") and callable(obj.item) and getattr(obj, "ndim", 0) == 0:
        try:
            return _jsonable(obj.item())
        except Exception:  # pragma: no cover - falls through to str
            pass
    mod = type(obj).__module__
    if mod.startswith("torch") and not hasattr(obj, "shape"):  # torch.dtype, torch.device (not a tensor's str)
        return str(obj)
    raise ValueError(
        f"key: value {obj!r} of type {type(obj).__name__} is not JSON-able; pass numbers, strings, lists or dicts"
    )


def canonical_json(key: dict) -> str:
    """Sorted, compact JSON of a key (after converting tuples, numpy scalars, torch dtypes...)."""
    if not isinstance(key, dict):
        raise ValueError(f"key must be a dict (got {type(key).__name__})")
    try:
        return json.dumps(_jsonable(key), sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    except (TypeError, RecursionError) as exc:  # e.g. an object whose hash or comparison raises, a cycle
        raise ValueError(f"key must be made of JSON-able values (numbers, strings, lists, dicts): {exc}") from None


def key_digest(key: dict) -> str:
    """SHA-256 hex digest of :func:`canonical_json`."""
    return hashlib.sha256(canonical_json(key).encode()).hexdigest()


def make_key(experiment: str, *, handle=None, text=None, **params) -> dict:
    """Build a result-cache key.

    ``handle`` (a :class:`~attn_lib.models.ModelHandle`) contributes the model id, revision (or file hash), whether it
    is the offline stand-in, its dtype and device type; ``text`` (a :class:`~attn_lib.corpus.Text`, or a str that is
    hashed) contributes its SHA-256; ``params`` are every other parameter. :class:`ResultCache` adds the attn_lib
    version itself.
    """
    if not isinstance(experiment, str) or not experiment:
        raise ValueError(f"experiment must be a non-empty string (got {experiment!r})")
    key: dict[str, Any] = {"experiment": experiment}
    if handle is not None:
        if not callable(getattr(handle, "cache_key", None)):
            raise ValueError(f"handle must be an attn_lib.models.ModelHandle or None (got {type(handle).__name__})")
        key["model"] = handle.cache_key()
    if text is not None:
        if isinstance(text, str):
            key["text_sha256"] = hashlib.sha256(text.encode("utf-8")).hexdigest()
        elif isinstance(getattr(text, "sha256", None), str) and isinstance(getattr(text, "name", None), str):
            key["text_sha256"] = text.sha256
            key["text_name"] = text.name
        else:
            raise ValueError(f"text must be an attn_lib.corpus.Text, a str or None (got {type(text).__name__})")
    key["params"] = params
    return key


def _attn_lib_version() -> str:
    from . import __version__  # read at each call: the package's version as it is now (tests change it)

    return __version__


_CODE_FINGERPRINT: str | None = None


def code_fingerprint() -> str:
    """SHA-256 (first 16 hex digits) of every ``.py`` file of the installed attn_lib package.

    Part of every cache key, so a result computed by other code (an edited checkout between two builds, say) is never
    reused, even when the version number did not change.
    """
    global _CODE_FINGERPRINT
    if _CODE_FINGERPRINT is None:
        pkg = Path(__file__).resolve().parent
        h = hashlib.sha256()
        for path in sorted(pkg.rglob("*.py")):
            h.update(path.relative_to(pkg).as_posix().encode())
            h.update(b"\0")
            h.update(path.read_bytes())
        _CODE_FINGERPRINT = h.hexdigest()[:16]
    return _CODE_FINGERPRINT


class ResultCache:
    """Experiment results on disk, keyed by everything they depend on.

    Parameters
    ----------
    root:
        Folder for the entries; default :func:`results_dir`.
    enabled:
        ``False`` bypasses the cache entirely (nothing is read or written): the CLI's ``--no-cache``.

    After each :meth:`get_or_compute`, :attr:`last_status` is ``"hit"``, ``"miss"``, ``"invalid"`` (an entry existed
    but failed verification and was recomputed) or ``"disabled"``.
    """

    def __init__(self, root: str | os.PathLike | None = None, enabled: bool = True):
        if not isinstance(enabled, bool):
            raise ValueError(f"enabled must be True or False (got {enabled!r})")
        self.root = expand_path("root", root) if root is not None else results_dir()
        self.enabled = enabled
        self.last_status: str | None = None

    # -- keys -----------------------------------------------------------------------------------------------------
    def full_key(self, key: dict) -> dict:
        """The key as stored: the caller's key plus the attn_lib version, its code fingerprint and the entry format."""
        if not isinstance(key, dict) or not key:
            raise ValueError(f"key must be a non-empty dict (got {key!r})")
        full = json.loads(canonical_json(key))  # validated and canonical (sets sorted, tuples as lists)
        full["_attn_lib_version"] = _attn_lib_version()
        full["_code"] = code_fingerprint()
        full["_format"] = FORMAT_VERSION
        return full

    def path_for(self, key: dict) -> Path:
        """Folder of the entry for ``key`` (it may not exist)."""
        digest = key_digest(self.full_key(key))
        return self.root / digest[:2] / digest

    # -- public API -----------------------------------------------------------------------------------------------
    def get_or_compute(self, key: dict, compute: Callable[[], Any]) -> Any:
        """Return the cached value for ``key``, or call ``compute()``, store its value and return it."""
        if not callable(compute):
            raise ValueError(f"compute must be callable (got {compute!r})")
        full = self.full_key(key)
        if not self.enabled:
            self.last_status = "disabled"
            return compute()
        path = self.path_for(key)
        found, value = self._read(path, full)
        if found:
            self.last_status = "hit"
            return value
        self.last_status = "invalid" if path.exists() else "miss"
        value = compute()
        return self._write(path, full, value)

    def get(self, key: dict, default: Any = None) -> Any:
        """The verified cached value, or ``default``."""
        found, value = self._read(self.path_for(key), self.full_key(key)) if self.enabled else (False, None)
        return value if found else default

    def __contains__(self, key: dict) -> bool:
        return self.enabled and self._read(self.path_for(key), self.full_key(key))[0]

    def entries(self) -> list[Path]:
        """Entry folders currently on disk."""
        if not self.root.exists():
            return []
        return sorted(p.parent for p in self.root.glob("??/*/meta.json"))

    # -- storage --------------------------------------------------------------------------------------------------
    def _read(self, path: Path, full: dict) -> tuple[bool, Any]:
        meta_path = path / "meta.json"
        if not meta_path.is_file():
            return False, None
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
            if canonical_json(meta.get("key")) != canonical_json(full):  # as strings: NaN != NaN as floats
                raise ValueError("stored key differs (stale entry or hash collision)")
            kind = meta["kind"]
            payload = (path / meta["payload"]).read_bytes()
            if hashlib.sha256(payload).hexdigest() != meta["sha256"]:
                raise ValueError("checksum mismatch (corrupted payload)")
            if kind == "json":
                value = json.loads(payload.decode("utf-8"))
            elif kind in ("dataframe", "pickle"):
                value = pickle.loads(payload)
            else:
                raise ValueError(f"unknown kind {kind!r}")
        except Exception as exc:  # anything wrong: recompute, never trust
            log.warning("attn_lib cache: ignoring invalid entry %s (%s); recomputing", path, exc)
            return False, None
        return True, value

    def _write(self, path: Path, full: dict, value: Any) -> Any:
        kind, payload, value = _encode(value)
        meta = {
            "key": json.loads(canonical_json(full)),
            "kind": kind,
            "payload": "value.json" if kind == "json" else "value.pkl",
            "sha256": hashlib.sha256(payload).hexdigest(),
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "attn_lib_version": _attn_lib_version(),
        }
        try:
            if path.parent.is_symlink() or (path.parent.exists() and not path.parent.is_dir()):
                path.parent.unlink()  # a file where the entries' folder belongs: repair
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=path.parent))
            try:
                (tmp / meta["payload"]).write_bytes(payload)
                (tmp / "meta.json").write_text(json.dumps(meta, indent=1, sort_keys=True), encoding="utf-8")
                _remove_entry(path)  # a stale entry, or a file put where the entry folder belongs
                os.replace(tmp, path)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)  # left only when the rename did not happen
        except OSError as exc:  # a read-only or full disk must not lose the result
            log.warning("attn_lib cache: could not store %s (%s)", path, exc)
        return value


def _plain_json(value: Any, depth: int = 0) -> bool:
    """Whether JSON round-trips ``value`` without merging or renaming anything: None, bools, ints, floats, strings,
    lists/tuples of them and dicts with *string* keys (JSON writes the keys 1 and '1' both as "1")."""
    if depth > 200:
        return False
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    if isinstance(value, (list, tuple)):
        return all(_plain_json(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain_json(v, depth + 1) for k, v in value.items())
    return False


def _remove_entry(path: Path) -> None:
    """Remove whatever is at ``path``: an entry folder, or a file or link put in its place."""
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        path.unlink()
    elif path.exists():
        shutil.rmtree(path, ignore_errors=True)


def _encode(value: Any) -> tuple[str, bytes, Any]:
    """(kind, payload bytes, value as it will be read back)."""
    import pandas as pd  # pandas: only to encode a DataFrame, and slow to import

    if isinstance(value, (pd.DataFrame, pd.Series)):
        return "dataframe", pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL), value
    try:
        if not _plain_json(value):  # e.g. {1: 'a', '1': 'b'}: JSON would turn 1 into '1' and lose an item
            raise TypeError("not plain JSON")
        text = json.dumps(value, allow_nan=True)
    except (TypeError, ValueError, RecursionError):
        try:
            return "pickle", pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL), value
        except Exception as exc:
            raise ValueError(f"compute() returned a value that can be neither JSON-encoded nor pickled: {exc}") from exc
    return "json", text.encode("utf-8"), json.loads(text)


def describe_cache() -> dict:
    """Locations and sizes, for ``attn-lib info``: ``<what>_dir`` (the folder) and ``<what>_bytes`` (its size) for
    ``what`` in ``cache`` (the root), ``model`` (:func:`model_dir`) and ``results`` (:func:`results_dir`)."""
    out = {}
    for what, folder in (("cache", cache_dir()), ("model", model_dir()), ("results", results_dir())):
        out[f"{what}_dir"], out[f"{what}_bytes"] = str(folder), dir_size(folder)
    return out
