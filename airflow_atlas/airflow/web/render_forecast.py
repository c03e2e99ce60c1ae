"""The dashboard's backlog drain forecast section (pure, from the status document's JSON): per pair the rates,
the time to drain and the state - and, when the forecast cannot tell, what it does not know (``unknown``) -
then the safe pace and the application pace's target."""
from __future__ import annotations

from airflow_atlas.status import format_duration
from airflow_atlas.status.text import drain_text

from .html import cell, esc, fmt_int, fmt_rate

STATE_CLASS = {"drained": "ok", "draining": "ok", "steady": "info", "growing": "bad", "stalled": "warn", "unknown": "muted",
               "not_swept_yet": "muted"}


def render_forecast(status: dict) -> str:
    window = (status.get("settings") or {}).get("window_seconds")
    limit = (status.get("settings") or {}).get("sweep_max_entries_per_second")
    target = (status.get("settings") or {}).get("sweep_latency_target")
    head = (
        "<thead><tr><th class=\"num\">Shard</th><th>Strategy</th><th class=\"num\">Backlog</th><th class=\"num\">Ingest rate</th>"
        "<th class=\"num\">Sweep rate</th><th class=\"num\">Net drain</th><th class=\"num\">Time to drain</th>"
        "<th>State</th><th>Basis</th><th>Warning</th></tr></thead>"
    )
    rows = []
    for r in status["shards"]:
        f = r["forecast"]
        drain = f.get("time_to_drain_seconds")
        warn = [w["message"] for w in f.get("warnings") or []]
        state = f.get("state")
        rows.append(
            f'<tr data-shard="{esc(r["shard"])}" data-strategy="{esc(r["strategy"])}"'
            f'{" class=outpaces" if f.get("ingest_outpaces_sweep") else ""}>'
            + cell(fmt_int(r["shard"]), "shard", r["shard"], "num")
            + cell(esc(r["strategy"]), "strategy", r["strategy"])
            + cell(fmt_int(f["backlog_entries"], f.get("backlog_capped")), "backlog", f["backlog_entries"], "num")
            + cell(fmt_rate(f.get("ingest_rate_per_second")), "ingest_rate", f.get("ingest_rate_per_second"), "num")
            + cell(fmt_rate(f.get("sweep_rate_per_second")), "sweep_rate", f.get("sweep_rate_per_second"), "num")
            + cell(fmt_rate(f.get("net_drain_rate_per_second")), "net_drain_rate", f.get("net_drain_rate_per_second"), "num")
            + cell(esc(drain_text(f)), "time_to_drain", drain, "num", title=f.get("unknown"))
            + cell(f'<span class="badge {STATE_CLASS.get(state, "muted")}">{esc(state)}</span>'
                   + (f'<div class="sub" data-field="unknown">{esc(f["unknown"])}</div>' if f.get("unknown") else ""),
                   "state", state, "wrap" if f.get("unknown") else "")
            + cell(esc(f'{f.get("basis")}: {f.get("runs_in_window", 0)} run(s)'), "basis", f.get("basis"), "sub")
            + cell(
                ("<b class=\"bad\">ingest outpaces sweep</b> " if f.get("ingest_outpaces_sweep") else "")
                + "<br>".join(esc(m) for m in warn),
                "warning",
                "ingest_outpaces_sweep" if f.get("ingest_outpaces_sweep") else ("warning" if warn else ""),
                "wrap",
            )
            + "</tr>"
        )
    body = "".join(rows) or '<tr><td colspan="10" class="muted">no shard</td></tr>'
    return (
        f'<table id="forecast">{head}<tbody>{body}</tbody></table>'
        f'<div class="sub">Ingest: writes enqueued per second; sweep: writes swept per second; measured over the recent runs '
        f"within the last {esc(format_duration(window))}. Time to drain = backlog / (sweep rate - ingest rate); "
        "&ldquo;not at these rates&rdquo; when that is not positive, &ldquo;unknown&rdquo; when a rate is not measured "
        "(why: under the state).</div>"
        + render_intensity(limit, target)
    )


def render_intensity(limit: int | None, target: float | None = None) -> str:
    """The safe pace the sweeps use (setting ``sweep_max_entries_per_second``; 0 = unlimited) and the
    application pace's latency target (setting ``sweep_latency_target``; 0 = off: the limit is a fixed rate)."""
    if limit is None:
        return ""
    shown = "unlimited" if limit == 0 else f"{fmt_int(limit)} entries/s per sweep task and pair"
    application = ""
    if target is not None:
        application = (
            f' Application pace: <b data-field="sweep_latency_target" data-value="{esc(target)}">'
            + ("off (the limit is a fixed rate)" if not target else
               f"unthrottled while the application rests, the limit while it runs, raised while its p99 stays "
               f"within {esc(target)}x its baseline")
            + "</b> (setting sweep_latency_target; each run's pace and why: Last run)."
        )
    return (
        f'<div class="sub" id="intensity">Sweep intensity limit: <b data-field="sweep_max_entries_per_second" '
        f'data-value="{esc(limit)}">{shown}</b> (setting sweep_max_entries_per_second; the total is this times the '
        f"sweep tasks running at once).{application}</div>"
    )
