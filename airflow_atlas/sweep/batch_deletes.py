"""The deletes of one batch (steps 5 and 6 of :mod:`~airflow_atlas.sweep.targeted`): aborted writes deleted
directly, the newest sweepable write of each cell tombstoned by :class:`~airflow_atlas.sweep.deleter.SweepDeleter`
with its table's strategy now; and, in a paced run, spread over the batch's time at the pace.

:func:`plan_deletes` decides what to delete (pure but for the table checks); :func:`run_deletes` sends it,
per table first the aborted versions, then the cells. Unpaced (``spread`` None), each group is one call, as
the store's own concurrency runs it. Paced, the groups go in chunks
(:func:`~airflow_atlas.sweep.pacing.intensity.delete_chunks`: the first of 64, the others about an eighth of the
batch) and ``spread(share)`` runs before each chunk after the first with its predecessor's share of the batch
(the pacer's wait; sweep/pacing/intensity.py), and the time of every chunk of exactly
:data:`~airflow_atlas.sweep.pacing.intensity.DELETE_CHUNK_REQUESTS` goes to ``observe`` (the adaptive pace's
``delete`` sample). Any failure raises: the caller must
not advance progress past an unswept entry (a chunk that was sent is idempotent when redone).
"""
from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from ..errors import TableNotFoundError
from ..kvs.api import Cell
from ..kvs.consistency import Operation
from ..kvs.tables import SweepStrategy
from .deleter import SweepDeleter
from .pacing.intensity import DELETE_CHUNK_REQUESTS, chunk_shares, delete_chunks
from .results import SweepResult

ABORTED = -1


@dataclass
class TableDeletes:
    """What one batch deletes in one table: aborted versions, and per cell (newest sweepable start ts, whether
    that write was a delete), tombstoned with ``strategy`` (the table's strategy now)."""

    table: str
    strategy: SweepStrategy
    versions: list[tuple[Cell, int]] = field(default_factory=list)
    cells: dict[Cell, tuple[int, bool]] = field(default_factory=dict)


def plan_deletes(store, strategy: SweepStrategy, entries, commits: dict[int, int], result: SweepResult,
                 table_strategies=None) -> list[TableDeletes]:
    """Per table (in name order), what to delete; counts what is skipped (dropped tables, entries below a
    truncate mark, tables now NOTHING) in ``result``. Ranges follow each table's strategy *now* (a table may
    have changed strategy since its writes were queued)."""
    table_strategies = table_strategies or {}
    aborted: dict[str, list] = defaultdict(list)
    newest: dict[str, dict] = defaultdict(dict)
    last_table: str | None = None
    of_table: dict = {}  # newest[last_table]
    for table, cell, start_ts, is_tombstone in entries:
        if commits[start_ts] == ABORTED:
            aborted[table].append((cell, start_ts))
            continue
        if table is not last_table:  # entries come in runs of one table: look its dict up once per run
            last_table, of_table = table, newest[table]
        current = of_table.get(cell)
        if current is None or start_ts > current[0]:
            of_table[cell] = (start_ts, is_tombstone)

    plans = []
    for table in sorted(set(aborted) | set(newest)):
        cutoff = store.table_marks.cutoff(table)
        versions = [(c, s) for c, s in aborted.get(table, []) if s >= cutoff]
        cells = newest.get(table, {})
        if cutoff > 0 and cells:  # a truncate mark: entries below it are obsolete
            cells = {c: v for c, v in cells.items() if v[0] >= cutoff}
        skipped = len(aborted.get(table, [])) - len(versions) + len(newest.get(table, {})) - len(cells)
        if not store.kvs.table_exists(table):
            result.entries_skipped_dropped_tables += len(aborted.get(table, [])) + len(newest.get(table, {}))
            continue
        result.entries_skipped_dropped_tables += skipped
        table_strategy = table_strategies.get(table, strategy) or strategy
        if not table_strategy.is_swept:
            result.entries_skipped_dropped_tables += len(cells)
            cells = {}
        plans.append(TableDeletes(table, table_strategy, versions, cells))
    return plans


def run_deletes(
    kvs,
    deleter: SweepDeleter,
    plans: list[TableDeletes],
    result: SweepResult,
    *,
    dry_run: bool = False,
    entries: int = 0,
    spread: Callable[[float], None] | None = None,
    observe: Callable[[float], None] | None = None,
) -> None:
    """Sends ``plans`` (counts in ``result``). ``spread``: paced - chunks, and ``spread(share)`` before each
    chunk after the first (``entries``: the batch's entries, shared over the chunks); ``observe(seconds)``: the
    time of each chunk of exactly DELETE_CHUNK_REQUESTS."""
    groups: list[tuple[TableDeletes, list]] = []
    for plan in plans:
        groups.append((plan, plan.versions))
        groups.append((plan, list(plan.cells)))
    if spread is None:
        chunks = [(g, 0, len(items)) for g, (_, items) in enumerate(groups) if items]
    else:
        chunks = delete_chunks([len(items) for _, items in groups])
    shares = chunk_shares([stop - start for _, start, stop in chunks], entries)
    gone: set[str] = set()  # tables found dropped while deleting: their remaining chunks are skipped
    for i, (g, start, stop) in enumerate(chunks):
        plan, items = groups[g]
        if spread is not None and i > 0:
            spread(shares[i - 1])
        if plan.table in gone:
            result.entries_skipped_dropped_tables += stop - start
            continue
        sent = time.monotonic()
        try:
            if items is plan.versions:
                versions = items[start:stop]
                if not dry_run:
                    kvs.delete(plan.table, versions, operation=Operation.ABORT_DELETE)
                result.aborted_writes_deleted += len(versions)
            else:
                cells = {c: plan.cells[c] for c in items[start:stop]}
                counts = deleter.sweep_cells(plan.table, plan.strategy, cells, dry_run=dry_run)
                result.cells_tombstoned += counts.cells_tombstoned
                result.sentinels_written += counts.sentinels_written
                result.tables[plan.table] = result.tables.get(plan.table, 0) + counts.cells_tombstoned
        except TableNotFoundError:
            # Dropped between the check and the delete: its entries are obsolete, skip them.
            gone.add(plan.table)
            result.entries_skipped_dropped_tables += stop - start
            continue
        if observe is not None and stop - start == DELETE_CHUNK_REQUESTS:
            observe(time.monotonic() - sent)


__all__ = ["TableDeletes", "plan_deletes", "run_deletes"]
