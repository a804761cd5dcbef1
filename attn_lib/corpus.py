"""Text for the experiments (:func:`load_text`) and exact-length token windows of it (:func:`token_windows`).

* ``"war-and-peace"`` (default): Tolstoy, *War and Peace*, Louise and Aylmer Maude's translation, Project Gutenberg
  #2600, downloaded once when the network allows (not with ``ATTN_LIB_OFFLINE=1``) into ``<cache_dir>/texts/`` with a
  SHA-256 sidecar verified on every reuse; Gutenberg header and footer stripped, starting at "BOOK ONE: 1805".
  Offline, ``offline_ok=True`` gives the offline default, with a warning and a ``source`` that says so.
* a path to a UTF-8 text file (:func:`read_text_file`); a Gutenberg header and footer are stripped.
* ``"botchan"``, the offline default, shipped: Natsume Soseki, *Botchan (Master Darling)*, tr. Yasotaro Morri (1919),
  Project Gutenberg #8868, public domain (provenance and checksums: ``attn_lib/data/README.md``). About 65,000 GPT-2
  tokens of real English prose, but *not* Tolstoy: results on it are labelled with its name.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import re
import socket
import tempfile
import warnings
from importlib import resources
from pathlib import Path

import torch
from tqdm.auto import tqdm

from ._validation import check_bool, check_int, env_flag, expand_path
from .cache import cache_dir, format_bytes
from .errors import TextUnavailableError

__all__ = ["Text", "TextUnavailableError", "load_text", "available_texts", "token_windows"]

log = logging.getLogger(__name__)

WAR_AND_PEACE = "war-and-peace"
OFFLINE_DEFAULT = "botchan"
_WP_ALIASES = {"war-and-peace", "war_and_peace", "warandpeace", "war and peace", "pg2600", "gutenberg:2600", "2600"}
WAR_AND_PEACE_URLS = (
    "https://www.gutenberg.org/cache/epub/2600/pg2600.txt",
    "https://www.gutenberg.org/files/2600/2600-0.txt",
)
_WP_FILE = "pg2600.txt"
_DOWNLOAD_TIMEOUT_S = 30.0
_PROBE_TIMEOUT_S = 3.0
#: Largest text file read (bytes): 32 MiB, ten times War and Peace; a larger file is refused, not read.
MAX_TEXT_BYTES = 32 << 20

_SHIPPED = {
    OFFLINE_DEFAULT: {
        "file": "botchan.txt",
        "title": "Botchan (Master Darling) by Natsume Soseki, tr. Yasotaro Morri (1919), Project Gutenberg #8868",
        "first_chapter": re.compile(r"^CHAPTER I\.?\s*$", re.M),
    },
}


@dataclasses.dataclass(frozen=True)
class Text:
    """A text and where it came from. ``sha256`` is of the UTF-8 ``text`` (what result-cache keys use)."""

    name: str
    text: str
    sha256: str
    source: str

    @classmethod
    def from_string(cls, text: str, name: str = "string", source: str = "given string") -> Text:
        return cls(name=name, text=text, sha256=hashlib.sha256(text.encode("utf-8")).hexdigest(), source=source)

    def __len__(self) -> int:
        return len(self.text)

    def __repr__(self) -> str:
        return f"Text(name={self.name!r}, chars={len(self.text)}, sha256={self.sha256[:12]}..., source={self.source!r})"


# Line patterns (re.M) pad with ``[^\S\n]*``, never ``\s*``, which runs over all the blank lines that follow at every
# line start: quadratic in a run of blank lines (300,000 of them ran for minutes).
_H = r"[^\S\n]*"
_START = re.compile(rf"^{_H}\*{{3}}{_H}START OF (?:THE|THIS) PROJECT GUTENBERG E-?BOOK.*?\*{{3}}{_H}$", re.M | re.I)
_END = re.compile(rf"^{_H}\*{{3}}{_H}END OF (?:THE|THIS) PROJECT GUTENBERG E-?BOOK.*$", re.M | re.I)
_END_OLD = re.compile(rf"^{_H}End of (?:the )?Project Gutenberg(?:'s|’s)? .*$", re.M | re.I)
_PRODUCED = re.compile(r"\A\s*(?:Produced by|E-?text prepared by|Transcribed from)[^\n]*\n", re.I)


def _normalise(raw: str) -> str:
    return raw.lstrip("\ufeff").replace("\r\n", "\n").replace("\r", "\n")


def strip_gutenberg(raw: str) -> str:
    """The body of a Project Gutenberg plain-text ebook: header, producer credit, footer and licence removed (text
    without Gutenberg markers loses only a BOM and CRLF line ends)."""
    text = _normalise(raw)
    if m := _START.search(text):
        text = text[m.end() :]
    for end in (_END, _END_OLD):  # the current footer, then the old one
        if m := end.search(text):
            text = text[: m.start()]
    text = _PRODUCED.sub("", text, count=1)
    return text.strip() + "\n" if text.strip() else ""


def _wp_first_chapter(body: str) -> str:
    """Start War and Peace at "BOOK ONE: 1805" in the text proper (skipping the table of contents)."""
    if not (anchor := re.search(r"Well,\s+Prince,\s+so\s+Genoa\s+and\s+Lucca", body)):
        return body
    head = body[: anchor.start()]
    if starts := [m.start() for m in re.finditer(rf"^{_H}BOOK ONE[:.]?{_H}1805{_H}$", head, re.M)]:
        return body[starts[-1] :].lstrip()
    chapters = [m.start() for m in re.finditer(rf"^{_H}CHAPTER I\.?{_H}$", head, re.M)]
    return body[chapters[-1] :].lstrip() if chapters else body[anchor.start() :]


def available_texts() -> dict[str, str]:
    """Names accepted by :func:`load_text` (besides file paths), with a description."""
    return {
        WAR_AND_PEACE: "Tolstoy, War and Peace (Project Gutenberg #2600); downloaded once, needs network the first time",
        **{k: v["title"] + " -- shipped, offline" for k, v in _SHIPPED.items()},
    }


def read_text_file(name: str, path: Path) -> str:
    """The UTF-8 text of ``path``; ``ValueError`` naming ``name`` for a file over :data:`MAX_TEXT_BYTES` (not read
    beyond it) or not text (NUL bytes, not UTF-8)."""
    with open(path, "rb") as f:
        data = f.read(MAX_TEXT_BYTES + 1)
    if len(data) > MAX_TEXT_BYTES:
        size = max(len(data), path.stat().st_size)
        raise ValueError(f"{name} is {format_bytes(size)}, over the {format_bytes(MAX_TEXT_BYTES)} cap on a text")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{name} is not a text file: not UTF-8 ({exc})") from None
    if "\0" in text:
        raise ValueError(f"{name} is not a text file: it holds NUL bytes, as binary files do")
    return text


def _read_shipped(name: str) -> Text:
    info = _SHIPPED[name]
    body = strip_gutenberg(resources.files("attn_lib").joinpath("data", info["file"]).read_text(encoding="utf-8"))
    body = body[m.start() :] if (m := info["first_chapter"].search(body)) else body
    return Text.from_string(body, name=name, source=f"{info['title']}; shipped in attn_lib/data/{info['file']}")


def _host_reachable(host: str, timeout: float = _PROBE_TIMEOUT_S) -> bool:
    try:
        with socket.create_connection((host, 443), timeout=timeout):
            return True
    except OSError:
        return False


def _download(url: str, dest: Path) -> None:
    """Download ``url`` to ``dest`` atomically, with a tqdm progress bar."""
    import urllib.request  # only when a text is downloaded (it pulls in http and ssl)

    dest.parent.mkdir(parents=True, exist_ok=True)
    req = urllib.request.Request(url, headers={"User-Agent": "attn_lib (research reproduction)"})
    fd, tmp = tempfile.mkstemp(prefix=".dl-", dir=dest.parent)
    try:
        with urllib.request.urlopen(req, timeout=_DOWNLOAD_TIMEOUT_S) as resp, os.fdopen(fd, "wb") as out:
            total = int(resp.headers.get("Content-Length") or 0) or None
            with tqdm(total=total, unit="B", unit_scale=True, desc=f"downloading {dest.name}", leave=False) as bar:
                while chunk := resp.read(1 << 16):
                    out.write(chunk)
                    bar.update(len(chunk))
        os.replace(tmp, dest)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _cached_war_and_peace() -> Path | None:
    """Path of a verified cached download, or None (a corrupted one is deleted)."""
    path = cache_dir() / "texts" / _WP_FILE
    side = path.with_suffix(".sha256.json")
    if not path.is_file():
        return None
    try:
        meta = json.loads(side.read_text())
        digest = hashlib.sha256(read_text_file("the cached War and Peace", path).encode("utf-8")).hexdigest()
        if digest != meta["sha256"]:
            raise ValueError("checksum mismatch")
    except (OSError, ValueError, KeyError) as exc:
        log.warning(
            "attn_lib: cached War and Peace at %s failed verification (%s); it will be downloaded again", path, exc
        )
        for p in (path, side):
            with contextlib.suppress(OSError):
                p.unlink()
        return None
    return path


def _war_and_peace(offline_ok: bool) -> Text:
    path = _cached_war_and_peace()
    if path is None:
        errors = []
        if env_flag("ATTN_LIB_OFFLINE"):
            errors.append("ATTN_LIB_OFFLINE is set")
        elif not _host_reachable("www.gutenberg.org"):
            errors.append("www.gutenberg.org is unreachable")
        else:
            dest = cache_dir() / "texts" / _WP_FILE
            for url in WAR_AND_PEACE_URLS:
                try:
                    _download(url, dest)
                    digest = hashlib.sha256(dest.read_bytes()).hexdigest()
                    dest.with_suffix(".sha256.json").write_text(json.dumps({"url": url, "sha256": digest}))
                    path = dest
                    break
                except OSError as exc:
                    errors.append(f"{url}: {exc}")
        if path is None:
            why = "; ".join(errors)
            if not offline_ok:
                raise TextUnavailableError(
                    f"War and Peace (Project Gutenberg #2600) is not cached and cannot be downloaded ({why}). "
                    f"Download {WAR_AND_PEACE_URLS[0]} by hand and pass its path as source, or use "
                    f"source={OFFLINE_DEFAULT!r} (shipped)."
                )
            fallback = _read_shipped(OFFLINE_DEFAULT)
            msg = (
                f"War and Peace is not available offline ({why}); using the shipped offline default "
                f"{OFFLINE_DEFAULT!r}: {_SHIPPED[OFFLINE_DEFAULT]['title']}"
            )
            warnings.warn(msg, UserWarning, stacklevel=3)
            return dataclasses.replace(fallback, source=fallback.source + " (offline fallback for war-and-peace)")
    body = _wp_first_chapter(strip_gutenberg(read_text_file("the cached War and Peace", path)))
    return Text.from_string(
        body, name=WAR_AND_PEACE, source=f"Tolstoy, War and Peace, Project Gutenberg #2600, cached at {path}"
    )


def load_text(source: str | os.PathLike = WAR_AND_PEACE, *, offline_ok: bool = True) -> Text:
    """Load ``"war-and-peace"``, ``"botchan"`` or a text file (module docstring); ``ValueError`` for an unknown name,
    a missing file or an empty text, :class:`TextUnavailableError` for no War and Peace with ``offline_ok=False``."""
    check_bool("offline_ok", offline_ok)
    if isinstance(source, Text):
        return source
    if not isinstance(source, (str, os.PathLike)) or (isinstance(source, str) and not source.strip()):
        raise ValueError(
            f"source must be {WAR_AND_PEACE!r}, {OFFLINE_DEFAULT!r} or a path to a text file (got {source!r})"
        )
    key = os.fspath(source).strip()
    if key.lower() in _WP_ALIASES:
        text = _war_and_peace(offline_ok)
    elif key.lower() in _SHIPPED:
        text = _read_shipped(key.lower())
    else:
        path = expand_path("source", key)
        if not path.exists():
            raise ValueError(f"source={key!r} is neither a known text {sorted(available_texts())} nor an existing file")
        if not path.is_file():
            raise ValueError(f"source={key!r} is not a regular file")
        raw = read_text_file(f"source={key!r}", path)
        body = strip_gutenberg(raw) if _START.search(raw) else _normalise(raw)
        text = Text.from_string(body, name=path.stem, source=f"local file {path.resolve()}")
    if not text.text.strip():
        raise ValueError(f"source={key!r}: the text is empty (after stripping any Gutenberg header and footer)")
    return text


def _as_str(text) -> str:
    """The characters of ``text`` (a :class:`Text` or str); ``ValueError`` for anything else."""
    s = text.text if isinstance(text, Text) else text
    if not isinstance(s, str):
        raise ValueError(f"text must be a Text or a str (got {type(text).__name__})")
    return s


def tokenize(tokenizer, text, max_tokens: int | None = None) -> list[int]:
    """Token ids of ``text`` (a :class:`Text` or str), without special tokens. With ``max_tokens``, only a prefix
    large enough for that many is tokenised (cut at whitespace, with a margin: the first ``max_tokens`` ids of the
    whole text in practice)."""
    from .models.handle import check_tokenizer, encode_plain  # the Hugging Face layer: only when tokenizing

    check_tokenizer(tokenizer)
    s = _as_str(text)
    if max_tokens is None:
        return encode_plain(tokenizer, s)
    max_tokens = check_int("max_tokens", max_tokens, low=1)  # -5 returned all ids but the last 5; 2.5 a TypeError
    chars = max(4096, 8 * max_tokens)
    while True:
        if chars >= len(s):
            return encode_plain(tokenizer, s)[:max_tokens]
        cut = s.rfind(" ", 0, chars)
        cut = chars if cut <= 0 else cut
        ids = encode_plain(tokenizer, s[:cut])
        if len(ids) >= max_tokens + 64:  # margin: the last word(s) before the cut may merge differently
            return ids[:max_tokens]
        chars *= 2


def token_windows(
    tokenizer, text, length: int, n_windows: int = 1, start: int = 0, stride: int | None = None
) -> torch.Tensor:
    """``(n_windows, length)`` LongTensor: window ``i`` holds tokens ``start + i*stride`` to ``start + i*stride +
    length - 1`` of the text tokenised without special tokens (no BOS); ``stride`` defaults to ``length`` (adjacent
    windows). ``ValueError`` if the text is empty or has too few tokens, or the tokenizer is empty
    (:func:`attn_lib.models.handle.check_tokenizer`)."""
    length = check_int("length", length, low=1)
    n_windows = check_int("n_windows", n_windows, low=1)
    start = check_int("start", start, low=0)
    stride = length if stride is None else check_int("stride", stride, low=1)
    s = _as_str(text)
    name = text.name if isinstance(text, Text) else "text"
    if not s.strip():
        raise ValueError(f"text {name!r} is empty")
    needed = start + (n_windows - 1) * stride + length
    ids = tokenize(tokenizer, s, max_tokens=needed)
    if len(ids) < needed:
        most = (len(ids) - start - length) // stride + 1 if len(ids) >= start + length else 0
        raise ValueError(
            f"text {name!r} has only {len(ids)} tokens, but start={start} + (n_windows-1)*stride="
            f"{(n_windows - 1) * stride} + length={length} needs {needed}; length must be <= {max(len(ids) - start, 0)}"
            f" for one window, n_windows <= {most} at this length"
        )
    t = torch.tensor(ids, dtype=torch.long)
    return torch.stack([t[start + i * stride : start + i * stride + length] for i in range(n_windows)])
