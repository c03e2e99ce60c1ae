"""Engine settings with their defaults, in one place.

The Airflow layer fills these from Airflow Variables (see ``airflow_atlas.airflow.settings``); the CLI
and Spark jobs from arguments and environment variables. Every value is validated here so that bad
input fails early with a message naming the setting.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace

from .errors import InvalidInputError

MAX_BATCH_LIMIT = 100_000


@dataclass(frozen=True)
class StoreConfig:
    # Transactions
    transactions_schema_version: int | None = None
    """None: use the store's (recorded at init; see airflow_atlas.transactions.schema). A value is only an
    assertion: a process whose value disagrees with the store's is refused. At init of a new store it
    chooses the version (default 2)."""
    transaction_lease_seconds: float = 60.0
    punch_interval_seconds: float = 60.0
    running_writer_wait_seconds: float = 5.0
    # Sweep
    unreadable_window_seconds: float = 3600.0
    batch_limit: int = 10_000
    lock_lease_seconds: float = 120.0
    max_iterations_per_shard: int = 100
    initial_shards: int = 1
    # Rollback guard (airflow_atlas.sweep.commits): a sweep batch whose writers without a commit entry are
    # at least this many and more than this fraction of its transactions is refused, not rolled back.
    rollback_guard_min_transactions: int = 20
    rollback_guard_max_fraction: float = 0.9

    def __post_init__(self) -> None:
        if self.transactions_schema_version not in (None, 1, 2) or isinstance(self.transactions_schema_version, bool):
            raise InvalidInputError(
                f"transactions_schema_version must be 1 or 2 (or unset: the store's), got {self.transactions_schema_version!r}"
            )
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
        if isinstance(self.rollback_guard_min_transactions, bool) or not isinstance(
            self.rollback_guard_min_transactions, int
        ) or self.rollback_guard_min_transactions < 1:
            raise InvalidInputError(
                f"rollback_guard_min_transactions must be an integer >= 1, got {self.rollback_guard_min_transactions!r}"
            )
        fraction = self.rollback_guard_max_fraction
        if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0.0 <= fraction <= 1.0:
            raise InvalidInputError(f"rollback_guard_max_fraction must be a number in 0..1, got {fraction!r}")
        if self.max_iterations_per_shard < 1:
            raise InvalidInputError("max_iterations_per_shard must be at least 1")

    def with_overrides(self, **overrides) -> "StoreConfig":
        known = {f.name for f in fields(self)}
        unknown = sorted(set(overrides) - known)
        if unknown:
            raise InvalidInputError(f"unknown setting(s): {', '.join(unknown)}")
        return replace(self, **overrides)

    def to_json(self) -> dict:
        return asdict(self)
