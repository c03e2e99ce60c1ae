"""Lightweight transactions on the RF 3 cluster with one replica down: Paxos needs a quorum (2 of 3), so
fresh timestamps, shard leases (acquire, refresh, takeover, release) and transaction commits
(put-unless-exists of the commit timestamp) keep working, and their guarantees hold across the outage."""
from __future__ import annotations

import pytest

from airflow_atlas.errors import KeyAlreadyExistsError, TransactionConflictError
from airflow_atlas.kvs.api import Cell
from tests.cluster.conftest import HOSTS

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(600)]

DOWN = 2  # not the seed


def test_timestamps_leases_and_commits_with_one_replica_down(cassandra_cluster, cluster_stores):
    store = cluster_stores(shards=1)
    store.create_table("lwt_data", "CONSERVATIVE")
    before = store.timestamps.fresh_timestamp()
    cell = Cell(b"row", b"col")
    txn = store.transactions.begin()
    txn.put("lwt_data", {cell: b"before"})
    txn.commit()
    held = store.locks.acquire("sweep/lwt", "holder-a", 30.0)
    assert held is not None
    # the nodes' pressure (kvs/cassandra/pressure.py): one reading from each node, asked of the node itself
    assert sorted(n.node for n in store.kvs.node_pressure()) == list(HOSTS)
    down_host = HOSTS[DOWN - 1]

    with cassandra_cluster.node_down(DOWN):
        # ... and with a node down, the others' (a node that does not answer is left out, never fails the read)
        assert sorted(n.node for n in store.kvs.node_pressure()) == [h for h in HOSTS if h != down_host]
        # timestamps: strictly increasing, also in a batch
        fresh = [store.timestamps.fresh_timestamp() for _ in range(20)]
        assert fresh == sorted(set(fresh)) and fresh[0] > before
        batch = store.timestamps.fresh_timestamps(50)
        assert batch.start > fresh[-1] and len(batch) == 50

        # leases: the holder refreshes, nobody else gets it, release, then another holder does
        refreshed = store.locks.refresh(held, 30.0)
        assert refreshed.holder == "holder-a"
        assert store.locks.acquire("sweep/lwt", "holder-b", 30.0) is None
        assert store.locks.release(refreshed)
        taken = store.locks.acquire("sweep/lwt", "holder-b", 30.0)
        assert taken is not None and taken.holder == "holder-b"

        # commits: a transaction commits; a concurrent writer of the same cell conflicts
        first = store.transactions.begin()
        second = store.transactions.begin()
        first.put("lwt_data", {cell: b"during"})
        second.put("lwt_data", {cell: b"loser"})
        first.commit()
        with pytest.raises(TransactionConflictError):
            second.commit()

        # put-unless-exists is exclusive: the commit entry of a decided transaction cannot be overwritten
        with pytest.raises(KeyAlreadyExistsError):
            store.transaction_service.put_unless_exists(first.start_timestamp, first.start_timestamp + 1)
        during_bound = store.timestamps.fresh_timestamp()

    # back up: what was decided during the outage stands, and timestamps never go back
    assert store.timestamps.fresh_timestamp() > during_bound
    reader = store.transactions.begin()
    assert reader.get("lwt_data", [cell]) == {cell: b"during"}
    reader.abort()
    assert store.locks.describe("sweep/lwt").holder == "holder-b"
