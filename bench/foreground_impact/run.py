"""Benchmark foreground_impact (``python -m bench.run --only foreground_impact``): how much a sweep slows the
application it cleans, under phases of foreground load, at fixed intensity limits and at the shipped settings (the
application pace), and what it costs the sweep.

Per **placement** of the sweep process (:mod:`bench.lib.placement`: ``confined`` - a CPU quota of half a core, as
a sweeper on its own Airflow worker -, then ``shared``), per repetition, the **load phases** in order - ``idle``
(no foreground), ``steady`` (in the full mode half the highest rate the node carries without sweep, by a
capacity probe before the windows: :func:`probe_capacity`; quick: 10 transactions/s), ``burst``
(:data:`BURST_FACTOR` x that), ``arrival`` (the steady rate, starting :data:`ARRIVAL_DELAY_SECONDS` into the
window), ``idle_again`` - and in each load phase one window per **variant**
(:func:`bench.foreground_impact.summary.variants`), in an order that rotates every repetition:

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

* **foreground** (busy phases; :mod:`bench.foreground_impact.foreground`): snapshot transactions on a
  CONSERVATIVE table of pre-loaded cells, each reading ``READS`` random cells of one half and writing one random cell of the other half (so no reader
  waits for a running writer: that contention is the application's, not the store's), issued **open-loop**
  at the phase's rate (each starts at its planned instant on a thread pool; its latency is measured from
  that instant, so queueing behind a slow store counts - no coordinated omission). Conflicts are counted,
  not timed. In steady and burst the schedule runs for a moment before the sweep starts; in the arrival it
  starts :data:`ARRIVAL_DELAY_SECONDS` after the sweep (no sweep: after the window opens) and runs to the
  window's end. In the full mode the foreground of a busy window lasts long enough for
  :data:`~bench.foreground_impact.summary.MIN_POOLED` transactions per variant over the repetitions
  (:func:`window_seconds`).
* **sweep** (:mod:`bench.foreground_impact.sweeper`): in a separate process (as an Airflow worker or a Spark
  executor is; placed, started while the backlog loads, connected before the window opens), one ``TargetedSweeper.sweep_shard`` run of a THOROUGH
  backlog (transactions of ``TXN_WRITES`` writes, loaded fast, one version per cell) for the window's seconds:
  the run stops after the first iteration that ends past them (its ``on_iteration`` callback raises; the
  iteration's progress is persisted, the entries left over are swept by the next window) or when the backlog
  is gone. The backlog is topped up before each window to last it at the variant's expected rate (the limit,
  or the unthrottled rate of a calibration sweep without foreground). Foreground latencies are counted while
  the sweep process sweeps (its own first and last instants), in the arrival from the foreground's start.

Reported per placement, load phase and variant (:mod:`bench.foreground_impact.summary`): the pooled p50 and p99
("too few samples" under 1,000 transactions), the p99 against the same placement and phase's ``no_sweep`` with a
bootstrap 90% confidence interval, the sweep rate (pooled) and its share of ``unthrottled``, the seconds paced,
the pace at the end of the window, its back-offs and reason (and, for the default, its pace over the window),
and the cores used (machine, node). The goals are judged at the default on the confined placement.
"""
from __future__ import annotations

import math
import random
import time

from bench.lib import load
from bench.lib import placement as P
from bench.lib.load import cell, commit_synthetic, load_committed_base
from bench.lib.log import log
from bench.lib.machine import CpuProbe, load_average, machine_info
from bench.lib.node import settle_node, settle_pressure
from bench.lib.results import Stopwatch, result_document
from bench.lib.stats import rotated
from bench.lib.stores import cassandra_url, drop_store, new_keyspace_name, open_store
from bench.lib.timing import timed

from . import summary as S
from .foreground import FG_TABLE, READS, Foreground
from .summary import (
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
from .sweeper import CAUGHT_UP, WINDOW_OVER, Sweeper, combined

NAME = "foreground_impact"
TXN_WRITES = 500
"""Writes per backlog transaction (bulk-load shaped: dedicated queue rows; loads the backlog fast)."""
BG_TABLE = "bg_backlog"
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
or request; :func:`bench.lib.machine.settle_pressure`), then until its CPU is quiet (``settle_seconds``): on
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
        log(f"{NAME}: capacity probe warm-up, {rates[0]}/s for {warmup_seconds:.0f} s; the node settled in "
              f"{settle_node(30.0):.0f} s")
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
        log(f"{NAME}: capacity probe {rate}/s without sweep: p99 "
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
    :data:`~bench.foreground_impact.summary.MIN_POOLED` transactions per variant in the full mode (10 % spare for the
    windows' edges), after :data:`ARRIVAL_DELAY_SECONDS` in the arrival."""
    rate = shape["fg_rates"][phase]
    seconds = shape["phase_seconds"]
    if shape.get("min_pooled") and rate:
        seconds = max(seconds, math.ceil(shape["min_pooled"] * 1.1 / (rate * reps)))
    return seconds + (ARRIVAL_DELAY_SECONDS if phase == "arrival" else 0.0)


# ----- the benchmark ------------------------------------------------------------------------------
def _load_backlog(store, n: int, offset: int, rng, writes: int = TXN_WRITES) -> int:
    cells = [cell(offset + i, "bg") for i in range(n)]
    items = [(c, load.value(rng)) for c in cells]
    batches = [dict(items[i : i + writes]) for i in range(0, len(items), writes)]
    commit_synthetic(store, BG_TABLE, batches, threads=4)
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

    watch = Stopwatch()
    shape = _shape(quick)
    url = cassandra_url(new_keyspace_name("fg"))
    store = open_store(url, shards=sweep_tasks)  # the foreground's: the application, its latency published
    # The backlog's and the base's loader, and the capacity probe's foreground: not the application (module doc).
    loader = open_store(url, shards=sweep_tasks, app_latency_publish=False)
    runs: list[dict] = []
    rng = random.Random(11)
    ballast = None  # baseline_after_load: the no-sweep windows' load goes there
    ballast_offset = 0
    try:
        machine = machine_info(store.kvs.session)
        loader.create_table(FG_TABLE, SweepStrategy.CONSERVATIVE)
        loader.create_table(BG_TABLE, SweepStrategy.THOROUGH)
        load_committed_base(loader, [FG_TABLE], shape["fg_cells"])
        fg_cells = [cell(i) for i in range(shape["fg_cells"])]
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
        log(f"{NAME}: calibration {cal['entries_read']:,} entries at {calibration_rate:,.0f}/s (no foreground)")
        probes: dict[int, float | None] = {}
        if not quick:  # the busy phases' rates follow the machine (the quick mode keeps its small fixed ones)
            probes = probe_capacity(loader, fg_cells)
            shape = with_rates(shape, steady_rate(probes))
            log(f"{NAME}: foreground rates {shape['fg_rates']['steady']}/s steady, {shape['fg_rates']['burst']}/s burst")
            settle_node(30.0)
        left = 0  # backlog entries not swept yet (a window stops at its end, the next one sweeps them)

        placed: dict = {}
        for placement, rep in ((p, r) for p in placements for r in range(reps)):
            for phase in phases:
                fg_rate = shape["fg_rates"][phase]
                T = window_seconds(shape, phase, reps)
                measured = [v for v in variants(phase, shape["limits"]) if only_variants is None or v in only_variants]
                for variant in rotated(measured, rep):
                    rec: dict = {"placement": placement, "rep": rep, "phase": phase, "variant": variant,
                                 "foreground_rate": fg_rate, "load_avg_1m": load_average()["1m"]}
                    sweepers: list[Sweeper] = []
                    if variant != NO_SWEEP:
                        sweepers = [Sweeper(url, variant, T, placement, batch_limit, shard=k,  # connect while it loads
                                            cores=P.SWEEPER_CPU_CORES / sweep_tasks) for k in range(sweep_tasks)]
                        placed[placement] = P.window_record([s.placement for s in sweepers])
                        need = int(min(shape["max_backlog"] * sweep_tasks, max(
                            backlog_writes, _expected_rate(variant, calibration_rate) * sweep_tasks * T * BACKLOG_MARGIN)))
                        with timed(rec, "load_seconds"):
                            if need > left:
                                offset = _load_backlog(loader, need - left, offset, rng, backlog_writes)
                                left = need
                                _settle(loader)
                        rec["backlog"] = left
                        for sweeper in sweepers:
                            sweeper.start()
                    elif baseline_after_load:
                        if ballast is None:
                            ballast = open_store(cassandra_url(new_keyspace_name("fgballast")),
                                                   app_latency_publish=False)
                            ballast.create_table(BG_TABLE, SweepStrategy.THOROUGH)
                        loaded = int(max(backlog_writes, min(shape["limits"]) * T))
                        with timed(rec, "load_seconds"):
                            ballast_offset = _load_backlog(ballast, loaded, ballast_offset, rng, backlog_writes)
                            _settle(ballast)
                        rec["ballast_loaded"] = loaded
                    rec["settle_pressure_seconds"] = (settle_pressure(store.kvs, shape["settle_pressure_seconds"])
                                                      if shape["settle_pressure_seconds"] else 0.0)
                    rec["settle_seconds"] = settle_node(shape["settle_seconds"]) if shape["settle_seconds"] else 0.0
                    log(f"{NAME}: {placement} rep {rep} {phase} ({fg_rate}/s, {T:g} s) {variant}")
                    fg = None
                    seed = rep * 1000 + len(runs)
                    if fg_rate and phase != "arrival":
                        fg = Foreground(store, fg_cells, fg_rate, seed).start()
                        time.sleep(shape["preroll_seconds"])  # the schedule runs before the window opens
                    else:  # the window opens with the application resting
                        time.sleep(max(0.0, fg_stopped + rest - time.time()))
                    probe = CpuProbe().start()
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
                        rec["sweep_check"] = child["status"] in (CAUGHT_UP, WINDOW_OVER)
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
                    log(f"{NAME}:   p50 {_r(rec['p50_ms'])} ms, p99 {_r(rec['p99_ms'])} ms over {len(lat)} transactions;"
                          f" sweep {_r(rec.get('sweep_entries_per_second'))} entries/s"
                          + (f" (pace {child['pace_entries_per_second']}: {child['pace_reason']})" if sweepers else "")
                          + f"; machine {rec['cpu']['machine_busy_cores']:.2f} cores busy, load {rec['load_avg_1m']}")
    finally:
        loader.close()
        drop_store(store)
        if ballast is not None:
            drop_store(ballast)
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
    return result_document(
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
