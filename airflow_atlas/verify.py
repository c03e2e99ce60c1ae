"""``run_verify``: what an operator checks after something went wrong (``atlas-sweep verify``).

Each check reads the store as it is now (full scans: a diagnostic, not a hot path) and reports
:class:`Finding` s - what is wrong, with the transaction, table and cell named, and what to do:

* ``rolled_back_but_committed``, ``committed_in_other_table``, ``rolled_back_in_other_table``: the
  transactions table of the other schema version holds entries. A transaction committed in one table and
  rolled back in the other (a process looking in the wrong table rolled it back and sweep deleted its
  writes: the loss of issue 16), committed only there (readers do not see its writes; sweep refuses to
  roll it back), or rolled back only there (a misconfigured process ran).
* ``corrupt_transaction_entry``: a transactions entry that cannot be decoded, named by start timestamp,
  transactions cell and a user cell it wrote; reported, never a crash of verify.
* ``resurrected_version``: a committed version below every shard's progress that a complete sweep removes
  (sweep had tombstoned it: it came back, e.g. a tombstone lost with a replica or a repair missed within
  ``gc_grace_seconds``; or sweep missed it). The detail says when it changes what readers see now.
* ``obsolete_version``: a leftover that is not committed data (an aborted or dead writer's version, a
  THOROUGH delete or sentinel): space, or a sweep bug.
* ``queue_rows_below_progress``: queue rows the cleaner should have removed.
* ``open_transaction_below_progress``: sweep passed a live registered transaction.
* ``quarantined_queue_entry`` (a warning, does not fail verify): a corrupt sweep-queue cell that sweep
  skipped, with what it pins: the write it described is never swept by targeted sweep, and while the
  shard's progress has not left its partition the cell stays queued and is skipped again every run.

Limits: a THOROUGH delete is removed together with every older version; if all of its tombstones are lost
and an older value comes back alone, the tables hold no trace of the delete and no check can see it.
The before/after comparisons of the oracle (:func:`airflow_atlas.oracle.compare`) need a history and are
run by the test suite, not here.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, Literal

from .errors import CorruptTransactionDataError
from .kvs.tables import SWEEPABLE_STRATEGY_NAMES
from .oracle import leftover_versions, load_commits

if TYPE_CHECKING:
    from .store import AtlasStore

Severity = Literal["violation", "warning"]
"""How bad a finding is (the JSON's string): a violation fails verification, a warning does not."""
VIOLATION: Final = "violation"
WARNING: Final = "warning"

CHECKS = (
    "transactions_schema",
    "corrupt_transaction_entries",
    "resurrected_versions",
    "obsolete_versions",
    "queue_rows_below_progress",
    "open_transaction_below_progress",
    "quarantined_queue_entries",
)


@dataclass
class Finding:
    check: str
    kind: str
    detail: str
    action: str
    severity: Severity = VIOLATION


@dataclass
class CheckResult:
    ok: bool = True
    count: int = 0
    info: dict = field(default_factory=dict)


@dataclass
class VerifyReport:
    """``ok`` is False when any finding is a violation (warnings are reported only). ``findings`` holds at
    most ``max_examples`` per check; ``checks`` has every count."""

    ok: bool
    store: str
    transactions_schema_version: int | None
    sweep_timestamps: dict
    limits: dict
    checks: dict[str, CheckResult]
    findings: list[Finding]


class _Collector:
    def __init__(self, max_examples: int):
        self.max_examples = max_examples
        self.checks = {name: CheckResult() for name in CHECKS}
        self.findings: list[Finding] = []

    def add(self, check: str, kind: str, detail: str, action: str, severity: Severity = VIOLATION) -> None:
        result = self.checks[check]
        result.count += 1
        if severity == VIOLATION:
            result.ok = False
        if sum(f.check == check for f in self.findings) < self.max_examples:
            self.findings.append(Finding(check, kind, detail, action, severity))


def run_verify(store: AtlasStore, *, max_examples: int = 20) -> VerifyReport:
    """Run every check on ``store`` (an :class:`~airflow_atlas.store.AtlasStore`)."""
    from .validation import check_int

    check_int(max_examples, "max_examples", 1)
    out = _Collector(max_examples)
    version = store.transactions_schema_version
    _check_schema_tables(store, out)
    shards = list(range(store.number_of_shards()))
    progress = {(shard, s): store.queue.progress.get_progress(shard, s) for shard in shards for s in SWEEPABLE_STRATEGY_NAMES}
    sweep_ts = store.sweep_timestamps.all()
    # Every shard swept everything below progress + 1, so a complete sweep to the lowest progress + 1 over
    # the shards (capped by the sweep timestamp) is what the tables must show.
    limits = {s: max(0, min(min(progress[(shard, s)] + 1 for shard in shards), sweep_ts[s])) for s in SWEEPABLE_STRATEGY_NAMES}
    corrupt: dict[int, CorruptTransactionDataError] = {}
    for leftover in leftover_versions(store, limits, corrupt=corrupt):
        committed_data = leftover.commit not in (None, -1) and not leftover.what.startswith("THOROUGH delete")
        if committed_data or leftover.visible:
            out.add("resurrected_versions", "resurrected_version", str(leftover),
                    "a committed version below every shard's progress: sweep tombstoned it (or failed to) and it is "
                    "present again - a lost tombstone (a replica lost or restored, repair not run within "
                    "gc_grace_seconds) or a sweep bug. On Cassandra run a full repair of the table, keep repairs within "
                    "gc_grace_seconds and sweep deletes at consistency ALL; a legacy full sweep of the table removes it")
        else:
            out.add("obsolete_versions", "obsolete_version", str(leftover),
                    "not visible to readers (an aborted or dead writer's version, a THOROUGH delete or sentinel): "
                    "space only. If it persists after the next sweep, report a sweep bug; a legacy full sweep of the "
                    "table removes it")
    for _start, exc in sorted(corrupt.items()):
        cells = exc.cells
        where = f"; it wrote {cells[0][0]} row {cells[0][1].row.hex()} column {cells[0][1].col.hex()}" if cells else ""
        more = f" (and {len(cells) - 1} more cell(s))" if len(cells) > 1 else ""
        out.add("corrupt_transaction_entries", "corrupt_transaction_entry", f"{exc}{where}{more}",
                "sweep and readers stop at this transaction until its entry is repaired (nothing of it is deleted "
                "meanwhile): rewrite the entry as the message says once its outcome is known")
    _check_queue(store, out, progress)
    _check_quarantine(store, out, progress)
    ok = all(c.ok for c in out.checks.values())
    return VerifyReport(
        ok=ok,
        store=store.describe(),
        transactions_schema_version=version,
        sweep_timestamps=sweep_ts,
        limits=limits,
        checks=out.checks,
        findings=out.findings,
    )


def _check_schema_tables(store: AtlasStore, out: _Collector) -> None:
    """Entries in the transactions table the store does not use, against the one it does."""
    from .errors import InvalidInputError
    from .transactions import encoding as enc
    from .transactions.service import TransactionServiceV1, TransactionServiceV2

    service = store.transaction_service
    other_cls = TransactionServiceV1 if isinstance(service, TransactionServiceV2) else TransactionServiceV2
    out.checks["transactions_schema"].info = {"table": service.table, "other_table": other_cls.table}
    if not store.kvs.table_exists(other_cls.table):
        return
    start_of = enc.v1_start_of if other_cls is TransactionServiceV1 else enc.v2_start_of
    other = other_cls(store.kvs, cache_size=0)
    entries: dict[int, int] = {}
    for cell, _ts, raw in store.kvs.scan(other_cls.table):
        try:
            start = start_of(cell)
        except InvalidInputError as exc:
            out.add("corrupt_transaction_entries", "corrupt_transaction_entry",
                    f"{other_cls.table}: cell row {cell.row.hex()} column {cell.col.hex()} is not a transactions cell ({exc})",
                    f"{other_cls.table} is not used by this store; inspect it and delete the cell")
            continue
        try:
            entries[start] = other.decode_entry(start, raw)
        except CorruptTransactionDataError as exc:
            out.add("corrupt_transaction_entries", "corrupt_transaction_entry", str(exc),
                    f"{other_cls.table} is not used by this store; it cannot decide this transaction")
    corrupt: dict = {}
    ours = load_commits(service, entries, corrupt)
    for _start, error in sorted(corrupt.items()):
        out.add("corrupt_transaction_entries", "corrupt_transaction_entry", str(error),
                "rewrite the entry once its outcome is known (see the message)")
    mine_name = f"{service.table} (this store's table, schema version {store.transactions_schema_version})"
    for start, theirs in sorted(entries.items()):
        if start in corrupt:
            continue
        mine = ours.get(start)
        if theirs != enc.ABORTED and mine == enc.ABORTED:
            out.add("transactions_schema", "rolled_back_but_committed",
                    f"transaction {start} committed at {theirs} according to {other_cls.table}, but {mine_name} records "
                    "it rolled back: its writes were deleted by sweep or are invisible to readers",
                    "stop every process not using this store's transactions schema version; restore the writes of "
                    f"transaction {start} from a backup of the tables it wrote (versions at timestamp {start})")
        elif theirs == enc.ABORTED and mine not in (None, enc.ABORTED):
            out.add("transactions_schema", "rolled_back_but_committed",
                    f"transaction {start} committed at {mine} according to {mine_name}, but a process using "
                    f"{other_cls.table} rolled it back: a sweep doing so deleted its writes (readers may miss them)",
                    "data loss: stop every process not using this store's transactions schema version; restore the "
                    f"writes of transaction {start} from a backup of the tables it wrote (versions at timestamp {start})")
        elif theirs != enc.ABORTED and mine is None:
            out.add("transactions_schema", "committed_in_other_table",
                    f"transaction {start} committed at {theirs} in {other_cls.table}, which this store does not use; "
                    f"{service.table} has no entry: readers do not see its writes and sweep refuses to roll it back",
                    "a process wrote with the other transactions schema version: stop it; if this transaction must "
                    f"count, record its commit in {service.table} (put-unless-exists) before anything rolls it back")
        elif theirs == enc.ABORTED and mine is None:
            out.add("transactions_schema", "rolled_back_in_other_table",
                    f"transaction {start} was rolled back through {other_cls.table}, which this store does not use; "
                    f"{service.table} has no entry for it",
                    "a process used the other transactions schema version: stop it. If this transaction was still "
                    "running then and committed later, a sweep by that process deleted its writes: restore them")


def _check_queue(store: AtlasStore, out: _Collector, progress: dict[tuple[int, str], int]) -> None:
    for (shard, s), p in sorted(progress.items()):
        if p < 0:
            continue
        found = store.queue.cleaner.queue_rows_below(shard, s, p)
        if found:
            out.add("queue_rows_below_progress", "queue_rows_below_progress",
                    f"shard {shard} {s} (progress {p}): fine partitions {found.cells_rows[:5]}, dedicated rows "
                    f"{found.dedicated_rows[:5]}, coarse partitions {found.timestamps_rows[:5]} still queued",
                    "a cleaner died before finishing: the next sweep iteration that crosses a partition cleans "
                    "them (queue reconcile cleans them at once)")
    oldest = store.registry.oldest_open()
    if oldest is not None:
        for (shard, s), p in sorted(progress.items()):
            if p >= oldest.start_ts:
                out.add("open_transaction_below_progress", "open_transaction_below_progress",
                        f"shard {shard} {s}: progress {p} is at or above open transaction {oldest.start_ts} "
                        f"(holder {oldest.holder})",
                        "sweep may have removed versions this transaction reads: abort it; report a sweep bug "
                        "(check the clocks of the machines: registrations are wall-clock leases)")


def _check_quarantine(store: AtlasStore, out: _Collector, progress: dict[tuple[int, str], int]) -> None:
    from .errors import CorruptQueueDataError
    from .sweep.queue.constants import FINE_PARTITION
    from .sweep.queue.queue_tables import decode_cells_row

    try:
        records = store.history.quarantined(limit=1000)
    except Exception as exc:  # the history table is optional for verification
        out.checks["quarantined_queue_entries"].info = {"error": f"could not read quarantine records: {exc}"}
        return
    seen = set()
    for r in records:
        key = (r.get("shard"), r.get("strategy"), r.get("row_hex"), r.get("col_hex"))
        if key in seen:
            continue
        seen.add(key)
        shard, strategy = r.get("shard"), r.get("strategy")
        p = progress.get((shard, strategy)) if isinstance(shard, int) and isinstance(strategy, str) else None
        span = None
        if r.get("start_ts") is not None:
            span = (r["start_ts"], r["start_ts"])
        else:
            try:
                row = decode_cells_row(bytes.fromhex(r.get("row_hex") or ""))
                first = row.timestamp_partition if row.metadata.dedicated_row else row.timestamp_partition * FINE_PARTITION
                last = first if row.metadata.dedicated_row else first + FINE_PARTITION - 1
                span = (first, last)
            except (CorruptQueueDataError, ValueError):
                span = None
        still = p is None or span is None or p < span[1]
        pins = (f"writes started in {span[0]}..{span[1]}" if span else "writes of an unknown start timestamp")
        out.add("quarantined_queue_entries", "quarantined_queue_entry",
                f"shard {shard} {strategy}: {r.get('table')} row {r.get('row_hex')} column {r.get('col_hex')}: "
                f"{r.get('reason')}; it described {pins}; "
                + ("still queued (progress "
                   f"{p} has not left its partition: skipped again every run)" if still else f"progress {p} has passed it"),
                "the write it described is never swept by targeted sweep (its older versions stay): run a legacy "
                "full sweep of the tables written then; the queue row is removed once progress leaves its partition",
                WARNING)
