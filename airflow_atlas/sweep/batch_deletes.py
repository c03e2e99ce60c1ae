"""The deletes of one batch (steps 5 and 6 of :mod:`~airflow_atlas.sweep.targeted`): aborted writes deleted
directly, the newest sweepable write of each cell tombstoned by :class:`~airflow_atlas.sweep.deleter.SweepDeleter`
with its table's strategy now; and, in a paced run, spread over the batch's time at the pace.

:func:`plan_deletes` decides what to delete (pure but for the table checks); :func:`run_deletes` sends it,
per table first the aborted versions, then the cells. Unpaced (``pacing`` None), each group is one call, as
the store's own concurrency runs it. Paced, the groups go in chunks
(:func:`~airflow_atlas.sweep.pacing.intensity.delete_chunks`: the first of 64, each later one as long as
``pacing.step(entries)`` says when it is cut - about an eighth of the batch at the pace now) and
``pacing.spread(share)`` runs before each chunk after the first with its predecessor's share of the batch's
entries (in proportion to its requests: the pacer's wait, sweep/pacing/intensity.py). Any failure raises: the
caller must not advance progress past an unswept entry (a chunk that was sent is idempotent when redone).
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from ..errors import TableNotFoundError
from ..kvs.api import Cell
from ..kvs.consistency import Operation
from ..kvs.tables import SweepStrategy
from .counts import SweepCounts
from .deleter import SweepDeleter
from .pacing.intensity import delete_chunks
from .results import SweepResult

if TYPE_CHECKING:
    from ..kvs.api import KeyValueService
    from ..store import AtlasStore
    from .queue.write_info import WriteInfo

ABORTED = -1


class ChunkPacing(Protocol):
    """How a paced run sends one batch's deletes (:class:`~airflow_atlas.sweep.pacing.run_pace.RunPace`)."""

    def step(self, batch_entries: int) -> int:
        """The length of the next chunk after the first, for a batch of ``batch_entries`` requests."""

    def spread(self, entries: float) -> None:
        """The wait before the next chunk, paying the previous chunk's share of the batch's entries."""


@dataclass
class TableDeletes:
    """What one batch deletes in one table: aborted versions, and per cell (newest sweepable start ts, whether
    that write was a delete), tombstoned with ``strategy`` (the table's strategy now)."""

    table: str
    strategy: SweepStrategy
    versions: list[tuple[Cell, int]] = field(default_factory=list)
    cells: dict[Cell, tuple[int, bool]] = field(default_factory=dict)


def plan_deletes(store: AtlasStore, strategy: SweepStrategy, entries: Iterable[WriteInfo], commits: dict[int, int],
                 result: SweepResult, table_strategies: Mapping[str, SweepStrategy | None] | None = None,
                 ) -> list[TableDeletes]:
    """Per table (in name order), what to delete; counts what is skipped (dropped tables, entries below a
    truncate mark, tables now NOTHING) in ``result``. Ranges follow each table's strategy *now* (a table may
    have changed strategy since its writes were queued)."""
    table_strategies = table_strategies or {}
    aborted: dict[str, list[tuple[Cell, int]]] = defaultdict(list)
    newest: dict[str, dict[Cell, tuple[int, bool]]] = defaultdict(dict)
    last_table: str | None = None
    of_table: dict[Cell, tuple[int, bool]] = {}  # newest[last_table]
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
            result.counts += SweepCounts(entries_skipped_dropped_tables=len(aborted.get(table, [])) + len(newest.get(table, {})))
            continue
        result.counts += SweepCounts(entries_skipped_dropped_tables=skipped)
        table_strategy = table_strategies.get(table, strategy) or strategy
        if not table_strategy.is_swept:
            result.counts += SweepCounts(entries_skipped_dropped_tables=len(cells))
            cells = {}
        plans.append(TableDeletes(table, table_strategy, versions, cells))
    return plans


def run_deletes(
    kvs: KeyValueService,
    deleter: SweepDeleter,
    plans: list[TableDeletes],
    result: SweepResult,
    *,
    dry_run: bool = False,
    entries: int = 0,
    pacing: ChunkPacing | None = None,
) -> None:
    """Sends ``plans`` (counts in ``result``). ``pacing``: paced - chunks, and ``pacing.spread(share)`` before
    each chunk after the first (``entries``: the batch's entries, shared over the chunks by their requests)."""
    groups: list[tuple[TableDeletes, list]] = []
    for plan in plans:
        groups.append((plan, plan.versions))
        groups.append((plan, list(plan.cells)))
    sizes = [len(items) for _, items in groups]
    total = sum(sizes)
    if pacing is None:
        chunks = iter([(g, 0, size) for g, size in enumerate(sizes) if size])
    else:
        chunks = delete_chunks(sizes, lambda: pacing.step(total))
    gone: set[str] = set()  # tables found dropped while deleting: their remaining chunks are skipped
    for g, start, stop in _paid(chunks, pacing, entries, total):
        plan, items = groups[g]
        if plan.table in gone:
            result.counts += SweepCounts(entries_skipped_dropped_tables=stop - start)
            continue
        try:
            if items is plan.versions:
                versions = items[start:stop]
                if not dry_run:
                    kvs.delete(plan.table, versions, operation=Operation.ABORT_DELETE)
                result.counts += SweepCounts(aborted_writes_deleted=len(versions))
            else:
                cells = {c: plan.cells[c] for c in items[start:stop]}
                counts = deleter.sweep_cells(plan.table, plan.strategy, cells, dry_run=dry_run)
                result.counts += SweepCounts(cells_tombstoned=counts.cells_tombstoned,
                                             sentinels_written=counts.sentinels_written)
                result.tables[plan.table] = result.tables.get(plan.table, 0) + counts.cells_tombstoned
        except TableNotFoundError:
            # Dropped between the check and the delete: its entries are obsolete, skip them.
            gone.add(plan.table)
            result.counts += SweepCounts(entries_skipped_dropped_tables=stop - start)
            continue


def _paid(
    chunks: Iterator[tuple[int, int, int]], pacing: ChunkPacing | None, entries: int, total: int
) -> Iterator[tuple[int, int, int]]:
    """The chunks (``total`` requests in all), each after the first preceded by the wait that pays its
    predecessor's share of the batch's ``entries`` - before the next chunk is cut (the wait may change the pace,
    and with it the next chunk's length); nothing after the last (the rest is paid between iterations)."""
    sent = previous = 0
    while sent < total:
        if previous and pacing is not None:
            pacing.spread(entries * previous / total)
        group, start, stop = next(chunks)
        previous = stop - start
        sent += previous
        yield group, start, stop


__all__ = ["ChunkPacing", "TableDeletes", "plan_deletes", "run_deletes"]
