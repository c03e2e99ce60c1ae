"""``atlas-sweep verify``: the safety-oracle checks that need no history.

(The lead wires this to :func:`airflow_atlas.verify.run_verify` once it lands; the checks below are the
command's logic as it was.)"""
from __future__ import annotations

import sys

from .output import EXIT_FAILED, EXIT_OK, PROG, STRATEGIES, emit_json, wants_json


def cmd_verify(args, h) -> int:
    from ..oracle import obsolete_versions

    store = h.store
    shards = list(range(store.number_of_shards()))
    progress = {(shard, s): store.queue.progress.get_progress(shard, s) for shard in shards for s in STRATEGIES}
    sweep_ts = store.sweep_timestamps.all()
    # Every shard swept everything below progress + 1 (with a sweep timestamp at least that high), so a
    # complete sweep to min(progress + 1) over the shards is what the tables must show.
    limits = {s: max(0, min(min(progress[(shard, s)] + 1 for shard in shards), sweep_ts[s])) for s in STRATEGIES}
    n = args.max_examples
    checks = {}
    leftover = obsolete_versions(store, limits)
    checks["obsolete_versions"] = {"ok": not leftover, "count": len(leftover), "limits": limits, "examples": leftover[:n]}
    rows = []
    for (shard, s), p in sorted(progress.items()):
        if p < 0:
            continue
        found = store.queue.cleaner.queue_rows_below(shard, s, p)
        if found:
            rows.append(f"shard {shard} {s} (progress {p}): fine partitions {found.cells_rows[:5]}, dedicated rows "
                        f"{found.dedicated_rows[:5]}, coarse partitions {found.timestamps_rows[:5]} still queued")
    checks["queue_rows_below_progress"] = {"ok": not rows, "count": len(rows), "examples": rows[:n]}
    oldest = store.registry.oldest_open()
    passed = []
    if oldest is not None:
        passed = [f"shard {shard} {s}: progress {p} is at or above open transaction {oldest.start_ts} (holder {oldest.holder})"
                  for (shard, s), p in sorted(progress.items()) if p >= oldest.start_ts]
    checks["open_transaction_below_progress"] = {"ok": not passed, "count": len(passed), "examples": passed[:n]}
    ok = all(c["ok"] for c in checks.values())
    result = {"ok": ok, "store": store.describe(), "sweep_timestamps": sweep_ts, "checks": checks}
    if wants_json(args):
        emit_json(result)
    else:
        for name, c in checks.items():
            print(f"{'ok  ' if c['ok'] else 'FAIL'} {name}: {c['count']} problem(s)"
                  + (f" (limits {c['limits']})" if "limits" in c else ""))
            for example in c["examples"]:
                print(f"     {example}")
    if not ok:
        failed = [f"{c['count']} {name.replace('_', ' ')}" for name, c in checks.items() if not c["ok"]]
        first = next(c["examples"][0] for c in checks.values() if not c["ok"] and c["examples"])
        print(f"{PROG}: error: verification failed: {'; '.join(failed)} (first: {first})", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK
