"""``atlas-sweep status``: the status document (:func:`airflow_atlas.status.build_status`), as JSON or text."""
from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..serialisation import to_json
from .output import EXIT_OK, count, emit_json, rate, table, wants_json

if TYPE_CHECKING:
    from .store import StoreHandle


def cmd_status(args: argparse.Namespace, h: StoreHandle) -> int:
    from ..status import build_status
    from ..status.compaction import threshold_of

    status = build_status(
        h.store,
        shards=args.shard,
        strategies=args.strategy,
        window_seconds=args.window,
        history_limit=args.history,
        backlog_cap=args.backlog_cap,
        compaction_threshold=threshold_of(h.settings),
    )
    status.effective_settings, status.settings_warnings = list(h.settings), list(h.settings_warnings)
    document = to_json(status)
    if wants_json(args):
        emit_json(document)
    else:
        sys.stdout.write(render_status(document))
    return EXIT_OK


def _last_run_text(last: dict | None, dur: Callable[[float | None], str]) -> str:
    if last is None:
        return "never"
    if last["outcome"] == "failed":
        return f"FAILED {dur(last['age_seconds'])} ago"
    if last["outcome"] == "skipped":
        return f"skipped {dur(last['age_seconds'])} ago"
    text = f"{last['status']} {dur(last['age_seconds'])} ago"
    if last.get("pace_reason"):
        text += f" (pace {last['pace_entries_per_second']:,.0f}/s: {last['pace_reason']})"
    return text


def _lock_text(r: dict) -> str | None:
    if r["lock_holder"] is None:
        return None
    return r["lock_holder"] + (" (process gone)" if r.get("lock_holder_process_gone") else "")


def render_status(status: dict) -> str:
    """The text form of the status document (its JSON form, :func:`airflow_atlas.serialisation.to_json`)."""
    from ..status import format_duration as dur
    from ..status.text import drain_text

    out = []
    ts = status["timestamps"]
    out.append(f"store: {status['store']}    shards: {status['number_of_shards']}    fresh ts: {ts['fresh_ts']}    "
               f"generated: {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(status['generated_at']))}")
    reads = status.get("reads") or {}
    if reads.get("serial") is False:
        out.append(f"NON-SERIAL FALLBACK: {reads['fallback']} (the failure: {reads['reason']})")
    if status["tables"]:
        out.append("tables: " + ", ".join(f"{k} ({v})" for k, v in status["tables"].items()))
    out.append("sweep timestamps: " + ", ".join(f"{k} {v}" for k, v in status["sweep_timestamps"].items()))
    out.append("")
    rows = []
    for r in status["shards"]:
        lag_s = "-" if r["lag_seconds"] is None else (">" if r["lag_seconds_is_lower_bound"] else "") + dur(r["lag_seconds"])
        expires = r["lock_expires_in_seconds"]
        rows.append([
            r["shard"], r["strategy"], r["sweep_ts"], r["progress"], r["lag_ts"], lag_s,
            count(r["backlog_entries"], r["backlog_capped"]), count(r["sweepable_entries"], r["sweepable_capped"]),
            count(r["pinned_entries"], r["pinned_capped"]), _last_run_text(r["last_run"], dur), r["tombstones_written"],
            _lock_text(r), None if expires is None else dur(max(0.0, expires)),
        ])
    out.append(table(["SHARD", "STRATEGY", "SWEEP_TS", "PROGRESS", "LAG_TS", "LAG", "BACKLOG", "SWEEPABLE", "PINNED",
                      "LAST RUN", "TOMBSTONES", "LOCK", "LOCK EXPIRES IN"], rows).rstrip("\n"))
    for strategy, t in (status.get("totals") or {}).items():
        lag = t.get("lag_seconds")
        lag_text = "unknown" if lag is None else (">" if t.get("lag_seconds_is_lower_bound") else "") + dur(lag)
        out.append(f"{strategy}: lag {lag_text} (age of the oldest sweepable unswept entry), "
                   f"sweepable {count(t['sweepable_entries'], bool(t.get('capped')))}, backlog {count(t['backlog_entries'], bool(t.get('capped')))}")
    graces = [g for g in status.get("gc_grace") or [] if g["gc_grace_seconds"] is not None]
    if graces:
        out.append("")
        out.append("Swept tables: gc_grace_seconds against repair_interval_seconds")
        out.append(table(["TABLE", "STRATEGY", "GC_GRACE", "REPAIR_INTERVAL", ""], [
            [g["table"], g["strategy"], dur(g["gc_grace_seconds"]), dur(g["repair_interval_seconds"]),
             "BELOW THE REPAIR INTERVAL" if g["below_repair_interval"] else "ok"]
            for g in graces
        ]).rstrip("\n"))
    failing = [r for r in status["shards"] if r.get("failing")]
    if failing:
        out.append("")
        out.append("Failing pairs")
        for r in failing:
            f = r["failing"]
            out.append(f"  shard {r['shard']} {r['strategy']}: {f['runs']} failed run(s) in a row: {f['error']}")
    out.append("")
    out.append("Why the sweep timestamp is not advancing")
    for w in status["why_not_advancing"].values():
        out.append(f"  {w['message']}")
        pinned = [p for p in w["pinned_by_shard"] if p["entries"]]
        if pinned and w["limited_by"] != "none":
            out.append("    pinned per shard: " + ", ".join(f"{p['shard']}: {count(p['entries'], p['capped'])}" for p in pinned))
    out.append("")
    out.append(f"Backlog drain forecast (window {dur(status['settings']['window_seconds'])})")
    rows = []
    unknown: dict[str, list[str]] = {}
    for r in status["shards"]:
        f = r["forecast"]
        rows.append([
            r["shard"], r["strategy"], count(f["backlog_entries"], f["backlog_capped"]), rate(f["ingest_rate_per_second"]),
            rate(f["sweep_rate_per_second"]), drain_text(f), f["state"],
            "INGEST OUTPACES SWEEP" if f["ingest_outpaces_sweep"] else "",
        ])
        if f.get("unknown"):
            unknown.setdefault(f["unknown"], []).append(f"shard {r['shard']} {r['strategy']}")
    out.append(table(["SHARD", "STRATEGY", "BACKLOG", "INGEST", "SWEEP", "DRAIN IN", "STATE", ""], rows).rstrip("\n"))
    for message, pairs in unknown.items():
        out.append(f"  unknown for {', '.join(pairs)}: {message}")
    out.extend(render_compaction(status))
    out.extend(render_settings(status))
    if status["warnings"] or status["quarantined_cells"] or status.get("table_warnings") or status.get("datacenter_warnings"):
        out.append("")
        out.append("Warnings")
        for message in status.get("datacenter_warnings") or []:
            out.append(f"  {message}")
        for w in status.get("table_warnings") or []:
            out.append(f"  table {w['table']}: {w['message']}")
        for w in status["warnings"]:
            out.append(f"  shard {w['shard']} {w['strategy']}: {w['message']}")
        if status["quarantined_cells"]:
            out.append(f"  {status['quarantined_cells']} corrupt queue cell(s) quarantined recently")
    return "\n".join(out) + "\n"


def render_compaction(status: dict) -> list[str]:
    """Per user table: tombstones since its last compaction (what ``atlas_compaction`` plans from), the
    threshold, whether it is due, and when that compaction was."""
    from ..status import format_duration as dur

    tables = status.get("compaction") or []
    if not tables:
        return []
    threshold = (status.get("settings") or {}).get("compaction_threshold_tombstones")
    rows = [
        [t["table"], t["strategy"], count(t["tombstones_since_compaction"], t["capped"]),
         "unknown" if t["due"] is None else ("DUE" if t["due"] else "no"),
         "never" if t["last_compaction_at"] is None
         else f"{dur(t['last_compaction_age_seconds'])} ago ({t['last_compaction_method']}, through ts "
              f"{t['last_compaction_through_ts']})"]
        for t in tables
    ]
    known = (f"threshold {threshold:,} (compaction_threshold_tombstones)" if threshold is not None
             else "threshold unknown here: the atlas_settings Variable's compaction_threshold_tombstones (--conn-id shows it)")
    return ["", f"Compaction: tombstones since each table's last compaction, what atlas_compaction plans from; {known}",
            table(["TABLE", "STRATEGY", "TOMBSTONES SINCE COMPACTION", "DUE", "LAST COMPACTION"], rows).rstrip("\n")]


def render_settings(status: dict) -> list[str]:
    """The effective settings that differ from their defaults (with the layer each came from) and the
    settings warnings; every key with its source is in the JSON form (``effective_settings``)."""
    out = []
    chosen = [s for s in status.get("effective_settings") or [] if s["source"] != "default"]
    if status.get("effective_settings"):
        out.append("")
        out.append("Settings not at their default (all of them, with their sources: --json, effective_settings)")
        rows = [[s["name"], s["group"], json.dumps(s["value"]), s["source"]] for s in chosen]
        out.append(table(["SETTING", "GROUP", "VALUE", "FROM"], rows).rstrip("\n") if rows else "  none: every setting is at its default")
    for message in status.get("settings_warnings") or []:
        out.append("")
        out.append(f"SETTINGS WARNING: {message}")
    return out
