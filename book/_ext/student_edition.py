"""Local Sphinx extension for the student edition (``make book-student``): leave gated solutions out entirely.

sphinx-exercise's ``hide_solutions = True`` drops a ``{solution}`` block, but for the gated form that the chapters
use (``{solution-start}`` ... ``{solution-end}``, so that a solution can hold executed code cells) it drops only
the opening directive: the prose and code cells in between stay on the page and the lone ``solution-end`` node
crashes the HTML writer (sphinx-exercise 1.2.1). With this extension loaded and ``hide_solutions`` set,
``{solution-start}`` leaves a marker, and a transform removes everything from the marker to its
``{solution-end}``. With ``hide_solutions`` unset the extension changes nothing.

``tools/student_book.py`` writes a configuration that loads it; the normal book does not load it.
"""

from __future__ import annotations

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.errors import ExtensionError
from sphinx.transforms import SphinxTransform
from sphinx_exercise.directive import SolutionStartDirective
from sphinx_exercise.nodes import solution_end_node


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
    return {"parallel_read_safe": True, "parallel_write_safe": True}
