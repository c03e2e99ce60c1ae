"""The nodetool path of ``atlas_compaction`` (``airflow_atlas/airflow/hooks/nodetool.py``) against the secured
node's JMX, which asks for a password: the JMX user and nodetool's password file go in the
``nodetool_command`` setting (``-u atlas_jmx -pwf FILE``: the password never on a command line), the node in
``nodetool_jmx_targets``. Without them nodetool is refused, with an error that names the node."""
from __future__ import annotations

import pytest

from tests.conftest import CASSANDRA_SCRIPT

pytestmark = pytest.mark.cassandra

JMX_TARGET = "127.0.0.1:7206"


def test_compaction_runner_over_authenticated_jmx(secure_node, secure_keyspace):
    from airflow_atlas.airflow.hooks.nodetool import LocalNodetoolRunner, NodetoolError, flush, table_stats

    secure_node.cql(
        f"CREATE KEYSPACE IF NOT EXISTS {secure_keyspace} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}",
        f"CREATE TABLE IF NOT EXISTS {secure_keyspace}.jmx_probe (k int PRIMARY KEY, v text)",
        f"INSERT INTO {secure_keyspace}.jmx_probe (k, v) VALUES (1, 'x')",
    )
    password = secure_node.nodetool_password_file.read_text().split()[1]
    command = [str(CASSANDRA_SCRIPT), "nodetool", "-u", "atlas_jmx", "-pwf", str(secure_node.nodetool_password_file)]
    runner = LocalNodetoolRunner(command, targets=[JMX_TARGET])
    flush(runner, secure_keyspace, "jmx_probe")
    stats = table_stats(runner, secure_keyspace, "jmx_probe")
    assert stats, stats
    assert password not in runner.describe()

    bare = LocalNodetoolRunner([str(CASSANDRA_SCRIPT), "nodetool"], timeout_seconds=120, targets=[JMX_TARGET])
    with pytest.raises(NodetoolError) as refused:
        flush(bare, secure_keyspace, "jmx_probe")
    text = str(refused.value)
    assert JMX_TARGET in text and "JMX refused the credentials" in text and "-pwf" in text, text
    assert "at java." not in text  # the line that says why, not the stack trace
    assert password not in text
