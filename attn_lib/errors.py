"""The exceptions a caller of attn_lib catches when a model or a text cannot be had (standard library only).

They live apart from :mod:`attn_lib.models` and :mod:`attn_lib.corpus`, which import torch, so that the command line
can name them without importing torch (``attn-lib --version``, a usage error and ``--help`` stay fast). Both modules
re-export them: ``attn_lib.models.ModelUnavailableError`` is this class.
"""

from __future__ import annotations

__all__ = ["ModelUnavailableError", "TextUnavailableError"]


class ModelUnavailableError(RuntimeError):
    """The requested model is neither cached locally nor downloadable (and no fallback applies)."""


class TextUnavailableError(RuntimeError):
    """The requested text cannot be obtained (no network, no cached copy) and no fallback was allowed."""
