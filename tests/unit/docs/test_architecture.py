"""docs/ARCHITECTURE.md's mechanical claims, checked against the tree and the code (as
tests/unit/kvs/test_consistency_policy.py checks its consistency table): every path its module tables name exists,
every module of the package is in a table, the import-layer and sweep-package tables are the lists the import
tests enforce, each constant's home is the module it names, and the counts it states. Pure: reads files and
imports the engine; nothing is started."""
from __future__ import annotations

import re
from pathlib import Path

from tests.unit.docs.code_index import defines
from tests.unit.docs.markdown import ROOT, read, rows, section, spans

DOC = read("ARCHITECTURE.md")
PACKAGE = ROOT / "airflow_atlas"
# section -> the directory its first column's paths are relative to
MODULE_TABLES = {
    "The sweep package": PACKAGE,
    "Engine modules": PACKAGE,
    "Airflow glue (`airflow_atlas/airflow/`)": PACKAGE / "airflow",
    "Outside the package": ROOT,
}


def expand(base: Path, span: str) -> list[Path]:
    """The files or directories one first-column path means: ``x.py(i)`` is ``x.py`` and ``x.pyi``, a glob its
    matches (none is an error: the caller sees an empty list)."""
    if span.endswith(".py(i)"):
        stem = span[: -len("(i)")]
        return [base / stem, base / (stem + "i")]
    if "*" in span:
        return sorted(base.glob(span))
    return [base / span]


def module_rows():
    """(section, base, first-column paths, the rest of the row) of every module table row."""
    for title, base in MODULE_TABLES.items():
        for row in rows(section(DOC, title)):
            yield title, base, spans(row[0]), " | ".join(row[1:])


def test_every_path_the_module_tables_name_exists():
    missing = []
    for title, base, paths, _ in module_rows():
        assert paths, f"{title}: a row without a path in its first column"
        for span in paths:
            found = expand(base, span)
            if not found or not all(p.exists() for p in found):
                missing.append(f"{title}: {span}")
    assert missing == [], "docs/ARCHITECTURE.md names paths that do not exist:\n" + "\n".join(missing)


def _covered() -> set[Path]:
    """Every file a row of the tables names: in its first column, or in its text relative to the table's base
    or to the row's own directories (a package row such as ``status/`` names ``document.py``, ``kvs/sqlite/``
    names ``files``)."""
    covered: set[Path] = set()
    for _title, base, paths, rest in module_rows():
        found = [p for span in paths for p in expand(base, span)]
        covered.update(found)
        directories = {base} | {p if p.is_dir() else p.parent for p in found}
        for name in spans(rest):
            for directory in directories:
                for candidate in (directory / name, directory / f"{name}.py"):
                    if candidate.is_file():
                        covered.add(candidate)
    return covered


def test_every_module_of_the_package_is_in_a_table():
    covered = _covered()
    missing = [
        str(p.relative_to(ROOT)) for p in sorted(PACKAGE.rglob("*.py"))
        if p.name not in ("__init__.py", "__main__.py") and p not in covered
    ]
    assert missing == [], "modules docs/ARCHITECTURE.md's tables do not name (give each a row, or name it in its " \
        "package's row):\n" + "\n".join(missing)


# ----- the layer tables are the lists the import tests enforce ---------------------------------------------


def _outside_parentheses(text: str) -> str:
    out, depth = [], 0
    for ch in text:
        depth += ch == "("
        if depth == 0:
            out.append(ch)
        depth -= ch == ")" and depth > 0
    return "".join(out)


def _dotted(span: str) -> str:
    name = span.rstrip("/").removesuffix(".py").replace("/", ".")
    return name if name == "spark_jobs" else f"airflow_atlas.{name}"


def test_the_import_layers_table_is_the_layering_the_import_test_enforces():
    """"Import layers": each row's modules (outside its parenthesised remarks) are test_import_layers.LAYERS."""
    from tests.lint.test_import_layers import LAYERS

    doc: dict[str, int] = {}
    for layer, modules in rows(section(DOC, "Import layers")):
        if layer.isdigit():
            doc.update((_dotted(span), int(layer)) for span in spans(_outside_parentheses(modules)))
    assert doc == {name: layer for name, layer in LAYERS.items() if name != "airflow_atlas"}


def test_the_sweep_package_table_is_the_layering_the_import_cycle_test_enforces():
    """"The sweep package": what each part may import of sweep/ is test_import_cycles.SWEEP_LAYERS."""
    from tests.lint.test_import_cycles import SWEEP_LAYERS

    doc: dict[str, tuple[str, ...]] = {}
    for part, _owns, may_import in rows(section(DOC, "The sweep package")):
        (path,) = spans(part)
        if "*" in path:  # the sweepers: the rest of sweep/, which the layering does not restrict
            continue
        own = _dotted(path)
        named = {_dotted(s if s.startswith("sweep/") else f"sweep/{s}") for s in spans(may_import)}
        doc[own] = tuple(sorted(named - {own}))
    assert doc == {part: tuple(sorted(allowed)) for part, allowed in SWEEP_LAYERS.items()}


# ----- constants: their homes, their counts -------------------------------------------------------------------


def _bullet(text: str, start: str) -> str:
    body = section(text, "Settings and constants")
    assert start in body, f"no bullet {start!r} in 'Settings and constants'"
    return body.split(start, 1)[1].split("\n* ", 1)[0]


def test_each_constant_lives_in_the_module_the_doc_gives_as_its_home():
    """"One home per constant": in each clause, the names before a module path are defined in that module
    (not imported into it), e.g. `SWEEPABLE_STRATEGIES` ... in `kvs/tables.py`."""
    claims = []
    for clause in _bullet(DOC, "**One home per constant").split(";"):
        pending: list[str] = []
        for span in spans(clause):
            if span.endswith(".py"):
                claims += [(name, span) for name in pending]
                pending = []
            elif span.replace(".", "").replace("_", "").isalnum():
                pending.append(span)
    assert len(claims) >= 10, claims  # the bullet was read
    wrong = [f"`{name}` is not defined in {path}" for name, path in claims
             if not defines(PACKAGE / path, name.split(".")[0])]
    assert wrong == []
    from tests.unit.docs.code_index import value

    for name, path in claims:  # a dotted name: the attribute exists there too
        value(PACKAGE / path, name)


_COUNT_WORDS = {"empty": 0, "none": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5}


def test_the_allow_lists_hold_as_many_entries_as_the_doc_says():
    """"`NAME` (empty today" / "(one today": the allow-lists the docs count (the import circles)."""
    from tests.unit.docs.code_index import definitions, value

    claims = re.findall(r"`([A-Z][A-Z0-9_]+)` \((empty|none|one|two|three|four|five|\d+) today", DOC)
    assert {name for name, _ in claims} >= {"ALLOWED_CYCLES", "ALLOWED_DEFERRED_CYCLES"}
    for name, count in claims:
        (path,) = definitions()[name]
        expected = _COUNT_WORDS.get(count, None)
        assert len(value(path, name)) == (int(count) if expected is None else expected), f"`{name}` ({count} today)"


def test_the_operations_the_doc_lists_are_the_consistency_operations():
    """The `kvs/consistency.py` row lists every `Operation`, in order."""
    from airflow_atlas.kvs.consistency import Operation

    (row,) = [r for r in rows(section(DOC, "Engine modules")) if spans(r[0]) == ["kvs/consistency.py"]]
    listed = re.search(r"`Operation` \(([^)]*)\)", row[1])
    assert listed, "the kvs/consistency.py row names the operations: `Operation` (a, b, ...)"
    assert [s.strip() for s in listed.group(1).split(",")] == [op.value for op in Operation]
