"""Benchmark foreground_impact: how much a sweep slows the application it cleans, under phases of foreground
load, at fixed intensity limits and at the shipped settings (the application pace), and what it costs the sweep.

Per **placement** of the sweep process (bench/placement.py: ``confined`` - a CPU quota of half a core, as a
sweeper on its own Airflow worker -, then ``shared``), per repetition, the **load phases** in order - ``idle``
(no foreground), ``steady`` (in the full mode half the highest rate the node carries without sweep, by a
capacity probe before the windows: :func:`probe_capacity`; quick: 10 transactions/s), ``burst``
(:data:`BURST_FACTOR` x that), ``arrival`` (the steady rate, starting :data:`ARRIVAL_DELAY_SECONDS` into the
window), ``idle_again`` - and in each load phase one window per **variant** (bench/foreground_summary.py,
:func:`~bench.foreground_summary.variants`), in an order that rotates every repetition:

* ``no_sweep``: the foreground alone (the baseline of every latency ratio of the phase; busy phases only);
* ``unthrottled``: ``sweep_max_entries_per_second`` 0 with ``sweep_latency_target`` 0 (no pacing at all: the
  baseline of every sweep-rate ratio of the phase);
* each fixed limit (``sweep_latency_target`` 0, so the limit is a fixed rate; steady and burst only);
* ``default``: the shipped settings (``StoreConfig()`` untouched), i.e. the application pace: unthrottled while
  the application rests (its clients publish that they are alive and run nothing), a safe pace adjusted to the
  application's published p99 while it runs, the safe pace while no client publishes.

The application is the benchmark's main process: its store (the foreground's) runs one transaction before the
first window, so from then on it publishes into ``_app_latency`` once a second - alive but resting in the idle
phases and before the arrival, running during the foreground. The backlog's loader and the capacity probe use a
store that publishes nothing (their bulk transactions, seconds each, and the probe's rates up to saturation are
not the application the benchmark protects). A window that opens without foreground (idle phases, arrival)
opens at least :data:`REST_INTERVALS` publication intervals after the application's last transaction: the default
sees it resting.

A window:

* **foreground** (busy phases): snapshot transactions on a CONSERVATIVE table of pre-loaded cells, each
  reading ``READS`` random cells of one half and writing one random cell of the other half (so no reader
  waits for a running writer: that contention is the application's, not the store's), issued **open-loop**
  at the phase's rate (each starts at its planned instant on a thread pool; its latency is measured from
  that instant, so queueing behind a slow store counts - no coordinated omission). Conflicts are counted,
  not timed. In steady and burst the schedule runs for a moment before the sweep starts; in the arrival it
  starts :data:`ARRIVAL_DELAY_SECONDS` after the sweep (no sweep: after the window opens) and runs to the
  window's end. In the full mode the foreground of a busy window lasts long enough for
  :data:`~bench.foreground_summary.MIN_POOLED` transactions per variant over the repetitions
  (:func:`window_seconds`).
* **sweep**: in a separate process (as an Airflow worker or a Spark executor is; placed, started while the
  backlog loads, connected before the window opens), one ``TargetedSweeper.sweep_shard`` run of a THOROUGH
  backlog (transactions of ``TXN_WRITES`` writes, loaded fast, one version per cell) for the window's seconds:
  the run stops after the first iteration that ends past them (its ``on_iteration`` callback raises; the
  iteration's progress is persisted, the entries left over are swept by the next window) or when the backlog
  is gone. The backlog is topped up before each window to last it at the variant's expected rate (the limit,
  or the unthrottled rate of a calibration sweep without foreground). Foreground latencies are counted while
  the sweep process sweeps (its own first and last instants), in the arrival from the foreground's start.

Reported per placement, load phase and variant (bench/foreground_summary.py): the pooled p50 and p99 ("too few
samples" under 1,000 transactions), the p99 against the same placement and phase's ``no_sweep`` with a
bootstrap 90% confidence interval, the sweep rate (pooled) and its share of ``unthrottled``, the seconds paced,
the pace at the end of the window, its back-offs and reason (and, for the default, its pace over the window),
and the cores used (machine, node). The goals are judged at the default on the confined placement.
"""
from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from . import common as C
from . import foreground_summary as S
from . import placement as P
from .foreground_summary import (
    DEFAULT,
    NO_SWEEP,
    PHASES,
    UNTHROTTLED,
    default_variant,
    evaluate_goals,
    percentile,
    summarise,
    variants,
)

NAME = "foreground_impact"
TXN_WRITES = 500
"""Writes per backlog transaction (bulk-load shaped: dedicated queue rows; loads the backlog fast)."""
READS = 4
FG_TABLE, BG_TABLE = "fg_app", "bg_backlog"
LIMITS_FULL = (2_000, 1_000, 250)
"""Fixed limits (entries/s, ``sweep_latency_target`` 0): 250 kept the steady phase at 1.32x on 2026-11-27, 1,000
cost 2.9-3.5x; only three, so that every busy window holds enough transactions for a p99 within about half an
hour per placement."""
LIMITS_QUICK = (2_000,)
BURST_FACTOR = 2
"""The burst's foreground rate over the steady one. 2, not 3 (as until 2026-11-26): the foreground alone at the
steady 20/s kept 0.63 of the 2 cores busy (full run of 2026-11-23), so 60/s needs about 1.9 of 2 before any
sweep - the node saturates, the open-loop schedule queues, and the no-sweep baseline itself grows with the
window's length (quick run of 2026-11-26 at load 3.9: burst 30/s p50 942 ms against 80 ms at the steady 10/s),
which leaves no ratio to measure; 40/s (about 1.3 cores) is a burst the node carries with room for a sweep."""
PROBE_RATES = (10, 20, 40, 80)
"""Foreground rates (transactions/s) the full mode probes without sweep before its windows, in this order, to
size its phases to the machine (:func:`steady_rate`): fixed 20 and 40/s saturated the node of a slower day's
machine with no sweep at all (2026-11-29: burst no-sweep p50 4-11 s; bench/ANALYSIS.md)."""
PROBE_SECONDS = 10.0
PROBE_SLOWDOWN = 2.0
"""A probed rate is carried when its p99 is at most this times the lowest rate's, and :data:`PROBE_DONE_SHARE` of
the transactions planned in the probe's first half finished by its end."""
PROBE_DONE_SHARE = 0.95
PROBE_WARMUP_SECONDS = 30.0
"""Before the probe, the lowest rate runs this long unmeasured, then the node settles: a node the benchmark just
started compiles its hot paths for the first minutes (JIT), and a probe of that node measured its compiler - on
2026-11-29 a cold node's probe saw p99 101 ms at 10/s and fell behind at 20/s, where the same node warm had carried
20/s at p99 44 ms the same day."""
STEADY_SHARE = 0.5
"""The steady rate is this share of the highest rate carried, the burst :data:`BURST_FACTOR` x it (the highest
rate carried): no sweep stays below saturation - the probe's next rate, twice the burst, was not carried. On
2026-11-29 this machine's node carried 20/s (p99 44 ms) and fell behind at 40/s: steady 10/s, burst 20/s."""
MIN_STEADY = 5
"""The least steady rate (a slower machine gets windows as long as 2,000 transactions need)."""
BACKLOG_MARGIN = 1.25
"""The backlog lasts a window at this many times the expected rate (the run stops at the window's end)."""
SETTLE_PRESSURE_SECONDS = 60.0
"""Before a window the full mode waits, at most this long, until the node queues nothing (no pending compaction
or request; :func:`bench.common.settle_pressure`), then until its CPU is quiet (``settle_seconds``): on
2026-11-29 a window right after a fast sweep's inherited its compactions (a burst p99 of 1.1 s, 102-139 ms in the
other repetitions) while the CPU-only settle had waited 1 s."""
PHASE_SECONDS_FULL = 12.0
"""A window's length in the idle phases, and the least foreground of the busy ones (which is longer where their
rate needs it: :func:`window_seconds`)."""
PREROLL_SECONDS_FULL = 2.0
"""In steady and burst, the foreground runs this long before the sweep starts: two of the application's
publications (``app_latency_interval_seconds`` 1) say it runs, so the default starts from a running application
(the arrival measures the other start)."""
REST_INTERVALS = 4
"""Publication intervals (``app_latency_interval_seconds``) from the application's last transaction to a window
that opens without foreground: its last transactions are published up to an interval later, and the application
pace takes it as resting after two intervals without (one spare)."""
ARRIVAL_DELAY_SECONDS = 3.0
"""In the arrival, the foreground starts this long after the sweep: the default has been sweeping unthrottled for
a resting application, and its change of pace when the application arrives is what the window measures."""


def _shape(quick: bool) -> dict:
    if quick:
        return with_rates({"phase_seconds": 2.0, "min_pooled": 0, "preroll_seconds": 0.5, "settle_seconds": 0.0,
                           "settle_pressure_seconds": 0.0,
                           "fg_cells": 1_000, "calibration_entries": 5_000, "limits": LIMITS_QUICK,
                           "max_backlog": 25_000}, 10)
    # The busy phases' rates: 20/s until the capacity probe replaces them (:func:`run`); the busy windows as
    # long as 2,000 pooled transactions need.
    return with_rates({"phase_seconds": PHASE_SECONDS_FULL, "min_pooled": S.MIN_POOLED,
                       "preroll_seconds": PREROLL_SECONDS_FULL, "settle_seconds": 5.0,
                       "settle_pressure_seconds": SETTLE_PRESSURE_SECONDS, "fg_cells": 10_000,
                       "calibration_entries": 20_000, "limits": LIMITS_FULL, "max_backlog": 300_000}, 20)


def highest_carried(probes: dict[int, float | None]) -> int | None:
    """The highest probed rate carried (see :data:`PROBE_SLOWDOWN`) before the first one that is not; None when
    not even the lowest is. ``probes``: rate -> p99 seconds, None where the probe fell behind."""
    carried, first = None, None
    for rate in sorted(probes):
        p99 = probes[rate]
        if p99 is None or (first is not None and p99 > PROBE_SLOWDOWN * first):
            break
        carried, first = rate, p99 if first is None else first
    return carried


def steady_rate(probes: dict[int, float | None]) -> int:
    """:data:`STEADY_SHARE` of the highest rate carried, at least :data:`MIN_STEADY`."""
    carried = highest_carried(probes)
    return MIN_STEADY if carried is None else max(MIN_STEADY, int(carried * STEADY_SHARE))


def probe_capacity(store, cells, rates=PROBE_RATES, seconds: float = PROBE_SECONDS,
                   warmup_seconds: float = PROBE_WARMUP_SECONDS) -> dict[int, float | None]:
    """Each of ``rates`` for ``seconds`` with no sweep (open-loop, as the windows): rate -> p99 of the transactions
    planned in the probe's first half, or None when fewer than :data:`PROBE_DONE_SHARE` of them had finished by
    its end (the schedule fell behind: saturated). Stops at the first rate not carried. The lowest rate runs
    ``warmup_seconds`` first, unmeasured, and the node settles (:data:`PROBE_WARMUP_SECONDS`)."""
    if warmup_seconds > 0:
        fg = Foreground(store, cells, rates[0], seed=0).start()
        time.sleep(warmup_seconds)
        fg.stop()
        C.log(f"{NAME}: capacity probe warm-up, {rates[0]}/s for {warmup_seconds:.0f} s; the node settled in "
              f"{C.settle_node(30.0):.0f} s")
    out: dict[int, float | None] = {}
    for rate in rates:
        fg = Foreground(store, cells, rate, seed=rate).start()
        started = time.time()
        time.sleep(seconds)
        done = fg.window(started, started + seconds / 2)
        fg.stop()
        planned = int(rate * seconds / 2)
        p99 = percentile(done, 99) if done and len(done) + fg.conflicts >= planned * PROBE_DONE_SHARE else None
        out[rate] = p99
        C.log(f"{NAME}: capacity probe {rate}/s without sweep: p99 "
              + ("fell behind" if p99 is None else f"{p99 * 1000:,.0f} ms") + f" ({len(done)} of {planned})")
        if highest_carried(out) != rate:
            break  # not carried: the higher rates will not be either
    return out


def with_rates(shape: dict, steady: int) -> dict:
    """``shape`` with steady and arrival at ``steady``, the burst at :data:`BURST_FACTOR` x it."""
    return {**shape, "fg_rates": {"idle": 0, "steady": steady, "burst": BURST_FACTOR * steady, "arrival": steady,
                                  "idle_again": 0}}


def window_seconds(shape: dict, phase: str, reps: int) -> float:
    """A window of ``phase``: its foreground long enough that the repetitions pool
    :data:`~bench.foreground_summary.MIN_POOLED` transactions per variant in the full mode (10 % spare for the
    windows' edges), after :data:`ARRIVAL_DELAY_SECONDS` in the arrival."""
    rate = shape["fg_rates"][phase]
    seconds = shape["phase_seconds"]
    if shape.get("min_pooled") and rate:
        seconds = max(seconds, math.ceil(shape["min_pooled"] * 1.1 / (rate * reps)))
    return seconds + (ARRIVAL_DELAY_SECONDS if phase == "arrival" else 0.0)


# ----- the sweep process ----------------------------------------------------------------------------
class _WindowOver(Exception):
    """Raised by the sweep run's ``on_iteration`` callback after the first iteration past the window."""


def _sweeper_main(url: str, variant: str, seconds: float, batch_limit: int | None = None, shard: int = 0) -> None:
    """Child process: open the store, say ``ready``, wait for ``go`` on stdin, sweep ``shard`` THOROUGH as the
    variant says for at most ``seconds`` (then the iteration under way finishes; ``batch_limit``: the run's, else
    the setting's), print one JSON line (start-up stays out of the measured window)."""
    from airflow_atlas.config import StoreConfig
    from airflow_atlas.store import AtlasStore

    pacing: dict = {}  # the default: the settings' pace
    if variant != DEFAULT:  # a fixed rate (0: none at all)
        pacing = {"max_entries_per_second": 0 if variant == UNTHROTTLED else int(variant), "latency_target": 0.0}
    store = AtlasStore.open(url, StoreConfig())
    timeline: list[tuple[float, int, float | None]] = []  # (seconds since go, entries so far, pace)
    try:
        store.number_of_shards()  # connected and the schema read
        print("ready", flush=True)
        if sys.stdin.readline().strip() != "go":  # the benchmark stopped (its end of the pipe closed)
            return
        started = time.time()
        entries = 0

        def on_iteration(it) -> None:
            nonlocal entries
            entries += it.entries_read
            now = time.time()
            timeline.append((round(now - started, 3), entries, it.pace_entries_per_second))
            if now - started >= seconds:
                raise _WindowOver

        try:
            run = store.sweeper.sweep_shard(shard, "THOROUGH", max_iterations=1_000_000, on_iteration=on_iteration,
                                            batch_limit=batch_limit, **pacing).to_json()
        except _WindowOver:
            run = store.history.runs(shard, "THOROUGH", limit=1)[0]  # the run as recorded: failed, by _WindowOver
            if run.get("status") != "failed" or not str(run.get("error", "")).startswith("_WindowOver"):
                raise RuntimeError(f"the newest run in the history is not this one: {run}") from None
            run["status"] = "window_over"
        ended = started + timeline[-1][0] if timeline else time.time()  # the end of the last iteration
    finally:
        store.close()
    print(json.dumps({
        "shard": shard, "started": started, "ended": ended, "status": run["status"], "entries_read": run["entries_read"],
        "cells_tombstoned": run["cells_tombstoned"], "iterations": run["iterations"],
        "seconds_paced": run["seconds_paced"], "max_entries_per_second": run["max_entries_per_second"],
        "latency_target": run.get("latency_target"), "pace_entries_per_second": run.get("pace_entries_per_second"),
        "pace_reason": run.get("pace_reason"), "pace_backoffs": run.get("pace_backoffs", 0),
        "pace_timeline": _thin(timeline) if variant == DEFAULT else [],
    }), flush=True)


def _thin(timeline: list, points: int = 60) -> list:
    """At most ``points`` entries of a timeline (every k-th, and the last)."""
    step = max(1, -(-len(timeline) // points))
    out = timeline[::step]
    if timeline and out[-1] != timeline[-1]:
        out.append(timeline[-1])
    return out


def combined(children: list[dict]) -> dict:
    """One window's sweep from the JSON lines of its sweep processes (one per pair swept at once): from the first
    start to the last end, their entries, cells, iterations and back-offs summed, their paces added up (the rate
    the store meets), the first's reason and timeline; ``window_over`` or ``caught_up`` only when every process
    ended so, else the first other status."""
    if len(children) == 1:
        return children[0]
    first = children[0]
    paces = [c["pace_entries_per_second"] for c in children]
    bad = [c["status"] for c in children if c["status"] not in ("caught_up", "window_over")]
    return {
        **first, "shard": [c["shard"] for c in children],
        "started": min(c["started"] for c in children), "ended": max(c["ended"] for c in children),
        "status": bad[0] if bad else ("window_over" if any(c["status"] == "window_over" for c in children)
                                      else "caught_up"),
        **{k: sum(c[k] for c in children) for k in ("entries_read", "cells_tombstoned", "iterations", "pace_backoffs")},
        "seconds_paced": max(c["seconds_paced"] for c in children),
        "pace_entries_per_second": None if any(p is None for p in paces) else sum(paces),
    }


class Sweeper:
    """The sweep process of one window and pair: constructing it starts the process (it connects while the
    parent loads the backlog); :meth:`start` returns once it is connected; :meth:`go` starts the sweep;
    :meth:`result` waits for its JSON line. ``cores``: its share when confined (a window's processes share
    :data:`~bench.placement.SWEEPER_CPU_CORES`, as the tasks of one Airflow worker share its CPU)."""

    def __init__(self, url: str, variant, seconds: float, placement: str = P.SHARED, batch_limit: int | None = None,
                 shard: int = 0, cores: float = P.SWEEPER_CPU_CORES):
        env = {**os.environ, "PYTHONPATH": str(C.REPO_ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "bench.foreground_impact", "--sweeper", url, str(variant), str(seconds),
             "-" if batch_limit is None else str(batch_limit), str(shard)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
            cwd=str(C.REPO_ROOT))
        self.placement = P.confine(self._proc.pid, placement, cores=cores)  # before it connects: its whole run

    def start(self) -> Sweeper:
        line = self._proc.stdout.readline()
        if line.strip() != "ready":
            self._proc.kill()
            raise RuntimeError(f"sweep process did not start: {line!r} {self._proc.stderr.read()[-2000:]}")
        return self

    def go(self) -> None:
        self._proc.stdin.write("go\n")
        self._proc.stdin.flush()

    def result(self) -> dict:
        out, err = self._proc.communicate(timeout=3600)
        P.release(self.placement)
        if self._proc.returncode != 0:
            raise RuntimeError(f"sweep process exited {self._proc.returncode}: {err[-2000:]}")
        return json.loads(out.strip().splitlines()[-1])


# ----- the foreground -------------------------------------------------------------------------------
class Foreground:
    """Open-loop snapshot transactions at ``rate`` per second until :meth:`stop`; samples are
    (planned wall instant, latency seconds)."""

    def __init__(self, store, cells, rate: float, seed: int):
        self._store = store
        # Reads and writes on disjoint halves: a reader never waits for a running writer of its cell
        # (that application-level contention would swamp what the store's load does to latency).
        half = len(cells) // 2
        self._read_cells, self._write_cells = cells[:half], cells[half:]
        self._rate = rate
        self._rng = random.Random(seed)
        self._stop = threading.Event()
        self.samples: list[tuple[float, float]] = []
        self.conflicts = 0
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=64, thread_name_prefix="fg")
        self._thread = threading.Thread(target=self._schedule, name="fg-schedule", daemon=True)

    def start(self) -> Foreground:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self._pool.shutdown(wait=True)

    def _schedule(self) -> None:
        perf0, wall0 = time.perf_counter(), time.time()
        i = 0
        while not self._stop.is_set():
            planned = perf0 + i / self._rate
            delay = planned - time.perf_counter()
            if delay > 0 and self._stop.wait(delay):
                break
            reads = self._rng.sample(self._read_cells, READS)
            write = self._rng.choice(self._write_cells)
            value = self._rng.randbytes(32)
            self._pool.submit(self._one, planned, wall0 + (planned - perf0), reads, write, value)
            i += 1

    def _one(self, planned: float, planned_wall: float, reads, write, value) -> None:
        from airflow_atlas.errors import TransactionConflictError

        try:
            txn = self._store.transactions.begin()
            try:
                txn.get(FG_TABLE, reads)
                txn.put(FG_TABLE, {write: value})
                txn.commit()
            except BaseException:
                if txn.is_open:
                    txn.abort()
                raise
        except TransactionConflictError:
            with self._lock:
                self.conflicts += 1
            return
        except Exception as exc:  # reported, never hidden
            with self._lock:
                self.errors.append(f"{type(exc).__name__}: {exc}")
            return
        latency = time.perf_counter() - planned
        with self._lock:
            self.samples.append((planned_wall, latency))

    def window(self, start: float, end: float) -> list[float]:
        with self._lock:
            return sorted(lat for at, lat in self.samples if start <= at <= end)


# ----- the benchmark ------------------------------------------------------------------------------
def _load_backlog(store, n: int, offset: int, rng, writes: int = TXN_WRITES) -> int:
    cells = [C.cell(offset + i, "bg") for i in range(n)]
    items = [(c, C.value(rng)) for c in cells]
    batches = [dict(items[i : i + writes]) for i in range(0, len(items), writes)]
    C.commit_synthetic(store, BG_TABLE, batches, threads=4)
    return offset + n


def _settle(store) -> None:
    """Everything loaded so far below the THOROUGH sweep timestamp (no transaction of ours is open)."""
    store.timestamps.fresh_timestamp()


def _expected_rate(variant, calibration_rate: float) -> float:
    return calibration_rate if variant in (UNTHROTTLED, DEFAULT) else min(float(variant), calibration_rate)


def run(*, quick: bool, reps: int, placements: tuple[str, ...] = P.PLACEMENTS, phases: tuple[str, ...] = PHASES,
        only_variants: tuple | None = None, backlog_writes: int = TXN_WRITES, baseline_after_load: bool = False,
        batch_limit: int | None = None, sweep_tasks: int = 1) -> dict:
    """``phases`` / ``only_variants``: a focused run measures only these load phases / variants (a fixed limit
    is an int of the mode's ``limits``); ``backlog_writes``: writes per backlog transaction (a batch never splits
    a transaction, so this is the least a sweep iteration takes; bench/ANALYSIS.md, 2026-11-29);
    ``baseline_after_load``: a no-sweep window follows a load too, as a sweep window follows its backlog's top-up
    - what the lowest fixed limit sweeps in a window, loaded alike into a keyspace of its own (the ballast: on the
    same node, never swept), then the same settles - so that a ratio measures the sweep, not the load's aftermath;
    ``batch_limit``: every sweep window's (``sweep_shard(batch_limit=...)``; a paced batch is at most this);
    ``sweep_tasks``: pairs swept at once in every sweep window, each by a process of its own at the variant's
    pace (as the DAG's sweep tasks run side by side: the store meets the sum), sharing the confined placement's
    CPU; the store has as many shards, so the backlog spreads over the pairs (the calibration sweeps one)."""
    from airflow_atlas.kvs.tables import SweepStrategy

    watch = C.Stopwatch()
    shape = _shape(quick)
    url = C.cassandra_url(C.new_keyspace_name("fg"))
    store = C.open_store(url, shards=sweep_tasks)  # the foreground's: the application, its latency published
    # The backlog's and the base's loader, and the capacity probe's foreground: not the application (module doc).
    loader = C.open_store(url, shards=sweep_tasks, app_latency_publish=False)
    runs: list[dict] = []
    rng = random.Random(11)
    ballast = None  # baseline_after_load: the no-sweep windows' load goes there
    ballast_offset = 0
    try:
        machine = C.machine_info(store.kvs.session)
        loader.create_table(FG_TABLE, SweepStrategy.CONSERVATIVE)
        loader.create_table(BG_TABLE, SweepStrategy.THOROUGH)
        C.load_committed_base(loader, [FG_TABLE], shape["fg_cells"])
        fg_cells = [C.cell(i) for i in range(shape["fg_cells"])]
        store.transactions.run(lambda txn: txn.get(FG_TABLE, fg_cells[:READS]))  # the application is alive
        fg_stopped = time.time()  # when the application last ran a transaction
        rest = REST_INTERVALS * store.config.app_latency_interval_seconds

        # Calibration: the unthrottled rate without foreground, to size each window's backlog.
        offset = _load_backlog(loader, shape["calibration_entries"], 0, rng, backlog_writes)
        _settle(loader)
        cal_sweeper = Sweeper(url, UNTHROTTLED, 3600.0).start()
        cal_sweeper.go()
        cal = cal_sweeper.result()
        calibration_rate = cal["entries_read"] / max(1e-6, cal["ended"] - cal["started"])
        C.log(f"{NAME}: calibration {cal['entries_read']:,} entries at {calibration_rate:,.0f}/s (no foreground)")
        probes: dict[int, float | None] = {}
        if not quick:  # the busy phases' rates follow the machine (the quick mode keeps its small fixed ones)
            probes = probe_capacity(loader, fg_cells)
            shape = with_rates(shape, steady_rate(probes))
            C.log(f"{NAME}: foreground rates {shape['fg_rates']['steady']}/s steady, {shape['fg_rates']['burst']}/s burst")
            C.settle_node(30.0)
        left = 0  # backlog entries not swept yet (a window stops at its end, the next one sweeps them)

        placed: dict = {}
        for placement, rep in ((p, r) for p in placements for r in range(reps)):
            for phase in phases:
                fg_rate = shape["fg_rates"][phase]
                T = window_seconds(shape, phase, reps)
                measured = [v for v in variants(phase, shape["limits"]) if only_variants is None or v in only_variants]
                for variant in C.rotated(measured, rep):
                    rec: dict = {"placement": placement, "rep": rep, "phase": phase, "variant": variant,
                                 "foreground_rate": fg_rate, "load_avg_1m": C.load_average()["1m"]}
                    sweepers: list[Sweeper] = []
                    if variant != NO_SWEEP:
                        sweepers = [Sweeper(url, variant, T, placement, batch_limit, shard=k,  # connect while it loads
                                            cores=P.SWEEPER_CPU_CORES / sweep_tasks) for k in range(sweep_tasks)]
                        placed[placement] = P.window_record([s.placement for s in sweepers])
                        need = int(min(shape["max_backlog"] * sweep_tasks, max(
                            backlog_writes, _expected_rate(variant, calibration_rate) * sweep_tasks * T * BACKLOG_MARGIN)))
                        with C.timed(rec, "load_seconds"):
                            if need > left:
                                offset = _load_backlog(loader, need - left, offset, rng, backlog_writes)
                                left = need
                                _settle(loader)
                        rec["backlog"] = left
                        for sweeper in sweepers:
                            sweeper.start()
                    elif baseline_after_load:
                        if ballast is None:
                            ballast = C.open_store(C.cassandra_url(C.new_keyspace_name("fgballast")),
                                                   app_latency_publish=False)
                            ballast.create_table(BG_TABLE, SweepStrategy.THOROUGH)
                        loaded = int(max(backlog_writes, min(shape["limits"]) * T))
                        with C.timed(rec, "load_seconds"):
                            ballast_offset = _load_backlog(ballast, loaded, ballast_offset, rng, backlog_writes)
                            _settle(ballast)
                        rec["ballast_loaded"] = loaded
                    rec["settle_pressure_seconds"] = (C.settle_pressure(store.kvs, shape["settle_pressure_seconds"])
                                                      if shape["settle_pressure_seconds"] else 0.0)
                    rec["settle_seconds"] = C.settle_node(shape["settle_seconds"]) if shape["settle_seconds"] else 0.0
                    C.log(f"{NAME}: {placement} rep {rep} {phase} ({fg_rate}/s, {T:g} s) {variant}")
                    fg = None
                    seed = rep * 1000 + len(runs)
                    if fg_rate and phase != "arrival":
                        fg = Foreground(store, fg_cells, fg_rate, seed).start()
                        time.sleep(shape["preroll_seconds"])  # the schedule runs before the window opens
                    else:  # the window opens with the application resting
                        time.sleep(max(0.0, fg_stopped + rest - time.time()))
                    probe = C.CpuProbe().start()
                    opened = time.time()
                    for sweeper in sweepers:
                        sweeper.go()
                    if phase == "arrival":
                        time.sleep(ARRIVAL_DELAY_SECONDS)
                        arrived = time.time()
                        fg = Foreground(store, fg_cells, fg_rate, seed).start()
                    if not sweepers:
                        time.sleep(max(0.0, opened + T - time.time()))
                        start, end = opened, time.time()
                    else:
                        children = [sweeper.result() for sweeper in sweepers]
                        child = combined(children)
                        start, end = child["started"], child["ended"]
                        left = max(0, left - child["entries_read"])
                        rec["sweep"] = child
                        if sweep_tasks > 1:
                            rec["sweeps"] = children
                        rec["sweep_entries_per_second"] = child["entries_read"] / max(1e-6, end - start)
                        rec["sweep_check"] = child["status"] in ("caught_up", "window_over")
                    rec["cpu"] = probe.stop()
                    lat: list[float] = []
                    if fg is not None:
                        fg.stop()
                        fg_stopped = time.time()
                        counted_from = start
                        if phase == "arrival":
                            rec["arrival_seconds"] = arrived - start  # from the sweep's start (no sweep: the window's)
                            counted_from = arrived
                        lat = fg.window(counted_from, end)
                    rec.update(window_seconds=end - start, foreground_transactions=len(lat),
                               conflicts=fg.conflicts if fg else 0, errors=fg.errors[:5] if fg else [],
                               error_count=len(fg.errors) if fg else 0,
                               p50_ms=_ms(percentile(lat, 50)), p99_ms=_ms(percentile(lat, 99)),
                               latencies_ms=[round(x * 1000, 3) for x in lat])
                    runs.append(rec)
                    C.log(f"{NAME}:   p50 {_r(rec['p50_ms'])} ms, p99 {_r(rec['p99_ms'])} ms over {len(lat)} transactions;"
                          f" sweep {_r(rec.get('sweep_entries_per_second'))} entries/s"
                          + (f" (pace {child['pace_entries_per_second']}: {child['pace_reason']})" if sweepers else "")
                          + f"; machine {rec['cpu']['machine_busy_cores']:.2f} cores busy, load {rec['load_avg_1m']}")
    finally:
        loader.close()
        C.drop_store(store)
        if ballast is not None:
            C.drop_store(ballast)
    results: dict = {"calibration_entries_per_second": calibration_rate, "default_variant": default_variant(),
                     "placements": {}}
    for placement in placements:
        summary = summarise([r for r in runs if r["placement"] == placement], shape["limits"], shape["fg_rates"])
        results["placements"][placement] = {"placement": placed.get(placement, {"placement": placement}),
                                            "phases": summary}
    judged = P.CONFINED if P.CONFINED in placements else placements[0]
    goals = evaluate_goals(results["placements"][judged]["phases"], shape["limits"], placement=judged)
    for r in runs:
        r.pop("latencies_ms", None)  # pooled into the results; the JSON stays small
    from airflow_atlas.config import StoreConfig

    shipped = StoreConfig()
    return C.result_document(
        NAME, quick=quick, backend="cassandra", watch=watch, machine=machine,
        params={"phase_seconds": {ph: window_seconds(shape, ph, reps) for ph in phases}, "load_phases": list(phases),
                "variants": "all" if only_variants is None else [str(v) for v in only_variants],
                "placements": list(placements), "min_samples_for_p99": S.MIN_SAMPLES_FOR_P99,
                "ci_level": S.CI_LEVEL, "bootstrap_resamples": S.RESAMPLES, "foreground_rates_per_second": shape["fg_rates"],
                "foreground_cells": shape["fg_cells"], "reads_per_transaction": READS, "writes_per_transaction": 1,
                "backlog_transaction_writes": backlog_writes, "baseline_after_load": baseline_after_load,
                "sweep_batch_limit": batch_limit, "limits": list(shape["limits"]),
                "default_settings": {"sweep_latency_target": shipped.sweep_latency_target,
                                     "sweep_max_entries_per_second": shipped.sweep_max_entries_per_second},
                "arrival_delay_seconds": ARRIVAL_DELAY_SECONDS, "rest_intervals": REST_INTERVALS,
                "calibration_entries": shape["calibration_entries"], "calibration_entries_per_second": calibration_rate,
                "preroll_seconds": shape["preroll_seconds"], "settle_seconds_max": shape["settle_seconds"],
                "repetitions": reps, "shards": sweep_tasks, "sweep_tasks": sweep_tasks,
                "batch_limit": store.config.batch_limit,
                "capacity_probe": {"seconds": PROBE_SECONDS, "slowdown": PROBE_SLOWDOWN, "done_share": PROBE_DONE_SHARE,
                                   "steady_share": STEADY_SHARE,
                                   "p99_seconds": {str(r): p for r, p in probes.items()}}},
        results=results, goals=goals, runs=runs, method=__doc__ or "",
    )


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1000.0


def _r(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


if __name__ == "__main__":
    if len(sys.argv) == 7 and sys.argv[1] == "--sweeper":
        _sweeper_main(sys.argv[2], sys.argv[3], float(sys.argv[4]), None if sys.argv[5] == "-" else int(sys.argv[5]),
                      int(sys.argv[6]))
    else:
        sys.exit("usage: python -m bench.foreground_impact --sweeper URL VARIANT SECONDS BATCH_LIMIT|- SHARD"
                 " (run the benchmark with python -m bench.run)")
