"""Every setting of the Airflow side of airflow-atlas, with its default, in one place.

Settings live in ONE Airflow Variable, ``atlas_settings``, holding a JSON object. Only the keys you want
to change need to be present; everything else takes the default below. Unknown keys and bad values are
rejected with a message naming the setting (a bad Variable makes the DAG files fail to import, so the
mistake shows in the UI at once). Set it in the UI (Admin -> Variables), with the CLI::

    airflow variables set --json atlas_settings '{"shard_count": 16, "targeted_sweep_schedule": "*/2 * * * *"}'

or as an environment variable of every Airflow component (``AIRFLOW_VAR_ATLAS_SETTINGS='{...}'``).

Settings that shape the DAGs (schedules, retries, parallelism) are read when the DAG files are parsed;
all others are read when a task runs, so a change applies to the next task without a redeploy.

==============================  =====================  ==============================================
key                             default                meaning
==============================  =====================  ==============================================
store_conn_id                   ``"atlas_default"``    Airflow connection of the store: type
                                                       ``cassandra`` (Cassandra provider) or
                                                       ``atlas_embedded`` (SQLite file), see
                                                       :mod:`airflow_atlas.airflow.hooks.atlas`
spark_conn_id                   ``"spark_default"``    Spark connection used when execution_mode is
                                                       ``"spark"`` (set it explicitly: a missing
                                                       connection silently means YARN)
execution_mode                  ``"in_task"``          ``"in_task"``: the engine runs inside the
                                                       Airflow task; ``"spark"``: each group of shards
                                                       (or each full-sweep table) is one Spark job;
                                                       ``"auto"``: a group goes to Spark when its
                                                       sweepable backlog is at least
                                                       ``spark_min_backlog`` queue entries, else in
                                                       the task (a full sweep runs in the task)
spark_min_backlog               ``420000``             the ``"auto"`` threshold: queue entries above
                                                       which one Spark job beats in-task sweeping
                                                       (bench/results: 2 x a submission's fixed cost
                                                       x the in-task rate, for executors with cores
                                                       of their own)
in_task_group_size              ``1``                  (shard, strategy) pairs per mapped task group
                                                       in ``in_task`` mode (1 = one group per pair)
spark_group_size                ``16``                 pairs per mapped task group (= per Spark job)
                                                       in ``spark`` mode
spark_conf                      ``{}``                 extra Spark conf of every sweep application
                                                       (``{"spark.executor.cores": "1"}``): keys
                                                       ``spark.*``; not ``spark.atlas.store.*`` (use
                                                       store_config), ``spark.submit.deployMode``
                                                       (client mode only) or the two below
spark_executor_python           ``null``               the executors' Python (``spark.pyspark.python``):
                                                       a path on every worker, or ``./env/bin/python``
                                                       with ``spark.archives``; same minor version as
                                                       the driver's; ``null`` = the Airflow worker's
                                                       interpreter path, for every master
spark_driver_host               ``null``               address the driver advertises to executors
                                                       (``spark.driver.host``), e.g. ``127.0.0.1``;
                                                       ``null`` = Spark's choice (the machine's
                                                       external interface)
max_parallel_groups             ``16``                 mapped groups running at once in one DAG run
targeted_sweep_schedule         ``"*/5 * * * *"``      cron (or preset) of ``atlas_targeted_sweep``;
                                                       ``null`` = only triggered by hand
shard_count                     ``null``               minimum number of shards: when the store has
                                                       fewer, the planning task grows it (shards can
                                                       only grow); ``null`` = use the store's count
strategies                      both                   strategies the scheduled sweep visits
                                                       (``["CONSERVATIVE", "THOROUGH"]``)
skip_idle_shards                ``true``               plan only pairs with sweepable work
batch_limit                     ``10000``              queue entries per iteration (1..100000)
max_iterations_per_shard        ``100``                iterations per pair per run
lock_lease_seconds              ``120``                shard lock lease; refreshed every third of it
                                                       while a sweep runs, so a dead task's lock is
                                                       free again at most this long after it died
lock_wait_seconds               ``0``                  how long lock acquisition waits for a lock
                                                       held by someone else before skipping the pair
sweep_timeout_seconds           ``3600``               execution_timeout of a sweep task: a stuck
                                                       sweep is stopped, its leases released
                                                       (``on_kill``), and the task retried
                                                       (``null``: no timeout)
store_config                    ``{}``                 any other engine setting
                                                       (:class:`airflow_atlas.config.StoreConfig`),
                                                       e.g. ``{"unreadable_window_seconds": 3600}``
retries                         ``2``                  retries of every task of our DAGs (>= 1)
retry_delay_seconds             ``30``                 first retry delay
retry_exponential_backoff       ``2.0``                multiplier of the delay per retry (0 = off)
max_retry_delay_seconds         ``600``                cap of the retry delay
compaction_threshold_tombstones ``100000``             compact a table once this many tombstones were
                                                       written to it since its last compaction
compaction_method               ``"compact"``          ``"compact"`` (major compaction) or
                                                       ``"garbagecollect"``
nodetool_command                ``["nodetool"]``       argument list that runs nodetool; e.g.
                                                       ``["/repo/scripts/cassandra.sh", "nodetool"]``
nodetool_ssh_conn_ids           ``[]``                 SSH connections, one per Cassandra node: run
                                                       nodetool on each node over SSH instead of
                                                       locally
nodetool_timeout_seconds        ``3600``               timeout of one nodetool command
compaction_state_variable       ``"atlas_compaction_state"``  Variable holding per-table tombstone
                                                       counts since the last compaction
full_sweep_schedule             ``null``               schedule of ``atlas_full_sweep`` (by hand)
full_sweep_parts                ``4``                  scan ranges per table in a full sweep
full_sweep_batch_size           ``1000``               cells per legacy-sweep batch
scrub_schedule                  ``"@hourly"``          schedule of ``atlas_scrub``
scrub_max_entries               ``null``               ready entries per scrub run (``null`` = all)
sensor_poke_seconds             ``30``                 poll interval of our sensors and triggers
==============================  =====================  ==============================================

"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from datetime import timedelta
from typing import Any, Mapping

from airflow_atlas.config import StoreConfig
from airflow_atlas.errors import InvalidInputError
from airflow_atlas.kvs.api import SweepStrategy

VARIABLE = "atlas_settings"
"""Name of the Airflow Variable (JSON object) holding the settings."""

OWNER = "airflow-atlas"
"""Owner of every task of the project's DAGs."""

EXECUTION_MODES = ("in_task", "spark", "auto")
COMPACTION_METHODS = ("compact", "garbagecollect")
SWEEPABLE = (SweepStrategy.CONSERVATIVE.value, SweepStrategy.THOROUGH.value)
_OWN_ENGINE_SETTINGS = ("batch_limit", "max_iterations_per_shard", "lock_lease_seconds")


@dataclass(frozen=True)
class AtlasSettings:
    store_conn_id: str = "atlas_default"
    spark_conn_id: str = "spark_default"
    execution_mode: str = "in_task"
    in_task_group_size: int = 1
    spark_group_size: int = 16
    spark_min_backlog: int = 420_000
    spark_conf: Mapping[str, Any] = field(default_factory=dict)
    spark_executor_python: str | None = None
    spark_driver_host: str | None = None
    max_parallel_groups: int = 16
    targeted_sweep_schedule: str | None = "*/5 * * * *"
    shard_count: int | None = None
    strategies: tuple[str, ...] = SWEEPABLE
    skip_idle_shards: bool = True
    batch_limit: int = 10_000
    max_iterations_per_shard: int = 100
    lock_lease_seconds: float = 120.0
    lock_wait_seconds: float = 0.0
    sweep_timeout_seconds: float | None = 3600.0
    store_config: Mapping[str, Any] = field(default_factory=dict)
    retries: int = 2
    retry_delay_seconds: float = 30.0
    retry_exponential_backoff: float = 2.0
    max_retry_delay_seconds: float = 600.0
    compaction_threshold_tombstones: int = 100_000
    compaction_method: str = "compact"
    nodetool_command: tuple[str, ...] = ("nodetool",)
    nodetool_ssh_conn_ids: tuple[str, ...] = ()
    nodetool_timeout_seconds: float = 3600.0
    compaction_state_variable: str = "atlas_compaction_state"
    full_sweep_schedule: str | None = None
    full_sweep_parts: int = 4
    full_sweep_batch_size: int = 1000
    scrub_schedule: str | None = "@hourly"
    scrub_max_entries: int | None = None
    sensor_poke_seconds: float = 30.0

    def __post_init__(self) -> None:
        for name in ("store_conn_id", "spark_conn_id", "compaction_state_variable"):
            _nonempty_str(self, name)
        _choice(self, "execution_mode", EXECUTION_MODES)
        _choice(self, "compaction_method", COMPACTION_METHODS)
        _int(self, "in_task_group_size", 1, 256)
        _int(self, "spark_group_size", 1, 512)
        _int(self, "spark_min_backlog", 1, 1 << 62)
        _int(self, "max_parallel_groups", 1, 1024)
        _int(self, "batch_limit", 1, 100_000)
        _int(self, "max_iterations_per_shard", 1, 1_000_000)
        _int(self, "retries", 1, 100)
        _int(self, "compaction_threshold_tombstones", 0, 1 << 62)
        _int(self, "full_sweep_parts", 1, 4096)
        _int(self, "full_sweep_batch_size", 1, 1_000_000)
        if self.shard_count is not None:
            _int(self, "shard_count", 1, 256)
        if self.sweep_timeout_seconds is not None:
            _number(self, "sweep_timeout_seconds", positive=True)
        if self.scrub_max_entries is not None:
            _int(self, "scrub_max_entries", 1, 1 << 31)
        for name in (
            "lock_lease_seconds",
            "retry_delay_seconds",
            "max_retry_delay_seconds",
            "nodetool_timeout_seconds",
            "sensor_poke_seconds",
        ):
            _number(self, name, positive=True)
        for name in ("lock_wait_seconds", "retry_exponential_backoff"):
            _number(self, name, positive=False)
        for name in ("targeted_sweep_schedule", "full_sweep_schedule", "scrub_schedule"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise InvalidInputError(f"setting {name} must be a cron expression, a preset like '@hourly' or null")
        if not isinstance(self.skip_idle_shards, bool):
            raise InvalidInputError("setting skip_idle_shards must be true or false")
        strategies = _str_tuple(self, "strategies", allow_empty=False)
        parsed = []
        for s in strategies:
            try:
                value = SweepStrategy.parse(s).value
            except InvalidInputError as exc:
                raise InvalidInputError(f"setting strategies: {exc}") from None
            if value not in SWEEPABLE:
                raise InvalidInputError(f"setting strategies: {value} is never swept; use CONSERVATIVE and/or THOROUGH")
            if value not in parsed:
                parsed.append(value)
        object.__setattr__(self, "strategies", tuple(parsed))
        object.__setattr__(self, "nodetool_command", _str_tuple(self, "nodetool_command", allow_empty=False))
        object.__setattr__(self, "nodetool_ssh_conn_ids", _str_tuple(self, "nodetool_ssh_conn_ids", allow_empty=True))
        if not isinstance(self.store_config, Mapping):
            raise InvalidInputError("setting store_config must be a JSON object of engine settings")
        object.__setattr__(self, "store_config", dict(self.store_config))
        shadowed = sorted(set(self.store_config) & set(_OWN_ENGINE_SETTINGS))
        if shadowed:
            raise InvalidInputError(f"setting store_config: set {', '.join(shadowed)} as top-level setting(s), not in store_config")
        object.__setattr__(self, "spark_conf", _spark_conf(self.spark_conf))
        for name in ("spark_executor_python", "spark_driver_host"):
            if getattr(self, name) is not None:
                _nonempty_str(self, name)
        self.engine_config()  # validates store_config (names and values) now, not at the first task

    # ----- construction ----------------------------------------------------------------------------
    @classmethod
    def from_mapping(cls, values: Mapping[str, Any] | None) -> "AtlasSettings":
        """Settings from a mapping of overrides; unknown keys raise InvalidInputError naming them."""
        if values is None:
            return cls()
        if not isinstance(values, Mapping):
            raise InvalidInputError(f"the {VARIABLE} Variable must hold a JSON object, got {type(values).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise InvalidInputError(
                f"unknown key(s) in the {VARIABLE} Variable: {', '.join(unknown)}; known keys: {', '.join(sorted(known))}"
            )
        try:
            return cls(**dict(values))
        except InvalidInputError as exc:
            raise InvalidInputError(f"{VARIABLE} Variable: {exc}") from None

    @classmethod
    def load(cls) -> "AtlasSettings":
        """Read the ``atlas_settings`` Variable (defaults when it does not exist)."""
        from airflow.sdk import Variable

        raw = Variable.get(VARIABLE, default=None)
        if raw is None or (isinstance(raw, str) and not raw.strip()):
            return cls()
        if isinstance(raw, str):
            try:
                raw = json.loads(raw)
            except json.JSONDecodeError as exc:
                raise InvalidInputError(f"the {VARIABLE} Variable is not valid JSON: {exc}") from None
        return cls.from_mapping(raw)

    def to_json(self) -> dict:
        out = asdict(self)
        for key, value in out.items():
            if isinstance(value, tuple):
                out[key] = list(value)
        return out

    # ----- derived values --------------------------------------------------------------------------
    def engine_config(self, **overrides) -> StoreConfig:
        """The engine's StoreConfig: defaults, ``store_config``, the sweep settings above, ``overrides``."""
        values = dict(self.store_config)
        values.update(
            batch_limit=self.batch_limit,
            max_iterations_per_shard=self.max_iterations_per_shard,
            lock_lease_seconds=float(self.lock_lease_seconds),
        )
        values.update(overrides)
        try:
            return StoreConfig().with_overrides(**values)
        except (TypeError, ValueError) as exc:
            raise InvalidInputError(f"setting store_config: {exc}") from None

    def group_size(self, execution_mode: str | None = None) -> int:
        mode = execution_mode or self.execution_mode
        return self.spark_group_size if mode == "spark" else self.in_task_group_size

    def default_args(self) -> dict:
        """default_args of every DAG of the project: owner, retries with exponential backoff."""
        args: dict[str, Any] = {
            "owner": OWNER,
            "retries": self.retries,
            "retry_delay": timedelta(seconds=self.retry_delay_seconds),
            "max_retry_delay": timedelta(seconds=self.max_retry_delay_seconds),
        }
        if self.retry_exponential_backoff:
            args["retry_exponential_backoff"] = float(self.retry_exponential_backoff)
        return args


# ----- validation helpers --------------------------------------------------------------------------
def _nonempty_str(obj, name: str) -> None:
    value = getattr(obj, name)
    if not isinstance(value, str) or not value.strip():
        raise InvalidInputError(f"setting {name} must be a non-empty string, got {value!r}")


def _choice(obj, name: str, choices: tuple[str, ...]) -> None:
    value = getattr(obj, name)
    if value not in choices:
        raise InvalidInputError(f"setting {name} must be one of {', '.join(choices)}, got {value!r}")


def _int(obj, name: str, lo: int, hi: int) -> None:
    value = getattr(obj, name)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInputError(f"setting {name} must be an integer, got {value!r}")
    if not lo <= value <= hi:
        raise InvalidInputError(f"setting {name} must be between {lo} and {hi}, got {value}")


def _number(obj, name: str, *, positive: bool) -> None:
    value = getattr(obj, name)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        raise InvalidInputError(f"setting {name} must be a number, got {value!r}")
    if value < 0 or (positive and value == 0):
        raise InvalidInputError(f"setting {name} must be {'positive' if positive else 'non-negative'}, got {value}")


_SPARK_CONF_OWNED = {
    "spark.pyspark.python": "spark_executor_python",
    "spark.driver.host": "spark_driver_host",
    "spark.submit.deployMode": "nothing (the sweep jobs run in client mode only)",
}


def _spark_conf(value: Any) -> dict[str, str]:
    """``spark_conf`` as ``{key: str}``: ``spark.*`` keys with scalar values, none that another setting owns."""
    if not isinstance(value, Mapping):
        raise InvalidInputError(f"setting spark_conf must be a JSON object of Spark conf, got {value!r}")
    out = {}
    for key, item in value.items():
        if not isinstance(key, str) or not key.startswith("spark."):
            raise InvalidInputError(f"setting spark_conf: {key!r} is not a Spark conf key (they start with 'spark.')")
        if key.startswith("spark.atlas.store."):
            raise InvalidInputError(f"setting spark_conf: {key} is an engine setting: put it in store_config")
        if key in _SPARK_CONF_OWNED:
            raise InvalidInputError(f"setting spark_conf: set {key} through {_SPARK_CONF_OWNED[key]}, not spark_conf")
        if isinstance(item, bool):
            item = "true" if item else "false"
        elif isinstance(item, (int, float)) and item == item:
            item = str(item)
        if not isinstance(item, str) or not item:
            raise InvalidInputError(f"setting spark_conf: {key} must be a non-empty string, number or boolean, got {item!r}")
        out[key] = item
    return out


def _str_tuple(obj, name: str, *, allow_empty: bool) -> tuple[str, ...]:
    value = getattr(obj, name)
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        raise InvalidInputError(f"setting {name} must be a list of strings, got {value!r}")
    if not allow_empty and not value:
        raise InvalidInputError(f"setting {name} must not be empty")
    if not all(isinstance(v, str) and v for v in value):
        raise InvalidInputError(f"setting {name} must be a list of non-empty strings, got {value!r}")
    return tuple(value)
