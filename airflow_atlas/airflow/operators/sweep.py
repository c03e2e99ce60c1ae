"""Sweep shards (targeted sweep), in the task itself or as a Spark job, and reconcile the sweep queue."""
from __future__ import annotations

from dataclasses import asdict
from typing import Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from airflow_atlas.airflow.faults import maybe_fail
from airflow_atlas.airflow.metrics import emit_shard_metrics
from airflow_atlas.airflow.operators.base import AtlasBaseOperator
from airflow_atlas.airflow.operators.locks import release_own
from airflow_atlas.airflow.settings import EXECUTION_MODES
from airflow_atlas.airflow.targets import as_int, holder_for, lease_from, lock_name, normalize_targets
from airflow_atlas.errors import InvalidInputError, LockNotHeldError, TableNotFoundError
from airflow_atlas.sweep.lease_keeper import LeaseKeeper

SKIPPED = "skipped_locked"


class SweepShardOperator(AtlasBaseOperator):
    """Run targeted sweep on (shard, strategy) pairs until each is caught up to its sweep timestamp,
    blocked by a transaction that committed too late, or ``max_iterations`` is reached.

    Returns the targets, each with ``"result"``: the engine's ``ShardSweepResult.to_json()`` (status
    ``caught_up | blocked | iteration_limit | skipped_locked | dry_run``, iterations, progress before and
    after, cells tombstoned, aborted writes deleted, per-table counts, duration).

    Locks: a target carrying a lease from :class:`~airflow_atlas.airflow.operators.locks.AcquireSweepLockOperator`
    is swept under that lease, refreshed in the background every third of the lease while the sweep runs
    (in Spark mode too, for the whole job). A lease that expired meanwhile (e.g. during a retry delay) is
    re-acquired by the same holder when free; a target whose lock another holder has is reported
    ``skipped_locked``. A target without lease fields (standalone use) is swept under a lock the engine
    takes and releases itself. ``on_kill`` releases the leases in use; if the process dies outright, the
    lease expires after ``lock_lease_seconds``.

    Isolation: within one task the pairs are swept one after the other; a failing pair does not stop the
    others, and the task fails at the end naming every failed pair (so its retry re-runs them; pairs
    already caught up cost one read). Bad input (shard out of range, strategy NOTHING) fails without
    retries.

    :param targets: list of targets (templated), e.g. a planning or acquire task's output; or one pair with
        ``shard`` and ``strategy``.
    :param shard: shard of a single pair (templated).
    :param strategy: ``"CONSERVATIVE"`` or ``"THOROUGH"`` of a single pair (templated).
    :param sweep_ts: sweep timestamp for targets that carry none (templated); default computed per pair.
    :param batch_limit: queue entries per iteration; default setting ``batch_limit`` (templated).
    :param max_iterations: iterations per pair; default setting ``max_iterations_per_shard`` (templated).
    :param dry_run: read and decide, but write nothing to tables, queue or progress (templated).
    :param tables: accepted for forward compatibility and passed to the engine; the queue is shared by all
        tables of a shard, so a pair's progress always covers every table (templated).
    :param execution_mode: ``"in_task"`` (the engine runs here), ``"spark"`` (one Spark job for all the
        targets of this task, via ``airflow_atlas.airflow.spark_submit.submit_targeted_sweep``) or ``"auto"``
        (``"spark"`` when the targets' sweepable backlog is at least the setting ``spark_min_backlog``, else
        ``"in_task"``); default setting ``execution_mode`` (templated).
    :param spark_conn_id: Spark connection for ``"spark"`` mode; default setting ``spark_conn_id``.
    :param store_conn_id: see :class:`~airflow_atlas.airflow.operators.base.AtlasBaseOperator`.
    """

    template_fields = (
        *AtlasBaseOperator.template_fields,
        "targets",
        "shard",
        "strategy",
        "sweep_ts",
        "batch_limit",
        "max_iterations",
        "dry_run",
        "tables",
        "execution_mode",
        "spark_conn_id",
    )

    def __init__(
        self,
        *,
        targets: Any = None,
        shard: Any = None,
        strategy: Any = None,
        sweep_ts: int | None = None,
        batch_limit: int | None = None,
        max_iterations: int | None = None,
        dry_run: bool = False,
        tables: list[str] | None = None,
        execution_mode: str | None = None,
        spark_conn_id: str | None = None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.targets = targets
        self.shard = shard
        self.strategy = strategy
        self.sweep_ts = sweep_ts
        self.batch_limit = batch_limit
        self.max_iterations = max_iterations
        self.dry_run = dry_run
        self.tables = tables
        self.execution_mode = execution_mode
        self.spark_conn_id = spark_conn_id
        self._in_use: dict[str, Any] = {}
        self._kill_conn: tuple[str, Any] | None = None
        self._spark_context = None

    # ----- execution -------------------------------------------------------------------------------
    def execute_with_store(self, context, store, settings):
        targets = normalize_targets(self.targets, self.shard, self.strategy)
        for target in targets:
            if target.get("sweep_ts") is None and self.sweep_ts is not None:
                target["sweep_ts"] = as_int(self.sweep_ts, "sweep_ts")
        for target in targets:
            store.sweeper.check_sweep_ts(target.get("sweep_ts"))  # never one from the future
        mode = self.execution_mode or settings.execution_mode
        if mode not in EXECUTION_MODES:
            raise InvalidInputError(f"execution_mode must be one of {', '.join(EXECUTION_MODES)}, got {mode!r}")
        if self.tables:
            known = store.user_tables()
            unknown = sorted(set(self.tables) - set(known))
            if unknown:
                raise TableNotFoundError(f"unknown table(s): {', '.join(unknown)}")
        self._kill_conn = (self.resolved_conn_id(settings), self.engine_config(settings))
        self._in_use.clear()  # the operator object may be reused by a retry in the same process
        if mode == "auto":
            mode, backlog = choose_execution_mode(store, targets, settings.spark_min_backlog)
            self.log.info(
                "execution_mode auto: sweepable backlog %s%d entries, threshold spark_min_backlog %d -> %s",
                ">= " if mode == "spark" else "", backlog, settings.spark_min_backlog, mode,
            )
        if mode == "spark":
            out = self._sweep_spark(context, store, settings, targets)
        else:
            out = self._sweep_in_task(context, store, settings, targets)
        for entry in out:
            entry["execution_mode"] = mode
        return out

    def _options(self, settings) -> dict:
        options = {
            # None or 0 (what a form pushes to XCom for "empty") means: the setting.
            "batch_limit": as_int(self.batch_limit, "batch_limit") if self.batch_limit not in (None, 0, "0", "") else settings.batch_limit,
            "max_iterations": as_int(self.max_iterations, "max_iterations")
            if self.max_iterations not in (None, 0, "0", "")
            else settings.max_iterations_per_shard,
            "dry_run": bool(self.dry_run),
            "tables": list(self.tables) if self.tables else None,
        }
        if not 1 <= options["batch_limit"] <= 100_000:
            raise InvalidInputError(f"batch_limit must be between 1 and 100000, got {options['batch_limit']}")
        if options["max_iterations"] < 1:
            raise InvalidInputError(f"max_iterations must be at least 1, got {options['max_iterations']}")
        return options

    def _sweep_in_task(self, context, store, settings, targets):
        options = self._options(settings)
        lease_seconds = float(settings.lock_lease_seconds)
        out, failed = [], []
        for target in targets:
            label = f"{target['strategy']}/{target['shard']}"
            try:
                result = self._sweep_one(context, store, target, options, lease_seconds)
            except (InvalidInputError, TableNotFoundError):
                raise
            except Exception as exc:
                self.log.exception("sweeping %s failed", label)
                failed.append(f"{label}: {type(exc).__name__}: {exc}")
                continue
            self.log.info(
                "%s: %s after %d iteration(s), progress %s -> %s, %d cell(s) tombstoned, %d aborted write(s) deleted",
                label, result["status"], result.get("iterations", 0), result.get("old_progress"),
                result.get("new_progress"), result.get("cells_tombstoned", 0), result.get("aborted_writes_deleted", 0),
            )
            out.append({**target, "result": result})
            emit_shard_metrics(store, target, result)
        if failed:
            raise AirflowException(f"{len(failed)} of {len(targets)} pair(s) failed: " + "; ".join(failed))
        return out

    def _sweep_one(self, context, store, target, options, lease_seconds) -> dict:
        shard, strategy = target["shard"], target["strategy"]
        if target.get("acquired") is False:
            return {"shard": shard, "strategy": strategy, "status": SKIPPED, "lock_holder": target.get("held_by")}
        lease = lease_from(target)
        if lease is None:  # standalone: the engine takes and releases the lock itself
            maybe_fail("sweep_shard", context["ti"].try_number, shard=shard, strategy=strategy)
            return store.sweeper.sweep_shard(
                shard, strategy, sweep_ts=target.get("sweep_ts"), holder=holder_for(context, target), **_engine(options)
            ).to_json()
        lease = _ensure_lease(store, lease, lease_seconds)
        if lease is None:
            state = store.locks.describe(lock_name(target))
            return {"shard": shard, "strategy": strategy, "status": SKIPPED, "lock_holder": getattr(state, "holder", None)}
        # Known to on_kill while in use. Kept there when a timeout or termination (BaseException, not
        # Exception) interrupts the sweep: Airflow calls on_kill after this frame has unwound.
        self._in_use[lease.name] = lease
        try:
            with LeaseKeeper(store.locks, lease, lease_seconds):
                maybe_fail("sweep_shard", context["ti"].try_number, shard=shard, strategy=strategy)
                result = store.sweeper.sweep_shard(
                    shard, strategy, sweep_ts=target.get("sweep_ts"), lease=lease, **_engine(options)
                )
        except Exception:
            self._in_use.pop(lease.name, None)
            raise
        self._in_use.pop(lease.name, None)
        return result.to_json()

    def _sweep_spark(self, context, store, settings, targets):
        """One Spark application for all the targets (``submit_targeted_sweep``).

        The Spark job takes each pair's lock itself (as its own holder) and computes the sweep timestamp
        in the executor, so the group's leases are handed over: released right before the submission. A
        pair whose lock someone else takes in between comes back ``skipped_locked``."""
        from airflow_atlas.airflow.hooks.atlas import AtlasHook
        from airflow_atlas.airflow.spark_submit import cluster_options, submit_targeted_sweep

        options = self._options(settings)
        out: list[dict] = []
        pairs: list[dict] = []
        for target in targets:
            if target.get("acquired") is False:
                out.append({**target, "result": {"shard": target["shard"], "strategy": target["strategy"], "status": SKIPPED}})
                continue
            maybe_fail("sweep_shard", context["ti"].try_number, shard=target["shard"], strategy=target["strategy"])
            pairs.append(target)
        if not pairs:
            return out
        for target in pairs:
            if lease_from(target) is not None:
                release_own(store, lock_name(target), target["holder"])
        with AtlasHook(self.resolved_conn_id(settings)) as hook:
            url = hook.get_store_url()  # holds the password: goes to the Spark helper only
        # Known to on_kill while the job runs; left set when a timeout or termination (BaseException)
        # interrupts it, because Airflow calls on_kill after this frame has unwound.
        self._spark_context = context
        try:
            document = submit_targeted_sweep(
                context,
                spark_conn_id=self.spark_conn_id or settings.spark_conn_id,
                store_url=url,
                pairs=[{"shard": t["shard"], "strategy": t["strategy"]} for t in pairs],
                batch_limit=options["batch_limit"],
                max_iterations=options["max_iterations"],
                dry_run=options["dry_run"],
                settings=self.engine_config(settings).to_json(),
                **cluster_options(settings),
                sweep_timestamps={
                    t["strategy"]: t["sweep_ts"] for t in pairs if t.get("sweep_ts") is not None
                }
                or None,
            )
        except Exception:
            self._spark_context = None
            raise
        self._spark_context = None
        results = {(r["shard"], r["strategy"]): r for r in document.get("results", [])}
        self.log.info("Spark job %s: %s", document.get("app_id"), document.get("summary"))
        for target in pairs:
            result = results.get((target["shard"], target["strategy"]))
            out.append({**target, "result": result})
            emit_shard_metrics(store, target, result)
        return out

    # ----- kill ------------------------------------------------------------------------------------
    def on_kill(self) -> None:
        """Stop the Spark submission if one runs; release the leases in use (with a fresh connection:
        the task's own may be mid-request)."""
        if self._spark_context is not None:
            from airflow_atlas.airflow.spark_submit import kill_submission

            kill_submission(self._spark_context)
        leases = list(self._in_use.values())
        if not leases or self._kill_conn is None:
            return
        from airflow_atlas.airflow.hooks.atlas import AtlasHook

        conn_id, config = self._kill_conn
        try:
            with AtlasHook(conn_id, config=config) as hook:
                store = hook.get_store()
                for lease in leases:
                    released = release_own(store, lease.name, lease.holder)
                    self.log.warning("task killed: released %s (%s)", lease.name, released)
        except Exception as exc:  # the leases expire on their own
            self.log.warning("task killed: could not release %d lease(s), they expire on their own: %s", len(leases), exc)


def _engine(options: dict) -> dict:
    return {k: options[k] for k in ("batch_limit", "max_iterations", "dry_run", "tables")}


def _ensure_lease(store, lease, lease_seconds: float):
    """Refresh ``lease``; if it was lost (expired, e.g. during a retry delay, or released by ``on_kill``),
    take the lock again as the same holder when it is free. None when someone else holds it."""
    try:
        return store.locks.refresh(lease, lease_seconds)
    except LockNotHeldError:
        return store.locks.acquire(lease.name, lease.holder, lease_seconds)


class ReconcileSweepQueueOperator(AtlasBaseOperator):
    """Remove sweep-queue rows wholly below each pair's persisted progress (what an interrupted run can
    leave behind; the sweep iteration itself cleans as it goes). Idempotent; reads the progress itself.

    Returns the targets with ``"reconciled"``: rows deleted by kind. Pairs whose sweep was skipped (lock
    held elsewhere) or a dry run are left alone.

    :param targets: the group's targets, e.g. the sweep task's output (templated); or ``shard`` + ``strategy``.
    :param store_conn_id: see :class:`~airflow_atlas.airflow.operators.base.AtlasBaseOperator`.
    """

    template_fields = (*AtlasBaseOperator.template_fields, "targets", "shard", "strategy")

    def __init__(self, *, targets: Any = None, shard: Any = None, strategy: Any = None, **kwargs):
        super().__init__(**kwargs)
        self.targets = targets
        self.shard = shard
        self.strategy = strategy

    def execute_with_store(self, context, store, settings):
        out = []
        for target in normalize_targets(self.targets, self.shard, self.strategy):
            status = (target.get("result") or {}).get("status")
            if status in (SKIPPED, "dry_run"):
                out.append({**target, "reconciled": None})
                continue
            progress = store.queue.progress.get_progress(target["shard"], target["strategy"])
            cleaned = store.queue.cleaner.reconcile(target["shard"], target["strategy"], progress)
            report = {**asdict(cleaned), "rows_deleted": cleaned.rows_deleted, "progress": progress}
            self.log.info("%s/%s: reconciled below progress %d: %s", target["strategy"], target["shard"], progress, report)
            out.append({**target, "reconciled": report})
        return out


class SweepSummaryOperator(BaseOperator):
    """Last task of a sweep run: totals over every pair, and the run's verdict.

    Compares the planned groups with the groups that finished (e.g. the reconcile task's mapped output);
    a planned pair with no outcome (its sweep or reconcile failed for good) fails this task, naming the
    pairs, so the DAG run shows failed while every other pair was swept and released. Does not open the
    store.

    :param planned: the planning task's output: a list of groups of targets (templated).
    :param finished: the outputs of the groups that finished: a list of lists of targets with
        ``"result"`` (templated).

    Returns ``{"pairs", "by_status", "cells_tombstoned", "aborted_writes_deleted", ..., "tables"}``.
    """

    template_fields = ("planned", "finished")
    _SUMMED = ("iterations", "entries_read", "cells_tombstoned", "sentinels_written", "aborted_writes_deleted",
               "transactions_aborted", "queue_rows_cleaned")

    def __init__(self, *, planned: Any = None, finished: Any = None, **kwargs):
        super().__init__(**kwargs)
        self.planned = planned
        self.finished = finished

    def execute(self, context):
        if self.planned is None:
            raise AirflowFailException("nothing was planned: an upstream task failed (see the validate and plan tasks)")
        planned = {(t["shard"], t["strategy"]) for t in _flat(self.planned)}
        done = {(t["shard"], t["strategy"]): t for t in _flat(self.finished)}
        summary: dict[str, Any] = {"pairs": len(planned), "by_status": {}, "tables": {}, "reclaimed_queue_rows": 0}
        summary.update({k: 0 for k in self._SUMMED})
        for target in done.values():
            result = target.get("result") or {}
            status = result.get("status", "unknown")
            summary["by_status"][status] = summary["by_status"].get(status, 0) + 1
            for key in self._SUMMED:
                summary[key] += int(result.get(key) or 0)
            for table, n in (result.get("tables") or {}).items():
                summary["tables"][table] = summary["tables"].get(table, 0) + int(n)
            summary["reclaimed_queue_rows"] += int((target.get("reconciled") or {}).get("rows_deleted") or 0)
        missing = sorted(planned - set(done))
        summary["failed_pairs"] = [f"{strategy}/{shard}" for shard, strategy in missing]
        self.log.info("sweep summary: %s", summary)
        if missing:  # retrying this task would not re-run the pairs: fail without retries
            raise AirflowFailException(
                f"{len(missing)} of {len(planned)} (shard, strategy) pair(s) did not finish: "
                + ", ".join(summary["failed_pairs"]) + " (see their tasks' logs); the other pairs were swept"
            )
        return summary


def _flat(groups: Any) -> list[dict]:
    """Targets from a list of groups. (Pulled from outside a mapped task group, the outputs of its task
    come as a list per instance, except with a single instance, whose output comes alone.)"""
    out: list[dict] = []
    for item in groups or []:
        if isinstance(item, dict):
            out.append(item)
        elif item is not None:
            out.extend(t for t in item if isinstance(t, dict))
    return out


def choose_execution_mode(store, targets: list[dict], threshold: int) -> tuple[str, int]:
    """``("spark", n)`` when the targets' sweepable queue entries (below each pair's sweep timestamp, after
    its progress) add up to at least ``threshold``, else ``("in_task", n)``. Counting stops at the
    threshold, so a large backlog is not read to the end just to decide."""
    total = 0
    for target in targets:
        if target.get("acquired") is False:
            continue
        remaining = threshold - total
        if remaining <= 0:
            break
        shard, strategy = target["shard"], target["strategy"]
        sweep_ts = target.get("sweep_ts")
        if sweep_ts is None:
            sweep_ts = store.sweep_timestamps.sweep_timestamp(strategy)
        progress = store.queue.progress.get_progress(shard, strategy)
        total += store.queue.reader.count_entries(shard, strategy, progress, max_exclusive=sweep_ts, cap=remaining)
    return ("spark" if total >= threshold else "in_task"), total
