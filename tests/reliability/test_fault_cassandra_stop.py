"""Fault: the Cassandra node is stopped in the middle of a sweep iteration and restarted.

Runs on a PRIVATE node (``private_cassandra``: own directory and ports), never the shared one. The node is
stopped from inside the iteration (a wrapper around one of the store's own components stops it, then
lets the component talk to the dead node), so the failure hits a chosen step. Each time:

* the iteration fails with StoreUnavailableError naming the operation (never a bare driver error, never
  a silently "successful" iteration) - the store's, or a timestamp draw's: the node's two timestamp servers
  (``private_cassandra``) serve from their lease until it runs out, then answer UNAVAILABLE with the store's
  error, which the client names after its retry bound -, and persisted progress does not move past unswept
  entries;
* after the restart, the retry - a new store object and the SAME lock holder, as an Airflow task retry
  uses - sweeps to the end (its timestamps served again: the servers find the node within a second);
* the oracle holds (an open transaction, a fresh reader and a fresh read-only reader read the same before
  and after), an open transaction's own reads are unchanged, nothing committed is lost (the model of
  every committed write matches the store), no obsolete version, no queued entry below the sweep
  timestamp, and no queue row below progress is left.

Short variant (default run): one stop during a ranged delete. Long variant (``-m reliability``): a stop at
each step of the iteration (reading the queue, aborting, deleting, writing sentinels, cleaning the queue,
persisting progress), the last one a SIGKILL of the JVM instead of a graceful stop.
"""
from __future__ import annotations

import dataclasses
import uuid

import pytest

from airflow_atlas.errors import StoreUnavailableError
from airflow_atlas.oracle import Reader, compare, observe, obsolete_versions
from airflow_atlas.sweep.queue.constants import FINE_PARTITION

from .helpers import (
    CONFIG,
    Model,
    WriterLoop,
    backlog_below,
    ensure_tables,
    leaked_queue_rows,
    model_mismatches,
    open_store,
    progress_of,
    sweep_all,
    wait_until,
)

pytestmark = pytest.mark.cassandra

TABLES = {"orders_c": "CONSERVATIVE", "orders_t": "THOROUGH"}
HOLDER = "airflow:atlas_targeted_sweep:manual__stop:pair"  # stable across retries, like holder_for()
# Fail fast while the node is down; the driver's own timeouts are the only waits.
QUERY = {"connect_timeout": 5, "request_timeout": 10}


class StopNodeAt:
    """Replace ``obj.method`` (an instance attribute) so that its ``nth`` call first stops the node, then
    calls the real method against the dead node."""

    def __init__(self, node, obj, method: str, nth: int, how: str = "stop"):
        self.node, self.obj, self.method, self.nth, self.how = node, obj, method, nth, how
        self.calls = 0
        self.fired = False
        self.original = getattr(obj, method)
        setattr(obj, method, self)

    def __call__(self, *args, **kwargs):
        self.calls += 1
        if self.calls == self.nth and not self.fired:
            self.fired = True
            self.node.kill() if self.how == "kill" else self.node.stop()
        return self.original(*args, **kwargs)


def _points(store):
    kvs, queue = store.kvs, store.queue
    return {
        "read_batch": (queue.reader, "read_batch", 2),
        "abort": (kvs, "delete", 1),
        "ranged_delete": (kvs, "delete_all_timestamps", 2),
        "sentinels": (kvs, "add_gc_sentinels_and_delete_all_timestamps", 2),  # CONSERVATIVE: with the tombstones
        "queue_cleanup": (kvs, "delete_rows", 2),  # only the cleaner deletes rows: stop between two of its steps
        "progress_cas": (queue.progress, "update_progress", 2),
    }


def _scenario(node, points: list[tuple[str, str]], transactions: int):
    url = node.url(f"atlas_stop_{uuid.uuid4().hex[:10]}", **QUERY)
    config = dataclasses.replace(CONFIG, batch_limit=12)
    clients = open_store(url, config=config, shards=2)  # the application: writers and an open transaction
    ensure_tables(clients, TABLES)
    model = Model()
    writer = WriterLoop(clients, model, TABLES, seed=41, rows=40, columns=3, shards_for_large=2, dead_ratio=0.08)
    for _ in range(3):  # three fine partitions, so that iterations clean queue rows on the way
        writer.run(stop=_never(), transactions=transactions // 3)
        clients.timestamps.fresh_timestamps(FINE_PARTITION)
    assert writer.stats.committed > 0 and writer.stats.dead_writers > 0 and writer.stats.large > 0, writer.stats
    pinned = clients.transactions.begin()  # an open transaction: sweep must keep what it reads
    pinned_view = {t: pinned.get(t, writer.domain) for t in TABLES}
    WriterLoop(clients, model, TABLES, seed=43, rows=40, columns=3).run(stop=_never(), transactions=transactions // 3)
    store = open_store(url, config=config, shards=2)  # the sweeper's own store (a task's connection)

    ts = store.sweep_timestamps.all()
    assert ts["THOROUGH"] <= pinned.start_timestamp
    fresh = store.timestamps.fresh_timestamp()
    readers = [Reader(pinned.start_timestamp), Reader(fresh), Reader(fresh, read_only=True)]
    before = observe(store, readers)
    stops = []
    for name, how in points:
        obj, method, nth = _points(store)[name]
        progress_before = progress_of(store)
        wrapper = StopNodeAt(node, obj, method, nth, how)
        with pytest.raises(StoreUnavailableError) as failure:
            sweep_all(store, ts, holder=HOLDER)
        assert wrapper.fired, f"the sweep never reached {name}"
        assert wrapper.calls >= nth
        message = str(failure.value)
        # names the operation (and table): "cassandra get_lwt ...", or for a timestamp drawn once the servers'
        # lease ran out: "no timestamp server served store ... (tried ...; last answer: ...)", the last answer
        # the servers' (UNAVAILABLE with the store's error, or a deadline while one waited for the store)
        assert message.startswith("cassandra ") or (
            message.startswith("no timestamp server served store") and "last answer: 127.0.0.1:" in message
        ), message
        stops.append((name, how, message[:160]))
        node.start()
        store.close()
        # The retry: a new store (a retried task opens a new connection), the same lock holder.
        store = open_store(url, config=config, shards=2)
        progress_after = progress_of(store)
        assert all(progress_after[k] >= v for k, v in progress_before.items()), "progress went backwards"
    ts_used, results = sweep_all(store, ts, holder=HOLDER)
    assert ts_used == ts and {r.status for r in results} == {"caught_up"}, results

    after = observe(store, readers)
    assert compare(before, after, ts) == []
    assert obsolete_versions(store, ts) == []
    assert backlog_below(store, ts) == {}
    assert leaked_queue_rows(store) == []
    # The open transaction (its session reconnects on its own) still reads exactly what it read before.
    def pinned_reads():
        try:
            return {t: pinned.get(t, writer.domain) for t in TABLES}
        except StoreUnavailableError:
            return None

    assert wait_until(pinned_reads, 120, "the open transaction's session to reconnect") == pinned_view
    pinned.abort()
    model.resolve(store)
    assert model_mismatches(store, model, store.timestamps.fresh_timestamp(), TABLES) == []
    store.close()
    clients.close()
    print("stops:", stops, "node:", node.log[-4:])
    return stops


def _never():
    import threading

    return threading.Event()


def test_cassandra_stopped_mid_iteration_short(private_cassandra):
    _scenario(private_cassandra, [("ranged_delete", "stop")], transactions=45)


@pytest.mark.reliability
def test_cassandra_stopped_at_every_step_of_an_iteration(private_cassandra):
    points = [
        ("read_batch", "stop"),
        ("abort", "stop"),
        ("sentinels", "stop"),  # CONSERVATIVE pairs are swept first: their sentinels + tombstones
        ("ranged_delete", "stop"),  # then THOROUGH's plain ranged deletes
        ("queue_cleanup", "stop"),
        ("progress_cas", "kill"),
    ]
    stops = _scenario(private_cassandra, points, transactions=260)
    assert [s[0] for s in stops] == [p for p, _ in points]
