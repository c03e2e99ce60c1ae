"""WriteInfo: what the sweep queue records for each write of a committing transaction (spec 000)."""
from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, Protocol

from ...kvs.api import Cell


class WriteInfo(NamedTuple):
    """One write: table, cell, the writer's start timestamp, and whether it was a delete (tombstone)."""

    table: str
    cell: Cell
    start_ts: int
    is_tombstone: bool


class SweepQueueHook(Protocol):
    """Called by a committing transaction with all of its writes *before* any cell is written."""

    def enqueue(self, writes: Sequence[WriteInfo]) -> None: ...


class ScrubQueueHook(Protocol):
    """Called by a committing hard-delete transaction with its writes (spec 003, scrub)."""

    def enqueue(self, writes: Sequence[WriteInfo]) -> None: ...
