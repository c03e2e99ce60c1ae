"""The status document's compaction part: per user table, the number ``atlas_compaction`` plans from -
tombstones written since the table's last compaction (:meth:`SweepHistory.tombstones_since_compaction`,
the same read as :func:`airflow_atlas.compaction.compact_due_tables`) - when that compaction was, the
threshold that makes the table due and whether it is (:func:`airflow_atlas.compaction.due_tables`, the
policy's own rule). Unlike a row's ``tombstones_written`` (recent history, compacted tombstones included),
this count restarts at 0 when the table is compacted.

The threshold is an Airflow setting (``compaction_threshold_tombstones``, :class:`AtlasSettings`); the engine
does not import the Airflow layer, so callers pass it: the dashboard and ``status --conn-id`` from their
effective settings (:func:`threshold_of`), the CLI without ``--conn-id`` cannot know it (None).
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from ..compaction import due_tables
from ..sweep.history import TableTombstones
from .document import TableCompactionState
from .text import round_or_none

if TYPE_CHECKING:
    from ..store import AtlasStore

THRESHOLD_SETTING = "compaction_threshold_tombstones"
"""The name of the Airflow setting holding the threshold (declared in airflow_atlas/airflow/settings.py;
tests/unit/status/test_compaction.py checks the two agree)."""


def compaction_state(counts: TableTombstones, strategy: str, threshold: int | None, now: float) -> TableCompactionState:
    """One table's row (pure): ``counts`` as the store holds them, ``threshold`` None when not known."""
    last = counts.last_compaction or {}
    at = last.get("at")
    at = float(at) if isinstance(at, (int, float)) else None
    due = None
    if threshold is not None:
        due = counts.capped or bool(due_tables({counts.table: counts.count}, [counts.table], threshold=threshold))
    return TableCompactionState(
        table=counts.table,
        strategy=strategy,
        tombstones_since_compaction=counts.count,
        capped=counts.capped,
        last_compaction_through_ts=counts.since_ts,
        last_compaction_at=round_or_none(at),
        last_compaction_age_seconds=round_or_none(max(0.0, now - at)) if at is not None else None,
        last_compaction_method=last.get("method"),
        threshold_tombstones=threshold,
        due=due,
    )


def read_compaction(store: AtlasStore, tables: Mapping[str, str], threshold: int | None, now: float) -> list[TableCompactionState]:
    """Every table of ``tables`` (``{name: strategy}``), ordered by name: two bounded reads per table."""
    return [
        compaction_state(store.history.tombstones_since_compaction(name), strategy, threshold, now)
        for name, strategy in sorted(tables.items())
    ]


def threshold_of(settings: Iterable) -> int | None:
    """The threshold among effective settings (:class:`~airflow_atlas.settings_resolver.SettingValue` or their
    JSON dicts), None when they do not hold it (engine settings only: the CLI without ``--conn-id``)."""
    for s in settings:
        name, value = (s.get("name"), s.get("value")) if isinstance(s, dict) else (s.name, s.value)
        if name == THRESHOLD_SETTING and value is not None:
            return int(value)
    return None
