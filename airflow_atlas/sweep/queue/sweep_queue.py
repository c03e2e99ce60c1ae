"""SweepQueue: the targeted sweep queue as one object - writer, reader, cleaner and shard progress over one
key-value service, plus :meth:`SweepQueue.ensure_tables` to create its three tables.

It is a :class:`~airflow_atlas.sweep.queue.write_info.SweepQueueHook` (``enqueue``), so a transaction manager can
be given the queue directly.
"""
from __future__ import annotations

from collections.abc import Sequence

from ...kvs.api import KeyValueService
from ...kvs.tables import SweepStrategy
from .cleaner import CleanResult, SweepQueueCleaner
from .constants import DEFAULT_BATCH_LIMIT
from .progress import ShardProgress
from .queue_tables import QUEUE_TABLES
from .reader import SweepBatch, SweepQueueReader
from .write_info import WriteInfo
from .writer import StrategyOf, SweepQueueWriter


def ensure_queue_tables(kvs: KeyValueService) -> None:
    """Create ``_sweep_cells``, ``_sweep_timestamps`` (LOGICAL) and ``_sweep_progress`` (LWT) if absent."""
    for table, metadata in QUEUE_TABLES.items():
        kvs.create_table(table, metadata)


class SweepQueue:
    """Facade over the sweep-queue components; each is also usable on its own."""

    def __init__(
        self,
        kvs: KeyValueService,
        strategy_of: StrategyOf | None = None,
        *,
        shard_count_ttl_seconds: float = 5.0,
        strategy_ttl_seconds: float = 60.0,
    ):
        self.kvs = kvs
        self.progress = ShardProgress(kvs)
        self.writer = SweepQueueWriter(
            kvs,
            self.progress,
            strategy_of,
            shard_count_ttl_seconds=shard_count_ttl_seconds,
            strategy_ttl_seconds=strategy_ttl_seconds,
        )
        self.reader = SweepQueueReader(kvs)
        self.cleaner = SweepQueueCleaner(kvs, index=self.reader.index)

    def ensure_tables(self) -> None:
        """Create the three queue tables if absent (idempotent)."""
        ensure_queue_tables(self.kvs)

    # ----- delegation ---------------------------------------------------------------------------------
    def enqueue(self, writes: Sequence[WriteInfo]) -> None:
        """:meth:`SweepQueueWriter.enqueue`."""
        self.writer.enqueue(writes)

    def read_batch(
        self,
        shard: int,
        strategy: SweepStrategy | str,
        min_exclusive: int,
        max_exclusive: int,
        batch_limit: int = DEFAULT_BATCH_LIMIT,
    ) -> SweepBatch:
        """:meth:`SweepQueueReader.read_batch`."""
        return self.reader.read_batch(shard, strategy, min_exclusive, max_exclusive, batch_limit)

    def clean(self, shard: int, strategy: SweepStrategy | str, old_progress: int, new_progress: int) -> CleanResult:
        """:meth:`SweepQueueCleaner.clean`."""
        return self.cleaner.clean(shard, strategy, old_progress, new_progress)

    def reconcile(self, shard: int, strategy: SweepStrategy | str, progress: int) -> CleanResult:
        """:meth:`SweepQueueCleaner.reconcile`."""
        return self.cleaner.reconcile(shard, strategy, progress)

    def get_progress(self, shard: int, strategy: SweepStrategy | str) -> int:
        return self.progress.get_progress(shard, strategy)

    def update_progress(self, shard: int, strategy: SweepStrategy | str, value: int) -> int:
        return self.progress.update_progress(shard, strategy, value)

    def get_number_of_shards(self) -> int:
        return self.progress.get_number_of_shards()

    def update_number_of_shards(self, number_of_shards: int) -> int:
        """Raise the shard count and drop the writer's cached count so the change applies at once here."""
        result = self.progress.update_number_of_shards(number_of_shards)
        self.writer.invalidate_caches()
        return result
