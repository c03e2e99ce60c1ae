"""Sweep *targets*: one (shard, strategy) pair as it flows from the plan to the group's sweep task.

A :class:`SweepTarget` picks up fields as it goes::

    plan  -> shard, strategy, sweep_ts, execution_mode ("in_task" | "spark": chosen once, by the plan)
    sweep -> + result (the engine's ShardSweepResult JSON - lease holder, reconciled queue rows, lag and
             backlog included -, plus the Spark task's fields in spark mode), swept_tables (the tombstones per
             table, for the asset events)

It crosses XCom as JSON exactly once per task: ``SweepTarget.from_json`` on the way in (validating: bad
input fails the task without retries), ``airflow_atlas.serialisation.to_json`` on the way out (every field, None stays None).
Operators accept a list of targets (``targets=``) or one pair (``shard=``, ``strategy=``). Nothing secret
ever goes into a target.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from airflow_atlas.errors import InvalidInputError
from airflow_atlas.kvs.tables import SweepStrategy
from airflow_atlas.sweep.queue.constants import MAX_SHARDS
from airflow_atlas.sweep.targeted import TargetedSweeper
from airflow_atlas.validation import check_int

SKIPPED = "skipped_locked"
SWEEP_MODES = ("in_task", "spark")
"""Where a group is swept; the setting's third value, ``auto``, is resolved to one of these by the plan."""


def _strategy(value: Any) -> str:
    strategy = SweepStrategy.parse(value)
    if not strategy.is_swept:
        raise InvalidInputError(f"strategy {strategy.value} is never swept: use CONSERVATIVE or THOROUGH")
    return strategy.value


def _shard(value: Any) -> int:
    return check_int(value, "shard", 0, MAX_SHARDS - 1)


@dataclass(frozen=True)
class SweepTarget:
    shard: int
    strategy: str
    sweep_ts: int | None = None
    execution_mode: str | None = None
    result: dict | None = None
    swept_tables: list | None = None  # assets.TableTombstones JSON, from the result (none for a dry run)

    def __post_init__(self) -> None:
        object.__setattr__(self, "shard", _shard(self.shard))
        object.__setattr__(self, "strategy", _strategy(self.strategy))
        if self.sweep_ts is not None:
            check_int(self.sweep_ts, "sweep_ts")
        if self.execution_mode is not None and self.execution_mode not in SWEEP_MODES:
            raise InvalidInputError(f"a target's execution_mode must be one of {', '.join(SWEEP_MODES)}, got {self.execution_mode!r}")

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SweepTarget:
        if isinstance(data, SweepTarget):
            return data
        if not isinstance(data, Mapping) or "shard" not in data or "strategy" not in data:
            raise InvalidInputError(f"each target needs 'shard' and 'strategy', got {data!r}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise InvalidInputError(f"unknown target field(s) {', '.join(unknown)}; a target has {', '.join(sorted(known))}")
        return cls(**dict(data))

    def with_(self, **changes: Any) -> SweepTarget:
        return replace(self, **changes)

    @property
    def label(self) -> str:
        return f"{self.strategy}/{self.shard}"

    @property
    def lock_name(self) -> str:
        return TargetedSweeper.lock_name(self.shard, self.strategy)

    @property
    def status(self) -> str | None:
        return (self.result or {}).get("status")


def normalize_targets(targets: Any = None, shard: Any = None, strategy: Any = None) -> list[SweepTarget]:
    """Validated targets from ``targets`` (a list of dicts, or one dict) or from ``shard`` + ``strategy``."""
    if targets is not None and (shard is not None or strategy is not None):
        raise InvalidInputError("pass either targets or shard and strategy, not both")
    if targets is None:
        if shard is None or strategy is None:
            raise InvalidInputError("name what to sweep: targets=[{'shard': 0, 'strategy': 'THOROUGH'}] or shard= and strategy=")
        targets = [{"shard": shard, "strategy": strategy}]
    if isinstance(targets, (Mapping, SweepTarget)):
        targets = [targets]
    if isinstance(targets, (str, bytes)) or not isinstance(targets, Iterable):
        raise InvalidInputError(f"targets must be a list of {{'shard', 'strategy'}} dicts, got {type(targets).__name__}")
    return [SweepTarget.from_json(t) for t in targets]


def flat_targets(groups: Any) -> list[SweepTarget]:
    """Targets from a list of groups. (Pulled from outside a mapped task group, the outputs of its task
    come as a list per instance, except with a single instance, whose output comes alone.)"""
    out: list[SweepTarget] = []
    for item in groups or []:
        if isinstance(item, Mapping):
            out.append(SweepTarget.from_json(item))
        elif item is not None:
            out.extend(SweepTarget.from_json(t) for t in item if isinstance(t, Mapping))
    return out


def holder_for(context: Mapping, target: SweepTarget) -> str:
    """The lock holder of a pair within one DAG run, ``airflow:<dag_id>:<run_id>:<strategy>:<shard>``: the
    same for every try of the pair's sweep task (a retry takes over the lease a dead try left), distinct
    between runs, DAGs and pairs."""
    ti = context["ti"]
    return f"airflow:{ti.dag_id}:{ti.run_id}:{target.strategy}:{target.shard}"


def batches(targets: list, size: int) -> list[list]:
    """Split targets into groups of at most ``size`` (one mapped task group each)."""
    if size < 1:
        raise InvalidInputError("group size must be at least 1")
    return [targets[i : i + size] for i in range(0, len(targets), size)]


def label(targets: Any) -> str:
    """Short label of a group for map_index_template: ``THOROUGH/3`` or ``CONSERVATIVE/0..15 (16)``."""
    try:
        items = normalize_targets(targets)
    except InvalidInputError:
        return "?"
    if len(items) == 1:
        return items[0].label
    return f"{len(items)} pairs from {items[0].label}"
