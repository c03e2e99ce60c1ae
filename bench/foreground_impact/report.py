"""The RESULTS.md section and the chart of ``foreground_impact`` (called by :mod:`bench.report`): per placement
(``results.placements``), load phase and variant, the pooled p99s with their confidence intervals. Variants show
under their names in the document (the tracked result's controllers, measured before issue 46, under their keys).
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
    """The phases to chart: the confined placement's (the judged one), else the first measured."""
    placed = results["placements"]
    return placed.get("confined", next(iter(placed.values())))["phases"]


def _load_text(doc: dict) -> str:
    b, a = doc.get("load_before", {}), doc.get("load_after", {})
    return f"{b.get('1m')}/{b.get('5m')}/{b.get('15m')} -> {a.get('1m')}/{a.get('5m')}/{a.get('15m')}"


def report_lines(doc: dict) -> list[str]:
    """The RESULTS.md section of this benchmark."""
    return _placement_lines(doc)


def write_chart(doc: dict, path) -> None:
    """Left: foreground p99 / no sweep per variant in the busy phases; right: sweep share of unthrottled per
    variant in every phase (the judged placement's)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    r = doc["results"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.8))
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
    fig.suptitle("foreground_impact: snapshot transactions while sweep works through a backlog (2 cores shared by node,"
                 " application and sweep)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
