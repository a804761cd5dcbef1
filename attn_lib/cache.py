"""On-disk caches: the folders (:func:`cache_dir`, :func:`model_dir` for converted weights, :func:`results_dir`) and
:class:`ResultCache`, experiment results stored under a *key*: a JSON-able dict of everything the result depends on
(model id and revision, text hash, every parameter; :func:`make_key`), to which the cache adds the attn_lib version,
its code fingerprint and a format number. The canonical (sorted JSON) key is hashed; the entry stores the full key, the
payload and its SHA-256. An entry whose checksum, key or format does not match, or that cannot be decoded, is never
trusted: the value is recomputed and the entry rewritten.

Values may be JSON-able (they come back as JSON gives them, tuples as lists, on the first call too), or pandas
DataFrames, Series, NumPy arrays and scalars, attn_lib dataclasses, and dicts, lists and tuples of them: an ``.npz``
archive read with ``allow_pickle=False``, stored only if it reads back exactly the same. Nothing is unpickled, so a
forged entry runs no code (at most it builds an attn_lib dataclass), and an entry reads only its own two files (fixed
names, no symbolic link). Other values are returned but not stored, with a warning. Writes are atomic (a temporary
folder renamed into place); a file or link where an entry folder belongs is replaced.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import importlib
import io
import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import platformdirs

from ._validation import check_bool, check_nonnegative, env, expand_path

__all__ = ["ResultCache"]  # cache_dir(): the folder ResultCache() uses by default

log = logging.getLogger(__name__)

CACHE_ENV = "ATTN_LIB_CACHE_DIR"
MODEL_ENV = "ATTN_LIB_MODEL_DIR"
#: Bumped whenever the on-disk layout of an entry changes; part of every key.
FORMAT_VERSION = 2


def cache_dir() -> Path:
    """Root of attn_lib's caches: ``$ATTN_LIB_CACHE_DIR`` or the platform's user cache folder."""
    if value := env(CACHE_ENV):
        return expand_path(f"the environment variable {CACHE_ENV}", value)
    return Path(platformdirs.user_cache_dir("attn_lib", appauthor=False))


def model_dir() -> Path:
    """Folder of converted model weights (the offline stand-in's): ``$ATTN_LIB_MODEL_DIR`` or ``<cache_dir>/models``."""
    value = env(MODEL_ENV)
    return expand_path(f"the environment variable {MODEL_ENV}", value) if value else cache_dir() / "models"


def results_dir() -> Path:
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


def _jsonable(obj: Any, exact: bool = False) -> Any:
    """A key's values as plain JSON types (tuples, numpy scalars, torch dtypes and devices, paths; sets as lists sorted
    by canonical JSON); non-finite floats stay floats, so ``nan`` and ``"nan"`` differ. ``exact=True`` (a value stored
    as JSON): anything but None, bools, numbers, strings, lists, tuples and dicts with string keys is an error."""
    if obj is None or isinstance(obj, (bool, int, str, float)):
        return obj
    if isinstance(obj, dict):
        if bad := [k for k in obj if not isinstance(k, str)]:
            raise ValueError(f"key: dict keys must be strings (got {bad[0]!r})")
        return {k: _jsonable(v, exact) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v, exact) for v in obj]
    if exact:
        raise ValueError(f"a {type(obj).__name__} is not plain JSON")
    if isinstance(obj, (set, frozenset)):
        return sorted((_jsonable(v) for v in obj), key=lambda v: json.dumps(v, sort_keys=True))
    if isinstance(obj, os.PathLike):
        return os.fspath(obj)
    if hasattr(obj, "item") and callable(obj.item) and getattr(obj, "ndim", 0) == 0:  # numpy scalars / 0-d tensors
        with contextlib.suppress(Exception):  # else the checks below
            return _jsonable(obj.item())
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
    """A result-cache key: ``handle``'s :meth:`~attn_lib.models.ModelHandle.cache_key`, the SHA-256 of ``text`` (a
    :class:`~attn_lib.corpus.Text` or a str) and every other parameter."""
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
            key.update(text_sha256=text.sha256, text_name=text.name)
        else:
            raise ValueError(f"text must be an attn_lib.corpus.Text, a str or None (got {type(text).__name__})")
    key["params"] = params
    return key


def _attn_lib_version() -> str:
    from . import __version__  # read at each call: the package's version as it is now (tests change it)

    return __version__


@functools.cache
def code_fingerprint() -> str:
    """SHA-256 (16 hex digits) of attn_lib's ``.py`` files, in every key: other code's results are never reused."""
    pkg = Path(__file__).resolve().parent
    h = hashlib.sha256()
    for path in sorted(pkg.rglob("*.py")):
        h.update(path.relative_to(pkg).as_posix().encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]


class ResultCache:
    """Experiment results on disk under ``root`` (default :func:`results_dir`); ``enabled=False`` reads and writes
    nothing (``--no-cache``). After :meth:`get_or_compute`, :attr:`last_status` is ``"hit"``, ``"miss"``, ``"invalid"``
    (an entry failed verification and was recomputed) or ``"disabled"``."""

    def __init__(self, root: str | os.PathLike | None = None, enabled: bool = True):
        self.enabled = check_bool("enabled", enabled)
        self.root = expand_path("root", root) if root is not None else results_dir()
        self.last_status: str | None = None

    def full_key(self, key: dict) -> dict:
        """The key as stored: with the attn_lib version, its code fingerprint and the entry format."""
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

    def get_or_compute(self, key: dict, compute: Callable[[], Any]) -> Any:
        """The cached value for ``key``, or ``compute()``'s, stored."""
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
        return self._write(path, full, compute())

    def get(self, key: dict, default: Any = None) -> Any:
        """The verified cached value, or ``default``."""
        found, value = self._read(self.path_for(key), self.full_key(key)) if self.enabled else (False, None)
        return value if found else default

    def __contains__(self, key: dict) -> bool:
        return self.enabled and self._read(self.path_for(key), self.full_key(key))[0]

    def entries(self) -> list[Path]:
        """Entry folders currently on disk (none where the root does not exist)."""
        return sorted(p.parent for p in self.root.glob("??/*/meta.json"))

    def _read(self, path: Path, full: dict) -> tuple[bool, Any]:
        if not (path / "meta.json").is_file():
            return False, None
        try:
            meta = json.loads(_own_file(path, "meta.json").read_text(encoding="utf-8"))
            if canonical_json(meta.get("key")) != canonical_json(full):  # as strings: NaN != NaN as floats
                raise ValueError("stored key differs (stale entry or hash collision)")
            if _PAYLOADS.get(meta["kind"]) != meta["payload"]:
                raise ValueError(
                    f"kind {meta['kind']!r} with payload {meta['payload']!r} is not an entry of this format"
                )
            payload = _own_file(path, meta["payload"]).read_bytes()
            if hashlib.sha256(payload).hexdigest() != meta["sha256"]:
                raise ValueError("checksum mismatch (corrupted payload)")
            value = json.loads(payload.decode("utf-8")) if meta["kind"] == "json" else _from_npz(payload)
        except Exception as exc:  # anything wrong: recompute, never trust
            log.warning("attn_lib cache: ignoring invalid entry %s (%s); recomputing", path, exc)
            return False, None
        return True, value

    def _write(self, path: Path, full: dict, value: Any) -> Any:
        try:
            kind, payload, value = _encode(value)
        except ValueError as exc:  # a value no safe format holds exactly: returned, not stored
            log.warning("attn_lib cache: not storing %s (%s)", path, exc)
            return value
        meta = {
            "key": json.loads(canonical_json(full)),
            "kind": kind,
            "payload": _PAYLOADS[kind],
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
                if path.is_symlink() or (path.exists() and not path.is_dir()):  # a file where the entry belongs
                    path.unlink()
                elif path.exists():  # a stale entry
                    shutil.rmtree(path, ignore_errors=True)
                os.replace(tmp, path)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)  # left only when the rename did not happen
        except OSError as exc:  # a read-only or full disk must not lose the result
            log.warning("attn_lib cache: could not store %s (%s)", path, exc)
        return value


#: The payload file of each kind of entry: a name in the entry's folder, never a path.
_PAYLOADS = {"json": "value.json", "tree": "value.npz"}


def _own_file(entry: Path, name: str) -> Path:
    """``entry/name``, a regular file of the entry itself: no link on the way out of the cache folder."""
    f = entry / name
    if name not in (*_PAYLOADS.values(), "meta.json") or any(p.is_symlink() for p in (entry.parent, entry, f)):
        raise ValueError(f"{name!r} is not a file of the entry itself")
    return f


def _libs() -> tuple[Any, Any]:
    import numpy  # lazy: the CLI imports this module, and pandas is slow to import
    import pandas

    return numpy, pandas


def _encode(value: Any) -> tuple[str, bytes, Any]:
    """(kind, payload bytes, value as it will be read back); ``ValueError`` for a value no safe format holds."""
    try:  # not {1: 'a', '1': 'b'}, say: JSON would turn 1 into '1' and lose an item
        text = json.dumps(_jsonable(value, exact=True), allow_nan=True)
    except (ValueError, RecursionError):
        return "tree", _to_npz(value), value
    return "json", text.encode("utf-8"), json.loads(text)


def _to_npz(value: Any) -> bytes:
    """``value`` as an ``.npz`` archive: the numeric arrays, and the rest as a JSON tree of ``[tag, ...]`` nodes;
    ``ValueError`` unless it reads back the same."""
    np, _ = _libs()
    arrays: dict = {}
    try:
        tree = json.dumps(_node(value, arrays), allow_nan=True).encode("utf-8")
    except RecursionError:
        raise ValueError("the value is nested too deeply") from None
    buf = io.BytesIO()
    np.savez(buf, __tree__=np.frombuffer(tree, dtype=np.uint8), **arrays)
    payload = buf.getvalue()
    if not _same(value, _from_npz(payload)):
        raise ValueError(f"a {type(value).__name__} that does not read back the same")
    return payload


def _node(v: Any, arrays: dict) -> Any:
    np, pd = _libs()
    n = functools.partial(_node, arrays=arrays)
    if v is None or type(v) in (bool, int, float, str):
        return v
    if isinstance(v, np.ndarray):
        if v.dtype.hasobject:
            return ["objarray", list(v.shape), [n(x) for x in v.ravel()]]
        arrays[f"a{len(arrays)}"] = v
        return ["array", f"a{len(arrays) - 1}"]
    if isinstance(v, np.generic) and v.dtype.kind in "biuf":
        return ["scalar", v.dtype.str, v.item()]
    if v is pd.NA:
        return ["NA"]
    if isinstance(v, (list, tuple)):
        return [type(v).__name__, [n(x) for x in v]]
    if isinstance(v, dict):
        return ["dict", [[n(k), n(x)] for k, x in v.items()]]
    if isinstance(v, pd.RangeIndex):
        return ["range", v.start, v.stop, v.step, n(v.name)]
    if isinstance(v, pd.Categorical):
        return ["cat", n(v.codes), n(v.categories), v.ordered]
    if isinstance(v, pd.api.extensions.ExtensionArray):
        return ["ext", str(v.dtype), [n(x) for x in v]]
    if type(v) is pd.Index:
        return ["index", n(_column(v)), n(v.name)]
    if type(v) is pd.Series:
        return ["series", n(_column(v)), n(v.index), n(v.name), n(v.attrs)]
    if type(v) is pd.DataFrame:
        return ["frame", [n(_column(v.iloc[:, i])) for i in range(v.shape[1])], n(v.index), n(v.columns), n(v.attrs)]
    if dataclasses.is_dataclass(v) and type(v).__module__.startswith("attn_lib."):
        fields = {f.name: n(getattr(v, f.name)) for f in dataclasses.fields(v) if f.init}
        return ["dataclass", f"{type(v).__module__}:{type(v).__qualname__}", fields]
    raise ValueError(f"a {type(v).__name__} has no safe format here")


def _column(x: Any) -> Any:
    """The values of a Series or Index: a NumPy array for a NumPy numeric or date dtype, else its pandas array."""
    np, _ = _libs()
    return x.to_numpy() if isinstance(x.dtype, np.dtype) and x.dtype.kind in "biufcmM" else x.array


def _from_npz(payload: bytes) -> Any:
    """The value of :func:`_to_npz`'s archive, read with ``allow_pickle=False``."""
    np, _ = _libs()
    with np.load(io.BytesIO(payload), allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    return _value(json.loads(arrays.pop("__tree__").tobytes().decode("utf-8")), arrays)


def _value(t: Any, arrays: dict) -> Any:
    np, pd = _libs()
    if not isinstance(t, list):
        return t
    tag, *a = t
    v = functools.partial(_value, arrays=arrays)
    if tag == "array":
        return arrays[a[0]]
    if tag == "objarray":
        out = np.empty(len(a[1]), dtype=object)
        for i, x in enumerate(a[1]):  # one by one: a list of equal-length arrays would be broadcast
            out[i] = v(x)
        return out.reshape(a[0])
    if tag == "scalar":
        return np.dtype(a[0]).type(a[1])
    if tag in ("list", "tuple"):
        return (list if tag == "list" else tuple)(v(x) for x in a[0])
    if tag == "dict":
        return {v(k): v(x) for k, x in a[0]}
    if tag == "dataclass":
        module, _, name = a[0].partition(":")
        cls = importlib.import_module(module) if module.startswith("attn_lib.") else None
        for part in name.split("."):
            cls = getattr(cls, part, None)
        if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
            raise ValueError(f"{a[0]!r} is not a dataclass of attn_lib")
        return cls(**{k: v(x) for k, x in a[1].items()})
    pandas_nodes = {
        "NA": lambda: pd.NA,
        "range": lambda: pd.RangeIndex(a[0], a[1], a[2], name=v(a[3])),
        "cat": lambda: pd.Categorical.from_codes(v(a[0]), categories=v(a[1]), ordered=a[2]),
        "ext": lambda: pd.array([v(x) for x in a[1]], dtype=a[0]),
        "index": lambda: pd.Index(x := v(a[0]), dtype=x.dtype, name=v(a[1])),
        "series": lambda: _with_attrs(pd.Series(x := v(a[0]), index=v(a[1]), dtype=x.dtype, name=v(a[2])), v(a[3])),
        "frame": lambda: _frame([v(c) for c in a[0]], v(a[1]), v(a[2]), v(a[3])),
    }
    if tag not in pandas_nodes:
        raise ValueError(f"unknown node {tag!r}")
    return pandas_nodes[tag]()


def _with_attrs(obj: Any, attrs: dict) -> Any:
    obj.attrs = attrs
    return obj


def _frame(columns: list, index: Any, names: Any, attrs: dict) -> Any:
    _, pd = _libs()
    dtypes = {i: c.dtype for i, c in enumerate(columns)}  # as stored: an object column of strings stays object
    df = pd.DataFrame(dict(enumerate(columns)), index=index, copy=False).astype(dtypes)
    df.columns = names
    return _with_attrs(df, attrs)


def _same(a: Any, b: Any) -> bool:
    """Whether ``b`` is ``a`` read back exactly: same types, dtypes, values (NaN where NaN), names and attrs."""
    np, pd = _libs()
    if type(a) is not type(b):
        return False
    if isinstance(a, (pd.DataFrame, pd.Series, pd.Index)):
        check, kw = {
            pd.DataFrame: (pd.testing.assert_frame_equal, {"check_column_type": True, "check_index_type": True}),
            pd.Series: (pd.testing.assert_series_equal, {"check_index_type": True}),
        }.get(type(a), (pd.testing.assert_index_equal, {"exact": True}))
        try:
            check(a, b, check_exact=True, **kw)
        except AssertionError:
            return False
        cols = [(a.iloc[:, i], b.iloc[:, i]) for i in range(a.shape[1])] if a.ndim == 2 else [(a, b)]
        objects = all(_same(list(x), list(y)) for x, y in cols if x.dtype == object)  # nested arrays, exact types
        return objects and _same(getattr(a, "attrs", None), getattr(b, "attrs", None))
    if isinstance(a, np.ndarray):
        if a.dtype != b.dtype or a.shape != b.shape:
            return False
        if a.dtype.hasobject:
            return all(map(_same, a.ravel(), b.ravel()))
        return np.array_equal(a, b, equal_nan=a.dtype.kind in "fc")
    if isinstance(a, dict):
        return _same(list(a), list(b)) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(map(_same, a, b))
    if dataclasses.is_dataclass(a):
        return all(_same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    if a is pd.NA:
        return True
    try:
        return bool(a == b) or bool(a != a and b != b)  # NaN reads back as NaN
    except (TypeError, ValueError):
        return False


def describe_cache() -> dict:
    """For ``attn-lib info``: ``<what>_dir`` and ``<what>_bytes`` (its size) for ``what`` in cache, model, results."""
    out = {}
    for what, folder in (("cache", cache_dir()), ("model", model_dir()), ("results", results_dir())):
        out[f"{what}_dir"], out[f"{what}_bytes"] = str(folder), dir_size(folder)
    return out
