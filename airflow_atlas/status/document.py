"""The status document (``schema_version`` 1): dataclasses, serialised once by
:func:`airflow_atlas.serialisation.to_json` (the CLI's ``--json`` and the dashboard's ``/api/status``);
``None`` stays ``None`` (JSON ``null``), ``schema_version`` comes first.

The fields are documented in docs/CLI.md ("Status document"); times are Unix seconds, durations seconds,
``*_ts`` logical timestamps.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import model_serializer

from ..settings_resolver import SettingValue

SCHEMA_VERSION = 1


@dataclass
class Warning:  # noqa: A001 - the document's word
    kind: str
    message: str


@dataclass
class PairWarning:
    shard: int
    strategy: str
    kind: str
    message: str


ForecastState = Literal["drained", "draining", "steady", "growing", "stalled", "not_swept_yet", "unknown"]
"""A backlog drain forecast's state (the JSON's string; :func:`~airflow_atlas.status.forecast.drain_forecast`)."""


@dataclass
class Forecast:
    basis: str
    window_seconds: float | None
    runs_in_window: int
    iterations_in_window: int
    ingest_entries: int
    ingest_capped: bool
    swept_entries: int
    ingest_rate_per_second: float | None = None
    sweep_rate_per_second: float | None = None
    sweep_throughput_per_second: float | None = None
    net_drain_rate_per_second: float | None = None
    backlog_entries: int = 0
    backlog_capped: bool = False
    time_to_drain_seconds: float | None = None
    state: ForecastState = "unknown"
    ingest_outpaces_sweep: bool = False
    idle_seconds: float | None = None
    warnings: list[Warning] = field(default_factory=list)
    unknown: str | None = None
    """What the forecast does not know, for humans (e.g. "no sweep run yet: no sweep rate measured, so no
    time to drain"); None when the state and time to drain are measured (``drain_forecast``)."""


@dataclass
class LastRun:
    """The newest run of the pair (a ``sweep_shard`` run record; on stores swept before run records
    existed, the newest iteration). ``outcome``: ok | blocked | quarantined | failed | skipped."""

    at: float | None
    age_seconds: float | None
    status: str | None
    outcome: str
    entries_read: int = 0
    cells_tombstoned: int = 0
    sentinels_written: int = 0
    aborted_writes_deleted: int = 0
    transactions_aborted: int = 0
    corrupt_entries: int = 0
    duration_seconds: float | None = None
    old_progress: int | None = None
    new_progress: int | None = None
    sweep_ts: int | None = None
    blocked_by: dict | None = None
    lock_holder: str | None = None
    iterations: int | None = None
    error: str | None = None
    lock_expires_at: float | None = None
    lock_holder_process_gone: bool | None = None
    pace_entries_per_second: float | None = None
    """The run's pace at its end and why (``ShardSweepResult``; None: unlimited, or a record without it)."""
    pace_reason: str | None = None


@dataclass
class Failing:
    """The pair's runs fail: ``runs`` consecutive failed runs up to the newest, since ``since``; ``error``
    is the newest failure's reason."""

    runs: int
    since: float | None
    error: str | None


@dataclass
class ShardRow:
    shard: int
    strategy: str
    sweep_ts: int
    progress: int
    lag_ts: int
    lag_seconds: float | None
    lag_seconds_is_lower_bound: bool
    backlog_entries: int
    backlog_capped: bool
    sweepable_entries: int
    sweepable_capped: bool
    pinned_entries: int
    pinned_capped: bool
    lock_holder: str | None
    lock_expires_in_seconds: float | None
    lock_holder_process_gone: bool | None
    last_run: LastRun | None
    failing: Failing | None
    tombstones_written: int
    recent: dict
    lag_series: list[dict]
    forecast: Forecast
    warnings: list[Warning] = field(default_factory=list)
    oldest_unswept_ts: int | None = None
    """Start timestamp of the oldest sweepable unswept entry; its age is ``lag_seconds`` (:mod:`.lag`)."""


@dataclass
class HeldBy:
    kind: str
    start_ts: int | None
    age_seconds: float | None
    holder: str | None
    expires_in_seconds: float | None


@dataclass
class OpenTransaction:
    start_ts: int
    holder: str | None
    age_seconds: float | None
    expires_in_seconds: float | None


@dataclass
class PinnedByShard:
    shard: int
    entries: int
    capped: bool


@dataclass
class Why:
    strategy: str
    sweep_ts: int
    fresh_ts: int
    immutable_ts: int | None
    unreadable_ts: int | None
    unreadable_window_seconds: float | None
    limited_by: str
    sweep_ts_age_seconds: float | None
    behind_fresh_ts: int
    held_by: HeldBy | None
    oldest_open_transaction: OpenTransaction | None
    pinned_entries: int
    pinned_capped: bool
    pinned_by_shard: list[PinnedByShard]
    message: str


@dataclass
class TableGcGrace:
    """A swept table's live ``gc_grace_seconds`` against the repair interval (Cassandra; on the embedded
    store ``gc_grace_seconds`` is None: one copy, nothing purged by grace period)."""

    table: str
    strategy: str
    gc_grace_seconds: int | None
    repair_interval_seconds: int
    below_repair_interval: bool
    allowed_below: bool  # allow_gc_grace_below_repair_interval


@dataclass
class TableCompactionState:
    """What ``atlas_compaction`` plans from, per user table (:mod:`.compaction`): the tombstones written
    into it since its last compaction (``capped``: at least that many; the table is then due), that
    compaction (``through_ts`` 0 and ``at`` None: never compacted) and the threshold that makes the table
    due (setting ``compaction_threshold_tombstones``; None, and ``due`` None, when the caller does not
    know it: the CLI without ``--conn-id``)."""

    table: str
    strategy: str
    tombstones_since_compaction: int
    capped: bool
    last_compaction_through_ts: int
    last_compaction_at: float | None
    last_compaction_age_seconds: float | None
    last_compaction_method: str | None
    threshold_tombstones: int | None
    due: bool | None


@dataclass
class TableWarning:
    table: str
    kind: str
    message: str


NON_SERIAL_FALLBACK = (
    "a read through Paxos failed, so this status was read without Paxos (plain reads; no timestamp drawn, "
    "nothing punched): fresh_ts is the highest timestamp issued as a plain read saw it, and progress, locks "
    "and the sweep timestamps may lag an operation in flight"
)
"""What the non-serial fallback of the status means (text and JSON say it)."""


@dataclass
class StatusReads:
    """How the status read the store: ``serial`` (linearizable reads and a fresh timestamp through Paxos, the
    normal way) or not (the fallback after a Paxos failure: ``fallback`` says what that means, ``reason``
    is the failure)."""

    serial: bool = True
    fallback: str | None = None
    reason: str | None = None



@dataclass
class StatusDocument:
    generated_at: float | None
    store: str
    number_of_shards: int
    strategies: list[str]
    tables: dict
    settings: dict
    timestamps: dict
    sweep_timestamps: dict
    why_not_advancing: dict  # strategy -> Why
    shards: list[ShardRow]
    totals: dict
    warnings: list[PairWarning]
    quarantined_cells: int
    gc_grace: list[TableGcGrace] = field(default_factory=list)
    table_warnings: list[TableWarning] = field(default_factory=list)
    compaction: list[TableCompactionState] = field(default_factory=list)
    """Per user table: tombstones since its last compaction, that compaction and the threshold (:mod:`.compaction`)."""
    effective_settings: list[SettingValue] = field(default_factory=list)
    """Every effective setting and the layer it came from, as the caller resolved them (the CLI: its
    command line and store; with ``--conn-id`` and on the dashboard: the ``atlas_settings`` Variable too)."""
    settings_warnings: list[str] = field(default_factory=list)
    """Where a setting's source is not what one may think (e.g. an environment variable shadowing the Variable)."""
    datacenter_warnings: list[str] = field(default_factory=list)
    """Datacenters with replicas down and what that stops (:mod:`.replicas`): sweep deletes at ALL pause."""
    reads: StatusReads = field(default_factory=StatusReads)
    """Serial reads, or the stated non-serial fallback after a Paxos failure."""
    schema_version: int = SCHEMA_VERSION

    def reads_fell_back(self, reason: str) -> None:
        """This document was read without Paxos after ``reason`` (a Paxos failure)."""
        self.reads = StatusReads(serial=False, fallback=NON_SERIAL_FALLBACK, reason=reason)

    @model_serializer(mode="wrap")
    def _dump(self, handler: Callable[[object], dict[str, Any]]) -> dict[str, Any]:
        """``schema_version`` first."""
        data = handler(self)
        return {"schema_version": data.pop("schema_version"), **data}
