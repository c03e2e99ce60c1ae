"""docs/TESTING.md's mechanical claims: what ``scripts/test.sh`` starts before it reads its arguments and its
lanes are the script's; ``tests/unit`` needs no service (no test or fixture there asks for one of the service
fixtures, nothing there imports the tools that start servers); one line states the suite's latest clean-clone
time (history is git's). Pure: reads files and parses Python; nothing is started."""
from __future__ import annotations

import ast
import re

from tests.unit.docs.markdown import ROOT, read, rows, section, spans

DOC = read("TESTING.md")
WHAT_RUNS = section(DOC, "What runs")
SCRIPT = (ROOT / "scripts" / "test.sh").read_text()


def _bash_array(name: str) -> list[str]:
    found = re.search(rf"^{name}=\(([^)]*)\)", SCRIPT, re.MULTILINE)
    assert found, f"scripts/test.sh has no array {name}"
    return found.group(1).split()


def test_the_services_started_before_the_arguments_are_the_scripts():
    """The first paragraph of "What runs" names every script test.sh runs before it looks at its arguments."""
    before_arguments = SCRIPT.split("if [[ $# -gt 0 ]]", 1)[0]
    started = re.findall(r'^"\$ROOT/(scripts/[\w.]+\.sh)"', before_arguments, re.MULTILINE)
    assert started, "scripts/test.sh runs its scripts as \"$ROOT/scripts/NAME.sh\" (the test reads them so)"
    paragraph = WHAT_RUNS.strip().split("\n\n", 1)[0]
    assert [s for s in spans(paragraph) if re.fullmatch(r"scripts/[\w.]+\.sh", s)] == started


def test_the_lane_table_is_the_scripts_lanes():
    lanes = {row[0]: spans(row[1]) for row in rows(section(DOC, "The whole suite: two lanes, then alone"))}
    assert lanes["servers"] == _bash_array("SERVERS_LANE")
    assert lanes["alone, after both"] == _bash_array("ALONE")


def test_one_line_states_the_suites_clean_clone_time():
    """Exactly one time in minutes is stated in bold in "What runs" and its subsections (the latest clean-clone
    run; a second one means a log of runs is growing again)."""
    text = DOC.split("## What runs", 1)[1].split("\n## ", 1)[0]
    times = re.findall(r"\*\*(\d+(?:\.\d+)?) min\*\*", text)
    assert len(times) == 1, times
    line = next(line for line in text.splitlines() if f"**{times[0]} min**" in line)
    assert "clean-clone" in line and re.search(r"\b[0-9a-f]{7,40}\b", line), "the run's commit and kind"


# ----- tests/unit needs no service ------------------------------------------------------------------------------
# The session fixtures of tests/conftest.py that start or reach a server (the local node, its timestamp servers,
# Spark, Airflow's migrated database, a Spark Connect server).
SERVICE_FIXTURES = {"cassandra_node", "cassandra_session", "cassandra_keyspace", "fresh_keyspace", "spark",
                    "airflow_home", "connect_server"}
SERVER_TOOLS = ("devkit", "tests.timestamp_servers", "tests.processes", "pyspark")


def _unit_sources() -> dict[str, ast.Module]:
    unit = sorted((ROOT / "tests" / "unit").rglob("*.py"))
    return {str(p.relative_to(ROOT)): ast.parse(p.read_text(), str(p)) for p in unit}


def test_the_service_fixtures_are_the_suites():
    """The list below is not stale: each is a fixture of tests/conftest.py."""
    conftest = ast.parse((ROOT / "tests" / "conftest.py").read_text())
    fixtures = {node.name for node in conftest.body if isinstance(node, ast.FunctionDef) and any(
        "fixture" in ast.unparse(d) for d in node.decorator_list)}
    assert SERVICE_FIXTURES <= fixtures


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
                found += [f"{path}:{node.lineno} imports {n}" for n in names
                          if any(n == tool or n.startswith(tool + ".") for tool in SERVER_TOOLS)]
    assert found == [], "tests/unit is documented as needing no service (docs/TESTING.md):\n" + "\n".join(found)
