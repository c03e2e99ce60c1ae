"""The engine's import boundaries, read from the source (``ast``; nothing is imported):

1. no engine module (``airflow_atlas/`` outside ``airflow_atlas/airflow/``, and ``spark_jobs/``) imports
   Airflow or the Airflow glue, at module level or inside a function;
2. no engine module imports a module of a higher layer (:data:`LAYERS`; same layer is fine); an import
   under ``if TYPE_CHECKING:`` (an annotation's type, never run) is not counted here;
3. no module outside ``airflow_atlas/kvs/`` imports the private ``kvs/_common`` (the public checks are
   :mod:`airflow_atlas.validation`).

The layers, from what the code does (a module may import its own layer and the layers below it):

0. foundations with no engine state: errors, encodings, number checks, the settings model, the results'
   serialisation, the latency histogram
   (``transactions.histogram``, a leaf the transactions record into and the pace controller reads);
1. the key-value layer (``kvs``: the contract, both backends, opening a store from a URL);
2. services on a key-value store: timestamps, locks, table marks, the sweep queue and the sweepers
   (``sweep``: a committing transaction feeds the queue through ``sweep.write_info``, so the queue sits
   below the transactions);
3. transactions (register, commit into the queue, snapshot reads);
4. the engine settings (``config``) and the store that wires everything (``store``);
5. what runs on a store: status, verify, the oracle, the workload generator, the Spark jobs;
6. the command line (``cli``) and the Spark entry scripts (``spark_jobs``).

Above all of them: the Airflow glue, ``airflow_atlas/airflow/`` (it may import anything of the engine).
A new engine module must be given a layer here.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

LAYERS: dict[str, int] = {
    "airflow_atlas": 0,  # the package root only (``__version__``): a prefix for nothing
    "airflow_atlas.errors": 0,
    "airflow_atlas.encoding": 0,
    "airflow_atlas.validation": 0,
    "airflow_atlas.settings_model": 0,
    "airflow_atlas.serialisation": 0,  # the results' JSON (pydantic), below everything that has results
    # A leaf of the standard library and errors: the transaction layer records into it, the pace controller
    # (sweep/pacing/application.py, layer 2) and the status read it (issue 31).
    "airflow_atlas.transactions.histogram": 0,
    "airflow_atlas.kvs": 1,
    "airflow_atlas.timestamps": 2,
    "airflow_atlas.locks": 2,
    "airflow_atlas.table_marks": 2,
    "airflow_atlas.sweep": 2,
    "airflow_atlas.transactions": 3,
    "airflow_atlas.config": 4,
    "airflow_atlas.settings_resolver": 4,
    "airflow_atlas.store": 4,
    "airflow_atlas.status": 5,
    "airflow_atlas.verify": 5,
    "airflow_atlas.oracle": 5,
    "airflow_atlas.workload": 5,
    "airflow_atlas.spark": 5,
    "airflow_atlas.compaction": 5,
    "airflow_atlas.grants": 5,
    "airflow_atlas.cli": 6,
    "spark_jobs": 6,
}

GLUE = "airflow_atlas.airflow"

ALLOWED: dict[tuple[str, str], str] = {
    # (importer, imported): why. Each entry is a known exception, to be removed when fixed.
    ("airflow_atlas.cli.store", "airflow_atlas.airflow.hooks.atlas"): (
        "`atlas-sweep --conn-id` reads an Airflow connection by definition; imported inside the function, "
        "only on that path (the other commands never load Airflow)"
    ),
    ("airflow_atlas.cli.store", "airflow_atlas.airflow.settings"): (
        "`atlas-sweep --conn-id` reads the atlas_settings Variable as the DAGs' tasks do (issue 21 item 4); "
        "imported inside the function, only on that path"
    ),
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def engine_sources() -> dict[str, str]:
    """Module name -> source of every engine module (the glue excluded)."""
    out = {}
    for base in ("airflow_atlas", "spark_jobs"):
        for path in sorted((ROOT / base).rglob("*.py")):
            name = module_name(path)
            if name == GLUE or name.startswith(GLUE + "."):
                continue
            out[name] = path.read_text(encoding="utf-8")
    return out


def _type_checking_imports(tree: ast.AST) -> set[int]:
    """The ids of the import nodes under ``if TYPE_CHECKING:`` (they never run: annotations only)."""
    found: set[int] = set()
    for node in ast.walk(tree):
        test = node.test if isinstance(node, ast.If) else None
        if (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
            isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
        ):
            found.update(id(n) for stmt in node.body for n in ast.walk(stmt) if isinstance(n, (ast.Import, ast.ImportFrom)))
    return found


def imported_modules(
    module: str, source: str, is_package: bool, known: set[str], *, type_checking: bool = True
) -> set[str]:
    """Every module ``source`` imports (anywhere in the file), relative imports resolved; ``from X import
    name`` counts as ``X.name`` when that is a module of ``known``. ``type_checking=False``: not those under
    ``if TYPE_CHECKING:``."""
    package = module if is_package else module.rpartition(".")[0]
    out: set[str] = set()
    tree = ast.parse(source)
    skipped = set() if type_checking else _type_checking_imports(tree)
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            out.add(target)
            out.update(f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in known)
    return out


def layer_of(module: str) -> int | None:
    """The layer of the longest :data:`LAYERS` prefix of ``module``; None for a module given none."""
    best = None
    for prefix, layer in LAYERS.items():
        covers = module == prefix or (module.startswith(prefix + ".") and prefix != "airflow_atlas")
        if covers and (best is None or len(prefix) > len(best[0])):
            best = (prefix, layer)
    return None if best is None else best[1]


def violations(sources: dict[str, str], packages: set[str]) -> list[str]:
    """Every broken rule (module doc) of ``sources`` (module name -> source; ``packages`` are ``__init__``s)."""
    known = set(sources) | {GLUE}
    found = []
    for module, source in sorted(sources.items()):
        own = layer_of(module)
        if own is None:
            found.append(f"{module}: no layer (add it to LAYERS in {Path(__file__).name})")
            continue
        run_time = imported_modules(module, source, module in packages, known, type_checking=False)
        for imported in sorted(imported_modules(module, source, module in packages, known)):
            if (module, imported) in ALLOWED:
                continue
            if imported in ("airflow", GLUE) or imported.startswith(("airflow.", GLUE + ".")):
                found.append(f"{module} imports {imported}: the engine never imports Airflow or its glue")
                continue
            if imported.startswith("airflow_atlas.kvs._common") and not module.startswith("airflow_atlas.kvs."):
                found.append(f"{module} imports {imported}: kvs/_common is private to kvs/ (use airflow_atlas.validation)")
                continue
            theirs = layer_of(imported) if imported.startswith(("airflow_atlas", "spark_jobs")) else None
            if theirs is not None and theirs > own and imported in run_time:
                found.append(f"{module} (layer {own}) imports {imported} (layer {theirs}): an upward import")
    return found


def _packages() -> set[str]:
    return {module_name(p) for base in ("airflow_atlas", "spark_jobs") for p in (ROOT / base).rglob("__init__.py")}


def test_the_engine_imports_only_downwards_and_never_airflow():
    sources = engine_sources()
    assert len(sources) > 100  # the walk found the engine
    assert violations(sources, _packages()) == []


def test_every_allowed_exception_is_still_needed():
    sources = engine_sources()
    known = set(sources) | {GLUE}
    for importer, imported in ALLOWED:
        assert importer in sources, f"ALLOWED names {importer}, which no longer exists"
        assert imported in imported_modules(importer, sources[importer], importer in _packages(), known), (
            f"{importer} no longer imports {imported}: remove the entry from ALLOWED"
        )


@pytest.mark.parametrize(
    "module, source, message",
    [
        ("airflow_atlas.sweep.queue.reader", "from ...store import AtlasStore\n", "upward import"),
        ("airflow_atlas.kvs.url", "def f():\n    from airflow_atlas.status import compute\n", "upward import"),
        ("airflow_atlas.status.compute", "from airflow.sdk import Variable\n", "never imports Airflow"),
        ("airflow_atlas.spark.driver", "from ..airflow.settings import AtlasSettings\n", "never imports Airflow"),
        ("airflow_atlas.sweep.queue.partitions", "from ...kvs._common import check_int\n", "private to kvs/"),
        ("airflow_atlas.locks", "from .kvs import _common\n", "private to kvs/"),
        ("airflow_atlas.brand_new", "import os\n", "no layer"),
    ],
)
def test_the_check_reports_each_kind_of_violation(module, source, message):
    sources = {
        module: source,
        "airflow_atlas.kvs._common": "",
        "airflow_atlas.status.compute": "",
        "airflow_atlas.status": "",
    }
    sources[module] = source
    found = violations(sources, {"airflow_atlas.status", "airflow_atlas.kvs"})
    assert any(message in v and v.startswith(module) for v in found), found


def test_within_a_layer_and_downwards_is_fine():
    sources = {
        "airflow_atlas.store": "from .sweep.queue.sweep_queue import SweepQueue\nfrom .config import StoreConfig\n",
        "airflow_atlas.kvs.sqlite.reads": "from ..api import Cell\nfrom ...errors import InvalidInputError\n",
        "airflow_atlas.kvs._common": "",
        "airflow_atlas.kvs.sqlite.writes": "from .._common import check_int\n",
    }
    assert violations(sources, set()) == []
