"""Two revisions of the code side by side: did a change make the engine slower?

    .venv/bin/python -m bench.tools.revisions BASE [HEAD] [--transactions N] [--reps N] [--backend sqlite,cassandra]

Each revision is checked out into a temporary git worktree (HEAD defaults to the working tree itself) and
driven through its own command line (``python -m airflow_atlas.cli``, with ``PYTHONPATH`` set to that
worktree, so the code under test is exactly the revision's): ``init``, a ``workload`` of N transactions
(timed), then an unthrottled ``sweep`` of every pair (timed). The two revisions alternate within every
repetition (the order rotates), on fresh stores of their own, so machine load affects both alike; the
report is the median of each phase and the ratio HEAD/BASE (below 1 = HEAD faster), in wall seconds and
in CPU seconds of the command's own process (``*_cpu``: what the code under test costs the client; far
less sensitive to other load on a shared machine than wall time, and the figure to trust there). Process
start-up (imports) is part of each timing, as it is for a user of the CLI.

Nothing here asserts: the result is printed and written to ``bench/results/revisions/<base>..<head>.json``
with the machine it ran on.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from bench.lib.log import log
from bench.lib.machine import load_average, machine_info
from bench.lib.node import ensure_cassandra
from bench.lib.paths import REPO_ROOT, RESULTS_DIR
from bench.lib.results import rounded
from bench.lib.stats import median, rotated
from bench.lib.stores import cassandra_url, drop_store, open_store

PHASES = ("workload", "sweep", "workload_cpu", "sweep_cpu")
WORKTREE = "WORKTREE"


def _rev(ref: str) -> str:
    if ref == WORKTREE:
        return WORKTREE
    return subprocess.run(["git", "rev-parse", "--short", ref], cwd=REPO_ROOT, check=True,
                          capture_output=True, text=True).stdout.strip()


def _checkout(rev: str, tmp: Path) -> Path:
    if rev == WORKTREE:
        return REPO_ROOT
    path = tmp / rev
    subprocess.run(["git", "worktree", "add", "--detach", "-q", str(path), rev], cwd=REPO_ROOT, check=True)
    return path


def _cpu_of_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _cli(tree: Path, url: str, *args: str) -> tuple[float, float, str]:
    """Wall seconds, CPU seconds of the command's process (user + system: what the code under test costs
    the client machine, much less sensitive than wall time to other load on it), its stdout."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    env.pop("ATLAS_STORE_URL", None)
    cpu = _cpu_of_children()
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "airflow_atlas.cli", "--store", url, *args], cwd=tree, env=env,
                          capture_output=True, text=True, timeout=1800)
    elapsed = time.monotonic() - started
    if proc.returncode != 0:
        raise RuntimeError(f"{tree}: atlas-sweep {' '.join(args)} exited {proc.returncode}: {proc.stderr[-2000:]}")
    return elapsed, _cpu_of_children() - cpu, proc.stdout


def _store_url(backend: str, tmp: Path) -> str:
    name = f"bench_rev_{uuid.uuid4().hex[:10]}"
    if backend == "sqlite":
        return f"sqlite:///{tmp / (name + '.db')}"
    return cassandra_url(name)


def _drop(backend: str, url: str) -> None:
    if backend == "cassandra":
        drop_store(open_store(url))


def _one(tree: Path, backend: str, tmp: Path, transactions: int) -> dict[str, float]:
    url = _store_url(backend, tmp)
    settings = ["--set", "unreadable_window_seconds=0"]
    try:
        _cli(tree, url, "init")
        workload, workload_cpu, _ = _cli(tree, url, *settings, "workload", "--transactions", str(transactions), "--open-transactions",
                           "0", "--no-progress", "--seed", "7")
        sweep, sweep_cpu, out = _cli(tree, url, "--json", *settings, "sweep", "--max-entries-per-second", "0", "--no-progress")
        totals = json.loads(out).get("totals", {})
        # The same work on both sides (same seed): entries read and cells tombstoned are recorded to show it.
        return {"workload": workload, "sweep": sweep, "workload_cpu": workload_cpu, "sweep_cpu": sweep_cpu,
                "entries_read": totals.get("entries_read", -1),
                "cells_tombstoned": totals.get("cells_tombstoned", -1)}
    finally:
        _drop(backend, url)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.tools.revisions", description=__doc__.split("\n\n")[0])
    p.add_argument("base", help="git revision to compare against")
    p.add_argument("head", nargs="?", default=WORKTREE, help="git revision (default: the working tree)")
    p.add_argument("--transactions", type=int, default=2000)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--backend", default="sqlite,cassandra", help="comma list of sqlite, cassandra")
    args = p.parse_args(argv)
    if args.reps < 3:
        p.error("--reps must be at least 3 (every figure is a median)")
    backends = [b.strip() for b in args.backend.split(",") if b.strip()]
    unknown = sorted(set(backends) - {"sqlite", "cassandra"})
    if unknown:
        p.error(f"unknown backend(s): {', '.join(unknown)}")
    if "cassandra" in backends:
        ensure_cassandra()
    revs = {"base": _rev(args.base), "head": _rev(args.head)}
    load_before = load_average()
    runs: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="atlas-revisions-") as tmpdir:
        tmp = Path(tmpdir)
        trees = {side: _checkout(rev, tmp) for side, rev in revs.items()}
        try:
            for rep in range(args.reps):
                for backend in backends:
                    for side in rotated(["base", "head"], rep):
                        timing = _one(trees[side], backend, tmp, args.transactions)
                        runs.append({"rep": rep, "backend": backend, "side": side, **timing})
                        log(f"rep {rep} {backend} {side} ({revs[side]}): {timing}")
        finally:
            for tree in trees.values():
                if tree != REPO_ROOT:
                    subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=REPO_ROOT, check=False)
    results: dict[str, dict] = {}
    for backend in backends:
        for phase in PHASES:
            medians = {side: median(r[phase] for r in runs if r["backend"] == backend and r["side"] == side)
                       for side in revs}
            results[f"{backend}/{phase}"] = {
                "base_seconds": rounded(medians["base"]), "head_seconds": rounded(medians["head"]),
                "ratio_head_to_base": rounded(medians["head"] / medians["base"]),
            }
    doc = {
        "benchmark": "revisions", "revisions": revs, "transactions": args.transactions, "reps": args.reps,
        "machine": machine_info(), "load_before": load_before, "load_after": load_average(),
        "results": results, "runs": runs, "method": __doc__,
    }
    out = RESULTS_DIR / "revisions"
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{revs['base']}..{revs['head']}.json"
    path.write_text(json.dumps(doc, indent=2) + "\n")
    for key, r in results.items():
        print(f"{key:22} base {r['base_seconds']:8.2f} s  head {r['head_seconds']:8.2f} s  head/base {r['ratio_head_to_base']:.3f}")
    print(f"written: {path.relative_to(REPO_ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
