"""Compute the sweep timestamps of a run, and plan which (shard, strategy) pairs it sweeps."""
from __future__ import annotations

from typing import Any

from airflow_atlas.airflow.operators.base import AtlasBaseOperator
from airflow_atlas.airflow.settings import SWEEPABLE
from airflow_atlas.airflow.targets import as_int, batches
from airflow_atlas.errors import InvalidInputError
from airflow_atlas.kvs.api import SweepStrategy


class ComputeSweepTimestampsOperator(AtlasBaseOperator):
    """Compute the sweep timestamp of each strategy once, for a whole run.

    Returns ``{"CONSERVATIVE": ts, "THOROUGH": ts}`` (XCom ``return_value``); with ``explain`` also pushes
    XCom ``explain``: per strategy what limits the timestamp (the oldest open transaction and its age and
    holder, or the read-only window), and logs it, so "why does sweep lag?" has an answer in the task log.

    A timestamp computed earlier is never above one computed later, so every shard task of the run may use
    it even if the run takes long (it only sweeps a little less than it could).

    :param explain: also compute and push the explanation (default True).
    :param store_conn_id: see :class:`~airflow_atlas.airflow.operators.base.AtlasBaseOperator`.
    """

    template_fields = (*AtlasBaseOperator.template_fields, "explain")

    def __init__(self, *, explain: bool = True, **kwargs):
        super().__init__(**kwargs)
        self.explain = explain

    def execute_with_store(self, context, store, settings):
        timestamps = store.sweep_timestamps.all()
        self.log.info("sweep timestamps: %s", timestamps)
        if self.explain:
            explanations = {s: store.sweep_timestamps.explain(s) for s in SWEEPABLE}
            for strategy, why in explanations.items():
                self.log.info("%s sweep timestamp limited by %s: %s", strategy, why.get("limited_by"), why)
            context["ti"].xcom_push(key="explain", value=explanations)
        return timestamps


class PlanTargetedSweepOperator(AtlasBaseOperator):
    """List the (shard, strategy) pairs to sweep in this run, grouped for a mapped task group.

    Returns a list of groups, each a list of targets ``{"shard", "strategy", "sweep_ts"}``; expand a task
    group over it. When setting ``shard_count`` is above the store's shard count, the store is grown first
    (shards can only grow).

    :param sweep_timestamps: ``{"CONSERVATIVE": ts, "THOROUGH": ts}``, e.g. the output of
        :class:`ComputeSweepTimestampsOperator` (templated); computed here when omitted.
    :param shards: shards to sweep (templated); default all shards of the store. Out-of-range shards fail
        the task (no retry).
    :param strategies: strategies to sweep (templated); default setting ``strategies``.
    :param skip_idle: leave out pairs with nothing sweepable below their sweep timestamp; default setting
        ``skip_idle_shards``.
    :param group_size: pairs per group; default from the settings for the execution mode.
    :param execution_mode: ``"in_task"``, ``"spark"`` or ``"auto"`` (chooses the default group size; ``"auto"``
        uses the in-task size and decides per group when it sweeps).
    :param store_conn_id: see :class:`~airflow_atlas.airflow.operators.base.AtlasBaseOperator`.
    """

    template_fields = (
        *AtlasBaseOperator.template_fields,
        "sweep_timestamps",
        "shards",
        "strategies",
        "skip_idle",
        "group_size",
        "execution_mode",
    )

    def __init__(
        self,
        *,
        sweep_timestamps: Any = None,
        shards: Any = None,
        strategies: Any = None,
        skip_idle: bool | None = None,
        group_size: int | None = None,
        execution_mode: str | None = None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.sweep_timestamps = sweep_timestamps
        self.shards = shards
        self.strategies = strategies
        self.skip_idle = skip_idle
        self.group_size = group_size
        self.execution_mode = execution_mode

    def execute_with_store(self, context, store, settings):
        if settings.shard_count and store.number_of_shards() < settings.shard_count:
            self.log.info("growing the store to %d shards (setting shard_count)", settings.shard_count)
            store.initialize(shards=settings.shard_count)
        count = store.number_of_shards()
        shards = list(range(count)) if not self.shards else [as_int(s, "shard") for s in self.shards]
        bad = [s for s in shards if not 0 <= s < count]
        if bad:
            raise InvalidInputError(f"shard(s) {bad} out of range: the store has {count} shard(s) (0..{count - 1})")
        strategies = [SweepStrategy.parse(s).value for s in (self.strategies or settings.strategies)]
        never = [s for s in strategies if s not in SWEEPABLE]
        if never:
            raise InvalidInputError(f"strategy {never[0]} is never swept: use CONSERVATIVE and/or THOROUGH")
        timestamps = self.sweep_timestamps or store.sweep_timestamps.all()
        skip_idle = settings.skip_idle_shards if self.skip_idle is None else bool(self.skip_idle)
        targets = []
        idle = 0
        for strategy in strategies:
            if strategy not in timestamps:
                raise InvalidInputError(f"sweep_timestamps has no {strategy} entry (got {sorted(timestamps)})")
            sweep_ts = as_int(timestamps[strategy], f"sweep timestamp of {strategy}")
            for shard in shards:
                if skip_idle and not store.sweeper.has_sweepable_work(shard, strategy, sweep_ts):
                    idle += 1
                    continue
                targets.append({"shard": shard, "strategy": strategy, "sweep_ts": sweep_ts})
        size = self.group_size or settings.group_size(self.execution_mode)
        groups = batches(targets, int(size))
        self.log.info(
            "%d pair(s) to sweep in %d group(s) (%d idle pair(s) left out) of %d shard(s) x %s",
            len(targets), len(groups), idle, len(shards), strategies,
        )
        return groups
