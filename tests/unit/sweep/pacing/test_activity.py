"""SweepActivity (sweep/pacing/activity.py): a run claims the time it sweeps, ahead of the sweeping, renews
before half a claim is left, ends its last claim at its end, marks nothing in a dry run, and a store that
refuses the marks never fails the run. On the embedded store with a clock of the test's own."""
from __future__ import annotations

import logging
from functools import partial

import pytest

from airflow_atlas.kvs.sqlite import SqliteKeyValueService
from airflow_atlas.sweep.pacing.activity import CLAIM_SECONDS, SweepActivity
from airflow_atlas.transactions.latency_table import TABLE, ensure_table, read_sweep_marks, write_sweep_mark
from tests.faults import DeniedTableKvs

START = 1_800_000_000.0


@pytest.fixture
def kvs(tmp_path):
    kvs = SqliteKeyValueService(str(tmp_path / "atlas.db"))
    ensure_table(kvs)
    yield kvs
    kvs.close()


def marks(kvs):
    return read_sweep_marks(kvs, START - 100, START + 1000)


def test_a_run_claims_ahead_renews_at_half_and_ends_its_claim_at_its_end(kvs):
    now = [START]
    activity = SweepActivity(partial(write_sweep_mark, kvs), "sweeper-1", 600, clock=lambda: now[0])
    activity.touch()
    assert marks(kvs) == [(START, START + CLAIM_SECONDS)]  # written before the sweeping it covers
    now[0] += CLAIM_SECONDS / 2 - 1
    activity.touch()
    assert len(marks(kvs)) == 1  # more than half a claim left: no write
    now[0] += 2
    activity.touch()
    renewed = START + CLAIM_SECONDS / 2 + 1
    assert marks(kvs) == [(START, START + CLAIM_SECONDS), (renewed, renewed + CLAIM_SECONDS)]
    now[0] += 3
    activity.close()
    assert marks(kvs) == [(START, START + CLAIM_SECONDS), (renewed, renewed + 3)]  # ends where the run ended


def test_a_killed_run_leaves_its_claim_and_a_run_past_its_claim_never_extends_it_at_close(kvs):
    now = [START]
    activity = SweepActivity(partial(write_sweep_mark, kvs), "sweeper-2", 600, clock=lambda: now[0])
    activity.touch()
    now[0] += CLAIM_SECONDS * 3  # no touch for longer than a claim (never happens while a run is alive)
    activity.close()
    assert marks(kvs) == [(START, START + CLAIM_SECONDS)]  # close only shortens: it never claims the past


def test_a_dry_run_marks_nothing(kvs):
    activity = SweepActivity(partial(write_sweep_mark, kvs), "dry", 600, clock=lambda: START, enabled=False)
    activity.touch()
    activity.close()
    assert marks(kvs) == []


def test_a_store_that_refuses_the_marks_never_fails_the_run_and_warns_once(kvs, caplog):
    denied = DeniedTableKvs(kvs, TABLE)
    now = [START]
    activity = SweepActivity(partial(write_sweep_mark, denied), "refused", 600, clock=lambda: now[0])
    caplog.set_level(logging.WARNING, logger="airflow_atlas.sweep.pacing.activity")
    for _ in range(5):
        activity.touch()
        now[0] += CLAIM_SECONDS
    activity.close()
    assert denied.denied == 1 and marks(kvs) == []
    assert [r.getMessage() for r in caplog.records if "could not mark the sweep" in r.getMessage()] != []
    assert len(caplog.records) == 1
