"""``atlas-sweep sweep``: sweep pairs locally through the engine's one entry point,
:meth:`~airflow_atlas.sweep.targeted.TargetedSweeper.sweep_shard` (one lease per pair for the whole run,
kept alive in the background; every run recorded in the sweep history)."""
from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING

from ..errors import StoreAccessError, StoreUnavailableError
from ..kvs.tables import SWEEPABLE_STRATEGY_NAMES as STRATEGIES
from ..serialisation import to_json
from ..status.text import format_duration
from ..sweep.counts import SweepCounts
from .output import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_SKIPPED,
    PROG,
    ProgressBar,
    emit_json,
    wants_json,
)
from .shards import check_shards

if TYPE_CHECKING:
    from .store import StoreHandle

PROGRESS_COUNT_CAP = 1_000_000
"""The progress bar's total stops counting there."""


def cmd_sweep(args: argparse.Namespace, h: StoreHandle) -> int:
    from ..sweep.results import ShardSweepResult, default_holder

    store = h.store
    shards = check_shards(store, args.shard)
    strategies = [s for s in STRATEGIES if s in (args.strategy or STRATEGIES)]
    sweep_ts = {s: store.sweep_timestamps.sweep_timestamp(s) for s in strategies}
    pairs = [(shard, s) for shard in shards for s in strategies]
    bar = ProgressBar(None, "sweep", enabled=args.progress)
    if bar.enabled:
        bar.total = sum(
            store.sweeper.sweepable_entries(shard, s, sweep_ts[s], cap=PROGRESS_COUNT_CAP) for shard, s in pairs
        ) or None
    holder = default_holder()
    results: list[dict] = []
    counts, iterations = SweepCounts(), 0
    started = time.monotonic()
    with bar:
        for shard, s in pairs:
            bar.update(bar.done, label=f"shard {shard} {s.lower()}")
            try:
                summary = store.sweeper.sweep_shard(
                    shard, s, sweep_ts=sweep_ts[s], holder=holder, max_iterations=args.max_iterations,
                    batch_limit=args.batch_limit, dry_run=args.dry_run,
                    on_iteration=lambda it: bar.advance(it.counts.entries_read),
                )
            except (StoreUnavailableError, StoreAccessError):
                raise
            except Exception as exc:  # one failed pair does not stop the others; exit 1 at the end
                summary = ShardSweepResult(shard=shard, strategy=s, status="failed", sweep_ts=sweep_ts[s],
                                           error=f"{type(exc).__name__}: {exc}")
            counts, iterations = counts + summary.counts, iterations + summary.iterations
            row = to_json(summary)
            if row["error"]:
                row["error"] = h.scrub(row["error"])
            results.append(row)
    totals = {"iterations": iterations, **to_json(counts)}
    totals["seconds_paced"] = round(sum(r.get("seconds_paced") or 0.0 for r in results), 6)
    failures = [{"shard": r["shard"], "strategy": r["strategy"], "error": r["error"]} for r in results if r["status"] == "failed"]
    skipped = [r for r in results if r["status"] == "skipped_locked"]
    out = {"dry_run": args.dry_run, "sweep_timestamps": sweep_ts, "results": results, "totals": totals,
           "failures": failures, "skipped": len(skipped), "seconds": round(time.monotonic() - started, 3)}
    if wants_json(args):
        emit_json(out)
    else:
        now = time.time()
        for r in results:
            print(describe_run(r, args.dry_run, now))
        print(f"{'dry run: ' if args.dry_run else ''}{len(results)} shard/strategy pair(s) in {out['seconds']:.2f}s: "
              f"{totals['entries_read']} entries, {totals['cells_tombstoned']} cells tombstoned, "
              f"{totals['aborted_writes_deleted']} aborted writes deleted"
              + (f"; {len(skipped)} pair(s) SKIPPED (locked by another sweeper)" if skipped else "")
              + (f"; {len(failures)} pair(s) FAILED" if failures else ""))
    for f in failures:
        print(f"{PROG}: error: sweep of shard {f['shard']} {f['strategy']} failed: {f['error']}", file=sys.stderr)
    if failures:
        return EXIT_FAILED
    return EXIT_SKIPPED if skipped else EXIT_OK


def describe_lock(holder: str | None, expires_at: float | None, process_gone: bool | None, now: float) -> str:
    """``locked by H (lease expires in 42s; its process is gone)``."""
    parts = []
    if expires_at is not None:
        parts.append(f"lease expires in {format_duration(max(0.0, expires_at - now))}")
    if process_gone is True:
        parts.append("its process is gone: the pair is swept again once the lease expires")
    elif process_gone is False:
        parts.append("its process is running")
    return f"locked by {holder}" + (f" ({'; '.join(parts)})" if parts else "")


def describe_run(r: dict, dry_run: bool, now: float) -> str:
    """One line per pair of a ``sweep`` run."""
    head = f"shard {r['shard']} {r['strategy']}: "
    if r["status"] == "skipped_locked":
        return head + "skipped, " + describe_lock(r["lock_holder"], r.get("lock_expires_at"),
                                                  r.get("lock_holder_process_gone"), now)
    if r["status"] == "failed":
        return head + f"FAILED: {r['error']}"
    what = "would sweep" if dry_run else r["status"]
    line = (head + f"{what} after {r['iterations']} iteration(s): progress "
            f"{r['old_progress']} -> {r['new_progress']} (sweep ts {r['sweep_ts']}), {r['entries_read']} entries read, "
            f"{r['cells_tombstoned']} cells tombstoned, {r['sentinels_written']} sentinels, "
            f"{r['aborted_writes_deleted']} aborted writes deleted")
    if r.get("seconds_paced") and r.get("latency_target") and r.get("pace_reason"):
        line += f"; paced {r['seconds_paced']:.2f}s, pace {r['pace_entries_per_second']:,.0f} entries/s ({r['pace_reason']})"
    elif r.get("seconds_paced"):
        line += f"; paced {r['seconds_paced']:.2f}s to {r['max_entries_per_second']} entries/s"
    if r["status"] == "blocked" and r.get("blocked_by"):
        line += f"; blocked by transaction {r['blocked_by'].get('start_ts')} committed at {r['blocked_by'].get('commit_ts')}"
    return line
