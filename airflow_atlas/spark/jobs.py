"""The two Spark jobs as strategies over one driver/executor body: what an item is, how the driver plans
the items, how an executor sweeps one, what the document sums, and the job's command-line arguments.

* :class:`TargetedSweepJob`: one item per ``(shard, strategy)`` pair, the pairs grouped into at most two Spark
  tasks per core of the application (:func:`~.args.task_count`); an executor runs the engine entry
  point :meth:`TargetedSweeper.sweep_shard` (takes the shard lock as the holder :func:`holder`, refreshes
  the lease while it sweeps, resumes from persisted progress, releases the lock). A shard whose lock is
  held elsewhere comes back ``skipped_locked``.
* :class:`FullSweepJob`: the legacy scan-based sweep of one table, one item per range of
  ``kvs.split_ranges`` (Cassandra token ranges, embedded key ranges), one Spark task per range (``parts``
  is the user's choice of parallelism). The driver takes ONE sweep timestamp for every range.
"""
from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from ..sweep.legacy import LEGACY_SUMMED_FIELDS
from ..sweep.results import RUN_TOTALS
from .args import pairs_from_shards, parse_pairs, parse_sweep_timestamps, task_count


def holder(app_id: str, shard: int, strategy: str) -> str:
    """The lock holder of one pair in one application: the SAME for every attempt of the task, so a retry
    re-acquires (and fences off) the lease its dead attempt left, instead of waiting for it to expire.
    (Speculative execution would run two attempts at once under one holder: keep spark.speculation off.)"""
    return f"spark:{app_id}:{shard}:{strategy.lower()}"


@dataclass(frozen=True)
class TargetedSweepJob:
    pairs: Sequence[Any] = ()  # any form parse_pairs takes; a tuple of (shard, STRATEGY) once constructed
    batch_limit: int | None = None
    max_iterations: int | None = None
    dry_run: bool = False
    sweep_timestamps: dict | None = None  # the run's sweep timestamp per strategy; None: each task computes its own

    name: ClassVar[str] = "targeted_sweep"
    prog: ClassVar[str] = "targeted_sweep_job.py"
    summary_line: ClassVar[str] = (
        "Atlas targeted sweep of (shard, strategy) pairs, at most two Spark tasks per core, each sweeping a group of pairs."
    )
    SUMMED: ClassVar[tuple] = RUN_TOTALS

    def __post_init__(self):
        object.__setattr__(self, "pairs", tuple(parse_pairs(self.pairs)))
        object.__setattr__(self, "sweep_timestamps", parse_sweep_timestamps(self.sweep_timestamps))

    # driver
    def plan(self, open_driver_store: Callable) -> tuple[TargetedSweepJob, list]:
        return self, list(self.pairs)

    def params(self) -> dict:
        return {"pairs": [f"{s}:{t}" for s, t in self.pairs], "batch_limit": self.batch_limit,
                "max_iterations": self.max_iterations, "dry_run": self.dry_run,
                "sweep_timestamps": self.sweep_timestamps}

    def description(self, items: list) -> str:
        return f"atlas targeted sweep of {len(items)} shard/strategy pair(s)"

    @staticmethod
    def spark_tasks(items: list, parallelism: int | None) -> int:
        """The Spark tasks of the job: contiguous groups of pairs, at most two per core (:func:`task_count`)."""
        return task_count(len(items), parallelism)

    # executor
    def describe(self, pair) -> dict:
        return {"shard": pair[0], "strategy": pair[1]}

    def sweep(self, store, pair, app_id: str) -> tuple[str, dict]:
        shard, strategy = pair
        result = store.sweeper.sweep_shard(
            shard,
            strategy,
            sweep_ts=(self.sweep_timestamps or {}).get(strategy),
            holder=holder(app_id, shard, strategy),
            max_iterations=self.max_iterations,
            batch_limit=self.batch_limit,
            dry_run=self.dry_run,
        ).to_json()
        return result["status"], result

    @staticmethod
    def sort_key(item: dict):
        return item["shard"], item["strategy"]

    # command line
    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--pairs", help='e.g. "0:CONSERVATIVE,1:THOROUGH"')
        parser.add_argument("--shards", help='with --strategies: e.g. "0-3,7"')
        parser.add_argument("--strategies", default="CONSERVATIVE,THOROUGH", help="comma list (with --shards)")
        parser.add_argument("--batch-limit", type=int, help="queue entries per iteration")
        parser.add_argument("--max-iterations", type=int, help="iterations per shard before stopping")
        parser.add_argument(
            "--sweep-ts", help='sweep timestamp per strategy, e.g. "CONSERVATIVE=1200,THOROUGH=1250" (default: computed per task)'
        )

    @classmethod
    def from_args(cls, args, parser: argparse.ArgumentParser) -> TargetedSweepJob:
        if args.pairs and args.shards:
            parser.error("give --pairs or --shards/--strategies, not both")
        if not (args.pairs or args.shards):
            parser.error("--pairs or --shards is required")
        pairs = parse_pairs(args.pairs) if args.pairs else pairs_from_shards(args.shards, args.strategies)
        return cls(pairs=pairs, batch_limit=args.batch_limit, max_iterations=args.max_iterations,
                   dry_run=args.dry_run, sweep_timestamps=args.sweep_ts)


@dataclass(frozen=True)
class FullSweepJob:
    table: str = ""
    parts: int = 4
    batch_size: int = 1000
    dry_run: bool = False
    # planned on the driver
    strategy: str | None = None
    sweep_ts: int | None = None
    ranges: tuple = ()

    name: ClassVar[str] = "full_sweep"
    prog: ClassVar[str] = "full_sweep_job.py"
    summary_line: ClassVar[str] = (
        "Atlas legacy (scan-based) sweep of one table split into ranges, one Spark task per range."
    )
    SUMMED: ClassVar[tuple] = LEGACY_SUMMED_FIELDS

    def __post_init__(self):
        from ..kvs.tables import validate_table_name

        validate_table_name(self.table, internal_ok=False)
        if int(self.parts) < 1:
            raise ValueError("parts must be at least 1")
        if int(self.batch_size) < 1:
            raise ValueError("batch_size must be at least 1")

    # driver
    def plan(self, open_driver_store: Callable) -> tuple[FullSweepJob, list]:
        """Split the table and take one sweep timestamp for all ranges (a timestamp taken earlier stays
        safe if a task is retried later)."""
        store = open_driver_store()
        try:
            strategy = store.kvs.get_metadata(self.table).strategy  # TableNotFoundError for an unknown table
            if not strategy.is_swept:
                raise ValueError(f"table {self.table!r} has sweep strategy NOTHING: it is never swept")
            sweep_ts = store.sweep_timestamps.sweep_timestamp(strategy)
            ranges = tuple(store.kvs.split_ranges(self.table, int(self.parts)))
        finally:
            store.close()
        planned = replace(self, strategy=strategy.value, sweep_ts=sweep_ts, ranges=ranges)
        return planned, list(enumerate(ranges))

    def params(self) -> dict:
        def conv(v):
            return bytes(v).hex() if isinstance(v, (bytes, bytearray)) else v

        return {"table": self.table, "strategy": self.strategy, "sweep_ts": self.sweep_ts,
                "parts_requested": int(self.parts), "batch_size": int(self.batch_size), "dry_run": self.dry_run,
                "ranges": [[r.kind, conv(r.start), conv(r.end)] for r in self.ranges]}

    def description(self, items: list) -> str:
        return f"atlas full sweep of {self.table} in {len(items)} range(s)"

    @staticmethod
    def spark_tasks(items: list, parallelism: int | None) -> int:
        """One Spark task per range (``parts`` already says how parallel the user wants the scan)."""
        return max(1, len(items))

    # executor
    def describe(self, item) -> dict:
        return {"range_index": item[0], "table": self.table}

    def sweep(self, store, item, app_id: str) -> tuple[str, dict]:
        _, scan_range = item
        result = store.legacy_sweeper.sweep_table(
            self.table, scan_range=scan_range, batch_size=self.batch_size, sweep_ts=self.sweep_ts, dry_run=self.dry_run
        ).to_json()
        return ("finished" if result.get("finished") else "unfinished"), result

    @staticmethod
    def sort_key(item: dict):
        return item["range_index"]

    # command line
    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--table", required=True)
        parser.add_argument("--parts", type=int, default=4, help="number of ranges (tasks)")
        parser.add_argument("--batch-size", type=int, default=1000, help="cells per delete batch")

    @classmethod
    def from_args(cls, args, parser: argparse.ArgumentParser) -> FullSweepJob:
        return cls(table=args.table, parts=args.parts, batch_size=args.batch_size, dry_run=args.dry_run)
