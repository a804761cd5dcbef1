"""The book's repository URL and the commit or tag it was built from, ``repository.url`` and ``repository.ref`` of
``_config.yml``: the one place that reads and validates them.

Every writer of the URL reads it here: the chapters' and the assignments' Colab set-up cells (``tools/chapters.py``,
``tools/assignments.py``), the student edition's check (``tools/student_book.py``) and the ``{{ publication }}`` note
of the build (``book/_ext/publication.py``). A cell pastes it as a Python literal (:func:`python_literal`), never
between hand-written quotes, so that even a value that got past the check could not become code in a reader's cell.

A valid URL is ``""`` (a book that is not published) or ``https://HOST/OWNER/NAME`` in ASCII: HOST a dotted DNS name
(letters, digits, hyphens), OWNER and NAME letters, digits, ``_``, ``.`` and ``-`` (not ``.`` or ``..``), with no
query, fragment, credentials, port or trailing slash. ASCII only, so that a look-alike host in another script
(``gіthub.com`` with a Cyrillic ``і``) is refused rather than published.

A valid ref is ``""`` (with an empty URL only), a commit (40 lowercase hexadecimal digits, as ``git rev-parse HEAD``
and ``${{ github.sha }}`` write it) or a tag name (ASCII letters, digits, ``.``, ``_``, ``-`` and ``/``, starting
with a letter or digit, at most 100 characters, no ``..``, ``//``, trailing ``/`` or ``.``, or ``.lock`` ending). A
published book names both: its install cells take ``attn_lib @ git+URL@REF``, the library the book was built from,
never the default branch, which may move during a course.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

_HOST = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+"
_PART = r"[A-Za-z0-9_.-]{1,100}"
PATTERN = re.compile(rf"https://{_HOST}/{_PART}/{_PART}", re.ASCII)
FORM = "https://HOST/OWNER/NAME in ASCII (HOST a DNS name; OWNER, NAME of letters, digits, '_', '.', '-') or ''"
COMMIT = re.compile(r"[0-9a-f]{40}", re.ASCII)
TAG = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]{0,99}", re.ASCII)
REF_FORM = (
    "a commit (40 lowercase hex digits) or a tag name (letters, digits, '.', '_', '-', '/'; at most 100 characters)"
)


def check_url(url: object, where: str = "url") -> str:
    """``url`` if it is a valid repository URL (see the module), else ``ValueError`` naming ``where`` and the form."""
    if not isinstance(url, str):
        raise ValueError(f"{where} must be a string, {FORM} (got {type(url).__name__} {url!r})")
    if url and (not PATTERN.fullmatch(url) or any(p in (".", "..") for p in url.split("/")[3:])):
        raise ValueError(f"{where} must be {FORM} (got {url!r})")
    return url


def check_ref(ref: object, url: str, where: str = "ref") -> str:
    """``ref`` if it is a valid commit or tag for the (checked) repository URL ``url`` (see the module): ``""`` exactly
    when ``url`` is ``""``. Else ``ValueError`` naming ``where`` and the form."""
    if not isinstance(ref, str):
        raise ValueError(f"{where} must be a string, {REF_FORM} (got {type(ref).__name__} {ref!r})")
    if not url:
        if ref:
            raise ValueError(f"{where} must be '' while the repository URL is '' (got {ref!r})")
        return ref
    if not ref:
        raise ValueError(
            f"{where} must name the commit or tag the book is built from, {REF_FORM}: a published book installs "
            "attn_lib at that ref, not from the default branch (got '')"
        )
    # a commit as git writes it; otherwise a tag name, which must not look like a commit in capitals
    looks_like_commit = re.fullmatch(r"[0-9A-Fa-f]{40}", ref, re.ASCII) is not None
    bad_tag = (
        looks_like_commit
        or not TAG.fullmatch(ref)
        or any(part in ref for part in ("..", "//", "/."))
        or ref.endswith(("/", ".", ".lock"))
    )
    if not COMMIT.fullmatch(ref) and bad_tag:
        raise ValueError(f"{where} must be {REF_FORM} (got {ref!r})")
    return ref


def _repository(root: Path) -> tuple[Path, dict]:
    config = Path(root) / "_config.yml"
    try:
        data = yaml.safe_load(config.read_text(encoding="utf-8")) or {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ValueError(f"cannot read {config}: {exc}") from None
    repository = data.get("repository") if isinstance(data, dict) else None
    return config, repository if isinstance(repository, dict) else {}


def read_url(root: Path) -> str:
    """``repository.url`` of ``root/_config.yml``, validated (``""`` when it is empty or absent)."""
    config, repository = _repository(root)
    url = repository.get("url")
    return check_url("" if url is None else url, f"repository.url of {config}")


def read_ref(root: Path) -> str:
    """``repository.ref`` of ``root/_config.yml`` (``""`` when it is empty or absent), validated against the URL:
    a commit or tag with a URL, ``""`` without one."""
    config, repository = _repository(root)
    ref = repository.get("ref")
    return check_ref("" if ref is None else ref, read_url(root), f"repository.ref of {config}")


def python_literal(url: str) -> str:
    """``url`` (checked) as a Python string literal, with its quotes: what a Colab cell's ``REPO = ...`` holds."""
    return json.dumps(check_url(url))


def fill_template(template: str, url: str, ref: str) -> str:
    """``template`` (a Colab set-up cell) with its ``"{repository_url}"`` and ``"{repository_ref}"`` (the quotes
    included) as the literals of ``url`` and ``ref`` (both checked)."""
    for field in ("repository_url", "repository_ref"):
        if f'"{{{field}}}"' not in template:
            raise ValueError(f'the Colab set-up template must hold "{{{field}}}" (REPO and REF of the cell)')
    ref = json.dumps(check_ref(ref, check_url(url)))
    return template.replace('"{repository_url}"', python_literal(url)).replace('"{repository_ref}"', ref)
