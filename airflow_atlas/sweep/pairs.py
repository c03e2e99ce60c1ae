"""SweepPairs: one (shard, strategy) pair of the targeted sweep seen from outside an iteration - its lock's
name, the check of its arguments, who holds it, and what it has left to sweep.

Read-only: nothing here writes to the store, so nothing here needs a crash-safety argument. The
iteration itself (which writes) is :class:`~airflow_atlas.sweep.targeted.TargetedSweeper`, a subclass.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..encoding import LONG_MAX
from ..errors import InvalidInputError
from ..kvs.tables import SweepStrategy
from ..validation import check_int
from .results import LockHolderInfo, holder_process_gone

if TYPE_CHECKING:
    from ..store import AtlasStore


class SweepPairs:
    def __init__(self, store: AtlasStore) -> None:
        self._store = store
        self._queue = store.queue

    # ----- naming and validation -------------------------------------------------------------------
    @staticmethod
    def lock_name(shard: int, strategy: SweepStrategy | str) -> str:
        return f"sweep/{SweepStrategy.parse(strategy).value.lower()}/{int(shard)}"

    def _check(self, shard: int, strategy: SweepStrategy | str, serial: bool = True) -> tuple[int, SweepStrategy]:
        strategy = SweepStrategy.parse_swept(strategy)
        check_int(shard, "shard")
        shards = self._queue.progress.get_number_of_shards(serial=serial)
        if not 0 <= shard < shards:
            raise InvalidInputError(f"shard {shard} is out of range: this store has {shards} shard(s) (0..{shards - 1})")
        return shard, strategy

    def check_sweep_ts(self, sweep_ts: int | None) -> None:
        """A caller-supplied sweep timestamp (e.g. from XCom) must be a non-negative integer that the
        timestamp service has issued: a value from the future would sweep versions open transactions
        still read. (Only the compute-sweep-timestamps step should supply it; the engine cannot check a
        past value against the immutable timestamp cheaply, because that may dip briefly while a
        transaction registers.)"""
        if sweep_ts is None:
            return
        check_int(sweep_ts, "sweep_ts", 0, LONG_MAX)
        issued = self._store.timestamps.current_bound()
        if sweep_ts > issued:
            raise InvalidInputError(
                f"sweep_ts {sweep_ts} is above every timestamp issued so far ({issued}): "
                "pass the sweep timestamp computed by the store (sweep_timestamps), never a guess"
            )

    def lock_holder(self, shard: int, strategy: SweepStrategy | str) -> LockHolderInfo:
        """Who holds the pair's lease now (all None when nobody does)."""
        shard, strategy = self._check(shard, strategy)
        state = self._store.locks.describe(self.lock_name(shard, strategy))
        if state is None or state.expired or not state.holder:
            return LockHolderInfo(None, None, None)
        return LockHolderInfo(state.holder, state.expires_at, holder_process_gone(state.holder))

    def has_sweepable_work(self, shard: int, strategy: SweepStrategy | str, sweep_ts: int | None = None) -> bool:
        shard, strategy = self._check(shard, strategy)
        if sweep_ts is None:
            sweep_ts = self._store.sweep_timestamps.sweep_timestamp(strategy)
        old = self._queue.progress.get_progress(shard, strategy)
        if old >= sweep_ts - 1:
            return False
        return self._queue.reader.next_fine_partition(shard, strategy, old, sweep_ts) is not None

    def sweepable_entries(
        self, shard: int, strategy: SweepStrategy | str, sweep_ts: int | None = None, *, cap: int | None = None,
        serial: bool = True,
    ) -> int:
        """THE count of a pair's sweepable entries: queued writes with a start timestamp above the pair's
        progress and below ``sweep_ts`` (default: the strategy's sweep timestamp now). Counting stops at
        ``cap`` (the result is then ``cap``, meaning "at least"). Used by ``status``, the CLI's progress
        bar and the operators' in-task / Spark decision. ``serial=False``: progress and shard count read
        without Paxos (a status's fallback, :mod:`airflow_atlas.status.compute`)."""
        shard, strategy = self._check(shard, strategy, serial)
        if sweep_ts is None:
            sweep_ts = self._store.sweep_timestamps.sweep_timestamp(strategy)
        progress = self._queue.progress.get_progress(shard, strategy, serial=serial)
        if progress >= sweep_ts - 1:
            return 0
        if cap is None:
            return self._queue.reader.count_entries(shard, strategy, progress, sweep_ts)
        if cap <= 0:
            return 0
        return self._queue.reader.count_entries(shard, strategy, progress, sweep_ts, cap=cap)
