"""Benchmark foreground_impact (issue 15 part 2, extended by issue 24 item 2): how much a sweep slows the
application it cleans, under phases of foreground load, at fixed intensity limits and at the default
(adaptive) settings, and what it costs the sweep.

Per repetition, the **load phases** in order - ``idle`` (no foreground), ``steady`` (the foreground rate of
the issue-15 chart), ``burst`` (:data:`BURST_FACTOR` x that rate), ``idle_again`` - and in each load phase
one window per **variant**, in an order that rotates every repetition:

* ``no_sweep``: the foreground alone (the baseline of every latency ratio of the phase; busy phases only);
* ``unthrottled``: ``sweep_max_entries_per_second`` 0 with ``sweep_latency_target`` 0 (no pacing at all: the
  baseline of every sweep-rate ratio of the phase);
* each fixed limit (``sweep_latency_target`` 0, so the limit is a fixed rate, as before adaptive intensity;
  busy phases only: on an idle node a fixed limit sweeps at the limit, measured in the issue-15 chart, and
  has no foreground to hurt);
* ``adaptive``: the default settings (``StoreConfig()``: ``sweep_latency_target`` 1.5, no upper bound).

A window:

* **foreground** (busy phases): snapshot transactions on a CONSERVATIVE table of pre-loaded cells, each
  reading ``READS`` random cells of one half and writing one random cell of the other half (so no reader
  waits for a running writer: that contention is the application's, not the store's), issued **open-loop**
  at the phase's rate (each starts at its planned instant on a thread pool; its latency is measured from
  that instant, so queueing behind a slow store counts - no coordinated omission). Conflicts are counted,
  not timed. The schedule runs for a moment before the window opens.
* **sweep**: in a separate process (as an Airflow worker or a Spark executor is; started while the backlog
  loads, connected before the window opens), one ``TargetedSweeper.sweep_shard`` run of a THOROUGH backlog
  (transactions of ``TXN_WRITES`` writes, loaded fast, one version per cell) for the phase's seconds: the
  run stops after the first iteration that ends past them (its ``on_iteration`` callback raises; the
  iteration's progress is persisted, the entries left over are swept by the next window) or when the
  backlog is gone. The backlog is topped up before each window to last it at the variant's expected rate
  (the limit, or the unthrottled rate of a calibration sweep without foreground). Foreground latencies are
  counted only while the sweep process sweeps (its own first and last instants).

Reported per load phase and variant: foreground p50 / p99 (median over repetitions; and pooled), p99 and
p50 against the same phase's ``no_sweep`` of the same repetition (median of the per-repetition ratios),
sweep entries/s and its share of the same phase's ``unthrottled`` rate of the same repetition (median of
the ratios), the seconds paced, the adaptive pace at the end of the window, its back-offs and reason, and
the cores used (machine, node).
"""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from . import common as C

NAME = "foreground_impact"
TXN_WRITES = 500
"""Writes per backlog transaction (bulk-load shaped: dedicated queue rows; loads the backlog fast)."""
READS = 4
FG_TABLE, BG_TABLE = "fg_app", "bg_backlog"
LIMITS_FULL = (16_000, 8_000, 4_000, 2_000, 1_000, 250)
"""The fixed limits of the issue-15 chart (entries/s, ``sweep_latency_target`` 0), and 250: about 1% of the
unthrottled rate, to tell whether any pace keeps the busy phases' p99 within the goal on the machine (1,000
cost 2.9-3.5x in the three full runs of 2026-11-27)."""
LIMITS_QUICK = (2_000,)
NO_SWEEP, UNTHROTTLED, ADAPTIVE = "no_sweep", "unthrottled", "adaptive"
PHASES = ("idle", "steady", "burst", "idle_again")
"""The load phases, in the order they run in every repetition."""
BUSY = ("steady", "burst")
BURST_FACTOR = 2
"""The burst's foreground rate over the steady one. 2, not 3 (as until 2026-11-26): the foreground alone at the
steady 20/s kept 0.63 of the 2 cores busy (full run of 2026-11-23), so 60/s needs about 1.9 of 2 before any
sweep - the node saturates, the open-loop schedule queues, and the no-sweep baseline itself grows with the
window's length (quick run of 2026-11-26 at load 3.9: burst 30/s p50 942 ms against 80 ms at the steady 10/s),
which leaves no ratio to measure; 40/s (about 1.3 cores) is a burst the node carries with room for a sweep."""
BACKLOG_MARGIN = 1.25
"""The backlog lasts a window at this many times the expected rate (the run stops at the window's end)."""
P99_GOAL, IDLE_SHARE_GOAL = 1.25, 0.8


def _shape(quick: bool) -> dict:
    if quick:
        steady = 10
        return {"phase_seconds": 2.0, "preroll_seconds": 0.5, "settle_seconds": 0.0, "fg_cells": 1_000,
                "calibration_entries": 5_000, "limits": LIMITS_QUICK, "max_backlog": 25_000,
                "fg_rates": {"idle": 0, "steady": steady, "burst": BURST_FACTOR * steady, "idle_again": 0}}
    # Steady: 20 transactions/s for 12 s, ~240 latencies per window and repetition (a p99 is the 3rd-slowest),
    # as in the issue-15 chart; the burst 40/s (~480).
    steady = 20
    return {"phase_seconds": 12.0, "preroll_seconds": 1.0, "settle_seconds": 5.0, "fg_cells": 10_000,
            "calibration_entries": 20_000, "limits": LIMITS_FULL, "max_backlog": 300_000,
            "fg_rates": {"idle": 0, "steady": steady, "burst": BURST_FACTOR * steady, "idle_again": 0}}


def variants(phase: str, limits) -> list:
    """The variants measured in a load phase."""
    if phase in BUSY:
        return [NO_SWEEP, UNTHROTTLED, *limits, ADAPTIVE]
    return [UNTHROTTLED, ADAPTIVE]


# ----- the sweep process ----------------------------------------------------------------------------
class _WindowOver(Exception):
    """Raised by the sweep run's ``on_iteration`` callback after the first iteration past the window."""


def _sweeper_main(url: str, variant: str, seconds: float) -> None:
    """Child process: open the store, say ``ready``, wait for ``go`` on stdin, sweep shard 0 THOROUGH as the
    variant says for at most ``seconds`` (then the iteration under way finishes), print one JSON line
    (start-up stays out of the measured window)."""
    from airflow_atlas.config import StoreConfig
    from airflow_atlas.store import AtlasStore

    if variant == ADAPTIVE:
        pacing: dict = {}  # the default settings: sweep_latency_target and sweep_max_entries_per_second
    else:  # a fixed rate (0: none at all), exactly as before adaptive intensity
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
            run = store.sweeper.sweep_shard(0, "THOROUGH", max_iterations=1_000_000, on_iteration=on_iteration,
                                            **pacing).to_json()
        except _WindowOver:
            run = store.history.runs(0, "THOROUGH", limit=1)[0]  # the run as recorded: failed, by _WindowOver
            if run.get("status") != "failed" or not str(run.get("error", "")).startswith("_WindowOver"):
                raise RuntimeError(f"the newest run in the history is not this one: {run}") from None
            run["status"] = "window_over"
        ended = started + timeline[-1][0] if timeline else time.time()  # the end of the last iteration
    finally:
        store.close()
    print(json.dumps({
        "started": started, "ended": ended, "status": run["status"], "entries_read": run["entries_read"],
        "cells_tombstoned": run["cells_tombstoned"], "iterations": run["iterations"],
        "seconds_paced": run["seconds_paced"], "max_entries_per_second": run["max_entries_per_second"],
        "latency_target": run.get("latency_target"), "pace_entries_per_second": run.get("pace_entries_per_second"),
        "pace_reason": run.get("pace_reason"), "pace_backoffs": run.get("pace_backoffs", 0),
        "pace_timeline": _thin(timeline) if variant == ADAPTIVE else [],
    }), flush=True)


def _thin(timeline: list, points: int = 60) -> list:
    """At most ``points`` entries of a timeline (every k-th, and the last)."""
    step = max(1, -(-len(timeline) // points))
    out = timeline[::step]
    if timeline and out[-1] != timeline[-1]:
        out.append(timeline[-1])
    return out


class Sweeper:
    """The sweep process of one window: constructing it starts the process (it connects while the parent
    loads the backlog); :meth:`start` returns once it is connected; :meth:`go` starts the sweep;
    :meth:`result` waits for its JSON line."""

    def __init__(self, url: str, variant, seconds: float):
        env = {**os.environ, "PYTHONPATH": str(C.REPO_ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "bench.foreground_impact", "--sweeper", url, str(variant), str(seconds)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
            cwd=str(C.REPO_ROOT))

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


def percentile(sorted_values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (``q`` in 0..100) of sorted values."""
    if not sorted_values:
        return None
    k = max(0, min(len(sorted_values) - 1, int(-(-q * len(sorted_values) // 100)) - 1))
    return sorted_values[k]


# ----- the benchmark ------------------------------------------------------------------------------
def _load_backlog(store, n: int, offset: int, rng) -> int:
    cells = [C.cell(offset + i, "bg") for i in range(n)]
    items = [(c, C.value(rng)) for c in cells]
    batches = [dict(items[i : i + TXN_WRITES]) for i in range(0, len(items), TXN_WRITES)]
    C.commit_synthetic(store, BG_TABLE, batches, threads=4)
    return offset + n


def _settle(store) -> None:
    """Everything loaded so far below the THOROUGH sweep timestamp (no transaction of ours is open)."""
    store.timestamps.fresh_timestamp()


def _expected_rate(variant, calibration_rate: float) -> float:
    return calibration_rate if variant in (UNTHROTTLED, ADAPTIVE) else min(float(variant), calibration_rate)


def run(*, quick: bool, reps: int) -> dict:
    from airflow_atlas.kvs.tables import SweepStrategy

    watch = C.Stopwatch()
    shape = _shape(quick)
    T = shape["phase_seconds"]
    url = C.cassandra_url(C.new_keyspace_name("fg"))
    store = C.open_store(url)
    runs: list[dict] = []
    rng = random.Random(11)
    try:
        machine = C.machine_info(store.kvs.session)
        store.create_table(FG_TABLE, SweepStrategy.CONSERVATIVE)
        store.create_table(BG_TABLE, SweepStrategy.THOROUGH)
        C.load_committed_base(store, [FG_TABLE], shape["fg_cells"])
        fg_cells = [C.cell(i) for i in range(shape["fg_cells"])]

        # Calibration: the unthrottled rate without foreground, to size each window's backlog.
        offset = _load_backlog(store, shape["calibration_entries"], 0, rng)
        _settle(store)
        cal_sweeper = Sweeper(url, UNTHROTTLED, 3600.0).start()
        cal_sweeper.go()
        cal = cal_sweeper.result()
        calibration_rate = cal["entries_read"] / max(1e-6, cal["ended"] - cal["started"])
        C.log(f"{NAME}: calibration {cal['entries_read']:,} entries at {calibration_rate:,.0f}/s (no foreground)")
        left = 0  # backlog entries not swept yet (a window stops at its end, the next one sweeps them)

        for rep in range(reps):
            for phase in PHASES:
                fg_rate = shape["fg_rates"][phase]
                for variant in C.rotated(variants(phase, shape["limits"]), rep):
                    rec: dict = {"rep": rep, "phase": phase, "variant": variant, "foreground_rate": fg_rate,
                                 "load_avg_1m": C.load_average()["1m"]}
                    sweeper = None
                    if variant != NO_SWEEP:
                        sweeper = Sweeper(url, variant, T)  # connects while the backlog loads
                        need = int(min(shape["max_backlog"],
                                       max(TXN_WRITES, _expected_rate(variant, calibration_rate) * T * BACKLOG_MARGIN)))
                        with C.timed(rec, "load_seconds"):
                            if need > left:
                                offset = _load_backlog(store, need - left, offset, rng)
                                left = need
                                _settle(store)
                        rec["backlog"] = left
                        sweeper.start()
                    rec["settle_seconds"] = C.settle_node(shape["settle_seconds"]) if shape["settle_seconds"] else 0.0
                    C.log(f"{NAME}: rep {rep} {phase} ({fg_rate}/s) {variant}")
                    fg = Foreground(store, fg_cells, fg_rate, seed=rep * 1000 + len(runs)).start() if fg_rate else None
                    if fg is not None:
                        time.sleep(shape["preroll_seconds"])  # the schedule runs before the window opens
                    probe = C.CpuProbe().start()
                    if sweeper is None:
                        start = time.time()
                        time.sleep(T)
                        end = time.time()
                    else:
                        sweeper.go()
                        child = sweeper.result()
                        start, end = child["started"], child["ended"]
                        left = max(0, left - child["entries_read"])
                        rec["sweep"] = child
                        rec["sweep_entries_per_second"] = child["entries_read"] / max(1e-6, end - start)
                        rec["sweep_check"] = child["status"] in ("caught_up", "window_over")
                    rec["cpu"] = probe.stop()
                    if fg is not None:
                        fg.stop()
                    lat = fg.window(start, end) if fg is not None else []
                    rec.update(window_seconds=end - start, foreground_transactions=len(lat),
                               conflicts=fg.conflicts if fg else 0, errors=fg.errors[:5] if fg else [],
                               error_count=len(fg.errors) if fg else 0,
                               p50_ms=_ms(percentile(lat, 50)), p99_ms=_ms(percentile(lat, 99)),
                               latencies_ms=[round(x * 1000, 3) for x in lat])
                    runs.append(rec)
                    C.log(f"{NAME}:   p50 {_r(rec['p50_ms'])} ms, p99 {_r(rec['p99_ms'])} ms over {len(lat)} transactions;"
                          f" sweep {_r(rec.get('sweep_entries_per_second'))} entries/s"
                          + (f" (pace {child['pace_entries_per_second']}: {child['pace_reason']})" if sweeper else "")
                          + f"; machine {rec['cpu']['machine_busy_cores']:.2f} cores busy, load {rec['load_avg_1m']}")
    finally:
        C.drop_store(store)
    results = summarise(runs, shape, calibration_rate)
    goals = evaluate_goals(results, shape["limits"])
    for r in runs:
        r.pop("latencies_ms", None)  # pooled into the results; the JSON stays small
    from airflow_atlas.config import DEFAULT_SWEEP_MAX_ENTRIES_PER_SECOND
    from airflow_atlas.sweep.pacing.adaptive import DEFAULT_SWEEP_LATENCY_TARGET

    return C.result_document(
        NAME, quick=quick, backend="cassandra", watch=watch, machine=machine,
        params={"phase_seconds": T, "load_phases": list(PHASES), "foreground_rates_per_second": shape["fg_rates"],
                "foreground_cells": shape["fg_cells"], "reads_per_transaction": READS, "writes_per_transaction": 1,
                "backlog_transaction_writes": TXN_WRITES, "limits": list(shape["limits"]),
                "default_settings": {"sweep_latency_target": DEFAULT_SWEEP_LATENCY_TARGET,
                                     "sweep_max_entries_per_second": DEFAULT_SWEEP_MAX_ENTRIES_PER_SECOND},
                "calibration_entries": shape["calibration_entries"], "calibration_entries_per_second": calibration_rate,
                "preroll_seconds": shape["preroll_seconds"], "settle_seconds_max": shape["settle_seconds"],
                "repetitions": reps, "shards": 1, "batch_limit": store.config.batch_limit},
        results=results, goals=goals, runs=runs, method=__doc__ or "",
    )


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1000.0


def _r(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def _ratios(rows: list[dict], base: dict, key: str) -> float | None:
    """Median over repetitions of ``row[key] / base[rep][key]`` (None when no pair has both)."""
    values = [r[key] / base[r["rep"]][key] for r in rows
              if r.get(key) is not None and r["rep"] in base and base[r["rep"]].get(key)]
    return C.median(values) if values else None


def summarise(runs: list[dict], shape: dict, calibration_rate: float) -> dict:
    """Per load phase and variant: medians over repetitions and ratios against the same phase and repetition."""
    out: dict = {"calibration_entries_per_second": calibration_rate, "phases": {}}
    for phase in PHASES:
        mine = [r for r in runs if r["phase"] == phase]
        no_sweep = {r["rep"]: r for r in mine if r["variant"] == NO_SWEEP}
        unthrottled = {r["rep"]: r for r in mine if r["variant"] == UNTHROTTLED}
        rows: dict = {}
        for variant in variants(phase, shape["limits"]):
            rs = [r for r in mine if r["variant"] == variant]
            if not rs:
                continue
            pooled = sorted(x for r in rs for x in r["latencies_ms"])
            row: dict = {
                "variant": variant, "limit": variant if isinstance(variant, int) else None,
                "p50_ms": _median_of(rs, "p50_ms"), "p99_ms": _median_of(rs, "p99_ms"),
                "pooled_p50_ms": percentile(pooled, 50), "pooled_p99_ms": percentile(pooled, 99),
                "foreground_transactions": sum(r["foreground_transactions"] for r in rs),
                "conflicts": sum(r["conflicts"] for r in rs), "errors": sum(r["error_count"] for r in rs),
                "machine_busy_cores": C.median(r["cpu"]["machine_busy_cores"] for r in rs),
                "cassandra_cores": C.median(r["cpu"].get("cassandra_cores", float("nan")) for r in rs),
                "load_avg_1m": C.median(r["load_avg_1m"] for r in rs),
                "window_seconds": C.median(r["window_seconds"] for r in rs),
            }
            if variant != NO_SWEEP:
                row.update(
                    p99_vs_no_sweep=_ratios(rs, no_sweep, "p99_ms"), p50_vs_no_sweep=_ratios(rs, no_sweep, "p50_ms"),
                    sweep_entries_per_second=C.median(r["sweep_entries_per_second"] for r in rs),
                    share_of_unthrottled=_ratios(rs, unthrottled, "sweep_entries_per_second"),
                    seconds_paced=C.median(r["sweep"]["seconds_paced"] for r in rs),
                    pace_entries_per_second=_median_of([r["sweep"] for r in rs], "pace_entries_per_second"),
                    pace_backoffs=C.median(r["sweep"]["pace_backoffs"] for r in rs),
                    pace_reason=rs[-1]["sweep"]["pace_reason"],
                    checks_ok=all(r["sweep_check"] for r in rs),
                )
            rows[str(variant)] = row
        out["phases"][phase] = {"foreground_rate": shape["fg_rates"][phase], "variants": rows}
    return out


def _median_of(rows: list[dict], key: str) -> float | None:
    values = [r[key] for r in rows if r.get(key) is not None]
    return C.median(values) if values else None


def evaluate_goals(results: dict, limits) -> list:
    """Issue 24 item 2's goals, at the default settings (the ``adaptive`` variant), side by side in one run."""
    phases = results["phases"]
    goals = []
    for phase in BUSY:
        row = phases[phase]["variants"].get(ADAPTIVE, {})
        goals.append(C.goal(f"{phase}: foreground p99 at the default settings / no sweep",
                            row.get("p99_vs_no_sweep"), P99_GOAL, "<="))
    for phase in PHASES:
        if phase in BUSY:
            continue
        row = phases[phase]["variants"].get(ADAPTIVE, {})
        goals.append(C.goal(f"{phase}: sweep rate at the default settings / unthrottled",
                            row.get("share_of_unthrottled"), IDLE_SHARE_GOAL, ">="))
    steady = phases["steady"]["variants"]
    gentle = [lim for lim in limits if (steady.get(str(lim), {}).get("p99_vs_no_sweep") or float("inf")) <= P99_GOAL]
    adaptive_rate = steady.get(ADAPTIVE, {}).get("sweep_entries_per_second")
    if gentle and adaptive_rate is not None:
        best = max(gentle)
        best_rate = steady[str(best)]["sweep_entries_per_second"]
        goals.append(C.goal(f"steady: sweep rate at the default settings / that of the highest fixed limit keeping"
                            f" p99 <= {P99_GOAL}x ({best:,}/s, swept {best_rate:,.0f}/s)",
                            adaptive_rate / best_rate, 1.0, ">="))
    else:
        goals.append(C.goal(f"steady: sweep rate at the default settings / that of the highest fixed limit keeping"
                            f" p99 <= {P99_GOAL}x", None, 1.0, ">=",
                            note="no fixed limit kept p99 within the goal" if adaptive_rate is not None else "not measured"))
    for phase in BUSY:
        rows = phases[phase]["variants"]
        base = rows.get(UNTHROTTLED, {}).get("p99_ms")
        worst = max(((rows[str(lim)]["p99_ms"] / base, lim) for lim in limits
                     if base and rows.get(str(lim), {}).get("p99_ms") is not None), default=None)
        goals.append(C.goal(f"{phase}: smoothness, the worst fixed limit's p99 / unthrottled p99"
                            + (f" ({worst[1]:,}/s)" if worst else ""), worst[0] if worst else None, 1.0, "<="))
    return goals


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--sweeper":
        _sweeper_main(sys.argv[2], sys.argv[3], float(sys.argv[4]))
    else:
        sys.exit("usage: python -m bench.foreground_impact --sweeper URL VARIANT SECONDS"
                 " (run the benchmark with python -m bench.run)")
