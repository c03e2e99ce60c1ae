"""The open-transaction registry on Cassandra after more unregistrations than the node's tombstone limit.

Every unregister deletes a row of the registry's one partition, and ``oldest_open`` reads that partition
from its start. A Cassandra read that meets more than ``tombstone_failure_threshold`` tombstones fails
(READ_TOO_MANY_TOMBSTONES), which here would stop every sweep timestamp from being computed. The registry
table has ``gc_grace_seconds = 0``, so its tombstones are purgeable at once and a read drops them instead
of counting them. The control keeps Cassandra's default grace period on an otherwise identical table and
must fail: that is what makes the first half a test of the setting and not of a small workload.

The unregistrations are written as the engine's own ``delete_wallclock`` statement (``wc_delete``), grouped
in single-partition UNLOGGED batches: the same row tombstones in the same partition as one statement per
delete, but Cassandra applies a batch as one mutation, which cut this setup from minutes to seconds.
"""
from __future__ import annotations

import dataclasses
import uuid

import pytest
from cassandra.concurrent import execute_concurrent
from cassandra.query import BatchStatement, BatchType

from airflow_atlas.errors import StoreUnavailableError
from airflow_atlas.kvs.cassandra.statements import KINDS, physical_table_name, quoted
from airflow_atlas.transactions.registry import OPEN_TRANSACTIONS_TABLE_METADATA, OpenTransactionRegistry

pytestmark = pytest.mark.cassandra

MARGIN = 20_000  # unregistrations beyond the node's limit
BATCH = 100  # deletes per single-partition batch: well under the node's batch size warning threshold


def _failure_threshold(session) -> int:
    row = session.execute("SELECT value FROM system_views.settings WHERE name = 'tombstone_failure_threshold'").one()
    return int(row.value)


def _registry_with_tombstones(kvs, session, keyspace: str, metadata, count: int) -> OpenTransactionRegistry:
    registry = OpenTransactionRegistry(kvs, table=f"_open_tomb_{uuid.uuid4().hex[:10]}")
    kvs.create_table(registry.table, metadata)
    delete = session.prepare(KINDS["wc_delete"].cql.format(t=quoted(keyspace, physical_table_name(registry.table))))
    batches = []
    for lo in range(1, count + 1, BATCH):  # unregistrations of transactions 1..count, oldest first
        batch = BatchStatement(batch_type=BatchType.UNLOGGED)
        for start_ts in range(lo, min(lo + BATCH, count + 1)):
            cell = registry._cell(start_ts)
            batch.add(delete, (cell.row, cell.col))
        batches.append((batch, ()))
    execute_concurrent(session, batches, concurrency=16, raise_on_first_error=True)
    registry.register(count + 10, "still-open", 600)
    return registry


def test_oldest_open_reads_past_more_unregistrations_than_the_tombstone_limit(
    cassandra_txn_kvs, cassandra_session, txn_keyspace
):
    count = _failure_threshold(cassandra_session) + MARGIN
    assert OPEN_TRANSACTIONS_TABLE_METADATA.cassandra_options["gc_grace_seconds"] == 0

    registry = _registry_with_tombstones(
        cassandra_txn_kvs, cassandra_session, txn_keyspace, OPEN_TRANSACTIONS_TABLE_METADATA, count
    )
    oldest = registry.oldest_open()
    assert oldest is not None and (oldest.start_ts, oldest.holder) == (count + 10, "still-open")
    assert registry.immutable_timestamp(lambda: count + 1000) == count + 10

    default_grace = dataclasses.replace(OPEN_TRANSACTIONS_TABLE_METADATA, cassandra_options={})
    control = _registry_with_tombstones(cassandra_txn_kvs, cassandra_session, txn_keyspace, default_grace, count)
    with pytest.raises(StoreUnavailableError, match="TOMBSTONES"):
        control.oldest_open()
