"""Commit timestamps of a batch of writers, in bulk, aborting the ones with no commit entry.

Shared by the targeted and the legacy sweeper: a writer below the sweep (or immutable) timestamp with no
commit entry can no longer commit, so it is rolled back with put-unless-exists(-1); if it committed
meanwhile, its commit timestamp wins (spec 000, step 3).

Rolling back deletes the writer's values, so before any rollback the sweeper makes sure it looked in the
right place (issue 16, item 1):

1. **Other schema table.** Writers without an entry in the store's transactions table are looked up in
   the other schema version's table (when it exists). An entry there means some process committed to the
   wrong table: nothing is rolled back (RollbackRefusedError naming the transactions and both tables).
2. **Rollback guard.** A batch in which the writers without any entry are both at least
   ``rollback_guard_min_transactions`` and more than ``rollback_guard_max_fraction`` of the batch's
   transactions is refused the same way. Dead writers are normal (a process crashing between enqueue and
   commit) but rare; a batch that is nearly all dead writers is the signature of reading the wrong or a
   lost/truncated transactions table. An operator who knows the writers really died raises the settings
   for one run (``rollback_guard_max_fraction=1`` disables the guard). The guard applies to dry runs too.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import CorruptTransactionDataError, KeyAlreadyExistsError, RollbackRefusedError

if TYPE_CHECKING:
    from ..config import StoreConfig
    from ..transactions.service import TransactionService
    from .queue.write_info import WriteInfo

ABORTED = -1


@dataclass(frozen=True)
class RollbackGuard:
    """Refuse a batch whose writers without a commit entry are >= ``min_transactions`` and more than
    ``max_fraction`` of its transactions (settings ``rollback_guard_min_transactions`` and
    ``rollback_guard_max_fraction``)."""

    min_transactions: int
    max_fraction: float

    @classmethod
    def from_config(cls, config: StoreConfig) -> RollbackGuard:
        return cls(config.rollback_guard_min_transactions, config.rollback_guard_max_fraction)

    def check(self, missing: list[int], total: int, table: str) -> None:
        if not missing or len(missing) < self.min_transactions or len(missing) <= self.max_fraction * total:
            return
        raise RollbackRefusedError(
            f"refusing to roll back {len(missing)} of the {total} transactions of this batch (e.g. start timestamps "
            f"{missing[:5]}): none has a commit entry in {table}. Rolling them back would delete all their writes. "
            "Likely cause: the transactions table is not the one these transactions committed to (a restored, "
            "truncated or lost transactions table, or a process using another transactions schema version); run "
            "'atlas-sweep verify'. Nothing was rolled back or deleted. Only if these writers really died (a mass "
            f"crash), raise rollback_guard_min_transactions (now {self.min_transactions}) or "
            f"rollback_guard_max_fraction (now {self.max_fraction}; 1 disables the guard) for one run"
        )


def resolve_commits(
    service: TransactionService, starts: Iterable[int], *, dry_run: bool = False, guard: RollbackGuard | None = None
) -> tuple[dict[int, int], int]:
    """Return ({start: commit or ABORTED}, number of transactions this call aborted).

    ``dry_run`` treats missing entries as aborted without writing anything. ``guard`` (None: no threshold)
    is checked before anything is rolled back; the other schema table is always consulted."""
    ordered = sorted(set(starts))
    commits = dict(service.get_many(ordered)) if ordered else {}
    missing = [s for s in ordered if s not in commits]
    if missing:
        other_table, elsewhere = service.other_schema_entries(missing)
        if elsewhere:
            found = sorted(elsewhere.items())
            raise RollbackRefusedError(
                f"refusing to roll back {len(elsewhere)} transaction(s) with no commit entry in {service.table}: "
                f"they have one in {other_table} (start -> commit: {dict(found[:5])}), the table of the other "
                "transactions schema version. Some process wrote to the wrong table; rolling them back would delete "
                "committed writes. Nothing was rolled back or deleted. Run 'atlas-sweep verify' and stop every "
                "process that is not using this store's transactions_schema_version"
            )
        if guard is not None:
            guard.check(missing, len(ordered), service.table)
    aborted_now = 0
    for start in missing:
        if dry_run:
            commits[start] = ABORTED
            continue
        try:
            service.put_unless_exists(start, ABORTED)
            commits[start] = ABORTED
            aborted_now += 1
        except KeyAlreadyExistsError:
            value = service.get(start)
            commits[start] = ABORTED if value is None else value
    return commits, aborted_now


def with_writes_named(exc: CorruptTransactionDataError, entries: Iterable[WriteInfo]) -> CorruptTransactionDataError:
    """``exc`` (a corrupt transactions entry met while sweeping) with a user cell its transaction wrote,
    from the batch's queue entries, added to the message and as ``user_table``/``user_row_hex``/
    ``user_col_hex`` attributes (None when the batch has none)."""
    writes = [w for w in entries if w.start_ts == exc.start_ts]
    if not writes:
        return exc
    first = writes[0]
    more = f" and {len(writes) - 1} more cell(s) in this batch" if len(writes) > 1 else ""
    named = CorruptTransactionDataError(
        f"{exc} (the transaction wrote {first.table} row {first.cell.row.hex()} column {first.cell.col.hex()}{more})",
        table=exc.table, start_ts=exc.start_ts, row_hex=exc.row_hex, col_hex=exc.col_hex, value_hex=exc.value_hex,
    )
    named.user_table, named.user_row_hex, named.user_col_hex = first.table, first.cell.row.hex(), first.cell.col.hex()
    return named
