"""The local Cassandra node the benchmarks measure: started when it does not answer, found among the processes,
its JIT and Paxos variant, and the waits for it to be quiet between two timed variants."""
from __future__ import annotations

import os
import subprocess
import time

from .log import log
from .paths import CASSANDRA_SCRIPT


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
    elif node_jit(local_node_cmdline()) == "c1":
        log(
            "warning: the local node runs the test profile (C1 JIT only): Cassandra costs more CPU per request "
            "than in production. For production-like figures: scripts/cassandra.sh stop && "
            "ATLAS_CASSANDRA_JIT=full scripts/cassandra.sh start"
        )


def cassandra_process():
    """The local Cassandra node's process (psutil), or None when none runs on this machine."""
    import psutil

    for p in psutil.process_iter(["cmdline"]):
        if any("CassandraDaemon" in c for c in (p.info.get("cmdline") or [])):
            return p
    return None


def local_node_cmdline() -> list[str]:
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


def paxos_variant(session) -> str | None:
    """The node's ``paxos_variant`` (v1 or v2): what the timestamp draws' contention depends on
    (bench/ANALYSIS.md "Paxos v2")."""
    row = session.execute("SELECT value FROM system_views.settings WHERE name = 'paxos_variant'").one()
    return row[0] if row else None


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
