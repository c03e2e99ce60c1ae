"""The LOGICAL writes of :class:`~airflow_atlas.kvs.cassandra.CassandraKeyValueService` (its
:class:`~airflow_atlas.kvs.api.LogicalWrites` part): puts at the Atlas timestamp, deletes of versions, ranged
tombstones, sentinels and partition tombstones, each at a fresh Cassandra write timestamp where it must
shadow what it deletes (the package docstring says why).

Multi-cell writes go as small UNLOGGED batches: :mod:`.batching` plans them (by replica set and partition),
:mod:`.requests` builds each request at the operation's level, and the session sends the stream of them in
windows (:meth:`~.session.CqlSession.execute_stream`): planned and built while earlier ones are in flight,
results dropped, the first failure raised (nothing more is sent then).
"""
from __future__ import annotations

from collections.abc import Callable, Hashable

from ...errors import InvalidInputError
from .. import _common as C
from ..api import MAX_TIMESTAMP, Cell, LogicalWrites
from ..consistency import ConsistencyPolicy, Operation
from .batching import Statement, WriteItem, plan_batches, single
from .requests import RequestBuilder
from .session import CqlSession


class CassandraWrites(LogicalWrites):
    """The LOGICAL-table writes of the Cassandra service, on its session. ``batch_partitions`` /
    ``batch_bytes``: the bounds of one UNLOGGED batch (``batch_partitions=1``: no batches)."""

    def __init__(self, cql: CqlSession, consistency: ConsistencyPolicy, *, batch_partitions: int, batch_bytes: int):
        self._cql = cql
        self._consistency = consistency
        self._batch_partitions = batch_partitions
        self._batch_bytes = batch_bytes
        self._supplier: Callable[[], int] | None = None

    # ----- fresh write timestamps (spec 002) -------------------------------------------------------
    def use_fresh_timestamps(self, supplier: Callable[[], int]) -> None:
        self._supplier = supplier

    def fresh(self, op: str, table: str) -> int:
        """A fresh write timestamp from the supplier (one per call that deletes or writes sentinels)."""
        if self._supplier is None:
            raise InvalidInputError(
                f"{op} on table {table!r} needs a fresh timestamp (spec 002) but no supplier was set: "
                "call set_fresh_timestamp_supplier() with the timestamp service first"
            )
        ts = self._supplier()
        return C.check_int(ts, "the fresh timestamp supplier's value", 1, MAX_TIMESTAMP - 1)

    # ----- the writes ------------------------------------------------------------------------------
    def put(self, puts: dict[str, dict[Cell, bytes]], timestamp: int, op: str, operation: Operation) -> None:
        items: list[WriteItem] = []
        for table, values in puts.items():
            if values:
                ps = self._cql.prepare(table, "put", operation)
                items.extend(
                    single(ps, (c.row, c.col, timestamp, v, timestamp), table, c.row, len(c.row) + len(c.col) + len(v) + 32)
                    for c, v in values.items()
                )
        self._send(op, next(iter(puts)) if len(puts) == 1 else None, items, operation)

    def delete(self, table: str, versions: list[tuple[Cell, int]], operation: Operation) -> None:
        ps = self._cql.prepare(table, "delete", operation)
        fresh = self.fresh("delete", table)
        self._send(
            "delete",
            table,
            [single(ps, (fresh, c.row, c.col, ts), table, c.row, len(c.row) + len(c.col) + 32) for c, ts in versions],
            operation,
        )

    def delete_ranges(self, table: str, ranges: dict[Cell, tuple[int, int]], operation: Operation) -> None:
        ps = self._cql.prepare(table, "delete_range", operation)
        fresh = self.fresh("delete_all_timestamps", table)
        self._send(
            "delete_all_timestamps",
            table,
            [
                single(ps, (fresh, c.row, c.col, lo, hi), table, c.row, len(c.row) + len(c.col) + 40)
                for c, (lo, hi) in ranges.items()
            ],
            operation,
        )

    def sentinels(self, table: str, cells: list[Cell], operation: Operation) -> None:
        ps = self._cql.prepare(table, "sentinel", operation)
        fresh = self.fresh("add_gc_sentinels", table)
        self._send(
            "add_gc_sentinels",
            table,
            [single(ps, (c.row, c.col, b"", fresh), table, c.row, len(c.row) + len(c.col) + 32) for c in cells],
            operation,
        )

    def sentinels_and_tombstones(self, table: str, cells: list[Cell], ranges: dict[Cell, tuple[int, int]]) -> None:
        """Each cell's sentinel and ranged tombstone go together as one unit of a batch: statements on one
        partition in a batch are applied as ONE mutation, atomically and in isolation, so no reader ever sees
        the tombstone without the sentinel (the guarantee "sentinel first" gives), at half the requests and
        half the mutations of two calls. Units are never split across batches; the two fresh timestamps are
        taken as the two separate calls take them (sentinels first).

        Consistency: a unit is one batch, so its sentinel is written at the SWEEP_DELETE level together
        with the tombstone (on every replica the two land as one mutation or not at all); a sentinel with
        no tombstone (a cell whose newest sweepable write is at timestamp 0) goes at the SENTINEL level."""
        op = "add_gc_sentinels_and_delete_all_timestamps"
        lone_ps = self._cql.prepare(table, "sentinel", Operation.SENTINEL)
        unit_sentinel_ps = self._cql.prepare(table, "sentinel", Operation.SWEEP_DELETE)
        range_ps = self._cql.prepare(table, "delete_range", Operation.SWEEP_DELETE) if ranges else None
        sentinel_at = self.fresh(op, table)
        delete_at = self.fresh(op, table) if ranges else None
        lone, units = [], []
        for c in cells:
            bounds = ranges.get(c)
            if bounds is None:
                lone.append(single(lone_ps, (c.row, c.col, b"", sentinel_at), table, c.row, len(c.row) + len(c.col) + 32))
            else:
                unit = (
                    Statement(unit_sentinel_ps, (c.row, c.col, b"", sentinel_at)),
                    Statement(range_ps, (delete_at, c.row, c.col, bounds[0], bounds[1])),
                )
                units.append(WriteItem(unit, table, c.row, 2 * (len(c.row) + len(c.col)) + 72))
        if self._consistency.sentinel == self._consistency.sweep_delete:
            self._send(op, table, lone + units, Operation.SWEEP_DELETE)
        else:  # two levels: two sets of batches (lone sentinels are rare: newest sweepable write at ts 0)
            self._send(op, table, lone, Operation.SENTINEL)
            self._send(op, table, units, Operation.SWEEP_DELETE)

    def delete_rows(self, table: str, rows: list[bytes], operation: Operation) -> None:
        """Partition tombstones at one fresh timestamp T: later writes to these rows at Atlas timestamps
        below T stay hidden (Cassandra semantics; the embedded store has no such shadow)."""
        ps = self._cql.prepare(table, "delete_row", operation)
        fresh = self.fresh("delete_rows", table)
        self._send("delete_rows", table, [single(ps, (fresh, r), table, r, len(r) + 24) for r in rows], operation)

    # ----- batches ---------------------------------------------------------------------------------
    def _send(self, op: str, table: str | None, items: list[WriteItem], operation: Operation) -> None:
        """Send ``items`` as UNLOGGED batches (planned by :func:`.batching.plan_batches`) at the consistency
        level of ``operation`` (the items' prepared statements carry the same level), concurrently, in the
        session's windows."""
        if not items:
            return
        driver = self._cql.driver()
        build = RequestBuilder(
            self._cql.levels[operation],
            self._cql.serializers,
            pre_serialize=driver.cluster.column_encryption_policy is None,
        )
        plan = plan_batches(
            items,
            max_partitions=self._batch_partitions,
            max_bytes=self._batch_bytes,
            replicas_of=self._replica_group() if self._batch_partitions > 1 and len(items) > 1 else None,
        )
        self._cql.execute_stream(op, table, map(build, plan))  # lazy: built while earlier ones are in flight

    def _replica_group(self) -> Callable[[bytes], Hashable] | None:
        """Key function: partition key -> its replica set (None - one group - when the cluster has one host
        or no token map)."""
        metadata = self._cql.driver().cluster.metadata
        token_map = metadata.token_map
        if token_map is None or len(metadata.all_hosts()) <= 1:
            return None
        keyspace, token_of = self._cql.keyspace, token_map.token_class.from_key
        return lambda key: tuple(token_map.get_replicas(keyspace, token_of(key)))
