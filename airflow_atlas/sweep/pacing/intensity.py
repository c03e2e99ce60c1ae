"""Sweep intensity: how fast one run of a pair may take entries off the sweep queue.

Setting ``sweep_max_entries_per_second`` (:class:`~airflow_atlas.config.StoreConfig`; 0 = unlimited) limits
each :meth:`~airflow_atlas.sweep.targeted.TargetedSweeper.sweep_shard` call: the CLI, the operators and the
Spark executors all go through it, so all honour it. :class:`SweepPacer` is the one implementation.

How it paces (a token bucket that holds no burst beyond one batch): every iteration "costs"
``entries / rate`` seconds; the run owes the sum of those costs since it started. After an iteration the
pacer sleeps until the run has paid what it owes. An iteration that itself took longer than its cost
needs no wait and earns no credit (a slow store is never followed by a burst).

Invariants:

* The pacer sleeps between iterations, after an iteration has persisted its progress and cleaned the queue
  (everything it did is durable; a process killed while pacing loses nothing), and between the chunks of a
  batch's deletes (below; a process killed there redoes the batch, whose deletes are idempotent), and never
  after the last iteration of a run (a caught-up, blocked or finished pair is not held idle).
* One wait is bounded by ``max_wait_seconds`` (sweep_shard passes a third of the lock lease, the lease
  keeper's refresh interval), so a paced run holds its lock only while the lease keeper keeps it alive, and
  the next iteration's fencing check (``keeper.check()``) runs at most that long after the previous
  iteration. Debt a bounded wait could not pay is carried to the next wait (the average rate holds);
  :meth:`batch_cap` keeps one batch within what one wait can pay, so the debt cannot grow without bound.
* Smoothness: :meth:`batch_cap` also keeps one batch to :data:`PACING_INTERVAL_SECONDS` worth of entries,
  and a paced run spreads the batch's deletes over that time: they go in about :data:`SPREAD_CHUNKS`
  chunks, the first of :data:`DELETE_CHUNK_REQUESTS` (:func:`delete_chunks`, :func:`chunk_step`), and before
  each chunk after the first the pacer is paid that chunk's predecessor's share of the batch (the batch's
  entries in proportion to the chunk's requests, sweep/batch_deletes.py), so the
  store sees an eighth of the batch every ~31 ms instead of a quarter second's worth at once (a batch never splits
  a start timestamp, so a batch can still be one transaction's writes). The waits inside a batch add up to
  at most the batch's cost (at most ``interval_seconds``, itself at most ``max_wait_seconds``); each is cut
  short by a lost lease, after which the run stops before its next chunk.
* The clock is monotonic (wall-clock jumps do not pace); clock and sleep are constructor arguments, so the
  pacing logic is unit-tested without sleeping.
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator

from ...errors import InvalidInputError
from ...validation import check_float, check_int

MAX_SWEEP_ENTRIES_PER_SECOND = 10_000_000
"""Largest ``sweep_max_entries_per_second`` (far above what one process sweeps); the setting's declaration
(:class:`airflow_atlas.config.StoreConfig`) and :class:`SweepPacer` share it."""

PACING_INTERVAL_SECONDS = 0.25
"""A paced run takes at most ``rate x`` this many entries per batch: its bursts of full-speed work last a
fraction of this and alternate with waits (a shorter burst delays the foreground transactions that meet it less;
measured against 1 s in bench/ANALYSIS.md, "pacing"). Unlimited runs keep batch_limit."""

PACED_BATCH_MIN_ENTRIES = 500
"""Below ``PACED_BATCH_MIN_ENTRIES / PACING_INTERVAL_SECONDS`` (2,000 entries/s) a paced batch holds this many
entries, or :data:`PACED_BATCH_MAX_SECONDS` of the pace when that is fewer: every iteration costs the store a fixed
amount of Paxos work whatever its size (a SERIAL progress read, the progress check-and-set, the fresh timestamp of
its tombstone record), so fewer, bigger batches cost the application less at one pace (bench/ANALYSIS.md,
"pacing"). Their deletes are still spread (:data:`SPREAD_CHUNKS`)."""
PACED_BATCH_MAX_SECONDS = 1.0
"""A paced batch never holds more than this many seconds of the pace to reach :data:`PACED_BATCH_MIN_ENTRIES`:
its waits are at most this long apart from the next iteration's fencing check, and a bigger batch is a longer
burst of reads (the queue, the commit timestamps) before its deletes are spread."""

DELETE_CHUNK_REQUESTS = 64
"""The first chunk of a batch's deletes holds this many (aborted versions, or cells to tombstone) of one table,
and each chunk at least this many: 64 fit in one round of the driver's in-flight requests (the Cassandra store's
``concurrency``, 100), so a chunk is one burst the store serves at once."""
SPREAD_CHUNKS = 8
"""A batch's deletes after the first chunk go in chunks of at least 1/8 of the batch at its pace: about 8 per
batch, one every ~31 ms at a quarter second's batch. Not 64-request chunks throughout: every chunk waits for its
slowest request before the next is sent, so small chunks cap the sweeper at one chunk per round trip (on a loaded
machine a sixth of the unthrottled rate; bench/ANALYSIS.md, "pacing")."""


def paced_batch_cap(rate: float, batch_limit: int, *, interval_seconds: float = PACING_INTERVAL_SECONDS,
                    max_seconds: float = math.inf) -> int:
    """The batch limit of a run paced at ``rate`` entries/s: ``interval_seconds`` of the pace, raised to
    :data:`PACED_BATCH_MIN_ENTRIES` or :data:`PACED_BATCH_MAX_SECONDS` of the pace (the fewer of the two) where
    that is more; never more than ``max_seconds`` of the pace (what one bounded wait pays for) nor
    ``batch_limit``; never below 1. Pure: the one rule of a paced batch's size."""
    check_float(rate, "rate", 0)
    check_int(batch_limit, "batch_limit", 1)
    seconds = max(interval_seconds, min(PACED_BATCH_MIN_ENTRIES / rate, PACED_BATCH_MAX_SECONDS)) if rate > 0 else 0.0
    return max(1, min(batch_limit, int(rate * min(seconds, max_seconds))))


def chunk_step(batch_entries: int, rate: float, batch_limit: int) -> int:
    """The size of a delete chunk after the first, for a batch of ``batch_entries`` swept at ``rate`` entries/s
    (0: unlimited): an eighth of the batch (:data:`SPREAD_CHUNKS`), at least :data:`DELETE_CHUNK_REQUESTS`, and
    at a limited pace no more than an eighth of a batch at that pace (:func:`paced_batch_cap`), so a batch read
    at a higher pace - an unthrottled one when the application starts - is sent in the chunks of the new pace.
    Pure."""
    check_int(batch_entries, "batch_entries", 0)
    step = -(-batch_entries // SPREAD_CHUNKS)
    if rate > 0:
        step = min(step, -(-paced_batch_cap(rate, batch_limit) // SPREAD_CHUNKS))
    return max(DELETE_CHUNK_REQUESTS, step)


def delete_chunks(group_sizes: list[int], step: Callable[[], int]) -> Iterator[tuple[int, int, int]]:
    """The chunks of one batch's deletes: ``(group, start, stop)`` slices of the groups (a table's aborted
    versions, a table's cells), in order, never spanning two groups: the first :data:`DELETE_CHUNK_REQUESTS`
    long, each later one ``step()`` long (asked when the chunk is cut, after the wait before it: a change of
    pace applies to the rest of the batch; a group's last chunk shorter)."""
    for size in group_sizes:
        check_int(size, "group size", 0)
    first = True
    for group, size in enumerate(group_sizes):
        start = 0
        while start < size:
            length = DELETE_CHUNK_REQUESTS if first else check_int(step(), "chunk step", 1)
            stop = min(start + length, size)
            first = False
            yield group, start, stop
            start = stop


class SweepPacer:
    """Paces one run of one pair to at most ``max_entries_per_second`` queue entries per second.

    :param max_entries_per_second: the limit; 0 = unlimited (:meth:`pace` never waits).
    :param max_wait_seconds: the longest single wait.
    :param interval_seconds: pacing granularity: one batch holds at most this many seconds' worth of
        entries (default :data:`PACING_INTERVAL_SECONDS`; never above ``max_wait_seconds``).
    :param clock: monotonic seconds (default :func:`time.monotonic`).
    :param sleep: sleeps the given seconds (default :func:`time.sleep`).
    """

    def __init__(
        self,
        max_entries_per_second: int,
        *,
        max_wait_seconds: float,
        interval_seconds: float = PACING_INTERVAL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ):
        # The one check of a rate given to the engine directly (sweep_shard(max_entries_per_second=...));
        # the setting's values are checked by their declaration before they get here.
        self.max_entries_per_second: float = check_int(
            max_entries_per_second, "max_entries_per_second", 0, MAX_SWEEP_ENTRIES_PER_SECOND
        )
        self.max_wait_seconds = check_float(max_wait_seconds, "max_wait_seconds", 0)
        self.interval_seconds = min(check_float(interval_seconds, "interval_seconds", 0), self.max_wait_seconds)
        self._clock = clock
        self._sleep = sleep
        self._due = clock()  # when the entries taken so far are paid for
        self.seconds_paced = 0.0
        """Total seconds this pacer has slept."""
        self.waits: list[float] = []
        """Each wait, in order (what a run reports and tests check)."""

    def set_rate(self, entries_per_second: float) -> None:
        """Change the limit from now on (the application pace, sweep/pacing/application.py): entries taken from
        now cost ``entries / entries_per_second``; what earlier entries cost stays owed; 0 = unlimited from now
        (a later limit starts owing from the moment it is set)."""
        unlimited = not isinstance(entries_per_second, bool) and entries_per_second == 0
        rate = 0.0 if unlimited else check_float(entries_per_second, "entries_per_second", 0, MAX_SWEEP_ENTRIES_PER_SECOND)
        if self.unlimited and rate > 0:
            self._due = self._clock()
        self.max_entries_per_second = rate

    @property
    def unlimited(self) -> bool:
        return self.max_entries_per_second == 0

    def batch_cap(self, batch_limit: int) -> int:
        """The batch limit to use under this pacer (:func:`paced_batch_cap`): ``interval_seconds`` worth of
        entries, more below 2,000 entries/s, at most what one bounded wait pays for; never below 1."""
        if self.unlimited:
            return batch_limit
        return paced_batch_cap(self.max_entries_per_second, batch_limit, interval_seconds=self.interval_seconds,
                               max_seconds=self.max_wait_seconds)

    def wait_for(self, entries: float) -> float:
        """Record ``entries`` as taken and return how long to wait now (bounded; no side effect but the
        bookkeeping). Pure arithmetic over the injected clock: :meth:`pace` is this plus the sleep. (A float:
        a chunk's share of a batch.)"""
        if isinstance(entries, bool) or not isinstance(entries, (int, float)) or not 0 <= entries < math.inf:
            raise InvalidInputError(f"entries must be a finite number >= 0, got {entries!r}")
        if self.unlimited:
            return 0.0
        now = self._clock()
        self._due = max(self._due + entries / self.max_entries_per_second, now)
        return min(self._due - now, self.max_wait_seconds)

    def pace(self, entries: float, sleep: Callable[[float], None] | None = None) -> float:
        """Account for an iteration that took ``entries`` entries off the queue and sleep as needed (with
        ``sleep`` when given, e.g. the lease keeper's :meth:`~airflow_atlas.sweep.lease_keeper.LeaseKeeper.pause`,
        which a lost lease cuts short); returns the seconds paced (0.0 when the rate is not exceeded or
        unlimited)."""
        wait = self.wait_for(entries)
        if wait <= 0:
            return 0.0
        (sleep or self._sleep)(wait)
        self.seconds_paced += wait
        self.waits.append(wait)
        return wait


__all__ = [
    "DELETE_CHUNK_REQUESTS", "MAX_SWEEP_ENTRIES_PER_SECOND", "PACED_BATCH_MAX_SECONDS", "PACED_BATCH_MIN_ENTRIES",
    "PACING_INTERVAL_SECONDS", "SPREAD_CHUNKS", "SweepPacer", "chunk_step", "delete_chunks", "paced_batch_cap",
]
