"""The exceptions raised when a model or a text cannot be had; apart from :mod:`attn_lib.models` and
:mod:`attn_lib.corpus` (which re-export them) so that the command line names them without importing torch."""

from __future__ import annotations

__all__ = ["ModelUnavailableError", "TextUnavailableError"]


class ModelUnavailableError(RuntimeError):
    """The requested model is neither cached locally nor downloadable (and no fallback applies)."""


class TextUnavailableError(RuntimeError):
    """The requested text cannot be obtained (no network, no cached copy) and no fallback was allowed."""
