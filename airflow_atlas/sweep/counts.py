"""What a sweep counts, as values that add up: :class:`SweepCounts` (the targeted sweep: an iteration, a
run of a pair, many runs) and :class:`ScanCounts` (the legacy scan-based sweep: a range, a table). Both
are frozen dataclasses of non-negative ints with ``+`` (:class:`Counts`) and a zero (``SweepCounts()``);
whoever adds up sweep results adds their counts, and takes the names from :meth:`Counts.names`.

In a result's JSON the counts are flat: their fields are the result's own keys
(:func:`airflow_atlas.serialisation.flatten`).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, TypeVar

C = TypeVar("C", bound="Counts")


@dataclass(frozen=True)
class Counts:
    """The one ``+`` of counts: field by field, of two counts of one type."""

    def __add__(self: C, other: C) -> C:
        if type(other) is not type(self):
            return NotImplemented
        return type(self)(**{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)})

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The counters, in declaration order (their keys in the JSON)."""
        return tuple(f.name for f in fields(cls))

    @classmethod
    def of(cls: type[C], data: Mapping[str, Any] | None) -> C:
        """The counts in a result's JSON (``data``; a counter missing or None there is 0)."""
        return cls(**{name: int((data or {}).get(name) or 0) for name in cls.names()})


@dataclass(frozen=True)
class SweepCounts(Counts):
    """What targeted sweep read and wrote: of one iteration, or summed over the iterations of a run, over runs."""

    entries_read: int = 0
    cells_tombstoned: int = 0
    sentinels_written: int = 0
    aborted_writes_deleted: int = 0
    transactions_aborted: int = 0
    queue_rows_cleaned: int = 0
    entries_skipped_dropped_tables: int = 0
    corrupt_entries: int = 0


@dataclass(frozen=True)
class ScanCounts(Counts):
    """What the legacy sweep read and wrote: of one range, or summed over the ranges of a table."""

    cells_examined: int = 0
    versions_examined: int = 0
    versions_deleted: int = 0
    sentinels_written: int = 0
    transactions_aborted: int = 0


__all__ = ["Counts", "ScanCounts", "SweepCounts"]
