"""THE Spark job type: a job is one of two strategies over one driver/executor body, each a frozen dataclass
that is parsed once, when it is built, and written out in the two forms it travels in - its command line
(:meth:`~SparkJob.to_argv`, read back by the job script's ``from_args``) and JSON (:meth:`~SparkJob.to_json`,
read back by :func:`job_from_json`: a Spark Connect request, trigger kwargs) - so the Airflow glue, the job
scripts and the Connect path all hold the same object. Besides its arguments, a job says what an item is,
how the driver plans the items, how an executor sweeps one and what the document sums.

* :class:`TargetedSweepJob` (``targeted-sweep``): one item per ``(shard, strategy)`` pair, the pairs grouped
  into at most two Spark tasks per core of the application (:func:`~.args.task_count`); an executor runs the
  engine entry point :meth:`TargetedSweeper.sweep_shard`, which owns the pair's lease for the whole run
  (taken as the holder :func:`holder`, waiting up to the setting ``lock_wait_seconds`` for another holder's;
  refreshed while it sweeps; the queue reconciled below its progress; released). A pair whose lock is held elsewhere
  comes back ``skipped_locked``.
* :class:`FullSweepJob` (``full-sweep``): the legacy scan-based sweep of one table, one item per range of
  ``kvs.split_ranges`` (Cassandra token ranges, embedded key ranges), one Spark task per range (``parts``
  is the user's choice of parallelism). The driver takes ONE sweep timestamp for every range.
"""
from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar

from ..encoding import LONG_MAX
from ..serialisation import to_json
from ..sweep.counts import ScanCounts
from ..sweep.queue.constants import MAX_BATCH_LIMIT
from ..sweep.results import RUN_TOTALS
from ..validation import check_int
from .args import pairs_from_shards, parse_pairs, parse_sweep_timestamps, task_count

if TYPE_CHECKING:
    from ..kvs.cells import ScanRange
    from ..store import AtlasStore

Pair = tuple[int, str]
"""A targeted sweep's item: (shard, strategy name)."""
Range = tuple[int, "ScanRange"]
"""A full sweep's item: (range index, the range)."""
Job = TypeVar("Job", "TargetedSweepJob", "FullSweepJob")


class SparkJob(Protocol):
    """What every job is (module doc). ``kind``: its name in requests and application names; ``name``: its
    name in the result document (``JobDocument.job``); ``prog``: its script in ``spark_jobs/``."""

    kind: ClassVar[str]
    name: ClassVar[str]
    prog: ClassVar[str]
    summary_line: ClassVar[str]
    SUMMED: ClassVar[tuple]

    def to_argv(self) -> list[str]:
        """The job's own command-line arguments (the script's ``from_args`` reads them back)."""
        ...

    def to_json(self) -> dict:
        """The job's own arguments as JSON (:func:`job_from_json` reads them back, with the ``kind``)."""
        ...

    def plan(self, open_driver_store: Callable[[], AtlasStore]) -> tuple[SparkJob, list[Any]]: ...

    def params(self) -> dict: ...

    def description(self, items: list) -> str: ...

    def spark_tasks(self, items: list, parallelism: int | None) -> int: ...

    # an item is the job's own (a Pair, a Range): Any here, exact in each job
    def describe(self, item: Any) -> dict: ...

    def sweep(self, store: AtlasStore, item: Any, app_id: str) -> tuple[str, dict]: ...

    def sort_key(self, item: dict) -> Any: ...


def _optional_int(value: Any, what: str, hi: int = LONG_MAX) -> int | None:
    return None if value is None else check_int(value, what, 1, hi)


def _from_json(cls: type[Job], data: Mapping[str, Any]) -> Job:
    """``cls`` from its JSON arguments: the request fields only (ValueError naming any other)."""
    if not isinstance(data, Mapping):
        raise ValueError(f"a {cls.kind} job is a JSON object of its arguments, got {type(data).__name__}")
    known = cls.REQUEST_FIELDS
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise ValueError(f"unknown {cls.kind} job argument(s) {', '.join(unknown)}; it takes {', '.join(known)}")
    return cls(**{key: data[key] for key in known if key in data})


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

    kind: ClassVar[str] = "targeted-sweep"
    name: ClassVar[str] = "targeted_sweep"
    prog: ClassVar[str] = "targeted_sweep_job.py"
    summary_line: ClassVar[str] = (
        "Atlas targeted sweep of (shard, strategy) pairs, at most two Spark tasks per core, each sweeping a group of pairs."
    )
    SUMMED: ClassVar[tuple] = RUN_TOTALS
    REQUEST_FIELDS: ClassVar[tuple[str, ...]] = (
        "pairs", "batch_limit", "max_iterations", "dry_run", "sweep_timestamps")

    def __post_init__(self) -> None:
        object.__setattr__(self, "pairs", tuple(parse_pairs(self.pairs)))
        object.__setattr__(self, "sweep_timestamps", parse_sweep_timestamps(self.sweep_timestamps))
        object.__setattr__(self, "batch_limit", _optional_int(self.batch_limit, "batch_limit", MAX_BATCH_LIMIT))
        object.__setattr__(self, "max_iterations", _optional_int(self.max_iterations, "max_iterations"))
        object.__setattr__(self, "dry_run", bool(self.dry_run))

    # the two forms a job travels in
    def to_json(self) -> dict:
        return {"pairs": [[s, t] for s, t in self.pairs], "batch_limit": self.batch_limit,
                "max_iterations": self.max_iterations, "dry_run": self.dry_run,
                "sweep_timestamps": self.sweep_timestamps}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TargetedSweepJob:
        return _from_json(cls, data)

    def to_argv(self) -> list[str]:
        argv = ["--pairs", ",".join(f"{s}:{t}" for s, t in self.pairs)]
        if self.batch_limit is not None:
            argv += ["--batch-limit", str(self.batch_limit)]
        if self.max_iterations is not None:
            argv += ["--max-iterations", str(self.max_iterations)]
        if self.dry_run:
            argv.append("--dry-run")
        if self.sweep_timestamps:
            argv += ["--sweep-ts", ",".join(f"{k}={v}" for k, v in sorted(self.sweep_timestamps.items()))]
        return argv

    # driver
    def plan(self, open_driver_store: Callable[[], AtlasStore]) -> tuple[TargetedSweepJob, list[Pair]]:
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
    def describe(self, pair: Pair) -> dict:
        return {"shard": pair[0], "strategy": pair[1]}

    def sweep(self, store: AtlasStore, pair: Pair, app_id: str) -> tuple[str, dict]:
        shard, strategy = pair
        result = to_json(store.sweeper.sweep_shard(
            shard,
            strategy,
            sweep_ts=(self.sweep_timestamps or {}).get(strategy),
            holder=holder(app_id, shard, strategy),
            max_iterations=self.max_iterations,
            batch_limit=self.batch_limit,
            dry_run=self.dry_run,
        ))
        return result["status"], result

    @staticmethod
    def sort_key(item: dict) -> tuple[int, str]:
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
    def from_args(cls, args: argparse.Namespace, parser: argparse.ArgumentParser) -> TargetedSweepJob:
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
    ranges: tuple[ScanRange, ...] = ()

    kind: ClassVar[str] = "full-sweep"
    name: ClassVar[str] = "full_sweep"
    prog: ClassVar[str] = "full_sweep_job.py"
    summary_line: ClassVar[str] = (
        "Atlas legacy (scan-based) sweep of one table split into ranges, one Spark task per range."
    )
    SUMMED: ClassVar[tuple] = ScanCounts.names()
    REQUEST_FIELDS: ClassVar[tuple[str, ...]] = ("table", "parts", "batch_size", "dry_run")

    def __post_init__(self) -> None:
        from ..kvs.tables import validate_table_name

        validate_table_name(self.table, internal_ok=False)
        object.__setattr__(self, "parts", check_int(self.parts, "parts", 1))
        object.__setattr__(self, "batch_size", check_int(self.batch_size, "batch_size", 1))
        object.__setattr__(self, "dry_run", bool(self.dry_run))

    # the two forms a job travels in (what the caller asks for; the planned fields stay on the driver)
    def to_json(self) -> dict:
        return {"table": self.table, "parts": self.parts, "batch_size": self.batch_size, "dry_run": self.dry_run}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> FullSweepJob:
        return _from_json(cls, data)

    def to_argv(self) -> list[str]:
        argv = ["--table", self.table, "--parts", str(self.parts), "--batch-size", str(self.batch_size)]
        return argv + (["--dry-run"] if self.dry_run else [])

    # driver
    def plan(self, open_driver_store: Callable[[], AtlasStore]) -> tuple[FullSweepJob, list[Range]]:
        """Split the table and take one sweep timestamp for all ranges (a timestamp taken earlier stays
        safe if a task is retried later)."""
        store = open_driver_store()
        try:
            strategy = store.kvs.get_metadata(self.table).strategy  # TableNotFoundError for an unknown table
            if not strategy.is_swept:
                raise ValueError(f"table {self.table!r} has sweep strategy NOTHING: it is never swept")
            sweep_ts = store.sweep_timestamps.sweep_timestamp(strategy)
            ranges = tuple(store.kvs.split_ranges(self.table, self.parts))
        finally:
            store.close()
        planned = replace(self, strategy=strategy.value, sweep_ts=sweep_ts, ranges=ranges)
        return planned, list(enumerate(ranges))

    def params(self) -> dict:
        def conv(v: object) -> object:
            return bytes(v).hex() if isinstance(v, (bytes, bytearray)) else v

        return {"table": self.table, "strategy": self.strategy, "sweep_ts": self.sweep_ts,
                "parts_requested": self.parts, "batch_size": self.batch_size, "dry_run": self.dry_run,
                "ranges": [[r.kind, conv(r.start), conv(r.end)] for r in self.ranges]}

    def description(self, items: list) -> str:
        return f"atlas full sweep of {self.table} in {len(items)} range(s)"

    @staticmethod
    def spark_tasks(items: list, parallelism: int | None) -> int:
        """One Spark task per range (``parts`` already says how parallel the user wants the scan)."""
        return max(1, len(items))

    # executor
    def describe(self, item: Range) -> dict:
        return {"range_index": item[0], "table": self.table}

    def sweep(self, store: AtlasStore, item: Range, app_id: str) -> tuple[str, dict]:
        _, scan_range = item
        result = to_json(store.legacy_sweeper.sweep_table(
            self.table, scan_range=scan_range, batch_size=self.batch_size, sweep_ts=self.sweep_ts, dry_run=self.dry_run
        ))
        return ("finished" if result.get("finished") else "unfinished"), result

    @staticmethod
    def sort_key(item: dict) -> int:
        return item["range_index"]

    # command line
    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--table", required=True)
        parser.add_argument("--parts", type=int, default=4, help="number of ranges (tasks)")
        parser.add_argument("--batch-size", type=int, default=1000, help="cells per delete batch")

    @classmethod
    def from_args(cls, args: argparse.Namespace, parser: argparse.ArgumentParser) -> FullSweepJob:
        return cls(table=args.table, parts=args.parts, batch_size=args.batch_size, dry_run=args.dry_run)


JOBS: dict[str, type[TargetedSweepJob] | type[FullSweepJob]] = {job.kind: job for job in (TargetedSweepJob, FullSweepJob)}
"""The job classes by ``kind``."""


def job_from_json(kind: str, data: Mapping[str, Any]) -> SparkJob:
    """The job of ``kind`` from its JSON arguments (:meth:`SparkJob.to_json`); ValueError naming what is wrong."""
    if kind not in JOBS:
        raise ValueError(f"Spark job kind must be one of {', '.join(JOBS)}, got {kind!r}")
    return JOBS[kind].from_json(data)
