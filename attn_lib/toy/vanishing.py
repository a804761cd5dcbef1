"""Toy data and statistics for the chapter on vanishing (see attn_lib.toy)."""

from __future__ import annotations

__all__: list[str] = []
