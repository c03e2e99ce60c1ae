"""The application's latency, published: transaction managers record and publish - every interval, also when
they ran nothing, and at once for the first transaction after a rest -, a reader pools every client's summaries
of a window, the sweep's source turns them into observations, summaries expire, and a client whose publication
fails still commits. Both backends (the ``kvs`` fixture: SQLite file, real Cassandra node)."""
from __future__ import annotations

import dataclasses
import logging
import time
import uuid

import pytest

from airflow_atlas.kvs.api import Cell
from airflow_atlas.transactions.histogram import LatencyHistogram
from airflow_atlas.transactions.latency_publisher import LatencyPublication
from airflow_atlas.transactions.latency_table import (
    TABLE,
    ensure_table,
    read_application_latency,
    read_publications,
    write_summaries,
)
from airflow_atlas.transactions.manager import TransactionManager
from tests.faults import DeniedTableKvs
from tests.integration.transactions.conftest import FAST

FAST_PUBLICATION = LatencyPublication(interval_seconds=0.2, ttl_seconds=600)


def _put(table: str):
    def fn(txn):
        txn.put(table, {Cell(uuid.uuid4().bytes, b"c"): b"v"})
    return fn


def _wait_for(predicate, timeout: float = 5.0):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.05)


def test_clients_publish_in_the_background_and_a_reader_pools_them(kvs, make_table, make_manager):
    table = make_table()
    since = time.time()
    a = make_manager(latency=FAST_PUBLICATION, holder="client-a")
    b = make_manager(latency=FAST_PUBLICATION, holder="client-b")
    try:
        for _ in range(5):
            a.run(_put(table))
        for _ in range(3):
            b.run(_put(table))
        a.run_read_only(lambda txn: txn.get(table, [Cell(b"absent", b"c")]))  # a commit and a read
        txn = b.begin()
        txn.get(table, [Cell(b"absent", b"c")])
        txn.abort()  # an abort and a read

        def pooled():
            got = read_application_latency(kvs, since, time.time())
            return got if (got["commit"].count, got["abort"].count, got["read"].count) == (9, 1, 2) else None

        got = _wait_for(pooled)  # published by the background threads, before any close
        assert got, read_application_latency(kvs, since, time.time())
        assert got["commit"].quantile(0.99) < 60 and got["commit"].mean() > 0
        assert a.latency is not None and b.latency is not None
        assert a.latency.client != b.latency.client
        assert a.latency.published >= 1 and b.latency.published >= 1
        assert a.latency.failures == b.latency.failures == 0
        # idle, the client stays alive: its thread publishes an empty summary every interval
        published = a.latency.published
        assert _wait_for(lambda: a.latency.published >= published + 2, 3.0) and a.latency.running
        a.run(_put(table))
        assert a.latency.running
    finally:
        a.close()
        b.close()
    assert not a.latency.running and not b.latency.running
    got = read_application_latency(kvs, since, time.time())
    assert got["commit"].count == 10  # the last one was published at close


def test_a_window_holds_the_summaries_that_ended_in_it(kvs):
    ensure_table(kvs)
    base = (int(time.time()) // 60 - 4) * 60 + 0.5  # minutes ago, well within the TTL; several partitions
    client = f"window-{uuid.uuid4().hex[:8]}"

    def hist(n):
        h = LatencyHistogram()
        for _ in range(n):
            h.record(0.004)
        return h

    write_summaries(kvs, client, base + 10, {"commit": hist(1)}, 600)
    write_summaries(kvs, client, base + 70, {"commit": hist(2), "read": hist(4)}, 600)
    write_summaries(kvs, client, base + 130, {"commit": hist(8), "abort": LatencyHistogram()}, 600)
    counts = lambda since, until: {k: h.count for k, h in read_application_latency(kvs, since, until).items()}  # noqa: E731
    assert counts(base, base + 130) == {"commit": 11, "abort": 0, "read": 4}
    assert counts(base + 10, base + 70) == {"commit": 2, "abort": 0, "read": 4}  # (since, until]
    assert counts(base + 9.999, base + 10) == {"commit": 1, "abort": 0, "read": 0}
    assert counts(base + 71, base + 129) == {"commit": 0, "abort": 0, "read": 0}
    assert read_application_latency(kvs, base, base + 130, kinds=("read",))["read"].count == 4


def test_summaries_expire_with_their_ttl(kvs):
    """A TTL of 3 s, not 1: Cassandra counts expiry in whole seconds from the second of the write, so a 1 s TTL
    can expire within a millisecond and the first read would miss the summary on any machine."""
    ensure_table(kvs)
    h = LatencyHistogram()
    h.record(0.01)
    now = time.time()
    write_summaries(kvs, f"ttl-{uuid.uuid4().hex[:8]}", now, {"abort": h}, ttl_seconds=3)
    assert read_application_latency(kvs, now - 0.01, now + 0.01)["abort"].count == 1
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and read_application_latency(kvs, now - 0.01, now + 0.01)["abort"].count:
        time.sleep(0.2)
    assert read_application_latency(kvs, now - 0.01, now + 0.01)["abort"].count == 0
    assert time.time() - now >= 2, "the summary expired before its TTL"


def test_a_client_that_cannot_publish_still_commits(kvs, make_table, caplog):
    table = make_table()
    denied = DeniedTableKvs(kvs, TABLE)
    manager = TransactionManager.create(
        denied, config=dataclasses.replace(FAST, latency=LatencyPublication(0.05, 600)),
        holder="denied", registry_margin_seconds=0.2,
    )
    caplog.set_level(logging.WARNING, logger="airflow_atlas.transactions.latency_publisher")
    try:
        deadline = time.monotonic() + 1.0
        commits = 0
        while time.monotonic() < deadline or denied.denied < 3:
            assert manager.run(_put(table)) is None
            commits += 1
        assert commits >= 3
    finally:
        manager.close()
    assert manager.latency is not None
    assert manager.latency.failures == denied.denied >= 3 and manager.latency.published == 0
    warnings = [r for r in caplog.records if r.name.endswith("latency_publisher")]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]  # rate-limited
    assert "no MODIFY permission" in warnings[0].getMessage()


def test_without_a_publication_nothing_is_recorded(kvs, make_table, make_manager):
    table = make_table()
    manager = make_manager()
    assert manager.latency is None
    manager.run(_put(table))
    manager.close()


def test_an_idle_client_publishes_that_it_is_alive_and_its_first_transaction_at_once(kvs, make_table, make_manager):
    """The heartbeat (an empty ``commit`` summary) and the wake: with a 5 s interval, the first transaction after
    a rest is readable within a second, not five."""
    table = make_table()
    slow = LatencyPublication(interval_seconds=5.0, ttl_seconds=600)
    manager = make_manager(latency=slow, holder="alive")
    since = time.time()
    try:
        manager.run(_put(table))  # the first transaction starts the thread and is published at once
        assert _wait_for(lambda: read_application_latency(kvs, since, time.time() + 1)["commit"].count == 1, 2.0)
        assert manager.latency is not None
        assert _wait_for(lambda: manager.latency.published >= 2, 7.0)  # 5 s later: the empty one (alive)
        alive = [p for p in read_publications(kvs, since, time.time() + 1) if p.client == manager.latency.client]
        assert [p.histogram.count for p in alive] == [1, 0]
        rested = time.time()
        manager.run(_put(table))  # the first after an empty interval: at once again
        assert _wait_for(lambda: read_application_latency(kvs, rested, time.time() + 1)["commit"].count == 1, 2.0)
    finally:
        manager.close()


def test_a_manager_that_never_ran_a_transaction_publishes_nothing(kvs, make_manager):
    since = time.time()
    manager = make_manager(latency=FAST_PUBLICATION, holder="never")
    time.sleep(0.5)
    manager.close()
    assert manager.latency is not None and manager.latency.published == 0 and not manager.latency.running
    assert not [p for p in read_publications(kvs, since, time.time() + 1) if p.client == manager.latency.client]


def test_the_sweeps_source_hears_each_publication_once_and_tells_busy_from_alive(kvs):
    """transactions/latency_source.py on a clock of its own (an hour ahead: no other client of a shared keyspace
    publishes there): the first poll reads the last intervals at their stamps, later ones hear what is new."""
    from airflow_atlas.transactions.latency_source import StoreApplicationLatency

    ensure_table(kvs)
    now = [time.time() + 3600.0]
    hist = LatencyHistogram()
    hist.record(0.004)
    write_summaries(kvs, "long-ago", now[0] - 10.0, {"commit": hist}, ttl_seconds=600)
    write_summaries(kvs, "busy-before", now[0] - 1.5, {"commit": hist, "read": hist}, ttl_seconds=600)
    write_summaries(kvs, "alive", now[0] - 0.5, {}, ttl_seconds=600)
    source = StoreApplicationLatency(kvs, 1.0, clock=lambda: now[0])
    first = source.poll()
    assert first.heard_at == pytest.approx(now[0] - 0.5, abs=0.01)
    assert first.busy_at == pytest.approx(now[0] - 1.5, abs=0.01)
    assert first.transactions is not None and first.transactions.count == 1  # commits, not reads nor "long-ago"
    assert first.pressure is not None  # read once per interval ([] on the embedded store)
    now[0] += 0.1
    again = source.poll()
    assert again.heard_at is None and again.transactions is not None and again.transactions.count == 0
    assert again.pressure is None
    write_summaries(kvs, "c1", now[0] - 0.3, {"commit": hist, "abort": hist}, ttl_seconds=600)  # landed late
    now[0] += 0.1
    seen = source.poll()
    assert seen.heard_at == seen.busy_at == now[0]  # heard when first read
    assert seen.transactions is not None and seen.transactions.count == 2
    now[0] += 0.1
    assert source.poll().heard_at is None  # heard once
