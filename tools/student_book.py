"""The student edition of the book: every chapter with its exercises and without their solutions.

    python tools/student_book.py build   # write the configuration, build into _build/student/html, then check it
    python tools/student_book.py check   # only check an existing _build/student/html

The configuration is ``_config.yml`` with sphinx-exercise's ``hide_solutions`` set and the local extension
``book/_ext/student_edition.py`` loaded (it makes ``hide_solutions`` remove the gated ``{solution-start}`` ...
``{solution-end}`` blocks the chapters use, code cells included). It is written to ``_build/student/_config.yml``
and passed to ``jupyter-book build --config``; the HTML goes to ``_build/student/html``, next to (never into) the
instructors' ``_build/html``.

``check`` fails when a chapter page of the student HTML still shows a solution (a solution block, a ``sol-`` label,
or a line of a solution's code or plain prose from the chapter source) or lost an exercise.
"""

from __future__ import annotations

import argparse
import copy
import html
import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
OUT = Path("_build") / "student"
EXTENSION = "student_edition"
# Pages for instructors only: left out of the student edition's table of contents (and not executed there).
INSTRUCTOR_ONLY = ("book/instructor_guide",)

_SOLUTION = re.compile(r"^```\{solution-start\}.*?^```\{solution-end\}\n```", re.M | re.S)
_EXERCISE = re.compile(r"^```\{exercise\}", re.M)
_TAG = re.compile(r"<[^>]+>")
_SPACE = re.compile(r"\s+")


def student_config(root: Path = ROOT, overrides: dict | None = None) -> dict:
    """``_config.yml`` of ``root`` with the solutions hidden and the student extension loaded.

    Parameters
    ----------
    root : Path
        Repository root (holds ``_config.yml`` and ``book/_ext``).
    overrides : dict, optional
        Merged into the configuration, key by key (nested dicts are merged, other values replaced); e.g.
        ``{"execute": {"execute_notebooks": "off"}}``.

    Returns
    -------
    dict
        The configuration; the path of the local extension is absolute, so the file can live anywhere.
    """
    config = yaml.safe_load((root / "_config.yml").read_text(encoding="utf-8"))
    config["exclude_patterns"] = [*config.get("exclude_patterns", []), *(f"{page}.*" for page in INSTRUCTOR_ONLY)]
    sphinx = config.setdefault("sphinx", {})
    sphinx.setdefault("config", {})["hide_solutions"] = True
    sphinx.setdefault("local_extensions", {})[EXTENSION] = str((root / "book" / "_ext").resolve())
    _merge(config, overrides or {})
    return config


def student_toc(root: Path = ROOT) -> dict:
    """``_toc.yml`` of ``root`` without the pages in :data:`INSTRUCTOR_ONLY`.

    Parameters
    ----------
    root : Path
        Repository root (holds ``_toc.yml``).

    Returns
    -------
    dict
        The table of contents of the student edition.
    """
    toc = yaml.safe_load((root / "_toc.yml").read_text(encoding="utf-8"))
    toc["chapters"] = [entry for entry in toc.get("chapters", []) if entry.get("file") not in INSTRUCTOR_ONLY]
    return toc


def _merge(base: dict, extra: dict) -> None:
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = copy.deepcopy(value)


def build(root: Path = ROOT, out: Path | None = None, overrides: dict | None = None) -> Path:
    """Build the student edition of the book in ``root`` into ``out/html`` and return that folder.

    Parameters
    ----------
    root : Path
        Repository root.
    out : Path, optional
        Output folder (default ``root/_build/student``); ``out/_config.yml`` is the generated configuration.
    overrides : dict, optional
        See :func:`student_config`.

    Returns
    -------
    Path
        ``out/html``. A failed build raises :class:`subprocess.CalledProcessError`.
    """
    out = (out or root / OUT).resolve()
    out.mkdir(parents=True, exist_ok=True)
    config_path = out / "_config.yml"
    config_path.write_text(yaml.safe_dump(student_config(root, overrides), sort_keys=False), encoding="utf-8")
    toc_path = out / "_toc.yml"
    toc_path.write_text(yaml.safe_dump(student_toc(root), sort_keys=False), encoding="utf-8")
    work = out / "work"
    shutil.rmtree(work, ignore_errors=True)
    jupyter_book = Path(sys.executable).with_name("jupyter-book")
    command = [str(jupyter_book) if jupyter_book.exists() else "jupyter-book", "build", str(root)]
    command += [
        "--config",
        str(config_path),
        "--toc",
        str(toc_path),
        "--path-output",
        str(work),
        "--builder",
        "html",
        "--all",
    ]
    subprocess.run(command, check=True, cwd=root)
    target = out / "html"
    shutil.rmtree(target, ignore_errors=True)
    shutil.move(str(work / "_build" / "html"), str(target))
    shutil.rmtree(work, ignore_errors=True)
    return target


def _page_text(page: str) -> str:
    return _SPACE.sub(" ", html.unescape(_TAG.sub("", page)))


def _line(line: str) -> str:
    """A source line as it shows on a page: trailing comment dropped, whitespace collapsed."""
    return _SPACE.sub(" ", line.split("  #")[0]).strip()


def solution_lines(md_text: str) -> list[str]:
    """Lines of the solutions in a chapter source that would show verbatim on a page: code and plain prose.

    Parameters
    ----------
    md_text : str
        A chapter's MyST Markdown.

    Returns
    -------
    list of str
        Lines of at least 20 characters, whitespace collapsed; directive lines, options, comments and prose with
        markup (math, roles, code spans) are left out, since they do not show verbatim, and so are lines that the
        chapter also has outside its solutions.
    """
    elsewhere = {_line(line) for line in _SOLUTION.sub("", md_text).splitlines()}
    lines = []
    for block in _SOLUTION.findall(md_text):
        for line in block.splitlines():
            text = _line(line)
            if (
                len(text) < 20
                or text.startswith(("```", ":", "#"))
                or re.search(r"[$`{}\\*]", text)
                or text in elsewhere
            ):
                continue
            lines.append(text)
    return lines


def check(html_dir: Path, root: Path = ROOT) -> list[str]:
    """What is wrong with a student edition: solutions left in, exercises lost. Empty when it is right.

    Parameters
    ----------
    html_dir : Path
        The built student HTML (``_build/student/html``).
    root : Path
        Repository root, whose ``book/NN_*.md`` sources say which exercises and solutions each page has.

    Returns
    -------
    list of str
        One line per problem.
    """
    problems = [
        f"{page}: an instructor page is in the student edition"
        for page in INSTRUCTOR_ONLY
        if (html_dir / f"{page}.html").is_file()
    ]
    for md in sorted((root / "book").glob("[0-9][0-9]_*.md")):
        source = md.read_text(encoding="utf-8")
        n_exercises = len(_EXERCISE.findall(source))
        page_path = html_dir / "book" / f"{md.stem}.html"
        if not page_path.is_file():
            if n_exercises:
                problems.append(f"{md.name}: no page {page_path.relative_to(html_dir)} in the student edition")
            continue
        page = page_path.read_text(encoding="utf-8")
        shown = len(re.findall(r'<div class="[^"]*\bexercise\b[^"]*"', page))
        if shown != n_exercises:
            problems.append(f"{md.name}: {shown} exercises on the page, {n_exercises} in the source")
        if re.search(r'class="[^"]*\bsolution\b', page) or re.search(r'id="sol-', page):
            problems.append(f"{md.name}: a solution block is on the page")
        text = _page_text(page)
        leaked = [line for line in solution_lines(source) if line in text]
        if leaked:
            problems.append(f"{md.name}: {len(leaked)} solution lines on the page, e.g. {leaked[0]!r}")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["build", "check"])
    parser.add_argument("--root", type=Path, default=ROOT, help="repository root (default: this checkout)")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    html_dir = build(root) if args.command == "build" else root / OUT / "html"
    if not html_dir.is_dir():
        print(f"student book: no {html_dir} (run `make book-student`)", file=sys.stderr)
        return 1
    problems = check(html_dir, root)
    for line in problems:
        print("student book:", line, file=sys.stderr)
    if not problems:
        print(f"Student edition (no solutions): {html_dir / 'index.html'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
