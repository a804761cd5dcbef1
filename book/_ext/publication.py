"""Local Sphinx extension: the book's links to its repository follow one setting, ``repository.url`` of ``_config.yml``.

* With no URL (a local build: the committed ``_config.yml`` names none, since only the Pages workflow knows the
  repository it publishes from), the launch buttons are switched off, and the substitution ``{{ publication }}``
  (used by ``book/intro.md``) says plainly that this copy is not published.
* With a URL (``tools/chapters.py set-repository URL``, which the Pages workflow runs with
  ``${{ github.server_url }}/${{ github.repository }}``), ``{{ publication }}`` names the repository and the branch
  the Colab buttons open, and the repository button is shown, unless the configuration value
  ``publication_repository_button`` is ``False`` (the student edition's: the default branch holds the solutions).
  ``_config.yml`` leaves ``use_repository_button`` false, since Jupyter Book refuses the button without a URL.
* Either way, a launch button is shown only on a page that is a notebook with an ``.ipynb`` twin next to its source
  (the chapters); pages that are not notebooks (the intro, the appendix, the instructor guide) get none.
"""

from __future__ import annotations

from pathlib import Path

from repository_url import check_url
from sphinx.application import Sphinx
from sphinx.config import Config
from sphinx.errors import ConfigError

NOT_PUBLISHED = (
    "**This copy of the book is not published.** It was built without a repository URL (`repository.url` of "
    "`_config.yml` is empty), so its chapters have no Colab button, and their first cell, run on Colab, stops with a "
    "message instead of installing `attn_lib`. The copy that a repository's GitHub Pages workflow publishes has "
    "both, pointing at that repository."
)


def publication_note(url: str, branch: str) -> str:
    """The text of ``{{ publication }}`` for ``repository.url`` ``url`` and ``repository.branch`` ``branch``."""
    if not url:
        return NOT_PUBLISHED
    # the link goes to the branch the buttons open (the student edition's has no solutions), not the default branch
    return (
        f"This copy of the book is published from [{url.removeprefix('https://')}]({url}/tree/{branch}). The rocket "
        f"icon at the top of each chapter opens it in Google Colab, from the branch `{branch}`; its first cell "
        "installs `attn_lib` from that repository."
    )


def _config_inited(app: Sphinx, config: Config) -> None:
    opts = config.html_theme_options
    try:  # the value is pasted into links and the note: only the validated form may reach them
        url = check_url(opts.get("repository_url") or "", "repository.url of _config.yml")
    except ValueError as err:
        raise ConfigError(str(err)) from None
    if not url:
        # sphinx-book-theme fails on a repository button without a URL, and would build launch links to nowhere
        opts["use_repository_button"] = False
        opts["launch_buttons"] = {}
    elif config.publication_repository_button:
        opts["use_repository_button"] = True
    substitutions = dict(getattr(config, "myst_substitutions", None) or {})
    substitutions["publication"] = publication_note(url, opts.get("repository_branch") or "main")
    config.myst_substitutions = substitutions


def _drop_launch_buttons(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    """Remove the launch group from a page without an ``.ipynb`` twin next to its source."""
    if pagename not in app.env.all_docs:
        return
    twin = Path(app.env.doc2path(pagename)).with_suffix(".ipynb")
    if twin.is_file():
        return
    buttons = context.get("header_buttons")
    if buttons:
        context["header_buttons"] = [b for b in buttons if b.get("label") != "launch-buttons"]


def setup(app: Sphinx) -> dict:
    app.add_config_value("publication_repository_button", True, "html", bool)
    app.connect("config-inited", _config_inited)
    # after sphinx-book-theme's add_launch_buttons (priority 501)
    app.connect("html-page-context", _drop_launch_buttons, priority=510)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
