"""The Airflow layer's settings (:class:`AtlasSettings`): the Airflow-only keys, on top of the engine's.

Every setting - engine and Airflow - is listed with its default, accepted values and where it is read in
ONE table: ``docs/SETTINGS.md`` (generated from the declarations here and in :mod:`airflow_atlas.config`;
``python -m airflow_atlas.airflow.settings --write-docs`` rewrites it).

Settings live in ONE Airflow Variable, ``atlas_settings``, holding a JSON object. Only the keys you want to
change need to be present. Engine keys (:class:`airflow_atlas.config.StoreConfig`) may be given at the top
level or inside ``store_config`` (the same layer; giving one key in both places is refused). Unknown keys
and bad values are rejected with a message naming the setting (a bad Variable fails the task that reads it;
a bad ``AIRFLOW_VAR_ATLAS_SETTINGS`` makes the DAG files fail to import, so the mistake shows in the UI).
Set it in the UI (Admin -> Variables), with the CLI::

    airflow variables set --json atlas_settings '{"shard_count": 16, "targeted_sweep_schedule": "*/2 * * * *"}'

or as an environment variable of every Airflow component (``AIRFLOW_VAR_ATLAS_SETTINGS='{...}'``) - the
only way to change the settings that shape the DAGs (schedules, retries, pool...: see below).

Two readers, so that parsing a DAG file never queries the metadata database (the DAG processor re-parses
every file every 30 s; Airflow's guidance and ruff's AIR003: read Variables at run time):

* :meth:`AtlasSettings.for_dag_files` - the settings that shape the DAGs (schedules, retries, pool,
  timeouts, parallelism) - reads ONLY the environment variable ``AIRFLOW_VAR_ATLAS_SETTINGS`` (the same
  JSON, as Airflow's environment-variable secrets backend holds it), never the database: set DAG-shaping
  keys there, in the environment of the DAG processor (and scheduler). A Variable stored in the database
  does not shape the DAGs.
* :meth:`AtlasSettings.load` - everything read when a task runs - is ``Variable.get("atlas_settings")``
  (environment first, then the secrets backends and the database; with ``[secrets] use_cache`` Airflow
  caches it), so a change applies to the next task without a redeploy.

Engine keys go through the one settings resolver (:func:`airflow_atlas.settings_resolver.resolve`): the
Variable's engine keys are the ``VARIABLE`` layer, a task's ``store_config`` the ``TASK`` layer.
"""
from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from airflow_atlas.config import StoreConfig
from airflow_atlas.errors import InvalidInputError
from airflow_atlas.kvs.api import SWEEPABLE_STRATEGY_NAMES, SweepStrategy
from airflow_atlas.settings_model import (
    Bool,
    Choice,
    Float,
    Int,
    Kind,
    Nullable,
    Text,
    TextList,
    check_known,
    known_names,
    layer_values,
    markdown_table,
    setting,
    setting_fields,
    validate_fields,
)
from airflow_atlas.settings_resolver import Layer, Rank, resolve

VARIABLE = "atlas_settings"
"""Name of the Airflow Variable (JSON object) holding the settings."""

VARIABLE_ENV = f"AIRFLOW_VAR_{VARIABLE.upper()}"
"""The environment variable that holds the Variable for Airflow's environment secrets backend: the only
source of the DAG-shaping settings (:meth:`AtlasSettings.for_dag_files`)."""

SOURCE = f"the {VARIABLE} Variable"
"""How errors name the Variable as the source of a bad value."""

TASK_SOURCE = "the task's store_config"
"""How errors name an operator's or sensor's ``store_config`` argument as the source of a bad value."""

OWNER = "airflow-atlas"
"""Owner of every task of the project's DAGs."""

SWEEPABLE = SWEEPABLE_STRATEGY_NAMES
"""Re-export of :data:`airflow_atlas.kvs.api.SWEEPABLE_STRATEGY_NAMES` for modules not yet importing it
from its home (remove once none does)."""

EXECUTION_MODES = ("in_task", "spark", "auto")
COMPACTION_METHODS = ("compact", "garbagecollect")
MAX_FULL_SWEEP_PARTS = 4096
"""Most scan ranges per table of a full sweep (setting full_sweep_parts, the full-sweep form's parts)."""
LONG = (1 << 62)
"""Upper bound of the counters (backlogs, tombstones)."""
DAY = 86_400


@dataclass(frozen=True)
class Strategies(Kind):
    """A non-empty list of sweepable strategies (case-insensitive, duplicates dropped)."""

    def check(self, value: Any) -> tuple:
        names = TextList(allow_empty=False).check(value)
        out: list[str] = []
        for name in names:
            try:
                parsed = SweepStrategy.parse(name).value
            except InvalidInputError as exc:
                raise ValueError(str(exc)) from None
            if parsed not in SWEEPABLE_STRATEGY_NAMES:
                raise ValueError(f"{parsed} is never swept; use CONSERVATIVE and/or THOROUGH")
            if parsed not in out:
                out.append(parsed)
        return tuple(out)

    def parse(self, text: str) -> tuple:
        return TextList().parse(text)

    def describe(self) -> str:
        return "non-empty list of " + " / ".join(f"`{s}`" for s in SWEEPABLE_STRATEGY_NAMES)


SCHEDULE = Nullable(Text("a cron expression or a preset like `@hourly`"))

SPARK_CONF_OWNED = {
    "spark.pyspark.python": "spark_executor_python",
    "spark.driver.host": "spark_driver_host",
    "spark.submit.deployMode": "nothing (the sweep jobs run in client mode only)",
}
"""Spark conf keys that ``spark_conf`` may not set, and what sets them instead."""


@dataclass(frozen=True)
class SparkConf(Kind):
    """Spark conf: ``spark.*`` keys with non-empty string, number or boolean values (stored as strings),
    none that another setting owns (:data:`SPARK_CONF_OWNED`) or that is an engine setting."""

    def check(self, value: Any) -> dict:
        if not isinstance(value, Mapping):
            raise ValueError(f"must be a JSON object of Spark conf, got {value!r}")
        out = {}
        for key, item in value.items():
            if not isinstance(key, str) or not key.startswith("spark."):
                raise ValueError(f"{key!r} is not a Spark conf key (they start with 'spark.')")
            if key.startswith("spark.atlas.store."):
                raise ValueError(f"{key} is an engine setting: set it as one (top level or store_config)")
            if key in SPARK_CONF_OWNED:
                raise ValueError(f"set {key} through {SPARK_CONF_OWNED[key]}, not spark_conf")
            if isinstance(item, bool):
                item = "true" if item else "false"
            elif isinstance(item, (int, float)) and item == item and item not in (float("inf"), float("-inf")):
                item = str(item)
            if not isinstance(item, str) or not item:
                raise ValueError(f"{key} must be a non-empty string, number or boolean, got {item!r}")
            out[key] = item
        return out

    def parse(self, text: str) -> dict:
        try:
            return json.loads(text)
        except ValueError:
            raise ValueError(f"must be a JSON object of Spark conf, got {text!r}") from None

    def describe(self) -> str:
        return "JSON object of `spark.*` conf"


@dataclass(frozen=True)
class AtlasSettings:
    store_conn_id: str = setting(
        "atlas_default", Text(),
        "Airflow connection of the store: type `cassandra` (Cassandra provider) or `atlas_embedded` (SQLite "
        "file), see airflow_atlas/airflow/hooks/atlas.py",
        read="operators/base.py, sensors, triggers, dashboard, assets.py",
    )
    spark_conn_id: str = setting(
        "spark_default", Text(),
        "Spark connection used when execution_mode is `spark` (set it explicitly: a missing connection "
        "silently means YARN)",
        read="operators/sweep.py, operators/full_sweep.py",
    )
    execution_mode: str = setting(
        "in_task", Choice(EXECUTION_MODES),
        "`in_task`: the engine runs inside the Airflow task; `spark`: each group of shards (or each "
        "full-sweep table) is one Spark job; `auto`: a group goes to Spark when its sweepable backlog is at "
        "least `spark_min_backlog` queue entries, else in the task (a full sweep runs in the task)",
        read="operators/sweep.py, operators/full_sweep.py, operators/sweep_timestamps.py",
    )
    in_task_group_size: int = setting(
        1, Int(1, 256),
        "(shard, strategy) pairs per mapped task group in `in_task` mode (1 = one group per pair)",
        read="operators/sweep_timestamps.py (planning)",
    )
    spark_group_size: int = setting(
        16, Int(1, 512),
        "pairs per mapped task group (= per Spark job) in `spark` mode",
        read="operators/sweep_timestamps.py (planning)",
    )
    spark_min_backlog: int = setting(
        250_000, Int(1, LONG),
        "the `auto` threshold: queue entries above which one Spark job beats in-task sweeping "
        "(bench/results, issue 15 run: 2 x a spark-submit's fixed cost x the in-task rate, for executors "
        "with cores of their own; about 60,000 for a Spark Connect connection, docs/SPARK.md)",
        read="operators/sweep.py",
    )
    spark_conf: Mapping[str, str] = setting(
        {}, SparkConf(),
        "extra Spark conf of every sweep application, e.g. `{\"spark.cores.max\": \"8\"}`; not "
        "`spark.atlas.store.*` (engine settings), `spark.submit.deployMode` (client mode only), "
        "`spark.pyspark.python` / `spark.driver.host` (the two settings below); see docs/SPARK.md",
        read="airflow/execution/spark.py (cluster_options), execution/spark_submit.py (submit_conf)",
    )
    spark_executor_python: str | None = setting(
        None, Nullable(Text("a path (or `./env/bin/python` with `spark.archives`)")),
        "the executors' Python (`spark.pyspark.python`), with the driver's Python minor version and "
        "cassandra-driver; `null` = the Airflow worker's interpreter path, for every master",
        read="airflow/execution/spark.py (cluster_options), execution/spark_submit.py (submit_conf)",
    )
    spark_driver_host: str | None = setting(
        None, Nullable(Text("a host name or address")),
        "address the driver (on the Airflow worker) advertises to executors (`spark.driver.host`), e.g. "
        "`127.0.0.1`; `null` = Spark's choice (the machine's external interface)",
        read="airflow/execution/spark.py (cluster_options), execution/spark_submit.py (submit_conf)",
    )
    max_parallel_groups: int = setting(
        16, Int(1, 1024),
        "mapped groups running at once in one DAG run",
        read="groups.py, dags/atlas_full_sweep.py (parse time: environment only)",
    )
    sweep_pool: str | None = setting(
        None, Nullable(Text("an Airflow pool name")),
        "Airflow pool of the targeted sweep tasks of `atlas_targeted_sweep` and `atlas_manual_sweep` (`null`: "
        "`default_pool`); its slots cap the sweep tasks running at once across all runs, so the total sweep "
        "intensity is at most slots x sweep_max_entries_per_second (create the pool first; see docs/INTENSITY.md)",
        read="groups.py (parse time: environment only)",
    )
    targeted_sweep_schedule: str | None = setting(
        "*/5 * * * *", SCHEDULE,
        "cron (or preset) of `atlas_targeted_sweep`; `null` = only triggered by hand",
        read="dags/atlas_targeted_sweep.py (parse time: environment only)",
    )
    shard_count: int | None = setting(
        None, Nullable(Int(1, 256)),
        "minimum number of shards: when the store has fewer, the planning task grows it (shards can only "
        "grow); `null` = use the store's count",
        read="operators/sweep_timestamps.py",
    )
    strategies: tuple[str, ...] = setting(
        SWEEPABLE_STRATEGY_NAMES, Strategies(),
        "strategies the scheduled sweep visits",
        read="operators/sweep_timestamps.py",
    )
    skip_idle_shards: bool = setting(
        True, Bool(),
        "plan only pairs with sweepable work",
        read="operators/sweep_timestamps.py",
    )
    lock_wait_seconds: float = setting(
        0.0, Float(0, DAY),
        "how long lock acquisition waits for a lock held by someone else before skipping the pair",
        read="operators/locks.py",
    )
    sweep_timeout_seconds: float | None = setting(
        3600.0, Nullable(Float(0, 7 * DAY, lo_open=True)),
        "execution_timeout of a sweep task: a stuck sweep is stopped, its leases released (`on_kill`), and "
        "the task retried (`null`: no timeout)",
        read="groups.py (parse time: environment only)",
    )
    retries: int = setting(
        2, Int(1, 100),
        "retries of every task of our DAGs",
        read="AtlasSettings.default_args (parse time: environment only)",
    )
    retry_delay_seconds: float = setting(
        30.0, Float(0, DAY, lo_open=True),
        "first retry delay",
        read="AtlasSettings.default_args (parse time: environment only)",
    )
    retry_exponential_backoff: float = setting(
        2.0, Float(0, 100),
        "multiplier of the delay per retry (0 = off)",
        read="AtlasSettings.default_args (parse time: environment only)",
    )
    max_retry_delay_seconds: float = setting(
        600.0, Float(0, 7 * DAY, lo_open=True),
        "cap of the retry delay",
        read="AtlasSettings.default_args (parse time: environment only)",
    )
    compaction_threshold_tombstones: int = setting(
        100_000, Int(0, LONG),
        "compact a table once this many tombstones were written to it since its last compaction",
        read="operators/compaction.py",
    )
    compaction_method: str = setting(
        "compact", Choice(COMPACTION_METHODS),
        "`compact` (major compaction) or `garbagecollect`",
        read="operators/compaction.py",
    )
    nodetool_command: tuple[str, ...] = setting(
        ("nodetool",), TextList(allow_empty=False),
        "argument list that runs nodetool; e.g. `[\"/repo/scripts/cassandra.sh\", \"nodetool\"]`",
        read="hooks/nodetool.py",
    )
    nodetool_ssh_conn_ids: tuple[str, ...] = setting(
        (), TextList(),
        "SSH connections, one per Cassandra node: run nodetool on each node over SSH instead of locally",
        read="hooks/nodetool.py",
    )
    nodetool_jmx_targets: tuple[str, ...] = setting(
        (), TextList(),
        "`host:port` of each Cassandra node's JMX: the local nodetool command runs once per node with "
        "`-h host -p port` (e.g. the local cluster: `[\"127.0.0.1:7201\", \"127.0.0.1:7202\", \"127.0.0.1:7203\"]`); "
        "empty: one run against nodetool's own target",
        read="hooks/nodetool.py",
    )
    nodetool_timeout_seconds: float = setting(
        3600.0, Float(0, 7 * DAY, lo_open=True),
        "timeout of one nodetool command",
        read="hooks/nodetool.py",
    )
    full_sweep_schedule: str | None = setting(
        None, SCHEDULE,
        "schedule of `atlas_full_sweep` (`null`: by hand)",
        read="dags/atlas_full_sweep.py (parse time: environment only)",
    )
    full_sweep_parts: int = setting(
        4, Int(1, MAX_FULL_SWEEP_PARTS),
        "scan ranges per table in a full sweep",
        read="operators/full_sweep.py",
    )
    full_sweep_batch_size: int = setting(
        1000, Int(1, 1_000_000),
        "cells per legacy-sweep batch",
        read="operators/full_sweep.py",
    )
    scrub_schedule: str | None = setting(
        "@hourly", SCHEDULE,
        "schedule of `atlas_scrub`",
        read="dags/atlas_scrub.py (parse time: environment only)",
    )
    scrub_max_entries: int | None = setting(
        None, Nullable(Int(1, 1 << 31)),
        "ready entries per scrub run (`null` = all)",
        read="operators/scrub.py",
    )
    sensor_poke_seconds: float = setting(
        30.0, Float(0, DAY, lo_open=True),
        "poll interval of our sensors and triggers",
        read="dags/example_bulk_load_then_sweep.py (parse time: environment only)",
    )
    engine_layer: Layer = field(default_factory=lambda: Layer(Rank.VARIABLE, SOURCE), compare=False, repr=False)
    """The Variable's engine keys, as the resolver's ``VARIABLE`` layer; not a key of the Variable itself."""
    engine: StoreConfig = field(default_factory=StoreConfig)
    """The engine's settings of this Variable alone (defaults < its engine keys), for the Airflow layer's
    reads (e.g. ``settings.lock_lease_seconds``); a task's settings are :meth:`engine_config`."""

    def __post_init__(self) -> None:
        validate_fields(self)
        if not isinstance(self.engine, StoreConfig):
            raise InvalidInputError(f"AtlasSettings.engine must be a StoreConfig, got {self.engine!r}")

    def __getattr__(self, name: str) -> Any:
        # Engine keys read as settings.<key> (e.g. settings.batch_limit): one value, kept in self.engine.
        if name != "engine" and not name.startswith("__") and name in known_names(StoreConfig):
            return getattr(self.engine, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    # ----- construction ----------------------------------------------------------------------------
    @classmethod
    def from_mapping(cls, values: Mapping[str, Any] | None, source: str = SOURCE) -> AtlasSettings:
        """Settings from the Variable's JSON object: Airflow keys, engine keys at the top level or inside
        ``store_config``. Unknown keys and bad values raise InvalidInputError naming them and ``source``."""
        if values is None:
            return cls()
        if not isinstance(values, Mapping):
            raise InvalidInputError(f"{source} must hold a JSON object, got {type(values).__name__}")
        engine_keys = known_names(StoreConfig)
        check_known(cls, values, source, also=[*engine_keys, STORE_CONFIG])
        nested = values.get(STORE_CONFIG, {})
        if not isinstance(nested, Mapping):
            raise InvalidInputError(f"setting {STORE_CONFIG} must be a JSON object of engine settings (from {source})")
        top = {k: v for k, v in values.items() if k in engine_keys}
        both = sorted(set(top) & set(nested))
        if both:
            raise InvalidInputError(
                f"setting(s) {', '.join(both)} given twice in {source}: at the top level and in {STORE_CONFIG}"
            )
        layer = Layer(Rank.VARIABLE, source, {**nested, **top})
        own = layer_values(cls, {k: v for k, v in values.items() if k not in engine_keys and k != STORE_CONFIG}, source)
        return cls(engine_layer=layer, engine=resolve(layer), **own)

    @classmethod
    def load(cls) -> AtlasSettings:
        """Read the ``atlas_settings`` Variable (defaults when it does not exist) - when a task runs, never
        at DAG-file parse time (there use :meth:`for_dag_files`)."""
        from airflow.sdk import Variable

        return cls.from_text(Variable.get(VARIABLE, default=None))

    @classmethod
    def for_dag_files(cls) -> AtlasSettings:
        """The settings that shape the DAGs, for the DAG files: from the environment variable
        :data:`VARIABLE_ENV` only (no database query at parse time); defaults when it is unset."""
        return cls.from_text(os.environ.get(VARIABLE_ENV), f"the environment variable {VARIABLE_ENV}")

    @classmethod
    def from_text(cls, raw: Any, source: str = SOURCE) -> AtlasSettings:
        """Settings from the Variable's value (JSON text, or a mapping already decoded)."""
        if raw is None or (isinstance(raw, str) and not raw.strip()):
            return cls()
        if isinstance(raw, str):
            try:
                raw = json.loads(raw)
            except json.JSONDecodeError as exc:
                raise InvalidInputError(f"{source} is not valid JSON: {exc}") from None
        return cls.from_mapping(raw, source)

    def to_json(self) -> dict:
        """Every setting, flat (Airflow and engine keys), as JSON values; ``from_mapping`` reads it back."""
        out = {f.name: getattr(self, f.name) for f in setting_fields(self)}
        out.update(self.engine.to_json())
        return {k: list(v) if isinstance(v, tuple) else v for k, v in out.items()}

    # ----- derived values --------------------------------------------------------------------------
    def engine_config(self, *layers: Layer, **overrides: Any) -> StoreConfig:
        """A task's engine settings, resolved once: defaults < this Variable < ``layers`` (e.g. the task's
        ``store_config``: :meth:`task_layer`) and ``overrides`` (typed values, the ``TASK`` layer). The
        store's connection extras go on top in the hook (:meth:`AtlasHook.resolved_config`)."""
        return resolve(self.engine_layer, *layers, Layer(Rank.TASK, TASK_SOURCE, overrides))

    @staticmethod
    def task_layer(store_config: Any, source: str = TASK_SOURCE) -> Layer:
        """An operator's or sensor's ``store_config`` argument as the resolver's ``TASK`` layer."""
        return Layer(Rank.TASK, source, {} if store_config is None else store_config)

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


STORE_CONFIG = "store_config"
"""Key of the Variable that may hold engine settings as a nested object (same layer as the top level)."""


def settings_markdown() -> str:
    """The one settings table (docs/SETTINGS.md): engine keys, then Airflow keys."""
    return markdown_table(("engine", StoreConfig), ("Airflow", AtlasSettings))


DOC = "docs/SETTINGS.md"
BEGIN, END = "<!-- settings table: begin (generated) -->", "<!-- settings table: end -->"


def render_doc(text: str) -> str:
    """``text`` (docs/SETTINGS.md) with the generated table between the markers replaced."""
    head, sep, rest = text.partition(BEGIN)
    _, sep2, tail = rest.partition(END)
    if not sep or not sep2:
        raise InvalidInputError(f"{DOC} lacks the markers {BEGIN!r} / {END!r}")
    return f"{head}{BEGIN}\n{settings_markdown()}{END}{tail}"


if __name__ == "__main__":  # python -m airflow_atlas.airflow.settings [--write-docs]
    import pathlib
    import sys

    if sys.argv[1:] == ["--write-docs"]:
        path = pathlib.Path(__file__).resolve().parents[2] / DOC
        path.write_text(render_doc(path.read_text()))
        print(f"wrote {path}")
    else:
        print(settings_markdown(), end="")
