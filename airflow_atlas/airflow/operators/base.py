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
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from airflow.sdk import BaseOperator

from airflow_atlas.airflow.execution.spark_types import RunSettings
from airflow_atlas.airflow.failures import airflow_failures
from airflow_atlas.airflow.hooks.atlas import AtlasHook
from airflow_atlas.airflow.settings import AtlasSettings
from airflow_atlas.airflow.targets import SweepTarget, normalize_targets
from airflow_atlas.airflow.templated import convert_templated_fields
from airflow_atlas.errors import TableNotFoundError
from airflow_atlas.kvs.address import StoreAddress
from airflow_atlas.timestamps import TIMESTAMP_TABLE

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_atlas.config import StoreConfig
    from airflow_atlas.store import AtlasStore


class Killable(Protocol):
    """What ``on_kill`` stops: a Spark runner or an execution mode."""

    def kill(self) -> bool: ...


KillableT = TypeVar("KillableT", bound=Killable)


class AtlasBaseOperator(BaseOperator):
    template_fields: Sequence[str] = ("store_conn_id", "store_config")
    ui_color = "#e8f1fb"

    def __init__(self, *, store_conn_id: str | None = None, store_config: dict | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.store_conn_id = store_conn_id
        self.store_config = store_config
        self._hook: AtlasHook | None = None

    # ----- helpers for subclasses ------------------------------------------------------------------
    def resolved_conn_id(self, settings: AtlasSettings) -> str:
        return self.store_conn_id or settings.store_conn_id

    def engine_config(self, settings: AtlasSettings) -> StoreConfig:
        """The task's engine settings below the store: the Variable and this task's ``store_config``."""
        return settings.engine_config(settings.task_layer(self.store_config))

    @contextmanager
    def open_hook(self, settings: AtlasSettings) -> Iterator[AtlasHook]:
        """THE store hook of the task (one per task): kept while it is open, for :meth:`store_address` and
        :meth:`store_settings`; it opens the store when asked (``get_store``) and closes it on the way out."""
        with AtlasHook(self.resolved_conn_id(settings), config=self.engine_config(settings)) as hook:
            self._hook = hook
            try:
                yield hook
            finally:
                self._hook = None

    @contextmanager
    def open_store(self, settings: AtlasSettings) -> Iterator[AtlasStore]:
        with self.open_hook(settings) as hook:
            yield hook.get_store()

    def _open_hook(self) -> AtlasHook:
        if self._hook is None:
            raise RuntimeError("the task's store hook is only known while it is open (open_hook)")
        return self._hook

    def store_address(self) -> StoreAddress:
        """The store's address for a Spark job, from the task's own hook (``AtlasHook.job_address``: without
        its settings, which travel resolved in :meth:`store_settings`). It holds the password: it goes to a
        Spark runner only."""
        return self._open_hook().job_address()

    def store_settings(self) -> dict:
        """The store's resolved engine settings (the task's, with the connection's extras), as JSON: the
        one copy a Spark job gets, the same values the task's store runs with."""
        return self._open_hook().resolved_config().to_json()

    # ----- execution -------------------------------------------------------------------------------
    def execute(self, context: Context) -> Any:
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

    def execute_with_store(self, context: Context, store: AtlasStore, settings: AtlasSettings) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError


class AtlasTargetsOperator(AtlasBaseOperator):
    """An operator that works on (shard, strategy) targets: ``targets`` (a list of target dicts, e.g. a
    planning task's group) or one pair given as ``shard`` + ``strategy`` (all three templated)."""

    template_fields: Sequence[str] = (*AtlasBaseOperator.template_fields, "targets", "shard", "strategy")

    def __init__(self, *, targets: Any = None, shard: Any = None, strategy: Any = None, **kwargs: Any) -> None:
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
    (all templated); ``on_kill`` stops its Spark job (:meth:`killing`)."""

    template_fields: Sequence[str] = (*AtlasBaseOperator.template_fields, *SWEEP_RUN_FIELDS)

    def __init__(self, *, sweep_ts: int | None = None, dry_run: bool = False, execution_mode: str | None = None,
                 spark_conn_id: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.sweep_ts = sweep_ts
        self.sweep_dry_run = dry_run
        self.execution_mode = execution_mode
        self.spark_conn_id = spark_conn_id
        self._killable: Killable | None = None

    def run_settings(self, settings: AtlasSettings) -> RunSettings:
        """What a Spark runner of this task gets besides its job and the store address (while the task's
        hook is open): the Spark connection, the store's resolved engine settings (:meth:`store_settings`)
        and the Spark-on-a-cluster settings."""
        return RunSettings.of(self.spark_conn_id or settings.spark_conn_id, settings, self.store_settings())

    def killing(self, what: KillableT) -> KillableT:
        """Remember ``what`` (a Spark runner or an execution mode: it has ``kill()``) for ``on_kill``; kept
        after a timeout or termination interrupts the run, because Airflow calls ``on_kill`` after that."""
        self._killable = what
        return what

    def on_kill(self) -> None:
        if self._killable is not None:
            self._killable.kill()
