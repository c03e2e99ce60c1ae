"""Sizes and limits of the targeted sweep queue (spec 000, "Targeted Sweep").

Every number here is part of the persisted format or of the reader's contract; changing one changes
how existing queue rows are interpreted. Partition arithmetic lives in :mod:`.partitions`.
"""
from __future__ import annotations

FINE_PARTITION = 50_000
"""Width of a *fine* timestamp partition: one non-dedicated ``sweepableCells`` row per shard/strategy."""

COARSE_PARTITION = 10_000_000
"""Width of a *coarse* timestamp partition: one ``sweepableTimestamps`` row per shard/strategy."""

MAX_SHARDS = 256
"""Shards are numbered ``0 .. MAX_SHARDS - 1``; the shard count can grow up to this but never shrink."""

MAX_CELLS_GENERIC = 50
"""A (shard, strategy) partition of one transaction with at most this many writes goes inline into the
non-dedicated row; more writes go to dedicated rows behind a single reference cell."""

MAX_CELLS_DEDICATED = 100_000
"""Entries per dedicated row."""

MAX_DEDICATED_ROWS = 64
"""Dedicated rows per (transaction, shard, strategy): at most 64 * 100_000 = 6.4M writes."""

MAX_WRITES_PER_PARTITION = MAX_DEDICATED_ROWS * MAX_CELLS_DEDICATED
"""Largest number of writes one transaction may enqueue into one (shard, strategy) partition."""

DEFAULT_BATCH_LIMIT = 10_000
"""Default number of entries one :meth:`SweepQueueReader.read_batch` call aims for (it always finishes
the start timestamp it is on, so a batch can be larger)."""

MAX_BATCH_LIMIT = 100_000
"""Largest accepted ``batch_limit``."""

INITIAL_PROGRESS = -1
"""Progress of a shard and strategy that was never swept: everything above -1 is still to do."""
