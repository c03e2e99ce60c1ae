"""``atlas-sweep verify``: the engine's :func:`airflow_atlas.verify.run_verify`, printed or as JSON."""
from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from ..serialisation import to_json
from .output import EXIT_FAILED, EXIT_OK, PROG, emit_json, wants_json

if TYPE_CHECKING:
    from .store import StoreHandle


def cmd_verify(args: argparse.Namespace, h: StoreHandle) -> int:
    from ..verify import run_verify

    report = run_verify(h.store, max_examples=args.max_examples)
    if wants_json(args):
        emit_json(to_json(report))
    else:
        print(f"transactions schema version {report.transactions_schema_version}; limits {report.limits}")
        for name, c in report.checks.items():
            status = "ok  " if c.ok and not c.count else ("warn" if c.ok else "FAIL")
            print(f"{status} {name}: {c.count} problem(s)")
            for f in (f for f in report.findings if f.check == name):
                print(f"     {f.kind}: {f.detail}")
                print(f"       what to do: {f.action}")
    if not report.ok:
        failed = [f"{c.count} {name.replace('_', ' ')}" for name, c in report.checks.items() if not c.ok]
        first = next((f.detail for f in report.findings if f.severity == "violation"), "")
        print(f"{PROG}: error: verification failed: {'; '.join(failed)} (first: {first})", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK
