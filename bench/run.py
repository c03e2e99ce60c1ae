"""Run the airflow-atlas benchmarks and write their results.

    .venv/bin/python -m bench.run                 # full mode (about an hour on 2 cores), into bench/results/
    .venv/bin/python -m bench.run --quick         # small sizes (a few minutes), into bench/results/quick/
    .venv/bin/python -m bench.run --only delete_rate,memory [--reps 5] [--out DIR]
    .venv/bin/python -m bench.run --only foreground_impact --placement confined   # one placement (half the time)
    .venv/bin/python -m bench.run --report-only   # rebuild RESULTS.md and the chart from the JSON files

Benchmarks: targeted_vs_legacy, delete_rate, commit_overhead, spark_scaleout, memory, large_commit, foreground_impact,
sustained (also the embedded store, with a real Airflow scheduler), orchestration (embedded store, a real Airflow scheduler),
timestamps and transactions (issue 45: the timestamp server vs the cell; also ``-m bench.timestamps`` / ``-m bench.transactions``) (Cassandra: the local node, started with scripts/cassandra.sh when it does not answer) and embedded (SQLite). Each writes
``<out>/<name>.json``; after every benchmark ``<out>/RESULTS.md`` and ``<out>/chart.png`` are rebuilt from
all JSON files in ``<out>`` (so ``--only`` refreshes one benchmark and keeps the others).

Benchmarks never assert timings; the goals of issue 7 are evaluated and reported (met / missed).
"""
from __future__ import annotations

import argparse
import logging
import sys
import time
import traceback
from pathlib import Path

from bench.foreground_impact.run import LIMITS_FULL, LIMITS_QUICK, TXN_WRITES
from bench.foreground_impact.summary import DEFAULT, NO_SWEEP, PHASES, UNTHROTTLED
from bench.lib.log import log
from bench.lib.node import ensure_cassandra
from bench.lib.paths import RESULTS_DIR
from bench.lib.placement import PLACEMENTS
from bench.lib.results import write_result

NAMED_VARIANTS = (NO_SWEEP, UNTHROTTLED, DEFAULT)
BENCHMARKS = ("targeted_vs_legacy", "delete_rate", "commit_overhead", "spark_scaleout", "memory", "embedded", "large_commit",
              "foreground_impact", "sustained", "orchestration", "timestamps", "transactions")
NEEDS_CASSANDRA = {"targeted_vs_legacy", "delete_rate", "commit_overhead", "spark_scaleout", "memory", "large_commit",
                   "foreground_impact", "sustained", "timestamps", "transactions"}
DEFAULT_OUT = RESULTS_DIR


def _module(name: str):
    """The module whose ``run`` measures benchmark ``name``: ``bench.<name>.run`` (a package per benchmark)."""
    import importlib

    return importlib.import_module(f"bench.{name}.run")


def _limits_text() -> str:
    return f"full: {', '.join(map(str, LIMITS_FULL))}; quick: {', '.join(map(str, LIMITS_QUICK))}"


def _focus(p: argparse.ArgumentParser, args: argparse.Namespace, names: list[str]) -> dict:
    """foreground_impact's focused-run options (``run``'s keyword arguments), checked; {} for a full run."""
    given = [flag for flag, value in (("--phase", args.phase), ("--variant", args.variant),
                                      ("--backlog-writes", args.backlog_writes),
                                      ("--baseline-after-load", args.baseline_after_load or None),
                                      ("--batch-limit", args.batch_limit),
                                      ("--sweep-tasks", args.sweep_tasks)) if value is not None]
    if not given:
        return {}
    if names != ["foreground_impact"]:
        p.error(f"{', '.join(given)} apply to foreground_impact only: use --only foreground_impact")
    if args.out is None:
        p.error(f"{', '.join(given)} make a focused run: give it --out (it must not replace the full run's results)")
    focus: dict = {}
    if args.phase:
        focus["phases"] = tuple(ph for ph in PHASES if ph in args.phase)
    if args.variant:
        limits = LIMITS_QUICK if args.quick else LIMITS_FULL
        chosen: list = []
        for v in args.variant:
            if v in NAMED_VARIANTS:
                chosen.append(v)
            elif v.isdigit() and int(v) in limits:
                chosen.append(int(v))
            else:
                p.error(f"--variant {v!r}: expected one of {', '.join(NAMED_VARIANTS)} or a fixed limit of the "
                        f"{'quick' if args.quick else 'full'} mode ({', '.join(map(str, limits))})")
        focus["only_variants"] = tuple(chosen)
    if args.backlog_writes is not None:
        if args.backlog_writes < 1:
            p.error(f"--backlog-writes must be at least 1, got {args.backlog_writes}")
        focus["backlog_writes"] = args.backlog_writes
    if args.baseline_after_load:
        focus["baseline_after_load"] = True
    if args.batch_limit is not None:
        if args.batch_limit < 1:
            p.error(f"--batch-limit must be at least 1, got {args.batch_limit}")
        focus["batch_limit"] = args.batch_limit
    if args.sweep_tasks is not None:
        if args.sweep_tasks < 1:
            p.error(f"--sweep-tasks must be at least 1, got {args.sweep_tasks}")
        focus["sweep_tasks"] = args.sweep_tasks
    return focus


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="small sizes (smoke run); results go to <out>/quick by default")
    p.add_argument("--only", action="append", default=[], help=f"comma list of: {', '.join(BENCHMARKS)}")
    p.add_argument("--reps", type=int, default=3, help="repetitions per measurement (>= 3; medians are reported)")
    p.add_argument("--out", type=Path, help=f"output directory (default {DEFAULT_OUT}, or its quick/ subdirectory)")
    p.add_argument("--report-only", action="store_true", help="only rebuild RESULTS.md and chart.png")
    p.add_argument("--keep-going", action="store_true", help="continue with the next benchmark when one fails")
    p.add_argument("--placement", choices=PLACEMENTS, action="append",
                   help="foreground_impact only: measure this placement of the sweep process (repeatable; default all, "
                        "the goals are judged on confined)")
    p.add_argument("--phase", choices=PHASES, action="append",
                   help="foreground_impact only, a focused run (needs --out): measure this load phase (repeatable)")
    p.add_argument("--variant", action="append",
                   help=f"foreground_impact only, a focused run (needs --out): measure this variant (repeatable): "
                        f"{', '.join(NAMED_VARIANTS)} (the application pace, as shipped) or a fixed limit of the "
                        f"mode ({_limits_text()})")
    p.add_argument("--backlog-writes", type=int,
                   help=f"foreground_impact only, a focused run (needs --out): writes per backlog transaction "
                        f"(default {TXN_WRITES}; a sweep batch never splits one)")
    p.add_argument("--baseline-after-load", action="store_true",
                   help="foreground_impact only, a focused run (needs --out): each no-sweep window follows a load "
                        "too (into a keyspace of its own), as each sweep window follows its backlog's top-up")
    p.add_argument("--batch-limit", type=int,
                   help="foreground_impact only, a focused run (needs --out): the sweep windows' batch limit "
                        "(sweep_shard(batch_limit=N): a paced batch holds at most N entries)")
    p.add_argument("--sweep-tasks", type=int,
                   help="foreground_impact only, a focused run (needs --out): pairs swept at once in each sweep window, "
                        "each by a process of its own at the variant's pace, as the DAG's sweep tasks run side by side "
                        "(default 1)")
    args = p.parse_args(argv)
    names = [n.strip() for item in args.only for n in item.split(",") if n.strip()]
    unknown = sorted(set(names) - set(BENCHMARKS))
    if unknown:
        p.error(f"unknown benchmark(s): {', '.join(unknown)}; choose from {', '.join(BENCHMARKS)}")
    if args.placement and "foreground_impact" not in names:
        p.error("--placement applies to foreground_impact only: add --only foreground_impact")
    args.focus = _focus(p, args, names)
    if args.reps < 3:
        p.error("--reps must be at least 3 (every figure is a median of at least three repetitions)")
    args.names = [n for n in BENCHMARKS if n in names] if names else list(BENCHMARKS)
    if args.out is None:
        args.out = DEFAULT_OUT / "quick" if args.quick else DEFAULT_OUT
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("cassandra").setLevel(logging.ERROR)
    from .report import write_report

    if args.report_only:
        write_report(args.out)
        return 0
    if NEEDS_CASSANDRA & set(args.names):
        ensure_cassandra()
    failed = []
    for name in args.names:
        log(f"=== {name} ({'quick' if args.quick else 'full'}, {args.reps} repetitions) -> {args.out}")
        started = time.time()
        try:
            options = {}
            if name == "foreground_impact":
                options = {**({"placements": tuple(args.placement)} if args.placement else {}), **args.focus}
            doc = _module(name).run(quick=args.quick, reps=args.reps, **options)
        except Exception:
            failed.append(name)
            log(f"{name} FAILED:\n{traceback.format_exc()}")
            if not args.keep_going:
                break
            continue
        path = write_result(args.out, name, doc)
        log(f"{name}: done in {time.time() - started:.0f}s -> {path}")
        for g in doc.get("goals", []):
            state = "n/a" if g["met"] is None else ("met" if g["met"] else "MISSED")
            log(f"  goal {g['name']}: {g['value']} (target {g['op']} {g['target']}) {state}")
        write_report(args.out)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
