"""An independent check of a history of timestamp draws: uniqueness and real-time order.

A draw is what one caller asked for and got: the block ``[low, high]`` of timestamps, and the instants
``start_ns`` (just before the call) and ``end_ns`` (just after it returned) on one clock shared by every
process of the machine (``time.monotonic_ns``, CLOCK_MONOTONIC on Linux). The two properties the timestamp
service promises, checked here without using any of its code:

- **unique**: no timestamp is handed out twice (no two blocks overlap);
- **real-time order**: when draw A returned before draw B started (``A.end_ns < B.start_ns``), every value of B
  is above every value of A (``B.low > max over such A of A.high``).

Both are checked in O(n log n): sort the blocks by ``low`` for overlaps; for the order, sweep the draws by
start while adding, in order of end, every draw that ended before the current start to a running maximum.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple


class Draw(NamedTuple):
    """One call: its block ``[low, high]`` and when it ran (ns on the shared monotonic clock)."""

    start_ns: int
    end_ns: int
    low: int
    high: int
    source: str = ""


@dataclass(frozen=True)
class Violation:
    """``kind``: "malformed" (one draw), "duplicate" (``first`` and ``second`` overlap) or "order"
    (``first`` returned before ``second`` started, yet ``second`` is not above it)."""

    kind: str
    first: Draw
    second: Draw | None = None

    def __str__(self) -> str:
        if self.kind == "malformed":
            return f"malformed draw {self.first}"
        if self.kind == "duplicate":
            return f"duplicate values: {self.first} and {self.second} overlap"
        return f"order: {self.first} returned before {self.second} started, yet the later draw is not above it"


@dataclass(frozen=True)
class CheckResult:
    draws: int
    violation_count: int
    violations: list[Violation] = field(default_factory=list)
    """The first violations found (at most the ``keep`` given to :func:`check_history`)."""

    @property
    def ok(self) -> bool:
        return self.violation_count == 0


def check_history(draws: Iterable[Draw], *, keep: int = 20) -> CheckResult:
    """Every violation of uniqueness and real-time order in ``draws`` (counted; the first ``keep`` kept)."""
    history = [d if isinstance(d, Draw) else Draw(*d) for d in draws]
    found: list[Violation] = []
    count = 0

    def report(violation: Violation) -> None:
        nonlocal count
        count += 1
        if len(found) < keep:
            found.append(violation)

    well_formed = []
    for d in history:
        if d.low > d.high or d.start_ns > d.end_ns:
            report(Violation("malformed", d))
        else:
            well_formed.append(d)

    # Unique: sorted by low, each block must start above the highest value of the blocks before it.
    by_low = sorted(well_formed, key=lambda d: (d.low, d.high))
    highest: Draw | None = None
    for d in by_low:
        if highest is not None and d.low <= highest.high:
            report(Violation("duplicate", highest, d))
        if highest is None or d.high > highest.high:
            highest = d

    # Real-time order: for each draw by start, the max value of every draw that ended strictly before it.
    by_start = sorted(well_formed, key=lambda d: d.start_ns)
    by_end = sorted(well_formed, key=lambda d: d.end_ns)
    done = 0
    top: Draw | None = None  # the draw with the highest value among those ended so far
    for b in by_start:
        while done < len(by_end) and by_end[done].end_ns < b.start_ns:
            a = by_end[done]
            if top is None or a.high > top.high:
                top = a
            done += 1
        if top is not None and b.low <= top.high:
            report(Violation("order", top, b))
    return CheckResult(len(history), count, found)
