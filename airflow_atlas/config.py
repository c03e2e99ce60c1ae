"""The engine's settings (:class:`StoreConfig`): one declaration per setting, validated once.

Each field is declared with :func:`~airflow_atlas.settings_model.setting` (default, accepted values, meaning,
where it is read); the table in ``docs/SETTINGS.md`` is generated from these declarations. The engine
never imports Airflow: the Airflow layer (:mod:`airflow_atlas.airflow.settings`) adds its own keys on top
of this class and fills it from the ``atlas_settings`` Variable.

A ``StoreConfig`` is checked once, when it is built: every key by its declaration, then the cross-field
rules (``SETTING_RULES``), so ``StoreConfig(consistency_sweep_delete="QUORUM")`` fails at once, naming
``allow_weak_sweep_consistency``. Values from several layers (``atlas_settings`` Variable, a task's
``store_config``, connection extras, store URL, CLI ``--set``, Spark conf / ``--setting``) are combined by
ONE function, :func:`airflow_atlas.settings_resolver.resolve` (precedence in docs/SETTINGS.md).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, ClassVar

from .errors import InvalidInputError
from .kvs import consistency as _replica
from .locks import MAX_LOCK_WAIT_SECONDS
from .settings_model import (
    AbsolutePath,
    Bool,
    Choice,
    Float,
    Int,
    Nullable,
    Requires,
    TextList,
    check_value,
    known_names,
    parse_value,
    setting,
    validate_fields,
)
from .sweep.pacing.application import DEFAULT_SWEEP_LATENCY_TARGET, MAX_SWEEP_LATENCY_TARGET
from .sweep.pacing.intensity import MAX_SWEEP_ENTRIES_PER_SECOND
from .sweep.queue.constants import DEFAULT_BATCH_LIMIT, MAX_BATCH_LIMIT, MAX_SHARDS
from .timestamps.addresses import DEFAULT_RETRY_SECONDS, parse_address

DAY = 86_400
"""Seconds per day: the upper bound of the lease and wait settings."""
YEAR = 365 * DAY
"""Upper bound of the longer windows (keeps every derived timestamp far inside a signed 64-bit long)."""
MAX_ITERATIONS_PER_SHARD = 1_000_000
"""Largest ``max_iterations_per_shard`` (and per-run iteration count a form or argument may ask for)."""
DEFAULT_SWEEP_MAX_ENTRIES_PER_SECOND = 250
"""Default of ``sweep_max_entries_per_second``: the safe pace, 250 entries/s per pair - the application pace's
rate while the application runs or is unseen (with ``sweep_latency_target`` 0, a fixed rate): of the fixed rates
measured side by side, the one that keeps a busy application's p99 at that of no sweep (docs/INTENSITY.md)."""


@dataclass(frozen=True)
class Level(Choice):
    """A consistency level name for one operation (case-insensitive, stored upper case)."""

    upper: bool = True

    def check(self, value: Any) -> Any:
        try:
            return super().check(value)
        except ValueError as exc:
            name = value.strip().upper() if isinstance(value, str) else None
            if name == "ANY":
                raise ValueError(f"{exc} (ANY acknowledges a write kept only as a hint: not durable)") from None
            if name == "EACH_QUORUM" and self.options == _replica.LWT_COMMIT_LEVELS:
                raise ValueError(
                    f"{exc} (Cassandra rejects EACH_QUORUM for lightweight transactions with SimpleStrategy)"
                ) from None
            raise


@dataclass(frozen=True)
class Addresses(TextList):
    """Timestamp server addresses, ``host[:port]`` each (a JSON list, or comma-separated text)."""

    def check(self, value: Any) -> tuple:
        try:
            return tuple(parse_address(v) for v in super().check(value))
        except ValueError as exc:
            raise ValueError(f"must be a list of host[:port] addresses: {exc}") from None

    def describe(self) -> str:
        return "list of host[:port]"


@dataclass(frozen=True)
class OffOrAbove(Float):
    """0 (off) or a number in ``(lo, hi]``."""

    def check(self, value: Any) -> float:
        refused = ValueError(f"must be 0 (off) or > {self.lo:g} and <= {self.hi:g}, got {value!r}")
        try:
            number = Float(0, self.hi).check(value)
        except ValueError:
            raise refused from None
        if number != 0 and number <= self.lo:
            raise refused
        return number

    def describe(self) -> str:
        return f"0 or ({self.lo:g}, {self.hi:g}]"


_OP = _replica.Operation

_CONSISTENCY_READ = "kvs/cassandra (every statement of the operation); the store URL / connection extras override"

_CONSISTENCY_SETTINGS: dict[str, Any] = {
    _replica.setting_name(op): setting(
        _replica.DEFAULT_LEVELS[op], Level(_replica.ACCEPTED_LEVELS[op]), _replica.SETTING_MEANINGS[op],
        read=_CONSISTENCY_READ,
    )
    for op in _OP
}
"""The settings ``consistency_<operation>``, one per :class:`~airflow_atlas.kvs.consistency.Operation`
(declared into :class:`StoreConfig` where its replica-safety settings are)."""


@dataclass(frozen=True)
class StoreConfig:
    # ----- transactions ---------------------------------------------------------------------------------
    transactions_schema_version: int | None = setting(
        None, Nullable(Int(1, 2)),
        "transactions table version: unset = the store's own, recorded at `init` (see "
        "transactions/schema.py); a value is only an assertion, and a process whose value disagrees with "
        "the store's is refused; at `init` of a new store it chooses the version (2 when unset)",
        read="store.py (transaction service)",
    )
    transaction_lease_seconds: float = setting(
        60.0, Float(0, DAY, lo_open=True),
        "lease of a read-write transaction's registration (holds the immutable timestamp back); a "
        "transaction whose registration expired aborts at commit",
        read="store.py -> transactions/manager.py (TransactionConfig.lease_seconds)",
    )
    punch_interval_seconds: float = setting(
        60.0, Float(0, DAY),
        "a transaction manager punches the punch table (wall clock -> timestamp) at most this often (0: on "
        "every begin)",
        read="store.py -> transactions/manager.py (TransactionConfig.punch_interval_seconds)",
    )
    running_writer_wait_seconds: float = setting(
        5.0, Float(0, DAY),
        "how long a reader waits for a still-running writer before failing with a retriable error",
        read="store.py -> transactions/manager.py (TransactionConfig.running_writer_wait_seconds)",
    )
    app_latency_publish: bool = setting(
        True, Bool(),
        "a transaction manager records the application's latency (transaction start to commit or abort; "
        "reads) and, from its first transaction on, publishes a summary into the _app_latency table every "
        "app_latency_interval_seconds, also when it ran nothing: the sweep runs free only while clients publish "
        "and run nothing (false: this client is unseen; a failed publication never fails a transaction)",
        read="store.py -> transactions/manager.py (TransactionConfig.latency; transactions/latency_publisher.py)",
    )
    app_latency_interval_seconds: float = setting(
        1.0, Float(0.1, 3600),
        "how often a client publishes its application latency summary (one store write per interval, off "
        "the commit path)",
        read="store.py -> transactions/latency_publisher.py",
    )
    app_latency_ttl_seconds: int = setting(
        600, Int(10, 7 * DAY),
        "TTL of the published application latency summaries (readers see at most this far back)",
        read="store.py -> transactions/latency_publisher.py",
    )
    # ----- timestamps ------------------------------------------------------------------------------------
    timestamp_servers: tuple = setting(
        (), Addresses(),
        "the timestamp server instances of a Cassandra store (docs/RUNBOOK.md, \"The timestamp server\"): `init` "
        "of a store adopts it (its timestamps then come only from a server); a client tries these besides the "
        "leader the store's record names. Empty: `$ATLAS_TIMESTAMP_SERVERS` when set; else a store already "
        "adopted is served by the leader it records and a store not adopted draws from its own cell. The "
        "embedded store ignores it",
        read="store.py (timestamps, initialize) -> timestamps/source.py",
    )
    timestamp_retry_seconds: float = setting(
        DEFAULT_RETRY_SECONDS, Float(1, 600),
        "how long a draw of a served store keeps trying the servers (across a takeover) before it fails with "
        "an error naming them",
        read="store.py -> timestamps/client.py",
    )
    timestamp_tls_ca: str | None = setting(
        None, Nullable(AbsolutePath()),
        "the CA bundle (PEM file, absolute path) that verifies the timestamp servers' certificates: set, every "
        "client talks TLS to them (`timestamps serve --cert-file --key-file`) and a server whose certificate "
        "that CA did not sign, or that serves plaintext, fails the draw naming it - never a plaintext fallback. "
        "Null: `$ATLAS_TIMESTAMP_TLS_CA` when set; else plaintext gRPC (a private network only). Spark jobs "
        "ship the file's content to their executors. The embedded store ignores it",
        read="store.py (timestamps) -> timestamps/tls.py, timestamps/client.py; spark/driver.py",
    )
    timestamp_tls_cert: str | None = setting(
        None, Nullable(AbsolutePath()),
        "the client's own certificate (chain; PEM file, absolute path) that it presents to the timestamp servers "
        "(mutual TLS: servers started with `--client-ca-file` refuse a client without one their client CA "
        "signed). With timestamp_tls_key, both or neither, and only with a CA (timestamp_tls_ca or "
        "`$ATLAS_TIMESTAMP_TLS_CA`). Null: `$ATLAS_TIMESTAMP_TLS_CERT` when set; else no client certificate. "
        "Spark jobs ship the file's content to their executors. The embedded store ignores it",
        read="store.py (timestamps) -> timestamps/tls.py (ClientTls), timestamps/client.py; spark/driver.py",
    )
    timestamp_tls_key: str | None = setting(
        None, Nullable(AbsolutePath()),
        "the private key of timestamp_tls_cert (PEM file, absolute path; not readable by group or others: mode "
        "0600, else refused naming it). Null: `$ATLAS_TIMESTAMP_TLS_KEY` when set. Spark jobs ship its content to "
        "their executors, which write their copy mode 0600. The embedded store ignores it",
        read="store.py (timestamps) -> timestamps/tls.py (ClientTls), timestamps/client.py; spark/driver.py",
    )
    # ----- sweep ----------------------------------------------------------------------------------------
    unreadable_window_seconds: float = setting(
        3600.0, Float(0, YEAR),
        "read-only readers are protected for this long: CONSERVATIVE sweep stays below the unreadable "
        "timestamp (punch table, now minus this window)",
        read="store.py -> sweep/sweep_timestamp.py",
    )
    batch_limit: int = setting(
        DEFAULT_BATCH_LIMIT, Int(1, MAX_BATCH_LIMIT),
        "sweep-queue entries read per iteration (a batch always finishes its start timestamp, so it can be "
        "larger)",
        read="sweep/targeted.py; Airflow sweep operators and Spark jobs",
    )
    lock_lease_seconds: float = setting(
        120.0, Float(1, DAY),
        "lease of a (shard, strategy) lock; refreshed every third of it while a sweep runs, so a dead "
        "sweeper's lock is free again at most this long after it died (at least 1 s: a shorter lease "
        "expires between refreshes)",
        read="sweep/targeted.py (sweep_shard); Airflow operators/sweep.py (on_kill)",
    )
    lock_wait_seconds: float = setting(
        0.0, Float(0, MAX_LOCK_WAIT_SECONDS),
        "how long a run of a (shard, strategy) pair waits for its lock when another holder has it, before the "
        "pair is skipped (`skipped_locked`); 0: one try",
        read="sweep/targeted.py (sweep_shard: in the task, on Spark executors, the CLI)",
    )
    max_iterations_per_shard: int = setting(
        100, Int(1, MAX_ITERATIONS_PER_SHARD),
        "iterations (batches) per (shard, strategy) pair per run",
        read="sweep/targeted.py (sweep_shard, called by the CLI and the operators)",
    )
    sweep_max_entries_per_second: int = setting(
        DEFAULT_SWEEP_MAX_ENTRIES_PER_SECOND, Int(0, MAX_SWEEP_ENTRIES_PER_SECOND),
        "the safe pace: sweep-queue entries one run of one (shard, strategy) pair takes per second while the "
        "application runs or is unseen (the application pace, sweep_latency_target > 0; raised from here while "
        "the application's p99 allows), or always (sweep_latency_target 0: a fixed rate). 0: unlimited, never "
        "paced. Per task, so the total is this times the sweep tasks running at once (cap those with the "
        "sweep_pool / max_parallel_groups settings; see docs/INTENSITY.md)",
        read="sweep/targeted.py (sweep_shard -> sweep/pacing/intensity.py), so the CLI, operators and Spark executors",
    )
    sweep_latency_target: float = setting(
        DEFAULT_SWEEP_LATENCY_TARGET, OffOrAbove(1, MAX_SWEEP_LATENCY_TARGET),
        "the application pace: while the application's clients publish that they are alive and run nothing "
        "the sweep runs unthrottled; while they run transactions it sweeps at sweep_max_entries_per_second, "
        "raised while their p99 stays within this ratio of its baseline at that pace and halved when over; "
        "with no client publishing, at sweep_max_entries_per_second. 0: off, sweep_max_entries_per_second is "
        "a fixed rate. See docs/INTENSITY.md",
        read="sweep/targeted.py (sweep_shard -> sweep/pacing/run_pace.py), so the CLI, operators and Spark executors",
    )
    initial_shards: int = setting(
        1, Int(1, MAX_SHARDS),
        "shard count a new store gets at `init` when none is given (shards only ever grow)",
        read="store.py (initialize)",
    )

    # ----- rollback guard (sweep/commits.py) ------------------------------------------------------------
    rollback_guard_min_transactions: int = setting(
        20, Int(1, 10_000_000),
        "a sweep batch whose writers without a commit entry are at least this many and more than "
        "rollback_guard_max_fraction of its transactions is refused, not rolled back",
        read="sweep/commits.py (resolve_commits)",
    )
    rollback_guard_max_fraction: float = setting(
        0.9, Float(0, 1),
        "fraction of a batch's transactions above which missing commit entries are refused (see "
        "rollback_guard_min_transactions)",
        read="sweep/commits.py (resolve_commits)",
    )


    # ----- replica safety (kvs/consistency.py: defaults and reasons) ----------------------------------------
    # The store URL query and the Airflow connection's extras may set the same keys; they override these
    # for their store (they describe that one store).
    # One setting per Operation, in its order: ``consistency_<operation>`` with the operation's default, its
    # accepted levels and its meaning from kvs/consistency.py (the one list; generated, not restated here).
    vars().update(_CONSISTENCY_SETTINGS)
    __annotations__.update(dict.fromkeys(_CONSISTENCY_SETTINGS, "str"))
    allow_weak_sweep_consistency: bool = setting(
        False, Bool(),
        "allow consistency_sweep_delete / consistency_sentinel / consistency_abort_delete below ALL: only safe "
        "if a full repair of the keyspace always completes within gc_grace_seconds of a sweep",
        read="config.py (StoreConfig.SETTING_RULES: checked where the settings are built)",
    )
    repair_interval_seconds: int = setting(
        _replica.DEFAULT_REPAIR_INTERVAL_SECONDS, Int(1, _replica.MAX_REPAIR_INTERVAL_SECONDS),
        "how often a full repair of the keyspace completes; swept tables (CONSERVATIVE, THOROUGH) must keep "
        "gc_grace_seconds at least this long",
        read="kvs/cassandra/schema.py (create_table, set_sweep_strategy via GcGraceGuard)",
    )
    allow_gc_grace_below_repair_interval: bool = setting(
        False, Bool(),
        "allow swept tables with gc_grace_seconds below repair_interval_seconds (risk: a purged tombstone a "
        "replica missed lets deleted data come back)",
        read="kvs/consistency.py (GcGraceGuard)",
    )

    SETTING_RULES: ClassVar[tuple[Requires, ...]] = (
        Requires(
            names=tuple(_replica.setting_name(op) for op in _replica.GUARDED_OPERATIONS),
            flag="allow_weak_sweep_consistency",
            safe=lambda level: level == "ALL",
            describe_safe="ALL",
            why=_replica.WEAK_SWEEP_REASON,
        ),
    )
    """Cross-field rules, checked by ``__post_init__`` with the values (:func:`validate_fields`)."""

    def __post_init__(self) -> None:
        validate_fields(self)

    # ----- the engine's views of the validated settings -------------------------------------------------
    def consistency_policy(self) -> _replica.ConsistencyPolicy:
        """The per-operation consistency levels, for the key-value service."""
        return _replica.ConsistencyPolicy(**{op.value: getattr(self, _replica.setting_name(op)) for op in _OP})

    def gc_grace_guard(self) -> _replica.GcGraceGuard:
        """The gc_grace guard of swept tables, for the key-value service."""
        return _replica.GcGraceGuard(self.repair_interval_seconds, self.allow_gc_grace_below_repair_interval)

    def to_json(self) -> dict:
        """Every setting as a JSON value (the one serialisation, e.g. to Spark conf)."""
        return asdict(self)


def check_setting(name: str, value: Any, source: str | None = None, *, text: bool = False) -> Any:
    """One engine setting's value validated by its declaration (``text``: parsed from text first), for a
    per-call argument that overrides a setting outside the resolver: the operators' ``batch_limit`` /
    ``max_iterations``, the manual sweep form's intensity. InvalidInputError names the setting. (Values that
    are settings go through :func:`airflow_atlas.settings_resolver.resolve`.)"""
    fields_by_name = known_names(StoreConfig)
    if name not in fields_by_name:
        raise InvalidInputError(f"unknown setting {name!r}")
    f = fields_by_name[name]
    return parse_value(f, value, source) if text else check_value(f, value, source)
