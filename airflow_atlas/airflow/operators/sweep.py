"""Sweep a group of (shard, strategy) pairs (targeted sweep) - in the task or as a Spark job, see
:mod:`airflow_atlas.airflow.execution` - and summarise a run."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from airflow_atlas.airflow.execution import run_mode
from airflow_atlas.airflow.execution.deferred import DeferredMode
from airflow_atlas.airflow.execution.in_task import InTaskMode
from airflow_atlas.airflow.execution.outcome import SweepMode, SweepOptions
from airflow_atlas.airflow.execution.spark import SparkMode, is_connect, runner_for
from airflow_atlas.airflow.execution.spark_types import resolve_connection
from airflow_atlas.airflow.failures import airflow_failures
from airflow_atlas.airflow.metrics import emit_shard_metrics
from airflow_atlas.airflow.operators.base import SWEEP_RUN_FIELDS, AtlasSweepRunOperator, AtlasTargetsOperator
from airflow_atlas.airflow.reports import run_swept_tables
from airflow_atlas.airflow.results import SweepSummary
from airflow_atlas.airflow.settings import AtlasSettings
from airflow_atlas.airflow.targets import SWEEP_MODES, SweepTarget, flat_targets, holder_for
from airflow_atlas.airflow.templated import convert_templated_fields
from airflow_atlas.airflow.xcom import to_xcom
from airflow_atlas.config import check_setting
from airflow_atlas.errors import InvalidInputError
from airflow_atlas.serialisation import to_json
from airflow_atlas.settings_resolver import Layer, Rank

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_atlas.config import StoreConfig
    from airflow_atlas.store import AtlasStore


class SweepShardOperator(AtlasTargetsOperator, AtlasSweepRunOperator):
    """Sweep a group of (shard, strategy) pairs, each until it is caught up to its sweep timestamp, blocked by
    a transaction that committed too late, or ``max_iterations`` is reached: the whole of a group's work in
    ONE task - lock, sweep, reconcile, release per pair.

    The operator resolves its arguments and runs one execution mode, three interchangeable objects
    (:class:`~airflow_atlas.airflow.execution.outcome.SweepMode`): in the task
    (:class:`~airflow_atlas.airflow.execution.in_task.InTaskMode`), as one Spark application for all its
    targets (:class:`~airflow_atlas.airflow.execution.spark.SparkMode`, its runner chosen by the Spark
    connection), or that application run from the triggerer (:class:`~airflow_atlas.airflow.execution.deferred.DeferredMode`).
    All end in the engine entry point ``TargetedSweeper.sweep_shard``, which owns each pair's lease for the
    whole run: it takes the lock (waiting up to the setting ``lock_wait_seconds`` for another holder's; a
    task's ``store_config`` may set it), keeps it
    refreshed, sweeps, reconciles the pair's queue below the progress it ends with (the rows an interrupted
    clean left: ``queue_rows_reconciled``) and releases the lock, whatever happened.

    Returns the targets (:class:`~airflow_atlas.airflow.targets.SweepTarget` JSON), each with ``result``:
    the engine's ``ShardSweepResult`` JSON (status ``caught_up | blocked | iteration_limit |
    skipped_locked | dry_run``, iterations, progress before and after, cells tombstoned, aborted writes
    deleted, queue rows reconciled, per-table counts, duration, the lease's holder - for ``skipped_locked``
    the other holder, its lease's expiry and whether its process is gone), ``execution_mode`` and
    ``swept_tables``. The task log has one line per pair; each pair's metrics are sent as soon as it is done.

    Locks: in the task, each pair's holder is ``airflow:<dag_id>:<run_id>:<strategy>:<shard>`` (the same for
    every try: a retry takes over the lease a dead try left, a larger fencing token that fences it off); the
    task holds a lease only while it sweeps that pair. A timeout interrupts the engine, which releases the
    lease as it unwinds; ``on_kill`` (the task killed) lets no further pair start and releases, with a
    connection of its own (the task's may be mid-request), any lease this run's holders hold for the task's
    pairs; if the process dies outright, a lease expires after ``lock_lease_seconds`` (or is taken over by
    the retry). In Spark mode each Spark task takes its pairs' locks (holder ``spark:<app id>:<shard>:<strategy>``,
    :mod:`~airflow_atlas.airflow.execution.spark`); ``on_kill`` stops the application.

    Isolation (in the task): a failing pair does not stop the others; the task fails at the end naming
    every failed pair (so its retry re-runs them; pairs already caught up cost one read). Bad input (shard
    out of range, strategy NOTHING, unknown table) fails without retries.

    :param targets: list of targets (templated), e.g. a planning task's group; or one pair with ``shard``
        and ``strategy``.
    :param shard: shard of a single pair (templated).
    :param strategy: ``"CONSERVATIVE"`` or ``"THOROUGH"`` of a single pair (templated).
    :param sweep_ts: sweep timestamp for targets that carry none (templated); default computed per pair.
    :param batch_limit: queue entries per iteration; default setting ``batch_limit`` (templated).
    :param max_iterations: iterations per pair; default setting ``max_iterations_per_shard`` (templated).
    :param max_entries_per_second: intensity, queue entries per second per pair at most (0: unlimited): a
        fixed rate for this task (settings ``sweep_max_entries_per_second`` = it, ``sweep_latency_target`` 0: the
        application pace off); default: the settings' pace. Applied as those engine settings of this task (in
        the task and on Spark executors alike; see docs/INTENSITY.md) (templated).
    :param dry_run: read and decide, but write nothing to tables, queue or progress (templated; kept as
        ``sweep_dry_run``: ``dry_run`` is a method of ``BaseOperator``). The locks are still taken and released.
    :param execution_mode: ``"in_task"`` or ``"spark"``; default: what the plan task recorded in the
        targets (it resolves the setting's ``"auto"`` once, per group), else the setting
        ``execution_mode``, where ``"auto"`` without a plan means ``"in_task"`` (templated).
    :param spark_conn_id: Spark connection for ``"spark"`` mode; default setting ``spark_conn_id``.
    :param deferrable: on a Spark Connect connection, run the job from the triggerer (default True): the
        task defers and resumes with the job's document in ``execute_complete``; the task process never
        imports pyspark's Connect client (see :mod:`airflow_atlas.airflow.triggers.spark_connect`). False:
        the task submits it itself. Ignored in the task and on a ``spark-submit`` connection.
    :param store_conn_id: see :class:`~airflow_atlas.airflow.operators.base.AtlasBaseOperator`.
    """

    template_fields = (
        *AtlasTargetsOperator.template_fields, *SWEEP_RUN_FIELDS, "batch_limit", "max_iterations", "max_entries_per_second",
    )

    def __init__(
        self,
        *,
        batch_limit: int | None = None,
        max_iterations: int | None = None,
        max_entries_per_second: int | None = None,
        deferrable: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.deferrable = deferrable
        self.batch_limit = batch_limit
        self.max_iterations = max_iterations
        self.max_entries_per_second = max_entries_per_second
        self._kill_release: tuple[str, StoreConfig, list[tuple[str, str]]] | None = None

    def _targets(self) -> list[SweepTarget]:
        targets = self.sweep_targets()
        if self.sweep_ts is not None:
            targets = [t if t.sweep_ts is not None else t.with_(sweep_ts=self.sweep_ts) for t in targets]
        return targets

    def execute_with_store(self, context: Context, store: AtlasStore, settings: AtlasSettings) -> Any:
        targets = self._targets()
        for target in targets:
            store.sweeper.check_sweep_ts(target.sweep_ts)  # never one from the future
        options = self._options(settings)  # bad arguments fail before anything is swept
        mode = self.killing(self.sweep_mode(context, store, settings, self._mode(targets, settings)))
        if mode.name == "in_task":  # what on_kill releases: this run's holders' leases of the task's pairs
            self._kill_release = (self.resolved_conn_id(settings), self.engine_config(settings),
                                  [(t.lock_name, holder_for(context, t)) for t in targets])
        outcome = mode.sweep(context, targets, options)
        if outcome.trigger is not None:  # resumes in execute_complete; the store closes on the way out
            self.defer(trigger=outcome.trigger, method_name="execute_complete", timeout=self.execution_timeout)
        if outcome.document is not None:
            self.log.info("Spark job %s: %s", outcome.document.app_id, outcome.document.summary)
        return self._finish(targets, outcome.swept, outcome.failed, mode.name, emitted=outcome.reported)

    def sweep_mode(self, context: Context, store: AtlasStore, settings: AtlasSettings, mode: str) -> SweepMode:
        """THE execution mode object of this task: in the task; else the Spark connection decides, once,
        between the deferred Connect job and a runner (spark-submit or Connect, in the task process)."""
        if mode != "spark":
            return InTaskMode(
                store, holder_of=lambda target: holder_for(context, target),
                # each pair's metrics as soon as it is done (a task stopped later has sent the finished pairs')
                on_pair=lambda target: emit_shard_metrics(to_json(target), target.result),
            )
        run_settings = self.run_settings(settings)
        connection = resolve_connection(run_settings.spark_conn_id)
        if self.deferrable and is_connect(connection):
            return DeferredMode(run_settings, self.resolved_conn_id(settings))
        return SparkMode(runner_for(connection), run_settings, self.store_address())

    def execute_complete(self, context: Context, event: dict | None = None) -> Any:
        """Resume after the Spark Connect job ran from the triggerer (``deferrable``): the job's document
        from the trigger's event, each target's result from it (the targets are this task's own, rendered
        again, and converted as in ``execute``), the metrics, the same output as ``execute``. Opens no
        store: each result carries its pair's lag and backlog after the run."""
        with airflow_failures():
            convert_templated_fields(self)
        targets = self._targets()
        outcome = DeferredMode.finish(targets, event)
        self.log.info("Spark job %s (from the triggerer): %s", outcome.document.app_id, outcome.document.summary)
        return self._finish(targets, outcome.swept, [], "spark")

    def _finish(self, targets: list[SweepTarget], swept: list[SweepTarget], failed: list[SweepTarget],
                mode: str, *, emitted: bool = False) -> Any:
        """The task's output; the pairs' metrics first unless already ``emitted`` pair by pair (in the task).
        A Spark job's pairs report once the job's document is back: their metrics are sent here."""
        if not emitted:
            for target in swept + failed:
                emit_shard_metrics(to_json(target), target.result)
        if failed:
            raise AirflowException(
                f"{len(failed)} of {len(targets)} pair(s) failed: "
                + "; ".join(f"{t.label}: {(t.result or {}).get('error')}" for t in failed)
            )
        return to_xcom([target.with_(execution_mode=mode, swept_tables=run_swept_tables(target.result)) for target in swept])

    def engine_config(self, settings: AtlasSettings) -> StoreConfig:
        """The task's engine settings below the store: the Variable < ``store_config`` <
        ``max_entries_per_second`` (when given: the task's fixed rate, ``sweep_max_entries_per_second`` with
        ``sweep_latency_target`` 0, a layer of its own, checked by the resolver), so the in-task sweep and the
        Spark executors both follow it."""
        layers = [settings.task_layer(self.store_config)]
        if self.max_entries_per_second is not None:
            layers.append(Layer(Rank.TASK, "the operator's max_entries_per_second",
                                {"sweep_max_entries_per_second": self.max_entries_per_second,
                                 "sweep_latency_target": 0.0}))
        return settings.engine_config(*layers)

    def _mode(self, targets: list[SweepTarget], settings: AtlasSettings) -> str:
        planned = {t.execution_mode for t in targets if t.execution_mode is not None}
        if len(planned) > 1:
            raise InvalidInputError(f"the targets of one task were planned for different execution modes: {sorted(planned)}")
        why = " (auto is decided once per group by the plan task, PlanTargetedSweepOperator)"
        if self.execution_mode == "auto":
            raise InvalidInputError(f"execution_mode must be one of {', '.join(SWEEP_MODES)}, got 'auto'{why}")
        # auto from the setting without a plan task: the group sweeps in the task
        return run_mode(self.execution_mode or next(iter(planned), None) or settings.execution_mode, why=why)

    def _options(self, settings: AtlasSettings) -> SweepOptions:
        # None or 0 (what a form pushes to XCom for "empty") means: the setting.
        batch_limit = self.batch_limit or settings.engine.batch_limit
        max_iterations = self.max_iterations or settings.engine.max_iterations_per_shard
        batch_limit = check_setting("batch_limit", batch_limit, "the operator's batch_limit")
        max_iterations = check_setting("max_iterations_per_shard", max_iterations, "the operator's max_iterations")
        return SweepOptions(batch_limit=batch_limit, max_iterations=max_iterations, dry_run=self.sweep_dry_run is True)

    def on_kill(self) -> None:
        """Stop what runs (the Spark application; in the task: no further pair starts) and release, with a
        connection of its own (the task's may be mid-request), the leases this run's holders hold for the
        task's pairs (by holder: idempotent, another holder's lease is left alone)."""
        super().on_kill()
        if self._kill_release is None:
            return
        from airflow_atlas.airflow.hooks.atlas import AtlasHook

        conn_id, config, locks = self._kill_release
        try:
            with AtlasHook(conn_id, config=config) as hook:
                store = hook.get_store()
                for name, holder in locks:
                    if store.locks.release_held_by(name, holder):
                        self.log.warning("task killed: released %s", name)
        except Exception as exc:  # the leases expire on their own
            self.log.warning("task killed: could not release the leases, they expire on their own: %s", exc)


class SweepSummaryOperator(BaseOperator):
    """Last task of a sweep run: totals over every pair, and the run's verdict.

    Compares the planned groups with the groups that finished (the sweep task's mapped output); a planned
    pair with no outcome (its group's sweep task failed for good) fails this task, naming the pairs, so the
    DAG run shows failed while every other pair was swept and released. Does not open the store.

    :param planned: the planning task's output: a list of groups of targets (templated).
    :param finished: the outputs of the groups that finished: a list of lists of targets with
        ``"result"`` (templated).

    Returns :class:`~airflow_atlas.airflow.results.SweepSummary` JSON: ``{"pairs", "by_status", "tables",
    "reclaimed_queue_rows"`` (the pairs' ``queue_rows_reconciled``)``, "cells_tombstoned",
    "aborted_writes_deleted", ..., "failed_pairs"}``.
    """

    template_fields = ("planned", "finished")

    def __init__(self, *, planned: Any = None, finished: Any = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.planned = planned
        self.finished = finished

    def execute(self, context: Context) -> Any:
        if self.planned is None:
            raise AirflowFailException("nothing was planned: an upstream task failed (see the validate and plan tasks)")
        planned = {(t.shard, t.strategy) for t in flat_targets(self.planned)}
        done = {(t.shard, t.strategy): t for t in flat_targets(self.finished)}
        summary = SweepSummary(pairs=len(planned))
        for target in done.values():
            summary.add(target.result or {})
        missing = sorted(planned - set(done))
        summary.failed_pairs = [f"{strategy}/{shard}" for shard, strategy in missing]
        self.log.info("sweep summary: %s", summary)
        if missing:  # retrying this task would not re-run the pairs: fail without retries
            raise AirflowFailException(
                f"{len(missing)} of {len(planned)} (shard, strategy) pair(s) did not finish: "
                + ", ".join(summary.failed_pairs) + " (see their tasks' logs); the other pairs were swept"
            )
        return to_xcom(summary)

