"""Fixtures and helpers of the Spark tests: stores with identical workloads, their end state, the engine zip.

Two stores built from the same seeded workload hold the same cell values and the same queue entries, but
their timestamps may differ, so end states are compared by values and relative positions:

* per user table and cell, the list of remaining versions in timestamp order, each as its value
  (``"<sentinel>"`` for a sweep sentinel, ``"<delete>"`` for an empty value);
* per (shard, strategy), progress as the number of workload start timestamps at or below it;
* per sweep-queue table, the number of rows and cells left.

``twin_stores(backend)`` (session-wide, built once per backend: keyspace DDL is the slow part on a busy
Cassandra node) holds two identical stores with two kinds of data: tables ``TABLES`` written through the
sweep queue (for the targeted job) and tables ``LEGACY_TABLES`` written while their strategy was NOTHING,
so nothing of them is queued - data "written before the queue", given a strategy afterwards, which only
the full-table sweep cleans (for the full-sweep job). The two jobs therefore never touch each other's
data and the tests using the twins do not depend on their order.
"""
from __future__ import annotations

import bisect
import uuid
from dataclasses import dataclass, field

import pytest

from airflow_atlas.config import StoreConfig
from airflow_atlas.kvs.api import SENTINEL_TIMESTAMP
from airflow_atlas.serialisation import to_json
from airflow_atlas.store import AtlasStore
from airflow_atlas.sweep.queue.queue_tables import SWEEPABLE_CELLS, SWEEPABLE_TIMESTAMPS
from airflow_atlas.workload import WorkloadSpec, run_workload
from tests.conftest import drop_keyspaces_soon

SHARDS = 4
STRATEGIES = ("CONSERVATIVE", "THOROUGH")
TABLES = {"orders_c": "CONSERVATIVE", "orders_t": "THOROUGH"}
LEGACY_TABLES = {"legacy_c": "CONSERVATIVE", "legacy_t": "THOROUGH"}
# CONSERVATIVE sweeps nothing until a punch is an unreadable window old: a window of 0 lets tests sweep.
SETTINGS = {"unreadable_window_seconds": 0}
CONFIG = StoreConfig(**SETTINGS)


def workload_spec(seed: int, transactions: int, tables: dict | None = None) -> WorkloadSpec:
    return WorkloadSpec(
        transactions=transactions,
        writes_per_transaction=(1, 6),
        tables=dict(TABLES if tables is None else tables),
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
    write_timestamps: list[int] = field(default_factory=list)  # start ts of every queued version, sorted
    report: dict = field(default_factory=dict)

    def reopen(self) -> AtlasStore:
        """A new store object (no caches shared with earlier calls)."""
        self.store.close()
        self.store = AtlasStore.open(self.url, config=CONFIG)
        return self.store


def _new_url(backend: str, tmp_dir, node, url_user: str | None) -> tuple[str, str | None]:
    if backend == "sqlite":
        return f"sqlite:///{tmp_dir / f'store-{uuid.uuid4().hex[:8]}.db'}", None
    if backend == "cassandra":
        host, port = node
        keyspace = f"atlas_sp_{uuid.uuid4().hex[:10]}"
        auth = f"{url_user}@" if url_user else ""
        return f"cassandra://{auth}{host}:{port}/{keyspace}?replication_factor=1", keyspace
    raise ValueError(backend)  # pragma: no cover


def _build(url: str, backend: str, seed: int, transactions: int, legacy: bool) -> StoreHandle:
    store = AtlasStore.open(url, config=CONFIG)
    store.initialize(shards=SHARDS)
    report = to_json(run_workload(store, workload_spec(seed, transactions)))
    if legacy:
        nothing = {table: "NOTHING" for table in LEGACY_TABLES}
        run_workload(store, workload_spec(seed + 1000, transactions, tables=nothing))
        for table, strategy in LEGACY_TABLES.items():
            store.set_sweep_strategy(table, strategy)
    handle = StoreHandle(url=url, backend=backend, store=store, report=report)
    handle.write_timestamps = sorted({ts for table in TABLES for _, ts, _ in store.kvs.scan(table) if ts >= 0})
    return handle


class _Stores:
    """Creates stores and cleans up after them (closes them, drops their keyspaces)."""

    def __init__(self, request, tmp_dir):
        self._request = request
        self._tmp_dir = tmp_dir
        self.created: list[StoreHandle] = []
        self.keyspaces: list[str] = []
        self.session = None

    def make(self, backend, *, seed, transactions, url_user=None, legacy=False) -> StoreHandle:
        node = None
        if backend == "cassandra":
            node = self._request.getfixturevalue("cassandra_node")
            if self.session is None:
                self.session = self._request.getfixturevalue("cassandra_session")
        url, keyspace = _new_url(backend, self._tmp_dir, node, url_user)
        if keyspace:
            self.keyspaces.append(keyspace)
        handle = _build(url, backend, seed, transactions, legacy)
        self.created.append(handle)
        return handle

    def cleanup(self) -> None:
        for handle in self.created:
            try:
                handle.store.close()
            except Exception:
                pass
        if self.session is not None:
            drop_keyspaces_soon(self.session, self.keyspaces, wait_seconds=2.0)


@pytest.fixture
def make_store(tmp_path, request):
    """``make_store(backend, seed=..., transactions=...)`` -> StoreHandle with the workload written."""
    stores = _Stores(request, tmp_path)

    def factory(backend: str, *, seed: int = 11, transactions: int = 80, url_user: str | None = None) -> StoreHandle:
        return stores.make(backend, seed=seed, transactions=transactions, url_user=url_user)

    yield factory
    stores.cleanup()


@pytest.fixture(scope="session")
def twin_stores(request, tmp_path_factory):
    """``twin_stores(backend)`` -> (spark_side, in_task_side): identical stores, built once per session."""
    stores = _Stores(request, tmp_path_factory.mktemp("twin-stores"))
    built: dict[str, tuple[StoreHandle, StoreHandle]] = {}

    def get(backend: str) -> tuple[StoreHandle, StoreHandle]:
        if backend not in built:
            built[backend] = tuple(
                stores.make(backend, seed=11, transactions=80, legacy=True) for _ in range(2)
            )
        return built[backend]

    yield get
    stores.cleanup()


def _label(ts: int, value: bytes) -> str:
    if ts == SENTINEL_TIMESTAMP:
        return "<sentinel>"
    if value == b"":
        return "<delete>"
    return value.hex()


def cell_versions(store: AtlasStore, tables=TABLES) -> dict:
    """{table: {(row, col): [labels of remaining versions, oldest first]}}"""
    out: dict = {}
    for table in tables:
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
    from airflow_atlas.spark.artifact import build_engine_zip

    return build_engine_zip(tmp_path_factory.mktemp("engine-zip"))
