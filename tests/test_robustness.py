"""Robustness, round two (issue 21): every case a careless or hostile user found, each a regression test.

Sections follow the issue: silent wrong results, hangs and runaway resources, CLI tracebacks, errors only after the
work, and the inputs that were accepted silently or raised the wrong exception type.
"""

from __future__ import annotations

import pytest

import attn_lib.cache as K

KEY = {"experiment": "robust", "params": {"N": 5}}


# ------------------------------------------------------------------------------------------------------------------
# result cache
# ------------------------------------------------------------------------------------------------------------------
def test_cache_keeps_dict_values_whose_keys_json_would_merge(tmp_path):
    value = {1: "a", "1": "b"}
    cache = K.ResultCache(tmp_path)
    assert cache.get_or_compute(KEY, lambda: value) == value
    again = K.ResultCache(tmp_path).get_or_compute(KEY, lambda: pytest.fail("recomputed a stored value"))
    assert again == value and set(again) == {1, "1"}


def test_cache_nested_int_keys_come_back_as_ints(tmp_path):
    value = {"rows": [{0: 1.5, 2: 2.5}]}
    cache = K.ResultCache(tmp_path)
    cache.get_or_compute(KEY, lambda: value)
    assert K.ResultCache(tmp_path).get(KEY) == value


@pytest.mark.parametrize("what", ["entry", "prefix-folder", "entry-link"])
def test_cache_repairs_a_file_where_an_entry_folder_belongs(tmp_path, what):
    cache = K.ResultCache(tmp_path)
    calls = []
    cache.get_or_compute(KEY, lambda: calls.append(1) or {"v": 1})
    path = cache.path_for(KEY)
    target = path if what != "prefix-folder" else path.parent
    import shutil

    shutil.rmtree(target)
    if what == "entry-link":
        (tmp_path / "elsewhere").write_text("x")
        target.symlink_to(tmp_path / "elsewhere")
    else:
        target.write_text("not a folder")
    assert cache.get_or_compute(KEY, lambda: calls.append(1) or {"v": 1}) == {"v": 1}
    assert cache.last_status in ("invalid", "miss") and len(calls) == 2
    # repaired: the next call is a hit, nothing recomputed
    assert cache.get_or_compute(KEY, lambda: calls.append(1) or {"v": 1}) == {"v": 1}
    assert cache.last_status == "hit" and len(calls) == 2 and path.is_dir()


def test_result_cache_root_must_be_a_path():
    with pytest.raises(ValueError, match="root must be a path"):
        K.ResultCache(root=123)


@pytest.mark.parametrize("var", ["ATTN_LIB_CACHE_DIR", "ATTN_LIB_MODEL_DIR"])
def test_tilde_of_an_unknown_user_in_the_cache_variables_is_a_value_error(monkeypatch, var):
    monkeypatch.setenv(var, "~nosuchuser_attn_lib/cache")
    with pytest.raises(ValueError, match=f"{var}.*home folder cannot be found"):
        K.model_dir() if var == "ATTN_LIB_MODEL_DIR" else K.cache_dir()


def test_tilde_of_an_unknown_user_in_an_output_folder_is_a_value_error():
    from attn_lib._validation import prepare_output_dir

    with pytest.raises(ValueError, match="out '~nosuchuser_attn_lib/x' starts with a '~'"):
        prepare_output_dir("out", "~nosuchuser_attn_lib/x")
