"""Acquire and release the shard locks (one lease per (shard, strategy) pair).

A lease lasts ``lock_lease_seconds`` (setting); the sweep task refreshes it while it works. If the task
that holds it dies without releasing it (killed worker, lost node), nobody refreshes it any more and the
lock is free again when the lease expires: the next acquisition takes it over, with a larger fencing token.

The holder of a pair is ``airflow:<dag_id>:<run_id>:<strategy>:<shard>``: the same for every task of the
pair's group and for their retries, so a retried task recognises its own lock, and releasing never
touches a lock taken by another run or another sweeper.
"""
from __future__ import annotations

from typing import Any

from airflow_atlas.airflow.operators.base import AtlasTargetsOperator
from airflow_atlas.airflow.results import LockRelease
from airflow_atlas.airflow.settings import AtlasSettings
from airflow_atlas.airflow.targets import SweepTarget, holder_for
from airflow_atlas.airflow.xcom import to_xcom
from airflow_atlas.locks import Lease


class AcquireSweepLockOperator(AtlasTargetsOperator):
    """Take the lock of each target. Returns the targets with the lease recorded (XCom).

    :param targets: list of ``{"shard": int, "strategy": str, ...}`` (templated; e.g. a planning task's
        output). Or give one pair with ``shard`` and ``strategy``.
    :param shard: shard of a single pair (templated).
    :param strategy: ``"CONSERVATIVE"`` or ``"THOROUGH"`` for a single pair (templated).
    :param holder: lock holder name; default one per (DAG run, pair), see the module doc (templated).
    :param lease_seconds: lease length; default setting ``lock_lease_seconds`` (templated).
    :param wait_seconds: how long to wait for a lock held by someone else; default setting
        ``lock_wait_seconds``. A pair still locked after that is returned with ``"acquired": false`` and
        ``"held_by"`` (the sweep task then reports it ``skipped_locked``); the task does not fail.
    :param store_conn_id: see :class:`~airflow_atlas.airflow.operators.base.AtlasBaseOperator`.
    """

    template_fields = (*AtlasTargetsOperator.template_fields, "holder", "lease_seconds", "wait_seconds")

    def __init__(
        self,
        *,
        holder: str | None = None,
        lease_seconds: float | None = None,
        wait_seconds: float | None = None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.holder = holder
        self.lease_seconds = lease_seconds
        self.wait_seconds = wait_seconds

    def execute_with_store(self, context, store, settings: AtlasSettings) -> Any:
        targets = self.sweep_targets()
        lease_seconds = float(self.lease_seconds or settings.engine.lock_lease_seconds)
        wait = settings.lock_wait_seconds if self.wait_seconds is None else self.wait_seconds
        out: list[SweepTarget] = []
        taken: list[Lease] = []
        try:
            for target in targets:
                name = target.lock_name
                holder = self.holder or holder_for(context, target)
                lease = store.locks.acquire_waiting(name, holder, lease_seconds, wait)
                if lease is not None:
                    taken.append(lease)
                    out.append(target.with_lease(lease))
                    self.log.info("acquired %s as %s (token %d)", name, holder, lease.token)
                else:
                    state = store.locks.describe(name)
                    held_by = state.holder if state is not None else None
                    out.append(target.with_(lock=name, holder=holder, acquired=False, held_by=held_by))
                    self.log.warning("%s is held by %s: this pair is skipped in this run", name, held_by)
        except BaseException:
            for lease in taken:  # do not leave half a group locked when this task fails
                try:
                    store.locks.release(lease)
                except Exception as exc:
                    self.log.warning("could not release %s after a failure (it will expire): %s", lease.name, exc)
            raise
        return to_xcom(out)


class ReleaseSweepLockOperator(AtlasTargetsOperator):
    """Release the locks this run's holder owns for the targets; idempotent (a lock already released,
    expired and taken by someone else, or never taken is left alone). Returns one
    :class:`~airflow_atlas.airflow.results.LockRelease` per target (``shard``, ``strategy``, ``lock``,
    ``"released": true|false``).

    :param targets: the group's targets (templated), or ``shard`` + ``strategy``.
    :param holder: the holder to release for; default the (DAG run, pair) holder (templated).
    :param store_conn_id: see :class:`~airflow_atlas.airflow.operators.base.AtlasBaseOperator`.

    In a group, run it as a teardown (or with ``trigger_rule="all_done"``) so it also runs when the sweep
    failed.
    """

    template_fields = (*AtlasTargetsOperator.template_fields, "holder")

    def __init__(self, *, holder: str | None = None, **kwargs):
        super().__init__(**kwargs)
        self.holder = holder

    def execute_with_store(self, context, store, settings: AtlasSettings) -> Any:
        out: list[LockRelease] = []
        for target in self.sweep_targets():
            name = target.lock_name
            holder = self.holder or holder_for(context, target)
            released = store.locks.release_held_by(name, holder)
            self.log.info("%s: %s", name, "released" if released else f"not held by {holder}")
            out.append(LockRelease(target.shard, target.strategy, name, released))
        return to_xcom(out)
