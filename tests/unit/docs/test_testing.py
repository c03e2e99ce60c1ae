"""docs/TESTING.md's mechanical claims: the scripts ``scripts/test.sh`` runs (bootstrap only: it starts no
service) and its lanes are the script's; the services table is ``tests/services.py``'s (each fixture is in the
conftest named, starts the service named, with the script named); the groups are ``tests/groups.py``'s and
pytest-xdist keeps each on one worker (a small tree run under xdist); ``tests/unit`` needs no service (no test or
fixture there asks for one of the service fixtures, nothing there imports the tools that start servers); one
line states the suite's latest clean-clone time (history is git's). Pure: reads files and parses Python, and
runs pytest on a tree of its own; nothing is started."""
from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

from tests import groups, services
from tests.unit.docs.markdown import ROOT, read, rows, section, spans

DOC = read("TESTING.md")
WHAT_RUNS = section(DOC, "What runs")
SCRIPT = (ROOT / "scripts" / "test.sh").read_text()


def _bash_array(name: str) -> list[str]:
    found = re.search(rf"^{name}=\(([^)]*)\)", SCRIPT, re.MULTILINE)
    assert found, f"scripts/test.sh has no array {name}"
    return found.group(1).split()


def test_the_scripts_test_sh_runs_are_the_first_paragraphs():
    """The first paragraph of "What runs" names every script test.sh runs (anywhere: it starts no service, so
    bootstrap is the only one)."""
    started = re.findall(r'"\$ROOT/(scripts/[\w.]+\.sh)"', SCRIPT)
    assert started == ["scripts/bootstrap.sh"], "scripts/test.sh starts a service itself: " + ", ".join(started)
    paragraph = WHAT_RUNS.strip().split("\n\n", 1)[0]
    assert [s for s in spans(paragraph) if re.fullmatch(r"scripts/[\w.]+\.sh", s)] == started


# ----- the services: one row per tests/services.py Service, its fixture where the row says ------------------------
SERVICE_ROWS = [row for row in rows(WHAT_RUNS) if len(row) == 4]  # service, fixture (conftest), started by, who
ALL_SERVICES = {name: value for name, value in vars(services).items() if isinstance(value, services.Service)}


def _fixtures(conftest: str) -> dict[str, ast.FunctionDef]:
    tree = ast.parse((ROOT / conftest).read_text())
    return {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef) and any(
        "fixture" in ast.unparse(d) for d in node.decorator_list)}


def _ensured(fixture: ast.FunctionDef) -> list[str]:
    """The Service constants whose ``ensure()`` the fixture calls."""
    return [ast.unparse(node.func.value) for node in ast.walk(fixture) if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute) and node.func.attr == "ensure"]


def test_the_services_table_is_tests_services():
    assert len(SERVICE_ROWS) == len(ALL_SERVICES), [row[0] for row in SERVICE_ROWS]
    documented = []
    for row in SERVICE_ROWS:
        fixture, conftest = spans(row[1])
        found = _fixtures(conftest)
        assert fixture in found, f"{conftest} has no fixture {fixture}"
        ensured = _ensured(found[fixture])
        assert len(ensured) == 1 and ensured[0] in ALL_SERVICES, f"{fixture} starts {ensured}, not one Service"
        documented.append(ensured[0])
        script = str((Path(ALL_SERVICES[ensured[0]].start[0])).relative_to(ROOT))
        assert " ".join([script, *ALL_SERVICES[ensured[0]].start[1:]]) == spans(row[2])[0], (fixture, row[2])
    assert sorted(documented) == sorted(ALL_SERVICES)


def test_the_group_table_is_the_suites_groups():
    table = {row[0]: spans(row[1]) for row in rows(section(DOC, "The whole suite: two groups at once, then alone"))}
    assert table["servers"] == list(groups.SERVERS)
    assert table["alone, after both"] == _bash_array("ALONE")


_GROUPED_CONFTEST = """
import pytest
from tests.groups import mark_groups

@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    mark_groups(items, config.rootpath)
"""
_GROUPED_TEST = """
import os

def test_{n}():
    with open(os.environ["WORKERS_SEEN"], "a") as out:
        out.write("{path} " + os.environ["PYTEST_XDIST_WORKER"] + "\\n")
"""


def test_pytest_xdist_runs_each_group_on_one_worker(tmp_path):
    """What the whole suite's run relies on (and pytest 9.2 with pytest-xdist 3.8 breaks): under ``-n 2 --dist
    loadgroup``, the marks tests/conftest.py's hook sets put each group's tests on one worker, the two groups on
    two. Four files of each group, in a tree of its own (its conftest sets the marks as tests/conftest.py does)."""
    (tmp_path / "conftest.py").write_text(_GROUPED_CONFTEST)
    files = [f"{groups.SERVERS[0]}/test_s{n}.py" for n in range(4)] + [f"tests/unit/test_m{n}.py" for n in range(4)]
    for n, path in enumerate(files):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(_GROUPED_TEST.format(n=n, path=path))
    seen = tmp_path / "seen.txt"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env.update(WORKERS_SEEN=str(seen), PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-q", "-p",
                           "no:cacheprovider", "--rootdir", str(tmp_path), str(tmp_path)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    workers: dict[str, set[str]] = {}
    for line in seen.read_text().splitlines():
        path, worker = line.split()
        workers.setdefault(groups.group_of(path), set()).add(worker)
    assert sorted(workers) == ["main", "servers"] and all(len(w) == 1 for w in workers.values()), workers
    assert workers["main"] != workers["servers"], workers


def test_one_line_states_the_suites_clean_clone_time():
    """Exactly one time in minutes is stated in bold in "What runs" and its subsections (the latest clean-clone
    run; a second one means a log of runs is growing again)."""
    text = DOC.split("## What runs", 1)[1].split("\n## ", 1)[0]
    times = re.findall(r"\*\*(\d+(?:\.\d+)?) min\*\*", text)
    assert len(times) == 1, times
    line = next(line for line in text.splitlines() if f"**{times[0]} min**" in line)
    assert "clean-clone" in line and re.search(r"\b[0-9a-f]{7,40}\b", line), "the run's commit and kind"


# ----- tests/unit needs no service ------------------------------------------------------------------------------
# The other session fixtures of tests/conftest.py that start or reach a server (the local node, Spark local[2],
# Airflow's migrated database, a Spark Connect server), and the services table's.
ROOT_SERVER_FIXTURES = {"cassandra_session", "cassandra_keyspace", "fresh_keyspace", "spark", "airflow_home",
                        "connect_server"}
SERVICE_FIXTURES = ROOT_SERVER_FIXTURES | {spans(row[1])[0] for row in SERVICE_ROWS}
SERVER_TOOLS = ("devkit", "tests.timestamp_servers", "tests.processes", "pyspark")
# The modules of devkit that start nothing (a node's spec, the clusters' nodes, the files they run on, the ring's
# state): tests/unit tests them.
PURE_DEVKIT = ("devkit.cassandra.spec", "devkit.cassandra.topology", "devkit.cassandra.config", "devkit.cassandra.ring")


def _unit_sources() -> dict[str, ast.Module]:
    unit = sorted((ROOT / "tests" / "unit").rglob("*.py"))
    return {str(p.relative_to(ROOT)): ast.parse(p.read_text(), str(p)) for p in unit}


def test_the_service_fixtures_are_the_suites():
    """The list above is not stale: each is a fixture of tests/conftest.py."""
    assert ROOT_SERVER_FIXTURES <= set(_fixtures("tests/conftest.py"))


def test_the_unit_tier_asks_for_no_service():
    """"`tests/unit` ... no service": no test or fixture under tests/unit takes a service fixture (as an argument
    or through ``usefixtures``), and no module there imports what starts servers."""
    found = []
    for path, tree in _unit_sources().items():
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                used = {a.arg for a in node.args.args + node.args.kwonlyargs} & SERVICE_FIXTURES
                found += [f"{path}:{node.lineno} {node.name}({name})" for name in sorted(used)]
            elif isinstance(node, ast.Call) and ast.unparse(node.func).endswith("usefixtures"):
                found += [f"{path}:{node.lineno} usefixtures({a.value!r})" for a in node.args
                          if isinstance(a, ast.Constant) and a.value in SERVICE_FIXTURES]
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
                found += [f"{path}:{node.lineno} imports {n}" for n in names if n not in PURE_DEVKIT
                          and any(n == tool or n.startswith(tool + ".") for tool in SERVER_TOOLS)]
    assert found == [], "tests/unit is documented as needing no service (docs/TESTING.md):\n" + "\n".join(found)
