"""attn_lib.corpus: the shipped offline text, Gutenberg stripping, War and Peace (download mocked), windows."""

from __future__ import annotations

import hashlib
import io
import json
import re
import typing
from importlib import resources

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import attn_lib.corpus as C
from attn_lib.models.handle import byte_tokenizer

SYNTHETIC_WP = (
    "\ufeffThe Project Gutenberg eBook of War and Peace, by Leo Tolstoy\r\n\r\n"
    "This eBook is for the use of anyone anywhere...\r\n\r\n"
    "*** START OF THE PROJECT GUTENBERG EBOOK WAR AND PEACE ***\r\n"
    "Produced by An Anonymous Volunteer, and David Widger\r\n\r\n"
    "WAR AND PEACE\r\n\r\nBy Leo Tolstoy/Tolstoi\r\n\r\n Contents\r\n\r\n BOOK ONE: 1805\r\n\r\n CHAPTER I\r\n\r\n"
    " CHAPTER II\r\n\r\n"
    "BOOK ONE: 1805\r\n\r\n\r\nCHAPTER I\r\n\r\n"
    "“Well, Prince, so Genoa and Lucca are now just family estates of the\r\nBuonapartes. But I warn you...\r\n"
    + "It was in July, 1805, and the speaker was the well-known Anna Pávlovna Schérer. "
    * 40
    + "\r\n\r\n"
    "*** END OF THE PROJECT GUTENBERG EBOOK WAR AND PEACE ***\r\n\r\n"
    "Updated editions will replace the previous one... Project Gutenberg License ...\r\n"
)


# ------------------------------------------------------------------------------------------------------------------
# the shipped offline default
# ------------------------------------------------------------------------------------------------------------------
def test_shipped_file_matches_its_documented_checksum():
    data = resources.files("attn_lib").joinpath("data", "botchan.txt").read_bytes()
    readme = resources.files("attn_lib").joinpath("data", "README.md").read_text()
    documented = re.search(r"Shipped file\.\*\* [\d,]+ bytes, SHA-256 `([0-9a-f]{64})`", readme).group(1)
    assert hashlib.sha256(data).hexdigest() == documented
    assert b"\r" not in data and not data.startswith(b"\xef\xbb\xbf")


def test_offline_default_is_real_prose_without_gutenberg_boilerplate():
    t = C.load_text("botchan")
    assert t.name == "botchan" and "Project Gutenberg #8868" in t.source
    assert t.text.startswith("CHAPTER I\nBecause of an hereditary recklessness")
    assert t.text.rstrip().endswith("--(THE END)--")
    assert "Project Gutenberg" not in t.text and "*** START" not in t.text
    assert t.sha256 == hashlib.sha256(t.text.encode()).hexdigest()
    assert len(t.text.split()) > 40_000
    # many exact 1024-token windows (byte tokenizer: every byte is a token)
    w = C.token_windows(byte_tokenizer(), t, 1024, n_windows=50)
    assert w.shape == (50, 1024)


def test_available_texts_lists_both():
    names = C.available_texts()
    assert set(names) >= {"war-and-peace", "botchan"}


# ------------------------------------------------------------------------------------------------------------------
# Gutenberg stripping
# ------------------------------------------------------------------------------------------------------------------
def test_strip_gutenberg_header_footer_bom_crlf():
    body = C.strip_gutenberg(SYNTHETIC_WP)
    assert body.startswith("WAR AND PEACE\n") and "Produced by" not in body
    assert "START OF" not in body and "END OF" not in body and "License" not in body
    assert "\r" not in body and "\ufeff" not in body
    assert body.endswith("Schérer.\n")


def test_strip_gutenberg_old_style_footer_and_plain_text():
    raw = (
        "*** START OF THIS PROJECT GUTENBERG EBOOK X ***\nProduced by Someone\nLine one.\nLine two.\n"
        "End of Project Gutenberg's X, by Y\n*** END OF THIS PROJECT GUTENBERG EBOOK X ***\nlicence\n"
    )
    assert C.strip_gutenberg(raw) == "Line one.\nLine two.\n"
    assert C.strip_gutenberg("Just prose.\nMore prose.\n") == "Just prose.\nMore prose.\n"
    assert C.strip_gutenberg("") == ""


def test_war_and_peace_starts_at_the_first_chapter_not_the_contents():
    body = C._wp_first_chapter(C.strip_gutenberg(SYNTHETIC_WP))
    assert body.startswith("BOOK ONE: 1805\n\n\nCHAPTER I\n\n“Well, Prince, so Genoa")


# ------------------------------------------------------------------------------------------------------------------
# War and Peace: cache, download (mocked), offline fallback
# ------------------------------------------------------------------------------------------------------------------
def test_war_and_peace_offline_falls_back_with_a_warning(tmp_cache, offline):
    with pytest.warns(UserWarning, match="offline default 'botchan'"):
        t = C.load_text("war-and-peace")
    assert t.name == "botchan" and "offline fallback for war-and-peace" in t.source


def test_war_and_peace_offline_not_ok_raises(tmp_cache, offline):
    with pytest.raises(C.TextUnavailableError, match="pg2600"):
        C.load_text("war-and-peace", offline_ok=False)


class _FakeResponse(io.BytesIO):
    headers: typing.ClassVar[dict] = {"Content-Length": None}

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()


def test_war_and_peace_download_cache_and_verification(tmp_cache, monkeypatch):
    import urllib.request

    monkeypatch.delenv("ATTN_LIB_OFFLINE", raising=False)
    monkeypatch.setattr(C, "_host_reachable", lambda host, timeout=None: True)
    urls = []

    def fake_urlopen(req, timeout=None):
        urls.append(req.full_url)
        return _FakeResponse(SYNTHETIC_WP.encode("utf-8"))

    monkeypatch.setattr(urllib.request, "urlopen", fake_urlopen)
    t = C.load_text("war-and-peace")
    assert urls == [C.WAR_AND_PEACE_URLS[0]]
    assert t.name == "war-and-peace" and t.text.startswith("BOOK ONE: 1805") and "Gutenberg" in t.source
    cached = tmp_cache / "texts" / "pg2600.txt"
    side = json.loads(cached.with_suffix(".sha256.json").read_text())
    assert side["sha256"] == hashlib.sha256(cached.read_bytes()).hexdigest()
    assert not [p for p in cached.parent.iterdir() if p.name.startswith(".dl-")]
    # second load: from the cache, no download
    assert C.load_text("pg2600") == t and len(urls) == 1
    # a corrupted copy is never trusted: deleted and downloaded again
    cached.write_text("tampered", encoding="utf-8")
    assert C.load_text("war-and-peace").sha256 == t.sha256 and len(urls) == 2


def test_war_and_peace_corrupted_copy_offline_falls_back(tmp_cache, offline):
    d = tmp_cache / "texts"
    d.mkdir(parents=True)
    (d / "pg2600.txt").write_text(SYNTHETIC_WP)
    (d / "pg2600.sha256.json").write_text(json.dumps({"sha256": "0" * 64}))
    with pytest.warns(UserWarning):
        t = C.load_text("war-and-peace")
    assert t.name == "botchan" and not (d / "pg2600.txt").exists()


# ------------------------------------------------------------------------------------------------------------------
# local files and bad sources
# ------------------------------------------------------------------------------------------------------------------
def test_local_files(tmp_path):
    plain = tmp_path / "notes.txt"
    plain.write_text("Some prose.\r\nMore prose.\r\n", encoding="utf-8")
    t = C.load_text(str(plain))
    assert t.name == "notes" and t.text == "Some prose.\nMore prose.\n" and "local file" in t.source
    pg = tmp_path / "pg.txt"
    pg.write_text(SYNTHETIC_WP, encoding="utf-8")
    assert C.load_text(pg).text.startswith("WAR AND PEACE")


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda p: p / "missing.txt", "neither a known text"),
        (lambda p: p, "not a regular file"),
        (lambda p: (p / "empty.txt", (p / "empty.txt").write_text(""))[0], "empty"),
        (lambda p: (p / "blank.txt", (p / "blank.txt").write_text(" \n\n "))[0], "empty"),
        (
            lambda p: (
                p / "gut.txt",
                (p / "gut.txt").write_text(
                    "*** START OF THE PROJECT GUTENBERG EBOOK X ***\n\n*** END OF THE PROJECT GUTENBERG EBOOK X ***\n"
                ),
            )[0],
            "empty",
        ),
        (lambda p: (p / "bin.txt", (p / "bin.txt").write_bytes(b"\xff\xfe\x00bad"))[0], "not UTF-8"),
    ],
)
def test_bad_sources(tmp_path, make, match):
    with pytest.raises(ValueError, match=match):
        C.load_text(str(make(tmp_path)))


def test_a_file_over_the_cap_is_refused_unread(tmp_path, monkeypatch):
    """A 64 GiB sparse file ended in a MemoryError (or took the machine's memory): now a ValueError naming the source,
    the size and the cap, before reading more than the cap."""
    big = tmp_path / "big.txt"
    with open(big, "wb") as f:
        f.truncate(64 << 30)
    with pytest.raises(ValueError, match=r"^source='.*big.txt' is 64.0 GiB, over the 32.0 MiB cap on a text$"):
        C.load_text(str(big))
    monkeypatch.setattr(C, "MAX_TEXT_BYTES", 10)
    (tmp_path / "ten.txt").write_text("0123456789")
    assert C.load_text(str(tmp_path / "ten.txt")).text == "0123456789"  # the cap itself is allowed
    (tmp_path / "eleven.txt").write_text("0123456789a")
    with pytest.raises(ValueError, match="eleven.txt' is 11 B, over the 10 B cap"):
        C.load_text(str(tmp_path / "eleven.txt"))


@given(st.binary(min_size=1, max_size=200))
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_property_files_that_are_not_text_are_value_errors(tmp_path, data):
    """Any bytes: text (UTF-8, no NUL) loads as its characters; anything else is a ValueError saying why."""
    f = tmp_path / "f.txt"
    f.write_bytes(data)
    try:
        text = data.decode("utf-8")
        ok = "\0" not in text
    except UnicodeDecodeError:
        ok = False
    if not ok:
        with pytest.raises(ValueError, match=r"is not a text file: (not UTF-8|it holds NUL bytes)"):
            C.load_text(str(f))
    elif text.strip():
        assert C.load_text(str(f)).text == C._normalise(text)


@pytest.mark.parametrize("bad", ["", 42, None])
def test_bad_source_type(bad):
    with pytest.raises(ValueError, match="source must be"):
        C.load_text(bad)


def test_bad_offline_ok():
    with pytest.raises(ValueError, match="offline_ok"):
        C.load_text("botchan", offline_ok="no")


# ------------------------------------------------------------------------------------------------------------------
# windows
# ------------------------------------------------------------------------------------------------------------------
TEXT = C.Text.from_string("It was in July, 1805, and the speaker was the well-known Anna Pavlovna. " * 20, name="t")


def test_windows_are_consecutive_and_exact():
    tok = byte_tokenizer()
    full = tok.encode(TEXT.text, add_special_tokens=False)
    w = C.token_windows(tok, TEXT, 100, n_windows=3)
    assert w.dtype == torch.long and w.shape == (3, 100)
    assert w.flatten().tolist() == full[:300]
    w2 = C.token_windows(tok, TEXT.text, 50, n_windows=4, start=7, stride=20)
    for i in range(4):
        assert w2[i].tolist() == full[7 + 20 * i : 57 + 20 * i]


def test_prefix_tokenisation_equals_full_tokenisation():
    from attn_lib.models.handle import byte_tokenizer as bt

    t = C.load_text("botchan")
    tok = bt()
    assert C.tokenize(tok, t, max_tokens=5000) == C.tokenize(tok, t)[:5000]


def test_text_too_short_is_a_clear_error():
    tok = byte_tokenizer()
    n = len(TEXT.text.encode())
    with pytest.raises(ValueError, match=rf"only {n} tokens.*length must be <= {n}"):
        C.token_windows(tok, TEXT, n + 1)
    with pytest.raises(ValueError, match="n_windows <= 2"):
        C.token_windows(tok, TEXT, 600, n_windows=3)


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"length": 0}, "length"),
        ({"length": 1.5}, "length"),
        ({"length": 8, "n_windows": 0}, "n_windows"),
        ({"length": 8, "start": -1}, "start"),
        ({"length": 8, "stride": 0}, "stride"),
    ],
)
def test_bad_window_arguments(kw, match):
    with pytest.raises(ValueError, match=match):
        C.token_windows(byte_tokenizer(), TEXT, **kw)


def test_empty_text_and_empty_tokenizer():
    with pytest.raises(ValueError, match="empty"):
        C.token_windows(byte_tokenizer(), "   ", 4)
    with pytest.raises(ValueError, match="must be a Text or a str"):
        C.token_windows(byte_tokenizer(), 123, 4)

    class EmptyTok:  # what GPT2TokenizerFast.from_pretrained("gpt2") returns offline
        def __len__(self):
            return 1

        def encode(self, text, add_special_tokens=True):
            return []

    with pytest.raises(ValueError, match="tokenizer is empty"):
        C.token_windows(EmptyTok(), TEXT, 4)
