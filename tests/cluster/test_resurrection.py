"""Regression: deleted data must never come back after a replica outage (issue 13).

The scenario on the RF 3 cluster: a THOROUGH and a CONSERVATIVE table with ``gc_grace_seconds = 0``; every
cell written while all replicas are up; then one replica down for longer than the hint window (its hints
are no longer recorded: ``nodetool disablehandoff`` on the live nodes, what Cassandra does once
``max_hint_window`` has passed) during a delete-heavy workload and a sweep; compaction on the live
replicas; the replica restarted and repaired. A sweep's ranged tombstones that the lost replica never got
were purged by that compaction, so repair copies the replica's old versions back: readers see deleted
cells again, and versions sweep removed are stored again (targeted sweep never revisits them - their
queue rows are gone).
"""
from __future__ import annotations

import time

import pytest

from airflow_atlas import oracle
from airflow_atlas.errors import AtlasError
from airflow_atlas.kvs.api import Cell
from airflow_atlas.oracle import ABSENT, Reader

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(600)]

CELLS = 200
BATCH = 50
DOWN = 3  # the replica that is lost for a while
STRATEGIES = ("CONSERVATIVE", "THOROUGH")


def cell(i: int) -> Cell:
    return Cell(f"row{i:05d}".encode(), b"c")


def commit(store, table: str, puts: dict | None = None, deletes: list | None = None) -> None:
    txn = store.transactions.begin()
    if puts:
        txn.put(table, puts)
    if deletes:
        txn.delete(table, deletes)
    txn.commit()


def write_cells(store, table: str, cells: range, value: bytes, expected: dict) -> None:
    cells = list(cells)
    for i in range(0, len(cells), BATCH):
        chunk = cells[i : i + BATCH]
        commit(store, table, puts={cell(c): value + b"-%d" % c for c in chunk})
        expected[table].update({cell(c): value + b"-%d" % c for c in chunk})


def delete_cells(store, table: str, cells: range, expected: dict) -> None:
    cells = list(cells)
    for i in range(0, len(cells), BATCH):
        chunk = cells[i : i + BATCH]
        commit(store, table, deletes=[cell(c) for c in chunk])
        expected[table].update({cell(c): ABSENT for c in chunk})


def progress(store) -> dict:
    return {
        (shard, s): store.queue.progress.get_progress(shard, s)
        for shard in range(store.number_of_shards())
        for s in STRATEGIES
    }


def sweep_everything(store) -> tuple[dict, list]:
    """One sweep of every shard and strategy at fresh sweep timestamps. Returns (timestamps, results)."""
    ts = store.sweep_timestamps.all()
    results = [
        store.sweeper.sweep_shard(shard, s, sweep_ts=ts[s], max_iterations=1000)
        for s in STRATEGIES
        for shard in range(store.number_of_shards())
    ]
    return ts, results


def compact(cluster, keyspace: str, nodes: list[int]) -> None:
    """Flush, let one second pass (gc_grace_seconds = 0 counts whole seconds), then a major compaction
    (each step on every node at once)."""
    cluster.flush(keyspace, *nodes)
    time.sleep(1.5)
    cluster.nodetool_each(nodes, "compact", keyspace)


def test_gc_grace_below_the_repair_interval_is_refused_on_swept_tables(cluster_stores):
    """The first guard: by default a swept table cannot get a gc_grace_seconds below the repair interval."""
    from airflow_atlas.errors import InvalidInputError

    store = cluster_stores(shards=1)
    for strategy in STRATEGIES:
        with pytest.raises(InvalidInputError, match="repair_interval_seconds") as refused:
            store.create_table(f"refused_{strategy.lower()}", strategy, gc_grace_seconds=0)
        assert "allow_gc_grace_below_repair_interval" in str(refused.value)
    assert store.user_tables() == {}


def test_a_replica_outage_never_brings_deleted_data_back(cassandra_cluster, cluster_stores):
    """The scenario of issue 13 with gc_grace_seconds = 0 forced (allow_gc_grace_below_repair_interval):
    even then the defaults keep deleted data deleted, because sweep deletes need every replica."""
    cluster = cassandra_cluster
    store = cluster_stores(shards=2, config={"allow_gc_grace_below_repair_interval": True})
    keyspace = store.kvs.keyspace
    thorough, conservative = "res_thorough", "res_conservative"
    store.create_table(thorough, "THOROUGH", gc_grace_seconds=0)
    store.create_table(conservative, "CONSERVATIVE", gc_grace_seconds=0)
    expected: dict = {thorough: {}, conservative: {}}

    # every cell on every replica
    write_cells(store, thorough, range(CELLS), b"v1", expected)
    write_cells(store, conservative, range(CELLS), b"v1", expected)

    live = cluster.live(down=DOWN)
    cluster.nodetool_each(live, "disablehandoff")
    try:
        with cluster.node_down(DOWN):
            # delete-heavy workload while the replica is down
            delete_cells(store, thorough, range(0, 120), expected)
            write_cells(store, thorough, range(120, 160), b"v2", expected)
            write_cells(store, conservative, range(0, 160), b"v2", expected)
            delete_cells(store, conservative, range(160, CELLS), expected)

            before = progress(store)
            try:
                _, outage_results = sweep_everything(store)
                refused = None
            except AtlasError as exc:  # a sweep that refuses to delete without every replica
                outage_results, refused = [], exc
            during = progress(store)
            compact(cluster, keyspace, live)
    finally:
        cluster.nodetool_each(live, "enablehandoff")

    cluster.repair(keyspace)
    ts, results = sweep_everything(store)
    assert all(r.status == "caught_up" for r in results), results
    compact(cluster, keyspace, cluster.live())

    reader = Reader(store.timestamps.fresh_timestamp())
    seen = oracle.observe(store, [reader], [thorough, conservative]).views[reader]
    came_back = {
        table: sorted(
            c.row.decode() for c, value in expected[table].items() if seen[table].get(c, ABSENT) != value
        )
        for table in expected
    }
    swept_versions_back = oracle.obsolete_versions(store, ts, [thorough, conservative])
    swept_during_outage = sum(r.counts.cells_tombstoned for r in outage_results)

    assert came_back == {thorough: [], conservative: []}, (
        f"deleted or overwritten data came back after the outage: {len(came_back[thorough])} THOROUGH cells, "
        f"{len(came_back[conservative])} CONSERVATIVE cells read wrong; {len(swept_versions_back)} swept "
        f"versions stored again; the sweep during the outage tombstoned {swept_during_outage} "
        f"cells (refused: {refused!r})"
    )
    assert swept_versions_back == [], swept_versions_back[:20]
    # the protection: no sweep delete without every replica, and nothing advanced during the outage
    assert refused is not None, f"the sweep ran with a replica down: {outage_results}"
    assert during == before
