"""The dashboard page: HTML rendered from :func:`airflow_atlas.status.compute_status` output.

Pure functions of the status dict (no Airflow, no store), so the page can be tested from constructed
numbers. No script and no external asset: the lag chart is inline SVG and the style sheet is inline (the
machines running Airflow often have no internet access, and the page is embedded in the Airflow UI as an
iframe).

Every figure a test or a scraper may want is also in a ``data-*`` attribute: table rows carry
``data-shard`` / ``data-strategy``, cells ``data-field`` and the raw number in ``data-value``.
"""
from __future__ import annotations

import json
from urllib.parse import urlencode

from airflow_atlas.status import format_duration

from .html import cell, esc, fmt_int, fmt_time
from .render_compaction import render_compaction
from .render_forecast import render_forecast

MANUAL_SWEEP_DAG = "atlas_manual_sweep"
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22")
OUTCOME_CLASS = {"ok": "ok", "blocked": "warn", "quarantined": "bad", "failed": "bad", "skipped": "warn"}

CSS = """
:root { color-scheme: light; --fg:#1d2733; --muted:#6b7785; --line:#d9dee5; --bg:#ffffff; --panel:#f6f8fa;
        --ok:#1a7f37; --warn:#9a6700; --bad:#cf222e; --info:#0969da; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg); background: var(--bg);
       margin: 0; padding: 16px 20px 40px; }
h1 { font-size: 20px; margin: 0 0 4px; }
h2 { font-size: 16px; margin: 28px 0 8px; border-bottom: 1px solid var(--line); padding-bottom: 4px; }
h3 { font-size: 14px; margin: 12px 0 6px; }
.meta { color: var(--muted); margin-bottom: 8px; }
.meta code { color: var(--fg); }
.actions a { margin-right: 14px; }
a { color: var(--info); text-decoration: none; }
a:hover { text-decoration: underline; }
table { border-collapse: collapse; width: 100%; margin: 4px 0 8px; }
th, td { border-bottom: 1px solid var(--line); padding: 5px 8px; text-align: left; vertical-align: top; white-space: nowrap; }
th { background: var(--panel); font-weight: 600; font-size: 12px; text-transform: uppercase; letter-spacing: .03em; color: var(--muted); }
td.wrap { white-space: normal; min-width: 220px; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.behind td.lag { color: var(--warn); font-weight: 600; }
.sub { color: var(--muted); font-size: 12px; }
.badge { display: inline-block; padding: 0 6px; border-radius: 10px; font-size: 12px; border: 1px solid currentColor; }
.ok { color: var(--ok); } .warn { color: var(--warn); } .bad { color: var(--bad); } .info { color: var(--info); }
.muted { color: var(--muted); }
.panel { background: var(--panel); border: 1px solid var(--line); border-radius: 6px; padding: 10px 14px; margin: 8px 0; }
.panel.alert { border-color: var(--bad); background: #fff5f5; }
.panel.held { border-color: var(--warn); background: #fffbea; }
.warnings li { margin: 2px 0; }
dl.kv { display: grid; grid-template-columns: max-content auto; gap: 2px 14px; margin: 6px 0; }
dl.kv dt { color: var(--muted); } dl.kv dd { margin: 0; font-variant-numeric: tabular-nums; }
.charts { display: flex; flex-wrap: wrap; gap: 16px; }
.chart { flex: 1 1 520px; min-width: 420px; }
.legend span { margin-right: 12px; font-size: 12px; white-space: nowrap; }
.legend i { display: inline-block; width: 12px; height: 3px; vertical-align: middle; margin-right: 4px; }
.error { color: var(--bad); }
"""


# ----- sections -----------------------------------------------------------------------------------------
def render_page(
    status: dict,
    *,
    app_root: str = "",
    airflow_root: str = "",
    query: dict | None = None,
    refresh_seconds: int | None = None,
) -> str:
    """The whole HTML page. ``app_root``: URL path of this app (e.g. ``/airflow/atlas``), for its own links;
    ``airflow_root``: URL path of the Airflow UI (``[api] base_url``'s path), for links into the UI;
    ``query``: the page's query parameters (kept by the JSON link); ``refresh_seconds``: reload the page."""
    q = {k: v for k, v in (query or {}).items() if v not in (None, "")}
    json_href = f"{app_root}/api/status" + (f"?{urlencode(q)}" if q else "")
    page_href = f"{app_root}/" + (f"?{urlencode(q)}" if q else "")
    dag_href = f"{airflow_root}/dags/{MANUAL_SWEEP_DAG}"
    head_refresh = f'<meta http-equiv="refresh" content="{int(refresh_seconds)}">' if refresh_seconds else ""
    ts = status["timestamps"]
    sweep_ts = ", ".join(f"{esc(k)} <code data-field=\"sweep-ts\" data-strategy=\"{esc(k)}\">{fmt_int(v)}</code>"
                         for k, v in status["sweep_timestamps"].items())
    tables = ", ".join(f"{esc(k)} <span class=\"sub\">({esc(v)})</span>" for k, v in status["tables"].items()) or "none"
    parts = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        head_refresh,
        "<title>Atlas sweep dashboard</title>",
        f"<style>{CSS}</style></head><body>",
        "<h1>Atlas sweep dashboard</h1>",
        f'<div class="meta" id="summary" data-generated-at="{esc(status["generated_at"])}" '
        f'data-number-of-shards="{esc(status["number_of_shards"])}" data-fresh-ts="{esc(ts["fresh_ts"])}">'
        f"store <code>{esc(status['store'])}</code> &middot; {fmt_int(status['number_of_shards'])} shard(s) &middot; "
        f"fresh timestamp <code>{fmt_int(ts['fresh_ts'])}</code> &middot; sweep timestamps {sweep_ts} &middot; "
        f"generated {esc(fmt_time(status['generated_at']))}<br>tables: {tables}</div>",
        '<div class="actions">'
        f'<a id="refresh" href="{esc(page_href)}">Refresh</a>'
        f'<a id="json" href="{esc(json_href)}">JSON</a>'
        f'<a id="trigger" href="{esc(dag_href)}" target="_top">Run {MANUAL_SWEEP_DAG}</a>'
        "</div>",
        render_reads_fallback(status),
        render_warnings(status),
        render_settings_warnings(status),
        "<h2>Shards</h2>",
        render_shard_table(status),
        "<h2>Lag over time</h2>",
        render_charts(status),
        '<h2 id="why-title">Why is the sweep timestamp not advancing?</h2>',
        render_why(status),
        '<h2 id="forecast-title">Backlog drain forecast</h2>',
        render_forecast(status),
        '<h2 id="compaction-title">Compaction</h2>',
        render_compaction(status),
        '<h2 id="settings-title">Effective settings</h2>',
        render_settings(status),
        "</body></html>",
    ]
    return "\n".join(p for p in parts if p)


def render_reads_fallback(status: dict) -> str:
    """A banner when the status was read without Paxos (``reads.serial`` false, status/document.py): what
    that means and the Paxos failure that caused it; nothing when the reads were serial."""
    reads = status.get("reads") or {}
    if reads.get("serial", True):
        return ""
    return (f'<div class="panel alert" id="reads-fallback"><b>NON-SERIAL FALLBACK</b>: {esc(reads.get("fallback"))}'
            f'<br><span class="sub">reason: {esc(reads.get("reason"))}</span></div>')


def render_warnings(status: dict) -> str:
    items = [
        f'<li data-shard="{esc(w.get("shard"))}" data-strategy="{esc(w.get("strategy"))}" data-kind="{esc(w.get("kind"))}">'
        f'<b>shard {esc(w.get("shard"))} {esc(w.get("strategy"))}</b>: {esc(w.get("message"))}</li>'
        for w in status.get("warnings") or []
    ]
    items += [
        f'<li data-table="{esc(w.get("table"))}" data-kind="{esc(w.get("kind"))}">'
        f'<b>table {esc(w.get("table"))}</b>: {esc(w.get("message"))}</li>'
        for w in status.get("table_warnings") or []
    ]
    items += [f'<li data-kind="datacenter">{esc(m)}</li>' for m in status.get("datacenter_warnings") or []]
    if status.get("quarantined_cells"):
        items.append(f'<li data-kind="quarantined">{fmt_int(status["quarantined_cells"])} corrupt queue cell(s) quarantined recently</li>')
    if not items:
        return ""
    return f'<div class="panel alert" id="warnings"><b>Warnings</b><ul class="warnings">{"".join(items)}</ul></div>'


def render_shard_table(status: dict) -> str:
    head = (
        "<thead><tr><th class=\"num\">Shard</th><th>Strategy</th><th class=\"num\">Sweep ts</th><th class=\"num\">Progress</th>"
        "<th class=\"num\">Lag (ts)</th><th class=\"num\" title=\"age of the oldest sweepable unswept entry\">Lag (time)</th><th class=\"num\">Backlog</th>"
        "<th class=\"num\">Sweepable</th><th class=\"num\">Pinned</th><th>Last run</th><th>Lock holder</th>"
        "<th class=\"num\">Tombstones written</th></tr></thead>"
    )
    rows = []
    for r in status["shards"]:
        last = r.get("last_run")
        if last is None:
            last_html = '<span class="muted">never</span>'
            outcome = ""
        else:
            outcome = last.get("outcome") or ""
            if outcome == "failed":
                detail = f'<div class="sub bad" data-field="error">{esc(last.get("error"))}</div>'
            elif outcome == "skipped":
                detail = f'<div class="sub">locked by {esc(last.get("lock_holder"))}</div>'
            else:
                detail = (
                    f'<div class="sub">{fmt_int(last.get("entries_read"))} read, {fmt_int(last.get("cells_tombstoned"))} tombstoned, '
                    f'{fmt_int(last.get("aborted_writes_deleted"))} aborted deleted, progress {fmt_int(last.get("old_progress"))} '
                    f'&rarr; {fmt_int(last.get("new_progress"))}</div>'
                )
                if last.get("pace_reason"):
                    rate = last.get("pace_entries_per_second")
                    shown = "unthrottled" if rate == 0 else f"pace {fmt_int(rate)} entries/s"
                    detail += (
                        f'<div class="sub" data-field="pace" data-value="{esc(rate)}">{shown}: '
                        f'{esc(last.get("pace_reason"))}</div>'
                    )
            failing = r.get("failing")
            if failing and failing.get("runs", 0) > 1:
                detail += f'<div class="sub bad">{fmt_int(failing["runs"])} failed runs in a row</div>'
            last_html = (
                f'{esc(format_duration(last.get("age_seconds")))} ago &middot; {esc(last.get("status"))} '
                f'<span class="badge {OUTCOME_CLASS.get(outcome, "muted")}" data-field="outcome">{esc(outcome)}</span>'
                + detail
            )
        lag_s = r.get("lag_seconds")
        lag_text = _lag_text(r)
        holder = r.get("lock_holder")
        holder_html = (
            '<span class="muted">free</span>'
            if not holder
            else f'{esc(holder)}<div class="sub">lease expires in {esc(format_duration(r.get("lock_expires_in_seconds")))}'
            + ('; <b class="bad">its process is gone</b>' if r.get("lock_holder_process_gone") else "")
            + "</div>"
        )
        recent = r.get("recent") or {}
        cls = "behind" if r.get("lag_ts") else ""
        rows.append(
            f'<tr data-shard="{esc(r["shard"])}" data-strategy="{esc(r["strategy"])}" class="{cls}">'
            + cell(fmt_int(r["shard"]), "shard", r["shard"], "num")
            + cell(esc(r["strategy"]), "strategy", r["strategy"])
            + cell(fmt_int(r["sweep_ts"]), "sweep_ts", r["sweep_ts"], "num")
            + cell(fmt_int(r["progress"]), "progress", r["progress"], "num")
            + cell(fmt_int(r["lag_ts"]), "lag_ts", r["lag_ts"], "num lag")
            + cell(esc(lag_text), "lag_seconds", lag_s, "num lag")
            + cell(fmt_int(r["backlog_entries"], r.get("backlog_capped")), "backlog", r["backlog_entries"], "num")
            + cell(fmt_int(r["sweepable_entries"], r.get("sweepable_capped")), "sweepable", r["sweepable_entries"], "num")
            + cell(fmt_int(r["pinned_entries"], r.get("pinned_capped")), "pinned", r["pinned_entries"], "num")
            + cell(last_html, "last_run", None if last is None else last.get("status"), "wrap")
            + cell(holder_html, "lock_holder", holder or "")
            + cell(fmt_int(r["tombstones_written"]), "tombstones_written", r["tombstones_written"], "num",
                   title=f"over the last {recent.get('runs', 0)} recorded iteration(s)")
            + "</tr>"
        )
    totals = []
    for strategy, t in (status.get("totals") or {}).items():
        totals.append(
            f'<tr class="sub" data-total="{esc(strategy)}"><td></td><td>all {esc(strategy)}</td><td></td><td></td><td></td>'
            + cell(esc(_lag_text(t)), "lag_seconds", t.get("lag_seconds"), "num lag")
            + cell(fmt_int(t["backlog_entries"], t.get("capped")), "backlog", t["backlog_entries"], "num")
            + cell(fmt_int(t["sweepable_entries"]), "sweepable", t["sweepable_entries"], "num")
            + cell(fmt_int(t["pinned_entries"]), "pinned", t["pinned_entries"], "num")
            + "<td></td><td></td>"
            + cell(fmt_int(t["tombstones_written"]), "tombstones_written", t["tombstones_written"], "num")
            + "</tr>"
        )
    body = "".join(rows) or '<tr><td colspan="12" class="muted">no shard</td></tr>'
    return (
        f'<table id="shards">{head}<tbody>{body}</tbody><tfoot>{"".join(totals)}</tfoot></table>'
        '<div class="sub">Lag (ts): timestamps between progress and the sweep timestamp; Lag (time): estimated from the '
        "punch table. Backlog = sweepable (below the sweep timestamp) + pinned (at or above it). Tombstones: over the "
        "recorded recent iterations.</div>"
    )


def _series(r: dict, now: float) -> list[tuple[float, float]]:
    points = [(p["at"], p["lag_ts"]) for p in r.get("lag_series") or [] if p.get("at") is not None and p.get("lag_ts") is not None]
    points.append((now, r["lag_ts"]))  # where it is now
    return points


def render_charts(status: dict) -> str:
    by_strategy: dict[str, list[dict]] = {}
    for r in status["shards"]:
        by_strategy.setdefault(r["strategy"], []).append(r)
    if not by_strategy:
        return '<div class="muted">no data</div>'
    return '<div class="charts">' + "".join(
        lag_chart(strategy, rows, status["generated_at"]) for strategy, rows in by_strategy.items()
    ) + "</div>"


def _lag_text(r: dict) -> str:
    """A row's or total's lag (``lag_seconds``: age of the oldest sweepable unswept entry) as text."""
    lag_s = r.get("lag_seconds")
    return "-" if lag_s is None else (">" if r.get("lag_seconds_is_lower_bound") else "") + format_duration(lag_s)


def lag_chart(strategy: str, rows: list[dict], now: float, width: int = 640, height: int = 220) -> str:
    """An SVG line chart of lag (timestamps behind the sweep timestamp) over time, one line per shard: a
    point per recorded sweep iteration, and the current lag at the right edge."""
    left, right, top, bottom = 64, 12, 12, 28
    series = [(r["shard"], _series(r, now)) for r in rows]
    xs = [x for _, pts in series for x, _ in pts]
    ys = [y for _, pts in series for _, y in pts]
    x0, x1 = min(xs), max(xs)
    if x1 - x0 < 1:
        x0 = x1 - 60
    y1 = max(ys) if ys and max(ys) > 0 else 1
    pw, ph = width - left - right, height - top - bottom

    def sx(x: float) -> float:
        return left + (x - x0) / (x1 - x0) * pw

    def sy(y: float) -> float:
        return top + ph - (y / y1) * ph

    out = [
        f'<div class="chart" data-strategy="{esc(strategy)}"><h3>{esc(strategy)}</h3>',
        f'<svg class="lag-chart" data-strategy="{esc(strategy)}" viewBox="0 0 {width} {height}" width="100%" '
        f'role="img" aria-label="lag over time, {esc(strategy)}" xmlns="http://www.w3.org/2000/svg">',
        f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="#fff" stroke="#d9dee5"/>',
    ]
    for frac in (0.0, 0.5, 1.0):
        y = top + ph - frac * ph
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + pw}" y2="{y:.1f}" stroke="#eef1f4"/>')
        out.append(f'<text x="{left - 6}" y="{y + 4:.1f}" font-size="11" text-anchor="end" fill="#6b7785">{fmt_int(frac * y1)}</text>')
    out.append(f'<text x="{left}" y="{height - 8}" font-size="11" fill="#6b7785">{esc(format_duration(now - x0))} ago</text>')
    out.append(f'<text x="{left + pw}" y="{height - 8}" font-size="11" text-anchor="end" fill="#6b7785">now</text>')
    out.append(f'<text x="14" y="{top + ph / 2:.0f}" font-size="11" fill="#6b7785" transform="rotate(-90 14 {top + ph / 2:.0f})" '
               'text-anchor="middle">lag (timestamps)</text>')
    legend = []
    for i, (shard, pts) in enumerate(series):
        color = PALETTE[i % len(PALETTE)]
        coords = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in pts)
        out.append(f'<polyline data-shard="{esc(shard)}" points="{coords}" fill="none" stroke="{color}" stroke-width="2"/>')
        for x, y in pts:
            out.append(
                f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="2.5" fill="{color}"><title>shard {esc(shard)}: lag {fmt_int(y)} '
                f'at {esc(fmt_time(x))}</title></circle>'
            )
        legend.append(f'<span><i style="background:{color}"></i>shard {esc(shard)}</span>')
    out.append("</svg>")
    out.append(f'<div class="legend">{"".join(legend)}</div></div>')
    return "".join(out)


def render_why(status: dict) -> str:
    panels = []
    for strategy, w in (status.get("why_not_advancing") or {}).items():
        held = w.get("held_by")
        cls = "panel held" if held else "panel"
        kv = [
            ("limited by", f'<span data-field="limited_by">{esc(w.get("limited_by"))}</span>'),
            ("sweep timestamp", f'<span data-field="sweep_ts">{fmt_int(w.get("sweep_ts"))}</span>'
             f' <span class="sub">({esc(format_duration(w.get("sweep_ts_age_seconds")))} old, '
             f'{fmt_int(w.get("behind_fresh_ts"))} behind the fresh timestamp)</span>'),
        ]
        if held:
            kind = "open transaction" if held.get("kind") == "open_transaction" else "read-only window"
            kv += [
                ("held back by", f'<span data-field="held_kind">{esc(kind)}</span>'),
                ("its start timestamp", f'<span data-field="held_start_ts" data-value="{esc(held.get("start_ts"))}">'
                 f'{fmt_int(held.get("start_ts"))}</span>'),
                ("age", f'<span data-field="held_age" data-value="{esc(held.get("age_seconds"))}">'
                 f'{esc(format_duration(held.get("age_seconds")))}</span>'),
                ("holder", f'<span data-field="held_holder">{esc(held.get("holder") or "-")}</span>'),
            ]
            if held.get("expires_in_seconds") is not None:
                kv.append(("lease expires in", esc(format_duration(max(0.0, held["expires_in_seconds"])))))
        oldest = w.get("oldest_open_transaction")
        if oldest and (not held or held.get("kind") != "open_transaction"):
            kv.append(("oldest open transaction", f'{fmt_int(oldest.get("start_ts"))} <span class="sub">'
                       f'({esc(oldest.get("holder"))}, open {esc(format_duration(oldest.get("age_seconds")))})</span>'))
        kv.append(("queued work it pins", f'<span data-field="pinned_entries" data-value="{esc(w.get("pinned_entries"))}">'
                   f'{fmt_int(w.get("pinned_entries"), w.get("pinned_capped"))}</span> entr'
                   f'{"y" if w.get("pinned_entries") == 1 else "ies"}'))
        pinned = [p for p in w.get("pinned_by_shard") or [] if p.get("entries")]
        if pinned:
            kv.append(("pinned per shard", ", ".join(
                f'<span data-shard="{esc(p["shard"])}" data-field="pinned_shard">shard {esc(p["shard"])}: '
                f'{fmt_int(p["entries"], p.get("capped"))}</span>' for p in pinned)))
        dl = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in kv)
        panels.append(
            f'<div class="{cls} why" data-strategy="{esc(strategy)}"><b>{esc(strategy)}</b>'
            f'<div data-field="message">{esc(w.get("message"))}</div><dl class="kv">{dl}</dl></div>'
        )
    return "".join(panels) or '<div class="muted">no strategy</div>'


def render_settings_warnings(status: dict) -> str:
    """Where a setting's source is not what one may think, e.g. ``AIRFLOW_VAR_ATLAS_SETTINGS`` shadowing the
    ``atlas_settings`` Variable (UI edits ignored): at the top of the page."""
    items = "".join(f'<li data-kind="settings">{esc(m)}</li>' for m in status.get("settings_warnings") or [])
    if not items:
        return ""
    return f'<div class="panel alert" id="settings-warnings"><b>Settings</b><ul class="warnings">{items}</ul></div>'


def render_settings(status: dict) -> str:
    """Every effective setting with the layer it came from (``effective_settings``); those not at their
    default first, the rest folded."""
    values = status.get("effective_settings") or []
    if not values:
        return '<div class="muted" id="settings">not known</div>'

    def row(v: dict) -> str:
        shown = json.dumps(v["value"])
        return (
            f'<tr data-setting="{esc(v["name"])}" data-source="{esc(v["source"])}">'
            + cell(f"<code>{esc(v['name'])}</code>", "name", v["name"])
            + cell(esc(v["group"]), "group", v["group"], "sub")
            + cell(f"<code>{esc(shown)}</code>", "value", shown, "wrap")
            + cell(esc(v["source"]), "source", v["source"], "" if v["source"] == "default" else "info")
            + "</tr>"
        )

    head = "<thead><tr><th>Setting</th><th>Group</th><th>Value</th><th>From</th></tr></thead>"
    chosen = [v for v in values if v["source"] != "default"]
    defaults = [v for v in values if v["source"] == "default"]
    body = "".join(row(v) for v in chosen) or '<tr><td colspan="4" class="muted">every setting is at its default</td></tr>'
    return (
        f'<table id="settings">{head}<tbody>{body}</tbody></table>'
        f'<details><summary>{len(defaults)} setting(s) at their defaults</summary>'
        f'<table id="settings-defaults">{head}<tbody>{"".join(row(v) for v in defaults)}</tbody></table></details>'
        '<div class="sub">Run-time settings come from the <code>atlas_settings</code> Variable (Admin &rarr; Variables), '
        "as a task reads it now; DAG-shaping ones (schedules, retries, pool, timeouts) from the environment variable "
        "<code>ATLAS_DAG_SETTINGS</code>, shown as this API server sees it. See docs/SETTINGS.md.</div>"
    )


def render_error(title: str, message: str, *, app_root: str = "") -> str:
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Atlas sweep dashboard</title>'
        f"<style>{CSS}</style></head><body><h1>Atlas sweep dashboard</h1>"
        f'<div class="panel alert" id="error"><b class="error">{esc(title)}</b><div>{esc(message)}</div></div>'
        f'<div class="actions"><a href="{esc(app_root)}/">Retry</a></div></body></html>'
    )

