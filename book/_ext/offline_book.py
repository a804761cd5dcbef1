"""Local Sphinx extension of the book (``sphinx.local_extensions`` in ``_config.yml``): keep pages offline-clean.

* Drops duplicate ``<script>`` entries from each page. sphinx-thebe registers its inline configuration with
  ``filename=None``, which Sphinx 7.4 adds twice (once as ``None``, once as ``''``); the second copy re-declares
  ``const THEBE_JS_URL`` and raises a JavaScript error on every page.
* Warns (an error under ``-W``) when a page would load a script or stylesheet from the network: the book must
  render offline, with MathJax and the widget manager vendored into ``book/_vendor``.
"""

from __future__ import annotations

from typing import Any

from sphinx.application import Sphinx
from sphinx.util import logging

logger = logging.getLogger(__name__)


def _key(asset: Any) -> tuple:
    filename = getattr(asset, "filename", asset) or ""
    attributes = dict(getattr(asset, "attributes", {}) or {})
    attributes.pop("priority", None)
    return (str(filename), tuple(sorted((k, str(v)) for k, v in attributes.items())))


def _is_remote(filename: str) -> bool:
    return "://" in filename or filename.startswith("//")


def clean_page_assets(app: Sphinx, pagename: str, templatename: str, context: dict, doctree: Any) -> None:
    for name in ("script_files", "css_files"):
        assets = context.get(name)
        if not assets:
            continue
        seen: set[tuple] = set()
        unique = []
        for asset in assets:
            key = _key(asset)
            if key in seen:
                continue
            seen.add(key)
            unique.append(asset)
            filename = str(getattr(asset, "filename", asset) or "")
            if _is_remote(filename):
                logger.warning(
                    "page %s loads %s from the network (%s); the book must render offline: vendor it into "
                    "book/_vendor (see tools/vendor_js.py)",
                    pagename,
                    name,
                    filename,
                    type="offline_book",
                    subtype="remote_asset",
                )
        assets[:] = unique


def setup(app: Sphinx) -> dict:
    # run after myst-nb and the themes have added their per-page assets
    # book/_ext/static is on html_static_path: printed output wraps at the column (issue 20, 1280 px pages)
    app.add_css_file("page-width.css")
    # ... and at 390 px (issue 36): every box that scrolls sideways gets a visible cue (see the file's comment)
    app.add_js_file("scroll-cue.js", loading_method="defer")
    app.connect("html-page-context", clean_page_assets, priority=900)
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True}
