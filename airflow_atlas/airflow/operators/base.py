"""AtlasBaseOperator: what every airflow-atlas operator shares.

* ``store_conn_id`` (templated): the store's connection; default ``store_conn_id`` of the ``atlas_settings``
  Variable (see :mod:`airflow_atlas.airflow.settings`).
* ``store_config`` (templated): engine setting overrides for this task only (``StoreConfig`` field names),
  applied on top of the Variable's.

The operator first converts its rendered templated arguments by the one rule of
:mod:`airflow_atlas.airflow.templated` (ints, booleans: ``"False"`` is false), then opens the store through
:class:`~airflow_atlas.airflow.hooks.atlas.AtlasHook`, calls :meth:`execute_with_store`, and always closes
the store. Bad input from the user (an unclear templated value, unknown table, shard out of range, bad
setting: the engine's ``InvalidInputError`` / ``TableNotFoundError``), a store that refuses our
credentials, certificate or permissions (``StoreAccessError``) - whatever
:func:`~airflow_atlas.errors.is_retriable` says no retry can fix - fails the task at once without retries
(``AirflowFailException``, :mod:`airflow_atlas.airflow.failures`). Everything else (store unavailable, lost
lease, a crash) fails normally and is retried. A store that was never initialised (no ``_timestamp`` table: a
fresh deployment whose init did not reach the store) fails the same way, with the command that creates it:
``atlas-sweep init --conn-id <id>``.
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from airflow.sdk import BaseOperator

from airflow_atlas.airflow.execution.spark import SparkSubmission
from airflow_atlas.airflow.failures import airflow_failures
from airflow_atlas.airflow.hooks.atlas import AtlasHook
from airflow_atlas.airflow.settings import AtlasSettings
from airflow_atlas.airflow.targets import SweepTarget, normalize_targets
from airflow_atlas.airflow.templated import convert_templated_fields
from airflow_atlas.errors import TableNotFoundError
from airflow_atlas.timestamps import TIMESTAMP_TABLE


class AtlasBaseOperator(BaseOperator):
    template_fields: Sequence[str] = ("store_conn_id", "store_config")
    ui_color = "#e8f1fb"

    def __init__(self, *, store_conn_id: str | None = None, store_config: dict | None = None, **kwargs):
        super().__init__(**kwargs)
        self.store_conn_id = store_conn_id
        self.store_config = store_config

    # ----- helpers for subclasses ------------------------------------------------------------------
    def resolved_conn_id(self, settings: AtlasSettings) -> str:
        return self.store_conn_id or settings.store_conn_id

    def engine_config(self, settings: AtlasSettings):
        """The task's engine settings below the store: the Variable and this task's ``store_config``."""
        return settings.engine_config(settings.task_layer(self.store_config))

    @contextmanager
    def open_store(self, settings: AtlasSettings) -> Iterator[Any]:
        with AtlasHook(self.resolved_conn_id(settings), config=self.engine_config(settings)) as hook:
            yield hook.get_store()

    # ----- execution -------------------------------------------------------------------------------
    def execute(self, context) -> Any:
        with airflow_failures():
            convert_templated_fields(self)
            settings = AtlasSettings.load()
            with self.open_store(settings) as store:
                try:
                    return self.execute_with_store(context, store, settings)
                except TableNotFoundError as exc:
                    if store.kvs.table_exists(TIMESTAMP_TABLE):
                        raise
                    conn_id = self.resolved_conn_id(settings)
                    shards = f" --shards {settings.shard_count}" if settings.shard_count else ""
                    raise TableNotFoundError(
                        f"the store of connection {conn_id!r} is not initialised ({exc}): run "
                        f"`atlas-sweep init --conn-id {conn_id}{shards}` once (an Airflow "
                        "environment, e.g. the scheduler's), then clear this task") from exc

    def execute_with_store(self, context, store, settings: AtlasSettings) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError


class AtlasTargetsOperator(AtlasBaseOperator):
    """An operator that works on (shard, strategy) targets: ``targets`` (a list of target dicts, e.g. a
    planning task's output) or one pair given as ``shard`` + ``strategy`` (all three templated)."""

    template_fields: Sequence[str] = (*AtlasBaseOperator.template_fields, "targets", "shard", "strategy")

    def __init__(self, *, targets: Any = None, shard: Any = None, strategy: Any = None, **kwargs):
        super().__init__(**kwargs)
        self.targets = targets
        self.shard = shard
        self.strategy = strategy

    def sweep_targets(self) -> list[SweepTarget]:
        """The validated targets (:func:`~airflow_atlas.airflow.targets.normalize_targets`)."""
        return normalize_targets(self.targets, self.shard, self.strategy)


SWEEP_RUN_FIELDS = ("sweep_ts", "sweep_dry_run", "execution_mode", "spark_conn_id")
"""The templated fields of :class:`AtlasSweepRunOperator`."""


class AtlasSweepRunOperator(AtlasBaseOperator):
    """An operator that sweeps, in the task or as a Spark application: ``sweep_ts``, ``dry_run`` (kept as
    ``sweep_dry_run``: ``dry_run`` is a method of ``BaseOperator``), ``execution_mode`` and ``spark_conn_id``
    (all templated); ``on_kill`` stops its Spark submission."""

    template_fields: Sequence[str] = (*AtlasBaseOperator.template_fields, *SWEEP_RUN_FIELDS)

    def __init__(self, *, sweep_ts: int | None = None, dry_run: bool = False, execution_mode: str | None = None,
                 spark_conn_id: str | None = None, **kwargs):
        super().__init__(**kwargs)
        self.sweep_ts = sweep_ts
        self.sweep_dry_run = dry_run
        self.execution_mode = execution_mode
        self.spark_conn_id = spark_conn_id
        self._submission = SparkSubmission()

    def spark_args(self, settings: AtlasSettings) -> dict[str, Any]:
        """What a Spark submission of this task takes besides its job: the store and Spark connections,
        the settings and the task's engine settings."""
        return {"store_conn_id": self.resolved_conn_id(settings), "spark_conn_id": self.spark_conn_id or settings.spark_conn_id,
                "settings": settings, "engine_config": self.engine_config(settings)}

    def on_kill(self) -> None:
        self._submission.kill()
