"""The one report format behind the asset events: what each task wrote into which table."""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from airflow_atlas.airflow.targets import SKIPPED
from airflow_atlas.serialisation import from_json, to_json


@dataclass(frozen=True)
class TableTombstones:
    """Tombstones one task wrote into one table: the ONE report format behind the asset events. Every task
    that writes tombstones (targeted sweep, full sweep, scrub) lists them under ``"swept_tables"`` in its
    XCom result (nothing for a dry run)."""

    table: str
    cells_tombstoned: int = 0
    versions_deleted: int = 0

    @property
    def tombstones(self) -> int:
        return self.cells_tombstoned + self.versions_deleted


def swept_tables(cells: Mapping[str, int] | None = None, versions: Mapping[str, int] | None = None) -> list[dict]:
    """``"swept_tables"`` of a result from per-table cell and version counts (zero counts left out)."""
    tables = sorted(t for t in {**(cells or {}), **(versions or {})} if (cells or {}).get(t) or (versions or {}).get(t))
    return [to_json(TableTombstones(t, int((cells or {}).get(t) or 0), int((versions or {}).get(t) or 0))) for t in tables]


def run_swept_tables(result: Mapping[str, Any] | None) -> list[dict]:
    """A targeted-sweep run's ``"swept_tables"`` from its ``result`` (the engine's ``ShardSweepResult`` JSON:
    its ``tables``); nothing for a dry run, a skipped pair or no result."""
    if not result or result.get("status") in (SKIPPED, "dry_run") or result.get("dry_run"):
        return []
    return swept_tables(cells=result.get("tables"))


def _walk(reports: Any) -> Iterable[Mapping]:
    """Every dict in a nest of lists (mapped task outputs are lists of lists)."""
    if isinstance(reports, Mapping):
        yield reports
    elif isinstance(reports, (list, tuple)) or (hasattr(reports, "__iter__") and not isinstance(reports, (str, bytes))):
        for item in reports:
            if item is not None:
                yield from _walk(item)


def tombstones_by_table(reports: Any) -> dict[str, dict[str, int]]:
    """Per-table counts summed over the ``"swept_tables"`` of any nest of results."""
    out: dict[str, dict[str, int]] = defaultdict(lambda: {"tombstones": 0, "cells_tombstoned": 0, "versions_deleted": 0})
    for report in _walk(reports):
        for entry in report.get("swept_tables") or ():
            item = from_json(TableTombstones, entry)
            counts = out[item.table]
            counts["cells_tombstoned"] += item.cells_tombstoned
            counts["versions_deleted"] += item.versions_deleted
            counts["tombstones"] += item.tombstones
    return dict(out)
