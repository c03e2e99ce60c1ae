"""The sweep's read-ahead (sweep/queue/reader.py ``BatchReadAhead``, started by sweep/targeted.py) on the real
backends: a run never returns while a read it started in the background still reads. The caller may close
the store as soon as ``sweep_shard`` returns; an embedded store's connection closed under a running
read-ahead crashed the test process with a segmentation fault in sqlite3 (a clean-clone test run of 2026-11-27: a
run that ended after the iteration that had started the next batch's read).

The seam: the store's key-value service, wrapped so that the read-ahead thread's row reads take half a
second - a read-ahead a run does not wait for is then still running when the run has returned."""
from __future__ import annotations

import threading
import time

import pytest

from airflow_atlas.store import AtlasStore

from .helpers import THOR

READ_AHEAD_THREAD = "atlas-sweep-read-ahead"


class _SlowReadAhead:
    def __init__(self, kvs):
        self._kvs = kvs

    def __getattr__(self, name):
        return getattr(self._kvs, name)

    def get_rows_columns(self, *args, **kwargs):
        if threading.current_thread().name == READ_AHEAD_THREAD:
            time.sleep(0.5)
        return self._kvs.get_rows_columns(*args, **kwargs)


class _Stop(Exception):
    pass


def _read_aheads_running() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == READ_AHEAD_THREAD and t.is_alive()]


def test_a_run_never_returns_while_its_read_ahead_still_reads(harness):
    h = harness
    t = h.table(THOR)
    cells = h.cells_in_shard(t, 0, 4)
    for i in range(6):  # 24 entries: a run of batches of 4 reads the next batch ahead after each one
        h.write(t, {c: b"v%d" % i for c in cells})
    h.settle()
    ts = h.sweep_timestamps()[THOR.value]
    slow = AtlasStore(_SlowReadAhead(h.store.kvs), h.store.config)
    fixed = {"latency_target": 0.0, "max_entries_per_second": 0}
    assert _read_aheads_running() == []

    # The iteration limit ends the run after the iteration that started the next batch's read.
    first = slow.sweeper.sweep_shard(0, THOR, sweep_ts=ts, batch_limit=4, max_iterations=1, **fixed)
    assert first.status == "iteration_limit" and first.counts.entries_read == 4
    assert _read_aheads_running() == []

    # So does a caller's own stop (an on_iteration that raises), as the foreground_impact benchmark's.
    def stop(_iteration) -> None:
        raise _Stop

    with pytest.raises(_Stop):
        slow.sweeper.sweep_shard(0, THOR, sweep_ts=ts, batch_limit=4, max_iterations=5, on_iteration=stop, **fixed)
    assert _read_aheads_running() == []

    # Nothing was lost by dropping the batches read ahead: the rest is swept from the persisted progress.
    rest = h.store.sweeper.sweep_shard(0, THOR, sweep_ts=ts, batch_limit=4, **fixed)
    assert rest.status == "caught_up" and rest.counts.entries_read == 24 - 8
