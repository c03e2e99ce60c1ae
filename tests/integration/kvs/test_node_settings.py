"""The project's Cassandra node runs with the settings docs/RUNBOOK.md asks of a production cluster
(scripts/cassandra/conf/cassandra.yaml)."""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.cassandra


def test_the_node_runs_paxos_v2(cassandra_session):
    """On Paxos v1 the sweep's and the application's timestamp draws on the one ``_timestamp`` cell stalled each
    other for 65-160 ms (bench/ANALYSIS.md, "Paxos v2"): the benchmarks and the tests run on what a deployment
    is told to run."""
    row = cassandra_session.execute("SELECT value FROM system_views.settings WHERE name = 'paxos_variant'").one()
    assert row is not None and row.value == "v2", row
