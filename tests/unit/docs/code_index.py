"""Where the docs' names are defined: the module-level definitions (assignments, functions, classes) of the
project's source, read with ``ast``, and their values by import. For the doc tests."""
from __future__ import annotations

import ast
import functools
import importlib
from pathlib import Path

from tests.unit.docs.markdown import ROOT

# The trees a doc's constant may live in: the engine and glue, the entry scripts, the dev kit, the lint tests
# (whose allow-lists the docs count).
SOURCES = ("airflow_atlas", "spark_jobs", "devkit", "tests/lint")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def top_level_names(tree: ast.Module) -> set[str]:
    """The names a module defines itself (not those it imports)."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


@functools.cache
def definitions() -> dict[str, list[Path]]:
    """name -> the source files that define it at module level."""
    found: dict[str, list[Path]] = {}
    for tree_root in SOURCES:
        for path in sorted((ROOT / tree_root).rglob("*.py")):
            for name in top_level_names(ast.parse(path.read_text(), str(path))):
                found.setdefault(name, []).append(path)
    return found


def defines(path: Path, name: str) -> bool:
    return path.is_file() and name in top_level_names(ast.parse(path.read_text(), str(path)))


def value(path: Path, name: str):
    """``name``'s value in the module at ``path`` (dotted: an attribute of it, ``SweepStrategy.is_swept``)."""
    head, *rest = name.split(".")
    obj = getattr(importlib.import_module(module_name(path)), head)
    for attr in rest:
        obj = getattr(obj, attr)
    return obj
