"""Small HTML formatting helpers of the dashboard page (pure): escaping, numbers, rates, times, and table cells
carrying ``data-field`` / ``data-value`` (see :mod:`.render`)."""
from __future__ import annotations

import html
import time
from typing import Any


def esc(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def fmt_int(value: Any, capped: bool = False) -> str:
    if value is None:
        return "-"
    try:
        text = f"{int(value):,}"
    except (TypeError, ValueError):
        return esc(value)
    return text + ("+" if capped else "")


def fmt_rate(value: Any) -> str:
    if value is None:
        return "-"
    value = float(value)
    if value == 0:
        return "0/s"
    if abs(value) >= 100:
        return f"{value:,.0f}/s"
    return f"{value:.3g}/s"


def fmt_time(at: float | None) -> str:
    if at is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at))


def cell(text: str, field: str, value: Any = None, cls: str = "", title: str | None = None) -> str:
    """A ``<td>`` with ``data-field`` (and ``data-value`` when given); ``text`` is already HTML."""
    attrs = [f'data-field="{esc(field)}"']
    if value is not None:
        attrs.append(f'data-value="{esc(value)}"')
    if cls:
        attrs.append(f'class="{esc(cls)}"')
    if title:
        attrs.append(f'title="{esc(title)}"')
    return f"<td {' '.join(attrs)}>{text}</td>"
