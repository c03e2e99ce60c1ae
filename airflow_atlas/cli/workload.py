"""``atlas-sweep workload``: run generated transactions against the store."""
from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING

from ..serialisation import to_json
from .output import EXIT_OK, EXIT_USAGE, CliError, ProgressBar, emit_json, wants_json

if TYPE_CHECKING:
    from .store import StoreHandle


def cmd_workload(args: argparse.Namespace, h: StoreHandle) -> int:
    from ..workload import WorkloadSpec, run_workload

    tables = dict(args.table) if args.table else None
    spec = WorkloadSpec(
        transactions=args.transactions,
        writes_per_transaction=args.writes_per_transaction,
        rows=args.rows,
        columns=args.columns,
        delete_ratio=args.delete_ratio,
        dead_writer_ratio=args.dead_writer_ratio,
        abort_ratio=args.abort_ratio,
        open_transactions=args.open_transactions,
        value_bytes=args.value_bytes,
        seed=args.seed,
    )
    if tables:
        spec.tables = tables
    if spec.dead_writer_ratio + spec.abort_ratio > 1.0:
        raise CliError(EXIT_USAGE, "--dead-writer-ratio plus --abort-ratio must not exceed 1")
    spec.validate()
    started = time.monotonic()
    with ProgressBar(spec.transactions, "workload", enabled=args.progress) as bar:
        report = run_workload(h.store, spec, progress=bar.update)
    result = to_json(report)
    result["seconds"] = round(time.monotonic() - started, 3)
    result["tables"] = dict(spec.tables)
    result["lease_seconds"] = h.store.config.transaction_lease_seconds
    if wants_json(args):
        emit_json(result)
    else:
        print(
            f"workload: {spec.transactions} transaction(s) in {result['seconds']:.2f}s: {report.committed} committed, "
            f"{report.dead_writers} dead writer(s), {report.aborted} aborted, {report.conflicts} conflict(s) "
            f"or rolled back by others; "
            f"{report.writes} write(s) ({report.deletes} delete(s)) to {', '.join(spec.tables)}"
        )
        if result["open"]:
            print(
                f"left open: {len(result['open'])} transaction(s) starting at {', '.join(map(str, result['open']))}; "
                f"they hold the sweep timestamp back until their lease expires (~{result['lease_seconds']:.0f}s)"
            )
    return EXIT_OK
