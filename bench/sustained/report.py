"""The RESULTS.md section of ``sustained``: per store and ingest rate, the lag and whether the backlog stayed
bounded."""
from __future__ import annotations


def report_lines(doc: dict) -> list[str]:
    """The section of RESULTS.md (:mod:`bench.report`)."""
    lines = ["## sustained: sweep lag under steady ingest (scheduled every minute)", "",
             "| store | ingest (entries/s) | lag p50 (s) | lag p99 (s) | lag max (s) | backlog bounded | DAG runs |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    note = " (workload-limited: below 90% of its target)"
    for backend, r in doc["results"].items():
        runs = r.get("dag_runs", {})
        for step in r["steps"]:
            lag = step["lag_seconds"]
            rate = f"{step['achieved_entries_per_second']:g}" + (note if step.get("workload_limited") else "")
            lines.append(f"| {backend} | {rate} | {lag['p50']} | {lag['p99']} | "
                         f"{lag['max']} | {step['backlog']['bounded']} | {runs.get('states')} |")
    stops = [f"{backend}: {r['stopped']}" for backend, r in doc["results"].items() if r.get("stopped")]
    if stops:
        lines += ["", "The rates stopped rising (unbounded: the sweep's limit; workload_saturated: the machine "
                  "committed no faster than the step before): " + "; ".join(stops) + "."]
    return lines + [""]
