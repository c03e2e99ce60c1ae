"""The dashboard page from constructed status dicts: links under a base_url, every figure in data
attributes, escaping, capped counts, warnings, the held-back panel, the chart; no script, no external
asset."""
from __future__ import annotations

import re

import pytest

from airflow_atlas.airflow.web.app import parse_shards, parse_strategy
from airflow_atlas.airflow.web.render import lag_chart, render_page
from airflow_atlas.errors import InvalidInputError
from airflow_atlas.serialisation import to_json
from airflow_atlas.status import drain_forecast
from airflow_atlas.status.document import NON_SERIAL_FALLBACK

NOW = 1_700_000_000.0


def _row(shard, strategy, *, progress=10, sweep_ts=100, backlog=5, capped=False, holder=None, last=None, series=()):
    forecast = to_json(drain_forecast(backlog=backlog, sweepable=backlog, ingest_entries=600, swept_entries=60,
                              elapsed_seconds=60.0, runs=1))
    return {
        "shard": shard, "strategy": strategy, "sweep_ts": sweep_ts, "progress": progress,
        "lag_ts": max(0, sweep_ts - 1 - progress), "lag_seconds": 42.0, "lag_seconds_is_lower_bound": False,
        "backlog_entries": backlog, "backlog_capped": capped, "sweepable_entries": backlog, "sweepable_capped": capped,
        "pinned_entries": 0, "pinned_capped": False, "lock_holder": holder, "lock_expires_in_seconds": 30.0 if holder else None,
        "last_run": last, "tombstones_written": 7, "recent": {"runs": 2},
        "lag_series": [{"at": NOW - 60 * (len(series) - i), "lag_ts": v, "sweep_ts": sweep_ts, "progress": 0,
                        "entries_read": 1, "status": "caught_up"} for i, v in enumerate(series)],
        "forecast": forecast, "warnings": list(forecast["warnings"]),
    }


def _status(rows, why=None):
    return {
        "schema_version": 1, "generated_at": NOW, "store": "sqlite /x/<atlas>.db", "number_of_shards": 2,
        "strategies": ["THOROUGH"], "tables": {"t<1>": "THOROUGH"},
        "settings": {"window_seconds": 3600.0},
        "timestamps": {"fresh_ts": 120, "immutable_ts": 100, "unreadable_ts": None, "timestamps_per_second": 1.0},
        "sweep_timestamps": {"THOROUGH": 100},
        "why_not_advancing": why or {},
        "shards": rows,
        "totals": {"THOROUGH": {"backlog_entries": sum(r["backlog_entries"] for r in rows), "sweepable_entries": 0,
                                "pinned_entries": 0, "tombstones_written": 14, "capped": False}},
        "warnings": [{"shard": r["shard"], "strategy": r["strategy"], **w} for r in rows for w in r["warnings"]],
        "quarantined_cells": 0,
    }


WHY = {"THOROUGH": {
    "strategy": "THOROUGH", "sweep_ts": 100, "fresh_ts": 120, "immutable_ts": 100, "unreadable_ts": None,
    "limited_by": "open_transaction", "sweep_ts_age_seconds": 90.0, "behind_fresh_ts": 20,
    "held_by": {"kind": "open_transaction", "start_ts": 100, "age_seconds": 95.0, "holder": "worker-7<x>",
                "expires_in_seconds": 500.0},
    "oldest_open_transaction": {"start_ts": 100, "holder": "worker-7<x>", "age_seconds": 95.0, "expires_in_seconds": 500.0},
    "pinned_entries": 123456, "pinned_capped": True, "pinned_by_shard": [{"shard": 1, "entries": 123456, "capped": True}],
    "message": "held back by open transaction 100",
}}


def test_links_respect_the_base_path_and_keep_the_filters():
    page = render_page(_status([_row(0, "THOROUGH")]), app_root="/airflow/atlas", airflow_root="/airflow",
                       query={"shards": "0", "strategy": None})
    assert 'href="/airflow/atlas/api/status?shards=0"' in page
    assert 'href="/airflow/atlas/?shards=0"' in page
    assert 'href="/airflow/dags/atlas_manual_sweep" target="_top"' in page
    assert "<script" not in page and "<link" not in page and "src=" not in page


def test_figures_are_in_data_attributes_and_text_is_escaped():
    rows = [_row(0, "THOROUGH", backlog=100_000, capped=True, holder="host<1>:42"),
            _row(1, "THOROUGH", last={"at": NOW - 5, "age_seconds": 5.0, "status": "blocked", "outcome": "blocked",
                                      "entries_read": 3, "cells_tombstoned": 1, "aborted_writes_deleted": 0,
                                      "old_progress": 1, "new_progress": 9})]
    page = render_page(_status(rows, WHY))
    row0 = re.search(r'<tr data-shard="0" data-strategy="THOROUGH"[^>]*>(.*?)</tr>', page, re.S).group(1)
    assert 'data-field="backlog" data-value="100000" class="num">100,000+</td>' in row0
    assert "host&lt;1&gt;:42" in row0 and "host<1>" not in page
    assert "sqlite /x/&lt;atlas&gt;.db" in page and "t&lt;1&gt;" in page
    row1 = re.search(r'<tr data-shard="1" data-strategy="THOROUGH"[^>]*>(.*?)</tr>', page, re.S).group(1)
    assert 'data-field="last_run" data-value="blocked"' in row1 and 'class="badge warn" data-field="outcome">blocked<' in row1


def test_the_held_back_panel_names_the_transaction_and_what_it_pins():
    page = render_page(_status([_row(1, "THOROUGH")], WHY))
    panel = re.search(r'<div class="panel held why" data-strategy="THOROUGH">(.*?)</dl></div>', page, re.S).group(1)
    assert '<span data-field="held_kind">open transaction</span>' in panel
    assert 'data-field="held_start_ts" data-value="100">100<' in panel
    assert "worker-7&lt;x&gt;" in panel and "1m35s" in panel  # holder, age
    assert ">123,456+</span> entries" in panel and "shard 1: 123,456+" in panel


def test_the_forecast_warns_when_ingest_outpaces_sweep():
    page = render_page(_status([_row(0, "THOROUGH")]))
    forecast = re.search(r'<table id="forecast">(.*?)</table>', page, re.S).group(1)
    assert 'class=outpaces' in forecast and "ingest outpaces sweep" in forecast
    assert 'data-field="ingest_rate" data-value="10.0"' in forecast and 'data-field="sweep_rate" data-value="1.0"' in forecast
    assert '<div class="panel alert" id="warnings">' in page


def test_the_chart_has_a_line_per_shard_ending_at_the_current_lag():
    rows = [_row(0, "THOROUGH", progress=89, series=[50, 30, 20]), _row(1, "THOROUGH", progress=99)]
    svg = lag_chart("THOROUGH", rows, NOW)
    lines = dict(re.findall(r'<polyline data-shard="(\d+)" points="([^"]+)"', svg))
    assert len(lines["0"].split()) == 4 and len(lines["1"].split()) == 1
    last_x, last_y = map(float, lines["0"].split()[-1].split(","))
    first_x, first_y = map(float, lines["0"].split()[0].split(","))
    assert last_x > first_x and last_y > first_y  # later, and lower on the screen: lag 10 < 50


def test_query_parameters():
    assert parse_shards(None) is None and parse_shards(" ") is None and parse_shards("0, 2,") == [0, 2]
    with pytest.raises(InvalidInputError):
        parse_shards("1,x")
    assert parse_strategy("all") is None and parse_strategy("thorough") == ["THOROUGH"]


def test_before_any_sweep_the_forecast_claims_no_sweep_rate():
    # Issue 16.9: a pair never swept is not "outpaced by ingest at sweep 0/s".
    row = _row(0, "THOROUGH")
    row["forecast"] = to_json(drain_forecast(backlog=5, sweepable=5, ingest_entries=600, swept_entries=0, elapsed_seconds=60.0,
                                     runs=0, basis="window", ever_swept=False))
    row["warnings"] = []
    page = render_page(_status([row]))
    forecast = re.search(r'<table id="forecast">(.*?)</table>', page, re.S).group(1)
    assert "class=outpaces" not in forecast and "ingest outpaces sweep" not in forecast
    assert '<td data-field="sweep_rate" class="num">-</td>' in forecast and ">0/s<" not in forecast
    assert ">not_swept_yet<" in forecast
    assert '<span class="muted">never</span>' in page


def test_a_failing_pair_shows_the_reason_and_a_dead_lock_holder_is_flagged():
    failed = {"at": NOW - 5, "age_seconds": 5.0, "status": "failed", "outcome": "failed",
              "error": "CorruptTransactionDataError: start timestamp 97 <garbage>", "entries_read": 0}
    rows = [_row(0, "THOROUGH", last=failed), _row(1, "THOROUGH", holder="vm:4242:ab12")]
    rows[0]["failing"] = {"runs": 3, "since": NOW - 600, "error": failed["error"]}
    rows[1]["lock_holder_process_gone"] = True
    page = render_page(_status(rows))
    row0 = re.search(r'<tr data-shard="0" data-strategy="THOROUGH"[^>]*>(.*?)</tr>', page, re.S).group(1)
    assert 'class="badge bad" data-field="outcome">failed<' in row0
    assert 'data-field="error">CorruptTransactionDataError: start timestamp 97 &lt;garbage&gt;<' in row0
    assert "3 failed runs in a row" in row0
    row1 = re.search(r'<tr data-shard="1" data-strategy="THOROUGH"[^>]*>(.*?)</tr>', page, re.S).group(1)
    assert "its process is gone" in row1 and "lease expires in 30s" in row1


def test_the_intensity_limit_is_shown_with_its_value():
    status = _status([_row(0, "THOROUGH")])
    assert 'id="intensity"' not in render_page(status)  # an older status without the setting
    status["settings"]["sweep_max_entries_per_second"] = 25_000
    page = render_page(status)
    assert 'data-field="sweep_max_entries_per_second" data-value="25000">25,000 entries/s per sweep task and pair<' in page
    status["settings"]["sweep_max_entries_per_second"] = 0
    assert 'data-value="0">unlimited<' in render_page(status)


def test_effective_settings_show_their_source_and_settings_warnings_are_on_top():
    status = _status([_row(0, "THOROUGH")])
    status["effective_settings"] = [
        {"name": "batch_limit", "group": "engine", "value": 77, "source": "the atlas_settings Variable"},
        {"name": "strategies", "group": "Airflow", "value": ["THOROUGH"], "source": "default"},
    ]
    status["settings_warnings"] = ["the atlas_settings Variable is read from <AIRFLOW_VAR_ATLAS_SETTINGS>"]
    page = render_page(status)
    assert '<tr data-setting="batch_limit" data-source="the atlas_settings Variable">' in page
    assert 'data-field="value" data-value="77"' in page
    assert re.search(r'id="settings-defaults">.*data-setting="strategies" data-source="default"', page, re.S)
    assert 'data-value="[&quot;THOROUGH&quot;]"' in page
    warnings = page.index('id="settings-warnings"')
    assert warnings < page.index("<h2>Shards</h2>") and "&lt;AIRFLOW_VAR_ATLAS_SETTINGS&gt;" in page
    del status["settings_warnings"]
    assert 'id="settings-warnings"' not in render_page(status)


def test_the_application_pace_target_and_each_runs_pace_and_reason_are_shown():
    last = {"at": NOW - 30, "age_seconds": 30.0, "status": "caught_up", "outcome": "ok", "entries_read": 5,
            "pace_entries_per_second": 4500.0, "pace_reason": "running: halved to 4,500 entries/s: p99 38 ms > target 25 ms <x>"}
    status = _status([_row(0, "THOROUGH", last=last), _row(1, "THOROUGH", last={**last, "pace_reason": None})])
    status["settings"].update(sweep_max_entries_per_second=0, sweep_latency_target=1.5)
    page = render_page(status)
    assert ('data-field="sweep_latency_target" data-value="1.5">unthrottled while the application rests, the limit '
            'while it runs, raised while its p99 stays within 1.5x its baseline<') in page
    assert page.count('data-field="pace"') == 1  # a run without a pace (an older record) shows none
    assert ('data-field="pace" data-value="4500.0">pace 4,500 entries/s: running: halved to 4,500 entries/s: p99 38 '
            "ms &gt; target 25 ms &lt;x&gt;<") in page
    status["settings"]["sweep_latency_target"] = 0.0
    assert 'data-value="0.0">off (the limit is a fixed rate)<' in render_page(status)


def test_a_forecast_that_does_not_know_says_so():
    # Issue 32 item 12: 411 entries waiting, no run yet: not a bare "-" but what is not known.
    row = _row(0, "THOROUGH", backlog=411)
    row["forecast"] = to_json(drain_forecast(backlog=411, sweepable=411, ingest_entries=411, swept_entries=0, elapsed_seconds=60.0,
                                     runs=0, basis="window", ever_swept=False))
    row["warnings"] = []
    forecast = re.search(r'<table id="forecast">(.*?)</table>', render_page(_status([row])), re.S).group(1)
    drain = re.search(r'<td data-field="time_to_drain"[^>]*>(.*?)</td>', forecast).group(1)
    assert drain == "unknown"
    assert 'data-field="unknown">no sweep run yet: no sweep rate measured, so no time to drain<' in forecast


def test_the_compaction_section_shows_the_count_compaction_plans_from():
    status = _status([_row(0, "THOROUGH")])
    status["compaction"] = [
        {"table": "a<1>", "strategy": "THOROUGH", "tombstones_since_compaction": 1234, "capped": False,
         "last_compaction_through_ts": 0, "last_compaction_at": None, "last_compaction_age_seconds": None,
         "last_compaction_method": None, "threshold_tombstones": 1000, "due": True},
        {"table": "b", "strategy": "CONSERVATIVE", "tombstones_since_compaction": 0, "capped": False,
         "last_compaction_through_ts": 555, "last_compaction_at": NOW - 120, "last_compaction_age_seconds": 120.0,
         "last_compaction_method": "vacuum", "threshold_tombstones": 1000, "due": False},
    ]
    page = render_page(status)
    section = re.search(r'<table id="compaction">(.*?)</table>', page, re.S).group(1)
    a = re.search(r'<tr data-table="a&lt;1&gt;">(.*?)</tr>', section).group(1)
    assert 'data-field="tombstones_since_compaction" data-value="1234" class="num">1,234<' in a
    assert 'data-field="threshold_tombstones" data-value="1000"' in a and 'data-field="due" data-value="true"' in a
    assert '<span class="muted">never</span>' in a
    b = re.search(r'<tr data-table="b">(.*?)</tr>', section).group(1)
    assert 'data-value="0" class="num">0<' in b and 'data-field="due" data-value="false"' in b
    assert "2m00s ago" in b and "vacuum" in b and "through ts 555" in b
    status["compaction"][0].update(threshold_tombstones=None, due=None)
    a = re.search(r'<tr data-table="a&lt;1&gt;">(.*?)</tr>', render_page(status)).group(1)
    assert 'data-field="due" data-value=""' in a and ">unknown<" in a


def test_a_steady_backlog_that_does_not_drain_says_so():
    # Issue 32 item 12: "steady" with time to drain "-": ingest within the tolerance above sweep, so the
    # backlog neither grows materially nor drains; the page says the measured rates do not drain it.
    row = _row(0, "THOROUGH", backlog=411)
    row["forecast"] = to_json(drain_forecast(backlog=411, sweepable=411, ingest_entries=105, swept_entries=100,
                                     elapsed_seconds=100.0, runs=3))
    row["warnings"] = []
    forecast = re.search(r'<table id="forecast">(.*?)</table>', render_page(_status([row])), re.S).group(1)
    assert re.search(r'<td data-field="time_to_drain"[^>]*>(.*?)</td>', forecast).group(1) == "not at these rates"
    assert ">steady<" in forecast and 'data-field="unknown"' not in forecast


def test_a_status_read_without_paxos_shows_the_fallback_banner_with_its_reason():
    serial = render_page(_status([_row(0, "THOROUGH")]) | {"reads": {"serial": True, "fallback": None, "reason": None}})
    assert 'id="reads-fallback"' not in serial and "NON-SERIAL" not in serial
    fell_back = _status([_row(0, "THOROUGH")]) | {
        "reads": {"serial": False, "fallback": NON_SERIAL_FALLBACK, "reason": "CAS read timeout <coordinator>"}}
    page = render_page(fell_back)
    banner = re.search(r'<div class="panel alert" id="reads-fallback">(.*?)</div>', page, re.S)
    assert banner, "no fallback banner"
    assert "NON-SERIAL FALLBACK" in banner.group(1)
    assert "read without Paxos" in banner.group(1)
    assert "CAS read timeout &lt;coordinator&gt;" in banner.group(1)
    assert page.index('id="reads-fallback"') < page.index("<h2>Shards</h2>")
