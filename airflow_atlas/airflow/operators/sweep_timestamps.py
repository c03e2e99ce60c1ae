"""Compute the sweep timestamps of a run, and plan which (shard, strategy) pairs it sweeps."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_atlas.airflow.operators.base import AtlasBaseOperator
from airflow_atlas.airflow.results import SweepTimestamps
from airflow_atlas.airflow.settings import EXECUTION_MODES, AtlasSettings
from airflow_atlas.airflow.targets import SweepTarget, batches
from airflow_atlas.airflow.templated import templated_int
from airflow_atlas.airflow.xcom import to_xcom
from airflow_atlas.errors import InvalidInputError
from airflow_atlas.kvs.tables import SWEEPABLE_STRATEGY_NAMES, SweepStrategy

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_atlas.store import AtlasStore


class ComputeSweepTimestampsOperator(AtlasBaseOperator):
    """Compute the sweep timestamp of each strategy once, for a whole run.

    Returns :class:`~airflow_atlas.airflow.results.SweepTimestamps` JSON, ``{"CONSERVATIVE": ts, "THOROUGH":
    ts}`` (XCom ``return_value``); with ``explain`` also pushes
    XCom ``explain``: per strategy what limits the timestamp (the oldest open transaction and its age and
    holder, or the read-only window), and logs it, so "why does sweep lag?" has an answer in the task log.

    A timestamp computed earlier is never above one computed later, so every shard task of the run may use
    it even if the run takes long (it only sweeps a little less than it could).

    :param explain: also compute and push the explanation (default True).
    :param store_conn_id: see :class:`~airflow_atlas.airflow.operators.base.AtlasBaseOperator`.
    """

    template_fields = (*AtlasBaseOperator.template_fields, "explain")

    def __init__(self, *, explain: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.explain = explain

    def execute_with_store(self, context: Context, store: AtlasStore, settings: AtlasSettings) -> Any:
        timestamps = SweepTimestamps(store.sweep_timestamps.all())
        self.log.info("sweep timestamps: %s", timestamps.timestamps)
        if self.explain:  # None: a template rendered empty
            explanations = {s: store.sweep_timestamps.explain(s) for s in SWEEPABLE_STRATEGY_NAMES}
            for strategy, why in explanations.items():
                self.log.info("%s sweep timestamp limited by %s: %s", strategy, why.get("limited_by"), why)
            context["ti"].xcom_push(key="explain", value=to_xcom(explanations))
        return to_xcom(timestamps)


class PlanTargetedSweepOperator(AtlasBaseOperator):
    """List the (shard, strategy) pairs to sweep in this run, grouped for a mapped task group.

    Returns a list of groups, each a list of targets (:class:`~airflow_atlas.airflow.targets.SweepTarget`
    JSON: ``shard``, ``strategy``, ``sweep_ts``, ``execution_mode``); expand a task group over it.

    **Where each group is swept is decided here, once:** ``execution_mode`` ``"in_task"`` or ``"spark"``
    applies to every group; ``"auto"`` counts each group's sweepable queue entries
    (:func:`choose_execution_mode`, stopping at the threshold) and picks ``"spark"`` when they reach the
    setting ``spark_min_backlog``, else ``"in_task"``. The choice is logged and recorded in each target,
    and the sweep task follows it. When setting ``shard_count`` is above the store's shard count, the store is grown first
    (shards can only grow).

    :param sweep_timestamps: ``{"CONSERVATIVE": ts, "THOROUGH": ts}``, e.g. the output of
        :class:`ComputeSweepTimestampsOperator` (templated); computed here when omitted.
    :param shards: shards to sweep (templated); default all shards of the store. Out-of-range shards fail
        the task (no retry).
    :param strategies: strategies to sweep (templated); default setting ``strategies``.
    :param skip_idle: leave out pairs with nothing sweepable below their sweep timestamp; default setting
        ``skip_idle_shards``.
    :param group_size: pairs per group; default from the settings for the execution mode (in-task:
        setting ``in_task_group_size``, whose default ``null`` sizes the groups so that the run maps at most
        ``max_groups`` of them).
    :param max_groups: the groups the DAG runs at once (its ``max_active_tis_per_dagrun``), which the
        default in-task group size fills and does not exceed; default setting ``max_parallel_groups`` (a
        DAG-shaping setting: the pipeline passes the value its DAG was built with).
    :param execution_mode: ``"in_task"``, ``"spark"`` or ``"auto"``; default setting ``execution_mode`` (also
        chooses the default group size; ``"auto"`` uses the in-task size) (templated).
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
        max_groups: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.sweep_timestamps = sweep_timestamps
        self.shards = shards
        self.strategies = strategies
        self.skip_idle = skip_idle
        self.group_size = group_size
        self.execution_mode = execution_mode
        if max_groups is not None and (isinstance(max_groups, bool) or not isinstance(max_groups, int) or max_groups < 1):
            raise InvalidInputError(f"max_groups must be a positive int, got {max_groups!r}")
        self.max_groups = max_groups

    def execute_with_store(self, context: Context, store: AtlasStore, settings: AtlasSettings) -> Any:
        if settings.shard_count and store.number_of_shards() < settings.shard_count:
            self.log.info("growing the store to %d shards (setting shard_count)", settings.shard_count)
            store.initialize(shards=settings.shard_count)
        count = store.number_of_shards()
        shards = list(range(count)) if not self.shards else self.shards
        bad = [s for s in shards if not 0 <= s < count]
        if bad:
            raise InvalidInputError(f"shard(s) {bad} out of range: the store has {count} shard(s) (0..{count - 1})")
        parsed = [SweepStrategy.parse(s) for s in (self.strategies or settings.strategies)]
        never = [s.value for s in parsed if not s.is_swept]
        if never:
            raise InvalidInputError(f"strategy {never[0]} is never swept: use CONSERVATIVE and/or THOROUGH")
        strategies = [s.value for s in parsed]
        timestamps = self.sweep_timestamps or store.sweep_timestamps.all()
        skip_idle = settings.skip_idle_shards if self.skip_idle is None else self.skip_idle
        targets = []
        idle = 0
        for strategy in strategies:
            if strategy not in timestamps:
                raise InvalidInputError(f"sweep_timestamps has no {strategy} entry (got {sorted(timestamps)})")
            sweep_ts = templated_int(timestamps[strategy], f"the sweep timestamp of {strategy}")
            if sweep_ts is None:
                raise InvalidInputError(f"sweep_timestamps has no {strategy} timestamp (got {timestamps!r})")
            for shard in shards:
                if skip_idle and not store.sweeper.has_sweepable_work(shard, strategy, sweep_ts):
                    idle += 1
                    continue
                targets.append(SweepTarget(shard=shard, strategy=strategy, sweep_ts=sweep_ts))
        mode = self.execution_mode or settings.execution_mode
        if mode not in EXECUTION_MODES:
            raise InvalidInputError(f"execution_mode must be one of {', '.join(EXECUTION_MODES)}, got {mode!r}")
        size = self.group_size or settings.group_size(mode, pairs=len(targets), max_groups=self.max_groups)
        groups = []
        for group in batches(targets, size):
            group_mode = mode
            if mode == "auto":
                group_mode, backlog = choose_execution_mode(store, group, settings.spark_min_backlog)
                self.log.info(
                    "execution_mode auto, group from %s: sweepable backlog %s%d entries, threshold "
                    "spark_min_backlog %d -> %s", group[0].label, ">= " if group_mode == "spark" else "", backlog,
                    settings.spark_min_backlog, group_mode,
                )
            groups.append([t.with_(execution_mode=group_mode) for t in group])
        self.log.info(
            "%d pair(s) to sweep in %d group(s) (%d idle pair(s) left out) of %d shard(s) x %s",
            len(targets), len(groups), idle, len(shards), strategies,
        )
        return to_xcom(groups)


def choose_execution_mode(store: AtlasStore, targets: list, threshold: int) -> tuple[str, int]:
    """``("spark", n)`` when the targets' sweepable queue entries (below each pair's sweep timestamp, after
    its progress) add up to at least ``threshold``, else ``("in_task", n)``. Counting stops at the
    threshold, so a large backlog is not read to the end just to decide."""
    total = 0
    for target in targets:
        target = SweepTarget.from_json(target)
        remaining = threshold - total
        if remaining <= 0:
            break
        total += store.sweeper.sweepable_entries(target.shard, target.strategy, target.sweep_ts, cap=remaining)
    return ("spark" if total >= threshold else "in_task"), total
