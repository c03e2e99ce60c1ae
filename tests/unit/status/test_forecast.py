"""The pure parts of ``airflow_atlas.status``: the drain forecast and the timestamp clock."""
from __future__ import annotations

import pytest

from airflow_atlas.serialisation import to_json
from airflow_atlas.status import TimestampClock, drain_forecast, format_duration


def forecast(**kw):
    base = dict(backlog=1000, sweepable=1000, ingest_entries=0, swept_entries=0, elapsed_seconds=100.0, runs=3)
    base.update(kw)
    return to_json(drain_forecast(**base))


def test_drained_backlog_never_warns():
    f = forecast(backlog=0, sweepable=0, ingest_entries=500, swept_entries=100)
    assert f["state"] == "drained" and f["time_to_drain_seconds"] == 0.0 and f["warnings"] == []
    assert f["ingest_outpaces_sweep"] is False and f["ingest_rate_per_second"] == 5.0


def test_draining_forecasts_time_to_drain():
    f = forecast(ingest_entries=100, swept_entries=600, busy_seconds=6.0)
    assert f["state"] == "draining"
    assert f["ingest_rate_per_second"] == 1.0 and f["sweep_rate_per_second"] == 6.0
    assert f["net_drain_rate_per_second"] == 5.0 and f["time_to_drain_seconds"] == 200.0
    assert f["sweep_throughput_per_second"] == 100.0 and f["warnings"] == []


def test_ingest_outpacing_sweep_warns():
    f = forecast(ingest_entries=1000, swept_entries=100)
    assert f["state"] == "growing" and f["ingest_outpaces_sweep"] is True
    assert f["time_to_drain_seconds"] is None
    assert [w["kind"] for w in f["warnings"]] == ["ingest_outpaces_sweep"]
    assert "10/s" in f["warnings"][0]["message"] and "1/s" in f["warnings"][0]["message"]


def test_rates_within_tolerance_are_steady_not_growing():
    f = forecast(ingest_entries=105, swept_entries=100)
    assert f["state"] == "steady" and f["ingest_outpaces_sweep"] is False and f["warnings"] == []
    assert forecast(ingest_entries=105, swept_entries=100, tolerance=0.0)["ingest_outpaces_sweep"] is True


def test_stalled_and_unknown():
    assert forecast()["state"] == "stalled"
    f = forecast(elapsed_seconds=None)
    assert f["state"] == "unknown" and f["ingest_rate_per_second"] is None and f["warnings"] == []


def test_idle_sweeper_warns_only_with_sweepable_work():
    idle = forecast(ingest_entries=100, swept_entries=200, idle_seconds=3600, typical_interval_seconds=60)
    assert [w["kind"] for w in idle["warnings"]] == ["sweeper_idle"] and "1h00m" in idle["warnings"][0]["message"]
    assert forecast(ingest_entries=100, swept_entries=200, idle_seconds=100, typical_interval_seconds=60)["warnings"] == []
    pinned_only = forecast(sweepable=0, ingest_entries=100, swept_entries=200, idle_seconds=3600)
    assert pinned_only["warnings"] == []
    never = forecast(runs=0, basis="window", elapsed_seconds=3600.0, ingest_entries=0)
    assert [w["kind"] for w in never["warnings"]] == ["sweeper_idle"]


def test_timestamp_clock_interpolates_between_anchors():
    clock = TimestampClock([(110.0, 110), (100.0, 10), (120.0, 110), (130.0, 310), (125.0, 50)])
    # (120, 110) adds nothing after (110, 110); (125, 50) is dominated by an earlier, higher anchor
    assert clock.points == [(100.0, 10), (110.0, 110), (130.0, 310)]
    assert clock.wall_of(10) == 100.0 and clock.wall_of(60) == pytest.approx(105.0)
    assert clock.wall_of(210) == pytest.approx(120.0)
    assert clock.wall_of(5) is None and clock.wall_of(10_000) == 130.0
    assert clock.ts_at(99) is None and clock.ts_at(115) == 110 and clock.ts_at(1e12) == 310
    assert clock.oldest_wall == 100.0
    assert clock.timestamps_per_second() == pytest.approx(10.0)
    assert TimestampClock([]).wall_of(1) is None


def test_format_duration():
    assert [format_duration(s) for s in (None, 0.25, 42, 312, 3 * 3600 + 240, 2 * 86400 + 3 * 3600)] == [
        "-", "0.2s", "42s", "5m12s", "3h04m", "2d03h"
    ]


def test_before_any_sweep_no_rate_is_claimed():
    # Issue 16.9: before any run the dashboard must not warn "ingest outpaces sweep (0/s)".
    f = forecast(ingest_entries=1000, swept_entries=0, runs=0, basis="window", ever_swept=False)
    assert f["state"] == "not_swept_yet" and f["sweep_rate_per_second"] is None
    assert f["ingest_outpaces_sweep"] is False and f["net_drain_rate_per_second"] is None
    assert f["ingest_rate_per_second"] == 10.0 and f["warnings"] == []
    old = forecast(ingest_entries=1000, swept_entries=0, runs=0, basis="window", ever_swept=False, elapsed_seconds=600.0)
    assert [w["kind"] for w in old["warnings"]] == ["sweeper_idle"] and "never swept" in old["warnings"][0]["message"]
    # the same figures once a sweep has been recorded: a real 0/s, which ingest outpaces
    assert forecast(ingest_entries=1000, swept_entries=0, runs=0, basis="window")["ingest_outpaces_sweep"] is True


def test_what_the_forecast_does_not_know_is_said():
    # Issue 32 item 12: 411 entries waiting and no run yet showed a state and time to drain "-" with no word
    # of what is missing; the forecast says what it does not know.
    never = forecast(backlog=411, sweepable=411, ingest_entries=411, runs=0, basis="window", ever_swept=False)
    assert never["state"] == "not_swept_yet" and never["time_to_drain_seconds"] is None
    assert never["unknown"] == "no sweep run yet: no sweep rate measured, so no time to drain"
    idle = forecast(backlog=411, sweepable=411, ingest_entries=0, runs=0, basis="window", elapsed_seconds=600.0)
    assert idle["unknown"] == "no sweep run in the last 10m00s: no sweep rate measured, so no time to drain"
    young = forecast(backlog=411, sweepable=411, elapsed_seconds=None, ever_swept=False)
    assert young["unknown"] == "no sweep run yet: no sweep rate measured, so no time to drain"
    assert forecast(backlog=411, sweepable=411, elapsed_seconds=None)["unknown"].startswith("too little history")
    # known figures: nothing unknown (a backlog that does not drain at the measured rates is known)
    assert forecast(backlog=0, sweepable=0)["unknown"] is None
    assert forecast(ingest_entries=100, swept_entries=600)["unknown"] is None
    steady = forecast(ingest_entries=105, swept_entries=100)
    assert steady["state"] == "steady" and steady["time_to_drain_seconds"] is None and steady["unknown"] is None


def test_the_time_to_drain_text_says_unknown_or_not_at_these_rates():
    from airflow_atlas.status.text import drain_text

    assert drain_text(forecast(ingest_entries=100, swept_entries=600)) == "3m20s"
    assert drain_text(forecast(backlog=411, sweepable=411, runs=0, basis="window", ever_swept=False)) == "unknown"
    assert drain_text(forecast(ingest_entries=105, swept_entries=100)) == "not at these rates"
    assert drain_text(forecast(backlog=0, sweepable=0)) == "0.0s"
