"""attn_lib.cache: locations, keys, hits, corrupted/stale entries recomputed, DataFrames, --no-cache."""

from __future__ import annotations

import hashlib
import io
import json
import os
import pickle
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import attn_lib
import attn_lib.cache as K
from attn_lib.corpus import Text


class Counter:
    def __init__(self, value):
        self.value, self.n = value, 0

    def __call__(self):
        self.n += 1
        return self.value


# ------------------------------------------------------------------------------------------------------------------
# locations
# ------------------------------------------------------------------------------------------------------------------
def test_locations_follow_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTN_LIB_CACHE_DIR", str(tmp_path / "c"))
    monkeypatch.delenv("ATTN_LIB_MODEL_DIR", raising=False)
    assert K.cache_dir() == tmp_path / "c"
    assert K.model_dir() == tmp_path / "c" / "models"
    assert K.results_dir() == tmp_path / "c" / "results"
    monkeypatch.setenv("ATTN_LIB_MODEL_DIR", str(tmp_path / "m"))
    assert K.model_dir() == tmp_path / "m"


def test_default_location_is_the_user_cache_dir(monkeypatch):
    import platformdirs

    monkeypatch.delenv("ATTN_LIB_CACHE_DIR", raising=False)
    assert K.cache_dir() == Path(platformdirs.user_cache_dir("attn_lib", appauthor=False))


def test_sizes(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "f").write_bytes(b"x" * 1500)
    assert K.dir_size(tmp_path) == 1500 and K.dir_size(tmp_path / "nope") == 0
    assert K.format_bytes(1500) == "1.5 KiB" and K.format_bytes(12) == "12 B"
    assert K.format_bytes(3 * 1024**3) == "3.0 GiB"


# ------------------------------------------------------------------------------------------------------------------
# hits and misses
# ------------------------------------------------------------------------------------------------------------------
KEY = {
    "experiment": "alg1",
    "model": {"model_id": "gpt2", "revision": "abc"},
    "text_sha256": "f" * 64,
    "params": {"L": [32, 64], "N": 5, "T": 1.0},
}


def test_json_value_computed_once_then_hit(tmp_path):
    cache = K.ResultCache(tmp_path)
    c = Counter({"slope": 0.5, "pair": (1, 2), "nan": float("nan")})
    first = cache.get_or_compute(KEY, c)
    assert cache.last_status == "miss"
    second = cache.get_or_compute(KEY, c)
    assert cache.last_status == "hit" and c.n == 1
    assert first["pair"] == second["pair"] == [1, 2]  # the first call returns the round-tripped value too
    assert np.isnan(second["nan"])
    assert KEY in cache and cache.get(KEY)["slope"] == 0.5
    assert len(cache.entries()) == 1


def test_dataframe_roundtrip(tmp_path):
    cache = K.ResultCache(tmp_path)
    df = pd.DataFrame({"L": [32, 64], "d": [0.1, np.nan], "head": pd.Categorical(["a", "b"])})
    c = Counter(df)
    cache.get_or_compute(KEY, c)
    got = cache.get_or_compute(KEY, c)
    assert c.n == 1
    pd.testing.assert_frame_equal(got, df)
    series = pd.Series([1.0, 2.0], name="s")
    pd.testing.assert_series_equal(cache.get_or_compute({"k": "series"}, lambda: series), series)


def test_other_values_are_stored_without_pickle_and_read_back_exactly(tmp_path):
    from attn_lib.experiments.swap import SwapResult

    cache = K.ResultCache(tmp_path)
    frame = pd.DataFrame(
        {
            "s": ["a", None, "c"],
            "o": pd.array(["x", 1, 2.5], dtype=object),
            "I": pd.array([1, None, 3], dtype="Int64"),
            "att": [np.arange(3.0), np.arange(2.0), np.arange(3.0)],  # like live_swap's rows
        },
        index=pd.Index([5, 6, 7], name="i"),
    )
    frame.attrs["timing"] = {"s": 1.25, "pair": (1, 2)}
    value = {"frame": frame, "array": np.arange(6, dtype=np.float32).reshape(2, 3), 1: (np.int64(3), None)}
    for i, v in enumerate([value, SwapResult(frame, frame.iloc[:1])]):
        assert K._same(cache.get_or_compute({"k": i}, lambda v=v: v), v)
        got = cache.get_or_compute({"k": i}, lambda: pytest.fail("should be cached"))
        assert cache.last_status == "hit" and K._same(got, v)
        path, meta = _entry(cache, {"k": i})
        assert meta["kind"] == "tree" and sorted(p.name for p in path.iterdir()) == ["meta.json", "value.npz"]
    pd.testing.assert_frame_equal(got.losses, frame)


def test_a_value_without_a_safe_format_is_returned_not_stored(tmp_path, caplog):
    cache = K.ResultCache(tmp_path)
    for v in (lambda: 0, {"x": object()}, pd.DataFrame({"x": [1]}, index=pd.MultiIndex.from_tuples([(1, 2)]))):
        c = Counter(v)
        assert cache.get_or_compute({"k": 2}, c) is v and cache.get_or_compute({"k": 2}, c) is v
        assert c.n == 2 and not cache.entries()
    assert "not storing" in caplog.text


def _frames():
    from hypothesis.extra import pandas as hpd

    cols = [
        hpd.column("f", dtype=float),
        hpd.column("i", dtype=np.int64),
        hpd.column("b", dtype=bool),
        hpd.column("s", elements=st.one_of(st.none(), st.text(max_size=5))),
    ]
    return hpd.data_frames(cols, index=hpd.range_indexes(max_size=6))


@given(
    value=st.recursive(
        st.one_of(
            st.none(),
            st.floats(),
            st.integers(),
            st.text(max_size=5),
            _frames(),
            st.builds(np.arange, st.integers(0, 5)),
        ),
        lambda inner: st.one_of(
            st.lists(inner, max_size=3),
            st.tuples(inner, inner),
            st.dictionaries(st.one_of(st.text(max_size=3), st.integers()), inner, max_size=3),
        ),
        max_leaves=6,
    )
)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_property_every_stored_value_reads_back_the_same(tmp_path, value):
    """Stored values (frames, arrays, NaN, str/None columns, nested containers) come back exactly, or as JSON gives
    plain values (tuples as lists) -- the same the first call returned."""
    cache = K.ResultCache(tmp_path)
    key = {"v": repr(value)[:200], "n": np.random.default_rng().integers(1 << 62)}
    first = cache.get_or_compute(key, lambda: value)
    got = cache.get_or_compute(key, lambda: pytest.fail("should be cached"))
    assert cache.last_status == "hit" and K._same(got, first)


@pytest.mark.parametrize(
    "change",
    [
        lambda k: {**k, "params": {**k["params"], "N": 6}},
        lambda k: {**k, "text_sha256": "e" * 64},
        lambda k: {**k, "model": {"model_id": "gpt2", "revision": "def"}},
    ],
)
def test_every_part_of_the_key_matters(tmp_path, change):
    cache = K.ResultCache(tmp_path)
    c = Counter(1)
    cache.get_or_compute(KEY, c)
    cache.get_or_compute(change(KEY), c)
    assert c.n == 2 and cache.last_status == "miss"


def test_version_is_part_of_the_key(tmp_path, monkeypatch):
    cache = K.ResultCache(tmp_path)
    c = Counter(1)
    cache.get_or_compute(KEY, c)
    monkeypatch.setattr(attn_lib, "__version__", "99.0")
    cache.get_or_compute(KEY, c)
    assert c.n == 2
    assert cache.full_key(KEY)["_attn_lib_version"] == "99.0"


def test_key_canonicalisation():
    import torch

    a = {"b": (1, 2), "a": np.float64(0.5), "dtype": torch.float32, "path": Path("/x")}
    b = {"a": 0.5, "b": [1, 2], "dtype": "torch.float32", "path": "/x"}
    assert K.canonical_json(a) == K.canonical_json(b) and K.key_digest(a) == K.key_digest(b)


# ------------------------------------------------------------------------------------------------------------------
# never trust a bad entry
# ------------------------------------------------------------------------------------------------------------------
def _entry(cache, key):
    path = cache.path_for(key)
    meta = json.loads((path / "meta.json").read_text())
    return path, meta


@pytest.mark.parametrize("corrupt", ["payload", "meta-garbage", "stale-key", "missing-payload", "truncated-archive"])
def test_corrupted_or_stale_entries_are_recomputed(tmp_path, corrupt):
    cache = K.ResultCache(tmp_path)
    value = pd.DataFrame({"x": [1.0, 2.0]}) if corrupt == "truncated-archive" else {"answer": 42}
    c = Counter(value)
    cache.get_or_compute(KEY, c)
    path, meta = _entry(cache, KEY)
    payload = path / meta["payload"]
    if corrupt == "payload":
        payload.write_text('{"answer": 41}')
    elif corrupt == "meta-garbage":
        (path / "meta.json").write_text("{not json")
    elif corrupt == "stale-key":
        meta["key"]["params"]["N"] = 999
        (path / "meta.json").write_text(json.dumps(meta))
    elif corrupt == "missing-payload":
        payload.unlink()
    else:
        data = payload.read_bytes()
        payload.write_bytes(data[: len(data) // 2])
    got = cache.get_or_compute(KEY, c)
    assert cache.last_status == "invalid" and c.n == 2
    if isinstance(value, dict):
        assert got == {"answer": 42}
    # rewritten: a hit again
    cache.get_or_compute(KEY, c)
    assert cache.last_status == "hit" and c.n == 2


class _Boom:
    """Unpickling it creates ``marker``: code run by reading an entry."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.mkdir, (self.marker,))


def _forge(path, meta, name, data):
    (path / "value.json").unlink(missing_ok=True)
    if not os.path.isabs(name):
        (path / name).write_bytes(data)
    meta.update(payload=name, sha256=hashlib.sha256(data).hexdigest())
    (path / "meta.json").write_text(json.dumps(meta))


@pytest.mark.parametrize("forgery", ["absolute", "dotdot", "symlink", "pickle", "dataframe", "npz-object", "class"])
def test_forged_entries_are_never_read_nor_run(tmp_path, forgery):
    """The cache reads only its own payload file, a fixed name (no path, no link out), and never unpickles: a forged
    entry whose checksum matches is recomputed, and no code of it runs."""
    cache = K.ResultCache(tmp_path / "results")
    c = Counter({"answer": 42})
    cache.get_or_compute(KEY, c)
    path, meta = _entry(cache, KEY)
    outside, marker = tmp_path / "outside.json", tmp_path / "ran"
    outside.write_text('{"answer": 666}')
    if forgery == "absolute":
        _forge(path, meta, str(outside), outside.read_bytes())
    elif forgery == "dotdot":
        _forge(path, meta, "../../../outside.json", outside.read_bytes())
    elif forgery == "symlink":
        (path / "value.json").unlink()
        (path / "value.json").symlink_to(outside)
        meta["sha256"] = hashlib.sha256(outside.read_bytes()).hexdigest()
        (path / "meta.json").write_text(json.dumps(meta))
    elif forgery in ("pickle", "dataframe"):  # the entries of format 1
        meta["kind"] = forgery
        _forge(path, meta, "value.pkl", pickle.dumps(_Boom(marker)))
    else:
        meta["kind"] = "tree"
        buf = io.BytesIO()
        if forgery == "npz-object":
            np.savez(buf, __tree__=np.frombuffer(b'["array", "a0"]', np.uint8), a0=np.array([_Boom(marker)], object))
        else:
            tree = json.dumps(["dataclass", "os:system", {"command": f"mkdir {marker}"}]).encode()
            np.savez(buf, __tree__=np.frombuffer(tree, np.uint8))
        _forge(path, meta, "value.npz", buf.getvalue())
    assert cache.get_or_compute(KEY, c) == {"answer": 42}
    assert cache.last_status == "invalid" and c.n == 2 and not marker.exists()


def test_disabled_cache_bypasses_everything(tmp_path):
    cache = K.ResultCache(tmp_path / "r", enabled=False)
    c = Counter(1)
    cache.get_or_compute(KEY, c)
    cache.get_or_compute(KEY, c)
    assert c.n == 2 and cache.last_status == "disabled" and not (tmp_path / "r").exists()
    assert cache.get(KEY, "dflt") == "dflt" and KEY not in cache


def test_no_temporary_folders_left(tmp_path):
    cache = K.ResultCache(tmp_path)
    for i in range(3):
        cache.get_or_compute({"i": i}, lambda i=i: i)
    assert not list(tmp_path.rglob(".tmp-*"))


def test_unwritable_cache_still_returns_the_value(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    cache = K.ResultCache(blocker / "sub")
    assert cache.get_or_compute({"k": 1}, lambda: {"v": 1}) == {"v": 1}


def test_default_root_uses_env(tmp_cache):
    cache = K.ResultCache()
    cache.get_or_compute({"k": 1}, lambda: 1)
    assert cache.root == tmp_cache / "results" and cache.entries()
    info = K.describe_cache()
    assert info["cache_dir"] == str(tmp_cache) and info["results_bytes"] > 0


# ------------------------------------------------------------------------------------------------------------------
# keys from handles and texts; bad input
# ------------------------------------------------------------------------------------------------------------------
def test_make_key_from_handle_and_text(tiny_gpt2):
    text = Text.from_string("some prose", name="t")
    key = K.make_key("alg1", handle=tiny_gpt2, text=text, L=32, N=5)
    assert key["model"] == tiny_gpt2.cache_key()
    assert key["model"]["model_id"] == "tiny-gpt2" and key["model"]["revision"] == "seed=0"
    assert key["text_sha256"] == text.sha256 and key["params"] == {"L": 32, "N": 5}
    assert K.make_key("alg1", text="some prose")["text_sha256"] == text.sha256
    json.dumps(key)


@pytest.mark.parametrize(
    "key, match",
    [
        ([1, 2], "key must be"),
        ({}, "key must be a non-empty dict"),
        ({"f": object()}, "not JSON-able"),
        ({1: "x"}, "dict keys must be strings"),
    ],
)
def test_bad_keys(tmp_path, key, match):
    with pytest.raises(ValueError, match=match):
        K.ResultCache(tmp_path).get_or_compute(key, lambda: 1)


def test_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="compute must be callable"):
        K.ResultCache(tmp_path).get_or_compute({"k": 1}, 5)
    with pytest.raises(ValueError, match="enabled"):
        K.ResultCache(tmp_path, enabled="no")
    with pytest.raises(ValueError, match="experiment"):
        K.make_key("")


def test_code_fingerprint_is_part_of_the_key(tmp_path, monkeypatch):
    """A result computed by other attn_lib code is not reused, even with the same version number."""
    from attn_lib import cache as cache_mod

    c = cache_mod.ResultCache(tmp_path)
    calls = []
    assert c.get_or_compute({"x": 1}, lambda: calls.append(1) or {"v": 1}) == {"v": 1}
    assert c.get_or_compute({"x": 1}, lambda: calls.append(1) or {"v": 2}) == {"v": 1}
    assert c.last_status == "hit" and len(calls) == 1
    fp = cache_mod.code_fingerprint()
    assert len(fp) == 16 and int(fp, 16) >= 0
    monkeypatch.setattr(cache_mod, "code_fingerprint", lambda: "0" * 16)
    assert c.get_or_compute({"x": 1}, lambda: calls.append(1) or {"v": 3}) == {"v": 3}
    assert c.last_status == "miss" and len(calls) == 2


def test_non_finite_floats_and_their_strings_are_different_keys(tmp_path):
    for num, text in ((float("nan"), "nan"), (float("inf"), "inf"), (float("-inf"), "-inf")):
        assert K.key_digest({"T": num}) != K.key_digest({"T": text})
    cache = K.ResultCache(tmp_path)
    c = Counter(1)
    cache.get_or_compute({"T": float("nan")}, c)
    cache.get_or_compute({"T": "nan"}, c)
    assert c.n == 2
    cache.get_or_compute({"T": float("nan")}, c)  # a NaN in the key still finds its entry
    assert c.n == 2 and cache.last_status == "hit"


def test_sets_of_mixed_types_are_canonical_keys(tmp_path):
    # sorting {1, "x"} directly raised a TypeError
    assert K.canonical_json({"s": {1, "x", (2, 3)}}) == K.canonical_json({"s": {(2, 3), "x", 1}})
    assert K.canonical_json({"s": {(1, 2), (1, "a")}}) == '{"s":[[1,"a"],[1,2]]}'  # lists [1, 2] < [1, "a"] raised
    cache = K.ResultCache(tmp_path)
    assert cache.get_or_compute({"s": {1, "x"}}, lambda: 5) == 5
    assert cache.get_or_compute({"s": frozenset({"x", 1})}, lambda: 6) == 5 and cache.last_status == "hit"


class _Unhashable:
    __hash__ = None


class _Unsortable:
    def __lt__(self, other):
        raise TypeError("no order")


@pytest.mark.parametrize(
    "key",
    [{"f": _Unhashable()}, {"f": [_Unsortable(), _Unsortable()]}, {"t": np.arange(3)}],
    ids=["unhashable", "unsortable", "array"],
)
def test_keys_of_odd_objects_are_value_errors(tmp_path, key):
    with pytest.raises(ValueError, match="key"):
        K.ResultCache(tmp_path).get_or_compute(key, lambda: 1)


def test_tensor_keys_are_not_shortened_to_their_repr(tmp_path):
    import torch

    # str() of a long tensor elides its middle ("..."): two different tensors would share a key
    a, b = torch.zeros(2000), torch.zeros(2000)
    b[1000] = 1
    with pytest.raises(ValueError, match="not JSON-able"):
        K.key_digest({"t": a})
    assert K.key_digest({"t": torch.tensor(0.5)}) == K.key_digest({"t": 0.5})
    assert K.key_digest({"d": torch.float32}) == K.key_digest({"d": "torch.float32"})
    del b
