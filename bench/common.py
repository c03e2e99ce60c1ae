"""Shared plumbing of the benchmarks: machine description, load averages, interleaving, stores, loaders.

Nothing here asserts a timing. Every figure a benchmark reports is a ratio of two things measured side by
side in the same run, interleaved (the order of the variants rotates every repetition), and the median of
at least three repetitions, because other work may be running on the machine.
"""
from __future__ import annotations

import json
import os
import platform
import random
import re
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

from .lib.paths import CASSANDRA_SCRIPT, REPO_ROOT

DEFAULT_CASSANDRA = os.environ.get("ATLAS_BENCH_CASSANDRA", "127.0.0.1:9042")
SCHEMA_VERSION = 1



# ----- small statistics and timing -------------------------------------------------------------------
def median(values: Iterable[float]) -> float:
    values = list(values)
    return statistics.median(values) if values else float("nan")


def rotated(items: Sequence, rep: int) -> list:
    """``items`` rotated by ``rep``: the variants change places every repetition (interleaving)."""
    items = list(items)
    if not items:
        return items
    k = rep % len(items)
    return items[k:] + items[:k]


@contextmanager
def timed(out: dict, key: str):
    start = time.perf_counter()
    try:
        yield
    finally:
        out[key] = time.perf_counter() - start


def rounded(value, digits: int = 4):
    if isinstance(value, float):
        return round(value, digits)
    if isinstance(value, dict):
        return {k: rounded(v, digits) for k, v in value.items()}
    if isinstance(value, list):
        return [rounded(v, digits) for v in value]
    return value


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ----- machine description -------------------------------------------------------------------------
def load_average() -> dict:
    one, five, fifteen = os.getloadavg()
    try:
        text = subprocess.run(["uptime"], capture_output=True, text=True, timeout=5).stdout.strip()
    except Exception:
        text = ""
    return {"1m": round(one, 2), "5m": round(five, 2), "15m": round(fifteen, 2), "uptime": text, "at": round(time.time(), 1)}


def _cpu_model() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=5).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except Exception:
        pass
    return platform.processor() or "unknown"


def _memory_bytes() -> int | None:
    try:
        import psutil

        return int(psutil.virtual_memory().total)
    except Exception:
        return None


def paxos_variant(session) -> str | None:
    """The node's ``paxos_variant`` (v1 or v2): what the timestamp draws' contention depends on
    (bench/ANALYSIS.md "Paxos v2")."""
    row = session.execute("SELECT value FROM system_views.settings WHERE name = 'paxos_variant'").one()
    return row[0] if row else None


def cassandra_facts(session=None) -> dict:
    """Cassandra version (from the node) and heap (nodetool info, else the JVM's -Xmx)."""
    facts: dict = {}
    if session is not None:
        try:
            facts["version"] = session.execute("SELECT release_version FROM system.local").one()[0]
        except Exception as exc:
            facts["version_error"] = str(exc)[:200]
        try:
            facts["paxos_variant"] = paxos_variant(session)
        except Exception as exc:
            facts["paxos_variant_error"] = str(exc)[:200]
    try:
        out = subprocess.run(
            [str(CASSANDRA_SCRIPT), "nodetool", "info"], capture_output=True, text=True, timeout=90
        ).stdout
        for line in out.splitlines():
            if line.startswith("Heap Memory (MB)"):
                used, total = (float(x) for x in line.split(":", 1)[1].split("/"))
                facts["heap_mb_used"] = used
                facts["heap_mb_max"] = total
    except Exception:
        pass
    cmd = _local_node_cmdline()
    if cmd:
        facts["jit"] = node_jit(cmd)
        if "heap_mb_max" not in facts:
            for c in cmd:
                m = re.match(r"-Xmx(\d+)([GgMm])", c)
                if m:
                    facts["heap_mb_max"] = int(m.group(1)) * (1024 if m.group(2) in "Gg" else 1)
    return facts


def _local_node_cmdline() -> list[str]:
    try:
        import psutil

        for p in psutil.process_iter(["cmdline"]):
            cmd = p.info.get("cmdline") or []
            if any("CassandraDaemon" in c for c in cmd):
                return cmd
    except Exception:
        pass
    return []


def node_jit(cmdline: list[str]) -> str:
    """``c1`` when the node's JVM stops at the C1 compiler (the test profile of scripts/cassandra.sh),
    ``full`` for the JVM's normal tiered compilation (what a production node runs)."""
    return "c1" if any(c.startswith("-XX:TieredStopAtLevel=") and not c.endswith("=4") for c in cmdline) else "full"


_CASSANDRA_FACTS: dict = {}


def machine_info(cassandra_session=None) -> dict:
    info = {
        "cpu_model": _cpu_model(),
        "cores": os.cpu_count(),
        "memory_gib": round((_memory_bytes() or 0) / 2**30, 1),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }
    try:
        import cassandra

        info["cassandra_driver"] = cassandra.__version__
    except Exception:
        pass
    if cassandra_session is not None:
        if not _CASSANDRA_FACTS:  # nodetool starts a JVM: once per run
            _CASSANDRA_FACTS.update(cassandra_facts(cassandra_session))
        info["cassandra"] = dict(_CASSANDRA_FACTS)
    info["note"] = "shared machine: other work may run concurrently; see load averages"
    return info


# ----- stores --------------------------------------------------------------------------------------
def ensure_cassandra() -> None:
    """Start the local node when it does not answer - with the JVM's full JIT (ATLAS_CASSANDRA_JIT=full), as
    a production node runs; the test profile (C1 only) starts faster but costs more CPU per request. A node
    already running is used as it is, with a warning when it runs the test profile (recorded in the JSON)."""
    status = subprocess.run([str(CASSANDRA_SCRIPT), "status"], capture_output=True, text=True)
    if status.returncode != 0:
        log("starting the local Cassandra node (ATLAS_CASSANDRA_JIT=full scripts/cassandra.sh start)")
        env = {**os.environ, "ATLAS_CASSANDRA_JIT": os.environ.get("ATLAS_CASSANDRA_JIT", "full")}
        started = subprocess.run([str(CASSANDRA_SCRIPT), "start"], capture_output=True, text=True, env=env)
        if started.returncode != 0:
            raise RuntimeError(f"could not start Cassandra:\n{started.stdout}\n{started.stderr}")
    elif node_jit(_local_node_cmdline()) == "c1":
        log(
            "warning: the local node runs the test profile (C1 JIT only): Cassandra costs more CPU per request "
            "than in production. For production-like figures: scripts/cassandra.sh stop && "
            "ATLAS_CASSANDRA_JIT=full scripts/cassandra.sh start"
        )


def new_keyspace_name(prefix: str) -> str:
    return f"bench_{prefix}_{uuid.uuid4().hex[:8]}"


def cassandra_url(keyspace: str, host: str = DEFAULT_CASSANDRA) -> str:
    return f"cassandra://{host}/{keyspace}"


def open_store(url: str, shards: int = 1, **config):
    from airflow_atlas.config import StoreConfig
    from airflow_atlas.store import AtlasStore

    # Throughput benchmarks measure the unthrottled engine: no intensity limit and no application pace unless
    # one is asked for.
    config = {"sweep_max_entries_per_second": 0, "sweep_latency_target": 0, **config}
    store = AtlasStore.open(url, StoreConfig(**config))
    store.initialize(shards)
    return store


def drop_store(store) -> None:
    """Drop a benchmark keyspace (Cassandra) or delete the SQLite file."""
    kvs = store.kvs
    try:
        if kvs.backend == "cassandra":
            kvs.session.execute(f'DROP KEYSPACE IF EXISTS "{kvs.keyspace}"', timeout=180)
            store.close()
        else:
            path = kvs.path
            store.close()
            for suffix in ("", "-wal", "-shm"):
                try:
                    os.remove(path + suffix)
                except FileNotFoundError:
                    pass
    except Exception as exc:  # a slow drop must never lose the measurements
        log(f"could not drop {store.describe()}: {exc}")


def queueless_manager(store):
    """A TransactionManager on the same services as ``store.transactions`` but without the sweep queue (and
    without the application-latency publication)."""
    return bare_manager(store, sweep_queue=False)


def bare_manager(store, *, sweep_queue: bool):
    """A TransactionManager on the same services as ``store.transactions``, with or without the sweep queue,
    never recording or publishing the application's latency (``TransactionConfig.latency`` None)."""
    from airflow_atlas.transactions.manager import TransactionConfig, TransactionManager

    cfg = store.config
    return TransactionManager(
        store.kvs,
        store.timestamps,
        store.transaction_service,
        store.registry,
        store.punch,
        sweep_queue=store.queue.writer if sweep_queue else None,
        scrub_queue=store.scrub_queue if sweep_queue else None,
        config=TransactionConfig(
            lease_seconds=cfg.transaction_lease_seconds,
            punch_interval_seconds=cfg.punch_interval_seconds,
            running_writer_wait_seconds=cfg.running_writer_wait_seconds,
        ),
    )


def ratio_of_medians_ci(
    numerators: Sequence[float], denominators: Sequence[float], *, level: float = 0.90, resamples: int = 2000,
    seed: int = 7,
) -> tuple[float, float]:
    """Bootstrap ``level`` confidence interval of median(numerators) / median(denominators) over paired
    samples (index i of both was measured back to back): pairs are resampled together."""
    if len(numerators) != len(denominators) or not numerators:
        raise ValueError("paired samples of equal, non-zero length are needed")
    rng = random.Random(seed)
    n = len(numerators)
    ratios = []
    for _ in range(resamples):
        idx = [rng.randrange(n) for _ in range(n)]
        ratios.append(median(numerators[i] for i in idx) / median(denominators[i] for i in idx))
    ratios.sort()
    tail = (1 - level) / 2
    return ratios[int(tail * (resamples - 1))], ratios[int(round((1 - tail) * (resamples - 1)))]


# ----- cells and loaders ---------------------------------------------------------------------------
COLUMNS_PER_ROW = 10


def cell(i: int, prefix: str = "row"):
    """Cell number ``i`` of a benchmark table: ``COLUMNS_PER_ROW`` columns per row."""
    from airflow_atlas.kvs.api import Cell

    row, col = divmod(i, COLUMNS_PER_ROW)
    return Cell(f"{prefix}{row:08d}".encode(), f"c{col:02d}".encode())


def value(rng: random.Random, size: int = 32) -> bytes:
    return rng.randbytes(size)


def bulk_put(store, table: str, values: dict, timestamp: int) -> None:
    """Write ``values`` at Atlas timestamp ``timestamp`` (loading only; the backend batches the writes)."""
    store.kvs.put(table, values, timestamp)


def bulk_sentinels(store, table: str, cells: Sequence) -> None:
    """The sentinels a CONSERVATIVE sweep leaves on every swept cell (loading only)."""
    store.kvs.add_gc_sentinels(table, cells)


def load_committed_base(store, tables: Sequence[str], n_cells: int, chunk: int = 10_000, seed: int = 1) -> int:
    """Base data of ``n_cells`` cells in each table, as the state a sweep leaves behind: committed
    transactions of ``chunk`` cells (real commit entries in the transaction service), one version per
    cell, and the CONSERVATIVE sentinel on every cell. No queue entries (they were swept and cleaned).
    Returns the last timestamp of the load."""
    rng = random.Random(seed)
    for lo in range(0, n_cells, chunk):
        cells = [cell(i) for i in range(lo, min(n_cells, lo + chunk))]
        values = {c: value(rng) for c in cells}
        block = store.timestamps.fresh_timestamps(2)
        start, commit = block[0], block[1]
        for table in tables:
            bulk_put(store, table, values, start)
        store.transaction_service.put_unless_exists(start, commit)
        for table in tables:
            bulk_sentinels(store, table, cells)
    return store.timestamps.fresh_timestamp()


def advance_progress(store, to_timestamp: int) -> None:
    """Record that every shard and strategy was swept up to ``to_timestamp`` (nothing is queued below it)."""
    from airflow_atlas.kvs.tables import SweepStrategy

    for shard in range(store.number_of_shards()):
        for strategy in (SweepStrategy.CONSERVATIVE, SweepStrategy.THOROUGH):
            store.queue.progress.update_progress(shard, strategy, to_timestamp)


def run_transactions(manager, table: str, batches: Sequence[dict], threads: int = 4) -> int:
    """Commit one real transaction per dict of writes, ``threads`` at a time. Returns the number committed."""
    def one(writes):
        manager.run(lambda txn: txn.put(table, writes))
        return 1

    if threads <= 1:
        return sum(one(w) for w in batches)
    with ThreadPoolExecutor(threads) as pool:
        return sum(pool.map(one, batches))


def commit_synthetic(store, table: str, batches: Sequence[dict], threads: int = 4) -> int:
    """Committed transactions written without the transaction protocol's checks (loading backlogs fast):
    per batch draw (start, commit), enqueue the writes exactly as a committing transaction does, write the
    cells at start, then put the commit entry. The queue and the store end up exactly as after real
    commits. Returns the number of queue entries written."""
    from airflow_atlas.sweep.queue.write_info import WriteInfo

    def one(writes):
        block = store.timestamps.fresh_timestamps(2)
        start, commit = block[0], block[1]
        store.queue.writer.enqueue([WriteInfo(table, c, start, v == b"") for c, v in writes.items()])
        store.kvs.put(table, writes, start)
        store.transaction_service.put_unless_exists(start, commit)
        return len(writes)

    if threads <= 1:
        return sum(one(w) for w in batches)
    with ThreadPoolExecutor(threads) as pool:
        return sum(pool.map(one, batches))


def chunks(items: Sequence, size: int) -> list:
    return [items[i : i + size] for i in range(0, len(items), size)]


def sweep_all_shards(store, strategy, sweep_ts: int, batch_limit: int | None = None) -> dict:
    """Targeted sweep of every shard, in-process, one after the other, until caught up."""
    totals = {"entries_read": 0, "cells_tombstoned": 0, "iterations": 0, "statuses": []}
    for shard in range(store.number_of_shards()):
        r = store.sweeper.sweep_shard(shard, strategy, sweep_ts=sweep_ts, batch_limit=batch_limit)
        totals["entries_read"] += r.entries_read
        totals["cells_tombstoned"] += r.cells_tombstoned
        totals["iterations"] += r.iterations
        totals["statuses"].append(r.status)
    return totals


def cassandra_process():
    """The local Cassandra node's process (psutil), or None when none runs on this machine."""
    import psutil

    for p in psutil.process_iter(["cmdline"]):
        if any("CassandraDaemon" in c for c in (p.info.get("cmdline") or [])):
            return p
    return None


def time_calls(obj, name: str, label: str, seconds: dict, calls: dict | None = None) -> None:
    """Replace ``obj.name`` (an instance's or a class's attribute) by a wrapper that adds each call's wall
    time to ``seconds[label]`` (and 1 to ``calls[label]``): where a benchmark's time goes, by phase.
    ``seconds`` and ``calls`` default missing labels to 0 (``collections.Counter`` or ``defaultdict``)."""
    fn = getattr(obj, name)

    def timed(*args, **kwargs):
        started = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            seconds[label] += time.perf_counter() - started
            if calls is not None:
                calls[label] += 1

    setattr(obj, name, timed)


class CpuProbe:
    """CPU used by this process, by the local Cassandra node and by the whole machine between start() and
    stop(), in cores (CPU seconds / wall seconds): where the time of a step goes."""

    def __init__(self):
        import psutil

        self._psutil = psutil
        self._me = psutil.Process()
        self._cassandra = cassandra_process()

    @staticmethod
    def _busy(t) -> float:
        return t.user + t.system + getattr(t, "nice", 0.0)

    def start(self) -> CpuProbe:
        self._t = time.perf_counter()
        self._mine = sum(self._me.cpu_times()[:2])
        self._node = sum(self._cassandra.cpu_times()[:2]) if self._cassandra else None
        self._all = self._busy(self._psutil.cpu_times())
        return self

    def stop(self) -> dict:
        wall = time.perf_counter() - self._t
        out = {
            "wall_seconds": wall,
            "this_process_cores": (sum(self._me.cpu_times()[:2]) - self._mine) / wall,
            "machine_busy_cores": (self._busy(self._psutil.cpu_times()) - self._all) / wall,
            "machine_cores": os.cpu_count(),
        }
        if self._cassandra is not None:
            try:
                out["cassandra_cores"] = (sum(self._cassandra.cpu_times()[:2]) - self._node) / wall
            except Exception:
                pass
        return out


def settle_node(max_seconds: float = 30.0, idle_cores: float = 0.15, window: float = 0.5) -> float:
    """Wait until the local Cassandra node is quiet (under ``idle_cores`` of CPU over two windows in a
    row, at most ``max_seconds``) and return the seconds waited. Between two timed variants: a variant
    that leaves the node flushing memtables or compacting must not slow the one measured after it (the
    work it caused belongs to it). No local node found: returns 0 at once."""
    import psutil

    node = cassandra_process()
    if node is None:
        return 0.0
    started = time.perf_counter()
    quiet = 0
    try:
        while quiet < 2 and time.perf_counter() - started < max_seconds:
            before = sum(node.cpu_times()[:2])
            time.sleep(window)
            quiet = quiet + 1 if (sum(node.cpu_times()[:2]) - before) / window < idle_cores else 0
    except psutil.Error:
        pass
    return time.perf_counter() - started


def settle_pressure(kvs, max_seconds: float = 60.0, poll: float = 0.5) -> float:
    """Wait until every node ``kvs`` reaches reports nothing queued (no pending or blocked task in a request stage,
    no pending compaction: :mod:`airflow_atlas.kvs.pressure`'s pools) and answered in time, at most
    ``max_seconds``; return the seconds waited. The node's CPU can be quiet between two compactions
    (:func:`settle_node` then returns at once) while the compactions a sweep's tombstones caused are still
    queued: foreground_impact's window after a fast sweep measured them (bench/ANALYSIS.md, 2026-11-29). The
    embedded store has no nodes: returns 0 at once."""
    started = time.perf_counter()
    while time.perf_counter() - started < max_seconds:
        nodes = kvs.node_pressure()
        if all(not n.late and all(p.pending == 0 and p.blocked == 0 for p in n.pools) for n in nodes):
            break
        time.sleep(poll)
    return time.perf_counter() - started


# ----- results -------------------------------------------------------------------------------------
def result_document(
    name: str, *, quick: bool, backend: str, watch: Stopwatch, machine: dict, params: dict, results: dict,
    goals: list, runs, method: str,
) -> dict:
    """The JSON document every benchmark writes (report.py reads these keys)."""
    return {
        "benchmark": name,
        "schema": SCHEMA_VERSION,
        "mode": "quick" if quick else "full",
        "backend": backend,
        **watch.finish(),
        "machine": machine,
        "params": params,
        "results": results,
        "goals": goals,
        "runs": runs,
        "method": method.strip(),
    }


def goal(
    name: str, value: float | None, target: float, op: str, unit: str = "", note: str = "", binding: bool = True
) -> dict:
    """A goal of the issue and whether the measured value meets it (``binding=False``: shown for reference)."""
    met = None
    if value is not None and value == value:  # not NaN
        met = value >= target if op == ">=" else value <= target
    return {
        "name": name, "value": rounded(value, 3), "target": target, "op": op, "unit": unit, "met": met,
        "note": note, "binding": binding,
    }


def write_result(out_dir: Path, name: str, doc: dict) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(rounded(doc), indent=2, sort_keys=False, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


class Stopwatch:
    """Wall time of a benchmark, with load averages at the start and the end."""

    def __init__(self):
        self.started = time.time()
        self.load_before = load_average()

    def finish(self) -> dict:
        return {
            "started_at": round(self.started, 1),
            "duration_seconds": round(time.time() - self.started, 1),
            "load_before": self.load_before,
            "load_after": load_average(),
        }



def standalone_main(prog: str, name: str, doc: str, run, argv: list[str] | None = None) -> int:
    """``python -m bench.<name>``: one benchmark's run outside ``bench.run`` (``--quick``, ``--seconds``,
    ``--reps``, ``--out``), its result written like bench.run's and its goals logged."""
    import argparse
    import logging

    p = argparse.ArgumentParser(prog=prog, description=doc.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="2 s per step (default 10 s)")
    p.add_argument("--seconds", type=float, help="seconds per step")
    p.add_argument("--reps", type=int, default=1, help="passes over every step (default 1)")
    p.add_argument("--out", type=Path, default=REPO_ROOT / "bench" / "results")
    args = p.parse_args(argv)
    logging.getLogger("cassandra").setLevel(logging.ERROR)
    ensure_cassandra()
    result = run(quick=args.quick, reps=max(1, min(args.reps, 10)), seconds=args.seconds)
    log(f"{name}: -> {write_result(args.out, name, result)}")
    for g in result.get("goals", []):
        log(f"  goal {g['name']}: {g['value']} (target {g['op']} {g['target']}) {'met' if g['met'] else 'MISSED'}")
    return 0
