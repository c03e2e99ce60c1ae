"""The stores a benchmark measures: a fresh keyspace (or SQLite file) per store, opened unthrottled unless asked,
dropped at the end, and transaction managers on a store's services without the sweep queue (the legacy world)."""
from __future__ import annotations

import os
import time
import uuid

from .log import log

DEFAULT_CASSANDRA = os.environ.get("ATLAS_BENCH_CASSANDRA", "127.0.0.1:9042")


def new_keyspace_name(prefix: str) -> str:
    return f"bench_{prefix}_{uuid.uuid4().hex[:8]}"


def cassandra_url(keyspace: str, host: str = DEFAULT_CASSANDRA) -> str:
    return f"cassandra://{host}/{keyspace}"


def open_store(url: str, shards: int = 1, **config):
    from airflow_atlas.config import StoreConfig
    from airflow_atlas.store import AtlasStore

    # Throughput benchmarks measure the unthrottled engine: no intensity limit and no application pace unless
    # one is asked for.
    config = {"sweep_max_entries_per_second": 0, "sweep_latency_target": 0, **config}
    store = AtlasStore.open(url, StoreConfig(**config))
    store.initialize(shards)
    return store


def drop_store(store) -> None:
    """Drop a benchmark keyspace (Cassandra) or delete the SQLite file."""
    kvs = store.kvs
    try:
        if kvs.backend == "cassandra":
            kvs.session.execute(f'DROP KEYSPACE IF EXISTS "{kvs.keyspace}"', timeout=180)
            store.close()
        else:
            path = kvs.path
            store.close()
            for suffix in ("", "-wal", "-shm"):
                try:
                    os.remove(path + suffix)
                except FileNotFoundError:
                    pass
    except Exception as exc:  # a slow drop must never lose the measurements
        log(f"could not drop {store.describe()}: {exc}")


def queueless_manager(store):
    """A TransactionManager on the same services as ``store.transactions`` but without the sweep queue (and
    without the application-latency publication)."""
    return bare_manager(store, sweep_queue=False)


def bare_manager(store, *, sweep_queue: bool):
    """A TransactionManager on the same services as ``store.transactions``, with or without the sweep queue,
    never recording or publishing the application's latency (``TransactionConfig.latency`` None)."""
    from airflow_atlas.transactions.manager import TransactionConfig, TransactionManager

    cfg = store.config
    return TransactionManager(
        store.kvs,
        store.timestamps,
        store.transaction_service,
        store.registry,
        store.punch,
        sweep_queue=store.queue.writer if sweep_queue else None,
        scrub_queue=store.scrub_queue if sweep_queue else None,
        config=TransactionConfig(
            lease_seconds=cfg.transaction_lease_seconds,
            punch_interval_seconds=cfg.punch_interval_seconds,
            running_writer_wait_seconds=cfg.running_writer_wait_seconds,
        ),
    )


def open_backend_store(backend: str, label: str, tmpdir, shards: int = 1):
    """A fresh store on ``backend``: a new keyspace of the local node (``cassandra``) or a new SQLite file in
    ``tmpdir`` (``sqlite``), named after ``label``."""
    if backend == "cassandra":
        return open_store(cassandra_url(new_keyspace_name(label)), shards=shards)
    path = f"{tmpdir}/{label}-{int(time.time() * 1000)}.db"
    return open_store(f"sqlite:///{path}", shards=shards)
