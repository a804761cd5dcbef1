"""Keep each chapter's two files in step: ``book/NN_topic.md`` (MyST Markdown notebook, the only file anyone
edits) and its twin ``book/NN_topic.ipynb`` (written from it, without outputs, for Colab's launch button and nbval).

    python tools/chapters.py sync            # write every .ipynb twin from its .md (and the shared Colab cell)
    python tools/chapters.py check           # fail if a twin is missing or stale, or a chapter breaks a rule
    python tools/chapters.py check --outputs # only: no notebook in book/ carries outputs (pre-commit hook)
    python tools/chapters.py set-repository URL REF  # repository.url and .ref of _config.yml, then sync (Pages workflow)
    python tools/chapters.py format          # ruff-format every code cell to CODE_LINE_LENGTH, then sync

Rules that ``check`` enforces (tests/test_chapters.py runs it, and shows each rule failing on a broken copy):

* every ``book/NN_*.md`` chapter has an ``.ipynb`` twin equal to what ``sync`` would write, and every ``.ipynb``
  has a ``.md`` source;
* no notebook carries outputs, execution counts or widget state;
* no code cell is longer than :data:`MAX_CELL_LINES` lines (chapters call ``attn_lib``; they define nothing),
  counted as statements (logical lines, whatever their layout: a call split over several lines to fit the page is
  one line; comments are not counted);
* every code cell is formatted by ``ruff format --line-length CODE_LINE_LENGTH`` (what ``format`` writes) and no
  line of it is wider than :data:`CODE_LINE_LENGTH` characters, the width of the book's content column at
  1280 px (ruff cannot split a long string or comment: split those by hand); the shared Colab cell is exempt
  (hidden in the book, written from ``book/_shared/colab_setup.py``), and so is a cell with IPython magics;
* the chapter's first code cell is the Colab set-up cell of ``book/_shared/colab_setup.py`` (with the repository
  URL and ref of ``_config.yml``, both empty in a book that is not published);
* the chapter asks Colab for the runtime it needs: a GPU (``accelerator: GPU`` in its header) when it runs a model
  outside its solutions (:func:`needs_gpu`), a CPU (no ``accelerator``) otherwise. ``sync`` writes the Colab
  metadata of the runtime the header names.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import io
import json
import re
import subprocess
import sys
import tempfile
import tokenize
from pathlib import Path

import jupytext
import nbformat

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "book" / "_ext"))
import repository_url as _repository  # noqa: E402  (the one validated reading of repository.url)

MAX_CELL_LINES = 25
#: Widest line of a chapter's code cell: what fits the content column of the built book at a 1280 px window
#: without horizontal scrolling (tests/test_browser.py measures the column; see docs/ARCHITECTURE.md).
CODE_LINE_LENGTH = 69
COLAB_TAG = "colab-setup"
#: Notebook metadata that makes Colab open the chapter on a GPU runtime ...
COLAB_METADATA = {"accelerator": "GPU", "colab": {"gpuType": "T4", "provenance": []}}
#: ... and on a CPU runtime (Colab's default: no accelerator).
COLAB_CPU_METADATA = {"colab": {"provenance": []}}
JUPYTEXT_FORMATS = "ipynb,md:myst"
#: Calls that run a language model; a chapter making one outside its solutions needs a GPU runtime.
_MODEL_CALL = re.compile(r"\bchapter\.(load_inputs|encoder_results)\(|\bload_model\(|\bexperiments\.run_all\(")
_SOLUTION = re.compile(r"^```\{solution-start\}.*?^```\{solution-end\}\n```", re.M | re.S)
_CONFIG_URL = re.compile(r"^(repository:\n(?:[ \t]+.*\n)*?[ \t]+url:)[^\n]*$", re.M)
_CONFIG_BRANCH = re.compile(r"^(repository:\n(?:[ \t]+.*\n)*?[ \t]+branch:)[^\n]*$", re.M)
_CONFIG_REF = re.compile(r"^(repository:\n(?:[ \t]+.*\n)*?[ \t]+ref:)[^\n]*$", re.M)
#: The branch the published book's Colab buttons open: the Pages workflow pushes the chapter notebooks there once
#: ``set-repository`` has filled in their install cells (the committed ones name no repository). The student edition
#: opens its own branch (tools/student_book.py).
PUBLISHED_BRANCH = "notebooks"


def chapters(book: Path) -> list[Path]:
    """The chapter sources ``book/NN_*.md``, sorted."""
    return sorted(p for p in book.glob("[0-9][0-9]_*.md"))


def repository_url(root: Path) -> str:
    """``repository.url`` of ``_config.yml`` (``""`` in a book that is not published), validated: a value that is
    not ``https://HOST/OWNER/NAME`` raises ``ValueError`` (``book/_ext/repository_url.py``)."""
    return _repository.read_url(root)


def repository_ref(root: Path) -> str:
    """``repository.ref`` of ``_config.yml``: the commit or tag the install cells take ``attn_lib`` at (``""`` in a
    book that is not published), validated (``book/_ext/repository_url.py``)."""
    return _repository.read_ref(root)


def set_repository(root: Path, url: str, ref: str = "") -> list[Path]:
    """Write ``url`` and ``ref`` as ``repository.url`` and ``repository.ref`` of ``root/_config.yml`` (comments
    kept), then :func:`sync`.

    The Pages workflow runs this with ``${{ github.server_url }}/${{ github.repository }}`` and ``${{ github.sha }}``
    before it builds, so the published book's buttons and install cells point at the repository that built it, and
    the cells install ``attn_lib`` at the commit it was built from (``attn_lib @ git+URL@REF``), not from a default
    branch that may move during a course. ``url`` is ``https://HOST/OWNER/NAME`` and ``ref`` a 40-hex commit or a
    tag name, or both ``""`` (not published). With a URL, ``repository.branch`` becomes :data:`PUBLISHED_BRANCH`,
    the branch where the workflow puts the notebooks written here; without one, ``main``. Returns the files written.
    """
    _repository.check_ref(ref, _repository.check_url(url))
    config = root / "_config.yml"
    text = config.read_text(encoding="utf-8")
    new, n = _CONFIG_URL.subn(lambda m: f"{m[1]} {json.dumps(url)}", text, count=1)
    new, n_ref = _CONFIG_REF.subn(lambda m: f"{m[1]} {json.dumps(ref)}", new, count=1)
    new, n_branch = _CONFIG_BRANCH.subn(lambda m: f"{m[1]} {PUBLISHED_BRANCH if url else 'main'}", new, count=1)
    if n != 1 or n_ref != 1 or n_branch != 1:
        raise ValueError(f"{config}: no repository.url, repository.ref and repository.branch lines to set")
    config.write_text(new, encoding="utf-8")
    if (repository_url(root), repository_ref(root)) != (url, ref):
        raise ValueError(
            f"{config}: repository.url and .ref read back as {repository_url(root)!r}, {repository_ref(root)!r}, "
            f"not {url!r}, {ref!r}"
        )
    return [config, *sync(root)]


def needs_gpu(md_text: str) -> bool:
    """Whether a chapter runs a language model outside its solutions (then Colab should give it a GPU)."""
    return bool(_MODEL_CALL.search(_SOLUTION.sub("", md_text)))


def colab_source(root: Path) -> str:
    """The shared Colab set-up cell, with ``repository.url`` and ``repository.ref`` of ``_config.yml`` filled in."""
    url, ref = repository_url(root), repository_ref(root)
    template = (root / "book" / "_shared" / "colab_setup.py").read_text(encoding="utf-8")
    return _repository.fill_template(template, url, ref).replace("{{", "{").replace("}}", "}").rstrip("\n")


def _with_shared_parts(nb, root: Path):
    """Return a copy of ``nb`` with the shared Colab cell and the Colab/jupytext metadata set."""
    nb = copy.deepcopy(nb)
    colab = [c for c in nb.cells if c.cell_type == "code" and COLAB_TAG in c.metadata.get("tags", [])]
    if len(colab) != 1:
        raise ValueError(f"expected exactly one code cell tagged {COLAB_TAG!r}, found {len(colab)}")
    colab[0].source = colab_source(root)
    gpu = nb.metadata.get("accelerator") == "GPU"
    nb.metadata.pop("accelerator", None)
    nb.metadata.pop("colab", None)
    nb.metadata.update(copy.deepcopy(COLAB_METADATA if gpu else COLAB_CPU_METADATA))
    nb.metadata.setdefault("jupytext", {})["formats"] = JUPYTEXT_FORMATS
    nb.metadata["jupytext"]["notebook_metadata_filter"] = "accelerator,colab"
    return nb


def render_ipynb(md_path: Path, root: Path = ROOT) -> str:
    """The ``.ipynb`` text that ``sync`` writes for ``md_path``: no outputs, stable cell ids."""
    nb = _with_shared_parts(jupytext.read(md_path, fmt="md:myst"), root)
    for i, cell in enumerate(nb.cells):
        cell["id"] = hashlib.sha1(f"{i}\n{cell.source}".encode()).hexdigest()[:8]
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    nb.metadata.get("jupytext", {}).pop("text_representation", None)
    nb.metadata["language_info"] = {"name": "python"}
    nbformat.validate(nb)
    return nbformat.writes(nb) + "\n"


def sync(root: Path = ROOT) -> list[Path]:
    """Rewrite each chapter's ``.md`` with the shared parts and write its ``.ipynb`` twin. Returns the files written."""
    written = []
    for md in chapters(root / "book"):
        nb = _with_shared_parts(jupytext.read(md, fmt="md:myst"), root)
        md_text = jupytext.writes(nb, fmt="md:myst")
        if md.read_text(encoding="utf-8") != md_text:
            md.write_text(md_text, encoding="utf-8")
            written.append(md)
        twin = md.with_suffix(".ipynb")
        text = render_ipynb(md, root)
        if not twin.exists() or twin.read_text(encoding="utf-8") != text:
            twin.write_text(text, encoding="utf-8")
            written.append(twin)
    return written


def logical_lines(source: str) -> int:
    """Statements of ``source`` (Python's logical lines, comments not counted); its non-blank physical lines when it
    does not tokenize (IPython magics)."""
    try:
        toks = list(tokenize.generate_tokens(io.StringIO(source.rstrip("\n") + "\n").readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return sum(bool(line.strip()) for line in source.splitlines())
    return sum(t.type == tokenize.NEWLINE for t in toks)


def _formatted_cells(c) -> bool:
    """Whether a code cell is one that ``format`` formats and the width rule checks."""
    if COLAB_TAG in c.metadata.get("tags", []):
        return False
    return not any(line.lstrip().startswith(("%", "!")) for line in c.source.splitlines())


def ruff_format(sources: list[str], root: Path = ROOT, line_length: int = CODE_LINE_LENGTH) -> list[str]:
    """Each of ``sources`` (Python code) as ``ruff format --line-length line_length`` writes it (the repository's
    ruff settings otherwise), without its final newline. Raises ``ValueError`` naming a source ruff cannot parse."""
    if not sources:
        return []
    with tempfile.TemporaryDirectory() as tmp:
        paths = [Path(tmp) / f"cell_{i:04d}.py" for i in range(len(sources))]
        for path, src in zip(paths, sources):
            path.write_text(src.rstrip("\n") + "\n", encoding="utf-8")
        cmd = [sys.executable, "-m", "ruff", "format", "--no-cache", "--line-length", str(line_length)]
        cmd += ["--config", str(root / "pyproject.toml")] if (root / "pyproject.toml").is_file() else ["--isolated"]
        run = subprocess.run([*cmd, *map(str, paths)], capture_output=True, text=True, cwd=tmp)
        if run.returncode != 0:
            first = run.stderr.strip().splitlines()[:3]
            raise ValueError(f"ruff format failed on a code cell: {' '.join(first)}")
        return [path.read_text(encoding="utf-8").rstrip("\n") for path in paths]


def format_chapters(root: Path = ROOT, line_length: int = CODE_LINE_LENGTH) -> list[Path]:
    """Ruff-format every code cell of every chapter (see :func:`_formatted_cells`), then :func:`sync`. Returns the
    files written."""
    written = []
    for md in chapters(root / "book"):
        nb = jupytext.read(md, fmt="md:myst")
        cells = [c for c in nb.cells if c.cell_type == "code" and _formatted_cells(c)]
        for c, new in zip(cells, ruff_format([c.source for c in cells], root, line_length)):
            c.source = new
        text = jupytext.writes(nb, fmt="md:myst")
        if md.read_text(encoding="utf-8") != text:
            md.write_text(text, encoding="utf-8")
            written.append(md)
    return sorted(set(written + sync(root)))


def width_problems(md: Path, root: Path = ROOT, line_length: int = CODE_LINE_LENGTH) -> list[str]:
    """Code cells of chapter ``md`` that ``format`` would change, and lines wider than ``line_length``."""
    nb = jupytext.read(md, fmt="md:myst")
    cells = [c for c in nb.cells if c.cell_type == "code" and _formatted_cells(c)]
    try:
        formatted = ruff_format([c.source for c in cells], root, line_length)
    except ValueError as err:
        return [f"{md.name}: {err}"]
    found = []
    for c, new in zip(cells, formatted):
        first = c.source.strip().splitlines()[0][:60] if c.source.strip() else ""
        if new != c.source.rstrip("\n"):
            found.append(
                f"{md.name}: a code cell is not ruff-formatted, starting {first!r} (run tools/chapters.py format)"
            )
        wide = [line for line in c.source.splitlines() if len(line) > line_length]
        if wide:
            found.append(
                f"{md.name}: a code cell has {len(wide)} line(s) wider than {line_length} characters (the content "
                f"column), the first {wide[0].strip()[:50]!r}...: split the string or comment"
            )
    return found


def output_problems(book: Path) -> list[str]:
    """Notebooks in ``book`` that carry outputs, execution counts or widget state."""
    problems = []
    for path in sorted(book.glob("*.ipynb")):
        try:
            nb = nbformat.read(path, as_version=4)
        except (nbformat.reader.NotJSONError, ValueError) as err:
            problems.append(
                f"{path.name}: not a readable notebook ({type(err).__name__}; a merge conflict? "
                "run tools/chapters.py sync)"
            )
            continue
        dirty = [
            i
            for i, c in enumerate(nb.cells)
            if c.cell_type == "code" and (c.get("outputs") or c.get("execution_count") is not None)
        ]
        if dirty:
            problems.append(f"{path.name}: cells {dirty} have outputs or execution counts (run tools/chapters.py sync)")
        if "widgets" in nb.metadata:
            problems.append(f"{path.name}: saved widget state in the metadata (run tools/chapters.py sync)")
    return problems


def problems(root: Path = ROOT) -> list[str]:
    """Every violation of the rules in the module docstring (empty when the book is in order)."""
    book = root / "book"
    try:  # every install cell holds the URL and ref: an invalid one is the only problem worth reporting
        repository_ref(root)
    except ValueError as err:
        return [str(err)]
    found = output_problems(book)
    sources = chapters(book)
    if not sources:
        found.append("book/ holds no chapter (book/NN_*.md)")
    for nb_path in sorted(book.glob("*.ipynb")):
        if not nb_path.with_suffix(".md").exists():
            found.append(f"{nb_path.name}: notebook without its Markdown source {nb_path.with_suffix('.md').name}")
    for md in sources:
        name = md.name
        try:
            expected = render_ipynb(md, root)
        except ValueError as err:
            found.append(f"{name}: {err}")
            continue
        twin = md.with_suffix(".ipynb")
        if not twin.exists():
            found.append(f"{name}: no .ipynb twin (run python tools/chapters.py sync)")
        elif "<<<<<<<" in twin.read_text(encoding="utf-8"):
            pass  # reported above as unreadable
        elif twin.read_text(encoding="utf-8") != expected:
            found.append(f"{twin.name}: out of sync with {name} (edit the .md, then run python tools/chapters.py sync)")
        nb = jupytext.read(md, fmt="md:myst")
        code = [c for c in nb.cells if c.cell_type == "code"]
        if not code or COLAB_TAG not in code[0].metadata.get("tags", []):
            found.append(f"{name}: the first code cell must be the shared Colab cell (tag {COLAB_TAG!r})")
        elif code[0].source.rstrip("\n") != colab_source(root):
            found.append(
                f"{name}: the Colab cell differs from book/_shared/colab_setup.py (run tools/chapters.py sync)"
            )
        for c in code:
            n = logical_lines(c.source)
            if n > MAX_CELL_LINES:
                first = c.source.strip().splitlines()[0][:60]
                found.append(f"{name}: a code cell has {n} lines (statements; > {MAX_CELL_LINES}), starting {first!r}")
        found.extend(width_problems(md, root))
        gpu, wanted = nb.metadata.get("accelerator") == "GPU", needs_gpu(md.read_text(encoding="utf-8"))
        if gpu and not wanted:
            found.append(f"{name}: runs no model, so it must request a Colab CPU runtime (drop accelerator: GPU)")
        elif wanted and not gpu:
            found.append(f"{name}: runs a model, so its header must request a Colab GPU runtime (accelerator: GPU)")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["sync", "check", "set-repository", "format"])
    parser.add_argument("url", nargs="?", help="set-repository: the repository URL (empty: not published)")
    parser.add_argument(
        "ref", nargs="?", help="set-repository: the commit (40 hex) or tag the book is built from (empty with '')"
    )
    parser.add_argument("--outputs", action="store_true", help="check only that notebooks carry no outputs")
    parser.add_argument("--root", type=Path, default=ROOT, help="repository root (default: this checkout)")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    try:
        return _run(parser, args, root)
    except (ValueError, OSError) as err:  # bad input, an unreadable or invalid _config.yml: one line, no traceback
        parser.exit(2, f"chapters.py {args.command}: error: {err}\n")


def _run(parser: argparse.ArgumentParser, args: argparse.Namespace, root: Path) -> int:
    if args.command == "set-repository":
        if args.url is None:
            parser.error("set-repository needs URL REF (REF the commit or tag the book is built from), or ''")
        for path in set_repository(root, args.url, args.ref or ""):
            print("wrote", path.relative_to(root))
        return 0
    if args.command in ("sync", "format"):
        for path in sync(root) if args.command == "sync" else format_chapters(root):
            print("wrote", path.relative_to(root))
        return 0
    found = output_problems(root / "book") if args.outputs else problems(root)
    for line in found:
        print("chapters:", line, file=sys.stderr)
    if not found:
        print(f"chapters: {len(chapters(root / 'book'))} chapters in order")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
