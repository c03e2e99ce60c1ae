"""Node pressure (kvs/pressure.py: when a node is under pressure) and its guard (sweep/pacing/pressure.py: the
ceiling it sets), and the guard inside the application pace (sweep/pacing/application.py). Pure: readings,
entries and times are given."""
from __future__ import annotations

import pytest

from airflow_atlas.kvs.pressure import MAX_PENDING_COMPACTIONS, NodePressure, PoolState, pressure_problem
from airflow_atlas.sweep.pacing.pressure import (
    DECREASE_FACTOR,
    GROWTH_FACTOR,
    MIN_ENTRIES_PER_SECOND,
    SETTLE_SECONDS,
    PressureGuard,
)


def node(name: str = "127.0.0.2", *, mutation: int = 0, blocked: int = 0, compactions: int = 0) -> NodePressure:
    rows = [
        {"name": "MutationStage", "pending_tasks": mutation, "active_tasks_limit": 16, "blocked_tasks": 0},
        {"name": "ReadStage", "pending_tasks": 0, "active_tasks_limit": 16, "blocked_tasks": 0},
        {"name": "Native-Transport-Requests", "pending_tasks": 0, "active_tasks_limit": 128, "blocked_tasks": blocked},
        {"name": "CompactionExecutor", "pending_tasks": compactions, "active_tasks_limit": 2, "blocked_tasks": 0},
        {"name": "GossipStage", "pending_tasks": 500, "active_tasks_limit": 1, "blocked_tasks": 9},  # not a request stage
    ]
    return NodePressure.from_rows(name, rows)


CALM = [node("127.0.0.2"), node("127.0.0.3")]
BUSY = [node("127.0.0.2"), node("127.0.0.3", mutation=40)]


def test_a_node_is_under_pressure_when_a_request_stage_queues_more_than_its_threads_blocks_or_compactions_pile_up():
    assert node().problems() == [] and pressure_problem(CALM) is None
    assert node(mutation=16).problems() == []  # a queue as long as the stage's threads: busy, not behind
    assert node(mutation=17).problems() == ["MutationStage 17 pending > 16 threads"]
    assert node(blocked=3).problems() == ["Native-Transport-Requests 3 blocked"]
    assert node(compactions=MAX_PENDING_COMPACTIONS).problems() == []
    assert node(compactions=MAX_PENDING_COMPACTIONS + 1).problems() == [f"{MAX_PENDING_COMPACTIONS + 1} pending compactions > 20"]
    assert pressure_problem(BUSY) == "127.0.0.3: MutationStage 40 pending > 16 threads"
    assert NodePressure("127.0.0.4", (), late=True).problems() == ["no answer within the timeout"]
    assert [p.name for p in node().pools] == ["MutationStage", "ReadStage", "Native-Transport-Requests", "CompactionExecutor"]
    assert NodePressure.from_rows("n", [{"name": "ReadStage", "pending_tasks": None}]).pools == (PoolState("ReadStage", 0, 0, 0),)


def test_without_readings_the_guard_holds_nothing_back():
    guard = PressureGuard(now=0.0)
    for t in range(1, 20):
        assert guard.feed(None, 1_000, 4_000.0, float(t)) is None  # not read this time
        assert guard.feed([], 1_000, 4_000.0, t + 0.5) is None  # no nodes (the embedded store)
    assert guard.backoffs == 0 and guard.reason is None


def test_pressure_halves_what_the_sweeper_reached_once_per_settle_time_then_grows_back_and_lets_go():
    guard = PressureGuard(now=0.0)
    assert guard.feed(CALM, 4_000, 5_000.0, 1.0) is None  # 4,000 entries/s reached, no pressure
    assert guard.feed(BUSY, 4_000, 5_000.0, 2.0) == 4_000 * DECREASE_FACTOR
    assert guard.backoffs == 1 and guard.reason.startswith("node pressure, backed off to 2,000 entries/s (half the 4,000")
    assert "127.0.0.3: MutationStage 40 pending" in guard.reason
    assert guard.feed(BUSY, 2_000, 2_000.0, 2.0 + SETTLE_SECONDS / 2) == 2_000  # settling: no second halving
    assert guard.feed(BUSY, 2_000, 2_000.0, 2.0 + SETTLE_SECONDS) == 1_000  # still under pressure: halved again
    assert guard.backoffs == 2
    t = 2.0 + SETTLE_SECONDS
    t += SETTLE_SECONDS
    assert guard.feed(CALM, int(1_000 * SETTLE_SECONDS), 1_000.0, t) == pytest.approx(1_000 * GROWTH_FACTOR)
    assert guard.reason.startswith("node pressure gone, growing to 1,500 entries/s")
    t += 1.0
    assert guard.feed(CALM, 1_500, 1_500.0, t) == pytest.approx(1_000 * GROWTH_FACTOR ** 2)  # 2,250 <= 2 x 1,500
    t += 1.0
    assert guard.feed(CALM, 2_250, 2_250.0, t) == pytest.approx(1_000 * GROWTH_FACTOR ** 3)  # 3,375 <= 4,500
    t += 1.0
    assert guard.feed(CALM, 1_000, 3_375.0, t) is None  # 5,062 > 2 x the 1,000 reached: it no longer binds
    assert guard.reason is None and guard.backoffs == 2


def test_the_guard_never_goes_below_the_minimum_pace_nor_raises_its_ceiling_under_pressure():
    guard = PressureGuard(now=0.0)
    assert guard.feed(BUSY, 10, 10.0, 1.0) == MIN_ENTRIES_PER_SECOND
    assert guard.feed(BUSY, 100_000, 100_000.0, 1.0 + SETTLE_SECONDS) == MIN_ENTRIES_PER_SECOND  # min(held, half)
