"""The dashboard's compaction section (pure, from the status document's ``compaction`` list): per user table
the tombstones written since its last compaction - the number ``atlas_compaction`` plans from, restarting at
0 after each compaction, unlike the shard table's recent "tombstones written" - when that compaction was,
the threshold (setting ``compaction_threshold_tombstones``) and whether the table is due."""
from __future__ import annotations

from airflow_atlas.status import format_duration

from .html import cell, esc, fmt_int, fmt_time


def render_compaction(status: dict) -> str:
    tables = status.get("compaction") or []
    if not tables:
        return '<div class="muted" id="compaction">no table</div>'
    head = (
        "<thead><tr><th>Table</th><th>Strategy</th><th class=\"num\">Tombstones since last compaction</th>"
        "<th class=\"num\">Threshold</th><th>Due</th><th>Last compaction</th></tr></thead>"
    )
    rows = []
    for t in tables:
        due = t.get("due")
        due_html = ('<span class="muted">unknown</span>' if due is None
                    else '<span class="badge warn">due</span>' if due else '<span class="ok">no</span>')
        at = t.get("last_compaction_at")
        last_html = (
            '<span class="muted">never</span>' if at is None
            else f'{esc(format_duration(t.get("last_compaction_age_seconds")))} ago '
                 f'<span class="sub">({esc(fmt_time(at))}, {esc(t.get("last_compaction_method") or "-")}, '
                 f'through ts {fmt_int(t.get("last_compaction_through_ts"))})</span>'
        )
        count = t["tombstones_since_compaction"]
        rows.append(
            f'<tr data-table="{esc(t["table"])}">'
            + cell(esc(t["table"]), "table", t["table"])
            + cell(esc(t["strategy"]), "strategy", t["strategy"])
            + cell(fmt_int(count, t.get("capped")), "tombstones_since_compaction", count, "num")
            + cell(fmt_int(t.get("threshold_tombstones")), "threshold_tombstones", t.get("threshold_tombstones"), "num")
            + cell(due_html, "due", "" if due is None else str(bool(due)).lower())
            + cell(last_html, "last_compaction", at)
            + "</tr>"
        )
    return (
        f'<table id="compaction">{head}<tbody>{"".join(rows)}</tbody></table>'
        '<div class="sub">Tombstones since last compaction: what <code>atlas_compaction</code> plans from (every sweep '
        "step records the tombstones it wrote per table; a compaction restarts the count at 0). A table is due when "
        "the count reaches the threshold (setting <code>compaction_threshold_tombstones</code>).</div>"
    )
