"""SweepActivity: a sweep run's marks of the times it ran, so that the application's latency *without* sweep
(its baseline, issue 31 item 2: "learned where no sweep ran: between scheduled runs, at night") can be told
from its latency during sweeps.

Every non-dry targeted run that holds its pair claims ``[now, now + CLAIM_SECONDS]`` in the store's
``_app_latency`` table (row ``sweeping/<minute>``, :func:`~airflow_atlas.transactions.latency_table.write_sweep_mark`)
when it starts, claims again whenever less than half a claim is left (:meth:`SweepActivity.touch`, called by
the sweeper between iterations and between the chunks of a paced batch's deletes), and at its end rewrites its
last claim to end there (:meth:`SweepActivity.close`). :func:`~airflow_atlas.transactions.latency_table.read_quiet_latency`
pools only the summaries no claim overlaps.

Crash safety: a run killed mid-sweep leaves a claim that reaches up to :data:`CLAIM_SECONDS` past its last
touch (never short of it: the claim is written before the sweeping it covers), so its work is never counted
as quiet; at worst a few quiet seconds are lost. Writes are TTL'd like the summaries (``app_latency_ttl_seconds``)
and cost one small write per half claim. A mark that cannot be written (a store initialised before the table
existed, a role without the grant) is logged once and marking stops for the run: marks never fail a sweep.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable

MarkWriter = Callable[[str, float, float, int], None]
"""``(holder, start, until, ttl_seconds)``: writes one claim (the store wires in
:func:`~airflow_atlas.transactions.latency_table.write_sweep_mark` on its key-value service; the transactions
sit above the sweep in the engine's layers, so the writer is handed down)."""

log = logging.getLogger(__name__)

CLAIM_SECONDS = 30.0
"""How far ahead one claim reaches: longer than any wait between two touches (a paced wait is at most a third
of the lock lease, 20 s at the default lease), so a live run is always covered; a killed run's claim runs this
far past its last touch. At most the table's ``MAX_MARK_SECONDS``."""


class SweepActivity:
    """The marks of one sweep run (see the module doc). ``clock`` is wall-clock seconds."""

    def __init__(self, write: MarkWriter, holder: str, ttl_seconds: int, *,
                 clock: Callable[[], float] = time.time, claim_seconds: float = CLAIM_SECONDS, enabled: bool = True):
        self._write_mark = write
        self._holder = holder
        self._ttl = ttl_seconds
        self._clock = clock
        self._claim = claim_seconds
        self._start: float | None = None
        self._until = 0.0
        self._broken = not enabled  # a dry run marks nothing

    def touch(self) -> None:
        """Claim the next :data:`CLAIM_SECONDS` when less than half of the current claim is left."""
        now = self._clock()
        if self._until - now < self._claim / 2:
            self._write(now, now + self._claim)

    def close(self) -> None:
        """End the last claim now (the run is over)."""
        if self._start is not None:
            now = self._clock()
            self._write(self._start, max(self._start, min(now, self._until)))

    def _write(self, start: float, until: float) -> None:
        if self._broken:
            return
        try:
            self._write_mark(self._holder, start, until, self._ttl)
        except Exception as exc:
            self._broken = True
            log.warning("could not mark the sweep in the application latency table (its quiet windows will "
                        "include this run): %s", exc)
            return
        self._start, self._until = start, until


__all__ = ["CLAIM_SECONDS", "MarkWriter", "SweepActivity"]
