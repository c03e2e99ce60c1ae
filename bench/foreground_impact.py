"""Benchmark foreground_impact (issue 15, part 2): how much a sweep slows the application it cleans, at
several intensity limits (setting ``sweep_max_entries_per_second``), and what it costs the sweep.

Per repetition, in rotating order, one phase per limit (0 = unlimited) plus one phase with **no sweep**:

* **foreground**: a steady workload of snapshot transactions on a CONSERVATIVE table of pre-loaded cells,
  each reading ``READS`` random cells of one half and writing one random cell of the other half (so no
  reader waits for a running writer: that contention is the application's, not the store's), issued **open-loop** at a fixed rate (the schedule
  never waits for a slow transaction: each one starts at its planned instant on a thread pool, and its
  latency is measured from that planned instant, so queueing behind a slow store counts - no coordinated
  omission). Conflicts (two writers of one cell) are counted, not timed.
* **sweep**: in a separate process (as an Airflow worker or a Spark executor is; started and connected
  before the window opens), the engine's
  ``TargetedSweeper.sweep_shard`` works through a THOROUGH backlog loaded before the phase, at the
  phase's limit; the backlog (transactions of ``TXN_WRITES`` writes, loaded fast) is sized to last the phase (12 s) at the phase's expected rate
  (the limit, or the unthrottled rate measured in a calibration sweep first). Foreground latencies are
  counted only while the sweep process is sweeping (its own start and end instants).
* **no sweep**: the foreground alone for the same time (the baseline of every ratio).

Reported per phase: foreground p50 / p99 latency (median over repetitions of each repetition's figure,
and pooled over all repetitions), p99 / no-sweep p99 (per repetition against the same repetition's
baseline, then the median), sweep entries/s and its share of the unthrottled rate, the seconds the pacer
waited, and the cores used (this process, the node, the machine). The backlog cells hold one version each
(like delete_rate): the sweep writes one ranged tombstone per cell.
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
LIMITS_FULL = (0, 16_000, 8_000, 4_000, 2_000, 1_000)
LIMITS_QUICK = (0, 2_000)
UNLIMITED = 0


def _shape(quick: bool) -> dict:
    if quick:
        return {"phase_seconds": 2.0, "fg_rate": 5, "fg_cells": 1_000, "calibration_entries": 2_000,
                "limits": LIMITS_QUICK, "max_backlog": 20_000}
    # 20 transactions/s for 12 s: ~240 latencies per phase and repetition, so a p99 is the 3rd-slowest,
    # not the slowest (5/s for 8 s until the issue-15 run: each p99 was a phase's maximum, too noisy to
    # choose a default from).
    return {"phase_seconds": 12.0, "fg_rate": 20, "fg_cells": 10_000, "calibration_entries": 20_000,
            "limits": LIMITS_FULL, "max_backlog": 250_000}


# ----- the sweep process ----------------------------------------------------------------------------
def _sweeper_main(url: str, limit: int) -> None:
    """Child process: open the store, say ``ready``, wait for ``go`` on stdin, sweep shard 0 THOROUGH at
    ``limit`` entries/s, print one JSON line (start-up stays out of the measured window)."""
    from airflow_atlas.config import StoreConfig
    from airflow_atlas.store import AtlasStore

    store = AtlasStore.open(url, StoreConfig())
    try:
        store.number_of_shards()  # connected and the schema read
        print("ready", flush=True)
        sys.stdin.readline()
        started = time.time()
        r = store.sweeper.sweep_shard(0, "THOROUGH", max_entries_per_second=limit, max_iterations=1_000_000)
        ended = time.time()
    finally:
        store.close()
    print(json.dumps({"started": started, "ended": ended, "status": r.status, "entries_read": r.entries_read,
                      "cells_tombstoned": r.cells_tombstoned, "iterations": r.iterations,
                      "seconds_paced": r.seconds_paced, "max_entries_per_second": r.max_entries_per_second}), flush=True)


class Sweeper:
    """The sweep process of one phase: :meth:`start` returns once it is connected; :meth:`go` starts the
    sweep; :meth:`result` waits for its JSON line."""

    def __init__(self, url: str, limit: int):
        env = {**os.environ, "PYTHONPATH": str(C.REPO_ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
        self._proc = subprocess.Popen([sys.executable, "-m", "bench.foreground_impact", "--sweeper", url, str(limit)],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                      env=env, cwd=str(C.REPO_ROOT))

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


def _sweep(url: str, limit: int) -> dict:
    sweeper = Sweeper(url, limit).start()
    sweeper.go()
    return sweeper.result()


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
        self._pool = ThreadPoolExecutor(max_workers=32, thread_name_prefix="fg")
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


def run(*, quick: bool, reps: int) -> dict:
    from airflow_atlas.kvs.api import SweepStrategy

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
        offset = 0

        # Calibration: the unthrottled rate without foreground, to size each phase's backlog.
        offset = _load_backlog(store, shape["calibration_entries"], offset, rng)
        _settle(store)
        cal = _sweep(url, UNLIMITED)
        calibration_rate = cal["entries_read"] / max(1e-6, cal["ended"] - cal["started"])
        C.log(f"{NAME}: calibration {cal['entries_read']:,} entries at {calibration_rate:,.0f}/s (no foreground)")

        phases = ["none", *shape["limits"]]
        for rep in range(reps):
            for phase in C.rotated(phases, rep):
                rec: dict = {"rep": rep, "phase": "no_sweep" if phase == "none" else int(phase),
                             "load_avg_1m": C.load_average()["1m"]}
                if phase != "none":
                    expected = calibration_rate if phase == UNLIMITED else min(phase, calibration_rate)
                    n = int(min(shape["max_backlog"], max(TXN_WRITES, expected * T)))
                    with C.timed(rec, "load_seconds"):
                        offset = _load_backlog(store, n, offset, rng)
                        _settle(store)
                    rec["backlog"] = n
                C.log(f"{NAME}: rep {rep} phase {rec['phase']}")
                sweeper = None if phase == "none" else Sweeper(url, int(phase)).start()
                fg = Foreground(store, fg_cells, shape["fg_rate"], seed=rep * 100 + len(runs)).start()
                time.sleep(1.0)  # the schedule is running before the window opens
                probe = C.CpuProbe().start()
                if sweeper is None:
                    start = time.time()
                    time.sleep(T)
                    end = time.time()
                else:
                    sweeper.go()
                    child = sweeper.result()
                    start, end = child["started"], child["ended"]
                    rec["sweep"] = child
                    rec["sweep_entries_per_second"] = child["entries_read"] / max(1e-6, end - start)
                    rec["sweep_check"] = child["status"] == "caught_up" and child["entries_read"] >= rec["backlog"]
                rec["cpu"] = probe.stop()
                fg.stop()
                lat = fg.window(start, end)
                rec.update(window_seconds=end - start, foreground_transactions=len(lat), conflicts=fg.conflicts,
                           errors=fg.errors[:5], error_count=len(fg.errors),
                           p50_ms=_ms(percentile(lat, 50)), p99_ms=_ms(percentile(lat, 99)),
                           latencies_ms=[round(x * 1000, 3) for x in lat])
                runs.append(rec)
                C.log(f"{NAME}:   p50 {rec['p50_ms']} ms, p99 {rec['p99_ms']} ms over {len(lat)} transactions;"
                      f" sweep {rec.get('sweep_entries_per_second')} entries/s; machine {rec['cpu']['machine_busy_cores']:.2f}"
                      f" cores busy, load {rec['load_avg_1m']}")
    finally:
        C.drop_store(store)
    results = _summarise(runs, shape, calibration_rate)
    default = _default_limit()
    goals = _goals(results, default)
    for r in runs:
        r.pop("latencies_ms", None)  # pooled into the results; the JSON stays small
    return C.result_document(
        NAME, quick=quick, backend="cassandra", watch=watch, machine=machine,
        params={"phase_seconds": T, "foreground_rate_per_second": shape["fg_rate"], "foreground_cells": shape["fg_cells"],
                "reads_per_transaction": READS, "writes_per_transaction": 1, "backlog_transaction_writes": TXN_WRITES,
                "limits": list(shape["limits"]), "default_limit": default, "calibration_entries": shape["calibration_entries"],
                "calibration_entries_per_second": calibration_rate, "repetitions": reps, "shards": 1,
                "batch_limit": store.config.batch_limit},
        results=results, goals=goals, runs=runs, method=__doc__,
    )


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1000.0


def _summarise(runs: list[dict], shape: dict, calibration_rate: float) -> dict:
    base = {r["rep"]: r for r in runs if r["phase"] == "no_sweep"}
    unthrottled = C.median(r["sweep_entries_per_second"] for r in runs if r["phase"] == UNLIMITED)
    out: dict = {"unthrottled_entries_per_second": unthrottled, "calibration_entries_per_second": calibration_rate,
                 "phases": {}}
    for phase in ["no_sweep", *shape["limits"]]:
        rs = [r for r in runs if r["phase"] == phase]
        pooled = sorted(x for r in rs for x in r["latencies_ms"])
        row = {
            "limit": None if phase == "no_sweep" else phase,
            "p50_ms": C.median(r["p50_ms"] for r in rs if r["p50_ms"] is not None),
            "p99_ms": C.median(r["p99_ms"] for r in rs if r["p99_ms"] is not None),
            "pooled_p50_ms": percentile(pooled, 50),
            "pooled_p99_ms": percentile(pooled, 99),
            "foreground_transactions": sum(r["foreground_transactions"] for r in rs),
            "conflicts": sum(r["conflicts"] for r in rs),
            "errors": sum(r["error_count"] for r in rs),
            "machine_busy_cores": C.median(r["cpu"]["machine_busy_cores"] for r in rs),
            "cassandra_cores": C.median(r["cpu"].get("cassandra_cores", float("nan")) for r in rs),
            "load_avg_1m": C.median(r["load_avg_1m"] for r in rs),
        }
        if phase != "no_sweep":
            row["p99_vs_no_sweep"] = C.median(r["p99_ms"] / base[r["rep"]]["p99_ms"] for r in rs if r["rep"] in base)
            row["p50_vs_no_sweep"] = C.median(r["p50_ms"] / base[r["rep"]]["p50_ms"] for r in rs if r["rep"] in base)
            row["sweep_entries_per_second"] = C.median(r["sweep_entries_per_second"] for r in rs)
            row["share_of_unthrottled"] = row["sweep_entries_per_second"] / unthrottled if unthrottled else None
            row["seconds_paced"] = C.median(r["sweep"]["seconds_paced"] for r in rs)
            row["checks_ok"] = all(r["sweep_check"] for r in rs)
        out["phases"][str(phase)] = row
    return out


def _default_limit() -> int:
    from airflow_atlas.config import DEFAULT_SWEEP_MAX_ENTRIES_PER_SECOND

    return DEFAULT_SWEEP_MAX_ENTRIES_PER_SECOND


def _goals(results: dict, default: int) -> list:
    row = results["phases"].get(str(default))
    note = "" if row is not None else f"the default limit {default} was not among the measured limits"
    return [
        C.goal(f"foreground p99 at the default limit ({default or 'unlimited'}) / no sweep",
               None if row is None else row["p99_vs_no_sweep"], 1.25, "<=", note=note),
        C.goal(f"sweep rate at the default limit ({default or 'unlimited'}) / unthrottled",
               None if row is None else row["share_of_unthrottled"], 0.5, ">=", note=note),
    ]


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--sweeper":
        _sweeper_main(sys.argv[2], int(sys.argv[3]))
    else:
        sys.exit("usage: python -m bench.foreground_impact --sweeper URL LIMIT (run the benchmark with python -m bench.run)")


# ----- report (called by bench/report.py) ---------------------------------------------------------
def _fmt(value, digits=2) -> str:
    if value is None or value != value:
        return "-"
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.{digits}f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def report_lines(doc: dict) -> list[str]:
    """The RESULTS.md section of this benchmark."""
    p, r = doc["params"], doc["results"]
    header = ["limit (entries/s)", "fg p50 ms", "fg p99 ms", "p99 / no sweep", "pooled p99 ms", "sweep entries/s",
              "share of unthrottled", "paced s", "machine cores busy", "node cores"]
    rows = []
    for row in r["phases"].values():
        label = "no sweep" if row["limit"] is None else ("unlimited" if row["limit"] == 0 else f"{row['limit']:,}")
        if row["limit"] == p.get("default_limit"):
            label += " (default)"
        rows.append([label, _fmt(row["p50_ms"], 1), _fmt(row["p99_ms"], 1), _fmt(row.get("p99_vs_no_sweep")),
                     _fmt(row["pooled_p99_ms"], 1), _fmt(row.get("sweep_entries_per_second")),
                     _fmt(row.get("share_of_unthrottled")), _fmt(row.get("seconds_paced")),
                     _fmt(row["machine_busy_cores"]), _fmt(row["cassandra_cores"])])
    lines = ["## 8. Foreground impact of sweep, by intensity limit (Cassandra)", ""]
    lines += ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    b, a = doc.get("load_before", {}), doc.get("load_after", {})
    lines += ["", f"- foreground: {p['foreground_rate_per_second']} snapshot transactions/s open-loop ({p['reads_per_transaction']}"
              f" reads + 1 write of {p['foreground_cells']:,} cells); sweep in its own process, phases of ~{p['phase_seconds']:g} s;"
              f" unthrottled {_fmt(r['unthrottled_entries_per_second'])} entries/s with the foreground"
              f" ({_fmt(r['calibration_entries_per_second'])} without); default limit {p['default_limit'] or 'unlimited'};"
              f" load averages {b.get('1m')}/{b.get('5m')}/{b.get('15m')} -> {a.get('1m')}/{a.get('5m')}/{a.get('15m')};"
              f" {p['repetitions']} repetitions (figures are medians; pooled = all repetitions' samples); chart:"
              " foreground_impact.png", ""]
    return lines


def write_chart(doc: dict, path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    r, p = doc["results"], doc["params"]
    phases = list(r["phases"].values())
    labels = ["no sweep" if x["limit"] is None else ("unlimited" if x["limit"] == 0 else f"{x['limit']:,}/s") for x in phases]
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    xs = range(len(phases))
    left.bar([i - 0.2 for i in xs], [x["p50_ms"] or 0 for x in phases], 0.4, label="p50")
    left.bar([i + 0.2 for i in xs], [x["p99_ms"] or 0 for x in phases], 0.4, label="p99")
    base = r["phases"]["no_sweep"]["p99_ms"]
    if base:
        left.axhline(1.25 * base, color="red", linestyle="--", label="goal: p99 <= 1.25x no sweep")
    left.set_xticks(list(xs), labels)
    left.set_ylabel("foreground transaction latency (ms, log)")
    left.set_yscale("log")
    left.set_title("foreground latency by sweep limit")
    left.legend(fontsize=8)
    swept = [x for x in phases if x["limit"] is not None]
    right.bar(range(len(swept)), [x["sweep_entries_per_second"] for x in swept], 0.5)
    unthrottled = r["unthrottled_entries_per_second"]
    if unthrottled:
        right.axhline(0.5 * unthrottled, color="red", linestyle="--", label="goal: >= 50% of unthrottled")
    right.set_xticks(range(len(swept)), ["unlimited" if x["limit"] == 0 else f"{x['limit']:,}/s" for x in swept])
    right.set_ylabel("sweep entries per second")
    right.set_title(f"sweep throughput (default limit: {p['default_limit'] or 'unlimited'})")
    right.legend(fontsize=8)
    fig.suptitle("foreground_impact: snapshot transactions while sweep works through a backlog (2 cores shared by node, application and sweep)")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
