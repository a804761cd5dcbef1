"""Indexes for the instructor page: the exercises of the book's chapters (the ``{exercise}`` blocks), the questions
of the assignments, and which exercise each question practises."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

__all__ = ["EXERCISE_DIFFICULTIES", "EXERCISE_KINDS", "assignment_index", "coverage", "exercise_index"]

EXERCISE_KINDS = ("derivation", "implementation", "measurement")
EXERCISE_DIFFICULTIES = ("easy", "medium", "hard")

_EXERCISE = re.compile(r"^(`{3,}|:{3,})\{exercise\}[ \t]*(?P<title>[^\n]*)\n(?P<body>.*?)^\1[ \t]*$", re.M | re.S)
_TITLE = re.compile(r"^(?P<title>.*?)\s*\((?P<kind>[^()·]+?)\s*·\s*(?P<difficulty>[^()·]+?)\)\s*$")
_LABEL = re.compile(r"^:label:\s*(?P<label>\S+)\s*$", re.M)
_LABEL_FORMAT = re.compile(r"ex-(?P<chapter>\d{2})-[a-z0-9][a-z0-9-]*")
_PRF_REF = re.compile(r"\{prf:ref\}`(?:[^`<]*<)?(?P<target>[^`<>]+?)>?`")


def _read_dir(path: Any, name: str) -> Path:
    if not isinstance(path, (str, Path)):
        raise ValueError(f"{name} must be a path to a folder (got {type(path).__name__})")
    p = Path(path)
    if not p.is_dir():
        raise ValueError(f"{name} must be an existing folder (got {str(p)!r})")
    return p


def _read_text(path: Path, name: str) -> str:
    """A source file's text, which must be UTF-8."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(
            f"{name}: {path.name} is not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset {exc.start}); "
            "save it as UTF-8"
        ) from None


def exercise_index(book_dir: Any = "book") -> list[dict]:
    """The exercises of the chapters ``book_dir/NN_*.md``, in chapter order.

    Reads every ``{exercise}`` block written as ``<title> (<kind> · <difficulty>)`` with a ``:label:`` of the form
    ``ex-NN-slug`` and collects the ``{prf:ref}`` targets of its body.

    Parameters
    ----------
    book_dir : str or Path
        Folder holding the chapters' MyST sources.

    Returns
    -------
    list of dict
        One dict per exercise with ``chapter`` (file stem), ``label``, ``title``, ``kind`` (one of
        :data:`EXERCISE_KINDS`), ``difficulty`` (one of :data:`EXERCISE_DIFFICULTIES`) and ``results`` (the
        ``{prf:ref}`` targets, in order of first appearance).

    Raises
    ------
    ValueError
        If ``book_dir`` is not a folder, a chapter is not UTF-8 text, or an exercise breaks the format (names the
        file and the exercise).
    """
    book = _read_dir(book_dir, "book_dir")
    rows = []
    for md in sorted(book.glob("[0-9][0-9]_*.md")):
        text = _read_text(md, "book_dir")
        for m in _EXERCISE.finditer(text):
            where = f"{md.name}, exercise {m['title'].strip()!r}"
            t = _TITLE.match(m["title"].strip())
            if not t:
                raise ValueError(f"{where}: the title must end in '(<kind> · <difficulty>)'")
            kind, diff = t["kind"].strip(), t["difficulty"].strip()
            if kind not in EXERCISE_KINDS:
                raise ValueError(f"{where}: kind must be one of {', '.join(EXERCISE_KINDS)} (got {kind!r})")
            if diff not in EXERCISE_DIFFICULTIES:
                raise ValueError(
                    f"{where}: difficulty must be one of {', '.join(EXERCISE_DIFFICULTIES)} (got {diff!r})"
                )
            lab = _LABEL.search(m["body"])
            if not lab or not _LABEL_FORMAT.fullmatch(lab["label"]):
                raise ValueError(f"{where}: needs a ':label: ex-NN-slug' line (NN: the chapter's two digits)")
            if lab["label"][3:5] != md.name[:2]:
                raise ValueError(f"{where}: label {lab['label']!r} does not carry the chapter number {md.name[:2]}")
            results = list(dict.fromkeys(r["target"].strip() for r in _PRF_REF.finditer(m["body"])))
            rows.append(
                {
                    "chapter": md.stem,
                    "label": lab["label"],
                    "title": t["title"],
                    "kind": kind,
                    "difficulty": diff,
                    "results": results,
                }
            )
    return rows


_QUESTION = re.compile(r"#\s*BEGIN QUESTION\s*\n(?P<config>.*?)```(?P<body>.*?)#\s*END QUESTION", re.S)
_PRACTISES = re.compile(r"^\*\*Practises:\*\*(?P<line>[^\n]*)$", re.M)
_BACKTICKED = re.compile(r"`([a-z][a-z0-9-]*)`")
_FEEDBACK = re.compile(r"""feedback\(\s*["'](?P<check>check_\w+)["']""")


def assignment_index(assignments_dir: Any = "assignments") -> list[dict]:
    """The questions of the assignments ``assignments_dir/chNN_*.md`` and the book results they practise.

    A question is an Otter ``# BEGIN QUESTION`` ... ``# END QUESTION`` block; its prompt carries one line
    ``**Practises:** ... `label` ...`` naming the book's statement labels in backticks.

    Parameters
    ----------
    assignments_dir : str or Path
        Folder holding the assignments' MyST sources.

    Returns
    -------
    list of dict
        One dict per question with ``assignment`` (file stem), ``question`` (Otter name), ``points``,
        ``results`` (labels, in order) and ``checks`` (the checks its tests call through :func:`feedback`, in
        order).

    Raises
    ------
    ValueError
        If ``assignments_dir`` is not a folder, an assignment is not UTF-8 text, or a question lacks its name or its
        ``**Practises:**`` line.
    """
    folder = _read_dir(assignments_dir, "assignments_dir")
    import yaml  # PyYAML comes with the book extra (jupyter-book); only this index reads YAML

    rows = []
    for md in sorted(folder.glob("ch[0-9][0-9]_*.md")):
        for m in _QUESTION.finditer(_read_text(md, "assignments_dir")):
            config = yaml.safe_load(m["config"]) or {}
            if "name" not in config:
                raise ValueError(f"{md.name}: a question has no 'name:' in its BEGIN QUESTION cell")
            p = _PRACTISES.search(m["body"])
            if not p:
                raise ValueError(f"{md.name}, question {config['name']}: needs a '**Practises:** `label`' line")
            rows.append(
                {
                    "assignment": md.stem,
                    "question": str(config["name"]),
                    "points": config.get("points"),
                    "results": _BACKTICKED.findall(p["line"]),
                    "checks": list(dict.fromkeys(f["check"] for f in _FEEDBACK.finditer(m["body"]))),
                }
            )
    return rows


def coverage(book_dir: Any = "book", assignments_dir: Any = "assignments") -> list[dict]:
    """Which exercises and assignment questions practise each result, from :func:`exercise_index` and
    :func:`assignment_index`.

    Parameters
    ----------
    book_dir, assignments_dir : str or Path
        The folders of the chapters and of the assignments.

    Returns
    -------
    list of dict
        One dict per result label, in order of first appearance (exercises first, chapter by chapter, then the
        assignments): ``result``, ``exercises`` (exercise labels) and ``questions`` (``"<assignment> <question>"``).
    """
    table: dict[str, dict] = {}

    def row(label: str) -> dict:
        return table.setdefault(label, {"result": label, "exercises": [], "questions": []})

    for ex in exercise_index(book_dir):
        for label in ex["results"]:
            row(label)["exercises"].append(ex["label"])
    for q in assignment_index(assignments_dir):
        for label in q["results"]:
            row(label)["questions"].append(f"{q['assignment']} {q['question']}")
    return list(table.values())
