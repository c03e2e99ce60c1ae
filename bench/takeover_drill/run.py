"""Issue 45, "High availability": the takeover drill, many times over, with the takeover times' distribution.

    .venv/bin/python -m bench.takeover_drill --takeovers 100      # writes bench/results/takeover_drill.json

What is done: two real ``atlas-sweep timestamps serve`` instances on free loopback ports serve a keyspace of
the local node made for the run (dropped at the end); three client processes (multiprocessing 'spawn') of four
threads each draw continuously through ``AtlasStore.timestamps``. ``--takeovers`` faults are injected in turn:
``leader_kill`` (kill -9 of the leader, restarted on its address), ``leader_pause`` (SIGSTOP of the leader until
draws succeed again, then SIGCONT; the resumed instance is asked directly and must refuse) and ``client_pause``
(a client process SIGSTOPped across a leader_pause takeover, SIGCONTed after the old leader resumed). The
machinery is tests/integration/timestamps/draw_client.py, the same as the test's.

What is measured: a takeover's time is from the fault (just before the signal) until every running client
process completed a draw it started after the fault (the slowest client; polled every 10 ms, so up to ~10 ms
late). Afterwards every draw (start and end on ``time.monotonic_ns``, one clock for the machine's processes)
is checked by tests/integration/timestamps/order_checker.py: no value twice, and real-time order across
processes. The goal: every takeover within 5 s of its fault, no violation. Everything shares this machine's
cores with the Cassandra node (unconfined).
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from bench.lib.log import log
from bench.lib.machine import machine_info
from bench.lib.node import ensure_cassandra
from bench.lib.paths import RESULTS_DIR
from bench.lib.results import Stopwatch, goal, result_document, write_result

NAME = "takeover_drill"
KINDS = ("leader_kill", "leader_pause", "client_pause")
GOAL_SECONDS = 5.0
SECONDS_PER_FAULT = 12.0
"""A generous bound on one fault's wall time (the clients' own deadline is derived from it)."""


def percentile(values: list[float], q: float) -> float | None:
    """The ``q`` quantile (0..1), nearest rank; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(round(q * len(ordered) + 0.5)) - 1))]


def distribution(values: list[float | None]) -> dict:
    measured = [v for v in values if v is not None]
    return {
        "count": len(values),
        "not_recovered": len(values) - len(measured),
        "p50_seconds": statistics.median(measured) if measured else None,
        "p99_seconds": percentile(measured, 0.99),
        "max_seconds": max(measured) if measured else None,
        "min_seconds": min(measured) if measured else None,
    }


def run(takeovers: int, work: Path, clients: int, threads: int) -> dict:
    """The drill on a keyspace of its own; returns the results section of the JSON."""
    from cassandra.cluster import Cluster

    from airflow_atlas.config import StoreConfig
    from airflow_atlas.store import AtlasStore
    from devkit.airflow import free_port
    from devkit.timestamps import running_servers
    from tests.integration.timestamps.draw_client import TakeoverDrill
    from tests.integration.timestamps.order_checker import check_history

    keyspace = f"bench_takeover_{uuid.uuid4().hex[:8]}"
    cluster = Cluster(["127.0.0.1"], port=9042, protocol_version=5)
    session = cluster.connect()
    session.execute(f"CREATE KEYSPACE {keyspace} WITH replication = "
                    "{'class': 'SimpleStrategy', 'replication_factor': 1}", timeout=120)
    url = f"cassandra://127.0.0.1:9042/{keyspace}?replication_factor=1"
    addresses = [f"127.0.0.1:{free_port()}" for _ in range(2)]
    store = AtlasStore.open(url, StoreConfig(timestamp_servers=tuple(addresses)))
    started = time.monotonic()
    try:
        with running_servers(url, addresses, work / "logs") as servers:
            with TakeoverDrill(url, keyspace, servers, store.kvs, work / "draws", clients=clients,
                               threads=threads, max_seconds=60 + SECONDS_PER_FAULT * takeovers) as drill:
                for i in range(takeovers):
                    kind = KINDS[i % len(KINDS)]
                    if kind == "leader_kill":
                        fault = drill.leader_kill()
                    elif kind == "leader_pause":
                        fault = drill.leader_pause()
                    else:
                        fault = drill.client_pause((i // len(KINDS)) % clients)
                    log(f"{NAME}: {i + 1}/{takeovers} {fault.kind} of {fault.leader}: "
                          f"{fault.takeover_seconds if fault.takeover_seconds is None else round(fault.takeover_seconds, 3)}s"
                          f" (epoch {fault.epoch_before} -> {fault.epoch_after}; {drill.draws_so_far()} draws)")
            drill_seconds = time.monotonic() - started
        history = drill.history()
        log(f"{NAME}: checking {len(history)} draws")
        checked = check_history(history)
    finally:
        store.close()
        try:
            session.execute(f"DROP KEYSPACE IF EXISTS {keyspace}", timeout=180)
        except Exception as exc:  # the measurements must not be lost to a slow drop
            log(f"{NAME}: could not drop {keyspace}: {exc}")
        cluster.shutdown()

    by_kind = {kind: distribution([f.takeover_seconds for f in drill.faults if f.kind == kind]) for kind in KINDS}
    every = [f.takeover_seconds for f in drill.faults]
    paused_back = [f.notes.get("paused_client_recovery_seconds") for f in drill.faults if f.kind == "client_pause"]
    slow = [vars(f) for f in drill.faults if f.takeover_seconds is None or f.takeover_seconds > GOAL_SECONDS]
    no_takeover = [vars(f) for f in drill.faults if f.epoch_after <= f.epoch_before]
    return {
        "takeovers": len(drill.faults),
        "takeover_seconds": {"all": distribution(every), **by_kind},
        "paused_client_recovery": distribution(paused_back),
        "draws_checked": checked.draws,
        "violations": checked.violation_count,
        "first_violations": [str(v) for v in checked.violations],
        "failed_draws": drill.errors(),
        "client_reports": drill.client_reports(),
        "resumed_leader_probes": len(drill.probe_answers),
        "resumed_leader_answered": len(drill.probes),
        "resumed_leader_answers": sorted(set(drill.probe_answers)),
        "faults_over_goal": slow,
        "faults_without_takeover": no_takeover,
        "drill_seconds": drill_seconds,
        "draws_per_second": checked.draws / drill_seconds if drill_seconds else None,
        "faults": [vars(f) for f in drill.faults],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.takeover_drill", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--takeovers", type=int, default=100, help="faults to inject, the three kinds in turn")
    parser.add_argument("--clients", type=int, default=3, help="client processes")
    parser.add_argument("--threads", type=int, default=4, help="drawing threads per client process")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    args = parser.parse_args(argv)
    if not 1 <= args.takeovers <= 10_000:
        parser.error("--takeovers must be 1..10000")
    ensure_cassandra()
    watch = Stopwatch()
    with tempfile.TemporaryDirectory(prefix="takeover-drill-") as tmp:
        results = run(args.takeovers, Path(tmp), args.clients, args.threads)
    every = results["takeover_seconds"]["all"]
    machine = {**machine_info(), "nproc": os.cpu_count()}
    doc = result_document(
        NAME, quick=args.takeovers < 100, backend="cassandra", watch=watch, machine=machine,
        params={"takeovers": args.takeovers, "clients": args.clients, "threads_per_client": args.threads,
                "lease_seconds": 2.0, "instances": 2, "kinds": list(KINDS)},
        results=results,
        goals=[
            goal("slowest takeover", every["max_seconds"], GOAL_SECONDS, "<=", "s"),
            goal("order violations", results["violations"], 0, "<="),
            goal("answers of a resumed old leader", results["resumed_leader_answered"], 0, "<="),
        ],
        runs=None, method=__doc__ or "",
    )
    path = write_result(args.out, NAME, doc)
    print(f"takeover drill: {results['takeovers']} faults on {machine['nproc']} cores ({machine['cpu_model']}), "
          f"python {machine['python']}")
    for kind in ("all", *KINDS):
        d = results["takeover_seconds"][kind]
        print(f"  {kind:13s} n={d['count']:4d}  p50={_s(d['p50_seconds'])}  p99={_s(d['p99_seconds'])}  "
              f"max={_s(d['max_seconds'])}  not recovered={d['not_recovered']}")
    back = results["paused_client_recovery"]
    print(f"  paused client back after SIGCONT: p50={_s(back['p50_seconds'])} max={_s(back['max_seconds'])}")
    print(f"  draws checked: {results['draws_checked']:,}  violations: {results['violations']}  "
          f"failed draws: {results['failed_draws']}  resumed old leader answered: {results['resumed_leader_answered']}"
          f"/{results['resumed_leader_probes']} probes")
    print(f"  -> {path}")
    ok = (results["violations"] == 0 and results["resumed_leader_answered"] == 0
          and every["not_recovered"] == 0 and (every["max_seconds"] or 0) <= GOAL_SECONDS)
    return 0 if ok else 1


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}s"
