"""The compaction policy: which tables to compact after sweeping, and why not the others.

Sweep only writes tombstones; the space comes back when a table is compacted (Cassandra) or the file is
vacuumed (embedded store). Compacting after every sweep would waste I/O, so a table is compacted when the
tombstones written into it since its last compaction reach a threshold. Those counts come from the store
itself: every sweep step that writes tombstones (targeted iteration, full-sweep batch, scrub) records them
per table in the sweep history, and every compaction records itself there too
(:mod:`airflow_atlas.sweep.history`: fresh timestamps order the two, so nothing depends on who was told
what - a paused Airflow DAG, a task result lost with its worker, a cleared Variable change nothing).

* :func:`tombstones_since_compaction` - the counts per table (bounded reads; ``capped`` tables are due);
* :func:`compact_due_tables` - THE entry point: plan (thresholds, ``force``, the tables asked for), take
  each due table's compaction lease (``compaction/<table>`` in the lock service: a second compaction at
  once skips the table instead of compacting it twice) and read its count again under it, ask the backend's
  guard (on Cassandra the repair guard: compaction must not purge a tombstone that may not have reached
  every replica), draw ``through_ts`` (a fresh timestamp), compact the allowed tables through a
  :class:`Compactor`, record each compaction with ``through_ts`` and return a :class:`CompactionResult`.
  A table the guard refuses keeps its count and is reported under ``skipped`` with the reason, and the next
  run tries again. Tombstones written while a compaction runs are counted for the next one (over-count,
  never under-count); a compaction whose lease lapsed still records itself correctly (the newest
  ``through_ts`` wins), the lease only saves the duplicate work.

A :class:`Compactor` is the backend's part: :class:`VacuumCompactor` for the embedded store (no guard: one
file, one copy) here; the Cassandra one (``nodetool`` and the repair history) lives with the nodetool hook
(:mod:`airflow_atlas.airflow.hooks.compaction`).
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, Protocol

from pydantic import model_serializer

from .errors import InvalidInputError
from .serialisation import OMIT_NONE, to_json
from .sweep.history import TableTombstones

if TYPE_CHECKING:
    from .kvs.sqlite import SqliteKeyValueService

log = logging.getLogger(__name__)

COMPACTION_METHODS = ("compact", "garbagecollect")
"""``nodetool`` operations that reclaim a Cassandra table's space (setting ``compaction_method``)."""
VACUUM = "vacuum"
"""The method the embedded store reports (one ``VACUUM`` of its file)."""


def check_method(method: str) -> str:
    if method not in COMPACTION_METHODS:
        raise InvalidInputError(f"compaction method must be compact or garbagecollect, got {method!r}")
    return method


@dataclass(frozen=True)
class GuardVerdict:
    """May this table be compacted now, and why (or why not)."""

    allowed: bool
    reason: str


@dataclass(frozen=True)
class TableCompaction:
    """What compacting one table did. Cassandra: space ``space_used_live`` summed over the runner's nodes,
    sstables before/after and ``nodes`` (per node space). Embedded store: the table's pages before/after
    and the file's size before/after (``file_*``: one VACUUM for every table)."""

    space_before_bytes: int | None
    space_after_bytes: int | None
    reclaimed_bytes: int
    duration_seconds: float
    runner: str
    # The backend's fields only in the JSON (a Cassandra report has no ``file_*``, a VACUUM report no sstables).
    sstables_before: Annotated[int | None, OMIT_NONE] = None
    sstables_after: Annotated[int | None, OMIT_NONE] = None
    file_before_bytes: Annotated[int | None, OMIT_NONE] = None
    file_after_bytes: Annotated[int | None, OMIT_NONE] = None
    nodes: Annotated[dict[str, dict[str, int | None]] | None, OMIT_NONE] = None


@dataclass(frozen=True)
class CompactionResult:
    """One compaction run: the tables compacted (with their reports), the due tables the guard refused
    (``{table: reason}``) and the tombstones since each table's last compaction afterwards (a compacted
    table: those written while it was compacted)."""

    threshold: int
    method: str
    compacted: dict[str, TableCompaction] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    pending: dict[str, int] = field(default_factory=dict)
    store_conn_id: str | None = None

    @model_serializer(mode="wrap")
    def _dump(self, handler: Callable[[object], dict[str, Any]]) -> dict[str, Any]:
        """``store_conn_id`` first."""
        data = handler(self)
        return {"store_conn_id": data.pop("store_conn_id"), **data}


class Compactor(Protocol):
    """A backend's compaction: ``method`` as reported, ``guard`` (may this table be compacted now?) and
    ``compact`` (do it, report per table)."""

    method: str

    def guard(self, table: str) -> GuardVerdict: ...

    def compact(self, tables: Sequence[str]) -> dict[str, TableCompaction]: ...


class VacuumCompactor:
    """The embedded store: one ``VACUUM`` of the database file when any table is due; no guard (one copy).
    ``kvs`` is the store's SQLite key-value service (``space_used_bytes``, ``vacuum``)."""

    method = VACUUM

    def __init__(self, kvs: SqliteKeyValueService) -> None:
        self._kvs = kvs

    def guard(self, table: str) -> GuardVerdict:
        return GuardVerdict(True, "embedded store: one copy, nothing to repair")

    def compact(self, tables: Sequence[str]) -> dict[str, TableCompaction]:
        before = {t: self._kvs.space_used_bytes(t) for t in tables}
        started = time.monotonic()
        file_before, file_after = self._kvs.vacuum()
        duration = round(time.monotonic() - started, 3)
        report = {
            table: TableCompaction(
                space_before_bytes=before[table],
                space_after_bytes=self._kvs.space_used_bytes(table),
                file_before_bytes=file_before,
                file_after_bytes=file_after,
                reclaimed_bytes=file_before - file_after,
                duration_seconds=duration,
                runner="sqlite VACUUM",
            )
            for table in tables
        }
        log.info("VACUUM: file %d -> %d bytes; tables %s", file_before, file_after, report)
        return report


def tombstones_since_compaction(store: Any, tables: Iterable[str]) -> dict[str, TableTombstones]:
    """``{table: TableTombstones}``: the tombstones each table got since its last compaction, from the
    store's records (two bounded reads per table, :meth:`SweepHistory.tombstones_since_compaction`)."""
    return {table: store.history.tombstones_since_compaction(table) for table in tables}


def check_tables(tables: Sequence[str] | None, known_tables: Sequence[str] | Mapping[str, object]) -> None:
    """Naming a table that does not exist is bad input."""
    unknown = sorted(set(tables or ()) - set(known_tables))
    if unknown:
        raise InvalidInputError(f"unknown table(s): {', '.join(unknown)}")


def due_tables(
    pending: Mapping[str, int],
    known_tables: Sequence[str] | Mapping[str, object],
    *,
    threshold: int,
    tables: Sequence[str] | None = None,
    force: bool = False,
) -> list[str]:
    """The tables to compact: among ``tables`` (default every counted table), the existing ones whose
    count reached ``threshold`` (at least 1), or all of them with ``force``. Naming an unknown table is
    bad input."""
    check_tables(tables, known_tables)
    candidates = list(tables) if tables else sorted(pending)
    return [t for t in candidates if t in known_tables and (force or int(pending.get(t, 0)) >= max(threshold, 1))]


def due_for_compaction(store: Any, *, threshold: int) -> dict[str, int]:
    """``{table: tombstones since its last compaction}`` of the tables a compaction would compact now
    (:func:`due_tables` on the store's counts; a ``capped`` count is due). What a sweep announces besides the
    tables it tombstoned itself, so that a due table never waits for the next sweep that happens to tombstone
    it: announcements lost while the compaction was paused, a retry that swept nothing after a lost first
    try that wrote the tombstones. Two bounded reads per table."""
    known = store.user_tables()
    counts = tombstones_since_compaction(store, sorted(known))
    due = set(due_tables({t: c.count for t, c in counts.items()}, known, threshold=int(threshold)))
    return {t: c.count for t, c in sorted(counts.items()) if t in due or c.capped}


def lock_name(table: str) -> str:
    """The lease a compaction of ``table`` holds (lock service)."""
    return f"compaction/{table}"


def compact_due_tables(
    store: Any,
    compactor: Compactor,
    *,
    threshold: int,
    tables: Sequence[str] | None = None,
    force: bool = False,
    store_conn_id: str | None = None,
    holder: str | None = None,
) -> CompactionResult:
    """Compact the due tables (:func:`due_tables` on the store's counts; a ``capped`` count is due) that no
    other compaction holds and the compactor's guard allows; see the module doc. ``force`` without
    ``tables``: every table with at least one tombstone since its last compaction."""
    from .sweep.lease_keeper import LeaseKeeper
    from .sweep.results import default_holder

    threshold = int(threshold)
    known = store.user_tables()
    check_tables(tables, known)
    counts = tombstones_since_compaction(store, list(tables) if tables else sorted(known))
    pending = {t: c.count for t, c in counts.items() if c.count or tables}
    due = due_tables(pending, known, threshold=threshold, tables=tables, force=force)
    due += [t for t, c in counts.items() if c.capped and t not in due]
    log.info("tombstones since last compaction: %s; threshold %d; due: %s", pending, threshold, due)
    skipped: dict[str, str] = {}
    compacted: dict[str, TableCompaction] = {}
    lease_seconds = store.config.lock_lease_seconds
    holder = holder or default_holder()
    with ExitStack() as leases:
        allowed: list[str] = []
        for table in due:
            lease = store.locks.acquire(lock_name(table), holder, lease_seconds)
            if lease is None:
                state = store.locks.describe(lock_name(table))
                skipped[table] = f"another compaction holds {lock_name(table)} ({getattr(state, 'holder', None)})"
                log.warning("%s: NOT compacted: %s", table, skipped[table])
                continue
            leases.callback(_release, store.locks, lease)
            leases.enter_context(LeaseKeeper(store.locks, lease, lease_seconds))
            again = store.history.tombstones_since_compaction(table)  # another compaction may just have ended
            pending[table] = again.count
            if not (force or again.capped or again.count >= max(threshold, 1)):
                log.info("%s: compacted meanwhile by another run (%d tombstones since): not due", table, again.count)
                continue
            verdict = compactor.guard(table)
            if verdict.allowed:
                log.info("%s: compaction allowed: %s", table, verdict.reason)
                allowed.append(table)
            else:
                log.warning("%s: NOT compacted: %s", table, verdict.reason)
                skipped[table] = verdict.reason
        if allowed:
            through_ts = store.timestamps.fresh_timestamp()  # before the compaction starts (module doc)
            compacted = compactor.compact(allowed)
            for table, report in compacted.items():
                store.history.record_compaction(table, through_ts, {"method": compactor.method, "holder": holder,
                                                                    "store_conn_id": store_conn_id, **to_json(report)})
                pending[table] = store.history.tombstones_since_compaction(table).count
    return CompactionResult(threshold=threshold, method=compactor.method, compacted=compacted, skipped=skipped,
                            pending=pending, store_conn_id=store_conn_id)


def _release(locks: Any, lease: Any) -> None:
    try:
        locks.release(lease)
    except Exception as exc:  # the lease expires on its own; never mask the compaction's outcome
        log.warning("could not release %s: %s", getattr(lease, "name", lease), exc)


__all__ = [
    "COMPACTION_METHODS",
    "VACUUM",
    "CompactionResult",
    "Compactor",
    "GuardVerdict",
    "TableCompaction",
    "VacuumCompactor",
    "check_method",
    "check_tables",
    "compact_due_tables",
    "due_for_compaction",
    "due_tables",
    "lock_name",
    "tombstones_since_compaction",
]
