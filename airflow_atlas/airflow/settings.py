"""The Airflow layer's settings (:class:`AtlasSettings`): the Airflow-only keys, on top of the engine's.

Every setting - engine and Airflow - is listed with its default, accepted values and where it is read in
ONE table: ``docs/SETTINGS.md`` (generated from the declarations here and in :mod:`airflow_atlas.config`;
``python -m airflow_atlas.airflow.settings_doc --write-docs`` rewrites it).

Each setting has ONE visible source in a deployment (docs/SETTINGS.md, "Where values come from"):

* **Run-time settings** (everything read when a task runs) live in ONE Airflow Variable, ``atlas_settings``,
  holding a JSON object; only the keys you want to change need to be present. Engine keys
  (:class:`airflow_atlas.config.StoreConfig`) may be given at the top level or inside ``store_config`` (the
  same layer; giving one key in both places is refused). Set it in the UI (Admin -> Variables) or with
  ``airflow variables set --json atlas_settings '{"shard_count": 16}'``; :meth:`AtlasSettings.load` reads it
  (``Variable.get``) when a task runs, so an edit applies to the next task without a redeploy. Do not set
  it as the environment variable ``AIRFLOW_VAR_ATLAS_SETTINGS``: Airflow reads that before the stored
  Variable, so UI edits would be ignored - when it is set, every task logs a warning saying so and the
  dashboard and ``atlas-sweep status --conn-id`` show it (:meth:`AtlasSettings.warnings`).
* **DAG-shaping settings** (schedules, retries, pool, timeouts, parallelism: declared with
  :func:`dag_setting`) are read when the DAG processor parses the DAG files, which must never query the
  metadata database (it re-parses every file every 30 s; Airflow's guidance and ruff's AIR003). They come
  from their own environment variable, :data:`DAG_SETTINGS_ENV` (``ATLAS_DAG_SETTINGS``, a JSON object of
  those keys only), in the environment of the DAG processor and scheduler (:meth:`AtlasSettings.for_dag_files`).
  A DAG-shaping key in the Variable has no effect, and tasks warn about it.

Unknown keys and bad values are rejected with a message naming the setting (a bad Variable fails the task
that reads it; a bad ``ATLAS_DAG_SETTINGS`` makes the DAG files fail to import, so the mistake shows in the UI).

Engine keys go through the one settings resolver (:func:`airflow_atlas.settings_resolver.resolve`): the
Variable's engine keys are the ``VARIABLE`` layer, a task's ``store_config`` the ``TASK`` layer.
:meth:`AtlasSettings.effective` lists every effective value with the layer it came from (the dashboard and
``atlas-sweep status --conn-id`` show it).
"""
from __future__ import annotations

import dataclasses
import json
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from airflow_atlas.airflow.setting_kinds import SCHEDULE, SparkConf, Strategies
from airflow_atlas.config import StoreConfig
from airflow_atlas.errors import InvalidInputError
from airflow_atlas.kvs.tables import SWEEPABLE_STRATEGY_NAMES
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
    setting,
    setting_fields,
    validate_fields,
)
from airflow_atlas.settings_resolver import DEFAULT_SOURCE, Layer, Rank, SettingValue, resolve, sourced

log = logging.getLogger(__name__)

VARIABLE = "atlas_settings"
"""Name of the Airflow Variable (JSON object) holding the settings."""

VARIABLE_ENV = f"AIRFLOW_VAR_{VARIABLE.upper()}"
"""The environment variable that Airflow's environment secrets backend reads BEFORE the stored Variable:
when set, it shadows ``atlas_settings`` (UI edits have no effect), which :meth:`AtlasSettings.warnings`
reports."""

DAG_SETTINGS_ENV = "ATLAS_DAG_SETTINGS"
"""The environment variable holding the DAG-shaping settings (JSON object; those keys only), read when the
DAG files are parsed (:meth:`AtlasSettings.for_dag_files`)."""

SOURCE = f"the {VARIABLE} Variable"
"""How errors name the Variable as the source of a bad value."""

DAG_SOURCE = f"the environment variable {DAG_SETTINGS_ENV}"
"""How errors and the effective-settings listing name :data:`DAG_SETTINGS_ENV`."""

SHADOWED_SOURCE = f"the {VARIABLE} Variable from the environment variable {VARIABLE_ENV}"
"""How the effective-settings listing names the Variable when :data:`VARIABLE_ENV` shadows it."""

DAG_SHAPING = "atlas_dag_shaping"
"""Key of a field's ``metadata`` marking a DAG-shaping setting (:func:`dag_setting`)."""

TASK_SOURCE = "the task's store_config"
"""How errors name an operator's or sensor's ``store_config`` argument as the source of a bad value."""

OWNER = "airflow-atlas"
"""Owner of every task of the project's DAGs."""

EXECUTION_MODES = ("in_task", "spark", "auto")
COMPACTION_METHODS = ("compact", "garbagecollect")
MAX_FULL_SWEEP_PARTS = 4096
"""Most scan ranges per table of a full sweep (setting full_sweep_parts, the full-sweep form's parts)."""
LONG = (1 << 62)
"""Upper bound of the counters (backlogs, tombstones)."""
DAY = 86_400


def dag_setting(default: Any, kind: Kind, doc: str, *, read: str) -> Any:
    """Declare a DAG-shaping setting (:func:`~airflow_atlas.settings_model.setting`, marked): read when the
    DAG files are parsed, from :data:`DAG_SETTINGS_ENV` only."""
    base = setting(default, kind, doc, read=f"{read} (parse time: {DAG_SETTINGS_ENV} only)")
    return field(default=base.default, default_factory=base.default_factory,
                 metadata={**base.metadata, DAG_SHAPING: True})


def dag_shaping_names() -> tuple[str, ...]:
    """The DAG-shaping settings (those :data:`DAG_SETTINGS_ENV` may hold), in declaration order."""
    return tuple(f.name for f in setting_fields(AtlasSettings) if f.metadata.get(DAG_SHAPING))


def split_dag_settings(values: Mapping[str, Any]) -> tuple[dict, dict]:
    """One JSON object of settings as its two sources: (the DAG-shaping keys, for :data:`DAG_SETTINGS_ENV`;
    the rest, for the ``atlas_settings`` Variable). For scripts and tests that describe both at once."""
    shaping = set(dag_shaping_names())
    return {k: v for k, v in values.items() if k in shaping}, {k: v for k, v in values.items() if k not in shaping}


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
    in_task_group_size: int | None = setting(
        None, Nullable(Int(1, 256)),
        "(shard, strategy) pairs per mapped task group in `in_task` mode; `null` = sized to the run: "
        "ceil(pairs to sweep / `max_parallel_groups`), so a run maps at most `max_parallel_groups` groups "
        "whatever the number of shards (one pair per group while the pairs to sweep are that few); "
        "1 = always one group per pair (a task instance per pair: 2,048 for 512 pairs)",
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
        read="airflow/execution/spark_types.py (cluster_options), execution/spark_submit.py (submit_conf)",
    )
    spark_executor_python: str | None = setting(
        None, Nullable(Text("a path (or `./env/bin/python` with `spark.archives`)")),
        "the executors' Python (`spark.pyspark.python`), with the driver's Python minor version and "
        "cassandra-driver; `null` = the Airflow worker's interpreter path, for every master",
        read="airflow/execution/spark_types.py (cluster_options), execution/spark_submit.py (submit_conf)",
    )
    spark_driver_host: str | None = setting(
        None, Nullable(Text("a host name or address")),
        "address the driver (on the Airflow worker) advertises to executors (`spark.driver.host`), e.g. "
        "`127.0.0.1`; `null` = Spark's choice (the machine's external interface)",
        read="airflow/execution/spark_types.py (cluster_options), execution/spark_submit.py (submit_conf)",
    )
    max_parallel_groups: int = dag_setting(
        16, Int(1, 1024),
        "mapped groups running at once in one DAG run",
        read="groups.py, dags/atlas_full_sweep.py",
    )
    sweep_pool: str | None = dag_setting(
        None, Nullable(Text("an Airflow pool name")),
        "Airflow pool of the targeted sweep tasks of `atlas_targeted_sweep` and `atlas_manual_sweep` (`null`: "
        "`default_pool`); its slots cap the sweep tasks running at once across all runs, so the total sweep "
        "intensity is at most slots x sweep_max_entries_per_second (create the pool first; see docs/INTENSITY.md)",
        read="groups.py",
    )
    targeted_sweep_schedule: str | None = dag_setting(
        "*/5 * * * *", SCHEDULE,
        "cron (or preset) of `atlas_targeted_sweep`; `null` = only triggered by hand",
        read="dags/atlas_targeted_sweep.py",
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
    sweep_timeout_seconds: float | None = dag_setting(
        3600.0, Nullable(Float(0, 7 * DAY, lo_open=True)),
        "execution_timeout of a sweep task: a stuck sweep is stopped (the engine releases the lease it holds as it "
        "unwinds), and the task retried (`null`: no timeout)",
        read="groups.py",
    )
    retries: int = dag_setting(
        2, Int(1, 100),
        "retries of every task of our DAGs",
        read="AtlasSettings.default_args",
    )
    retry_delay_seconds: float = dag_setting(
        30.0, Float(0, DAY, lo_open=True),
        "first retry delay",
        read="AtlasSettings.default_args",
    )
    retry_exponential_backoff: float = dag_setting(
        2.0, Float(0, 100),
        "multiplier of the delay per retry (0 = off)",
        read="AtlasSettings.default_args",
    )
    max_retry_delay_seconds: float = dag_setting(
        600.0, Float(0, 7 * DAY, lo_open=True),
        "cap of the retry delay",
        read="AtlasSettings.default_args",
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
    full_sweep_schedule: str | None = dag_setting(
        None, SCHEDULE,
        "schedule of `atlas_full_sweep` (`null`: by hand)",
        read="dags/atlas_full_sweep.py",
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
    scrub_schedule: str | None = dag_setting(
        "@hourly", SCHEDULE,
        "schedule of `atlas_scrub`",
        read="dags/atlas_scrub.py",
    )
    scrub_max_entries: int | None = setting(
        None, Nullable(Int(1, 1 << 31)),
        "ready entries per scrub run (`null` = all)",
        read="operators/scrub.py",
    )
    sensor_poke_seconds: float = dag_setting(
        30.0, Float(0, DAY, lo_open=True),
        "poll interval of our sensors and triggers",
        read="dags/example_bulk_load_then_sweep.py",
    )
    engine_layer: Layer = field(default_factory=lambda: Layer(Rank.VARIABLE, SOURCE), compare=False, repr=False)
    """The Variable's engine keys, as the resolver's ``VARIABLE`` layer; not a key of the Variable itself."""
    engine: StoreConfig = field(default_factory=StoreConfig)
    """The engine's settings of this Variable alone (defaults < its engine keys), for the Airflow layer's
    reads, typed and explicit (e.g. ``settings.engine.lock_lease_seconds``: no engine key is forwarded from
    this object itself); a task's settings are :meth:`engine_config`."""
    given: frozenset[str] = field(default=frozenset(), compare=False, repr=False)
    """The Airflow keys its source set (the others are defaults); engine keys are in ``engine_layer``."""
    shadowed: bool = field(default=False, compare=False, repr=False)
    """Read by :meth:`load` while :data:`VARIABLE_ENV` was set: the environment shadowed the stored Variable."""

    def __post_init__(self) -> None:
        validate_fields(self)
        if not isinstance(self.engine, StoreConfig):
            raise InvalidInputError(f"AtlasSettings.engine must be a StoreConfig, got {self.engine!r}")

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
        return cls(engine_layer=layer, engine=resolve(layer), given=frozenset(own), **own)

    @classmethod
    def load(cls, *, log_warnings: bool = True, through_cli: bool = False) -> AtlasSettings:
        """Read the ``atlas_settings`` Variable (defaults when it does not exist) - when a task runs, never
        at DAG-file parse time (there use :meth:`for_dag_files`). ``log_warnings``: log each of
        :meth:`warnings` (in a task: its log), e.g. that :data:`VARIABLE_ENV` shadows the Variable.

        ``through_cli``: for a process that is neither a task nor an Airflow server (``atlas-sweep
        --conn-id``), where the Task SDK's ``Variable.get`` does not reach the metadata database: read it
        as Airflow's own CLI does, ``airflow variables get`` (the environment, the secrets backends, then the
        database: the precedence a task sees)."""
        shadowed = VARIABLE_ENV in os.environ  # Airflow's environment backend is read before the stored Variable
        if through_cli:
            from .variable_cli import variable_through_airflow_cli

            raw = variable_through_airflow_cli(VARIABLE)
        else:
            from airflow.sdk import Variable

            raw = Variable.get(VARIABLE, default=None)
        settings = dataclasses.replace(cls.from_text(raw), shadowed=shadowed)
        if log_warnings:
            for message in settings.warnings():
                log.warning("%s", message)
        return settings

    @classmethod
    def for_dag_files(cls) -> AtlasSettings:
        """The settings that shape the DAGs, for the DAG files: from the environment variable
        :data:`DAG_SETTINGS_ENV` only (no database query at parse time; defaults when it is unset), which
        may hold only the DAG-shaping keys (:func:`dag_shaping_names`): any other key is refused, naming
        where it belongs."""
        settings = cls.from_text(os.environ.get(DAG_SETTINGS_ENV), DAG_SOURCE)
        outside = sorted((settings.given | set(settings.engine_layer.values)) - set(dag_shaping_names()))
        if outside:
            raise InvalidInputError(
                f"{DAG_SOURCE} may hold only the settings that shape the DAGs ({', '.join(dag_shaping_names())}); "
                f"{', '.join(outside)} {'is' if len(outside) == 1 else 'are'} read when a task runs: set "
                f"{'it' if len(outside) == 1 else 'them'} in the {VARIABLE} Variable"
            )
        return settings

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

    def warnings(self) -> list[str]:
        """What makes a setting's source differ from what a user may think: :data:`VARIABLE_ENV` shadowing
        the stored Variable (:meth:`load`), DAG-shaping keys in the Variable (no effect there)."""
        out = []
        if self.shadowed:
            out.append(
                f"the {VARIABLE} Variable is read from the environment variable {VARIABLE_ENV} of this process, "
                "which shadows the Variable stored in Airflow: edits in the UI or with `airflow variables set` "
                f"have no effect while it is set. Remove {VARIABLE_ENV} from the environment of every Airflow "
                "component and set the Variable instead (docs/SETTINGS.md)"
            )
        ignored = [name for name in dag_shaping_names() if name in self.given]
        if ignored:
            out.append(
                f"the {VARIABLE} Variable sets {', '.join(ignored)}, which shape{'s' if len(ignored) == 1 else ''} the DAGs: "
                f"{'it is' if len(ignored) == 1 else 'they are'} read when the DAG files are parsed, from the "
                f"environment variable {DAG_SETTINGS_ENV} only, so the Variable's "
                f"value{'' if len(ignored) == 1 else 's'} ha{'s' if len(ignored) == 1 else 've'} no effect "
                "(docs/SETTINGS.md)"
            )
        return out

    def effective(self, *layers: Layer, dag: AtlasSettings | None = None) -> list[SettingValue]:
        """Every effective setting with where it came from: engine keys resolved once as a task resolves
        them - this Variable < ``layers`` (a task's ``store_config``, the CLI's ``--set``, the connection's
        extras: :func:`~airflow_atlas.airflow.hooks.atlas.connection_layer`) - then the Airflow keys: the
        run-time ones from this Variable, the DAG-shaping ones from ``dag`` (default: :meth:`for_dag_files`
        of this process). Sources are the layers' names or ``"default"``."""
        variable = Layer(self.engine_layer.rank, SHADOWED_SOURCE if self.shadowed else self.engine_layer.source,
                         self.engine_layer.values, self.engine_layer.text)
        out = sourced(resolve(variable, *layers), variable, *layers)
        dag = AtlasSettings.for_dag_files() if dag is None else dag
        label = SHADOWED_SOURCE if self.shadowed else SOURCE
        shaping = set(dag_shaping_names())
        for f in setting_fields(self):
            owner, source = (dag, DAG_SOURCE) if f.name in shaping else (self, label)
            value = getattr(owner, f.name)
            out.append(SettingValue(
                f.name, "Airflow", list(value) if isinstance(value, tuple) else value,
                source if f.name in owner.given else DEFAULT_SOURCE,
            ))
        return out

    @staticmethod
    def task_layer(store_config: Any, source: str = TASK_SOURCE) -> Layer:
        """An operator's or sensor's ``store_config`` argument as the resolver's ``TASK`` layer."""
        return Layer(Rank.TASK, source, {} if store_config is None else store_config)

    def group_size(self, execution_mode: str | None = None, pairs: int = 1, max_groups: int | None = None) -> int:
        """Pairs per mapped group for a run that sweeps ``pairs`` pairs in ``execution_mode``: the Spark
        group size; the in-task one, or (``null``, the default) the size that maps the run onto at most
        ``max_groups`` (default ``max_parallel_groups``) groups, each a task of its own that sweeps its
        pairs one after the other (the groups beyond those running at once would only queue, each paying a
        task's start-up)."""
        mode = execution_mode or self.execution_mode
        if mode == "spark":
            return self.spark_group_size
        if self.in_task_group_size is not None:
            return self.in_task_group_size
        return max(1, -(-pairs // (max_groups or self.max_parallel_groups)))

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

