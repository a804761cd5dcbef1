"""The claims as data (attn_lib/claims/claims.toml): each entry holds known fields with valid values, each entry has
exactly one rule function and each rule one entry, and :data:`attn_lib.claims.CLAIMS` holds the file's entries, field
for field, in the file's order."""

from __future__ import annotations

import dataclasses
import fnmatch
import re
import tomllib
from pathlib import Path

import pytest

from attn_lib.claims import CLAIMS, EVIDENCE, THRESHOLDS, Claim, Outcome
from attn_lib.claims.claim import DATA, _load, check_rules, rule
from attn_lib.claims.training import GRAD_FACTOR, ZERO_WEIGHT
from attn_lib.experiments.jobs import EXPERIMENTS

ROOT = Path(__file__).resolve().parents[1]
TOML = ROOT / "attn_lib" / "claims" / "claims.toml"
ENTRIES = tomllib.loads(TOML.read_text(encoding="utf-8"))["claim"]
FIELDS = [f.name for f in dataclasses.fields(Claim) if f.name != "evaluate"]
REQUIRED = ("id", "where", "title", "words", "evidence", "section", "needs", "rule")
#: results that no experiment of run_all makes, and the module whose code makes each
MADE_ELSEWHERE = {
    "critical_n_summary": "attn_lib/experiments/jobs.py",
    "multihead_coverage": "attn_lib/experiments/jobs.py",
    "train_runs": "attn_lib/training.py",
}
#: a module constant named in an entry's text, filled when its rule is registered
NAME = re.compile(r"\{([A-Z][A-Z0-9_]*)(?::[^{}]*)?\}")


@pytest.mark.parametrize("entry", ENTRIES, ids=[e["id"] for e in ENTRIES])
def test_every_entry_holds_known_fields_with_valid_values(entry):
    assert set(entry) <= set(FIELDS) and set(REQUIRED) <= set(entry)
    assert entry["evidence"] in EVIDENCE
    assert all(isinstance(entry[k], str) for k in entry if k != "needs")
    for name in entry["needs"]:
        assert name in EXPERIMENTS or name in MADE_ELSEWHERE, name
        if name in MADE_ELSEWHERE:
            assert f'"{name}"' in (ROOT / MADE_ELSEWHERE[name]).read_text(encoding="utf-8")


def test_ids_are_unique_and_each_has_exactly_one_rule():
    ids = [e["id"] for e in ENTRIES]
    assert len(ids) == len(set(ids)) == len(CLAIMS)
    assert set(ids) == set(CLAIMS)
    assert all(callable(c.evaluate) for c in CLAIMS.values())
    assert len({id(c.evaluate) for c in CLAIMS.values()}) == len(CLAIMS)  # no function serves two ids


def test_claims_are_the_entries_field_for_field_in_the_files_order():
    assert list(CLAIMS) == [e["id"] for e in ENTRIES]
    for e in ENTRIES:
        got = {k: getattr(CLAIMS[e["id"]], k) for k in FIELDS}
        want = {k: "" for k in FIELDS} | e | {"needs": tuple(e["needs"])}
        for k, v in want.items():
            if isinstance(v, str) and NAME.search(v):  # filled by its @rule: the rest of the text stands as written
                parts = NAME.split(v)[::2]
                assert re.fullmatch(".+?".join(map(re.escape, parts)), got[k], flags=re.S), (e["id"], k)
                assert not NAME.search(got[k])
            else:
                assert got[k] == v, (e["id"], k)


@pytest.mark.parametrize("cid", list(CLAIMS))
def test_every_rule_text_renders_with_the_thresholds(cid):
    CLAIMS[cid].rule.format(**THRESHOLDS)  # a placeholder that is no threshold raises KeyError


def test_the_training_texts_name_the_modules_constants():
    assert f"within a factor {GRAD_FACTOR:g} of 1" in CLAIMS["train-logit-grad-low-t"].fails_if
    assert all(name in CLAIMS["train-nonvanishing-stabler"].rule for name in ZERO_WEIGHT)


def test_a_rule_for_an_id_without_an_entry_is_refused():
    with pytest.raises(ValueError, match="x-no-entry"):
        rule("x-no-entry")
    assert "x-no-entry" not in CLAIMS


def test_an_entry_without_a_rule_is_refused(monkeypatch):
    monkeypatch.setitem(DATA, "x-no-rule", dict(DATA[next(iter(DATA))]))
    with pytest.raises(ValueError, match="no rule for \\['x-no-rule'\\]"):
        check_rules()


def test_a_rule_without_an_entry_is_refused(monkeypatch):
    planted = dataclasses.replace(next(iter(CLAIMS.values())), id="x-no-entry")
    monkeypatch.setitem(CLAIMS, "x-no-entry", planted)
    with pytest.raises(ValueError, match="no entry for \\['x-no-entry'\\]"):
        check_rules()


def test_the_loader_refuses_a_duplicate_id_and_an_unknown_field():
    one = '[[claim]]\nid = "x-a"\nwhere = "w"\n'
    assert _load(one) == {"x-a": {"where": "w"}}
    with pytest.raises(ValueError, match="twice"):
        _load(one + one)
    with pytest.raises(ValueError, match="unknown fields \\['kind'\\]"):
        _load('[[claim]]\nid = "x-a"\nkind = "forced"\n')


def test_a_named_constant_must_be_given_and_a_given_one_named(monkeypatch):
    monkeypatch.setitem(DATA, "x-named", dict(DATA["train-logit-grad-low-t"]))
    with pytest.raises(ValueError, match="GRAD_FACTOR"):
        rule("x-named")
    with pytest.raises(ValueError, match="never names \\['OTHER'\\]"):
        rule("x-named", GRAD_FACTOR=10.0, OTHER=1)
    rule("x-named", GRAD_FACTOR=3.0)(lambda results, th: Outcome("n/a", ""))
    try:
        assert "factor 3 of 1" in CLAIMS["x-named"].fails_if
    finally:
        del CLAIMS["x-named"]


def test_the_package_ships_the_file():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = pyproject["tool"]["setuptools"]["package-data"]["attn_lib"]
    assert any(fnmatch.fnmatch(str(TOML.relative_to(ROOT / "attn_lib")), p) for p in patterns)
