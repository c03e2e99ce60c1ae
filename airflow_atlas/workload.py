"""Workload generator: transactions that feed the sweep queue, for the demo, the CLI, tests and benchmarks.

Produces committed transactions (writes, overwrites, deletes), *dead writers* (a transaction that enqueued
and wrote its cells, then crashed before committing: exactly the state sweep must abort and clean up),
explicitly aborted transactions (which write nothing), and still-open transactions (returned to the
caller; they hold the immutable timestamp back until committed or aborted).
"""
from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pydantic import field_serializer

from .errors import (
    InvalidInputError,
    TransactionAbortedError,
    TransactionConflictError,
    TransactionFailedRetriableError,
)
from .kvs.api import Cell
from .kvs.tables import SweepStrategy
from .sweep.queue.write_info import WriteInfo

if TYPE_CHECKING:
    from .store import AtlasStore
    from .transactions.snapshot import SnapshotTransaction


@dataclass
class WorkloadSpec:
    transactions: int = 200
    writes_per_transaction: tuple[int, int] = (1, 8)
    tables: dict = field(default_factory=lambda: {"demo_conservative": "CONSERVATIVE", "demo_thorough": "THOROUGH"})
    rows: int = 200
    columns: int = 4
    delete_ratio: float = 0.1
    dead_writer_ratio: float = 0.05
    abort_ratio: float = 0.05
    open_transactions: int = 0
    value_bytes: int = 32
    seed: int = 7

    def validate(self) -> WorkloadSpec:
        if self.transactions < 0 or self.open_transactions < 0:
            raise InvalidInputError("transactions and open_transactions must be >= 0")
        lo, hi = self.writes_per_transaction
        if not 1 <= lo <= hi:
            raise InvalidInputError(f"writes_per_transaction must be 1 <= min <= max, got {self.writes_per_transaction}")
        for name in ("delete_ratio", "dead_writer_ratio", "abort_ratio"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise InvalidInputError(f"{name} must be between 0 and 1, got {value}")
        if self.rows < 1 or self.columns < 1:
            raise InvalidInputError("rows and columns must be >= 1")
        if not self.tables:
            raise InvalidInputError("a workload needs at least one table")
        for strategy in self.tables.values():
            SweepStrategy.parse(strategy)
        return self


@dataclass
class WorkloadReport:
    committed: int = 0
    dead_writers: int = 0
    aborted: int = 0
    conflicts: int = 0
    """Commits refused by contention: write-write conflicts, roll-backs by another process, waits past the bound."""
    writes: int = 0
    deletes: int = 0
    open: list = field(default_factory=list)
    """The open SnapshotTransaction objects; their start timestamps in the JSON."""

    @field_serializer("open")
    def _open_starts(self, open_transactions: list) -> list[int]:
        return [t.start_timestamp for t in open_transactions]


def cell_for(row: int, col: int) -> Cell:
    return Cell(f"row{row:06d}".encode(), f"c{col:02d}".encode())


def stage_writes(txn: SnapshotTransaction, writes: Mapping[str, Mapping[Cell, bytes]]) -> None:
    """Stage ``writes`` (table -> cell -> value) in the open transaction ``txn``: one ``put`` of the values
    and one ``delete`` of the cells whose value is ``b""`` (the workload's spelling of a delete), per table."""
    for table, values in writes.items():
        puts = {c: v for c, v in values.items() if v != b""}
        dels = [c for c, v in values.items() if v == b""]
        if puts:
            txn.put(table, puts)
        if dels:
            txn.delete(table, dels)


def run_workload(store: AtlasStore, spec: WorkloadSpec, progress: Callable[[int], None] | None = None) -> WorkloadReport:
    spec.validate()
    rng = random.Random(spec.seed)
    for table, strategy in spec.tables.items():
        if not store.kvs.table_exists(table):
            store.create_table(table, strategy)
    tables = list(spec.tables)
    report = WorkloadReport()

    def random_writes(txn_rng: random.Random) -> dict[str, dict[Cell, bytes]]:
        n = txn_rng.randint(*spec.writes_per_transaction)
        out: dict[str, dict[Cell, bytes]] = {}
        for _ in range(n):
            table = txn_rng.choice(tables)
            cell = cell_for(txn_rng.randrange(spec.rows), txn_rng.randrange(spec.columns))
            if txn_rng.random() < spec.delete_ratio:
                out.setdefault(table, {})[cell] = b""
            else:
                out.setdefault(table, {})[cell] = txn_rng.randbytes(spec.value_bytes)
        return out

    for i in range(spec.transactions):
        writes = random_writes(rng)
        roll = rng.random()
        if roll < spec.dead_writer_ratio:
            dead_writer(store, writes)
            report.dead_writers += 1
        else:
            txn = store.transactions.begin()
            stage_writes(txn, writes)
            if roll < spec.dead_writer_ratio + spec.abort_ratio:
                txn.abort()
                report.aborted += 1
            else:
                try:
                    txn.commit()
                    report.committed += 1
                except (TransactionConflictError, TransactionAbortedError, TransactionFailedRetriableError):
                    # Workloads sharing tables (several processes): a conflict, a roll-back by another
                    # process (it met this still-open writer) or a writer it must wait for are all the
                    # expected outcomes of contention, counted and moved past; never fatal.
                    report.conflicts += 1
        report.writes += sum(len(v) for v in writes.values())
        report.deletes += sum(1 for v in writes.values() for x in v.values() if x == b"")
        if progress is not None:
            progress(i + 1)
    for _ in range(spec.open_transactions):
        txn = store.transactions.begin()
        txn.put(tables[0], {cell_for(rng.randrange(spec.rows), 0): b"open"})
        report.open.append(txn)
    return report


def dead_writer(store: AtlasStore, writes: dict[str, dict[Cell, bytes]]) -> int:
    """A writer that enqueued and wrote its cells, then died before putting a commit timestamp; returns its
    start timestamp. The workload's dead writers, and the tests' (one definition of the state sweep aborts)."""
    start = store.timestamps.fresh_timestamp()
    infos = [
        WriteInfo(table, cell, start, value == b"")
        for table, values in writes.items()
        if store.kvs.get_metadata(table).strategy.is_swept
        for cell, value in values.items()
    ]
    if infos:
        store.queue.writer.enqueue(infos)
    store.kvs.multi_put(writes, start)
    return start
