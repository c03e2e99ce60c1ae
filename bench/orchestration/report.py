"""The RESULTS.md section of ``orchestration``: per shard count, scenario and group size, a run's task instances,
wall and engine time, overhead per pair and metadata growth."""
from __future__ import annotations


def report_lines(doc: dict) -> list[str]:
    """The section of RESULTS.md (:mod:`bench.report`)."""
    lines = [f"## orchestration: a targeted-sweep run's Airflow cost by shard count ({doc['mode']} mode, "
             f"{doc['params']['slots']} slots)", "",
             "| shards | scenario | groups | pairs | task instances | wall (s) | engine (s) | overhead/pair (s) | "
             "metadata rows/run | metadata rows/day | logs/day (MB) | states |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]

    def mb(v):
        return "-" if v is None else f"{v / 1e6:.1f}"

    def count(v):
        return "-" if v is None else f"{v:,.0f}"

    for r in doc["results"].values():
        lines.append(f"| {r['shards']} | {r['scenario']} | {r['variant']} | {r['pairs']} | {r['task_instances']} | "
                     f"{r['wall_seconds']} | {r['engine_seconds']} | {r['overhead_per_pair_seconds']} | "
                     f"{count(r.get('metadata_rows'))} | {count(r.get('metadata_rows_per_day'))} | "
                     f"{mb(r['log_bytes_per_day'])} | {', '.join(r['states'])} |")
    return lines + [""]
