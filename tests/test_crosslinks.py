"""Cross-links between the book's labelled results and the code, in both directions (issue 22, item 7).

Every labelled ``{prf:theorem}``, ``{prf:lemma}``, ``{prf:corollary}`` and ``{prf:proposition}`` block of the book names
(inside the block, or on a line right after it that starts with "Implemented by") at least one function of ``attn_lib`` as a literal such as
```attn_lib.theory.theorem1_dmax```. Each function a block names exists, cites the block's label in its docstring, and
names a test ``tests/test_x.py::test_y`` (or ``tests/test_x.py::TestClass::test_y``) that exists; so does every test a
block names. A docstring that cites a result label (``thm-``, ``lem-``, ``cor-``, ``prop-``) cites one of the book.

Names are resolved by scanning the sources with :mod:`ast`, not by importing, and a dotted name only has to list
*some* of the packages of the module that defines it, in order: ```attn_lib.theory.theorem1_dmax``` resolves to the
definition in ``attn_lib/theory/distance_bound.py`` (re-exported by ``attn_lib.theory``), and
```attn_lib.toy.multihead.sensitivity_bound``` keeps resolving if ``toy`` moves into another package.
"""

from __future__ import annotations

import ast
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

RESULT_BLOCK = re.compile(r"^(`{3,})\{prf:(?:theorem|lemma|corollary|proposition)\}")
LABEL_LINE = re.compile(r"^:label:\s*(\S+)\s*$")
CODE_NAME = re.compile(r"`(attn_lib(?:\.\w+)+)`")
TEST_ID = re.compile(r"tests/(test_\w+\.py)::(\w+(?:::\w+)?)")
RESULT_LABEL = re.compile(r"(?<![\w-])((?:thm|lem|cor|prop)-[a-z0-9]+(?:-[a-z0-9]+)*)(?![\w-])")


@dataclass(frozen=True)
class Definition:
    module: tuple[str, ...]  # ("attn_lib", "theory", "distance_bound")
    name: str  # "theorem1_dmax", or "Class.method"
    doc: str
    is_function: bool


def result_blocks(book: Path) -> dict[str, str]:
    """``label -> text`` of every labelled result block of ``book/*.md``, with the next non-blank line if it starts
    with "Implemented by"."""
    blocks: dict[str, str] = {}
    for path in sorted(book.glob("*.md")):
        lines = path.read_text(encoding="utf-8").splitlines()
        i = 0
        while i < len(lines):
            m = RESULT_BLOCK.match(lines[i])
            if not m:
                i += 1
                continue
            fence, j = m.group(1), i + 1
            while j < len(lines) and lines[j].strip() != fence:
                j += 1
            after = next((line for line in lines[j + 1 :] if line.strip()), "")
            body = lines[i + 1 : j] + ([after] if after.startswith("Implemented by") else [])
            label = next((lm.group(1) for lm in map(LABEL_LINE.match, body) if lm), None)
            if label is not None:
                blocks[label] = "\n".join(body)
            i = j + 1
    return blocks


def definitions(package: Path) -> list[Definition]:
    """Every module-level function and class of ``package`` (recursively), and every method of those classes."""
    out = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package.parent).with_suffix("").parts
        module = rel[:-1] if rel[-1] == "__init__" else rel
        tree = ast.parse(path.read_text(encoding="utf-8"))
        out.append(Definition(module, "", ast.get_docstring(tree) or "", False))
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                is_fn = isinstance(node, ast.FunctionDef)
                out.append(Definition(module, node.name, ast.get_docstring(node) or "", is_fn))
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, ast.FunctionDef):
                        doc = ast.get_docstring(item) or ""
                        out.append(Definition(module, f"{node.name}.{item.name}", doc, True))
    return out


def _is_subsequence(short: tuple[str, ...], long: tuple[str, ...]) -> bool:
    it = iter(long)
    return all(part in it for part in short)


def resolve(dotted: str, defs: list[Definition]) -> list[Definition]:
    """The definitions ``dotted`` (``attn_lib.<packages...>.<name>``) may name; a module is a definition named ``""``."""
    parts = tuple(dotted.split("."))
    found = []
    for d in defs:
        for cut in range(1, len(parts) + 1):
            mod, name = parts[:cut], ".".join(parts[cut:])
            whole_module = name == "" and d.name == "" and d.module[-1] == parts[-1]
            if (name == d.name != "" or whole_module) and _is_subsequence(mod, d.module):
                found.append(d)
                break
    return found


def collect_test_ids(tests: Path) -> set[str]:
    """``file::name`` and ``file::Class::name`` of every test function and test class in ``tests``."""
    ids = set()
    for path in sorted(tests.glob("test_*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                ids.add(f"{path.name}::{node.name}")
            if isinstance(node, ast.ClassDef):
                ids.update(f"{path.name}::{node.name}::{m.name}" for m in node.body if isinstance(m, ast.FunctionDef))
    return ids


def _cites(doc: str, label: str) -> bool:
    return label in RESULT_LABEL.findall(doc)


def problems(root: Path) -> list[str]:
    """Every broken cross-link of the repository at ``root`` (``book/``, ``attn_lib/``, ``tests/``), one line each."""
    blocks = result_blocks(root / "book")
    defs = definitions(root / "attn_lib")
    tests = collect_test_ids(root / "tests")
    out = []

    def missing_tests(text: str) -> list[str]:
        return [f"tests/{f}::{n}" for f, n in TEST_ID.findall(text) if f"{f}::{n}" not in tests]

    for label, text in blocks.items():
        named = CODE_NAME.findall(text)
        functions = []
        for dotted in named:
            hits = resolve(dotted, defs)
            if not hits:
                out.append(f"{label}: `{dotted}` names nothing in attn_lib/")
            functions += [(dotted, d) for d in hits if d.is_function]
        if not functions:
            out.append(f"{label}: the block names no function of attn_lib (a literal `attn_lib.module.function`)")
        for dotted, d in functions:
            if not _cites(d.doc, label):
                out.append(f"{label}: the docstring of `{dotted}` does not cite {label}")
            if not TEST_ID.search(d.doc):
                out.append(f"{label}: the docstring of `{dotted}` names no test (tests/test_x.py::test_y)")
        out += [f"{label}: the block names {t}, which does not exist" for t in missing_tests(text)]
    for d in defs:
        where = ".".join(d.module + ((d.name,) if d.name else ()))
        cited = [lab for lab in RESULT_LABEL.findall(d.doc) if lab not in blocks]
        out += [f"{where}: cites {lab}, which is no labelled result block of the book" for lab in cited]
        if any(_cites(d.doc, lab) for lab in blocks):
            out += [f"{where}: names {t}, which does not exist" for t in missing_tests(d.doc)]
    return out


# ------------------------------------------------------------------------------------------------ the repository
def test_the_book_has_labelled_results():
    assert len(result_blocks(ROOT / "book")) >= 19


def test_every_labelled_result_and_its_functions_are_cross_linked():
    found = problems(ROOT)
    assert not found, "broken cross-links:\n" + "\n".join(found)


def test_every_labelled_result_has_a_citing_function():
    defs = definitions(ROOT / "attn_lib")
    uncited = [lab for lab in result_blocks(ROOT / "book") if not any(_cites(d.doc, lab) for d in defs if d.name)]
    assert not uncited


# ------------------------------------------------------------------------------------------------ the check can fail
def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return root


CHAPTER = """\
    # A chapter

    ````{prf:lemma} A lemma
    :label: lem-toy

    A statement.
    ```{math}
    x \\le 1
    ```

    Implemented by `attn_lib.maths.toy_bound`; tested by `tests/test_maths.py::TestToy::test_holds`.
    ````
"""
LIBRARY = '''\
    def toy_bound(x):
        """The bound of ``lem-toy`` (chapter 1); tested by ``tests/test_maths.py::TestToy::test_holds``."""
        return x
'''
TESTS = """\
    class TestToy:
        def test_holds(self):
            assert True
"""
GOOD = {"book/01_x.md": CHAPTER, "attn_lib/maths/__init__.py": "", "attn_lib/maths/bounds.py": LIBRARY}
GOOD["tests/test_maths.py"] = TESTS


def test_a_well_linked_toy_repository_passes(tmp_path):
    assert problems(_write(tmp_path, GOOD)) == []


@pytest.mark.parametrize(
    "path, old, new, expected",
    [
        ("book/01_x.md", "Implemented by `attn_lib.maths.toy_bound`; tested", "Tested", "names no function"),
        ("book/01_x.md", "attn_lib.maths.toy_bound", "attn_lib.maths.toy_bond", "names nothing in attn_lib/"),
        ("book/01_x.md", "attn_lib.maths.toy_bound", "attn_lib.other.toy_bound", "names nothing in attn_lib/"),
        ("attn_lib/maths/bounds.py", "``lem-toy``", "the lemma", "does not cite lem-toy"),
        ("attn_lib/maths/bounds.py", "; tested by ``tests/test_maths.py::TestToy::test_holds``", "", "names no test"),
        ("attn_lib/maths/bounds.py", "TestToy::test_holds``", "TestToy::test_held``", "names tests/test_maths.py::"),
        ("book/01_x.md", "tests/test_maths.py::TestToy", "tests/test_math.py::TestToy", "does not exist"),
        ("attn_lib/maths/bounds.py", "``lem-toy``", "``lem-toy`` and ``thm-gone``", "cites thm-gone, which is no"),
    ],
)
def test_a_broken_link_is_reported(tmp_path, path, old, new, expected):
    files = dict(GOOD)
    assert old in files[path]
    files[path] = files[path].replace(old, new)
    found = problems(_write(tmp_path, files))
    assert any(expected in line for line in found), found


def test_a_name_resolves_through_a_moved_package_and_a_re_export(tmp_path):
    files = dict(GOOD)
    del files["attn_lib/maths/bounds.py"]
    files["attn_lib/book/maths/bounds.py"] = LIBRARY  # ``maths`` moved into ``attn_lib.book``
    assert problems(_write(tmp_path, files)) == []


def test_the_line_right_after_the_block_counts(tmp_path):
    files = dict(GOOD)
    line = "    Implemented by `attn_lib.maths.toy_bound`; tested by `tests/test_maths.py::TestToy::test_holds`.\n"
    files["book/01_x.md"] = CHAPTER.replace(line, "") + "\n" + line  # after the closing fence
    assert result_blocks(_write(tmp_path, files) / "book")["lem-toy"].rstrip().endswith("test_holds`.")
    assert problems(tmp_path) == []
