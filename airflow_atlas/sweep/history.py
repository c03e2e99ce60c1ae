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
* ``quarantine`` - corrupt queue cells the sweeper skipped.
"""
from __future__ import annotations

import json
import time
import uuid

from ..encoding import fixed_long
from ..kvs.api import Cell, KeyValueService, TableMetadata, WriteMode

TABLE = "_sweep_history"
TTL_SECONDS = 7 * 24 * 3600
_MAX_MS = (1 << 62)
_QUARANTINE_ROW = b"quarantine"


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
        """Record one iteration (a SweepResult.to_json() dict); adds the wall-clock time ``at``."""
        entry = dict(result)
        entry.setdefault("at", time.time())
        cell = Cell(_row(entry["shard"], entry["strategy"]), _newest_first_column())
        self._kvs.put_wallclock(TABLE, {cell: json.dumps(entry, sort_keys=True).encode()}, ttl_seconds=self._ttl)

    def record_run(self, result: dict) -> None:
        """Record one run of a pair (a ShardSweepResult.to_json() dict, any status); adds ``at``."""
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
