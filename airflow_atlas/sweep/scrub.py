"""Scrub (spec 003): hard-delete transactions record their writes in ``_scrub``; the scrubber removes the
older versions of those cells as soon as the immutable timestamp has passed the transaction, with the
same deletion rules as sweep (sentinel + ``[0, ts-1]`` for CONSERVATIVE; ``[-1, ts-1]`` then
``[-1, ts]`` for a THOROUGH delete), instead of waiting for the regular sweep.

Layout: a LOGICAL table; row ``b"scrub"`` + VAR_LONG(start_ts // 1_000_000) (one row per million
timestamps keeps rows bounded and lets the scrubber skip ahead), column VAR_LONG(start_ts) +
VAR_LONG(index), value the same WriteReference encoding as the sweep queue, written at the start
timestamp. Entries are removed with exact deletes once scrubbed.

Scrubbing uses the immutable timestamp for both strategies, so (as the spec says of aggressive hard
deletes) a CONSERVATIVE read-only transaction older than the hard delete may hit the sentinel and fail,
rather than read scrubbed data.
"""
from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..encoding import decode_var_long, encode_var_long
from ..errors import CorruptQueueDataError, InvalidInputError, KeyAlreadyExistsError
from ..kvs.api import Cell, KeyValueService
from ..kvs.consistency import Operation
from ..kvs.tables import SweepStrategy, TableMetadata, WriteMode
from .deleter import SweepDeleter
from .queue.write_info import WriteInfo
from .queue.write_reference import decode_write_reference, encode_write_info

if TYPE_CHECKING:
    from ..store import AtlasStore

log = logging.getLogger(__name__)

TABLE = "_scrub"
_ROW_PREFIX = b"scrub"
_BUCKET = 1_000_000
ABORTED = -1


def _row(start_ts: int) -> bytes:
    return _ROW_PREFIX + encode_var_long(start_ts // _BUCKET)


class ScrubQueue:
    """The ScrubQueueHook a TransactionManager calls for hard-delete transactions."""

    def __init__(self, kvs: KeyValueService):
        self._kvs = kvs

    def ensure_tables(self) -> None:
        self._kvs.create_table(TABLE, TableMetadata(strategy=SweepStrategy.NOTHING, write_mode=WriteMode.LOGICAL))

    def enqueue(self, writes: Sequence[WriteInfo]) -> None:
        if not writes:
            return
        start = writes[0].start_ts
        if any(w.start_ts != start for w in writes):
            raise InvalidInputError("all writes of one scrub enqueue must share the transaction's start timestamp")
        values = {
            Cell(_row(start), encode_var_long(start) + encode_var_long(i)): encode_write_info(w)
            for i, w in enumerate(writes)
        }
        self._kvs.put(TABLE, values, start, operation=Operation.QUEUE_WRITE)

    def pending(self) -> list[tuple[Cell, WriteInfo]]:
        """Every queued scrub entry (decodable ones), in row order."""
        out = []
        for cell, _ts, value in self._kvs.scan(TABLE):
            try:
                start, used = decode_var_long(cell.col)
                out.append((cell, decode_write_reference(value).at(start)))
            except (CorruptQueueDataError, InvalidInputError) as exc:
                log.error("ALERT: corrupt scrub entry %s/%s skipped: %s", cell.row.hex(), cell.col.hex(), exc)
        return out


@dataclass
class ScrubResult:
    immutable_ts: int = 0
    entries_seen: int = 0
    entries_scrubbed: int = 0
    entries_waiting: int = 0
    cells_tombstoned: int = 0
    aborted_writes_deleted: int = 0
    duration_seconds: float = 0.0
    tables: dict = field(default_factory=dict)


class Scrubber:
    def __init__(self, store: AtlasStore) -> None:
        self._store = store
        self._kvs = store.kvs
        self._deleter = SweepDeleter(store.kvs)

    def scrub(self, max_entries: int | None = None, dry_run: bool = False) -> ScrubResult:
        started = time.monotonic()
        immutable = self._store.sweep_timestamps.immutable_timestamp()
        result = ScrubResult(immutable_ts=immutable)
        entries = self._store.scrub_queue.pending()
        result.entries_seen = len(entries)
        ready = [(cell, w) for cell, w in entries if w.start_ts < immutable]
        result.entries_waiting = len(entries) - len(ready)
        if max_entries is not None:
            ready = ready[:max_entries]
        if not ready:
            result.duration_seconds = round(time.monotonic() - started, 6)
            return result
        service = self._store.transaction_service
        starts = sorted({w.start_ts for _, w in ready})
        commits: dict[int, int | None] = dict(service.get_many(starts))  # None: undecided
        for s in starts:
            if s not in commits and not dry_run:
                try:
                    service.put_unless_exists(s, ABORTED)
                    commits[s] = ABORTED
                except KeyAlreadyExistsError:
                    commits[s] = service.get(s)
        done: list[tuple[Cell, int]] = []
        newest: dict[str, dict[Cell, tuple[int, bool]]] = defaultdict(dict)
        aborted: dict[str, list[tuple[Cell, int]]] = defaultdict(list)
        for cell, w in ready:
            commit = commits.get(w.start_ts)
            if commit is None:
                continue  # dry run: undecided
            if commit != ABORTED and commit >= immutable:
                result.entries_waiting += 1
                continue
            done.append((cell, w.start_ts))
            if commit == ABORTED:
                aborted[w.table].append((w.cell, w.start_ts))
                continue
            current = newest[w.table].get(w.cell)
            if current is None or w.start_ts > current[0]:
                newest[w.table][w.cell] = (w.start_ts, w.is_tombstone)
        for table in sorted(set(newest) | set(aborted)):
            if not self._kvs.table_exists(table):
                continue
            strategy = self._kvs.get_metadata(table).strategy
            if aborted.get(table):
                if not dry_run:
                    self._kvs.delete(table, aborted[table], operation=Operation.ABORT_DELETE)
                result.aborted_writes_deleted += len(aborted[table])
            if not strategy.is_swept or not newest.get(table):
                continue
            counts = self._deleter.sweep_cells(table, strategy, newest[table], dry_run=dry_run)
            result.cells_tombstoned += counts.cells_tombstoned
            result.tables[table] = counts.cells_tombstoned
        if done and not dry_run:
            # counted for compaction (sweep/history.py) before the queue forgets the entries
            written = {t: result.tables.get(t, 0) + len(aborted.get(t, [])) for t in set(result.tables) | set(aborted)}
            self._store.history.record_tombstones(written, self._store.timestamps.fresh_timestamp(), {"source": "scrub"})
            self._kvs.delete(TABLE, done, operation=Operation.QUEUE_CLEANUP)
        result.entries_scrubbed = len(done)
        result.duration_seconds = round(time.monotonic() - started, 6)
        return result
