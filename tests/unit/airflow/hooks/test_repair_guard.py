"""The compaction guard's decision (airflow_atlas/airflow/hooks/repair.py): pure logic, no services."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from airflow_atlas.airflow.hooks.repair import (
    MAX_TOKEN,
    MIN_TOKEN,
    PURGE_MARGIN_SECONDS,
    RepairRow,
    decide,
    parse_ranges,
    replication_factor,
    ring_covered,
    rows_of_command,
)

NOW = 1_800_000_000.0
GRACE = 864_000
# the local cluster's three ranges (balanced tokens), the last one wrapping
T1, T2, T3 = MIN_TOKEN, -3074457345618258603, 3074457345618258602
RING = [(T1, T2), (T2, T3), (T3, T1)]


def rows(ranges=RING, started=NOW - 3600, status="SUCCESS", all_replicas=True):
    return [RepairRow(b, e, started, status, all_replicas) for b, e in ranges]


@pytest.mark.parametrize(
    "ranges, covered",
    [
        (RING, True),
        ([(T1, T1)], True),  # one node's full-ring range wraps onto itself
        ([(0, 0)], True),
        (RING[:2], False),
        ([(T1, T2), (T3, T1)], False),
        ([(T2, T3), (T3, T2)], True),
        ([(T1, 5), (4, MAX_TOKEN)], True),
        ([(T1, 5), (6, MAX_TOKEN)], False),  # token 6 is missing
        ([], False),
    ],
)
def test_ring_coverage(ranges, covered):
    assert ring_covered(ranges) is covered


def test_replication_factor_one_needs_no_repair():
    assert decide([], 1, 0, NOW).allowed


def test_a_complete_repair_within_gc_grace_allows_compaction():
    decision = decide(rows(), 3, GRACE, NOW)
    assert decision.allowed and decision.repaired_since == NOW - 3600


def test_no_repair_refuses_and_says_why():
    decision = decide([], 3, GRACE, NOW)
    assert not decision.allowed
    assert "no repair of the table" in decision.reason and "bring deleted data back" in decision.reason
    assert "nodetool repair" in decision.reason


def test_a_repair_older_than_gc_grace_does_not_count():
    decision = decide(rows(started=NOW - GRACE + PURGE_MARGIN_SECONDS - 1), 3, GRACE, NOW)
    assert not decision.allowed and "no repair of the table" in decision.reason
    assert decide(rows(started=NOW - GRACE + PURGE_MARGIN_SECONDS), 3, GRACE, NOW).allowed


def test_a_repair_without_every_replica_does_not_count():
    decision = decide(rows(all_replicas=False), 3, GRACE, NOW)
    assert not decision.allowed and "without every replica" in decision.reason


def test_failed_repairs_do_not_count():
    decision = decide(rows(status="FAILED"), 3, GRACE, NOW)
    assert not decision.allowed and "failed" in decision.reason


def test_a_partial_repair_does_not_count():
    decision = decide(rows(ranges=RING[:2]), 3, GRACE, NOW)
    assert not decision.allowed and "do not cover the whole token ring" in decision.reason


def test_sessions_together_may_cover_the_ring():
    together = rows(ranges=RING[:2], started=NOW - 100) + rows(ranges=RING[2:], started=NOW - 5000)
    decision = decide(together, 3, GRACE, NOW)
    assert decision.allowed and decision.repaired_since == NOW - 5000


@pytest.mark.parametrize("grace", [0, 1, PURGE_MARGIN_SECONDS])
def test_gc_grace_at_or_below_the_margin_is_never_safe(grace):
    decision = decide(rows(started=NOW), 3, grace, NOW)
    assert not decision.allowed
    assert f"gc_grace_seconds = {grace}" in decision.reason and "raise gc_grace_seconds" in decision.reason


@pytest.mark.parametrize(
    "replication, rf",
    [
        ({"class": "org.apache.cassandra.locator.SimpleStrategy", "replication_factor": "3"}, 3),
        ({"class": "org.apache.cassandra.locator.NetworkTopologyStrategy", "dc1": "3", "dc2": "2"}, 5),
        ({"class": "org.apache.cassandra.locator.NetworkTopologyStrategy", "dc1": "3/1"}, 3),
    ],
)
def test_replication_factor_of_a_keyspace(replication, rf):
    assert replication_factor(replication) == rf


def _command(tables=("t",), ok=RING, requested=RING, **options):
    text = [f"({b},{e}]" for b, e in ok]
    return SimpleNamespace(
        columnfamily_names=set(tables),
        successful_ranges=set(text),
        requested_ranges={f"({b},{e}]" for b, e in requested},
        started_at=NOW - 60,
        options={"forceRepair": "false", "hosts": "", "dataCenters": "", **options},
    )


def test_parse_ranges_of_the_repair_history():
    assert parse_ranges(["(3074457345618258602,-9223372036854775808]", "(-5,7]", "junk"]) == [
        (3074457345618258602, MIN_TOKEN),
        (-5, 7),
    ]


def test_a_repair_command_row_gives_its_ranges_for_the_tables_it_covered():
    complete = rows_of_command(_command(), "t")
    assert decide(complete, 3, GRACE, NOW).allowed
    assert rows_of_command(_command(tables=("other",)), "t") == []
    forced = rows_of_command(_command(forceRepair="true"), "t")
    assert not decide(forced, 3, GRACE, NOW).allowed
    some_hosts = rows_of_command(_command(hosts="127.0.0.2,127.0.0.3"), "t")
    assert not decide(some_hosts, 3, GRACE, NOW).allowed
    partly_failed = rows_of_command(_command(ok=RING[:2]), "t")
    assert {r.status for r in partly_failed} == {"SUCCESS", "FAILED"}
    assert not decide(partly_failed, 3, GRACE, NOW).allowed
