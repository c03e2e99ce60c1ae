"""nodetool runners: argument lists (never a shell), errors, tablestats parsing, the real local node."""
from __future__ import annotations

import pytest

from airflow_atlas.airflow.hooks import nodetool
from airflow_atlas.airflow.hooks.nodetool import LocalNodetoolRunner, NodetoolError, SSHNodetoolRunner, parse_tablestats

TABLESTATS = """
WARN  some JVM noise
{
  "ks" : { "tables" : { "t" : { "space_used_live" : "23100", "space_used_total" : "24000", "sstable_count" : 3 } } },
  "total_number_of_tables" : 1
}
"""


def test_parse_tablestats():
    assert parse_tablestats(TABLESTATS, "ks", "t") == {"space_used_live": 23100, "space_used_total": 24000, "sstable_count": 3}
    with pytest.raises(NodetoolError):
        parse_tablestats("nodetool: Failed to connect", "ks", "t")
    with pytest.raises(NodetoolError):
        parse_tablestats(TABLESTATS, "ks", "other")


def test_local_runner_passes_an_argument_list_without_a_shell():
    runner = LocalNodetoolRunner(["echo"])
    out = runner.run(["compact", "--", "ks", "t; rm -rf /"])
    assert out[0].stdout.strip() == "compact -- ks t; rm -rf /"


def test_local_runner_reports_failures():
    with pytest.raises(NodetoolError, match="exited 1"):
        LocalNodetoolRunner(["false"]).run(["flush"])
    with pytest.raises(NodetoolError, match="not found"):
        LocalNodetoolRunner(["/no/such/nodetool"]).run(["flush"])
    with pytest.raises(ValueError):
        LocalNodetoolRunner("nodetool compact")
    with pytest.raises(ValueError):
        SSHNodetoolRunner([])


@pytest.mark.cassandra
def test_local_runner_against_the_real_node(cassandra_node):
    from tests.conftest import CASSANDRA_SCRIPT

    runner = LocalNodetoolRunner([str(CASSANDRA_SCRIPT), "nodetool"], timeout_seconds=300)
    nodetool.flush(runner, "system_schema", "tables")
    stats = nodetool.table_stats(runner, "system_schema", "tables")
    assert stats["space_used_live"] > 0 and stats["sstable_count"] >= 1
