"""The transaction service: start timestamp -> commit timestamp (spec 004).

A transaction with no entry is still running (or died: whoever finds it rolls it back by putting ABORTED).
An entry is written once with put-unless-exists and never changes, so committed and aborted results are final
and are cached in a bounded LRU. Absent results are never cached.

Two layouts: :class:`TransactionServiceV1` (``_transactions``, one row per transaction) and
:class:`TransactionServiceV2` (``_transactions2``, the tickets encoding spreading writes over 16 rows per
partition of 25M timestamps). Reads of many timestamps go to the store in one batched call.
"""
from __future__ import annotations

import functools
import threading
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Callable, Iterable

from ..encoding import LONG_MAX
from ..errors import CorruptTransactionDataError, InvalidInputError
from ..kvs.api import Cell, KeyValueService
from ..kvs.tables import SweepStrategy, TableMetadata, WriteMode
from . import encoding as enc
from .encoding import ABORTED  # noqa: F401  (re-exported: services speak ABORTED)

TRANSACTIONS_TABLE = "_transactions"
TRANSACTIONS2_TABLE = "_transactions2"

TRANSACTIONS_TABLE_METADATA = TableMetadata(strategy=SweepStrategy.NOTHING, write_mode=WriteMode.LWT)
TRANSACTIONS2_TABLE_METADATA = TableMetadata(
    strategy=SweepStrategy.NOTHING,
    write_mode=WriteMode.LWT,
    cassandra_options={
        "bloom_filter_fp_chance": 0.0001,
        "min_index_interval": 1,
        "max_index_interval": 1,
        "compression": {"class": "LZ4Compressor", "chunk_length_in_kb": 64},
    },
)

DEFAULT_CACHE_SIZE = 1_000_000


class _LruCache:
    """A thread-safe bounded map of final results (start -> commit)."""

    def __init__(self, max_entries: int):
        if max_entries < 0:
            raise InvalidInputError(f"cache size must be >= 0, got {max_entries}")
        self._max = max_entries
        self._data: OrderedDict[int, int] = OrderedDict()
        self._lock = threading.Lock()

    def get_many(self, keys: Iterable[int]) -> dict[int, int]:
        found: dict[int, int] = {}
        with self._lock:
            for k in keys:
                v = self._data.get(k)
                if v is not None:
                    self._data.move_to_end(k)
                    found[k] = v
        return found

    def put_many(self, items: dict[int, int]) -> None:
        if self._max == 0:
            return
        with self._lock:
            for k, v in items.items():
                self._data[k] = v
                self._data.move_to_end(k)
            while len(self._data) > self._max:
                self._data.popitem(last=False)

    def __len__(self) -> int:
        return len(self._data)


class TransactionService(ABC):
    """Where a transaction's fate is recorded. Thread-safe.

    ``get``/``get_many`` return the commit timestamp, ``ABORTED`` (-1) for a rolled-back transaction, and
    nothing for one without an entry. ``serial=True`` reads at SERIAL consistency: use it to learn the outcome
    after losing a put-unless-exists race (a plain read may miss an in-flight Paxos write).
    """

    table: str
    table_metadata: TableMetadata
    encoding_help: str

    @staticmethod
    @abstractmethod
    def cell_of(start: int) -> Cell: ...

    def __init__(self, kvs: KeyValueService, *, cache_size: int = DEFAULT_CACHE_SIZE):
        self._kvs = kvs
        self._cache = _LruCache(cache_size)

    def ensure_tables(self) -> None:
        self._kvs.create_table(self.table, self.table_metadata)

    def get(self, start: int, *, serial: bool = False) -> int | None:
        return self.get_many([start], serial=serial).get(start)

    def get_many(self, starts: Iterable[int], *, serial: bool = False) -> dict[int, int]:
        wanted = {enc.check_start_timestamp(s) for s in starts}
        if not wanted:
            return {}
        found = self._cache.get_many(wanted)
        missing = wanted.difference(found)
        if missing:
            loaded = self._load(sorted(missing), serial)
            self._cache.put_many(loaded)
            found.update(loaded)
        return found

    def put_unless_exists(self, start: int, commit: int) -> None:
        """Record the transaction's fate. Raises KeyAlreadyExistsError if it already has one."""
        enc.check_start_timestamp(start)
        enc.check_commit_timestamp(start, commit)
        self._store(start, commit)
        self._cache.put_many({start: commit})

    def _decode(self, start: int, raw: bytes, decode: Callable[[bytes], int]) -> int:
        """``decode(raw)``, checked: a transaction's entry is ABORTED or a commit timestamp at or above its
        start. Anything else (undecodable bytes, a commit below the start, a negative value, an overflow)
        raises CorruptTransactionDataError naming the table, the start timestamp and the entry's cell, with
        what to do - never a bare decoder error, and never mistaken for a commit."""
        try:
            commit = decode(raw)
        except InvalidInputError as exc:
            problem = f"cannot be decoded ({exc})"
        else:
            if commit == enc.ABORTED or start <= commit <= LONG_MAX:
                return commit
            problem = f"decodes to {commit}, which is neither -1 (aborted) nor a commit timestamp in {start}..{LONG_MAX}"
        cell = self.cell_of(start)
        value = bytes(raw).hex()
        raise CorruptTransactionDataError(
            f"{self.table}: the entry of the transaction with start timestamp {start} (row {cell.row.hex()}, "
            f"column {cell.col.hex()}, value {value[:32] or 'empty'}{'...' if len(value) > 32 else ''}) {problem}. "
            "Its outcome is unknown, so readers and sweep stop at it and nothing of it is deleted. What to do: "
            "find the outcome (the writer's logs, or a backup of this table), then rewrite this one cell "
            f"({self.encoding_help}); 'atlas-sweep verify' lists every corrupt entry",
            table=self.table, start_ts=start, row_hex=cell.row.hex(), col_hex=cell.col.hex(), value_hex=value,
        )

    def other_schema_entries(self, starts: Iterable[int]) -> tuple[str, dict[int, int]]:
        """(table, entries) of ``starts`` in the *other* schema version's table, which this store does not
        use: an entry there means a process wrote to the wrong table, and the transaction must not be
        rolled back on the strength of this table's silence. Empty when that table does not exist."""
        other_cls = TransactionServiceV1 if isinstance(self, TransactionServiceV2) else TransactionServiceV2
        starts = sorted({enc.check_start_timestamp(s) for s in starts})
        if not starts or not self._kvs.table_exists(other_cls.table):
            return other_cls.table, {}
        return other_cls.table, other_cls(self._kvs, cache_size=0)._load(starts, False)

    @property
    def cached_entries(self) -> int:
        return len(self._cache)

    @abstractmethod
    def decode_entry(self, start: int, raw: bytes) -> int:
        """The checked outcome stored as ``raw`` for ``start`` (CorruptTransactionDataError if invalid)."""

    @abstractmethod
    def _load(self, starts: list[int], serial: bool) -> dict[int, int]: ...

    @abstractmethod
    def _store(self, start: int, commit: int) -> None: ...


class TransactionServiceV1(TransactionService):
    """``_transactions``: row VAR_LONG(start), column ``t``, value VAR_LONG(commit) (-1 aborted)."""

    table = TRANSACTIONS_TABLE
    table_metadata = TRANSACTIONS_TABLE_METADATA
    encoding_help = "VAR_LONG of the commit timestamp, or of -1 if it was rolled back"
    cell_of = staticmethod(enc.v1_cell)

    def _load(self, starts: list[int], serial: bool) -> dict[int, int]:
        cells = {enc.v1_cell(s): s for s in starts}
        raw = self._kvs.get_lwt(self.table, list(cells), serial=serial)
        return {cells[c]: self._decode(cells[c], v, enc.v1_decode_value) for c, v in raw.items()}

    def _store(self, start: int, commit: int) -> None:
        self._kvs.put_unless_exists(self.table, {enc.v1_cell(start): enc.v1_encode_value(commit)})

    def decode_entry(self, start: int, raw: bytes) -> int:
        return self._decode(start, raw, enc.v1_decode_value)


class TransactionServiceV2(TransactionService):
    """``_transactions2``: the tickets encoding; value VAR_LONG(commit - start), empty for aborted."""

    table = TRANSACTIONS2_TABLE
    table_metadata = TRANSACTIONS2_TABLE_METADATA
    encoding_help = "VAR_LONG of commit timestamp minus start timestamp, or empty if it was rolled back"
    cell_of = staticmethod(enc.v2_cell)

    def _load(self, starts: list[int], serial: bool) -> dict[int, int]:
        cells = {enc.v2_cell(s): s for s in starts}
        # One call for every cell, grouped by row so the backend can batch each partition.
        ordered = sorted(cells, key=lambda c: (c.row, c.col))
        raw = self._kvs.get_lwt(self.table, ordered, serial=serial)
        return {
            cells[c]: self._decode(cells[c], v, functools.partial(enc.v2_decode_value, cells[c]))
            for c, v in raw.items()
        }

    def _store(self, start: int, commit: int) -> None:
        self._kvs.put_unless_exists(self.table, {enc.v2_cell(start): enc.v2_encode_value(start, commit)})

    def decode_entry(self, start: int, raw: bytes) -> int:
        return self._decode(start, raw, lambda value: enc.v2_decode_value(start, value))


def make_transaction_service(
    kvs: KeyValueService, version: int = 2, *, cache_size: int = DEFAULT_CACHE_SIZE, create_tables: bool = True
) -> TransactionService:
    """The transaction service of schema ``version`` (1 or 2), with its table created unless told not to."""
    if version == 1:
        service: TransactionService = TransactionServiceV1(kvs, cache_size=cache_size)
    elif version == 2:
        service = TransactionServiceV2(kvs, cache_size=cache_size)
    else:
        raise InvalidInputError(f"unknown transactions schema version {version!r}: expected 1 or 2")
    if create_tables:
        service.ensure_tables()
    return service
