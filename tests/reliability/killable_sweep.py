"""A real sweep of one (shard, strategy) in its own process, for the SIGKILL tests (not a test module).

    python -m tests.reliability.killable_sweep URL SHARD STRATEGY HOLDER LEASE_SECONDS BATCH_LIMIT KILL_AFTER

Runs ``store.sweeper.sweep_shard`` (one lease for the whole shard, refreshed in the background by the
engine's LeaseKeeper) and prints ``HELD <token>`` once the lease is taken, ``PROGRESS <value>`` after each
persisted progress, and, once ``KILL_AFTER`` progress updates are persisted, ``MID`` right after the next
ranged delete reached the store - then it stops there (the parent SIGKILLs it: mid-iteration, lease held,
deletes done, queue cleanup and progress not yet).
"""
from __future__ import annotations

import sys
import time

from airflow_atlas.config import StoreConfig
from airflow_atlas.store import AtlasStore


def main(argv: list[str]) -> int:
    url, shard, strategy, holder, lease, batch, kill_after = argv
    config = StoreConfig(
        unreadable_window_seconds=0.0,
        lock_lease_seconds=float(lease),
        batch_limit=int(batch),
        transaction_lease_seconds=600.0,
    )
    store = AtlasStore.open(url, config=config)
    locks, progress, kvs = store.locks, store.queue.progress, store.kvs
    updates: list[int] = []

    real_acquire = locks.acquire

    def acquire(name, who, seconds):
        lease = real_acquire(name, who, seconds)
        if lease is not None:
            print("HELD", lease.token, flush=True)
        return lease

    real_update = progress.update_progress

    def update_progress(s, strat, value):
        out = real_update(s, strat, value)
        updates.append(out)
        print("PROGRESS", out, flush=True)
        return out

    real_delete = kvs.delete_all_timestamps

    def delete_all_timestamps(table, ranges, **kw):
        real_delete(table, ranges, **kw)
        if len(updates) >= int(kill_after):
            print("MID", flush=True)
            time.sleep(3600)

    locks.acquire = acquire
    progress.update_progress = update_progress
    kvs.delete_all_timestamps = delete_all_timestamps
    result = store.sweeper.sweep_shard(int(shard), strategy, holder=holder, max_iterations=100_000)
    print("DONE", result.status, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
