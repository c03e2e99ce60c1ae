"""Loading a benchmark's data: the cells of a benchmark table, base data as a sweep leaves it, backlogs of
committed transactions (real or written fast without the protocol's checks), and a targeted sweep of every shard."""
from __future__ import annotations

import random
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

COLUMNS_PER_ROW = 10


def cell(i: int, prefix: str = "row"):
    """Cell number ``i`` of a benchmark table: ``COLUMNS_PER_ROW`` columns per row."""
    from airflow_atlas.kvs.api import Cell

    row, col = divmod(i, COLUMNS_PER_ROW)
    return Cell(f"{prefix}{row:08d}".encode(), f"c{col:02d}".encode())


def value(rng: random.Random, size: int = 32) -> bytes:
    return rng.randbytes(size)


def bulk_put(store, table: str, values: dict, timestamp: int) -> None:
    """Write ``values`` at Atlas timestamp ``timestamp`` (loading only; the backend batches the writes)."""
    store.kvs.put(table, values, timestamp)


def bulk_sentinels(store, table: str, cells: Sequence) -> None:
    """The sentinels a CONSERVATIVE sweep leaves on every swept cell (loading only)."""
    store.kvs.add_gc_sentinels(table, cells)


def load_committed_base(store, tables: Sequence[str], n_cells: int, chunk: int = 10_000, seed: int = 1) -> int:
    """Base data of ``n_cells`` cells in each table, as the state a sweep leaves behind: committed
    transactions of ``chunk`` cells (real commit entries in the transaction service), one version per
    cell, and the CONSERVATIVE sentinel on every cell. No queue entries (they were swept and cleaned).
    Returns the last timestamp of the load."""
    rng = random.Random(seed)
    for lo in range(0, n_cells, chunk):
        cells = [cell(i) for i in range(lo, min(n_cells, lo + chunk))]
        values = {c: value(rng) for c in cells}
        block = store.timestamps.fresh_timestamps(2)
        start, commit = block[0], block[1]
        for table in tables:
            bulk_put(store, table, values, start)
        store.transaction_service.put_unless_exists(start, commit)
        for table in tables:
            bulk_sentinels(store, table, cells)
    return store.timestamps.fresh_timestamp()


def advance_progress(store, to_timestamp: int) -> None:
    """Record that every shard and strategy was swept up to ``to_timestamp`` (nothing is queued below it)."""
    from airflow_atlas.kvs.tables import SweepStrategy

    for shard in range(store.number_of_shards()):
        for strategy in (SweepStrategy.CONSERVATIVE, SweepStrategy.THOROUGH):
            store.queue.progress.update_progress(shard, strategy, to_timestamp)


def run_transactions(manager, table: str, batches: Sequence[dict], threads: int = 4) -> int:
    """Commit one real transaction per dict of writes, ``threads`` at a time. Returns the number committed."""
    def one(writes):
        manager.run(lambda txn: txn.put(table, writes))
        return 1

    if threads <= 1:
        return sum(one(w) for w in batches)
    with ThreadPoolExecutor(threads) as pool:
        return sum(pool.map(one, batches))


def commit_synthetic(store, table: str, batches: Sequence[dict], threads: int = 4) -> int:
    """Committed transactions written without the transaction protocol's checks (loading backlogs fast):
    per batch draw (start, commit), enqueue the writes exactly as a committing transaction does, write the
    cells at start, then put the commit entry. The queue and the store end up exactly as after real
    commits. Returns the number of queue entries written."""
    from airflow_atlas.sweep.queue.write_info import WriteInfo

    def one(writes):
        block = store.timestamps.fresh_timestamps(2)
        start, commit = block[0], block[1]
        store.queue.writer.enqueue([WriteInfo(table, c, start, v == b"") for c, v in writes.items()])
        store.kvs.put(table, writes, start)
        store.transaction_service.put_unless_exists(start, commit)
        return len(writes)

    if threads <= 1:
        return sum(one(w) for w in batches)
    with ThreadPoolExecutor(threads) as pool:
        return sum(pool.map(one, batches))


def chunks(items: Sequence, size: int) -> list:
    return [items[i : i + size] for i in range(0, len(items), size)]


def sweep_all_shards(store, strategy, sweep_ts: int, batch_limit: int | None = None) -> dict:
    """Targeted sweep of every shard, in-process, one after the other, until caught up."""
    totals = {"entries_read": 0, "cells_tombstoned": 0, "iterations": 0, "statuses": []}
    for shard in range(store.number_of_shards()):
        r = store.sweeper.sweep_shard(shard, strategy, sweep_ts=sweep_ts, batch_limit=batch_limit)
        totals["entries_read"] += r.counts.entries_read
        totals["cells_tombstoned"] += r.counts.cells_tombstoned
        totals["iterations"] += r.iterations
        totals["statuses"].append(r.status)
    return totals
