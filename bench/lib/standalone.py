"""``python -m bench.<name>`` for the benchmarks that run outside ``bench.run`` too (timestamps, transactions)."""
from __future__ import annotations

from pathlib import Path

from .log import log
from .node import ensure_cassandra
from .paths import RESULTS_DIR
from .results import write_result


def standalone_main(prog: str, name: str, doc: str, run, argv: list[str] | None = None) -> int:
    """``python -m bench.<name>``: one benchmark's run outside ``bench.run`` (``--quick``, ``--seconds``,
    ``--reps``, ``--out``), its result written like bench.run's and its goals logged."""
    import argparse
    import logging

    p = argparse.ArgumentParser(prog=prog, description=doc.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="2 s per step (default 10 s)")
    p.add_argument("--seconds", type=float, help="seconds per step")
    p.add_argument("--reps", type=int, default=1, help="passes over every step (default 1)")
    p.add_argument("--out", type=Path, default=RESULTS_DIR)
    args = p.parse_args(argv)
    logging.getLogger("cassandra").setLevel(logging.ERROR)
    ensure_cassandra()
    result = run(quick=args.quick, reps=max(1, min(args.reps, 10)), seconds=args.seconds)
    log(f"{name}: -> {write_result(args.out, name, result)}")
    for g in result.get("goals", []):
        log(f"  goal {g['name']}: {g['value']} (target {g['op']} {g['target']}) {'met' if g['met'] else 'MISSED'}")
    return 0
