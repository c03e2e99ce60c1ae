"""The backlog drain forecast (pure: unit-testable with constructed numbers) and the grouping of history
records into runs."""
from __future__ import annotations

from .document import Forecast, Warning
from .text import format_duration, round_or_none

DEFAULT_TOLERANCE = 0.1
"""Ingest must exceed the sweep rate by more than this fraction before the forecast warns."""
IDLE_MIN_SECONDS = 300.0
"""The forecast calls a sweeper idle only after at least this long without a run (and 3 usual intervals)."""
SAME_RUN_SLACK_SECONDS = 5.0
"""Records with the same sweep timestamp at most this much further apart than the later one's duration are
iterations of one run."""


def drain_forecast(
    *,
    backlog: int,
    sweepable: int,
    ingest_entries: int,
    swept_entries: int,
    elapsed_seconds: float | None,
    busy_seconds: float = 0.0,
    runs: int = 0,
    iterations: int | None = None,
    idle_seconds: float | None = None,
    typical_interval_seconds: float | None = None,
    tolerance: float = DEFAULT_TOLERANCE,
    backlog_capped: bool = False,
    ingest_capped: bool = False,
    basis: str = "runs",
    ever_swept: bool = True,
) -> Forecast:
    """Compare ingest with sweep over a window and forecast when the backlog drains.

    * ``backlog``: queued writes not yet swept (``sweepable``: the part below the sweep timestamp);
    * ``ingest_entries``: writes enqueued during the window; ``swept_entries``: writes swept during it;
      ``elapsed_seconds``: the window's length; ``busy_seconds``: time spent sweeping in it;
    * ``runs`` / ``iterations``: sweep runs / iterations counted in the window;
    * ``idle_seconds``: since the last run; ``typical_interval_seconds``: usual time between runs.

    ``ever_swept=False`` (no sweep has ever been recorded for the pair): there is no sweep rate to
    compare with, so no rate is claimed and nothing "outpaces" anything; the state is ``not_swept_yet``
    (with a backlog) and only the idle warning may fire.

    Returns the ``forecast`` of a shard row (:class:`~airflow_atlas.status.document.Forecast`). ``state`` is
    ``drained`` (no backlog), ``draining`` (sweep outpaces ingest), ``steady`` (rates within the
    tolerance: the backlog neither grows nor drains materially), ``growing`` (ingest outpaces sweep),
    ``stalled`` (backlog, no sweeping and no ingest), ``not_swept_yet`` or ``unknown`` (no usable window).
    With a backlog and no time to drain, ``unknown`` says what is not known and why (:func:`unknown_text`).
    """
    out = _forecast(backlog=backlog, sweepable=sweepable, ingest_entries=ingest_entries, swept_entries=swept_entries,
                    elapsed_seconds=elapsed_seconds, busy_seconds=busy_seconds, runs=runs, iterations=iterations,
                    idle_seconds=idle_seconds, typical_interval_seconds=typical_interval_seconds, tolerance=tolerance,
                    backlog_capped=backlog_capped, ingest_capped=ingest_capped, basis=basis, ever_swept=ever_swept)
    if backlog and out.time_to_drain_seconds is None:
        out.unknown = unknown_text(ever_swept=ever_swept, elapsed_seconds=elapsed_seconds, runs=runs)
    return out


def unknown_text(*, ever_swept: bool, elapsed_seconds: float | None, runs: int) -> str | None:
    """What a forecast with a backlog and no time to drain does not know (None: it knows the backlog does not
    drain at the measured rates)."""
    if not ever_swept:
        return "no sweep run yet: no sweep rate measured, so no time to drain"
    if not elapsed_seconds or elapsed_seconds <= 0:
        return "too little history to measure rates: no time to drain yet"
    if runs == 0:
        return (f"no sweep run in the last {format_duration(elapsed_seconds)}: no sweep rate measured, "
                "so no time to drain")
    return None


def _forecast(
    *,
    backlog: int,
    sweepable: int,
    ingest_entries: int,
    swept_entries: int,
    elapsed_seconds: float | None,
    busy_seconds: float,
    runs: int,
    iterations: int | None,
    idle_seconds: float | None,
    typical_interval_seconds: float | None,
    tolerance: float,
    backlog_capped: bool,
    ingest_capped: bool,
    basis: str,
    ever_swept: bool,
) -> Forecast:
    out = Forecast(
        basis=basis,
        window_seconds=round_or_none(elapsed_seconds),
        runs_in_window=runs,
        iterations_in_window=runs if iterations is None else iterations,
        ingest_entries=ingest_entries,
        ingest_capped=ingest_capped,
        swept_entries=swept_entries,
        sweep_throughput_per_second=round_or_none(swept_entries / busy_seconds) if busy_seconds > 0 else None,
        backlog_entries=backlog,
        backlog_capped=backlog_capped,
        idle_seconds=round_or_none(idle_seconds),
    )
    if backlog == 0:
        out.state = "drained"
        out.time_to_drain_seconds = 0.0
    if not ever_swept and backlog:
        out.state = "not_swept_yet"
    if not elapsed_seconds or elapsed_seconds <= 0:
        return out
    ingest_rate = ingest_entries / elapsed_seconds
    out.ingest_rate_per_second = round_or_none(ingest_rate)
    if not ever_swept:
        if backlog:
            if sweepable > 0 and elapsed_seconds >= IDLE_MIN_SECONDS:
                out.warnings.append(
                    Warning(
                        "sweeper_idle",
                        f"never swept while {sweepable}{'+' if backlog_capped else ''} entries are sweepable",
                    )
                )
        return out
    sweep_rate = swept_entries / elapsed_seconds
    net = sweep_rate - ingest_rate
    out.sweep_rate_per_second = round_or_none(sweep_rate)
    out.net_drain_rate_per_second = round_or_none(net)
    if backlog == 0:
        return out
    outpaces = ingest_rate > 0 and ingest_rate > sweep_rate * (1.0 + tolerance)
    out.ingest_outpaces_sweep = outpaces
    if net > 0:
        out.time_to_drain_seconds = round_or_none(backlog / net)
    if outpaces:
        out.state = "growing"
        out.warnings.append(
            Warning(
                "ingest_outpaces_sweep",
                f"ingest ({ingest_rate:.3g}/s) outpaces sweep ({sweep_rate:.3g}/s): "
                f"the backlog of {backlog}{'+' if backlog_capped else ''} entries is growing",
            )
        )
    elif sweep_rate == 0 and ingest_rate == 0:
        out.state = "stalled"
    elif net > ingest_rate * tolerance or (ingest_rate == 0 and net > 0):
        out.state = "draining"
    else:
        out.state = "steady"
    if sweepable > 0 and idle_seconds is not None:
        limit = max(IDLE_MIN_SECONDS, 3 * (typical_interval_seconds or 0.0))
        if idle_seconds > limit:
            out.warnings.append(
                Warning(
                    "sweeper_idle",
                    f"no sweep run for {format_duration(idle_seconds)} while {sweepable}"
                    f"{'+' if backlog_capped else ''} entries are sweepable",
                )
            )
    elif sweepable > 0 and runs == 0 and basis == "window" and elapsed_seconds >= IDLE_MIN_SECONDS:
        out.warnings.append(
            Warning(
                "sweeper_idle",
                f"no sweep run in the last {format_duration(elapsed_seconds)} while {sweepable}"
                f"{'+' if backlog_capped else ''} entries are sweepable",
            )
        )
    return out


def group_runs(records: list[dict]) -> list[list[dict]]:
    """Group history records (oldest first) into runs: iterations of one run share their sweep timestamp
    (computed once per run) and follow each other without a pause (the gap between two records is about
    the later iteration's duration)."""
    runs: list[list[dict]] = []
    for r in records:
        if runs:
            prev = runs[-1][-1]
            gap = r["at"] - prev["at"]
            if r.get("sweep_ts") == prev.get("sweep_ts") and gap <= float(r.get("duration_seconds") or 0.0) + SAME_RUN_SLACK_SECONDS:
                runs[-1].append(r)
                continue
        runs.append([r])
    return runs
