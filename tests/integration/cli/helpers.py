"""Independent figures from the store, to check what ``atlas-sweep status`` / ``compute_status`` report."""
from __future__ import annotations

from airflow_atlas.encoding import LONG_MAX


def queued_entries(store, shard: int, strategy: str, min_exclusive: int = -1, max_exclusive: int = LONG_MAX) -> int:
    """Queue entries with start timestamp in ``(min_exclusive, max_exclusive)``, counted by reading every batch
    with the reader's own ``read_batch`` (dedicated rows included), not with ``count_entries``."""
    total, cursor = 0, min_exclusive
    while True:
        batch = store.queue.reader.read_batch(shard, strategy, cursor, max_exclusive, 100_000)
        if batch.fine_partition is None:
            return total
        total += batch.entries_read
        nxt = batch.progress_if_all_swept
        assert nxt > cursor
        cursor = nxt
