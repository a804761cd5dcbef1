"""Toy data and statistics for the chapter on multihead (see attn_lib.toy)."""

from __future__ import annotations

__all__: list[str] = []
