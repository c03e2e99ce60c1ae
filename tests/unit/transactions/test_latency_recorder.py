"""The application-latency recorder and the reader's argument checks (pure: no store)."""
from __future__ import annotations

import threading

import pytest

from airflow_atlas.errors import InvalidInputError
from airflow_atlas.transactions.latency_publisher import LatencyPublication
from airflow_atlas.transactions.latency_recorder import ABORT, COMMIT, KINDS, READ, LatencyRecorder
from airflow_atlas.transactions.latency_table import read_application_latency


def test_drain_takes_what_was_recorded_and_starts_anew():
    rec = LatencyRecorder()
    assert rec.drain() == {}
    rec.record(COMMIT, 0.010)
    rec.record(COMMIT, 0.020)
    rec.record(READ, 0.001)
    taken = rec.drain()
    assert set(taken) == {COMMIT, READ}  # kinds with nothing recorded are left out
    assert taken[COMMIT].count == 2 and taken[READ].count == 1
    assert taken[COMMIT].total_seconds == pytest.approx(0.030)
    assert rec.drain() == {}


def test_recording_from_many_threads_loses_nothing():
    rec = LatencyRecorder()
    per_thread, threads = 20_000, 4
    drained = []

    def work(kind):
        for i in range(per_thread):
            rec.record(kind, (i % 100) / 1000)

    def drainer(stop):
        while not stop.is_set():
            drained.append(rec.drain())

    stop = threading.Event()
    d = threading.Thread(target=drainer, args=(stop,))
    d.start()
    workers = [threading.Thread(target=work, args=(KINDS[i % 3],)) for i in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    stop.set()
    d.join()
    drained.append(rec.drain())
    total = sum(h.count for batch in drained for h in batch.values())
    assert total == per_thread * threads


def test_unknown_kind_is_refused():
    with pytest.raises(KeyError):
        LatencyRecorder().record("commits", 0.1)


@pytest.mark.parametrize("since, until, match", [
    (10.0, 5.0, "before since"),
    (-1.0, 5.0, "since must be"),
    (0.0, float("inf"), "until must be"),
    (0.0, 8 * 86_400.0, "at most"),
])
def test_reader_refuses_bad_windows(since, until, match):
    with pytest.raises(InvalidInputError, match=match):
        read_application_latency(None, since, until)  # type: ignore[arg-type]


def test_reader_refuses_unknown_kinds():
    with pytest.raises(InvalidInputError, match="unknown application latency kind 'write'"):
        read_application_latency(None, 0, 1, kinds=(ABORT, "write"))  # type: ignore[arg-type]


@pytest.mark.parametrize("interval, ttl", [(0, 600), (-1, 600), (1.0, 0), (1.0, 1.5), (1.0, True)])
def test_publication_settings_are_checked(interval, ttl):
    with pytest.raises(InvalidInputError):
        LatencyPublication(interval, ttl)
