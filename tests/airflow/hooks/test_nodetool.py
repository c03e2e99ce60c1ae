"""nodetool runners: argument lists (never a shell), errors, tablestats parsing, the real local node."""
from __future__ import annotations

import pytest

from airflow_atlas.airflow.hooks import nodetool
from airflow_atlas.airflow.hooks.nodetool import LocalNodetoolRunner, NodetoolError, SSHNodetoolRunner, parse_tablestats
from airflow_atlas.errors import InvalidInputError

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


def test_operations_reject_non_cql_names_before_running_anything(tmp_path):
    marker = tmp_path / "ran"
    runner = LocalNodetoolRunner(["touch", str(marker)])
    for keyspace, table in [("ks", "t; rm -rf /"), ("ks", "-h"), ("ks", ""), ("k s", "t"), ("ks.x", "t"), ("ks", "t" * 223)]:
        for op in (nodetool.flush, nodetool.compact, nodetool.table_stats):
            with pytest.raises(InvalidInputError):
                op(runner, keyspace, table)
    assert not marker.exists()


def test_table_stats_retries_the_mbean_race_of_a_concurrent_drop(tmp_path):
    """nodetool's 'Server is not initialized yet' on a running node means an MBean vanished mid-listing."""
    count = tmp_path / "count"
    script = tmp_path / "fake_nodetool.sh"
    script.write_text(
        "#!/bin/sh\n"
        f'echo x >> "{count}"\n'
        f'if [ "$(wc -l < "{count}")" -lt 3 ]; then\n'
        '  echo "Exception in thread \\"main\\" java.lang.IllegalArgumentException: Server is not initialized yet, cannot run nodetool." >&2\n'
        "  exit 1\n"
        "fi\n"
        "echo '{\"ks\": {\"tables\": {\"t\": {\"space_used_live\": \"10\", \"space_used_total\": \"12\", \"sstable_count\": 1}}}}'\n"
    )
    script.chmod(0o755)
    assert nodetool.table_stats(LocalNodetoolRunner([str(script)]), "ks", "t")["space_used_live"] == 10
    assert count.read_text().count("x") == 3
    with pytest.raises(NodetoolError, match="exited 1"):  # other failures are not retried
        nodetool.table_stats(LocalNodetoolRunner(["false"]), "ks", "t")
