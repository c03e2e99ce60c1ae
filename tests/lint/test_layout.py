"""The tests mirror the package (docs/TESTING.md, "Layout"), read from the tree (nothing is imported):

* a test package under ``tests/unit`` or ``tests/integration`` (a directory holding Python files) is a package:
  it has an ``__init__.py``;
* its path below ``tests/<kind>/`` is the path of a package of ``airflow_atlas/`` (``tests/unit/status`` tests
  ``airflow_atlas/status``), or starts with one of the documented tiers of :data:`TIERS`; a tier that mirrors a
  source directory (``tests/unit/devkit`` mirrors ``devkit/``) mirrors it below too;
* a test file directly in ``tests/<kind>/`` names a top-level module: ``test_<mod>[_<aspect>].py`` tests
  ``airflow_atlas/<mod>.py``;
* the documented tiers are Layout's table: its rows name exactly :data:`TIERS` and every other directory of
  ``tests/`` that holds tests.

The last test plants each kind of misplacement in a tree of its own and expects it found.
"""
from __future__ import annotations

from pathlib import Path

from tests.unit.docs.markdown import read, rows, section, spans

ROOT = Path(__file__).resolve().parents[2]
KINDS = ("unit", "integration")

# The test packages of tests/unit and tests/integration that are no package of airflow_atlas/: the path below
# tests/ -> the source directory they mirror below (None: theirs is a tier of its own, not a mirror).
TIERS: dict[str, str | None] = {
    "unit/devkit": "devkit",  # the devkit (and scripts/cassandra.sh, its wrapper)
    "unit/scripts": None,  # scripts/ that are no devkit wrapper (test_spark.py: scripts/spark.sh)
    "unit/docs": None,  # the docs' mechanical claims
    "unit/harness": None,  # the suite's own helpers (tests/services.py, a tier's helper module)
    "integration/security": None,  # the secured node and cluster
    "integration/foundation": None,  # the services the suite stands on
}


def _holds_python(directory: Path) -> bool:
    return any(directory.glob("*.py"))


def _packages(base: Path) -> list[Path]:
    """The directories below ``base`` that hold Python files (caches left out), ``base`` itself excluded."""
    return sorted(d for d in base.rglob("*") if d.is_dir() and "__pycache__" not in d.parts and _holds_python(d))


def misplaced(root: Path, tiers: dict[str, str | None]) -> list[str]:
    """What breaks the layout in the checkout at ``root`` (``tests/``, ``airflow_atlas/``), one line each."""
    tests, package = root / "tests", root / "airflow_atlas"
    modules = {p.stem for p in package.glob("*.py") if p.name != "__init__.py"}
    found = []
    for kind in KINDS:
        for directory in _packages(tests / kind):
            name = directory.relative_to(tests).as_posix()
            if not (directory / "__init__.py").is_file():
                found.append(f"tests/{name}: no __init__.py (the tests are packages)")
            below = directory.relative_to(tests / kind)
            tier = next((t for t in tiers if name == t or name.startswith(t + "/")), None)
            if tier is None:
                if not (package / below / "__init__.py").is_file():
                    found.append(f"tests/{name}: no package airflow_atlas/{below.as_posix()} (and no documented tier)")
            elif tiers[tier] is not None:
                mirrored = root / tiers[tier] / directory.relative_to(tests / tier)
                if not mirrored.is_dir():
                    found.append(f"tests/{name}: the tier tests/{tier} mirrors {tiers[tier]}/, which has no "
                                 f"{mirrored.relative_to(root).as_posix()}")
        for path in sorted((tests / kind).glob("test_*.py")):
            stem = path.stem.removeprefix("test_")
            if not any(stem == mod or stem.startswith(mod + "_") for mod in modules):
                found.append(f"tests/{kind}/{path.name}: names no top-level module of airflow_atlas/ "
                             "(test_<mod>[_<aspect>].py; a package's test goes in its package)")
    return found


def test_the_tests_mirror_the_package():
    found = misplaced(ROOT, TIERS)
    assert found == [], "the tests' layout (docs/TESTING.md, \"Layout\"):\n" + "\n".join(found)


def test_the_layout_table_is_the_tiers():
    """Layout's table names the tiers above and every other directory of tests/ that holds tests; each exists."""
    documented = {span.removeprefix("tests/").rstrip("/") for row in rows(section(read("TESTING.md"), "Layout"))
                  for span in spans(row[0]) if span.startswith("tests/")}
    tests = ROOT / "tests"
    top = {d.name for d in tests.iterdir() if d.is_dir() and d.name not in (*KINDS, "__pycache__")
           and (_holds_python(d) or _packages(d))}
    assert {t for t in documented if "/" in t} == set(TIERS)
    assert {t for t in documented if "/" not in t} == top
    assert all((tests / t).is_dir() for t in documented)


def test_each_misplacement_is_found(tmp_path):
    """The checker on a planted tree: every kind of misplacement is reported, a mirrored tree is not."""
    for path in ("airflow_atlas/__init__.py", "airflow_atlas/store.py", "airflow_atlas/status/__init__.py",
                 "devkit/cassandra/__init__.py",
                 "tests/unit/status/__init__.py", "tests/unit/status/test_lag.py", "tests/unit/test_store_open.py",
                 "tests/unit/devkit/__init__.py", "tests/unit/devkit/cassandra/__init__.py",
                 "tests/unit/devkit/cassandra/test_spec.py", "tests/unit/docs/__init__.py",
                 "tests/unit/docs/test_readme.py"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("")
    tiers: dict[str, str | None] = {"unit/devkit": "devkit", "unit/docs": None}
    assert misplaced(tmp_path, tiers) == []
    for path in ("tests/integration/txn/__init__.py", "tests/unit/status/nested/test_x.py",
                 "tests/unit/devkit/node/__init__.py", "tests/unit/test_status_lag.py"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("")
    assert misplaced(tmp_path, tiers) == [
        "tests/unit/devkit/node: the tier tests/unit/devkit mirrors devkit/, which has no devkit/node",
        "tests/unit/status/nested: no __init__.py (the tests are packages)",
        "tests/unit/status/nested: no package airflow_atlas/status/nested (and no documented tier)",
        "tests/unit/test_status_lag.py: names no top-level module of airflow_atlas/ "
        "(test_<mod>[_<aspect>].py; a package's test goes in its package)",
        "tests/integration/txn: no package airflow_atlas/txn (and no documented tier)",
    ]
