"""The sizes of attn_lib: non-blank lines of its ``.py`` files per part, and the public names of the core.

    python tools/sizes.py                  # the package next to this folder
    python tools/sizes.py path/to/attn_lib # another copy (e.g. a checkout of an older commit)
    python tools/sizes.py --json           # the same figures as one JSON object

Parts: the core (``attn_lib/`` without ``attn_lib/book/`` and ``attn_lib/accel/``), the accelerator
(``attn_lib/accel/``), the book's helpers (``attn_lib/book/``) and the whole package; ``__all__ names`` counts the
distinct names in the ``__all__`` lists of the core's modules. A part that does not exist counts 0. Bad arguments
give one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import ast
import json
import signal
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "attn_lib"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, no usage block
        self.exit(2, f"sizes.py: error: {message}\n")


def nonblank_lines(path: Path) -> int:
    """Lines of ``path`` holding something other than white space."""
    return sum(1 for line in path.read_text(encoding="utf-8").splitlines() if line.strip())


def all_names(path: Path) -> set[str]:
    """The names of the module's ``__all__ = [...]`` (a list or tuple of strings; ``+=`` adds to it)."""
    names: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8"), filename=str(path)).body:
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None
        target = node.target if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else target
        if isinstance(target, ast.Name) and target.id == "__all__" and isinstance(node.value, (ast.List, ast.Tuple)):
            names.update(e.value for e in node.value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str))
    return names


def sizes(package: Path) -> dict[str, int]:
    """``{"core": ..., "accel": ..., "book": ..., "package": ..., "core __all__ names": ...}`` of ``package``."""
    files = sorted(package.rglob("*.py"))
    book, accel = package / "book", package / "accel"
    core = [p for p in files if book not in p.parents and accel not in p.parents]
    return {
        "core": sum(map(nonblank_lines, core)),
        "accel": sum(nonblank_lines(p) for p in files if accel in p.parents),
        "book": sum(nonblank_lines(p) for p in files if book in p.parents),
        "package": sum(map(nonblank_lines, files)),
        "core __all__ names": len(set().union(*map(all_names, core))),
    }


def main(argv: list[str] | None = None) -> int:
    parser = _Parser(prog="sizes.py", description=__doc__.splitlines()[0])
    parser.add_argument(
        "package", nargs="?", type=Path, default=PACKAGE, help="the attn_lib folder (default: %(default)s)"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    if not (args.package / "__init__.py").is_file():
        parser.error(f"package must be an attn_lib folder with an __init__.py (got {str(args.package)!r})")
    try:
        got = sizes(args.package)
    except (OSError, SyntaxError, UnicodeDecodeError) as exc:
        parser.error(f"cannot read {args.package}: {exc}")
    if args.json:
        print(json.dumps(got))
    else:
        print(f"non-blank lines of .py files in {args.package}:")
        for part, where in (
            ("core", "attn_lib/ without book/ and accel/"),
            ("accel", "attn_lib/accel/"),
            ("book", "attn_lib/book/"),
            ("package", "attn_lib/"),
        ):
            print(f"  {part:<8}{got[part]:>8,}  ({where})")
        print(f"distinct names in the core's __all__ lists: {got['core __all__ names']}")
    return 0


if __name__ == "__main__":
    if hasattr(signal, "SIGPIPE"):  # a reader that stops early (`sizes.py | head -1`) ends this quietly, as it ends cat
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    sys.exit(main())
