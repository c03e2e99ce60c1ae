"""The application-latency table: where every client process publishes a summary of its transactions'
latency about once a second, and :func:`read_application_latency`, the pooled read of a time window
(for the pace controller and status).

Layout (a WALLCLOCK table, every cell written with a short TTL, ``app_latency_ttl_seconds``):

* row ``<kind>/<minute>`` - one partition per kind (:data:`~airflow_atlas.transactions.latency_recorder.KINDS`)
  and wall-clock minute (``int(end // 60)``), so a partition holds at most a minute of every client's
  summaries and a reader of a window reads only the minutes it covers (never the expired ones);
* column ``fixed_long(end_ms) + client`` - the end of the summary's period in wall-clock milliseconds, then
  the publishing client's id (``holder/random``, unique per publisher even within one process);
* value - :meth:`LatencyHistogram.to_bytes` of the latencies recorded in the period that ended at ``end``
  (it began at the client's previous publication).

* row ``sweeping/<minute>`` - the **sweep marks**: a sweep run claims ``[start, until]`` (column
  ``fixed_long(start_ms) + holder``, value ``fixed_long(until_ms)``) when it starts, again before its claim
  runs out, and ends it at its last moment (:class:`~airflow_atlas.sweep.pacing.activity.SweepActivity`); a
  claim spans at most :data:`MAX_MARK_SECONDS`. :func:`read_quiet_latency` returns the summaries no claim
  overlaps, in the order they ended: the application's latency where no sweep ran, its baseline.

A summary belongs to the window ``(since, until]`` that holds its end: periods are about one publication
interval long, so a window's edges are that precise. Writes are plain upserts with a TTL and never
deleted: ``gc_grace_seconds`` 0 is safe (an expired cell expires on every replica alike; nothing can be
resurrected) and lets compaction drop expired cells at once.
"""
from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Iterator, Mapping

from ..encoding import fixed_long, from_fixed_long
from ..errors import InvalidInputError
from ..kvs.api import Cell, KeyValueService
from ..kvs.tables import SweepStrategy, TableMetadata, WriteMode
from .histogram import BOUNDS, LatencyHistogram
from .latency_recorder import KINDS

log = logging.getLogger(__name__)

TABLE = "_app_latency"
TABLE_METADATA = TableMetadata(
    strategy=SweepStrategy.NOTHING,
    write_mode=WriteMode.WALLCLOCK,
    cassandra_options={"gc_grace_seconds": 0},
)
PARTITION_SECONDS = 60
"""Wall-clock seconds per partition (row) of one kind."""
SWEEP_MARK_ROW = "sweeping"
"""Row prefix of the sweep marks (one partition per wall-clock minute of a claim's start)."""
MAX_MARK_SECONDS = 60.0
"""Longest sweep claim: a reader looks this far before a window for claims that reach into it."""
LONGEST_SPAN_SECONDS = BOUNDS[-1]
"""The longest a summary's slowest transaction is taken to reach back (the histogram's last finite bound,
about 105 s; a slower one is in the overflow bucket, of unknown length)."""
MAX_WINDOW_SECONDS = 7 * 86_400
"""Longest window one read covers (the longest TTL the setting allows): one read per kind and minute."""


def ensure_table(kvs: KeyValueService) -> None:
    kvs.create_table(TABLE, TABLE_METADATA)


def _row(kind: str, minute: int) -> bytes:
    return f"{kind}/{minute}".encode()


def write_summaries(
    kvs: KeyValueService, client: str, end: float, histograms: Mapping[str, LatencyHistogram], ttl_seconds: int
) -> None:
    """One store write: each kind's histogram of the period ending at ``end`` (wall-clock seconds)."""
    end_ms = int(end * 1000)
    minute = int(end // PARTITION_SECONDS)
    suffix = client.encode()
    values = {
        Cell(_row(kind, minute), fixed_long(end_ms) + suffix): histogram.to_bytes()
        for kind, histogram in histograms.items()
        if histogram.count
    }
    if values:
        kvs.put_wallclock(TABLE, values, ttl_seconds=ttl_seconds)


def write_sweep_mark(kvs: KeyValueService, holder: str, start: float, until: float, ttl_seconds: int) -> None:
    """Claim ``[start, until]`` (wall-clock seconds) as a time a sweep ran; a later write of the same ``start``
    and ``holder`` replaces the claim's end (a run's last write ends it at its real end)."""
    if not start <= until <= start + MAX_MARK_SECONDS:
        raise InvalidInputError(f"a sweep mark spans 0 to {MAX_MARK_SECONDS:.0f} s, got [{start}, {until}]")
    cell = Cell(_row(SWEEP_MARK_ROW, int(start // PARTITION_SECONDS)), fixed_long(int(start * 1000)) + holder.encode())
    kvs.put_wallclock(TABLE, {cell: fixed_long(int(until * 1000))}, ttl_seconds=ttl_seconds)


def read_sweep_marks(kvs: KeyValueService, since: float, until: float) -> list[tuple[float, float]]:
    """The sweep claims ``(start, until)`` (seconds) that overlap the window ``(since, until]``, in start order."""
    _check_window(since, until)
    first = max(0.0, since - MAX_MARK_SECONDS)
    out = []
    for minute in range(int(first // PARTITION_SECONDS), int(until // PARTITION_SECONDS) + 1):
        for col, raw in kvs.get_wallclock_row(TABLE, _row(SWEEP_MARK_ROW, minute)):
            if len(col) < 8 or len(raw) != 8:
                continue
            start, end = from_fixed_long(col[:8]) / 1000.0, from_fixed_long(raw) / 1000.0
            if start <= until and end > since:
                out.append((start, end))
    return sorted(out)


def read_quiet_latency(kvs: KeyValueService, since: float, until: float, period_seconds: float,
                       kinds: Iterable[str] = ("commit", "abort"), aftermath_seconds: float = 0.0
                       ) -> list[LatencyHistogram]:
    """The application's latency in ``(since, until]`` where no sweep ran: the summaries (every client's, of
    ``kinds``) whose span overlaps no sweep claim (:func:`read_sweep_marks`), in the order they ended (a reader
    can tell a stretch of them from another: sweep/pacing/application.py's baseline). A summary's span reaches back
    from its end over ``period_seconds`` (at least the clients' publication interval) plus its slowest
    transaction (its bucket's bound, at most :data:`LONGEST_SPAN_SECONDS`): a transaction is recorded when it
    ends, so one that ended after a claim may have waited through that sweep (an open-loop application's
    queue drains after the sweep stops; counted as quiet, it raised the baseline to 15 s in a benchmark run).
    A claim reaches ``aftermath_seconds`` past its end (what the sweep left behind: a drained queue, the
    node's compactions). Sweeps that left no claim (a store without this table, a sweeper before marks)
    cannot be seen."""
    kinds = _check_kinds(kinds)
    _check_window(since, until)
    if not 0 <= aftermath_seconds <= MAX_MARK_SECONDS:
        raise InvalidInputError(f"a sweep's aftermath spans 0 to {MAX_MARK_SECONDS:.0f} s, got {aftermath_seconds!r}")
    marks = read_sweep_marks(kvs, max(0.0, since - period_seconds - LONGEST_SPAN_SECONDS - aftermath_seconds), until)
    out: list[tuple[float, LatencyHistogram]] = []
    for kind in kinds:
        for end, histogram in _summaries(kvs, kind, since, until):
            if not histogram.count:
                continue
            reach = period_seconds + min(histogram.quantile(1.0), LONGEST_SPAN_SECONDS)
            if not any(start <= end and claim_end + aftermath_seconds >= end - reach for start, claim_end in marks):
                out.append((end, histogram))
    out.sort(key=lambda found: found[0])
    return [histogram for _end, histogram in out]


def _check_kinds(kinds: Iterable[str]) -> tuple[str, ...]:
    kinds = tuple(kinds)
    for kind in kinds:
        if kind not in KINDS:
            raise InvalidInputError(f"unknown application latency kind {kind!r}; expected one of {', '.join(KINDS)}")
    return kinds


def _summaries(kvs: KeyValueService, kind: str, since: float, until: float) -> Iterator[tuple[float, LatencyHistogram]]:
    """(end in seconds, histogram) of every readable summary of ``kind`` that ended in ``(since, until]``."""
    since_ms, until_ms = int(since * 1000), int(until * 1000)
    start_col = fixed_long(since_ms + 1)
    for minute in range(int(since // PARTITION_SECONDS), int(until // PARTITION_SECONDS) + 1):
        for col, raw in kvs.get_wallclock_row(TABLE, _row(kind, minute), start_col=start_col):
            if len(col) < 8 or from_fixed_long(col[:8]) > until_ms:
                continue
            try:
                yield from_fixed_long(col[:8]) / 1000.0, LatencyHistogram.from_bytes(raw)
            except InvalidInputError as exc:
                log.warning("%s: skipping an unreadable summary in row %s/%d: %s", TABLE, kind, minute, exc)


def read_application_latency(
    kvs: KeyValueService, since: float, until: float, kinds: Iterable[str] = KINDS
) -> dict[str, LatencyHistogram]:
    """The application's latency in the wall-clock window ``(since, until]`` (seconds), pooled across every
    client that published into the store: kind -> histogram (every kind asked for; empty when nobody
    published). Unreadable cells are skipped with a warning; store errors propagate."""
    kinds = _check_kinds(kinds)
    _check_window(since, until)
    out = {kind: LatencyHistogram() for kind in kinds}
    for kind in kinds:
        for _end, histogram in _summaries(kvs, kind, since, until):
            out[kind].merge(histogram)
    return out


def _check_window(since: float, until: float) -> None:
    for name, value in (("since", since), ("until", until)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            raise InvalidInputError(f"{name} must be a non-negative finite wall-clock time in seconds, got {value!r}")
    if until < since:
        raise InvalidInputError(f"until ({until}) is before since ({since})")
    if until - since > MAX_WINDOW_SECONDS:
        raise InvalidInputError(
            f"an application latency window is at most {MAX_WINDOW_SECONDS} s, got {until - since:.0f} s"
        )


__all__ = ["MAX_MARK_SECONDS", "PARTITION_SECONDS", "TABLE", "TABLE_METADATA", "ensure_table",
           "read_application_latency", "read_quiet_latency", "read_sweep_marks", "write_summaries", "write_sweep_mark"]
