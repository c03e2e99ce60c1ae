"""RESULTS.md and chart.png from the benchmark JSON files of one results directory.

The tables are generated; the analysis (bottlenecks, engine changes, what the goals mean on this
machine) is the hand-written ``bench/ANALYSIS.md``, appended verbatim.
"""
from __future__ import annotations

import json
import statistics
from pathlib import Path

ANALYSIS = Path(__file__).resolve().parent / "ANALYSIS.md"
ORDER = ("targeted_vs_legacy", "delete_rate", "commit_overhead", "spark_scaleout", "memory", "embedded", "large_commit",
         "foreground_impact", "sustained", "orchestration", "timestamps", "transactions", "takeover_drill")


def load(out: Path) -> dict[str, dict]:
    docs = {}
    for name in ORDER:
        path = out / f"{name}.json"
        if path.exists():
            docs[name] = json.loads(path.read_text(encoding="utf-8"))
    return docs


def _f(value, digits=2) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if abs(value) >= 100:
            return f"{value:,.0f}"
        return f"{value:.{digits}f}"
    return str(value)


def _met(g) -> str:
    if g.get("met") is None:
        return "n/a"
    if not g.get("binding", True):
        return "(ref) yes" if g["met"] else "(ref) no"
    return "**met**" if g["met"] else "**missed**"


def _load_text(doc) -> str:
    b, a = doc.get("load_before", {}), doc.get("load_after", {})
    return f"{b.get('1m')}/{b.get('5m')}/{b.get('15m')} -> {a.get('1m')}/{a.get('5m')}/{a.get('15m')}"


def summary_rows(docs: dict) -> list[list[str]]:
    rows = []
    for name, doc in docs.items():
        for g in doc.get("goals", []):
            rows.append([name, g["name"], f"{_f(g['value'])}{g.get('unit') or ''}", f"{g['op']} {g['target']}{g.get('unit') or ''}", _met(g)])
    return rows


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return out


def _tv_rows(res: dict) -> list[list[str]]:
    rows = []
    for kind in ("pct", "fixed"):
        for n, r in sorted(res.get(kind, {}).items(), key=lambda kv: int(kv[0])):
            rows.append([
                f"{int(n):,}", f"{r['k']:,} ({kind})", _f(r["targeted_seconds"], 3), _f(r["legacy_seconds"], 2),
                f"{_f(r['ratio'], 1)}x", _f(r["targeted_entries_per_second"]), _f(r["legacy_versions_per_second"]),
                _f(r["checks_ok"]),
            ])
    return rows


TV_HEADER = ["cells", "rewritten (set)", "targeted s", "legacy s", "legacy/targeted", "targeted entries/s", "legacy versions scanned/s", "same deletes"]


def _dr_rows(res: dict) -> list[list[str]]:
    rows = []
    for strategy, r in res.items():
        rows.append([
            strategy, f"{r['n']:,}", _f(r["sweep_entries_per_second"]), _f(r["raw_per_second"]), _f(r["ratio"]),
            _f(r.get("raw_batched_per_second")), _f(r.get("ratio_vs_raw_batched")), _f(r["checks_ok"]),
        ])
    return rows


DR_HEADER = ["strategy", "entries", "sweep entries/s", "raw/s (one statement each)", "sweep/raw", "raw/s (same batching)", "sweep/raw batched", "all swept"]


def _task_slowdown_line(d: dict) -> str:
    """How much slower each Spark task ran when two ran at once (sum of task times, local[2] / local[1], at
    the largest backlog): the ceiling it puts on the scale-out is 2 / that slowdown."""
    runs = d.get("runs", [])
    top = max((x["backlog"] for x in runs if x.get("variant") == "local[1]"), default=None)
    sums = {
        v: [x["task_seconds_sum"] for x in runs if x.get("variant") == v and x["backlog"] == top and x.get("task_seconds_sum")]
        for v in ("local[1]", "local[2]")
    }
    if top is None or not all(sums.values()):
        return "- per-task slowdown with two tasks at once: not measured"
    slowdown = statistics.median(sums["local[2]"]) / statistics.median(sums["local[1]"])
    return (
        f"- sum of task times at {top:,} entries: local[1] {_f(statistics.median(sums['local[1]']), 1)} s, local[2]"
        f" {_f(statistics.median(sums['local[2]']), 1)} s: each task ran {_f(slowdown)}x slower with two at once"
        f" (CPU contention), which caps the scale-out at 2 / {_f(slowdown)} = {_f(2 / slowdown)}x on this machine"
    )


def node_fact(docs: dict, key: str, missing: str) -> str:
    """One fact of the Cassandra node (``machine.cassandra[key]``) over the results that ran on a node: the value
    when they agree, else each result's own (``missing`` where a result did not record it)."""
    facts = {
        name: d["machine"]["cassandra"].get(key, missing)
        for name, d in docs.items()
        if d.get("machine", {}).get("cassandra")
    }
    if len(set(facts.values())) <= 1:
        return next(iter(facts.values()), "-")
    return ", ".join(f"{name}: {value}" for name, value in sorted(facts.items()))


def _machine_lines(docs: dict) -> list[str]:
    m = next((d["machine"] for d in docs.values() if d.get("machine", {}).get("cassandra")), None)
    m = m or next((d.get("machine") for d in docs.values() if d.get("machine")), {}) or {}
    cas = m.get("cassandra", {})
    heap = cas.get("heap_mb_max")
    jit = node_fact(docs, "jit", "c1 (not recorded)")
    paxos = node_fact(docs, "paxos_variant", "not recorded")
    return [
        f"- CPU: {m.get('cpu_model')}, {m.get('cores')} cores; memory {m.get('memory_gib')} GiB; {m.get('platform')}",
        f"- Python {m.get('python')}, cassandra-driver {m.get('cassandra_driver')}; Cassandra {cas.get('version', '-')}"
        f" (single local node on the same 2 cores, heap {_f(heap, 0) if heap else '-'} MB, JVM JIT: {jit};"
        " `full` is the JVM's normal tiered compilation, `c1` the quick-start test profile)",
        "- Cassandra's Paxos variant (the timestamp draws' check-and-set; bench/ANALYSIS.md \"Paxos v2\"): "
        + paxos
        + "; results measured before 2026-11-30 22:00 do not record it (the project's nodes run v2 since b57f329,"
        " 2026-11-30 17:00, v1 before)",
        "- Every figure is a ratio of two things measured side by side, interleaved, median of >= 3 repetitions;"
        " load averages (1m/5m/15m, before -> after) are listed per benchmark and show any other work on the"
        " machine.",
        "- Measured (UTC start, minutes): " + ", ".join(
            f"{name} {_utc(d['started_at'])} ({d.get('duration_seconds', 0) / 60:.0f})"
            for name, d in docs.items() if d.get("started_at")
        ),
    ]


def _utc(epoch: float) -> str:
    import datetime

    return datetime.datetime.fromtimestamp(epoch, datetime.UTC).strftime("%Y-%m-%d %H:%M")


def write_report(out: Path) -> Path:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    docs = load(out)
    lines = ["# airflow-atlas benchmark results", ""]
    lines += ["Generated by `.venv/bin/python -m bench.run` (see `bench/README.md`) from the JSON files in this directory.", ""]
    modes = sorted({d.get("mode") for d in docs.values()})
    lines += [f"Mode: {', '.join(str(m) for m in modes)}.", ""]
    lines += ["## Machine", ""] + _machine_lines(docs) + [""]
    lines += ["## Goals (issues 7, 15, 16 and 24)", ""]
    lines += _table(["benchmark", "figure", "measured", "goal", "status"], summary_rows(docs)) + [""]
    lines += ["![chart](chart.png)", ""]

    if "targeted_vs_legacy" in docs:
        d = docs["targeted_vs_legacy"]
        ind = d["results"]["independence"]
        lines += ["## 1. Targeted vs legacy sweep (Cassandra)", ""]
        lines += _table(TV_HEADER, _tv_rows(d["results"])) + [""]
        lines += [
            f"- targeted time, {d['params']['sizes'][-1]:,} vs {d['params']['sizes'][0]:,} cells, same"
            f" {ind['fixed_k']:,} rewrites: {_f(ind['targeted_big_over_small_fixed_k'])}x;"
            f" legacy: {_f(ind['legacy_big_over_small_fixed_k'])}x",
            f"- targeted time per swept entry, 1% rewritten, {d['params']['sizes'][-1]:,} vs"
            f" {d['params']['sizes'][0]:,} cells: {_f(ind['targeted_per_entry_big_over_small_pct'])}x",
            f"- parallelism, the same for both sides: one process, one thread each; targeted sweeps the"
            f" {d['params'].get('shards', 1)} shard(s) one after the other in-process, legacy scans the table"
            f" once; the driver's concurrency is the backend's for both",
            f"- load averages: {_load_text(d)}; {d['params']['repetitions']} repetitions; duration {d['duration_seconds']:.0f} s",
            "",
        ]
    if "delete_rate" in docs:
        d = docs["delete_rate"]
        lines += ["## 2. Sweep vs the store's delete rate (Cassandra)", ""]
        lines += _table(DR_HEADER, _dr_rows(d["results"])) + [""]
        for strategy, r in d["results"].items():
            cpu = r.get("sweep_cpu_cores") or {}
            if cpu:
                lines.append(
                    f"- {strategy} sweep, cores used (of {d['machine'].get('cores')}): Cassandra {_f(cpu.get('cassandra_cores'))},"
                    f" sweeper process {_f(cpu.get('this_process_cores'))}, whole machine {_f(cpu.get('machine_busy_cores'))}"
                )
        lines += [f"- concurrency {d['params'].get('concurrency')}; batching in the backend: {_f(d['params'].get('batching'))};"
                  f" load averages: {_load_text(d)}; {d['params']['repetitions']} repetitions", ""]
    if "commit_overhead" in docs:
        d = docs["commit_overhead"]
        lines += ["## 3. Commit overhead of the sweep queue (Cassandra)", ""]
        rows = [[k, _f(r["median_off_ms"], 1), _f(r["median_on_ms"], 1), f"{_f(r['ratio'], 3)}x"] for k, r in d["results"].items()]
        lines += _table(["writes per transaction", "queue off ms", "queue on ms", "on/off"], rows) + [""]
        if all("latency_ratio" in r for r in d["results"].values()):
            rows = [[k, _f(r["median_on_ms"], 1), _f(r["median_latency_ms"], 1), f"{_f(r['latency_ratio'], 3)}x",
                     "[{}, {}]".format(*(_f(x, 3) for x in r["latency_ratio_ci90"])), r["latency_transactions"]]
                    for k, r in d["results"].items()]
            lines += ["Application latency recorded and published (issue 31; goal <= 1.02x), same run:", ""]
            lines += _table(["writes per transaction", "not published ms", "published ms", "published/not",
                             "90% CI", "pairs"], rows) + [""]
        lines += [f"- {d['params']['transactions_per_mode_per_rep']} transactions per mode per repetition, interleaved;"
                  f" load averages: {_load_text(d)}", ""]
    if "spark_scaleout" in docs:
        d = docs["spark_scaleout"]
        r = d["results"]
        lines += ["## 4. Spark scale-out (Cassandra, 16 shards)", ""]
        rows = []
        for b, v in r["seconds_by_backlog"].items():
            rows.append([f"{int(b):,}", _f(v["in_task_seconds"], 1), _f(v.get("spark_local1_seconds"), 1), _f(v["spark_local2_seconds"], 1)])
        lines += _table(["backlog entries", "in-task s", "Spark local[1] s", "Spark local[2] s"], rows) + [""]
        cross = r.get("crossover_entries")
        lines += [
            f"- mode: {d['params']['spark_mode']}; scale-out local[1]/local[2]: job {_f(r['scaleout_job'])}x,"
            f" whole submission {_f(r['scaleout_wall'])}x",
            _task_slowdown_line(d),
            f"- fixed cost of one Spark run over in-task (empty backlog): {_f(r['fixed_cost_seconds'], 1)} s"
            f" ({_f(r['fixed_cost_ratio_spark_over_in_task'], 1)}x the in-task time)",
            f"- if local[2] halved the per-entry time (executors with cores of their own), Spark would overtake"
            f" in-task mode above {_f(r.get('crossover_if_2x_scaleout_entries'))} entries (model: 2 x fixed cost /"
            f" in-task seconds per entry; in-task rate {_f(r.get('in_task_entries_per_second'))} entries/s)",
            "- crossover (Spark local[2] faster than in-task above): "
            + (f"{cross:,} entries ({r['crossover_entries_per_shard']:,} per shard)"
               + (" - extrapolated beyond the largest measured backlog" if r.get("crossover_extrapolated") else "")
               if cross is not None else str(r.get("crossover_note"))),
            f"- load averages: {_load_text(d)}; {d['params']['repetitions']} repetitions", "",
        ]
    if "memory" in docs:
        d = docs["memory"]
        r = d["results"]
        lines += ["## 5. Memory of one shard iteration (Cassandra)", ""]
        lines += _table(
            ["batch", "peak RSS MB", "RSS before iteration MB", "iteration increment MB", "bytes/entry", "iteration s"],
            [[f"{r['batch']:,}", _f(r["peak_rss_mb"], 0), _f(r["rss_before_iteration_mb"], 0), _f(r["iteration_increment_mb"], 0),
              _f(r["bytes_per_entry"], 0), _f(r["iteration_seconds"], 1)]],
        ) + ["", f"- fresh process per repetition; load averages: {_load_text(d)}", ""]
    if "embedded" in docs:
        d = docs["embedded"]
        lines += ["## 6. Embedded store (SQLite)", ""]
        lines += _table(TV_HEADER, _tv_rows(d["results"]["targeted_vs_legacy"])) + [""]
        lines += _table(DR_HEADER, _dr_rows(d["results"]["delete_rate"])) + [""]
        lines += [f"- load averages: {_load_text(d)}", ""]
    if "large_commit" in docs:
        d = docs["large_commit"]
        lines += ["## 7. Commit time of large transactions (Cassandra)", ""]
        rows = [[_f(r["cells"]), r["shape"], _f(r["commit_s"]), _f(r["conflict_checks_s"]), _f(r["enqueue_s"]),
                 _f(r["writes_s"]), _f(r["cells_per_s"])] for r in d["results"].values()]
        lines += _table(["cells", "shape", "commit s", "conflict checks s", "enqueue s", "writes s", "cells/s"], rows) + [""]
        lines += [f"- new cells each repetition; load averages: {_load_text(d)}; {d['params']['repetitions']} repetitions"]
        if d.get("check_reads"):
            r = d["check_reads"]
            lines += [f"- check reads of {_f(r['cells'])} one-per-row cells, same run: one query per cell {_f(r['per_cell_s'])} s, "
                      f"multi-row reads {_f(r['multi_row_s'])} s ({_f(r['speedup'])}x)"]
        lines += [""]
    if "foreground_impact" in docs:
        from .foreground_impact import report as foreground_impact_report

        lines += foreground_impact_report.report_lines(docs["foreground_impact"])
        foreground_impact_report.write_chart(docs["foreground_impact"], out / "foreground_impact.png")
    if "sustained" in docs:
        from .sustained.report import report_lines as sustained_report_lines

        lines += sustained_report_lines(docs["sustained"])
    if "orchestration" in docs:
        from .orchestration.report import report_lines as orchestration_report_lines

        lines += orchestration_report_lines(docs["orchestration"])
    if ANALYSIS.exists():
        lines += [ANALYSIS.read_text(encoding="utf-8").rstrip(), ""]
    path = out / "RESULTS.md"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    write_chart(docs, out / "chart.png")
    return path


def write_chart(docs: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 3, figsize=(16, 9))
    axes = axes.ravel()

    def empty(ax, title):
        ax.set_title(title)
        ax.text(0.5, 0.5, "not measured", ha="center", va="center", transform=ax.transAxes)
        ax.set_xticks([])
        ax.set_yticks([])

    def tv_panel(ax, res, title):
        pct, fixed = res.get("pct", {}), res.get("fixed", {})
        groups = [(f"{int(n):,} cells\n1% rewritten", pct[n]) for n in sorted(pct, key=int)]
        if not groups:
            return empty(ax, title)
        if fixed:
            big = max(fixed, key=int)
            if fixed[big]["k"] != pct.get(big, {}).get("k"):
                share = 100 * fixed[big]["k"] / int(big)
                groups.append((f"{int(big):,} cells\n{share:g}% rewritten", fixed[big]))
        x = range(len(groups))
        t = [g["targeted_seconds"] for _, g in groups]
        lg = [g["legacy_seconds"] for _, g in groups]
        ax.bar([i - 0.2 for i in x], t, 0.4, label="targeted")
        ax.bar([i + 0.2 for i in x], lg, 0.4, label="legacy")
        for i, (_, g) in enumerate(groups):
            ax.annotate(f"{g['ratio']:.1f}x", (i, max(t[i], lg[i])), ha="center", va="bottom")
        ax.set_xticks(list(x), [label for label, _ in groups])
        ax.set_yscale("log")
        ax.set_ylabel("seconds to sweep (log)")
        ax.set_title(title)
        ax.legend()

    if "targeted_vs_legacy" in docs:
        tv_panel(axes[0], docs["targeted_vs_legacy"]["results"], "1. targeted vs legacy (Cassandra)")
    else:
        empty(axes[0], "1. targeted vs legacy (Cassandra)")

    ax = axes[1]
    if "delete_rate" in docs:
        res = docs["delete_rate"]["results"]
        names = list(res)
        x = range(len(names))
        ax.bar([i - 0.27 for i in x], [res[n]["sweep_entries_per_second"] for n in names], 0.27, label="targeted sweep")
        ax.bar([i for i in x], [res[n]["raw_per_second"] for n in names], 0.27, label="raw (one statement each)")
        if any("raw_batched_per_second" in res[n] for n in names):
            ax.bar([i + 0.27 for i in x], [res[n].get("raw_batched_per_second", 0) for n in names], 0.27, label="raw (same batching)")
        ax.set_xticks(list(x), names)
        ax.set_ylabel("cells per second")
        ax.set_title("2. sweep vs raw ranged deletes (Cassandra)")
        ax.legend(fontsize=8)
    else:
        empty(ax, "2. sweep vs raw ranged deletes (Cassandra)")

    ax = axes[2]
    if "commit_overhead" in docs:
        res = docs["commit_overhead"]["results"]
        ks = list(res)
        ax.bar(range(len(ks)), [res[k]["ratio"] for k in ks], 0.5)
        ax.axhline(1.25, color="red", linestyle="--", label="goal <= 1.25x")
        ax.axhline(1.0, color="grey", linewidth=0.8)
        ax.set_xticks(range(len(ks)), [f"{k} write(s)" for k in ks])
        ax.set_ylabel("commit latency, queue on / off")
        ax.set_title("3. commit overhead (Cassandra)")
        ax.legend()
    else:
        empty(ax, "3. commit overhead (Cassandra)")

    ax = axes[3]
    if "spark_scaleout" in docs:
        r = docs["spark_scaleout"]["results"]
        bs = sorted(r["seconds_by_backlog"], key=int)
        xs = [int(b) for b in bs]
        ax.plot(xs, [r["seconds_by_backlog"][b]["in_task_seconds"] for b in bs], "o-", label="in-task (1 process)")
        ax.plot(xs, [r["seconds_by_backlog"][b]["spark_local2_seconds"] for b in bs], "s-", label="spark-submit local[2]")
        if all("connect_local2_seconds" in r["seconds_by_backlog"][b] for b in bs):
            ax.plot(xs, [r["seconds_by_backlog"][b]["connect_local2_seconds"] for b in bs], "d-", label="Spark Connect local[2]")
        l1 = r["seconds_by_backlog"][bs[-1]].get("spark_local1_seconds")
        if l1:
            ax.plot([xs[-1]], [l1], "^", label="spark-submit local[1]")
        if r.get("crossover_entries") and not r.get("crossover_extrapolated"):
            ax.axvline(r["crossover_entries"], color="grey", linestyle=":", label=f"crossover {r['crossover_entries']:,}")
        ax.set_xlabel("backlog (queue entries, 16 shards)")
        ax.set_ylabel("seconds")
        ax.set_title(f"4. Spark: local[1]/local[2] = {r['scaleout_job']:.2f}x (job)")
        ax.legend(fontsize=8)
    else:
        empty(ax, "4. Spark scale-out")

    ax = axes[4]
    if "memory" in docs:
        r = docs["memory"]["results"]
        ax.bar([0], [r["rss_before_iteration_mb"]], 0.5, label="before the iteration")
        ax.bar([0], [r["peak_rss_mb"] - r["rss_before_iteration_mb"]], 0.5, bottom=[r["rss_before_iteration_mb"]], label="iteration")
        ax.axhline(512, color="red", linestyle="--", label="budget 512 MB")
        ax.set_xticks([0], [f"{r['batch']:,}-entry batch"])
        ax.set_ylabel("peak RSS (MB)")
        ax.set_title("5. memory of one shard iteration")
        ax.legend(fontsize=8)
    else:
        empty(ax, "5. memory")

    if "embedded" in docs:
        tv_panel(axes[5], docs["embedded"]["results"]["targeted_vs_legacy"], "6. targeted vs legacy (SQLite)")
    else:
        empty(axes[5], "6. embedded store (SQLite)")

    fig.suptitle("airflow-atlas benchmarks (medians of interleaved repetitions; one 2-core machine, node on the same cores)")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
