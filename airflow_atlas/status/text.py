"""Number and duration formatting shared by the status document, the CLI and the dashboard (pure)."""
from __future__ import annotations

import math


def round_or_none(value: float | None, digits: int = 3) -> float | None:
    """``value`` rounded; None for None, NaN and infinities (a JSON document never holds those)."""
    if value is None:
        return None
    number = float(value)
    if math.isnan(number) or math.isinf(number):
        return None
    return round(number, digits)


def format_duration(seconds: float | None) -> str:
    """``42s``, ``5m12s``, ``3h04m``, ``2d03h``; ``-`` for None."""
    if seconds is None:
        return "-"
    s = max(0.0, float(seconds))
    if s < 10:
        return f"{s:.1f}s"
    s = int(round(s))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{(s % 3600) // 60:02d}m"
    return f"{s // 86400}d{(s % 86400) // 3600:02d}h"


def drain_text(forecast: dict) -> str:
    """A forecast's time to drain for people (the JSON form of
    :class:`~airflow_atlas.status.document.Forecast`): the duration; ``unknown`` when the forecast does not
    know it (its ``unknown`` says why); ``not at these rates`` when the measured rates do not drain the
    backlog; ``-`` with no backlog figure."""
    drain = forecast.get("time_to_drain_seconds")
    if drain is not None:
        return format_duration(drain)
    if forecast.get("unknown"):
        return "unknown"
    return "not at these rates" if forecast.get("backlog_entries") else "-"
