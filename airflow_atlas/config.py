"""Engine settings with their defaults, in one place.

The Airflow layer fills these from Airflow Variables (see ``airflow_atlas.airflow.settings``); the CLI
and Spark jobs from arguments and environment variables. Every value is validated here so that bad
input fails early with a message naming the setting.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace

from .errors import InvalidInputError
from .kvs import consistency as _replica

MAX_BATCH_LIMIT = 100_000


@dataclass(frozen=True)
class StoreConfig:
    # Transactions
    transactions_schema_version: int = 2
    transaction_lease_seconds: float = 60.0
    punch_interval_seconds: float = 60.0
    running_writer_wait_seconds: float = 5.0
    # Sweep
    unreadable_window_seconds: float = 3600.0
    batch_limit: int = 10_000
    lock_lease_seconds: float = 120.0
    max_iterations_per_shard: int = 100
    initial_shards: int = 1
    # Replica safety (airflow_atlas.kvs.consistency: defaults and reasons there). The store URL query and
    # the Airflow connection's extras may set the same keys; they override these for their store.
    consistency_data_read: str = _replica.default_setting("consistency_data_read")
    consistency_data_write: str = _replica.default_setting("consistency_data_write")
    consistency_queue_write: str = _replica.default_setting("consistency_queue_write")
    consistency_sweep_delete: str = _replica.default_setting("consistency_sweep_delete")
    consistency_sentinel: str = _replica.default_setting("consistency_sentinel")
    consistency_abort_delete: str = _replica.default_setting("consistency_abort_delete")
    consistency_queue_cleanup: str = _replica.default_setting("consistency_queue_cleanup")
    consistency_lwt_commit: str = _replica.default_setting("consistency_lwt_commit")
    consistency_serial: str = _replica.default_setting("consistency_serial")
    allow_weak_sweep_consistency: bool = False
    repair_interval_seconds: int = _replica.DEFAULT_REPAIR_INTERVAL_SECONDS
    allow_gc_grace_below_repair_interval: bool = False

    def __post_init__(self) -> None:
        if self.transactions_schema_version not in (1, 2):
            raise InvalidInputError("transactions_schema_version must be 1 or 2")
        if not 1 <= int(self.batch_limit) <= MAX_BATCH_LIMIT:
            raise InvalidInputError(f"batch_limit must be between 1 and {MAX_BATCH_LIMIT}, got {self.batch_limit}")
        if not 1 <= int(self.initial_shards) <= 256:
            raise InvalidInputError(f"initial_shards must be between 1 and 256, got {self.initial_shards}")
        for name in (
            "transaction_lease_seconds",
            "punch_interval_seconds",
            "unreadable_window_seconds",
            "lock_lease_seconds",
        ):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or value < 0:
                raise InvalidInputError(f"{name} must be a non-negative number, got {value!r}")
        if self.max_iterations_per_shard < 1:
            raise InvalidInputError("max_iterations_per_shard must be at least 1")
        for name in _replica.SETTING_NAMES:  # normalised: level names upper-case, "true" -> True, "60" -> 60
            object.__setattr__(self, name, _replica.check_setting(name, getattr(self, name)))

    def replica_settings(self) -> dict:
        """The replica-safety keys (consistency levels, gc_grace guard) as flat settings for the store."""
        return {name: getattr(self, name) for name in _replica.SETTING_NAMES}

    def with_overrides(self, **overrides) -> "StoreConfig":
        known = {f.name for f in fields(self)}
        unknown = sorted(set(overrides) - known)
        if unknown:
            raise InvalidInputError(f"unknown setting(s): {', '.join(unknown)}")
        return replace(self, **overrides)

    def to_json(self) -> dict:
        return asdict(self)
