"""The application's latency, published (issue 31 item 1): transaction managers record and publish, a
reader pools every client's summaries of a window, summaries expire, and a client whose publication fails
still commits. Both backends (the ``kvs`` fixture: SQLite file, real Cassandra node)."""
from __future__ import annotations

import dataclasses
import logging
import time
import uuid

from airflow_atlas.kvs.api import Cell
from airflow_atlas.transactions.histogram import LatencyHistogram
from airflow_atlas.transactions.latency_publisher import LatencyPublication
from airflow_atlas.transactions.latency_table import TABLE, ensure_table, read_application_latency, write_summaries
from airflow_atlas.transactions.manager import TransactionManager
from tests.faults import DeniedTableKvs
from tests.integration.txn.conftest import FAST

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
        # idle: the publishing thread exits; the next transaction starts it again
        assert _wait_for(lambda: not a.latency.running, 3.0)
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


def test_the_pace_controllers_source_reads_once_per_interval_and_only_what_is_new(kvs):
    """transactions/latency_source.py on a clock of its own: nothing before the run, an empty histogram
    between reads, then the transactions (commit and abort, not reads) published since the previous read."""
    from airflow_atlas.transactions.latency_source import READ_LAG_SECONDS, StoreApplicationLatency

    ensure_table(kvs)
    now = [time.time() + 3600.0]  # an hour ahead: no other client of a shared keyspace publishes there
    hist = LatencyHistogram()
    hist.record(0.004)
    write_summaries(kvs, "before-the-run", now[0] - 5.0, {"commit": hist, "read": hist}, ttl_seconds=600)
    source = StoreApplicationLatency(kvs, 1.0, clock=lambda: now[0])
    now[0] += 0.5
    assert source.since_last_call().count == 0  # within the interval: not read
    write_summaries(kvs, "c1", now[0], {"commit": hist, "abort": hist, "read": hist}, ttl_seconds=600)
    now[0] += 1.0 + READ_LAG_SECONDS
    seen = source.since_last_call()
    assert seen.count == 2  # commit + abort of c1; its reads and the summary before the run are left out
    now[0] += 1.0
    assert source.since_last_call().count == 0  # read once
    assert [h.count for h in source.quiet()] == [1]  # before the run, no sweep claim: the commit of "before-the-run"


def test_the_source_tells_whether_the_application_was_busy_just_before_the_run(kvs):
    """``recent()``: the transactions (not reads) of the summaries that ended in the 2 s (two publication
    intervals at least) before the run; none, and the run starts free (sweep/pacing/application.py)."""
    from airflow_atlas.transactions.latency_source import StoreApplicationLatency

    ensure_table(kvs)
    start = time.time() + 7200.0  # two hours ahead: no other client of a shared keyspace publishes there
    hist = LatencyHistogram()
    hist.record(0.004)
    write_summaries(kvs, "long-ago", start - 10.0, {"commit": hist}, ttl_seconds=600)
    write_summaries(kvs, "reads-only", start - 1.0, {"read": hist}, ttl_seconds=600)
    assert StoreApplicationLatency(kvs, 1.0, clock=lambda: start).recent().count == 0  # idle before the run
    assert StoreApplicationLatency(kvs, 5.0, clock=lambda: start).recent().count == 1  # 10 s: two intervals of 5
    write_summaries(kvs, "busy", start - 1.5, {"commit": hist, "abort": hist}, ttl_seconds=600)
    assert StoreApplicationLatency(kvs, 1.0, clock=lambda: start).recent().count == 2


def test_quiet_windows_leave_out_the_summaries_a_sweep_claim_overlaps(kvs):
    """Issue 31 item 2, the baseline "learned where no sweep ran": summaries whose period (2 publication
    intervals before their end) overlaps a sweep's claim are not quiet; a claim re-ended by its run shrinks."""
    from airflow_atlas.transactions.latency_source import READ_LAG_SECONDS, StoreApplicationLatency
    from airflow_atlas.transactions.latency_table import read_quiet_latency, read_sweep_marks, write_sweep_mark

    ensure_table(kvs)
    base = (int(time.time()) // 60 + 90) * 60 + 20.0  # 90 minutes ahead: nobody else publishes or sweeps there

    def hist(n):
        h = LatencyHistogram()
        for _ in range(n):
            h.record(0.004)
        return h

    for ago, n in ((100, 1), (64, 2), (34, 4), (31, 8), (10, 16), (2, 32)):
        write_summaries(kvs, f"app-{ago}", base - ago, {"commit": hist(n), "read": hist(1000)}, 600)
    write_sweep_mark(kvs, "sweeper-x", base - 65, base - 5, 600)  # a claim, then its run ends earlier:
    write_sweep_mark(kvs, "sweeper-x", base - 65, base - 35, 600)  # the same start and holder: replaced
    assert read_sweep_marks(kvs, base - 200, base) == [(base - 65, base - 35)]
    assert read_sweep_marks(kvs, base - 34, base) == []  # a claim that ended before the window
    # (-64: inside; -34: its period (-36, -34] reaches the claim's end; -31 and earlier/later: quiet; reads never)
    def counts(found: list[LatencyHistogram]) -> list[int]:
        return [h.count for h in found]  # a summary each, in the order they ended

    assert counts(read_quiet_latency(kvs, base - 200, base, 2.0)) == [1, 8, 16, 32]
    assert counts(read_quiet_latency(kvs, base - 50, base, 2.0)) == [8, 16, 32]  # the claim began before the window
    assert counts(read_quiet_latency(kvs, base - 200, base, 10.0)) == [1, 16, 32]  # longer periods: -31 overlaps too
    # the claim's aftermath of 30 s reaches -5: -31 and -10 are not quiet, -2 (period (-4, -2]) is
    assert counts(read_quiet_latency(kvs, base - 200, base, 2.0, aftermath_seconds=30.0)) == [1, 32]
    source = StoreApplicationLatency(kvs, 1.0, 600, clock=lambda: base + READ_LAG_SECONDS)
    assert counts(source.quiet()) == [1, 32]  # the source: the lookback before the run, 2 intervals a period, 30 s after
    short = StoreApplicationLatency(kvs, 1.0, 50, clock=lambda: base + READ_LAG_SECONDS)
    assert counts(short.quiet()) == [32]  # the lookback is at most the summaries' TTL: -100 is left out


def test_a_slow_transaction_ended_after_a_claim_is_not_quiet(kvs):
    """A transaction is recorded when it ends: one that ended 10 s after a sweep's claim but took 20 s waited
    through that sweep (an open-loop application's queue drains after the sweep stops; counted as quiet it
    raised a benchmark's baseline to 15 s). A summary reaches back over its period plus its slowest
    transaction; a fast one published at the same moment stays quiet."""
    from airflow_atlas.transactions.latency_table import read_quiet_latency, write_sweep_mark

    ensure_table(kvs)
    base = (int(time.time()) // 60 + 100) * 60 + 20.0  # 100 minutes ahead: nobody else publishes or sweeps there

    def hist(seconds: float, n: int = 1) -> LatencyHistogram:
        h = LatencyHistogram()
        for _ in range(n):
            h.record(seconds)
        return h

    write_sweep_mark(kvs, "sweeper-y", base - 60, base - 30, 600)
    write_summaries(kvs, "slow", base - 20, {"commit": hist(20.0)}, 600)  # began at -40: inside the claim
    write_summaries(kvs, "fast", base - 20, {"commit": hist(0.004, 3)}, 600)  # (-22, -20]: after it
    write_summaries(kvs, "late", base - 1, {"commit": hist(20.0, 5)}, 600)  # began at -21: after it
    assert [h.count for h in read_quiet_latency(kvs, base - 25, base, 2.0)] == [3, 5]  # in the order they ended
