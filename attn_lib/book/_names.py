"""How the packages of :mod:`attn_lib.book` hand out their modules' names without listing them twice (PEP 562)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any


def module_names(*modules: ModuleType) -> dict[str, Any]:
    """Every name in the ``__all__`` of ``modules``, in order, with its object."""
    return {name: getattr(module, name) for module in modules for name in module.__all__}


def package_names(package: str, names: dict[str, Any]) -> tuple[list[str], Callable, Callable]:
    """``(__all__, __getattr__, __dir__)`` of the package ``package`` that hands out ``names`` (name -> object)."""

    def __getattr__(name: str) -> Any:
        if name in names:
            return names[name]
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *names})

    return list(names), __getattr__, __dir__
