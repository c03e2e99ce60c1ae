"""bench/foreground_impact/run.py's windows and its capacity probe: the windows' lengths and rates (pure), the
steady rate from a probe's figures (pure) and the probe on a real embedded store."""
from __future__ import annotations

from bench.foreground_impact import run as F
from bench.foreground_impact import summary as S


def test_busy_windows_are_as_long_as_2000_pooled_transactions_need():
    full, quick = F._shape(quick=False), F._shape(quick=True)
    assert F.window_seconds(full, "steady", 3) == 37  # 2,000 x 1.1 / (20/s x 3)
    assert F.window_seconds(full, "burst", 3) == 19
    assert F.window_seconds(full, "arrival", 3) == 37 + F.ARRIVAL_DELAY_SECONDS  # counted after the arrival
    assert F.window_seconds(full, "idle", 3) == F.PHASE_SECONDS_FULL
    assert F.window_seconds(full, "steady", 10) == F.PHASE_SECONDS_FULL  # never shorter than the idle windows
    assert F.window_seconds(quick, "steady", 3) == quick["phase_seconds"]  # a smoke run, "too few samples"
    assert F.window_seconds(quick, "arrival", 3) == quick["phase_seconds"] + F.ARRIVAL_DELAY_SECONDS

def test_the_arrival_runs_the_steady_rate_between_the_burst_and_idle_again():
    assert S.PHASES == ("idle", "steady", "burst", "arrival", "idle_again") and "arrival" in S.BUSY
    assert F.with_rates({"phase_seconds": 12.0}, 10)["fg_rates"] == {
        "idle": 0, "steady": 10, "burst": 20, "arrival": 10, "idle_again": 0}

def test_the_steady_rate_is_half_the_highest_rate_carried():
    ms = 0.001
    assert F.steady_rate({10: 60 * ms, 20: 70 * ms, 40: 110 * ms, 80: None}) == 20  # 40 carried, 80 fell behind
    assert F.steady_rate({10: 63 * ms, 20: 44 * ms, 40: None}) == 10  # this machine on 2026-11-29
    assert F.steady_rate({10: 60 * ms, 20: 70 * ms, 40: 130 * ms}) == 10  # 40 over 2x the lowest rate's p99
    assert F.steady_rate({10: 30 * ms, 20: 30 * ms, 40: 40 * ms, 80: 50 * ms}) == 40  # a fast machine
    assert F.steady_rate({10: None}) == F.MIN_STEADY == F.steady_rate({})
    assert F.highest_carried({10: 60 * ms, 20: None, 40: 61 * ms}) == 10  # a rate after one not carried never counts

def test_the_capacity_probe_runs_the_foreground_without_sweep_on_a_real_store(tmp_path):
    """probe_capacity on the embedded store (the full mode probes the node): each rate's p99, in order, stopping
    at the first rate not carried."""
    from airflow_atlas.kvs.tables import SweepStrategy
    from bench.lib.load import cell, load_committed_base
    from bench.lib.stores import open_store

    store = open_store(f"sqlite:///{tmp_path}/probe.db")
    try:
        store.create_table(F.FG_TABLE, SweepStrategy.CONSERVATIVE)
        load_committed_base(store, [F.FG_TABLE], 200)
        probes = F.probe_capacity(store, [cell(i) for i in range(200)], rates=(5, 10), seconds=1.0,
                                   warmup_seconds=0.5)
    finally:
        store.close()
    assert list(probes) == [5, 10], probes  # the embedded store carries both
    assert all(p is not None and 0 < p < 1.0 for p in probes.values()), probes
