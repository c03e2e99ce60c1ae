"""ApplicationPace (sweep/pacing/application.py): every state and transition, on observations and times given
as arguments (pure: no store, no clock, no wait)."""
from __future__ import annotations

import pytest

from airflow_atlas.errors import InvalidInputError
from airflow_atlas.kvs.pressure import NodePressure, PoolState
from airflow_atlas.sweep.pacing.application import (
    ALIVE_INTERVALS,
    BASELINE_POOLS,
    MIN_TRANSACTIONS,
    REST_INTERVALS,
    SETTLE_INTERVALS,
    ApplicationPace,
    Observation,
    PaceState,
)
from airflow_atlas.transactions.histogram import LatencyHistogram

MS = 0.001
SAFE = 250.0
T0 = 1_000.0


def hist(n: int, seconds: float) -> LatencyHistogram:
    h = LatencyHistogram()
    for _ in range(n):
        h.record(seconds)
    return h


def alive(at: float) -> Observation:
    """A publication heard at ``at`` that held no transaction (a client alive, resting)."""
    return Observation(heard_at=at)


def busy(at: float, n: int = 0, seconds: float = 10 * MS) -> Observation:
    """A publication heard at ``at`` with ``n`` transactions of ``seconds`` each (at least one: busy)."""
    return Observation(heard_at=at, busy_at=at, transactions=hist(max(n, 1), seconds))


def controller(target: float = 1.2) -> ApplicationPace:
    return ApplicationPace(SAFE, target, 1.0, now=T0)


def running_with_baseline(p: ApplicationPace, t: float, seconds: float = 10 * MS) -> float:
    """Drive ``p`` into ``running`` and through the baseline pools at the safe pace; returns the time after."""
    p.observe(busy(t), 0, t)
    t += SETTLE_INTERVALS + 0.1
    for _ in range(BASELINE_POOLS):
        p.observe(busy(t, MIN_TRANSACTIONS, seconds), 0, t)
        t += 0.5
    return t


def test_a_store_no_client_publishes_to_is_unseen_and_keeps_the_safe_pace():
    p = controller()
    assert p.state is PaceState.UNSEEN and p.pace() == SAFE
    assert p.observe(Observation(), 1000, T0 + 5) == SAFE
    assert p.state is PaceState.UNSEEN and p.reason.startswith("unseen: no transaction client published")
    assert "the safe pace 250 entries/s" in p.reason


def test_clients_alive_and_running_nothing_is_a_rest_and_the_sweep_runs_unthrottled():
    p = controller()
    assert p.observe(alive(T0), 0, T0) == 0.0
    assert p.state is PaceState.RESTING and p.reason == "resting: clients alive, no transaction published yet: unthrottled"
    p.observe(alive(T0 + 1), 0, T0 + 1.5)
    assert p.pace() == 0.0 and p.state is PaceState.RESTING


def test_a_transaction_after_a_rest_brings_the_safe_pace_at_once():
    p = controller()
    p.observe(alive(T0), 0, T0)
    assert p.pace() == 0.0
    assert p.observe(busy(T0 + 0.3), 5000, T0 + 0.3) == SAFE  # never a slow start into a busy store
    assert p.state is PaceState.RUNNING and p.reason.startswith("running: the safe pace 250 entries/s, measuring")


def test_the_application_stops_and_after_the_rest_interval_the_sweep_runs_free_again():
    p = controller()
    p.observe(busy(T0), 0, T0)
    assert p.state is PaceState.RUNNING
    p.observe(alive(T0 + 1), 0, T0 + 1)  # one empty interval: a gap between busy ones
    assert p.state is PaceState.RUNNING
    p.observe(alive(T0 + 2), 0, T0 + REST_INTERVALS + 0.01)
    assert p.state is PaceState.RESTING and p.pace() == 0.0
    assert "no transaction for 2.0 s" in p.reason


def test_clients_that_go_quiet_make_the_store_unseen_again():
    p = controller()
    p.observe(alive(T0), 0, T0)
    p.observe(Observation(), 0, T0 + ALIVE_INTERVALS)
    assert p.state is PaceState.RESTING  # two publications may go missing
    p.observe(Observation(), 0, T0 + ALIVE_INTERVALS + 0.01)
    assert p.state is PaceState.UNSEEN and p.pace() == SAFE


def test_at_the_start_a_busy_publication_of_the_last_intervals_means_running():
    p = controller()
    assert p.observe(Observation(heard_at=T0 - 0.2, busy_at=T0 - 1.5), 0, T0) == SAFE
    assert p.state is PaceState.RUNNING
    q = controller()
    assert q.observe(Observation(heard_at=T0 - 0.2, busy_at=T0 - 2.5), 0, T0) == 0.0
    assert q.state is PaceState.RESTING


def test_the_baseline_is_the_median_p99_of_pools_at_the_safe_pace_and_only_then_the_pace_rises():
    p = controller()
    p.observe(busy(T0), 0, T0)
    t = T0 + SETTLE_INTERVALS + 0.1
    for i, seconds in enumerate((10 * MS, 40 * MS, 12 * MS)):
        assert p.rate == SAFE and p.baseline is None, i
        p.observe(busy(t, MIN_TRANSACTIONS, seconds), 0, t)
        t += 0.5
    assert p.baseline == pytest.approx(hist(1, 12 * MS).quantile(0.99))  # the median of 10, 40 and 12 ms
    assert p.rate == 2 * SAFE and p.reason.startswith("running: raised to 500 entries/s: p99")


def test_fewer_than_a_pool_of_transactions_decides_nothing():
    p = controller()
    t = running_with_baseline(p, T0)
    rate = p.rate
    p.observe(busy(t, MIN_TRANSACTIONS - 1), 0, t)
    assert p.rate == rate


def test_within_the_target_the_pace_rises_additively_and_over_it_halves_but_never_below_the_safe_pace():
    p = controller()
    t = running_with_baseline(p, T0)
    assert p.rate == 2 * SAFE
    for expected in (3 * SAFE, 4 * SAFE):  # each pool within the target: + the safe pace
        t += SETTLE_INTERVALS
        p.observe(busy(t, MIN_TRANSACTIONS), 0, t)
        assert p.rate == expected
    t += SETTLE_INTERVALS
    p.observe(busy(t, MIN_TRANSACTIONS, 30 * MS), 0, t)  # 3x the baseline: over
    assert p.rate == 2 * SAFE and p.backoffs == 1 and p.reason.startswith("running: halved to 500 entries/s")
    t += SETTLE_INTERVALS
    p.observe(busy(t, MIN_TRANSACTIONS, 30 * MS), 0, t)
    assert p.rate == SAFE and p.backoffs == 2
    t += SETTLE_INTERVALS
    p.observe(busy(t, 2, 30 * MS), 0, t)  # over at the safe pace: nothing lower to go to
    assert p.rate == SAFE and p.backoffs == 2


def test_two_transactions_over_the_target_settle_an_over_before_the_pool_is_full():
    p = controller()
    t = running_with_baseline(p, T0)
    t += SETTLE_INTERVALS
    p.observe(busy(t, 2, 100 * MS), 0, t)
    assert p.rate == SAFE and p.backoffs == 1


def test_after_a_change_the_next_interval_s_transactions_are_dropped():
    p = controller()
    t = running_with_baseline(p, T0)
    assert p.rate == 2 * SAFE
    p.observe(busy(t, MIN_TRANSACTIONS, 100 * MS), 0, t)  # within the settle time of the raise: dropped
    assert p.rate == 2 * SAFE and p.backoffs == 0


def test_a_new_running_phase_starts_at_the_safe_pace_and_keeps_the_baseline():
    p = controller()
    t = running_with_baseline(p, T0)
    baseline = p.baseline
    assert p.rate == 2 * SAFE
    p.observe(alive(t), 0, t + REST_INTERVALS + 1)
    assert p.state is PaceState.RESTING
    t += REST_INTERVALS + 2
    assert p.observe(busy(t), 0, t) == SAFE
    assert p.baseline == baseline and "baseline p99" in p.reason


def test_node_pressure_holds_even_a_resting_sweep():
    p = controller()
    p.observe(alive(T0), 0, T0)
    assert p.pace() == 0.0
    pressed = [NodePressure("127.0.0.1", (PoolState("MutationStage", 500, 32, 0),))]
    rate = p.observe(Observation(heard_at=T0 + 1, pressure=pressed), 10_000, T0 + 1)
    assert rate == pytest.approx(5000.0)  # half of the 10,000 entries/s reached
    assert p.full_reason().startswith("node pressure, backed off") and p.full_reason().endswith("unthrottled]")


def test_bad_arguments_are_refused():
    with pytest.raises(InvalidInputError, match="safe_rate"):
        ApplicationPace(0, 1.2, 1.0, now=T0)
    with pytest.raises(InvalidInputError, match="latency_target"):
        ApplicationPace(SAFE, 0.5, 1.0, now=T0)
    with pytest.raises(InvalidInputError, match="entries"):
        controller().observe(Observation(), -1, T0)
