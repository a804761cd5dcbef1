"""attn_lib: executable companion to "Limitations of Normalization in Attention Mechanism".

Layers: the maths (:mod:`~attn_lib.normalizers`, :mod:`~attn_lib.jacobian`, :mod:`~attn_lib.theory`); model access,
the only part touching Hugging Face (:mod:`~attn_lib.models`, :mod:`~attn_lib.capture`, :mod:`~attn_lib.corpus`,
:mod:`~attn_lib.cache`); experiments on both (:mod:`~attn_lib.metrics`, :mod:`~attn_lib.experiments`); figures
(:mod:`~attn_lib.layout`, :mod:`~attn_lib.provenance`). What only the book uses is in :mod:`attn_lib.book`, which
nothing here imports. ``import attn_lib`` is fast (heavy submodules load lazily) and changes nothing in the process.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

_LAZY = {
    "load_model": ("attn_lib.models", "load_model"),
    "resolve_device": ("attn_lib.models", "resolve_device"),
    "capture_attention": ("attn_lib.capture", "capture_attention"),
    "collect_attention": ("attn_lib.capture", "collect_attention"),
    "load_text": ("attn_lib.corpus", "load_text"),
    "token_windows": ("attn_lib.corpus", "token_windows"),
    "ResultCache": ("attn_lib.cache", "ResultCache"),
    "run_all": ("attn_lib.experiments", "run_all"),
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str):
    if name in _LAZY:
        mod, attr = _LAZY[name]
        return getattr(importlib.import_module(mod), attr)
    raise AttributeError(f"module 'attn_lib' has no attribute {name!r}")
