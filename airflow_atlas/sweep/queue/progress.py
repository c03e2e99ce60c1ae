"""ShardProgress: targeted sweep's progress per (shard, strategy) and the number of shards (spec 000,
"Sweep Progress (Per Shard) Table").

Both live in the LWT table ``_sweep_progress`` and are written only by check-and-set loops, so every
value can only grow: a request to set a lower (or equal) value changes nothing and returns the value
already persisted. Reads used by the loops are SERIAL (linearizable on Cassandra).

Strategy arguments are :class:`~airflow_atlas.kvs.tables.SweepStrategy` (``CONSERVATIVE`` or ``THOROUGH``,
or their names); ``NOTHING`` has no queue and raises InvalidInputError.
"""
from __future__ import annotations

from ...encoding import LONG_MAX
from ...errors import CorruptQueueDataError, StoreUnavailableError
from ...kvs.api import Cell, KeyValueService
from ...kvs.consistency import Operation
from ...kvs.tables import SweepStrategy
from ...validation import check_int
from .constants import INITIAL_PROGRESS, MAX_SHARDS
from .queue_tables import (
    NUMBER_OF_SHARDS_CELL,
    SWEEP_PROGRESS,
    conservative_flag,
    decode_progress_value,
    encode_progress_value,
    progress_cell,
)

DEFAULT_NUMBER_OF_SHARDS = 1
MAX_CAS_ATTEMPTS = 64
"""A check-and-set loop gives up (StoreUnavailableError) after this many lost races: values only grow,
so each lost race means another writer advanced the value; 64 in a row means something is wrong."""


def _check_shard(shard: object) -> int:
    return check_int(shard, "shard", 0, MAX_SHARDS - 1)


class ShardProgress:
    """Persisted sweep progress and shard count on a :class:`KeyValueService` (table ``_sweep_progress``)."""

    def __init__(self, kvs: KeyValueService):
        self.kvs = kvs

    # ----- progress ---------------------------------------------------------------------------------
    def get_progress(self, shard: int, strategy: SweepStrategy | str, *, serial: bool = True) -> int:
        """The timestamp up to which (inclusive) the shard and strategy were swept, or
        INITIAL_PROGRESS (-1) when never swept. ``serial=False``: a plain read, no Paxos (may miss a
        check-and-set in flight; for a read-only report that must answer when Paxos does not)."""
        cell = progress_cell(_check_shard(shard), conservative_flag(strategy))
        raw = self._read(cell, serial)
        return INITIAL_PROGRESS if raw is None else decode_progress_value(raw)

    def update_progress(self, shard: int, strategy: SweepStrategy | str, value: int) -> int:
        """Raise the progress of the shard and strategy to ``value`` unless it is already at least that.

        Returns the persisted progress after the call (``>= value``). Raises InvalidInputError for a value
        below -1 or above the largest long."""
        check_int(value, "progress", INITIAL_PROGRESS, LONG_MAX)
        cell = progress_cell(_check_shard(shard), conservative_flag(strategy))
        return self._increase(cell, value, default=INITIAL_PROGRESS, what=f"progress of shard {shard}")

    # ----- number of shards ---------------------------------------------------------------------------
    def get_number_of_shards(self, *, serial: bool = True) -> int:
        """The number of shards the queue uses (1 until raised); ``serial`` as for :meth:`get_progress`."""
        raw = self._read(NUMBER_OF_SHARDS_CELL, serial)
        if raw is None:
            return DEFAULT_NUMBER_OF_SHARDS
        return self._check_shard_count(decode_progress_value(raw))

    def update_number_of_shards(self, number_of_shards: int) -> int:
        """Raise the shard count to ``number_of_shards`` (1..256); it is never lowered. Returns the
        persisted count after the call."""
        check_int(number_of_shards, "number of shards", 1, MAX_SHARDS)
        result = self._increase(
            NUMBER_OF_SHARDS_CELL, number_of_shards, default=DEFAULT_NUMBER_OF_SHARDS, what="number of shards"
        )
        return self._check_shard_count(result)

    # ----- internals -----------------------------------------------------------------------------------
    @staticmethod
    def _check_shard_count(value: int) -> int:
        if not 1 <= value <= MAX_SHARDS:
            raise CorruptQueueDataError(f"persisted number of shards {value} is outside 1..{MAX_SHARDS}")
        return value

    def _read(self, cell: Cell, serial: bool = True) -> bytes | None:
        return self.kvs.get_lwt(SWEEP_PROGRESS, [cell], serial=serial).get(cell)

    def _increase(self, cell: Cell, value: int, *, default: int, what: str) -> int:
        new = encode_progress_value(value)
        for _ in range(MAX_CAS_ATTEMPTS):
            raw = self._read(cell)
            current = default if raw is None else decode_progress_value(raw)
            if current >= value:
                return current
            if self.kvs.check_and_set(SWEEP_PROGRESS, cell, raw, new, operation=Operation.LWT_COMMIT):
                return value
        raise StoreUnavailableError(
            f"could not update the {what} to {value}: lost {MAX_CAS_ATTEMPTS} check-and-set races in a row"
        )
