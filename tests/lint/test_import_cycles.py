"""No import circle between the modules of ``airflow_atlas/``, read from the source (``ast``; nothing is imported).

An edge ``a -> b`` is an import that runs when ``a`` is imported: a module-level ``import`` / ``from ... import``
(also inside a module-level ``if``, ``try`` or ``with``; never inside a function or class body), except under
``if TYPE_CHECKING:``, which never runs. ``from package import name`` is an edge to the submodule
``package.name`` when that is a module, else to ``package``; importing ``a.b.c`` also runs the packages ``a``
and ``a.b`` (edges to them, except to the importer's own enclosing packages, which are already running).

Every strongly connected component of that graph with more than one module is a circle. It fails the test
unless it is listed in :data:`ALLOWED_CYCLES` with the reason it remains; the list only shrinks (an entry
whose circle is gone fails too, so it is removed with the fix). A circle closed only by an import inside a
function (deferred to call time, to dodge the circle) is still a mutual dependency: a second test counts
those imports too and holds such circles to their own list, :data:`ALLOWED_DEFERRED_CYCLES`. Within ``sweep/`` none is allowed, and
the sub-packages keep their layering (docs/ARCHITECTURE.md, "The sweep package"): the queue imports no
other part of ``sweep``, nor does the pacing.
"""
from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "airflow_atlas"

ALLOWED_CYCLES: dict[frozenset[str], str] = {
    # frozenset of the circle's modules: why it remains. Empty today; an entry is removed with its fix.
}

ALLOWED_DEFERRED_CYCLES: dict[frozenset[str], str] = {
    # Circles closed only by an import inside a function (it runs at call time, so the import itself works,
    # but the modules still depend on each other). Same rules: each with its reason, the list only shrinks.
    # Empty since issue 34 items 1 and 2.
}

SWEEP_LAYERS: dict[str, tuple[str, ...]] = {
    # sub-package of sweep -> the only other parts of sweep it may import (module-level or not)
    "airflow_atlas.sweep.queue": (),
    "airflow_atlas.sweep.pacing": (),
}


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def run_time_imports(body: list[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom]:
    """The import statements of ``body`` that run when the module is imported (see the module doc)."""
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.If):
            if not _is_type_checking(node.test):
                yield from run_time_imports(node.body)
            yield from run_time_imports(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody, *(h.body for h in node.handlers)):
                yield from run_time_imports(block)
        elif isinstance(node, ast.With):
            yield from run_time_imports(node.body)


def all_imports(body: list[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement of ``body``, in functions and classes too, except under ``if TYPE_CHECKING:``."""
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            yield from all_imports(node.orelse)
        else:
            for field in ("body", "orelse", "finalbody", "handlers"):
                block = getattr(node, field, None)
                if isinstance(block, list):
                    yield from all_imports(block)


def import_graph(
    sources: dict[str, str],
    packages: set[str],
    imports: Callable[[list[ast.stmt]], Iterator[ast.Import | ast.ImportFrom]] = run_time_imports,
) -> dict[str, set[str]]:
    """Module -> the modules of ``sources`` its import runs (``packages``: the modules that are ``__init__``);
    ``imports=all_imports`` counts the imports inside functions too."""
    graph: dict[str, set[str]] = {}
    for module, source in sources.items():
        package = module if module in packages else module.rpartition(".")[0]
        edges: set[str] = set()
        for node in imports(ast.parse(source).body):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    origin = ".".join(base + ([node.module] if node.module else []))
                else:
                    origin = node.module or ""
                submodules = [f"{origin}.{a.name}" for a in node.names if f"{origin}.{a.name}" in sources]
                targets = submodules + ([origin] if len(submodules) < len(node.names) else [])
                if submodules:  # the package itself runs first (an enclosing one is already running)
                    targets.append(origin)
            for target in targets:
                parts = target.split(".")
                for i in range(1, len(parts) + 1):
                    name = ".".join(parts[:i])
                    enclosing = module.startswith(name + ".")
                    if name in sources and name != module and not enclosing:
                        edges.add(name)
        graph[module] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            for succ in successors:
                if succ not in index:
                    index[succ] = low[succ] = len(index)
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(sorted(graph.get(succ, ())))))
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(frozenset(component))
    return found


def _describe(component: frozenset[str], graph: dict[str, set[str]]) -> str:
    edges = [f"{a} -> {b}" for a in sorted(component) for b in sorted(graph[a] & component)]
    return "circle: " + "; ".join(edges)


def _sources() -> tuple[dict[str, str], set[str]]:
    paths = sorted((ROOT / PACKAGE).rglob("*.py"))
    sources = {module_name(p): p.read_text(encoding="utf-8") for p in paths}
    return sources, {module_name(p) for p in paths if p.name == "__init__.py"}


def test_no_import_circle_outside_the_allowed_list() -> None:
    sources, packages = _sources()
    assert len(sources) > 100  # the walk found the package
    graph = import_graph(sources, packages)
    found = cycles(graph)
    new = [_describe(c, graph) for c in found if c not in ALLOWED_CYCLES]
    gone = [sorted(c) for c in ALLOWED_CYCLES if c not in found]
    assert not new, "import circles (break them, or list them in ALLOWED_CYCLES with the reason):\n" + "\n".join(new)
    assert not gone, f"ALLOWED_CYCLES lists circles that are gone (remove them): {gone}"
    assert not any(m.startswith(f"{PACKAGE}.sweep.") for c in ALLOWED_CYCLES for m in c)


def test_no_deferred_import_circle_outside_its_allowed_list() -> None:
    """Circles closed by an import inside a function: listed with their reason, none new, none in sweep/."""
    sources, packages = _sources()
    graph = import_graph(sources, packages, all_imports)
    found = [c for c in cycles(graph) if c not in ALLOWED_CYCLES]
    new = [_describe(c, graph) for c in found if c not in ALLOWED_DEFERRED_CYCLES]
    gone = [sorted(c) for c in ALLOWED_DEFERRED_CYCLES if c not in found]
    assert not new, "import circles through function-level imports (break them, or list them in " \
        "ALLOWED_DEFERRED_CYCLES with the reason):\n" + "\n".join(new)
    assert not gone, f"ALLOWED_DEFERRED_CYCLES lists circles that are gone (remove them): {gone}"
    assert not any(m.startswith(f"{PACKAGE}.sweep.") for c in ALLOWED_DEFERRED_CYCLES for m in c)


def test_the_sweep_sub_packages_keep_their_layering() -> None:
    """Any import (a function's too): the queue at the bottom, the pacing beside it, the sweepers on top."""
    sources, packages = _sources()
    found = []
    for module, source in sorted(sources.items()):
        layer = next((p for p in SWEEP_LAYERS if module == p or module.startswith(p + ".")), None)
        if layer is None:
            continue
        package = module if module in packages else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ImportFrom):
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)] if node.level else []
                origin = ".".join(base + ([node.module] if node.module else []))
                submodules = [f"{origin}.{a.name}" for a in node.names if f"{origin}.{a.name}" in sources]
                names = submodules if len(submodules) == len(node.names) else [origin]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            for name in names:
                inside = name == layer or name.startswith(layer + ".")
                in_sweep = name == f"{PACKAGE}.sweep" or name.startswith(f"{PACKAGE}.sweep.")
                if in_sweep and not inside and name not in SWEEP_LAYERS[layer]:
                    found.append(f"{module} imports {name} (beyond {layer}'s layer)")
    assert found == []


def test_the_graph_sees_what_runs_at_import() -> None:
    sources = {
        "p": "from . import b\n",  # the package runs b
        "p.a": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .b import B\n\ndef f():\n    from .b import g\n",
        "p.b": "from .c import x\n",
        "p.c": "try:\n    from p import a\nexcept ImportError:\n    pass\n",
        "p.d": "from p import b\n",  # a submodule: an edge to p.b, not to p (p is d's own package)
    }
    graph = import_graph(sources, {"p"})
    assert graph == {"p": {"p.b"}, "p.a": set(), "p.b": {"p.c"}, "p.c": {"p.a"}, "p.d": {"p.b"}}
    assert cycles(graph) == []
    graph["p.a"].add("p.b")  # as if a imported b at module level
    assert cycles(graph) == [frozenset({"p.a", "p.b", "p.c"})]
    deferred = import_graph(sources, {"p"}, all_imports)  # a's function-level import counts, TYPE_CHECKING not
    assert deferred["p.a"] == {"p.b"} and cycles(deferred) == [frozenset({"p.a", "p.b", "p.c"})]


def test_a_package_importing_its_own_importer_is_a_circle() -> None:
    sources = {"q": "from .m import run\n", "q.m": "", "r": "from q.m import run\n", "q.n": "import r\n"}
    graph = import_graph(sources, {"q"})
    assert graph["r"] == {"q", "q.m"}  # importing q.m runs q first
    assert cycles(import_graph({**sources, "q": "from .n import x\n"}, {"q"})) == [frozenset({"q", "q.n", "r"})]
