"""Quarantine of corrupt sweep-queue cells: a cell the reader cannot decode is skipped (never guessed at),
recorded once in the sweep history's quarantine and alerted once (ERROR log). Skipping is safe for
deletion - an undecodable entry names no version to delete, so nothing is deleted on its account; the
version it stood for stays until an operator repairs or scrubs it (``atlas-sweep verify`` lists it)."""
from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..kvs.tables import SweepStrategy

if TYPE_CHECKING:
    from .history import SweepHistory
    from .queue.reader import CorruptQueueCell

log = logging.getLogger(__name__)


def quarantine_corrupt(
    history: SweepHistory, shard: int, strategy: SweepStrategy, corrupt: Iterable[CorruptQueueCell]
) -> None:
    """Record and alert corrupt cells once. A cell the reader meets again (an undecodable
    ``_sweep_timestamps`` column stays until progress leaves its coarse partition; a corrupt cell in a
    partition the shard is blocked in is re-read every run) is not re-recorded or re-alerted while its
    quarantine record lives (the history's TTL): a warning says it is still there."""
    records = [c._asdict() for c in corrupt]
    try:
        seen = {
            (r.get("shard"), r.get("strategy"), r.get("row_hex"), r.get("col_hex"), r.get("reason"))
            for r in history.quarantined(limit=1000)
        }
    except Exception as exc:  # cannot tell: alert again rather than stay silent
        log.warning("could not read earlier quarantine records: %s", exc)
        seen = set()
    key = lambda r: (shard, strategy.value, r.get("row_hex"), r.get("col_hex"), r.get("reason"))  # noqa: E731
    new = [r for r in records if key(r) not in seen]
    if len(new) < len(records):
        log.warning(
            "%d corrupt sweep-queue cell(s) in shard %d (%s) quarantined earlier are still in the queue; skipped again",
            len(records) - len(new),
            shard,
            strategy.value,
        )
    if not new:
        return
    log.error(
        "ALERT: %d corrupt sweep-queue cell(s) in shard %d (%s) quarantined and skipped: %s",
        len(new),
        shard,
        strategy.value,
        new[:5],
    )
    try:
        history.quarantine(shard, strategy.value, new)
    except Exception as exc:
        log.warning("could not persist quarantine records: %s", exc)
