"""The figures of ``bench.spark_scaleout`` from its runs (fixed costs, per-entry times, fits, crossovers)."""
from __future__ import annotations

from bench.lib.stats import median

SHARDS = 16
"""Shards of the benchmark's store (16 CONSERVATIVE pairs, in two Spark tasks per core)."""


def _fit(points: list[tuple[float, float]]) -> tuple[float, float]:
    """Least-squares line y = a + b x."""
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    b = sum((x - mx) * (y - my) for x, y in points) / sxx if sxx else 0.0
    return my - b * mx, b


FIXED_COST_TASKS = [("local[2]", 0), ("in-task", 0), ("connect local[2]", 0), ("deferred local[2]", 0)]
"""``fixed_cost_only``: the B = 0 runs of the four paths, side by side (one Connect server, local[2])."""


def _fixed_costs(runs: list[dict]) -> dict:
    """Per path, the median over repetitions of (path - in-task) at B = 0, in wall and in CPU seconds."""
    by_rep: dict = {}
    for r in runs:
        if r["backlog"] == 0:
            by_rep.setdefault(r["rep"], {})[r["variant"]] = r
    out = {}
    for key, variant in (("fixed_cost", "local[2]"), ("connect_fixed_cost", "connect local[2]"),
                         ("deferred_fixed_cost", "deferred local[2]")):
        pairs = [(d[variant], d["in-task"]) for d in by_rep.values() if variant in d and "in-task" in d]
        out[f"{key}_seconds"] = median(a["seconds"] - b["seconds"] for a, b in pairs) if pairs else None
        out[f"{key}_cpu_seconds"] = median(a["cpu_seconds"] - b["cpu_seconds"] for a, b in pairs
                                             if "cpu_seconds" in a and "cpu_seconds" in b) if pairs and variant != "local[2]" else None
    return out


def summarize_fixed(runs: list[dict]) -> dict:
    def med(variant, key="seconds"):
        return median(r[key] for r in runs if r["variant"] == variant and key in r)

    return {
        **_fixed_costs(runs),
        "seconds": {v: med(v) for v, _ in FIXED_COST_TASKS},
        "cpu_seconds": {v: med(v, "cpu_seconds") for v, _ in FIXED_COST_TASKS if v != "local[2]"},
        "deferred_parts_seconds": {k: med("deferred local[2]", k) for k in ("task_before_seconds", "trigger_seconds", "task_after_seconds")},
        "checks_ok": all(r["check"] for r in runs),
    }


def summarize(runs: list[dict], backlogs: list[int], reps: int) -> dict:
    def med(variant, b, key="seconds"):
        return median(r[key] for r in runs if r["variant"] == variant and r["backlog"] == b)

    top = backlogs[-1]
    by_rep = {}
    for r in runs:
        by_rep.setdefault(r["rep"], {})[(r["variant"], r["backlog"])] = r
    scale_wall = [d[("local[1]", top)]["seconds"] / d[("local[2]", top)]["seconds"] for d in by_rep.values()]
    scale_job = [d[("local[1]", top)]["job_seconds"] / d[("local[2]", top)]["job_seconds"] for d in by_rep.values()]
    fixed = [d[("local[2]", 0)]["seconds"] - d[("in-task", 0)]["seconds"] for d in by_rep.values() if ("local[2]", 0) in d]
    fixed_ratio = [d[("local[2]", 0)]["seconds"] / d[("in-task", 0)]["seconds"] for d in by_rep.values() if ("local[2]", 0) in d]
    connect_fixed = [d[("connect local[2]", 0)]["seconds"] - d[("in-task", 0)]["seconds"] for d in by_rep.values()]
    connect_over_submit = [
        (d[("connect local[2]", 0)]["seconds"] - d[("in-task", 0)]["seconds"])
        / (d[("local[2]", 0)]["seconds"] - d[("in-task", 0)]["seconds"])
        for d in by_rep.values()
    ]

    def per_entry(variant):
        return median((d[(variant, top)]["seconds"] - d[(variant, 0)]["seconds"]) / top for d in by_rep.values()) if top else None

    def per_entry_ratio(variant):
        return median(
            (d[(variant, top)]["seconds"] - d[(variant, 0)]["seconds"]) / (d[("in-task", top)]["seconds"] - d[("in-task", 0)]["seconds"])
            for d in by_rep.values()
        ) if top else None
    table = {
        str(b): {
            "in_task_seconds": med("in-task", b),
            "spark_local2_seconds": med("local[2]", b),
            "connect_local2_seconds": med("connect local[2]", b),
            "deferred_local2_seconds": med("deferred local[2]", b),
            "in_task_cpu_seconds": med("in-task", b, "cpu_seconds"),
            "connect_local2_cpu_seconds": med("connect local[2]", b, "cpu_seconds"),
            "deferred_local2_cpu_seconds": med("deferred local[2]", b, "cpu_seconds"),
            "deferred_local2_trigger_seconds": med("deferred local[2]", b, "trigger_seconds"),
            **({"spark_local1_seconds": med("local[1]", b), "connect_local1_seconds": med("connect local[1]", b)}
               if b in (0, top) else {}),
        }
        for b in backlogs
    }
    a_in, b_in = _fit([(b, med("in-task", b)) for b in backlogs])
    a_sp, b_sp = _fit([(b, med("local[2]", b)) for b in backlogs])
    a_cn, b_cn = _fit([(b, med("connect local[2]", b)) for b in backlogs])
    crossover = (a_sp - a_in) / (b_in - b_sp) if b_in > b_sp else None
    crossover_connect = (a_cn - a_in) / (b_in - b_cn) if b_in > b_cn else None
    connect_fixed_cost = median(connect_fixed)
    model_connect = 2 * connect_fixed_cost / b_in if b_in > 0 and connect_fixed_cost > 0 else None
    fixed_cost = median(fixed)
    # Where Spark would overtake in-task mode if local[2] halved the per-entry time (executors with cores
    # of their own): fixed cost / (per-entry time saved) = 2 F / b_in. A model, not a measurement.
    model = 2 * fixed_cost / b_in if b_in > 0 and fixed_cost > 0 else None
    return {
        "scaleout_wall": median(scale_wall),
        "scaleout_job": median(scale_job),
        "fixed_cost_seconds": fixed_cost,
        "fixed_cost_ratio_spark_over_in_task": median(fixed_ratio),
        **_fixed_costs(runs),
        "connect_fixed_cost_seconds": connect_fixed_cost,
        "fixed_cost_ratio_connect_over_submit": median(connect_over_submit),
        "seconds_per_entry": {"in_task": per_entry("in-task"), "submit_local1": per_entry("local[1]"),
                              "connect_local1": per_entry("connect local[1]"), "connect_local2": per_entry("connect local[2]")},
        "per_entry_ratio_connect_local1": per_entry_ratio("connect local[1]"),
        "per_entry_ratio_submit_local1": per_entry_ratio("local[1]"),
        "seconds_by_backlog": table,
        "fit": {
            "in_task": {"intercept_s": a_in, "seconds_per_entry": b_in},
            "spark_local2": {"intercept_s": a_sp, "seconds_per_entry": b_sp},
            "connect_local2": {"intercept_s": a_cn, "seconds_per_entry": b_cn},
        },
        "crossover_connect_entries": round(crossover_connect) if crossover_connect is not None else None,
        "crossover_connect_if_2x_scaleout_entries": round(model_connect) if model_connect is not None else None,
        "crossover_entries": round(crossover) if crossover is not None else None,
        "crossover_entries_per_shard": round(crossover / SHARDS) if crossover is not None else None,
        "crossover_extrapolated": crossover is not None and crossover > top,
        "crossover_note": None if crossover is not None else "Spark local[2] never overtakes in-task mode on this machine",
        "crossover_if_2x_scaleout_entries": round(model) if model is not None else None,
        "in_task_entries_per_second": 1 / b_in if b_in > 0 else None,
        "checks_ok": all(r["check"] and r.get("ok", True) is not False for r in runs),
        "repetitions": reps,
    }


