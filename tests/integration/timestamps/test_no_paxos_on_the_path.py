"""On a store served by a timestamp server, no transaction and no sweep iteration touches the timestamp cell:
every CQL statement a process sends is seen with the driver's public request listener, and after the first
draw (which finds the store adopted) none goes to ``atlas_timestamp`` while a workload commits and the sweep
sweeps it; the conditional statements left are those partitioned by their own keys (commits, progress, leases)."""
from __future__ import annotations

import pytest

from airflow_atlas.config import StoreConfig
from airflow_atlas.store import AtlasStore
from airflow_atlas.workload import WorkloadSpec, run_workload
from devkit.airflow import free_port
from devkit.timestamps import running_servers

pytestmark = pytest.mark.cassandra


def statement_text(future) -> str:
    query = future.query
    prepared = getattr(query, "prepared_statement", None)
    if prepared is not None:
        return prepared.query_string
    if hasattr(query, "_statements_and_parameters"):  # a batch: one entry is enough to name its tables
        return " ; ".join(str(getattr(s, "query_string", s)) for s in getattr(query, "_statements_and_parameters", []))
    return str(getattr(query, "query_string", query))


def test_transactions_and_sweep_send_nothing_to_the_timestamp_cell(fresh_keyspace, tmp_path):
    url = f"cassandra://127.0.0.1:9042/{fresh_keyspace}?replication_factor=1"
    with running_servers(url, [f"127.0.0.1:{free_port()}"], tmp_path), \
            AtlasStore.open(url, StoreConfig(unreadable_window_seconds=0)) as store:
        store.create_table("t", "THOROUGH")
        store.timestamps.fresh_timestamp()  # the first draw finds the store adopted (one read of its cell)
        seen: list[str] = []
        store.kvs.session.add_request_init_listener(lambda future: seen.append(statement_text(future)))
        run_workload(store, WorkloadSpec(transactions=60, tables={"t": "THOROUGH"}, seed=3))
        swept = store.sweeper.sweep_shard(0, "THOROUGH", max_iterations=50, max_entries_per_second=0)
        assert swept.counts.entries_read > 0
        assert len(seen) > 500
        on_the_cell = [s for s in seen if "atlas_timestamp" in s]
        assert on_the_cell == [], on_the_cell[:5]
