"""Shared builder for the chapter-generator scripts (``tools/make_chapter_NN.py``).

Each script describes its chapter as a sequence of ``md(...)`` / ``code(...)`` calls and ends with ``write()``;
the notebook is written without outputs (the book build and nbval execute it). The Colab set-up cell reads the
repository URL from ``_config.yml`` (``repository.url``), the one place it is set.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

import nbformat
import yaml
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

ROOT = Path(__file__).resolve().parents[1]

KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}


def repository_url() -> str:
    """``repository.url`` of ``_config.yml``."""
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    return config["repository"]["url"]


def colab_source(repo: str | None = None) -> str:
    """Source of the first code cell of every chapter: installs attn_lib on Colab, does nothing elsewhere."""
    repo = repo or repository_url()
    return f'''\
# On Colab: install attn_lib from the repository.
# Elsewhere this does nothing (`make book` has installed it).
import sys

if "google.colab" in sys.modules:
    import subprocess

    REPO = "{repo}"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", f"attn_lib @ git+{{REPO}}"],
                   check=True)'''


#: Lines of the chapters' model cell: load the model and text quietly, print the fallback notes and what runs.
LOAD_INPUTS = """handle, text, notes = experiments.load_inputs(MODEL, TEXT)   # quiet: nothing on stderr
for note in notes:                                     # the offline fallbacks say so here
    print("note:", note)
print(experiments.describe_inputs(handle, text))
"""

#: Helper of the chapters that show attn_lib.report figures (needs Image, figure_to_png and plt imported).
SHOW_REPORT_FIGURE = '''

def show_report_figure(fig):
    """Show a figure of attn_lib.report as PNG (provenance footer included) and release it."""
    display(Image(figure_to_png(fig)))
    plt.close(fig)
'''


class Chapter:
    """Collects the cells of ``book/<stem>.ipynb``."""

    def __init__(self, stem: str):
        self.out = ROOT / "book" / f"{stem}.ipynb"
        self.cells: list = []

    def md(self, src: str) -> None:
        self.cells.append(new_markdown_cell(src.strip("\n")))

    def code(self, src: str, tags: list[str] | None = None) -> None:
        cell = new_code_cell(src.strip("\n"))
        if tags:
            cell.metadata["tags"] = tags
        self.cells.append(cell)

    def colab(self) -> None:
        """The Colab set-up cell, hidden in the HTML book."""
        self.code(colab_source(), tags=["remove-cell"])

    def write(self) -> None:
        for i, cell in enumerate(self.cells):  # stable ids: regenerating an unchanged chapter gives the same file
            cell["id"] = hashlib.sha1(f"{i}\n{cell['source']}".encode()).hexdigest()[:8]
        nb = new_notebook(cells=self.cells, metadata={"kernelspec": KERNELSPEC, "language_info": {"name": "python"}})
        nbformat.validate(nb)
        nbformat.write(nb, self.out)
        print(f"wrote {self.out.relative_to(ROOT)} ({len(self.cells)} cells)")
