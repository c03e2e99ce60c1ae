"""bench/lib/node.py: the wait for a quiet node between measured windows (``settle_pressure``) on the embedded store
(no nodes), on nodes whose reports change (the pressure records of airflow_atlas/kvs/pressure.py) and on the real
local node; the node's Paxos variant, as a result records it."""
from __future__ import annotations

import time

import pytest

from airflow_atlas.kvs.pressure import NodePressure
from bench.lib.machine import cassandra_facts
from bench.lib.node import paxos_variant, settle_pressure
from bench.lib.stores import cassandra_url, drop_store, new_keyspace_name, open_store


def _node(pending_compactions: int = 0, mutations_pending: int = 0, blocked: int = 0,
          late: bool = False) -> NodePressure:
    node = NodePressure.from_rows("127.0.0.1", [
        {"name": "CompactionExecutor", "pending_tasks": pending_compactions, "active_tasks_limit": 2,
         "blocked_tasks": 0},
        {"name": "MutationStage", "pending_tasks": mutations_pending, "active_tasks_limit": 32,
         "blocked_tasks": blocked},
    ])
    return NodePressure(node.node, node.pools, late=late)


class Reports:
    """A store's key-value service as settle_pressure reads it: one report per call, the last one repeated."""

    def __init__(self, *reports: list[NodePressure]):
        self._reports = list(reports)
        self.calls = 0

    def node_pressure(self) -> list[NodePressure]:
        self.calls += 1
        return self._reports[min(self.calls, len(self._reports)) - 1]


def test_settle_pressure_waits_until_nothing_is_queued():
    """Any pending compaction or request, a blocked task or a late answer keeps it waiting (even a queue the
    pace's guard would tolerate: the next window must not inherit the previous one's work)."""
    kvs = Reports([_node(pending_compactions=3)], [_node(mutations_pending=1)], [_node(blocked=1)],
                  [_node(late=True)], [_node()])
    waited = settle_pressure(kvs, max_seconds=10.0, poll=0.01)
    assert kvs.calls == 5
    assert waited < 5.0


def test_settle_pressure_gives_up_after_its_limit():
    kvs = Reports([_node(pending_compactions=1)])
    started = time.perf_counter()
    waited = settle_pressure(kvs, max_seconds=0.2, poll=0.01)
    assert 0.2 <= waited < 2.0 and time.perf_counter() - started < 2.0
    assert kvs.calls >= 2


def test_settle_pressure_returns_at_once_without_nodes(tmp_path):
    store = open_store(f"sqlite:///{tmp_path}/settle.db")
    try:
        assert store.kvs.node_pressure() == []
        assert settle_pressure(store.kvs, max_seconds=10.0) < 1.0
    finally:
        store.close()


@pytest.mark.cassandra
def test_settle_pressure_reads_the_real_node(cassandra_node):
    """The local node reports its pools and, with nothing queued, the wait ends (a node busy with another
    tier's compactions may take some of the 60 s; the limit is what it may not pass)."""
    host, port = cassandra_node
    store = open_store(cassandra_url(new_keyspace_name("settle"), host=f"{host}:{port}"))
    try:
        nodes = store.kvs.node_pressure()
        assert [n.node for n in nodes] == [host], nodes
        assert {p.name for p in nodes[0].pools} >= {"CompactionExecutor", "MutationStage", "ReadStage"}, nodes
        assert settle_pressure(store.kvs, max_seconds=60.0) < 65.0
    finally:
        drop_store(store)


@pytest.mark.cassandra
def test_the_node_variant_of_paxos_is_recorded(cassandra_session):
    """Every result records the node's Paxos variant (machine.cassandra.paxos_variant): the project's nodes run
    v2 (scripts/cassandra/conf/cassandra.yaml), and a run on v1 measures a different default."""
    assert paxos_variant(cassandra_session) == "v2"
    assert cassandra_facts(cassandra_session)["paxos_variant"] == "v2"
