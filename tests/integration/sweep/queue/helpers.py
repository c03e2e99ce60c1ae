"""Small helpers shared by the sweep-queue integration tests."""
from __future__ import annotations

from airflow_atlas.kvs.api import Cell
from airflow_atlas.sweep.queue.write_info import WriteInfo


def make_writes(start_ts: int, n: int, table: str = "t_cons", prefix: bytes = b"r", tombstones: bool = False):
    """``n`` writes of one transaction to distinct cells."""
    return [
        WriteInfo(table, Cell(prefix + b"%d" % i, b"c"), start_ts, tombstones and i % 2 == 0) for i in range(n)
    ]


def drain(queue, shard, strategy, max_exclusive, min_exclusive=-1, batch_limit=10_000, max_batches=10_000):
    """Read batches like the sweeper would (progress = progress_if_all_swept); returns (entries, batches)."""
    entries, batches = [], []
    progress = min_exclusive
    for _ in range(max_batches):
        batch = queue.read_batch(shard, strategy, progress, max_exclusive, batch_limit)
        batches.append(batch)
        entries.extend(batch.entries)
        new = batch.progress_if_all_swept
        if batch.fine_partition is None or new >= max_exclusive - 1:
            return entries, batches
        assert new > progress, "reading must always make progress"
        progress = new
    raise AssertionError("drain did not finish")


class RecordingKvs:
    """Wraps a store, records every call (name, table), and can fail the n-th call of a method."""

    def __init__(self, inner, fail_on: tuple[str, int] | None = None):
        self._inner = inner
        self.calls: list[tuple[str, str]] = []
        self._fail_on = fail_on
        self._counts: dict[str, int] = {}

    def __getattr__(self, name):
        attr = getattr(self._inner, name)
        if not callable(attr):
            return attr

        def wrapper(*args, **kwargs):
            count = self._counts.get(name, 0) + 1
            self._counts[name] = count
            if self._fail_on == (name, count):
                raise RuntimeError(f"injected failure of {name} call #{count}")
            self.calls.append((name, args[0] if args else None))
            return attr(*args, **kwargs)

        return wrapper
