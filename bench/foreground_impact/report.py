"""The RESULTS.md section and the chart of ``foreground_impact`` (called by :mod:`bench.report`).

Today's document is per placement (``results.placements``: pooled p99s with confidence intervals); older
committed ones render too: per load phase (``params.load_phases``, issue 24) and single-phase (one steady
foreground, fixed limits only, issue 15). Variants show under their names in the document (an older document's
controllers under their keys).
"""
from __future__ import annotations

SECTION = "## 8. Foreground impact of sweep, by load phase and intensity (Cassandra)"


def _fmt(value, digits=2) -> str:
    if value is None or value != value:
        return "-"
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.{digits}f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def _fixed(variant) -> bool:
    return isinstance(variant, int) or str(variant).isdigit()


def _label(variant) -> str:
    if _fixed(variant):
        return f"fixed {int(variant):,}/s"
    return {"no_sweep": "no sweep", "default": "default (application pace)"}.get(variant, str(variant))


def _pace(key, row: dict) -> str:
    """A controller's pace at the end of the window and its back-offs ("-" for no sweep, unthrottled, a fixed limit)."""
    if _fixed(key) or key in ("no_sweep", "unthrottled"):
        return "-"
    return f"{_fmt(row.get('pace_entries_per_second'))} ({_fmt(row.get('pace_backoffs'), 0)})"


def _ratio_text(row: dict) -> str:
    if row.get("p99_note"):
        return row["p99_note"]
    ci = row.get("p99_ratio_ci")
    return f"{_fmt(row.get('p99_vs_no_sweep'))} [{_fmt(ci[0])}, {_fmt(ci[1])}]" if ci else _fmt(row.get("p99_vs_no_sweep"))


def _placement_lines(doc: dict) -> list[str]:
    """Per placement, phase and variant, pooled figures with 90% intervals; the judged variant in bold."""
    p, r = doc["params"], doc["results"]
    default = r.get("default_variant")
    header = ["placement", "load phase (fg/s)", "variant", "transactions", "p50 ms", "p99 ms",
              "p99 / no sweep [90% CI]", "sweep entries/s", "share of unthrottled", "pace at end /s (back-offs)",
              "machine cores busy", "node cores"]
    lines = [SECTION, "", "| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    for name, placed in r["placements"].items():
        for phase, ph in placed["phases"].items():
            for key, row in ph["variants"].items():
                label = f"**{_label(key)}**" if key == default else _label(key)
                lines.append("| " + " | ".join([
                    name, f"{phase} ({ph['foreground_rate']})", label, _fmt(row["foreground_transactions"]),
                    _fmt(row["p50_ms"], 1), _fmt(row["p99_ms"], 1), _ratio_text(row) if key != "no_sweep" else "-",
                    _fmt(row.get("sweep_entries_per_second")), _fmt(row.get("share_of_unthrottled")), _pace(key, row),
                    _fmt(row["machine_busy_cores"]), _fmt(row["cassandra_cores"])]) + " |")
    placements = "; ".join(f"{n}: {v['placement'].get('method', '-')}" for n, v in r["placements"].items())
    lines += [
        "",
        f"- in bold: the run's shipped settings, at which the goals are judged; placements of the sweep process:"
        f" {placements}",
        f"- windows (s): {', '.join(f'{k} {v:g}' for k, v in p['phase_seconds'].items())}"
        + (f" (the arrival's foreground from {p['arrival_delay_seconds']:g} s in)" if "arrival_delay_seconds" in p else "")
        + f"; p99s pooled over"
        f" {p['repetitions']} repetitions (none under {p['min_samples_for_p99']:,} transactions); intervals: bootstrap,"
        f" {p['bootstrap_resamples']:,} resamples",
        f"- calibration (unthrottled, no foreground): {_fmt(r['calibration_entries_per_second'])} entries/s; load averages"
        f" {_load_text(doc)}; duration {doc.get('duration_seconds', 0) / 60:.0f} min; chart: foreground_impact.png",
        "",
    ]
    return lines


def _phases_of(results: dict) -> dict:
    """The phases to chart: the confined placement's (the judged one) when there are placements."""
    if "placements" in results:
        placed = results["placements"]
        return placed.get("confined", next(iter(placed.values())))["phases"]
    return results["phases"]


def _load_text(doc: dict) -> str:
    b, a = doc.get("load_before", {}), doc.get("load_after", {})
    return f"{b.get('1m')}/{b.get('5m')}/{b.get('15m')} -> {a.get('1m')}/{a.get('5m')}/{a.get('15m')}"


def report_lines(doc: dict) -> list[str]:
    """The RESULTS.md section of this benchmark."""
    if "placements" in doc["results"]:
        return _placement_lines(doc)
    if "load_phases" not in doc["params"]:
        return _legacy_lines(doc)
    p, r = doc["params"], doc["results"]
    header = ["load phase (fg/s)", "variant", "fg p50 ms", "fg p99 ms", "p50 / no sweep", "p99 / no sweep",
              "pooled p99 ms", "sweep entries/s", "share of unthrottled", "paced s", "pace at end /s (back-offs)",
              "machine cores busy", "node cores"]
    rows = []
    for phase, ph in r["phases"].items():
        for key, row in ph["variants"].items():
            rows.append([f"{phase} ({ph['foreground_rate']})", _label(key), _fmt(row["p50_ms"], 1), _fmt(row["p99_ms"], 1),
                         _fmt(row.get("p50_vs_no_sweep")), _fmt(row.get("p99_vs_no_sweep")), _fmt(row["pooled_p99_ms"], 1),
                         _fmt(row.get("sweep_entries_per_second")), _fmt(row.get("share_of_unthrottled")),
                         _fmt(row.get("seconds_paced")), _pace(key, row), _fmt(row["machine_busy_cores"]), _fmt(row["cassandra_cores"])])
    d = p["default_settings"]
    lines = [SECTION, ""]
    lines += ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    reasons = [f"{phase}: {ph['variants']['adaptive'].get('pace_reason')}" for phase, ph in r["phases"].items()
               if "adaptive" in ph["variants"]]
    lines += [
        "",
        f"- load phases in this order every repetition: {', '.join(p['load_phases'])}; windows of ~{p['phase_seconds']:g} s;"
        f" foreground: open-loop snapshot transactions ({p['reads_per_transaction']} reads + 1 write of"
        f" {p['foreground_cells']:,} cells) at {', '.join(f'{k} {v}/s' for k, v in p['foreground_rates_per_second'].items())};"
        " sweep in its own process, one run per window, stopped after the first iteration past the window",
        f"- adaptive = the default settings (sweep_latency_target {d['sweep_latency_target']}, sweep_max_entries_per_second"
        f" {d['sweep_max_entries_per_second'] or '0 (no upper bound)'}); fixed limits and unthrottled with"
        " sweep_latency_target 0; ratios are per repetition against the same phase's no sweep / unthrottled, then the median",
        f"- calibration (unthrottled, no foreground): {_fmt(r['calibration_entries_per_second'])} entries/s; load averages"
        f" {_load_text(doc)}; {p['repetitions']} repetitions; duration {doc.get('duration_seconds', 0) / 60:.0f} min;"
        " chart: foreground_impact.png",
        "- the adaptive pace's last reason per phase (last repetition): " + "; ".join(reasons),
        "",
    ]
    return lines


def _legacy_lines(doc: dict) -> list[str]:
    """The issue-15 document: one steady foreground, fixed limits (``limit`` 0 = unlimited)."""
    p, r = doc["params"], doc["results"]
    header = ["limit (entries/s)", "fg p50 ms", "fg p99 ms", "p99 / no sweep", "pooled p99 ms", "sweep entries/s",
              "share of unthrottled", "paced s", "machine cores busy", "node cores"]
    rows = []
    for row in r["phases"].values():
        label = "no sweep" if row["limit"] is None else ("unlimited" if row["limit"] == 0 else f"{row['limit']:,}")
        if row["limit"] == p.get("default_limit"):
            label += " (default then)"
        rows.append([label, _fmt(row["p50_ms"], 1), _fmt(row["p99_ms"], 1), _fmt(row.get("p99_vs_no_sweep")),
                     _fmt(row["pooled_p99_ms"], 1), _fmt(row.get("sweep_entries_per_second")),
                     _fmt(row.get("share_of_unthrottled")), _fmt(row.get("seconds_paced")),
                     _fmt(row["machine_busy_cores"]), _fmt(row["cassandra_cores"])])
    lines = ["## 8. Foreground impact of sweep, by intensity limit (Cassandra; issue-15 run, before adaptive intensity)", ""]
    lines += ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    lines += ["", f"- foreground: {p['foreground_rate_per_second']} snapshot transactions/s open-loop; phases of"
              f" ~{p['phase_seconds']:g} s; unthrottled {_fmt(r['unthrottled_entries_per_second'])} entries/s;"
              f" load averages {_load_text(doc)}; {p['repetitions']} repetitions", ""]
    return lines


def write_chart(doc: dict, path) -> None:
    """Left: foreground p99 / no sweep per variant in the busy phases; right: sweep share of unthrottled per
    variant in every phase (the issue-15 document: p99 and rate per limit)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    r = doc["results"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.8))
    if "load_phases" in doc["params"]:
        phases = _phases_of(r)
        keys = list(dict.fromkeys(k for ph in phases.values() for k in ph["variants"] if k != "no_sweep"))
        names = [_label(k) for k in keys]
        width = 0.8 / max(1, len(phases))
        for i, (phase, ph) in enumerate(phases.items()):
            xs = [j + (i - (len(phases) - 1) / 2) * width for j in range(len(keys))]
            rows = [ph["variants"].get(k, {}) for k in keys]
            if any(x.get("p99_vs_no_sweep") for x in rows):
                left.bar(xs, [x.get("p99_vs_no_sweep") or 0 for x in rows], width, label=phase)
            right.bar(xs, [x.get("share_of_unthrottled") or 0 for x in rows], width, label=phase)
        left.axhline(1.25, color="red", linestyle="--", label="goal <= 1.25x")
        left.set_yscale("log")
        left.set_ylabel("foreground p99 / no sweep (log)")
        left.set_title("foreground p99 by variant, busy phases")
        right.axhline(0.8, color="red", linestyle="--", label="idle goal >= 0.8")
        right.set_ylabel("sweep rate / unthrottled (same phase)")
        right.set_title("sweep rate by variant and load phase")
        for ax in (left, right):
            ax.set_xticks(range(len(keys)), names, rotation=30, ha="right", fontsize=8)
            ax.legend(fontsize=8)
    else:
        rows = list(r["phases"].values())
        labels = ["no sweep" if x["limit"] is None else ("unlimited" if x["limit"] == 0 else f"{x['limit']:,}/s") for x in rows]
        left.bar(range(len(rows)), [x["p99_ms"] or 0 for x in rows], 0.5)
        left.set_xticks(range(len(rows)), labels)
        left.set_yscale("log")
        left.set_ylabel("foreground p99 ms (log)")
        swept = [x for x in rows if x["limit"] is not None]
        right.bar(range(len(swept)), [x["sweep_entries_per_second"] for x in swept], 0.5)
        right.set_xticks(range(len(swept)), [lab for lab, x in zip(labels, rows, strict=True) if x["limit"] is not None])
        right.set_ylabel("sweep entries per second")
    fig.suptitle("foreground_impact: snapshot transactions while sweep works through a backlog (2 cores shared by node,"
                 " application and sweep)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
