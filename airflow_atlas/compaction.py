"""The compaction policy: which tables to compact after sweeping, and why not the others.

Sweep only writes tombstones; the space comes back when a table is compacted (Cassandra) or the file is
vacuumed (embedded store). Compacting after every sweep would waste I/O, so a table is compacted when the
tombstones written into it since its last compaction reach a threshold. The caller keeps those counts (the
Airflow glue keeps them in a Variable) and hands them in; this module decides and reports:

* :func:`add_tombstones` - the counts after a sweep (tables that no longer exist are left out);
* :func:`compact_due_tables` - THE entry point: plan (thresholds, ``force``, the tables asked for), ask the
  backend's guard for each due table (on Cassandra the repair guard: compaction must not purge a tombstone
  that may not have reached every replica), compact the allowed tables through a :class:`Compactor` and
  return a :class:`CompactionResult`; a table the guard refuses keeps its count and is reported under
  ``skipped`` with the reason, and the next run tries again.

A :class:`Compactor` is the backend's part: :class:`VacuumCompactor` for the embedded store (no guard: one
file, one copy) here; the Cassandra one (``nodetool`` and the repair history) lives with the nodetool hook
(:mod:`airflow_atlas.airflow.hooks.compaction`).
"""
from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Protocol

from .errors import InvalidInputError

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
    sstables_before: int | None = None
    sstables_after: int | None = None
    file_before_bytes: int | None = None
    file_after_bytes: int | None = None
    nodes: dict[str, dict[str, int | None]] | None = None

    def to_json(self) -> dict:
        """The backend's fields only (a Cassandra report has no ``file_*``, a VACUUM report no sstables)."""
        data = asdict(self)
        for key in ("sstables_before", "sstables_after", "file_before_bytes", "file_after_bytes", "nodes"):
            if data[key] is None:
                del data[key]
        return data


@dataclass(frozen=True)
class CompactionResult:
    """One compaction run: the tables compacted (with their reports), the due tables the guard refused
    (``{table: reason}``) and the counts still pending afterwards (compacted tables at 0)."""

    threshold: int
    method: str
    compacted: dict[str, TableCompaction] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    pending: dict[str, int] = field(default_factory=dict)
    store_conn_id: str | None = None

    def to_json(self) -> dict:
        return {
            "store_conn_id": self.store_conn_id,
            "threshold": self.threshold,
            "method": self.method,
            "compacted": {table: report.to_json() for table, report in self.compacted.items()},
            "skipped": dict(self.skipped),
            "pending": dict(self.pending),
        }


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

    def __init__(self, kvs):
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


def add_tombstones(
    pending: Mapping[str, int], tombstones: Mapping[str, int], known_tables: Sequence[str] | Mapping[str, object]
) -> tuple[dict[str, int], dict[str, int]]:
    """``(counts, ignored)``: ``pending`` plus the newly written ``tombstones`` per table, and the new
    tombstones of tables that no longer exist (not counted)."""
    counts = {table: int(n) for table, n in pending.items()}
    ignored: dict[str, int] = {}
    for table, n in tombstones.items():
        if table not in known_tables:
            ignored[table] = int(n)
            continue
        counts[table] = counts.get(table, 0) + int(n)
    return counts, ignored


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


def compact_due_tables(
    compactor: Compactor,
    pending: Mapping[str, int],
    known_tables: Sequence[str] | Mapping[str, object],
    *,
    threshold: int,
    tables: Sequence[str] | None = None,
    force: bool = False,
    store_conn_id: str | None = None,
) -> CompactionResult:
    """Compact the due tables (:func:`due_tables`) that the compactor's guard allows; see the module doc.
    ``pending`` is not changed: the result's ``pending`` is the counts afterwards."""
    threshold = int(threshold)
    due = due_tables(pending, known_tables, threshold=threshold, tables=tables, force=force)
    log.info("tombstones since last compaction: %s; threshold %d; due: %s", dict(pending), threshold, due)
    allowed: list[str] = []
    skipped: dict[str, str] = {}
    for table in due:
        verdict = compactor.guard(table)
        if verdict.allowed:
            log.info("%s: compaction allowed: %s", table, verdict.reason)
            allowed.append(table)
        else:
            log.warning("%s: NOT compacted: %s", table, verdict.reason)
            skipped[table] = verdict.reason
    compacted = compactor.compact(allowed) if allowed else {}
    after = {table: int(n) for table, n in pending.items()}
    after.update({table: 0 for table in compacted})
    return CompactionResult(threshold=threshold, method=compactor.method, compacted=compacted, skipped=skipped,
                            pending=after, store_conn_id=store_conn_id)


__all__ = [
    "COMPACTION_METHODS",
    "VACUUM",
    "CompactionResult",
    "Compactor",
    "GuardVerdict",
    "TableCompaction",
    "VacuumCompactor",
    "add_tombstones",
    "check_method",
    "check_tables",
    "compact_due_tables",
    "due_tables",
]
