"""Converting the offline stand-in from its GGUF file: transformers' GGUF loading, with its repeated parsing shared."""

from __future__ import annotations

import contextlib
import functools
import os

__all__ = ["gguf_read_once"]


@contextlib.contextmanager
def gguf_read_once():
    """While converting: one ``gguf.GGUFReader`` per file and one tensor-name map per (architecture, blocks).

    transformers parses the GGUF file three times (tokenizer, config, weights; each parse walks the 49 152-token
    vocabulary field by field) and rebuilds gguf's ``TensorNameMap`` for every module it maps (397 times). Both are
    pure functions of their arguments, read only afterwards, and transformers imports them from ``gguf`` at each
    call, so they are shared here for the duration of the conversion: 23-24 s -> 10.4-10.7 s on the 2-core VM, the
    same files byte for byte (``tests/test_models.py::test_standin_conversion_is_a_note_not_stderr``).
    Without ``gguf`` (transformers then fails with its own message) nothing is changed.
    """
    try:
        import gguf as _gguf  # only while converting: the stand-in's loader needs it, import attn_lib does not
    except ImportError:  # pragma: no cover - gguf comes with the dependencies
        yield
        return
    real_reader, real_map = _gguf.GGUFReader, _gguf.get_tensor_name_map
    open_once = functools.cache(real_reader)

    def reader(path, mode="r"):
        return open_once(os.fspath(path), mode)  # a str and a Path of one file: one parse

    _gguf.GGUFReader, _gguf.get_tensor_name_map = reader, functools.cache(real_map)
    try:
        yield
    finally:
        _gguf.GGUFReader, _gguf.get_tensor_name_map = real_reader, real_map
