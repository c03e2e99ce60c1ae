"""Fixtures and helpers of the Spark tests: stores with identical workloads, their end state, the engine zip.

Two stores built from the same seeded workload hold the same cell values and the same queue entries, but
their timestamps may differ, so end states are compared by values and relative positions:

* per user table and cell, the list of remaining versions in timestamp order, each as its value
  (``"<sentinel>"`` for a sweep sentinel, ``"<delete>"`` for an empty value);
* per (shard, strategy), progress as the number of workload start timestamps at or below it;
* per sweep-queue table, the number of rows and cells left.
"""
from __future__ import annotations

import bisect
import threading
import time
import uuid
from dataclasses import dataclass, field

import pytest

from airflow_atlas.config import StoreConfig
from airflow_atlas.kvs.api import SENTINEL_TIMESTAMP
from airflow_atlas.store import AtlasStore
from airflow_atlas.sweep.queue_tables import SWEEPABLE_CELLS, SWEEPABLE_TIMESTAMPS
from airflow_atlas.workload import WorkloadSpec, run_workload

SHARDS = 4
STRATEGIES = ("CONSERVATIVE", "THOROUGH")
TABLES = {"orders_c": "CONSERVATIVE", "orders_t": "THOROUGH"}
# CONSERVATIVE sweeps nothing until a punch is an unreadable window old: a window of 0 lets tests sweep.
SETTINGS = {"unreadable_window_seconds": 0}
CONFIG = StoreConfig().with_overrides(**SETTINGS)


def workload_spec(seed: int, transactions: int) -> WorkloadSpec:
    return WorkloadSpec(
        transactions=transactions,
        writes_per_transaction=(1, 6),
        tables=dict(TABLES),
        rows=40,
        columns=3,
        delete_ratio=0.15,
        dead_writer_ratio=0.06,
        abort_ratio=0.05,
        value_bytes=8,
        seed=seed,
    )


@dataclass
class StoreHandle:
    url: str
    backend: str
    store: AtlasStore
    write_timestamps: list[int] = field(default_factory=list)  # start ts of every workload version, sorted
    report: dict = field(default_factory=dict)

    def reopen(self) -> AtlasStore:
        """A new store object (no caches shared with earlier calls)."""
        self.store.close()
        self.store = AtlasStore.open(self.url, config=CONFIG)
        return self.store


@pytest.fixture
def make_store(tmp_path, request):
    """``make_store(backend, seed=..., transactions=...)`` -> StoreHandle with the workload written."""
    created: list[StoreHandle] = []
    keyspaces: list[str] = []
    sessions: list = []

    def factory(backend: str, *, seed: int = 11, transactions: int = 80, url_user: str | None = None) -> StoreHandle:
        if backend == "sqlite":
            url = f"sqlite:///{tmp_path / f'store-{uuid.uuid4().hex[:8]}.db'}"
        elif backend == "cassandra":
            host, port = request.getfixturevalue("cassandra_node")
            if not sessions:
                sessions.append(request.getfixturevalue("cassandra_session"))
            keyspace = f"atlas_sp_{uuid.uuid4().hex[:10]}"
            keyspaces.append(keyspace)
            auth = f"{url_user}@" if url_user else ""
            url = f"cassandra://{auth}{host}:{port}/{keyspace}?replication_factor=1"
        else:  # pragma: no cover
            raise ValueError(backend)
        store = AtlasStore.open(url, config=CONFIG)
        store.initialize(shards=SHARDS)
        report = run_workload(store, workload_spec(seed, transactions)).to_json()
        handle = StoreHandle(url=url, backend=backend, store=store, report=report)
        handle.write_timestamps = sorted(
            {ts for table in TABLES for _, ts, _ in store.kvs.scan(table) if ts >= 0}
        )
        created.append(handle)
        return handle

    yield factory
    for handle in created:
        try:
            handle.store.close()
        except Exception:
            pass
    for session in sessions:
        _drop_keyspaces(session, keyspaces)


def _drop_keyspaces(session, keyspaces: list[str]) -> None:
    """Ask the node to drop the keyspaces without waiting long: a drop takes seconds on a busy node and
    the node finishes it on its own (the node is throwaway)."""
    pending = []
    for keyspace in keyspaces:
        done = threading.Event()
        try:
            future = session.execute_async(f"DROP KEYSPACE IF EXISTS {keyspace}", timeout=120)
            future.add_callbacks(lambda _, d=done: d.set(), lambda _, d=done: d.set())
            pending.append(done)
        except Exception:
            pass
    deadline = time.monotonic() + 2.0
    for done in pending:
        done.wait(max(0.0, deadline - time.monotonic()))


def _label(ts: int, value: bytes) -> str:
    if ts == SENTINEL_TIMESTAMP:
        return "<sentinel>"
    if value == b"":
        return "<delete>"
    return value.hex()


def cell_versions(store: AtlasStore) -> dict:
    """{table: {(row, col): [labels of remaining versions, oldest first]}}"""
    out: dict = {}
    for table in TABLES:
        cells: dict = {}
        for cell, ts, value in store.kvs.scan(table):
            cells.setdefault((cell.row, cell.col), []).append((ts, _label(ts, value)))
        out[table] = {c: [label for _, label in sorted(v)] for c, v in cells.items()}
    return out


def queue_counts(store: AtlasStore) -> dict:
    out = {}
    for table in (SWEEPABLE_CELLS, SWEEPABLE_TIMESTAMPS):
        rows, cells = set(), 0
        for cell, _, _ in store.kvs.scan(table):
            rows.add(cell.row)
            cells += 1
        out[table] = {"rows": len(rows), "cells": cells}
    return out


def relative_progress(handle: StoreHandle) -> dict:
    """{"shard:STRATEGY": (workload start timestamps <= progress, caught up past the workload)}"""
    out = {}
    last = handle.write_timestamps[-1] if handle.write_timestamps else -1
    for shard in range(SHARDS):
        for strategy in STRATEGIES:
            progress = handle.store.queue.progress.get_progress(shard, strategy)
            out[f"{shard}:{strategy}"] = (bisect.bisect_right(handle.write_timestamps, progress), progress >= last)
    return out


def end_state(handle: StoreHandle) -> dict:
    store = handle.reopen()
    return {
        "versions": cell_versions(store),
        "progress": relative_progress(handle),
        "queue": queue_counts(store),
    }


def version_count(state: dict) -> int:
    return sum(len(v) for cells in state["versions"].values() for v in cells.values())


@pytest.fixture(scope="session")
def engine_zip(tmp_path_factory):
    from airflow_atlas.spark_artifact import build_engine_zip

    return build_engine_zip(tmp_path_factory.mktemp("engine-zip"))
