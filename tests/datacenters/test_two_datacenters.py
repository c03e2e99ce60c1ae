"""Drills on two datacenters (issue 33): nothing a reader in the other datacenter can observe is lost or
resurrected. The cluster of ``scripts/cassandra.sh dc`` (dc1: two nodes, dc2: one), keyspaces replicated
``{'dc1': 2, 'dc2': 1}``; stores local to dc1 ("east") and to dc2 ("west") on the same keyspace; the sweep runs
in dc1, the safety oracle and ``verify`` run from both. The policy: ``airflow_atlas/kvs/consistency.py``.
"""
from __future__ import annotations

import time
import uuid

import pytest

from airflow_atlas import oracle
from airflow_atlas.airflow.hooks.repair import check_table
from airflow_atlas.errors import AtlasError, InvalidInputError, StoreUnavailableError
from airflow_atlas.kvs.api import Cell
from airflow_atlas.oracle import ABSENT, Reader
from airflow_atlas.status import build_status
from airflow_atlas.timestamps.client import TimestampClient
from airflow_atlas.timestamps.record import BOUND_CELL, TIMESTAMP_TABLE, marker_bound, read_record
from airflow_atlas.verify import run_verify
from devkit.airflow import free_port
from devkit.timestamps import ServerProcessError, prepare_store, start_server
from tests.datacenters.conftest import HOSTS, NODES

pytestmark = [pytest.mark.datacenters, pytest.mark.timeout(600)]

STRATEGIES = ("CONSERVATIVE", "THOROUGH")
TABLES = {"CONSERVATIVE": "dc_conservative", "THOROUGH": "dc_thorough"}
CELLS = 30


def cell(i: int) -> Cell:
    return Cell(f"row{i:04d}".encode(), b"c")


def commit(store, table: str, puts: dict | None = None, deletes: list | None = None) -> None:
    txn = store.transactions.begin()
    if puts:
        txn.put(table, puts)
    if deletes:
        txn.delete(table, deletes)
    txn.commit()


def read(store, table: str, cells) -> dict:
    txn = store.transactions.begin()
    try:
        return txn.get(table, list(cells))
    finally:
        txn.abort()


def progress(store) -> dict:
    return {(shard, s): store.queue.progress.get_progress(shard, s) for shard in range(store.number_of_shards()) for s in STRATEGIES}


def sweep_everything(store) -> tuple[dict, list]:
    ts = store.sweep_timestamps.all()
    results = [
        store.sweeper.sweep_shard(shard, s, sweep_ts=ts[s], max_iterations=1000)
        for s in STRATEGIES
        for shard in range(store.number_of_shards())
    ]
    return ts, results


def answering(store, timeout: float = 90.0):
    """``store`` once its driver has reconnected to its datacenter after a restart (its first requests fail
    with a defunct connection, retriable, until the driver's reconnection runs); bounded."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            store.number_of_shards()
            return store
        except StoreUnavailableError:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)


def two_stores(stores_in, keyspace: str, shards: int = 2):
    east = stores_in(keyspace, "dc1")
    east.initialize(shards=shards)
    for strategy, table in TABLES.items():
        east.create_table(table, strategy)
    return east, stores_in(keyspace, "dc2")


def workload(east, west) -> None:
    """Writers in both datacenters: each overwrites and deletes what the other wrote; each commit is read
    at once from the other datacenter (a committed write is never missed there)."""
    for table in TABLES.values():
        for round_, (writer, reader) in enumerate(((east, west), (west, east), (east, west))):
            puts = {cell(i): b"r%d-%d" % (round_, i) for i in range(CELLS) if i % 3 != round_}
            deletes = [cell(i) for i in range(CELLS) if i % 3 == round_ and round_ > 0]
            commit(writer, table, puts, deletes)
            seen = read(reader, table, [cell(i) for i in range(CELLS)])
            assert {c: seen[c] for c in puts} == puts, "a committed write is missing in the other datacenter"
            assert not set(deletes) & set(seen), "a committed delete is not seen in the other datacenter"


def test_a_policy_unsafe_across_datacenters_is_refused_when_the_store_opens(dc_keyspace, stores_in):
    """The levels of a single datacenter (LOCAL_SERIAL; writes a LOCAL_QUORUM read in the other datacenter
    may not see) are refused on a keyspace replicated in both, naming the setting (they were accepted)."""
    stores_in(dc_keyspace, "dc1")  # the defaults are accepted
    for name, level in (("consistency_serial", "LOCAL_SERIAL"), ("consistency_data_write", "LOCAL_QUORUM"),
                        ("consistency_queue_write", "LOCAL_QUORUM")):
        with pytest.raises(InvalidInputError, match=f"{name}={level}") as refused:
            stores_in(dc_keyspace, "dc2", **{name: level})
        assert "dc1: 2, dc2: 1" in str(refused.value)


def test_writers_and_readers_in_both_datacenters_with_the_sweep_in_one(dc_keyspace, stores_in):
    east, west = two_stores(stores_in, dc_keyspace)
    workload(east, west)

    # a transaction open in dc2 holds the sweep in dc1 back: the versions it reads survive the sweep
    pinned = west.transactions.begin()
    table = TABLES["THOROUGH"]
    old = pinned.get(table, [cell(i) for i in range(CELLS)])
    commit(east, table, {cell(i): b"newer-%d" % i for i in range(CELLS)})
    sweep_everything(east)
    assert pinned.get(table, [cell(i) for i in range(CELLS)]) == old, "sweep removed versions an open dc2 transaction reads"
    pinned.abort()

    reader = Reader(east.timestamps.fresh_timestamp())  # after the last write: what every reader sees now
    before = {"dc1": oracle.observe(east, [reader]), "dc2": oracle.observe(west, [reader])}
    assert before["dc1"].views == before["dc2"].views
    ts, results = sweep_everything(east)
    assert all(r.status == "caught_up" for r in results), results
    assert sum(r.counts.cells_tombstoned for r in results) > 0
    for datacenter, store in (("dc1", east), ("dc2", west)):
        after = oracle.observe(store, [reader])
        assert oracle.compare(before["dc1"], after, ts) == [], datacenter
        assert oracle.obsolete_versions(store, ts) == [], datacenter
        report = run_verify(store)
        assert report.ok, (datacenter, report.findings)


def test_the_repair_guard_sees_repairs_from_both_datacenters(two_datacenters, dc_keyspace, stores_in):
    """``parent_repair_history`` is read at ALL: a repair coordinated in dc2 allows compaction seen from dc1
    and from dc2; a repair limited to one datacenter never counts as one with every replica."""
    east, west = two_stores(stores_in, dc_keyspace, shards=1)
    table = TABLES["THOROUGH"]
    commit(east, table, {cell(i): b"v" for i in range(CELLS)})

    def decisions() -> dict:
        return {dc: check_table(session, dc_keyspace, table) for dc, session in sessions.items()}

    clusters = {dc: local_cluster(dc) for dc in NODES}  # the guard's sessions, one local to each datacenter
    try:
        sessions = {dc: cluster.connect() for dc, cluster in clusters.items()}
        guard_drill(two_datacenters, dc_keyspace, table, decisions)
    finally:
        for cluster in clusters.values():
            cluster.shutdown()


def local_cluster(datacenter: str):
    from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
    from cassandra.policies import DCAwareRoundRobinPolicy

    profile = ExecutionProfile(load_balancing_policy=DCAwareRoundRobinPolicy(local_dc=datacenter), request_timeout=60)
    return Cluster([HOSTS[n] for n in NODES[datacenter]], protocol_version=5, execution_profiles={EXEC_PROFILE_DEFAULT: profile})


def guard_drill(two_datacenters, keyspace: str, table: str, decisions) -> None:
    assert not any(d.allowed for d in decisions().values()), decisions()
    two_datacenters.nodetool(1, "repair", "--full", "-dc", "dc1", keyspace, table)
    refused = decisions()
    assert not any(d.allowed for d in refused.values()), refused
    assert all("every replica" in d.reason for d in refused.values()), refused
    two_datacenters.nodetool(3, "repair", "--full", keyspace, table)  # coordinated by the dc2 node
    allowed = decisions()
    assert all(d.allowed for d in allowed.values()), allowed


def test_a_store_on_both_datacenters_is_served_and_its_record_is_never_local_serial(
        two_datacenters, dc_keyspace, stores_in, dc_timestamp_servers, dc_session, tmp_path):
    """Issue 45 on two datacenters: one leader and one bound serve both datacenters (a timestamp drawn in dc2
    after one drawn in dc1 is larger), the cell is never drawn from, and the record's check-and-sets cannot run
    at LOCAL_SERIAL - one Paxos per datacenter, with which each datacenter's instance could take the store
    and hand out the same timestamps. An instance whose policy says LOCAL_SERIAL is refused when it opens the
    two-datacenter store and when it is asked to serve it (the check every store a server opens passes)."""
    east, west = two_stores(stores_in, dc_keyspace)
    commit(east, TABLES["THOROUGH"], {cell(0): b"east"})
    commit(west, TABLES["THOROUGH"], {cell(1): b"west"})
    assert east.timestamps.served and west.timestamps.served
    record, _ = read_record(west.kvs)  # at SERIAL, from dc2
    assert record is not None and record.leader_address in dc_timestamp_servers.addresses and record.epoch >= 1
    assert marker_bound(west.kvs.get_lwt(TIMESTAMP_TABLE, [BOUND_CELL], serial=True)[BOUND_CELL]) == 0
    first = east.timestamps.fresh_timestamp()
    assert west.timestamps.fresh_timestamp() > first
    assert east.kvs.consistency.serial == "SERIAL" and west.kvs.consistency.serial == "SERIAL"

    # an instance started for the two-datacenter store with LOCAL_SERIAL exits naming the setting
    local_serial = two_datacenters.url(dc_keyspace, "dc2") + "&consistency_serial=LOCAL_SERIAL&create_keyspace=false"
    with pytest.raises(ServerProcessError, match="consistency_serial=LOCAL_SERIAL"):
        start_server(local_serial, f"127.0.0.1:{free_port()}", tmp_path / "refused.log")

    # an instance of a one-datacenter keyspace with LOCAL_SERIAL (safe there) refuses to serve the store
    one_dc = f"atlas_dc1only_{uuid.uuid4().hex[:10]}"
    dc_session.execute(f"CREATE KEYSPACE {one_dc} WITH replication = {{'class': 'NetworkTopologyStrategy', 'dc1': 2}}",
                       timeout=120)
    address = f"127.0.0.1:{free_port()}"
    url = two_datacenters.url(one_dc, "dc1") + "&consistency_serial=LOCAL_SERIAL&create_keyspace=false"
    try:
        prepare_store(url, [address])
        server = start_server(url, address, tmp_path / "one-dc.log")
        try:
            client = TimestampClient(dc_keyspace, [address], lambda: "", retry_seconds=5)
            with pytest.raises(InvalidInputError, match="consistency_serial=LOCAL_SERIAL") as refused:
                client.fresh_timestamp()
            assert address in str(refused.value) and "dc1: 2, dc2: 1" in str(refused.value)
            client.close()
        finally:
            server.stop()
    finally:
        try:
            dc_session.execute(f"DROP KEYSPACE IF EXISTS {one_dc}")
        except Exception:  # a failed drop never fails a test
            pass


# Last in the file: the only drill that restarts a node (a node restarted a moment ago, on a loaded machine,
# is the slowest to answer; no later test of this package depends on it).
def test_a_datacenter_down_pauses_the_sweep_naming_it_and_back_up_it_completes(two_datacenters, dc_keyspace, stores_in):
    east, west = two_stores(stores_in, dc_keyspace)
    workload(east, west)
    reader = Reader(east.timestamps.fresh_timestamp())
    before = oracle.observe(east, [reader])
    assert oracle.observe(west, [reader]).views == before.views
    progress_before = progress(east)

    with two_datacenters.datacenter_down("dc2"):
        with pytest.raises(AtlasError) as paused:
            sweep_everything(east)
        assert "datacenter dc2 (127.0.0.23)" in str(paused.value), paused.value
        assert progress(east) == progress_before, "progress moved while a datacenter missed the tombstones"
        warnings = build_status(east).datacenter_warnings
        assert len(warnings) == 1 and warnings[0].startswith("datacenter dc2: 1 replica(s) down (127.0.0.23)"), warnings
        assert "sweep is paused" in warnings[0]
        # nothing is acknowledged that dc2 could miss: writes wait for it too (EACH_QUORUM)
        with pytest.raises(AtlasError, match="dc2"):
            commit(east, TABLES["THOROUGH"], {cell(0): b"while-dc2-down"})
        # reads in dc1 go on, and see what they saw
        assert oracle.observe(east, [reader]).views == before.views

    answering(west)
    ts, results = sweep_everything(east)
    assert all(r.status == "caught_up" for r in results), results
    assert sum(r.counts.cells_tombstoned for r in results) > 0
    for datacenter, store in (("dc1", east), ("dc2", west)):
        after = oracle.observe(store, [reader])
        assert oracle.compare(before, after, ts) == [], datacenter
        seen = after.views[reader][TABLES["THOROUGH"]]
        assert seen.get(cell(0), ABSENT) != b"while-dc2-down", datacenter
        assert oracle.obsolete_versions(store, ts) == [], datacenter
        report = run_verify(store)
        assert report.ok, (datacenter, report.findings)
