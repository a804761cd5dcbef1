"""The book's repository URL, ``repository.url`` of ``_config.yml``: the one place that reads and validates it.

Every writer of the URL reads it here: the chapters' and the assignments' Colab set-up cells (``tools/chapters.py``,
``tools/assignments.py``), the student edition's check (``tools/student_book.py``) and the ``{{ publication }}`` note
of the build (``book/_ext/publication.py``). A cell pastes it as a Python literal (:func:`python_literal`), never
between hand-written quotes, so that even a value that got past the check could not become code in a reader's cell.

A valid URL is ``""`` (a book that is not published) or ``https://HOST/OWNER/NAME`` in ASCII: HOST a dotted DNS name
(letters, digits, hyphens), OWNER and NAME letters, digits, ``_``, ``.`` and ``-`` (not ``.`` or ``..``), with no
query, fragment, credentials, port or trailing slash. ASCII only, so that a look-alike host in another script
(``gіthub.com`` with a Cyrillic ``і``) is refused rather than published.
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


def check_url(url: object, where: str = "url") -> str:
    """``url`` if it is a valid repository URL (see the module), else ``ValueError`` naming ``where`` and the form."""
    if not isinstance(url, str):
        raise ValueError(f"{where} must be a string, {FORM} (got {type(url).__name__} {url!r})")
    if url and (not PATTERN.fullmatch(url) or any(p in (".", "..") for p in url.split("/")[3:])):
        raise ValueError(f"{where} must be {FORM} (got {url!r})")
    return url


def read_url(root: Path) -> str:
    """``repository.url`` of ``root/_config.yml``, validated (``""`` when it is empty or absent)."""
    config = Path(root) / "_config.yml"
    try:
        data = yaml.safe_load(config.read_text(encoding="utf-8")) or {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ValueError(f"cannot read {config}: {exc}") from None
    repository = data.get("repository") if isinstance(data, dict) else None
    url = repository.get("url") if isinstance(repository, dict) else None
    return check_url("" if url is None else url, f"repository.url of {config}")


def python_literal(url: str) -> str:
    """``url`` (checked) as a Python string literal, with its quotes: what a Colab cell's ``REPO = ...`` holds."""
    return json.dumps(check_url(url))


def fill_template(template: str, url: str) -> str:
    """``template`` (a Colab set-up cell) with its ``"{repository_url}"`` (the quotes included) as ``url``'s literal."""
    if '"{repository_url}"' not in template:
        raise ValueError('the Colab set-up template must hold REPO = "{repository_url}"')
    return template.replace('"{repository_url}"', python_literal(url))
