"""THE definition of lag and backlog (``airflow_atlas.status.lag``): the pure parts with constructed numbers,
then on a real embedded store - a positive age while sweepable entries wait, 0 after a sweep, and the
same figures in the status document, the Prometheus collector's gauges and the StatsD gauges' source."""
from __future__ import annotations

import re
import time

import pytest

from airflow_atlas.airflow.metrics import shard_measurements
from airflow_atlas.airflow.web.render import render_shard_table
from airflow_atlas.cli.status import render_status
from airflow_atlas.config import StoreConfig
from airflow_atlas.serialisation import to_json
from airflow_atlas.status import TimestampClock, build_status, format_duration, measure_pair, measure_store, overall
from airflow_atlas.status.lag import PairQueue, entry_age, lag_ts, pair_lag
from airflow_atlas.status.metrics import document_metrics
from airflow_atlas.store import AtlasStore
from airflow_atlas.workload import WorkloadSpec, run_workload

# wall 1000 -> ts 100, wall 1100 -> ts 200 (one timestamp per second)
CLOCK = TimestampClock([(1000.0, 100), (1100.0, 200)])


def queue(oldest, sweepable=5, pinned=2, sweep_ts=190, progress=120, cap=100):
    return PairQueue(0, "THOROUGH", sweep_ts, progress, oldest, sweepable, pinned, cap)


def test_lag_ts_counts_timestamps_between_progress_and_the_sweep_timestamp():
    assert lag_ts(190, 120) == 69
    assert lag_ts(121, 120) == 0 and lag_ts(100, 120) == 0


def test_the_lag_is_the_age_of_the_oldest_sweepable_unswept_entry():
    lag = pair_lag(queue(150), CLOCK, now=1110.0)
    assert lag.oldest_unswept_ts == 150
    assert lag.lag_seconds == pytest.approx(1110.0 - 1050.0)  # ts 150 was fresh at wall 1050
    assert lag.lag_seconds_is_lower_bound is False
    assert lag.lag_ts == 69  # the timestamps figure stays what it was
    assert (lag.sweepable_entries, lag.pinned_entries, lag.backlog_entries) == (5, 2, 7)


def test_no_sweepable_entry_is_no_lag_even_when_progress_trails_the_sweep_timestamp():
    lag = pair_lag(queue(None, sweepable=0, pinned=3), CLOCK, now=1110.0)
    assert lag.lag_seconds == 0.0 and lag.lag_ts == 69 and lag.backlog_entries == 3


def test_an_entry_older_than_every_anchor_gives_a_lower_bound():
    assert entry_age(CLOCK, 50, 1110.0) == (110.0, True)  # at least as old as the oldest anchor
    assert entry_age(TimestampClock([]), 50, 1110.0) == (None, False)
    assert entry_age(CLOCK, None, 1110.0) == (0.0, False)


def test_caps_say_at_least():
    lag = pair_lag(queue(150, sweepable=100, pinned=0), CLOCK, now=1110.0)
    assert lag.sweepable_capped and lag.backlog_capped and not lag.pinned_capped


def test_overall_is_the_largest_lag_and_the_summed_backlog():
    a = pair_lag(queue(150, sweepable=5, pinned=1), CLOCK, now=1110.0)
    b = pair_lag(queue(180, sweepable=7, pinned=0), CLOCK, now=1110.0)
    c = pair_lag(queue(None, sweepable=0, pinned=4), CLOCK, now=1110.0)
    o = overall([a, b, c])
    assert o.lag_seconds == pytest.approx(60.0) and o.oldest_unswept_ts == 150
    assert (o.sweepable_entries, o.pinned_entries, o.backlog_entries) == (12, 5, 17)
    assert overall([]).lag_seconds == 0.0
    unknown = pair_lag(queue(150), TimestampClock([]), now=1110.0)
    assert overall([a, unknown]).lag_seconds is None  # one unknown pair: the overall lag is unknown


# ----- on a real (embedded) store -------------------------------------------------------------------------------
@pytest.fixture
def store(tmp_path):
    config = StoreConfig(unreadable_window_seconds=0, punch_interval_seconds=0.1)
    with AtlasStore.open(f"sqlite:///{tmp_path / 'lag.db'}", config) as s:
        s.initialize(shards=1)
        yield s


def _gauge(doc, name: str, **labels) -> float:
    for family in document_metrics(doc):
        if family.name == name:
            for sample in family.samples:
                if all(sample.labels.get(k) == v for k, v in labels.items()):
                    return sample.value
    raise AssertionError(f"no sample of {name} {labels}")


def test_a_real_store_shows_a_positive_lag_while_entries_wait_and_none_after_a_sweep(store):
    run_workload(store, WorkloadSpec(transactions=20, seed=3, dead_writer_ratio=0, abort_ratio=0,
                                     tables={"t": "THOROUGH"}))
    waited = 1.5
    time.sleep(waited)
    store.transactions.begin().abort()  # a fresh timestamp (and punch) after the wait
    (pair,) = measure_store(store, cap=1000, strategies=["THOROUGH"])
    assert pair.sweepable_entries > 0 and pair.oldest_unswept_ts is not None
    assert pair.lag_seconds is not None and pair.lag_seconds >= waited * 0.8
    sweep_ts = store.sweep_timestamps.sweep_timestamp("THOROUGH")
    assert measure_pair(store, 0, "THOROUGH", sweep_ts, cap=1000).lag_seconds == pytest.approx(pair.lag_seconds, abs=1.0)

    doc = build_status(store, strategies=["THOROUGH"])
    (row,) = doc.shards
    assert row.oldest_unswept_ts == pair.oldest_unswept_ts
    assert row.lag_seconds == pytest.approx(pair.lag_seconds, abs=1.0)
    assert doc.totals["THOROUGH"]["lag_seconds"] == row.lag_seconds
    assert _gauge(doc, "atlas_sweep_lag_seconds", shard="0", strategy="THOROUGH") == row.lag_seconds
    assert _gauge(doc, "atlas_sweep_lag_max_seconds", strategy="THOROUGH") == row.lag_seconds
    assert _gauge(doc, "atlas_sweep_sweepable_total_entries", strategy="THOROUGH") == row.sweepable_entries > 0
    as_json = to_json(doc)
    assert f"THOROUGH: lag {format_duration(row.lag_seconds)} (age of the oldest sweepable unswept entry)" in render_status(as_json)
    total_row = re.search(r'<tr class="sub" data-total="THOROUGH">.*?</tr>', render_shard_table(as_json)).group(0)
    assert f'data-field="lag_seconds" data-value="{row.lag_seconds}"' in total_row

    partial = to_json(store.sweeper.sweep_shard(0, "THOROUGH", sweep_ts=sweep_ts, batch_limit=2, max_iterations=1))
    measured = measure_pair(store, 0, "THOROUGH", sweep_ts, cap=1000)  # the pair after that partial run
    statsd = shard_measurements(partial)  # the sweep operator's gauges: the run's own figures, no store read
    assert partial["status"] == "iteration_limit" and measured.sweepable_entries > 0
    assert statsd == {"lag": measured.lag_ts, "backlog": measured.backlog_entries}  # lag_seconds: not known

    done = to_json(store.sweeper.sweep_shard(0, "THOROUGH"))
    (after,) = measure_store(store, cap=1000, strategies=["THOROUGH"])
    assert after.sweepable_entries == 0 and after.oldest_unswept_ts is None and after.lag_seconds == 0.0
    assert shard_measurements(done) == {"lag": 0.0, "lag_seconds": 0.0, "backlog": after.backlog_entries}
    assert {k: type(v) for k, v in shard_measurements(done).items()} == {"lag": int, "lag_seconds": float, "backlog": int}
    doc = build_status(store, strategies=["THOROUGH"])
    assert doc.shards[0].lag_seconds == 0.0
    assert _gauge(doc, "atlas_sweep_lag_max_seconds", strategy="THOROUGH") == 0.0


def test_the_oldest_start_timestamp_is_the_first_queued_one(store):
    run_workload(store, WorkloadSpec(transactions=5, seed=4, dead_writer_ratio=0, abort_ratio=0, tables={"t": "THOROUGH"}))
    reader = store.queue.reader
    batch = reader.read_batch(0, "THOROUGH", -1, 2**62)
    first = batch.entries[0].start_ts
    assert reader.oldest_start_ts(0, "THOROUGH", -1, 2**62) == first
    assert reader.oldest_start_ts(0, "THOROUGH", first, 2**62) == min(e.start_ts for e in batch.entries if e.start_ts > first)
    assert reader.oldest_start_ts(0, "THOROUGH", -1, first) is None
