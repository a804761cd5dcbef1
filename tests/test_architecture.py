"""The shape of attn_lib (issue 22): a library that reads top-down.

* no module over :data:`MAX_MODULE_LINES` lines and no function over :data:`MAX_FUNCTION_LINES` lines, outside the
  numba kernels (``attn_lib/accel/kernels.py``);
* no star import, and no import of another module's private (``_name``) names;
* no import circle between attn_lib's modules, nor between the subpackages and modules of any one package (two
  packages that import each other, even from different files), counting the imports inside functions too;
* an import inside a function says why it is there (a comment on its line or the line above): such imports exist
  only to keep ``import attn_lib`` light.

Each rule is a small function over source text, shown failing on a made-up module, then applied to the library.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "attn_lib"
MAX_MODULE_LINES = 800
MAX_FUNCTION_LINES = 80
EXEMPT = {"attn_lib.accel.kernels"}  # numba kernels: one loop nest per kernel, kept whole for the compiler


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


MODULES = _modules()


def _target(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute module an ``ImportFrom`` in ``module`` reads from."""
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def long_functions(source: str, limit: int = MAX_FUNCTION_LINES) -> list[str]:
    return [
        f"{n.name} ({n.end_lineno - n.lineno + 1} lines)"
        for n in ast.walk(ast.parse(source))
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.end_lineno - n.lineno + 1 > limit
    ]


def star_imports(source: str) -> list[str]:
    return [
        f"from {'.' * n.level}{n.module or ''} import *"
        for n in ast.walk(ast.parse(source))
        if isinstance(n, ast.ImportFrom) and any(a.name == "*" for a in n.names)
    ]


def imports_of(module: str, source: str, is_package: bool = False, modules=None) -> list[tuple[str, str | None]]:
    """``(module imported from, name or None)`` for every attn_lib import in ``source``, inside functions too."""
    modules = MODULES if modules is None else modules
    found = []
    for n in ast.walk(ast.parse(source)):
        if isinstance(n, ast.Import):
            found += [(a.name, None) for a in n.names if a.name.split(".")[0] == "attn_lib"]
        elif isinstance(n, ast.ImportFrom):
            target = _target(module, is_package, n)
            if target.split(".")[0] != "attn_lib":
                continue
            for a in n.names:
                sub = f"{target}.{a.name}"
                found.append((sub, None) if sub in modules else (target, a.name))
    return found


def private_imports(module: str, source: str, is_package: bool = False, modules=None) -> list[str]:
    return [
        f"{name} from {target}"
        for target, name in imports_of(module, source, is_package, modules)
        if name and name.startswith("_") and not name.startswith("__") and target != module
    ]


def uncommented_function_imports(source: str) -> list[str]:
    """Imports inside a function whose group (consecutive import statements) carries no comment, on any of its
    lines or on the line just above it."""
    lines = source.splitlines()
    bad = []
    for fn in ast.walk(ast.parse(source)):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for body in _bodies(fn):
            group: list[ast.stmt] = []
            for stmt in [*body, None]:
                if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                    group.append(stmt)
                    continue
                if group and not _commented(lines, group):
                    bad += [f"{fn.name}: {ast.unparse(n)}" for n in group]
                group = []
    return bad


def _bodies(fn: ast.AST):
    """Every statement list inside ``fn`` (its body, branches, loops, ``try`` blocks), nested functions excluded."""
    stack = [fn]
    while stack:
        node = stack.pop()
        for field in ("body", "orelse", "finalbody", "handlers"):
            block = getattr(node, field, None)
            if isinstance(block, list) and block and isinstance(block[0], (ast.stmt, ast.excepthandler)):
                if isinstance(block[0], ast.stmt):
                    yield block
                stack += [b for b in block if not isinstance(b, (ast.FunctionDef, ast.AsyncFunctionDef))]


def _commented(lines: list[str], group: list[ast.stmt]) -> bool:
    first, last = group[0].lineno, group[-1].end_lineno
    above = lines[first - 2] if first > 1 else ""
    return "#" in above or any("#" in lines[i - 1] for i in range(first, last + 1))


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return cycles


def package_graphs(graph: dict[str, set[str]]) -> dict[str, dict[str, set[str]]]:
    """For each package, the import graph between its direct members (subpackages and modules): ``a -> b`` when a
    module inside member ``a`` imports a module inside member ``b`` (an import of an enclosing package's
    ``__init__`` links nothing)."""
    out: dict[str, dict[str, set[str]]] = {}
    for src, targets in graph.items():
        for dst in targets:
            s, d = src.split("."), dst.split(".")
            common = 0
            while common < min(len(s), len(d)) and s[common] == d[common]:
                common += 1
            if common == len(s) or common == len(d):  # one is inside the other
                continue
            package = ".".join(s[:common])
            members = out.setdefault(package, {})
            members.setdefault(".".join(s[: common + 1]), set()).add(".".join(d[: common + 1]))
    return out


def _graph() -> dict[str, set[str]]:
    graph = {}
    for name, path in MODULES.items():
        deps = imports_of(name, path.read_text(encoding="utf-8"), path.name == "__init__.py")
        graph[name] = {t for t, _ in deps if t in MODULES and t != name}
    return graph


# ---- each rule fails on a made-up module -------------------------------------------------------------------------

BROKEN = """
from .toy import *
from .experiments import _run_pass


def f():
    import torch
    return torch
"""


def test_the_rules_find_what_they_look_for():
    assert long_functions("def f():\n" + "    x = 1\n" * 90) == ["f (91 lines)"]
    assert star_imports(BROKEN) == ["from .toy import *"]
    modules = {"attn_lib.cli": None, "attn_lib.experiments": None, "attn_lib.toy": None}
    assert private_imports("attn_lib.cli", BROKEN, modules=modules) == ["_run_pass from attn_lib.experiments"]
    assert uncommented_function_imports(BROKEN) == ["f: import torch"]
    assert uncommented_function_imports(BROKEN.replace("import torch", "import torch  # heavy")) == []
    grouped = "def g():\n    import torch  # heavy\n    import numpy\n\n    x = 1\n    import scipy\n"
    assert uncommented_function_imports(grouped) == ["g: import scipy"]
    assert import_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert import_cycles({"a": {"b"}, "b": set()}) == []
    # two packages that import each other from different files: no circle between modules, one between packages
    lazy_both_ways = {"p.x.jobs": {"p.y.out"}, "p.y.out": set(), "p.y.tab": {"p.x.prof"}, "p.x.prof": set()}
    assert import_cycles(lazy_both_ways) == []
    assert import_cycles(package_graphs(lazy_both_ways)["p"]) == [["p.x", "p.y"]]
    one_way = {"p.x.jobs": {"p.y.out"}, "p.y.out": {"p.z"}, "p.z": set(), "p.y": {"p.y.out"}, "p.y.out2": {"p.y"}}
    assert all(import_cycles(members) == [] for members in package_graphs(one_way).values())


# ---- the library ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", [n for n in MODULES if n not in EXEMPT])
def test_module_is_small(name):
    lines = len(MODULES[name].read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_MODULE_LINES, f"{name} has {lines} lines (at most {MAX_MODULE_LINES}): split it by topic"
    assert long_functions(MODULES[name].read_text(encoding="utf-8")) == [], f"{name}: build these from named steps"


@pytest.mark.parametrize("name", list(MODULES))
def test_module_imports_nothing_private_and_no_star(name):
    path = MODULES[name]
    source = path.read_text(encoding="utf-8")
    assert star_imports(source) == []
    assert private_imports(name, source, path.name == "__init__.py") == []


@pytest.mark.parametrize("name", list(MODULES))
def test_imports_inside_functions_say_why(name):
    assert uncommented_function_imports(MODULES[name].read_text(encoding="utf-8")) == []


def test_no_import_circle():
    assert import_cycles(_graph()) == []


def test_no_import_circle_between_packages():
    circles = {pkg: c for pkg, members in package_graphs(_graph()).items() if (c := import_cycles(members))}
    assert circles == {}, f"packages that import each other (move what they share down a layer): {circles}"
