"""Local Sphinx extension for the student edition (``make book-student``): leave gated solutions out entirely.

sphinx-exercise's ``hide_solutions = True`` drops a ``{solution}`` block, but for the gated form that the chapters
use (``{solution-start}`` ... ``{solution-end}``, so that a solution can hold executed code cells) it drops only
the opening directive: the prose and code cells in between stay on the page and the lone ``solution-end`` node
crashes the HTML writer (sphinx-exercise 1.2.1). With this extension loaded and ``hide_solutions`` set,
``{solution-start}`` leaves a marker, and a transform removes everything from the marker to its
``{solution-end}``.

The pages are not all a student edition serves: Sphinx copies each page's source to ``_sources/`` (the ``.md``
download button) and sphinx-book-theme copies the executed notebook there (the ``.ipynb`` button), both with every
solution. Once the build is done, this extension overwrites each of them with the stripped source
(:func:`strip_solutions`) and the student notebook (:func:`student_notebook`: the stripped source as an ``.ipynb``,
no outputs), the same notebooks that ``tools/student_book.py`` writes for the ``student`` branch, which the student
edition's Colab buttons open. With ``hide_solutions`` unset the extension changes nothing.

``tools/student_book.py`` writes a configuration that loads it; the normal book does not load it.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.errors import ExtensionError
from sphinx.transforms import SphinxTransform
from sphinx_exercise.directive import SolutionStartDirective
from sphinx_exercise.nodes import solution_end_node

#: A gated solution (``{solution-start}`` ... ``{solution-end}``) or a plain ``{solution}`` block, fence included,
#: with any of MyST's fences: backticks, colons or tildes.
SOLUTION_BLOCK = re.compile(
    r"^(?P<fence>`{3,}|:{3,}|~{3,})\{solution-start\}.*?^(?P=fence)\{solution-end\}[^\n]*\n(?P=fence)[ \t]*\n?"
    r"|^(?P<plain>`{3,}|:{3,}|~{3,})\{solution\}.*?^(?P=plain)[ \t]*\n?",
    re.M | re.S,
)


def strip_solutions(md_text: str) -> str:
    """``md_text`` (a MyST Markdown page) without its solution blocks, and without the blank lines they leave."""
    return re.sub(r"\n{3,}", "\n\n", SOLUTION_BLOCK.sub("", md_text))


def student_notebook(md_text: str) -> str:
    """The ``.ipynb`` text of a chapter for students: its solutions stripped, no outputs, stable cell ids.

    The notebook keeps the chapter's metadata (the Colab runtime it asks for) and its Colab set-up cell.
    """
    import jupytext
    import nbformat

    nb = jupytext.reads(strip_solutions(md_text), fmt="md:myst")
    nb.metadata.get("jupytext", {}).pop("text_representation", None)
    nb.metadata["language_info"] = {"name": "python"}
    for i, cell in enumerate(nb.cells):
        cell["id"] = hashlib.sha1(f"{i}\n{cell.source}".encode()).hexdigest()[:8]
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    nbformat.validate(nb)
    return nbformat.writes(nb) + "\n"


def _strip_served_sources(app: Sphinx, exception: Exception | None) -> None:
    """Overwrite ``_sources/<page>.md`` and ``_sources/<page>.ipynb`` with the stripped source and notebook."""
    if exception is not None or not app.config.hide_solutions or app.builder.format != "html":
        return
    sources = Path(app.outdir) / "_sources"
    for docname in sorted(app.env.found_docs):
        src = Path(app.env.doc2path(docname))
        if src.suffix != ".md":
            continue
        text = src.read_text(encoding="utf-8")
        for served in (sources / f"{docname}.md", sources / f"{docname}.md.txt"):
            if served.is_file():
                served.write_text(strip_solutions(text), encoding="utf-8")
        notebook = sources / f"{docname}.ipynb"
        if notebook.is_file():
            notebook.write_text(student_notebook(text), encoding="utf-8")


class hidden_solution_start(nodes.Element):
    """Where a gated solution began; removed, with the solution, before anything is written."""


class StudentSolutionStart(SolutionStartDirective):
    """``{solution-start}`` that, under ``hide_solutions``, leaves a marker instead of nothing."""

    def run(self):
        result = super().run()  # records the gated structure that sphinx-exercise checks
        if self.env.app.config.hide_solutions:
            return [hidden_solution_start(label=self.options.get("label", ""))]
        return result


class RemoveHiddenSolutions(SphinxTransform):
    """Remove each marker, the nodes after it up to the next ``solution-end``, and that ``solution-end``."""

    # before sphinx-exercise's MergeGatedSolutions (10), after its structure check (1)
    default_priority = 5

    def apply(self, **kwargs) -> None:
        for marker in list(self.document.findall(hidden_solution_start)):
            parent = marker.parent
            start = parent.index(marker)
            end = next((i for i in range(start + 1, len(parent)) if isinstance(parent[i], solution_end_node)), None)
            if end is None:
                raise ExtensionError(
                    f"{self.env.docname}: solution {marker['label']!r} has no solution-end at the same level"
                )
            for child in list(parent.children[start : end + 1]):
                parent.remove(child)


def setup(app: Sphinx) -> dict:
    app.setup_extension("sphinx_exercise")
    app.add_node(hidden_solution_start)
    app.add_directive("solution-start", StudentSolutionStart, override=True)
    app.add_transform(RemoveHiddenSolutions)
    app.connect("build-finished", _strip_served_sources)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
