"""Copy the JavaScript the HTML book needs offline from ``node_modules/`` into ``book/_vendor/``.

``npm ci`` (run by ``make vendor``) installs the exact versions pinned in ``package-lock.json``; this script then
copies only the files the pages load:

* ``mathjax/``       MathJax 3 (``tex-mml-chtml.js`` plus the components and fonts it loads on demand);
* ``requirejs/``     RequireJS, which the widget manager's AMD bundle needs;
* ``html-manager/``  ``@jupyter-widgets/html-manager`` ``embed-amd.js`` (ipywidgets 8 controls, self-contained)
  and the Font Awesome files its CSS refers to.

``_config.yml`` adds ``book/_vendor`` to ``html_static_path`` and points ``mathjax_path`` and myst-nb's
``nb_ipywidgets_js`` at these files, so no page needs a CDN. The folder is deliberately not called ``_static``:
Jupyter Book injects every ``.js`` file under a ``_static/`` folder into every page.

Usage: ``python tools/vendor_js.py [--node-modules node_modules] [--dest book/_vendor]``
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# (package, source path inside the package, destination inside book/_vendor)
MATHJAX_KEEP = ["tex-mml-chtml.js", "input", "output/chtml", "ui", "a11y", "sre", "adaptors"]
FILES = [
    ("mathjax", "LICENSE", "mathjax/LICENSE"),
    ("requirejs", "require.js", "requirejs/require.js"),
    ("requirejs", "README.md", "requirejs/README.md"),
    ("@jupyter-widgets/html-manager", "dist/embed-amd.js", "html-manager/embed-amd.js"),
    ("@jupyter-widgets/html-manager", "LICENSE", "html-manager/LICENSE"),
]
# Font files the widget CSS references by content hash, next to embed-amd.js.
HTML_MANAGER_FONT_SUFFIXES = (".woff2", ".woff", ".ttf", ".eot", ".svg")


def _copy(src: Path, dst: Path) -> None:
    if not src.exists():
        raise SystemExit(f"vendor_js: missing {src} (run `npm ci` first)")
    dst.parent.mkdir(parents=True, exist_ok=True)
    if src.is_dir():
        shutil.copytree(src, dst, dirs_exist_ok=True)
    else:
        shutil.copy2(src, dst)


def vendor(node_modules: Path, dest: Path) -> dict[str, str]:
    """Copy the vendored files; return ``{package: version}`` (also written to ``dest/VERSIONS.json``)."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    for part in MATHJAX_KEEP:
        _copy(node_modules / "mathjax" / "es5" / part, dest / "mathjax" / part)
    for pkg, rel, out in FILES:
        src = node_modules / pkg / rel
        if src.exists() or not rel.endswith(("LICENSE", "README.md")):
            _copy(src, dest / out)
    dist = node_modules / "@jupyter-widgets" / "html-manager" / "dist"
    for font in sorted(dist.iterdir()):
        if font.suffix in HTML_MANAGER_FONT_SUFFIXES:
            _copy(font, dest / "html-manager" / font.name)
    versions = {}
    for pkg in ("mathjax", "requirejs", "@jupyter-widgets/html-manager"):
        versions[pkg] = json.loads((node_modules / pkg / "package.json").read_text())["version"]
    (dest / "VERSIONS.json").write_text(json.dumps(versions, indent=2) + "\n")
    return versions


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--node-modules", type=Path, default=ROOT / "node_modules")
    parser.add_argument("--dest", type=Path, default=ROOT / "book" / "_vendor")
    args = parser.parse_args(argv)
    try:
        versions = vendor(args.node_modules, args.dest)
    except (OSError, ValueError) as err:  # an unreadable node_modules or an unwritable destination: one line
        parser.exit(1, f"vendor_js: error: {err}\n")
    size = sum(p.stat().st_size for p in args.dest.rglob("*") if p.is_file())
    print(f"vendored {versions} into {args.dest} ({size / 1e6:.1f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
