"""SweepHistory: a bounded log of sweep iterations, sweep runs and quarantined queue cells, for the
dashboard, the CLI ``status`` command and drain forecasts. Stored in a WALLCLOCK table with a TTL; newest
first.

Rows (one partition each):

* ``run/<STRATEGY>/<shard>`` - one record per iteration that changed or inspected the pair (a
  :class:`~airflow_atlas.sweep.results.SweepResult`): what the drain forecast and the lag series read;
* ``outcome/<STRATEGY>/<shard>`` - one record per run of :meth:`TargetedSweeper.sweep_shard` (a
  :class:`~airflow_atlas.sweep.results.ShardSweepResult`): completed, partial (``iteration_limit``),
  ``skipped_locked`` (with the holder and its lease expiry) and ``failed`` (with ``error``, the reason).
  This is what "last run" means in ``status`` and the dashboard, so a pair that fails every run shows
  the failure and its reason, not "never run";
* ``quarantine`` - corrupt queue cells the sweeper skipped;
* ``tombstones/<table>`` - the tombstones written into a user table, one cell per write step of a sweep
  (a targeted iteration, a full-sweep batch, a scrub), keyed by a *fresh timestamp* drawn after that step's
  deletes returned (:meth:`SweepHistory.record_tombstones`); no TTL: the compaction that covers a cell
  deletes it;
* ``compacted/<table>`` - the table's compactions, newest first, each with ``through_ts``: a fresh timestamp
  drawn before the compaction started (:meth:`SweepHistory.record_compaction`).

Tombstones since the last compaction (:meth:`SweepHistory.tombstones_since_compaction`) are the
``tombstones/<table>`` cells above the newest ``through_ts``. The timestamp service orders its draws in
real time whatever machine drew them, so a cell below ``through_ts`` belongs to deletes that had returned
before that compaction began (compacted), and a cell above it may belong to deletes the compaction missed
(counted again: over-count, never under-count). The count is derived, never incremented: two compactions
at once, a lost task result or a paused Airflow DAG cannot double or lose it. A read takes at most
:data:`TOMBSTONE_READ_CAP` cells (``capped``: the count is then a lower bound, and the table is due).
"""
from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from ..encoding import LONG_MAX, fixed_long, from_fixed_long
from ..kvs.api import Cell, KeyValueService
from ..kvs.tables import TableMetadata, WriteMode

TABLE = "_sweep_history"
TTL_SECONDS = 7 * 24 * 3600
_MAX_MS = (1 << 62)
_QUARANTINE_ROW = b"quarantine"
TOMBSTONE_READ_CAP = 10_000
"""Most ``tombstones/<table>`` cells one count reads (one cell per sweep step that tombstoned the table):
a table with more since its last compaction is reported ``capped`` (at least that count) and is due."""
COMPACTIONS_KEPT = 10
"""``compacted/<table>`` cells kept per table (older ones are deleted when a compaction is recorded)."""


def _tombstones_row(table: str) -> bytes:
    return f"tombstones/{table}".encode()


def _compacted_row(table: str) -> bytes:
    return f"compacted/{table}".encode()


@dataclass(frozen=True)
class TableTombstones:
    """Tombstones written into ``table`` since its last compaction (``since_ts``: that compaction's
    ``through_ts``, 0 if never compacted); ``capped``: more cells than :data:`TOMBSTONE_READ_CAP` were there
    (``count`` is a lower bound); ``last_compaction``: its record, if any."""

    table: str
    count: int
    since_ts: int
    records: int
    capped: bool = False
    last_compaction: dict | None = None


def _row(shard: int, strategy: str) -> bytes:
    return f"run/{strategy.upper()}/{int(shard)}".encode()


def _outcome_row(shard: int, strategy: str) -> bytes:
    return f"outcome/{strategy.upper()}/{int(shard)}".encode()


def _newest_first_column() -> bytes:
    return fixed_long(_MAX_MS - int(time.time() * 1000)) + uuid.uuid4().bytes[:8]


class SweepHistory:
    def __init__(self, kvs: KeyValueService, ttl_seconds: int = TTL_SECONDS):
        self._kvs = kvs
        self._ttl = ttl_seconds

    def ensure_tables(self) -> None:
        self._kvs.create_table(TABLE, TableMetadata(write_mode=WriteMode.WALLCLOCK))

    def record(self, result: dict) -> None:
        """Record one iteration (a SweepResult's JSON); adds the wall-clock time ``at``."""
        entry = dict(result)
        entry.setdefault("at", time.time())
        cell = Cell(_row(entry["shard"], entry["strategy"]), _newest_first_column())
        self._kvs.put_wallclock(TABLE, {cell: json.dumps(entry, sort_keys=True).encode()}, ttl_seconds=self._ttl)

    def record_run(self, result: dict) -> None:
        """Record one run of a pair (a ShardSweepResult's JSON, any status); adds ``at``."""
        entry = dict(result)
        entry.setdefault("at", time.time())
        cell = Cell(_outcome_row(entry["shard"], entry["strategy"]), _newest_first_column())
        self._kvs.put_wallclock(TABLE, {cell: json.dumps(entry, sort_keys=True, default=str).encode()}, ttl_seconds=self._ttl)

    def runs(self, shard: int, strategy: str, limit: int = 10) -> list[dict]:
        """The newest ``limit`` run records of one shard and strategy, newest first."""
        rows = self._kvs.get_wallclock_row(TABLE, _outcome_row(shard, strategy), limit=limit)
        return [json.loads(value) for _, value in rows]

    def recent(self, shard: int, strategy: str, limit: int = 100) -> list[dict]:
        """The newest ``limit`` records of one shard and strategy, newest first."""
        rows = self._kvs.get_wallclock_row(TABLE, _row(shard, strategy), limit=limit)
        return [json.loads(value) for _, value in rows]

    def quarantine(self, shard: int, strategy: str, records: list[dict]) -> None:
        now = time.time()
        values = {}
        for record in records:
            entry = {"shard": shard, "strategy": strategy, "at": now, **record}
            values[Cell(_QUARANTINE_ROW, _newest_first_column())] = json.dumps(entry, sort_keys=True, default=str).encode()
        if values:
            self._kvs.put_wallclock(TABLE, values, ttl_seconds=self._ttl)

    def quarantined(self, limit: int = 100) -> list[dict]:
        return [json.loads(v) for _, v in self._kvs.get_wallclock_row(TABLE, _QUARANTINE_ROW, limit=limit)]

    # ----- tombstones per table and compactions (see the module doc) ---------------------------------
    def record_tombstones(self, tables: Mapping[str, int], ts: int, source: Mapping[str, object]) -> None:
        """Record the tombstones just written per table (``{table: n}``, zeros ignored) under ``ts``, a
        fresh timestamp drawn AFTER those deletes returned. One write; raises on a store error (the caller
        must then not persist progress past those deletes: redoing them records them again)."""
        column = fixed_long(int(ts))
        now = time.time()
        values = {
            Cell(_tombstones_row(table), column): json.dumps({"n": int(n), "at": now, **source}, sort_keys=True, default=str).encode()
            for table, n in tables.items()
            if int(n) > 0
        }
        if values:
            self._kvs.put_wallclock(TABLE, values)

    def compactions(self, table: str, limit: int = 1) -> list[dict]:
        """The newest ``limit`` compaction records of ``table``, newest first."""
        return [json.loads(v) for _, v in self._kvs.get_wallclock_row(TABLE, _compacted_row(table), limit=limit)]

    def tombstones_since_compaction(self, table: str, cap: int | None = None) -> TableTombstones:
        """Two bounded reads: the newest compaction record, then at most ``cap`` (default
        :data:`TOMBSTONE_READ_CAP`) tombstone cells above its ``through_ts``."""
        cap = TOMBSTONE_READ_CAP if cap is None else cap
        newest = self.compactions(table, limit=1)
        since = int(newest[0]["through_ts"]) if newest else 0
        rows = self._kvs.get_wallclock_row(TABLE, _tombstones_row(table), start_col=fixed_long(since + 1), limit=cap + 1)
        capped = len(rows) > cap
        count = sum(int(json.loads(value).get("n", 0)) for _, value in rows[:cap])
        return TableTombstones(table=table, count=count, since_ts=since, records=min(len(rows), cap), capped=capped,
                               last_compaction=newest[0] if newest else None)

    def record_compaction(self, table: str, through_ts: int, report: Mapping[str, object]) -> None:
        """Record that ``table`` was compacted by a compaction that began after ``through_ts`` was drawn:
        its tombstone cells below ``through_ts`` are then forgotten (at most :data:`TOMBSTONE_READ_CAP` per
        call; any left below are never read again) and old compaction records dropped. Recording the same
        or an older compaction again changes nothing (the newest ``through_ts`` wins)."""
        column = fixed_long(LONG_MAX - int(through_ts))
        entry = {"through_ts": int(through_ts), "at": time.time(), **report}
        self._kvs.put_wallclock(TABLE, {Cell(_compacted_row(table), column): json.dumps(entry, sort_keys=True, default=str).encode()})
        old = self._kvs.get_wallclock_row(TABLE, _tombstones_row(table), limit=TOMBSTONE_READ_CAP)
        covered = [Cell(_tombstones_row(table), col) for col, _ in old if from_fixed_long(col) < int(through_ts)]
        if covered:
            self._kvs.delete_wallclock(TABLE, covered)
        kept = self._kvs.get_wallclock_row(TABLE, _compacted_row(table), limit=COMPACTIONS_KEPT + 100)
        if len(kept) > COMPACTIONS_KEPT:
            self._kvs.delete_wallclock(TABLE, [Cell(_compacted_row(table), col) for col, _ in kept[COMPACTIONS_KEPT:]])
