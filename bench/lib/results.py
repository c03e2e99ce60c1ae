"""The result document every benchmark writes (``<out>/<name>.json``; :mod:`bench.report` reads its keys): the
run's wall time and load averages, the machine, the parameters, results, goals (met / missed, never asserted)
and runs."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

from .machine import load_average

SCHEMA_VERSION = 1


def rounded(value, digits: int = 4):
    if isinstance(value, float):
        return round(value, digits)
    if isinstance(value, dict):
        return {k: rounded(v, digits) for k, v in value.items()}
    if isinstance(value, list):
        return [rounded(v, digits) for v in value]
    return value


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
