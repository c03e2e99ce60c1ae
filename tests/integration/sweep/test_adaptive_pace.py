"""Adaptive intensity (sweep/pacing/adaptive.py) on the real local node: one sweep run backs off while a heavy
foreground load runs against the same node (another process writing and reading through the driver) and
speeds up again once the load stops.

Directions only, no speeds: the pace each iteration ran under is read from its result
(``pace_entries_per_second``); the load raises the node's latency by an amount that depends on the machine,
so the test asserts that the pace fell during the load below what it was before, and rose after it above its
lowest point during the load. (A fixed or unlimited pace would fail both: its pace never changes.)
"""
from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

from .helpers import THOR, Harness

pytestmark = pytest.mark.cassandra

LOAD = r"""
import sys, threading, time, uuid
from cassandra.cluster import Cluster
host, port, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
cluster = Cluster([host], port=port)
session = cluster.connect()
ks = "atlas_load_" + uuid.uuid4().hex[:8]
session.execute("CREATE KEYSPACE %s WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}" % ks,
                timeout=60)
session.execute("CREATE TABLE %s.t (k int, c int, v blob, PRIMARY KEY (k, c))" % ks, timeout=60)
insert = session.prepare("INSERT INTO %s.t (k, c, v) VALUES (?, ?, ?)" % ks)
select = session.prepare("SELECT v FROM %s.t WHERE k = ? LIMIT 50" % ks)
print(ks, flush=True)
sys.stdin.readline()  # "go"
end = time.monotonic() + seconds
def stop():
    global end
    sys.stdin.readline()  # "stop" (or end of input)
    end = 0
threading.Thread(target=stop, daemon=True).start()
slots = threading.Semaphore(96)
value = b"x" * 512
i = 0
def done(*_):
    slots.release()
while time.monotonic() < end:
    slots.acquire()
    statement = (insert, (i % 500, i, value)) if i % 4 else (select, (i % 500,))
    future = session.execute_async(*statement)
    future.add_callbacks(done, done)
    i += 1
cluster.shutdown()
"""
"""The foreground load: 96 requests in flight (3 writes of 512 bytes per read of 50 rows; little data, so the
node's flushes after it are short) from when it reads a
line until it reads another or the given seconds have passed, then exits by itself. It prints its keyspace's
name when ready (the test drops it at the end: a drop is load too)."""

PHASE_ITERATIONS = 4
"""Iterations before the load (at least PHASE_SECONDS); the load then runs until the pace backs off, and the
test waits after it until the pace rises again (each at most PHASE_TIMEOUT)."""
PHASE_SECONDS = 4.0
PHASE_TIMEOUT = 40.0
"""A phase ends after this long whatever its iterations (one iteration took 4 s on a machine at load 20)."""


def test_the_pace_backs_off_under_foreground_load_and_recovers_after_it(cassandra_node, cassandra_shared_store):
    store, clock = cassandra_shared_store
    h = Harness(store, clock, "cassandra")
    h.drain()
    t = h.table(THOR)
    # A backlog the sweep does not finish in the test: at most 300 entries/s (a small bound: committing costs
    # about 3 ms per cell on a loaded 2-core machine), a transaction of 100 entries per batch (a batch never
    # splits a transaction), 3 phases of 4 iterations and 4 s, at most 12 iterations each. 9,000 entries: 4,500
    # ran out in a clean-clone run (2026-11-30) whose node stayed slow for 30 s after the load, the pace at 50-150
    # entries/s all that time; the phase after the load may take PHASE_TIMEOUT at up to 150 entries/s.
    cells = h.cells_in_shard(t, 0, 100)
    for i in range(90):
        h.write(t, {c: b"%d" % i for c in cells})
    h.settle()
    ts = h.sweep_timestamps()[THOR.value]

    paces: list[tuple[float, float]] = []  # (seconds since the run started, the pace of that iteration)
    started = 0.0  # set when the sweep starts
    stop = threading.Event()

    def on_iteration(it) -> None:
        nonlocal started
        paces.append((time.monotonic() - started, it.pace_entries_per_second))
        if stop.is_set():
            raise _Stop()

    run: dict = {}

    def sweep() -> None:
        try:
            run["result"] = store.sweeper.sweep_shard(
                0, THOR, sweep_ts=ts, max_iterations=100_000, latency_target=1.5, max_entries_per_second=300,
                on_iteration=on_iteration,
            )
        except _Stop:
            run["stopped"] = True
        except Exception as exc:  # reported by the main thread
            run["error"] = exc

    def phase(until=None) -> float:
        """Waits for PHASE_ITERATIONS more iterations (and at least PHASE_SECONDS), or until ``until()``, at most
        PHASE_TIMEOUT; returns when it ended."""
        start, count = time.monotonic(), len(paces)
        while time.monotonic() - start < PHASE_TIMEOUT and sweeper.is_alive():
            if until is not None and until():
                break
            if until is None and len(paces) - count >= PHASE_ITERATIONS and time.monotonic() - start >= PHASE_SECONDS:
                break
            time.sleep(0.05)
        return time.monotonic() - started

    host, port = cassandra_node
    load = subprocess.Popen([sys.executable, "-c", LOAD, host, str(port), str(2 * PHASE_TIMEOUT)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sweeper = threading.Thread(target=sweep, daemon=True)
    load_keyspace = ""
    try:
        assert load.stdin is not None and load.stdout is not None
        load_keyspace = load.stdout.readline().strip()
        assert load_keyspace.startswith("atlas_load_"), load.communicate(timeout=60)[1]
        started = time.monotonic()
        sweeper.start()
        load_from = phase()
        load.stdin.write("go\n")
        load.stdin.flush()
        high = paces[-1][1]
        # The load takes a few seconds to raise the node's latency (and the smoothed one): wait for a back-off.
        load_to = phase(until=lambda: any(p <= high / 2 for s, p in paces if s >= load_from))
        load.stdin.write("stop\n")
        load.stdin.flush()
        assert load.wait(timeout=60) == 0, load.communicate()[1]
        low = min(p for s, p in paces if s >= load_from)
        # The node may stay slow for a while after the load (flushes, compaction): wait for the pace to rise.
        phase(until=lambda: any(p > low for s, p in paces if s >= load_to))
    finally:
        stop.set()
        sweeper.join(timeout=60)
        if load.poll() is None:
            load.kill()
            load.wait()
        if load_keyspace.startswith("atlas_load_"):
            store.kvs.session.execute_async(f"DROP KEYSPACE IF EXISTS {load_keyspace}", timeout=120)
    assert "error" not in run, run.get("error")
    assert "result" not in run, f"the backlog was finished before the test ended: {run.get('result')}"

    before = [p for s, p in paces if s < load_from]
    during = [p for s, p in paces if load_from <= s < load_to]
    after = [p for s, p in paces if s >= load_to]
    print("paces:", [(round(s, 1), p) for s, p in paces], load_from, load_to)
    assert before and during and after, paces
    # A back-off halves the pace (a sweeper merely slowed by the load would keep a pace of twice its rate).
    assert min(during) <= high / 2, f"no back-off under load: before {before}, during {during}"
    assert max(after) > min(during), f"no recovery after the load: during {during}, after {after}"
    h.close_all()


class _Stop(Exception):
    """Ends the sweep run from its progress callback (between iterations: nothing is left half done)."""

