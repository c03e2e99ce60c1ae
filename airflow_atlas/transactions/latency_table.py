"""The application-latency table: where every client process publishes, about once a second and also when it
ran nothing, that it is alive and a summary of its transactions' latency; read by the sweep's application pace
(transactions/latency_source.py) and by status.

Layout (a WALLCLOCK table, every cell written with a short TTL, ``app_latency_ttl_seconds``):

* row ``<kind>/<minute>`` - one partition per kind (:data:`~airflow_atlas.transactions.latency_recorder.KINDS`)
  and wall-clock minute (``int(end // 60)``), so a partition holds at most a minute of every client's
  summaries and a reader of a window reads only the minutes it covers (never the expired ones). One write per
  client and interval (not per transaction); a reader of the last second reads one or two partitions;
* column ``fixed_long(end_ms) + client`` - the end of the summary's period in wall-clock milliseconds, then
  the publishing client's id (``holder/random``, unique per publisher even within one process);
* value - :meth:`LatencyHistogram.to_bytes` of the latencies recorded in the period that ended at ``end``
  (it began at the client's previous publication). A period without any transaction is published as an empty
  ``commit`` histogram: the client is alive and ran nothing (:func:`write_summaries`).

A summary belongs to the window ``(since, until]`` that holds its end. Writes are plain upserts with a TTL and
never deleted: ``gc_grace_seconds`` 0 is safe (an expired cell expires on every replica alike; nothing can be
resurrected) and lets compaction drop expired cells at once.
"""
from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from ..encoding import fixed_long, from_fixed_long
from ..errors import InvalidInputError
from ..kvs.api import Cell, KeyValueService
from ..kvs.tables import SweepStrategy, TableMetadata, WriteMode
from .histogram import LatencyHistogram
from .latency_recorder import ABORT, COMMIT, KINDS

log = logging.getLogger(__name__)

TABLE = "_app_latency"
TABLE_METADATA = TableMetadata(
    strategy=SweepStrategy.NOTHING,
    write_mode=WriteMode.WALLCLOCK,
    cassandra_options={"gc_grace_seconds": 0},
)
PARTITION_SECONDS = 60
"""Wall-clock seconds per partition (row) of one kind."""
TRANSACTION_KINDS = (COMMIT, ABORT)
"""The kinds that are transactions (what the application waits for; its reads are inside them)."""
MAX_WINDOW_SECONDS = 7 * 86_400
"""Longest window one read covers (the longest TTL the setting allows): one read per kind and minute."""


def ensure_table(kvs: KeyValueService) -> None:
    kvs.create_table(TABLE, TABLE_METADATA)


def _row(kind: str, minute: int) -> bytes:
    return f"{kind}/{minute}".encode()


@dataclass(frozen=True)
class Publication:
    """One client's summary of one kind, as read back."""

    end: float
    """The end of its period (the publisher's wall clock, seconds)."""
    client: str
    kind: str
    histogram: LatencyHistogram


def write_summaries(
    kvs: KeyValueService, client: str, end: float, histograms: Mapping[str, LatencyHistogram], ttl_seconds: int
) -> None:
    """One store write: each kind's histogram of the period ending at ``end`` (wall-clock seconds); a period
    without any transaction also writes an empty ``commit`` histogram (the client is alive)."""
    end_ms = int(end * 1000)
    minute = int(end // PARTITION_SECONDS)
    suffix = client.encode()
    values = {
        Cell(_row(kind, minute), fixed_long(end_ms) + suffix): histogram.to_bytes()
        for kind, histogram in histograms.items()
        if histogram.count
    }
    if not any(histograms.get(kind, LatencyHistogram()).count for kind in TRANSACTION_KINDS):
        values[Cell(_row(COMMIT, minute), fixed_long(end_ms) + suffix)] = LatencyHistogram().to_bytes()
    kvs.put_wallclock(TABLE, values, ttl_seconds=ttl_seconds)


def _check_kinds(kinds: Iterable[str]) -> tuple[str, ...]:
    kinds = tuple(kinds)
    for kind in kinds:
        if kind not in KINDS:
            raise InvalidInputError(f"unknown application latency kind {kind!r}; expected one of {', '.join(KINDS)}")
    return kinds


def read_publications(kvs: KeyValueService, since: float, until: float,
                      kinds: Iterable[str] = TRANSACTION_KINDS) -> Iterator[Publication]:
    """Every readable summary of ``kinds`` that ended in the wall-clock window ``(since, until]`` (seconds), by
    kind, then in the order they ended. Unreadable cells are skipped with a warning; store errors propagate."""
    kinds = _check_kinds(kinds)
    _check_window(since, until)
    since_ms, until_ms = int(since * 1000), int(until * 1000)
    start_col = fixed_long(since_ms + 1)
    for kind in kinds:
        for minute in range(int(since // PARTITION_SECONDS), int(until // PARTITION_SECONDS) + 1):
            for col, raw in kvs.get_wallclock_row(TABLE, _row(kind, minute), start_col=start_col):
                if len(col) < 8 or from_fixed_long(col[:8]) > until_ms:
                    continue
                try:
                    histogram = LatencyHistogram.from_bytes(raw)
                except InvalidInputError as exc:
                    log.warning("%s: skipping an unreadable summary in row %s/%d: %s", TABLE, kind, minute, exc)
                    continue
                yield Publication(from_fixed_long(col[:8]) / 1000.0, col[8:].decode(errors="replace"), kind,
                                  histogram)


def read_application_latency(
    kvs: KeyValueService, since: float, until: float, kinds: Iterable[str] = KINDS
) -> dict[str, LatencyHistogram]:
    """The application's latency in the wall-clock window ``(since, until]`` (seconds), pooled across every
    client that published into the store: kind -> histogram (every kind asked for; empty when nobody
    published). Unreadable cells are skipped with a warning; store errors propagate."""
    kinds = _check_kinds(kinds)
    out = {kind: LatencyHistogram() for kind in kinds}
    for publication in read_publications(kvs, since, until, kinds):
        out[publication.kind].merge(publication.histogram)
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


__all__ = ["PARTITION_SECONDS", "TABLE", "TABLE_METADATA", "TRANSACTION_KINDS", "Publication", "ensure_table",
           "read_application_latency", "read_publications", "write_summaries"]
