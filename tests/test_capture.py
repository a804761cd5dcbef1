"""attn_lib.capture: exact equality with eager attention, streaming, normaliser replacement, masks, bad input."""

from __future__ import annotations

import math
import warnings

import pytest
import torch

from attn_lib import normalizers as nz
from attn_lib.capture import (
    IMPLEMENTATION,
    LayerAttention,
    _capture_attention_forward,
    capture_attention,
    collect_attention,
    patched_attention,
    register,
)


def _ids(handle, batch=2, length=23, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, handle.model.config.vocab_size, (batch, length), generator=g)


def eager_reference(handle, ids):
    """The model's own eager attention with ``output_attentions=True`` (implementation restored afterwards)."""
    model = handle.model
    prev = model.config._attn_implementation
    model.set_attn_implementation("eager")
    try:
        with torch.no_grad():
            return model(ids, output_attentions=True, use_cache=False)
    finally:
        model.set_attn_implementation(prev)


# ------------------------------------------------------------------------------------------------------------------
# exactness
# ------------------------------------------------------------------------------------------------------------------
def test_weights_equal_eager_output_attentions_exactly(tiny_handle):
    ids = _ids(tiny_handle)
    ref = eager_reference(tiny_handle, ids)
    recs = collect_attention(tiny_handle, ids)
    assert [r.layer for r in recs] == list(range(tiny_handle.n_layers))
    for rec, att in zip(recs, ref.attentions):
        assert rec.weights.shape == att.shape == (2, tiny_handle.n_heads, 23, 23)
        assert torch.equal(rec.weights, att)  # bit for bit: same operations in the same order
        assert rec.normalizer == "model" and rec.temperature == 1.0
    # the random-init attention is far from uniform, so equality is not trivial
    assert max(float(r.weights[..., 1:, :].max()) for r in recs) > 0.3


def test_model_output_equals_eager_and_output_attentions_still_works(tiny_handle):
    ids = _ids(tiny_handle)
    ref = eager_reference(tiny_handle, ids)
    out = capture_attention(tiny_handle, ids, None)
    assert torch.equal(out.logits, ref.logits)
    with patched_attention(tiny_handle), torch.no_grad():
        out2 = tiny_handle.model(ids, output_attentions=True, use_cache=False)
    for a, b in zip(out2.attentions, ref.attentions):
        assert torch.equal(a, b)


def test_logits_mask_values_queries_keys(tiny_handle):
    ids = _ids(tiny_handle, batch=1, length=11)
    recs = collect_attention(tiny_handle, ids)
    H, L, D = tiny_handle.n_heads, 11, tiny_handle.head_dim
    causal = torch.ones(L, L, dtype=torch.bool).tril()
    for r in recs:
        assert r.mask.dtype == torch.bool and r.mask.shape[-2:] == (L, L)
        assert torch.equal(r.mask[0, 0], causal)
        assert torch.isneginf(r.logits[..., ~causal]).all() and torch.isfinite(r.logits[..., causal]).all()
        assert torch.equal(r.weights[..., ~causal], torch.zeros_like(r.weights[..., ~causal]))
        # the logits are what the model normalises: their softmax is the weights
        torch.testing.assert_close(torch.softmax(r.logits, -1), r.weights, rtol=0, atol=1e-7)
        # and they include the model's own scaling (1/sqrt(head_dim)) of post-RoPE q.k
        torch.testing.assert_close(r.logits[..., causal], (r.queries @ r.keys.transpose(-1, -2) * D**-0.5)[..., causal])
        assert r.scaling == pytest.approx(D**-0.5)
        assert r.values.shape == (1, H, L, D) and r.queries.shape == (1, H, L, D) and r.keys.shape == (1, H, L, D)


def test_values_are_the_per_head_value_vectors_expanded_for_gqa(tiny_llama):
    h = tiny_llama
    ids = _ids(h, batch=1, length=9)
    raw = {}
    hook = h.model.model.layers[1].self_attn.v_proj.register_forward_hook(lambda m, i, o: raw.setdefault("v", o))
    try:
        recs = collect_attention(h, ids)
    finally:
        hook.remove()
    v = raw["v"].view(1, 9, h.n_kv_heads, h.head_dim).transpose(1, 2)  # (1, H_kv, L, D)
    expanded = v.repeat_interleave(h.n_heads // h.n_kv_heads, dim=1)
    assert torch.equal(recs[1].values, expanded)
    assert torch.equal(recs[1].values[:, 0], recs[1].values[:, 1])  # heads 0 and 1 share key/value head 0
    assert not torch.equal(recs[1].values[:, 1], recs[1].values[:, 2])


def test_values_gpt2_match_the_c_attn_projection(tiny_gpt2):
    h = tiny_gpt2
    ids = _ids(h, batch=1, length=9)
    raw = {}
    hook = h.model.transformer.h[0].attn.c_attn.register_forward_hook(lambda m, i, o: raw.setdefault("qkv", o))
    try:
        recs = collect_attention(h, ids)
    finally:
        hook.remove()
    v = raw["qkv"].split(32, dim=2)[2].view(1, 9, 4, 8).transpose(1, 2)
    assert torch.equal(recs[0].values, v)


# ------------------------------------------------------------------------------------------------------------------
# masks in every form transformers may pass
# ------------------------------------------------------------------------------------------------------------------
class _Mod(torch.nn.Module):
    is_causal = True
    layer_idx = 0


def test_mask_forms_none_bool_float_agree():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 4, 7, 8, generator=g) for _ in range(3))
    mod = _Mod().eval()
    vis = torch.ones(7, 7, dtype=torch.bool).tril().view(1, 1, 7, 7)
    fmask = torch.where(vis, 0.0, torch.finfo(torch.float32).min)
    out_f, w_f = _capture_attention_forward(mod, q, k, v, fmask, scaling=0.3)
    out_b, w_b = _capture_attention_forward(mod, q, k, v, vis, scaling=0.3)
    out_n, w_n = _capture_attention_forward(mod, q, k, v, None, scaling=0.3, is_causal=True)
    for w, o in ((w_b, out_b), (w_n, out_n)):
        assert torch.equal(w, w_f) and torch.equal(o, out_f)
    assert torch.equal(w_f[..., ~vis[0, 0]], torch.zeros_like(w_f[..., ~vis[0, 0]]))
    # a non-causal module with no mask attends everywhere
    mod.is_causal = False
    _, w_full = _capture_attention_forward(mod, q, k, v, None, scaling=0.3)
    assert (w_full > 0).all()
    # padding: a bool mask that hides key 0 for batch row 1
    pad = vis.expand(2, 1, 7, 7).clone()
    pad[1, :, :, 0] = False
    _, w_pad = _capture_attention_forward(_Mod().eval(), q, k, v, pad, scaling=0.3)
    assert (w_pad[1, :, 1:, 0] == 0).all() and (w_pad[0, :, :, 0] > 0).all()


def test_padding_attention_mask_through_the_model(tiny_gpt2):
    ids = _ids(tiny_gpt2, batch=2, length=8)
    am = torch.ones(2, 8, dtype=torch.long)
    am[1, :3] = 0  # left padding
    recs = collect_attention(tiny_gpt2, ids, attention_mask=am)
    r = recs[0]
    assert not r.mask[1, 0, 5, :3].any() and r.mask[1, 0, 5, 3:6].all()
    assert (r.weights[1, :, 3:, :3] == 0).all()


# ------------------------------------------------------------------------------------------------------------------
# streaming, layer selection, restoration
# ------------------------------------------------------------------------------------------------------------------
def test_callback_streams_layer_by_layer(tiny_handle):
    order = []
    capture_attention(tiny_handle, _ids(tiny_handle), lambda r: order.append((r.layer, r.weights.shape[1])))
    assert order == [(i, tiny_handle.n_heads) for i in range(tiny_handle.n_layers)]
    only = collect_attention(tiny_handle, _ids(tiny_handle), layers=[1])
    assert [r.layer for r in only] == [1]
    neg = collect_attention(tiny_handle, _ids(tiny_handle), layers=-1)
    assert [r.layer for r in neg] == [tiny_handle.n_layers - 1]


def test_stop_early_skips_the_rest_of_the_forward(tiny_gpt2):
    seen = []
    out = capture_attention(tiny_gpt2, _ids(tiny_gpt2), seen.append, layers=[0], stop_early=True)
    assert out is None and [r.layer for r in seen] == [0]
    assert tiny_gpt2.model.config._attn_implementation != IMPLEMENTATION
    with pytest.raises(ValueError, match="stop_early"):
        capture_attention(tiny_gpt2, _ids(tiny_gpt2), seen.append, stop_early=True)


def test_implementation_restored_also_after_an_exception(tiny_handle):
    model = tiny_handle.model
    before = model.config._attn_implementation
    capture_attention(tiny_handle, _ids(tiny_handle), lambda r: None)
    assert model.config._attn_implementation == before

    def boom(rec):
        raise RuntimeError("callback failed")

    with pytest.raises(RuntimeError, match="callback failed"):
        capture_attention(tiny_handle, _ids(tiny_handle), boom)
    assert model.config._attn_implementation == before
    # and the model still runs normally
    with torch.no_grad():
        model(_ids(tiny_handle))


def test_output_dtype_and_keep_qk(tiny_gpt2):
    recs = collect_attention(tiny_gpt2, _ids(tiny_gpt2), output_dtype=torch.float64, keep_qk=False)
    r = recs[0]
    assert r.weights.dtype == r.logits.dtype == r.values.dtype == torch.float64 and r.mask.dtype == torch.bool
    assert r.queries is None and r.keys is None
    assert "LayerAttention(layer=0" in repr(r) and isinstance(r, LayerAttention) and r.n_heads == 4 and r.length == 23


def test_register_is_idempotent():
    assert register() == register() == IMPLEMENTATION
    from transformers import AttentionInterface

    assert IMPLEMENTATION in AttentionInterface._global_mapping
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS

    assert IMPLEMENTATION in ALL_MASK_ATTENTION_FUNCTIONS._global_mapping


# ------------------------------------------------------------------------------------------------------------------
# replacing the normaliser inside the live model
# ------------------------------------------------------------------------------------------------------------------
def test_temperature_replaces_softmax_in_the_live_model(tiny_handle):
    ids = _ids(tiny_handle)
    base = collect_attention(tiny_handle, ids)
    base_out = capture_attention(tiny_handle, ids, None)
    hot = []
    out = capture_attention(tiny_handle, ids, hot.append, temperature=0.5)
    # layer 0 sees the same input, so its logits agree; its weights are softmax(logits / 0.5)
    assert torch.equal(hot[0].logits, base[0].logits)
    assert torch.equal(hot[0].weights, nz.softmax(hot[0].logits, temperature=0.5, mask=hot[0].mask))
    assert hot[0].normalizer == "softmax" and hot[0].temperature == 0.5
    assert not torch.allclose(hot[0].weights, base[0].weights)
    # later layers and the output change: the replacement is live
    assert not torch.allclose(
        hot[1].logits[torch.isfinite(hot[1].logits)], base[1].logits[torch.isfinite(base[1].logits)]
    )
    assert not torch.allclose(out.logits, base_out.logits)


def test_named_normaliser_sparsemax(tiny_handle):
    ids = _ids(tiny_handle)
    recs = collect_attention(tiny_handle, ids, normalizer="sparsemax", temperature=0.05)
    for r in recs:
        assert r.normalizer == "sparsemax"
        torch.testing.assert_close(r.weights.sum(-1), torch.ones_like(r.weights.sum(-1)))
        assert ((r.weights == 0) & r.mask).any()  # sparse: visible positions with exactly zero weight
        assert (r.weights[~r.mask.expand_as(r.weights)] == 0).all()


def test_softmax_replacement_at_t1_matches_the_model(tiny_handle):
    ids = _ids(tiny_handle)
    base = collect_attention(tiny_handle, ids)
    rep = collect_attention(tiny_handle, ids, normalizer="softmax")
    for a, b in zip(base, rep):
        torch.testing.assert_close(a.weights, b.weights, rtol=0, atol=1e-6)


def _block_session(name, params, temperature):
    from attn_lib.capture import _Session

    return _Session(
        callback=None,
        normalizer=nz.get(name, **params),
        normalizer_name=name,
        temperature=temperature,
        layers=None,
        normalizer_layers=None,
        output_dtype=None,
        keep_qk=False,
        stop_after=None,
    )


def _block_masks(b, q, k):
    i, j = torch.arange(q)[:, None], torch.arange(k)[None, :]
    causal = (j <= i + (k - q)).view(1, 1, q, k)
    padded = causal.expand(b, 1, q, k).clone()
    padded[1, :, :, : k // 3] = False  # batch 1: its first keys are padding, its first rows see nothing
    keys = torch.ones(b, 1, 1, k, dtype=torch.bool)
    keys[..., -(k // 4) :] = False  # padding only, one mask row for every query row: the last keys are hidden
    keys[0, ..., :10] = False
    return {"all visible": None, "causal": causal, "causal + padding": padded, "padding, one row": keys}


@pytest.mark.parametrize(
    "name, params",
    [(n, {}) for n in nz.available(compared=True)] + [("topk", {"k": 1}), ("topk", {"k": 300})],
    ids=lambda v: v if isinstance(v, str) else ",".join(f"{a}={b}" for a, b in v.items()),
)
@pytest.mark.parametrize("elements", [2**12, 2**16, 2**19])
def test_blocked_normaliser_equals_one_call(name, params, elements, monkeypatch):
    """capture applies a replaced normaliser to blocks of query rows, cut after the last key a block sees (rounded up
    to 64 keys): bit for bit the weights of one call on the whole layer, for every compared normaliser, on causal,
    padded and unmasked logits, with blocks of 2 to 512 rows."""
    from attn_lib import capture

    b, h, q, k = 2, 4, 300, 320
    g = torch.Generator().manual_seed(1)
    scores = 4 * torch.randn(b, h, q, k, generator=g)
    sess = _block_session(name, params, temperature=0.7)
    for label, visible in _block_masks(b, q, k).items():
        whole = capture._hide(scores, visible)
        ref = sess.normalizer(whole, temperature=0.7, dim=-1, mask=capture._full_visibility(visible, whole))
        monkeypatch.setattr(capture, "_CPU_BLOCK_ELEMENTS", elements)
        blocks = capture._row_blocks(scores, visible)
        assert len(blocks) > 1 and blocks[-1][1] == q, label
        if visible is not None:
            assert blocks[0][2] < k, label  # the first block is cut
        got = capture._replaced_weights(sess, scores, visible, 0)
        assert torch.equal(got, ref), (label, float((got - ref).abs().max()))


def test_only_built_in_normalisers_in_float32_or_float64_run_in_blocks(monkeypatch):
    """A user's callable may not act row by row (a view of the whole layer, a length-dependent scale): it gets the
    whole layer in one call, and so do half-precision logits."""
    import functools

    from attn_lib import capture

    monkeypatch.setattr(capture, "_CPU_BLOCK_ELEMENTS", 2**12)
    b, h, q, k = 2, 2, 200, 200
    scores = torch.randn(b, h, q, k, generator=torch.Generator().manual_seed(3))
    causal = _block_masks(b, q, k)["causal"]
    shapes = []

    def whole_layer(logits, temperature=1.0, dim=-1, mask=None):
        shapes.append(tuple(logits.shape))
        flat = logits.reshape(-1, logits.shape[-1]) * math.log(logits.shape[-1])  # depends on the row length
        return nz.softmax(flat, temperature, mask=mask.expand_as(logits).reshape(flat.shape)).view(logits.shape)

    sess = _block_session("softmax", {}, 1.0)
    sess.normalizer, sess.normalizer_name = whole_layer, "whole_layer"
    got = capture._replaced_weights(sess, scores, causal, 0)
    assert shapes == [(b, h, q, k)]
    assert torch.equal(got, whole_layer(capture._hide(scores, causal), mask=causal))
    assert capture._row_wise(nz.get("topk", k=4), torch.float32) and capture._row_wise(nz.softmax, torch.float64)
    assert not capture._row_wise(nz.get("entmax15"), torch.bfloat16)
    assert not capture._row_wise(nz.get("general", F=torch.exp), torch.float32)
    assert not capture._row_wise(functools.partial(whole_layer), torch.float32)


def test_blocks_cover_every_row_and_every_visible_key(monkeypatch):
    from attn_lib import capture

    monkeypatch.setattr(capture, "_CPU_BLOCK_ELEMENTS", 2**14)
    scores = torch.zeros(2, 4, 300, 320)
    for visible in _block_masks(2, 300, 320).values():
        blocks = capture._row_blocks(scores, visible)
        assert [s for s, _, _ in blocks] == [0] + [e for _, e, _ in blocks[:-1]] and blocks[-1][1] == 300
        for s, e, w in blocks:
            assert w == 320 or w % 64 == 0
            if visible is not None:
                assert not torch.broadcast_to(visible, (2, 4, 300, 320))[..., s:e, w:].any()
    # accelerators: one block, the whole layer
    assert capture._row_blocks(torch.zeros(2, 4, 300, 320, device="meta"), None) == [(0, 300, 320)]


def test_blocked_capture_equals_one_block_in_the_model(tiny_handle, monkeypatch):
    from attn_lib import capture

    ids = _ids(tiny_handle, length=90)
    runs = []
    for elements in (2**40, 2**9):  # one block; blocks of 2 rows
        monkeypatch.setattr(capture, "_CPU_BLOCK_ELEMENTS", elements)
        recs = collect_attention(tiny_handle, ids, normalizer="entmax15", temperature=0.8)
        out = capture_attention(tiny_handle, ids, None, normalizer="softmax", temperature=0.6)
        runs.append((recs, out.logits))
    for a, b in zip(runs[0][0], runs[1][0]):
        assert torch.equal(a.weights, b.weights) and torch.equal(a.logits, b.logits)
    assert torch.equal(runs[0][1], runs[1][1])


def test_normalizer_layers_and_custom_callable(tiny_gpt2):
    ids = _ids(tiny_gpt2)
    base = collect_attention(tiny_gpt2, ids)
    calls = []

    def uniform(logits, temperature=1.0, dim=-1, mask=None):
        calls.append(temperature)
        m = mask.expand_as(logits).to(logits.dtype)
        return m / m.sum(dim, keepdim=True)

    recs = collect_attention(tiny_gpt2, ids, normalizer=uniform, normalizer_layers=[1], temperature=2.0)
    assert torch.equal(recs[0].weights, base[0].weights) and recs[0].normalizer == "model"
    assert recs[1].normalizer == "uniform" and calls == [2.0]
    row = recs[1].weights[0, 0, 4]
    torch.testing.assert_close(row[:5], torch.full((5,), 0.2))


# ------------------------------------------------------------------------------------------------------------------
# bad input
# ------------------------------------------------------------------------------------------------------------------
def test_length_beyond_context_is_a_clear_error(tiny_gpt2):
    with pytest.raises(ValueError, match=r"length=129 exceeds the context.*\[1, 128\]"):
        capture_attention(tiny_gpt2, torch.zeros(1, 129, dtype=torch.long), None)


@pytest.mark.parametrize(
    "ids, match",
    [
        (torch.zeros(1, 0, dtype=torch.long), "at least one token"),
        (torch.zeros(0, dtype=torch.long), "at least one token"),
        (torch.zeros(1, 4), "integer token ids"),
        (torch.zeros(1, 2, 3, dtype=torch.long), "1-D"),
        (torch.tensor([[1, 2, 256]]), r"token ids in \[0, 255\]"),
        (torch.tensor([[-1, 2]]), r"token ids in \[0, 255\]"),
        ("hello", "input_ids must be a tensor"),
    ],
)
def test_bad_input_ids(tiny_gpt2, ids, match):
    with pytest.raises(ValueError, match=match):
        capture_attention(tiny_gpt2, ids, None)


def test_list_input_ids_accepted(tiny_gpt2):
    recs = collect_attention(tiny_gpt2, [1, 2, 3])
    assert recs[0].weights.shape == (1, 4, 3, 3)


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"temperature": 0}, "temperature"),
        ({"temperature": -1.0}, "temperature"),
        ({"temperature": float("nan")}, "temperature"),
        ({"normalizer": "no-such-normaliser"}, "name must be one of"),
        ({"normalizer": 3}, "normalizer must be"),
        ({"layers": [5]}, r"layers must be an integer in \[-2, 1\]"),
        ({"layers": []}, "layers must be an integer or a non-empty list"),
        ({"normalizer_layers": ["x"]}, "normalizer_layers"),
        ({"callback": "print"}, "callback must be callable"),
    ],
)
def test_bad_capture_arguments(tiny_gpt2, kw, match):
    kw = dict(kw)
    cb = kw.pop("callback", lambda r: None)
    before = tiny_gpt2.model.config._attn_implementation
    with pytest.raises(ValueError, match=match):
        capture_attention(tiny_gpt2, [1, 2, 3], cb, **kw)
    assert tiny_gpt2.model.config._attn_implementation == before


# ------------------------------------------------------------------------------------------------------------------
# the offline stand-in (slow)
# ------------------------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_standin_capture_equals_eager_exactly(offline):
    from attn_lib.corpus import load_text, token_windows
    from attn_lib.models import load_model

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        h = load_model("gpt2", device="cpu")
    assert h.is_standin
    ids = token_windows(h.tokenizer, load_text("botchan"), 48, n_windows=2)
    ref = eager_reference(h, ids)
    n = 0

    def check(rec):
        nonlocal n
        assert torch.equal(rec.weights, ref.attentions[rec.layer])
        assert rec.values.shape == (2, 9, 48, 64)
        assert torch.equal(rec.values[:, 0], rec.values[:, 2]) and not torch.equal(rec.values[:, 2], rec.values[:, 3])
        n += 1

    out = capture_attention(h, ids, check)
    assert n == 30 and torch.equal(out.logits, ref.logits)


# ------------------------------------------------------------------------------------------------------------------
# more bad input (each used to be an AttributeError, TypeError or a misleading message)
# ------------------------------------------------------------------------------------------------------------------
def test_empty_list_input_ids_says_empty(tiny_gpt2):
    with pytest.raises(ValueError, match="input_ids must contain at least one token"):
        capture_attention(tiny_gpt2, [], None)  # was "must hold integer token ids (got dtype float32)"
    with pytest.raises(ValueError, match="input_ids must be a list of integer token ids"):
        capture_attention(tiny_gpt2, [[1, 2], [3]], None)


def test_list_attention_mask_is_accepted_and_checked(tiny_gpt2):
    ids = [[5, 6, 7, 8], [9, 10, 11, 12]]
    am = [[1, 1, 1, 1], [0, 0, 1, 1]]
    got = collect_attention(tiny_gpt2, ids, attention_mask=am)  # a list used to fail with AttributeError
    ref = collect_attention(tiny_gpt2, ids, attention_mask=torch.tensor(am))
    torch.testing.assert_close(got[1].weights, ref[1].weights, rtol=0, atol=0)
    assert (got[0].weights[1, :, 2:, :2] == 0).all()
    with pytest.raises(ValueError, match=r"attention_mask must have the shape of input_ids \(2, 4\)"):
        capture_attention(tiny_gpt2, ids, None, attention_mask=[[1, 1, 1], [1, 1, 1]])
    with pytest.raises(ValueError, match="attention_mask must hold only 0"):
        capture_attention(tiny_gpt2, ids, None, attention_mask=[[1, 1, 1, 1], [2, 1, 1, 1]])
    with pytest.raises(ValueError, match="attention_mask must be"):
        capture_attention(tiny_gpt2, ids, None, attention_mask="all")


def test_output_dtype_by_name(tiny_gpt2):
    recs = collect_attention(tiny_gpt2, [1, 2, 3], output_dtype="float64")  # was a TypeError inside the forward pass
    assert recs[0].weights.dtype == torch.float64 and recs[0].mask.dtype == torch.bool
    with pytest.raises(ValueError, match="output_dtype must be"):
        collect_attention(tiny_gpt2, [1, 2, 3], output_dtype="int8")
    with pytest.raises(ValueError, match="output_dtype must be a floating-point dtype"):
        collect_attention(tiny_gpt2, [1, 2, 3], output_dtype=torch.int64)


def test_normaliser_returning_the_wrong_shape_inside_the_model(tiny_gpt2):
    before = tiny_gpt2.model.config._attn_implementation

    def bad(logits, temperature=1.0, dim=-1, mask=None):
        return logits[..., :1]

    with pytest.raises(
        ValueError,
        match=r"normalizer 'bad' must return a tensor of weights with the shape of the "
        r"logits \(1, 4, 3, 3\) \(got \(1, 4, 3, 1\)\) in layer 0",
    ):
        capture_attention(tiny_gpt2, [1, 2, 3], None, normalizer=bad)
    with pytest.raises(ValueError, match="got float"):
        capture_attention(tiny_gpt2, [1, 2, 3], None, normalizer=lambda logits, **kw: 0.5)
    assert tiny_gpt2.model.config._attn_implementation == before
