"""The takeover drill's checker (tests/integration/timestamps/order_checker.py) on histories built by hand:
it must find every kind of violation, and accept valid histories (overlapping draws may come in any order)."""
from __future__ import annotations

import random

from tests.integration.timestamps.order_checker import Draw, check_history


def test_empty_and_single_histories_are_valid() -> None:
    assert check_history([]).ok
    assert check_history([Draw(0, 1, 5, 5)]).ok


def test_sequential_increasing_draws_are_valid() -> None:
    history = [Draw(10 * i, 10 * i + 5, 2 * i + 1, 2 * i + 2) for i in range(100)]
    result = check_history(history)
    assert result.ok and result.draws == 100


def test_overlapping_draws_may_be_out_of_order() -> None:
    """B started before A returned: B may get smaller values than A (they are concurrent)."""
    assert check_history([Draw(0, 10, 50, 50), Draw(5, 20, 40, 40)]).ok


def test_touching_instants_are_not_ordered() -> None:
    """A.end == B.start is not "A returned before B started" (the clock cannot tell)."""
    assert check_history([Draw(0, 10, 50, 50), Draw(10, 20, 40, 40)]).ok


def test_later_draw_with_a_smaller_value_is_an_order_violation() -> None:
    a, b = Draw(0, 10, 50, 50, "a"), Draw(11, 20, 40, 40, "b")
    result = check_history([b, a])
    assert not result.ok
    assert [(v.kind, v.first, v.second) for v in result.violations] == [("order", a, b)]


def test_later_draw_equal_to_an_earlier_maximum_is_an_order_violation() -> None:
    """B's low equal to A's high is both a duplicate and out of order."""
    result = check_history([Draw(0, 10, 1, 5), Draw(20, 30, 5, 9)])
    assert sorted(v.kind for v in result.violations) == ["duplicate", "order"]


def test_order_uses_the_maximum_of_all_draws_ended_before() -> None:
    """An old, long-finished draw with a high value constrains every later one, not only the latest."""
    history = [Draw(0, 1, 1000, 1000), Draw(2, 3, 1001, 1001), Draw(4, 6, 10, 10), Draw(5, 7, 1002, 1002)]
    result = check_history(history)
    assert [(v.kind, v.second.low) for v in result.violations] == [("order", 10)]


def test_a_block_overlapping_another_is_a_duplicate() -> None:
    result = check_history([Draw(0, 10, 1, 10), Draw(5, 15, 8, 12)])  # concurrent, but share 8..10
    assert [v.kind for v in result.violations] == ["duplicate"]


def test_the_same_value_twice_is_a_duplicate_even_far_apart_in_the_list() -> None:
    history = [Draw(i, i + 1000, 10 * i, 10 * i) for i in range(1, 50)] + [Draw(0, 2000, 370, 370)]
    result = check_history(history)
    assert [v.kind for v in result.violations] == ["duplicate"]


def test_malformed_draws_are_reported() -> None:
    result = check_history([Draw(10, 5, 1, 1), Draw(0, 1, 9, 3)])
    assert [v.kind for v in result.violations] == ["malformed", "malformed"]


def test_violations_are_counted_beyond_those_kept() -> None:
    history = [Draw(10 * i, 10 * i + 1, 1000 - i, 1000 - i) for i in range(30)]
    result = check_history(history, keep=5)
    assert result.violation_count == 29 and len(result.violations) == 5


def test_a_large_valid_concurrent_history_passes_and_one_swap_is_found() -> None:
    """Simulated linearizable service: each draw takes its values at an instant inside its interval."""
    rng = random.Random(7)
    events = []
    for _ in range(20_000):
        start = rng.randrange(0, 10_000_000)
        point = start + rng.randrange(0, 1_000)
        events.append((point, start, point + rng.randrange(0, 1_000)))
    events.sort()
    history = [Draw(start, end, 2 * i + 1, 2 * i + 2) for i, (_, start, end) in enumerate(events)]
    assert check_history(history).ok
    # Swap the values of two draws far apart in time: the later one now holds smaller values.
    i, j = 100, 19_000
    history[i], history[j] = (history[i]._replace(low=history[j].low, high=history[j].high),
                              history[j]._replace(low=history[i].low, high=history[i].high))
    result = check_history(history)
    assert not result.ok and {v.kind for v in result.violations} == {"order"}


def test_tuples_are_accepted() -> None:
    assert not check_history([(0, 1, 5, 5), (2, 3, 4, 4)]).ok
