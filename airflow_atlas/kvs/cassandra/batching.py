"""Planning multi-cell LOGICAL writes into UNLOGGED batches (pure: no driver, no session).

A call's writes arrive as :class:`WriteItem` s: one statement, or a *unit* - statements on one partition
that must be applied together (a CONSERVATIVE cell's sentinel and ranged tombstone: statements on one
partition in a batch are applied as ONE mutation, atomically and in isolation). :func:`plan_batches`
groups the items by replica set and partition into batches of at most ``max_partitions`` partitions
(Cassandra's ``unlogged_batch_across_partitions_warn_threshold`` is 10) and about ``max_bytes`` (below the
5 KiB ``batch_size_warn_threshold``): an item larger than that goes alone, a unit is never split, batches
never mix replica sets (each goes to one coordinator that owns all of it). ``max_partitions=1`` sends every
item alone. Every statement keeps its own ``USING TIMESTAMP``, so a batch writes exactly what the single
statements would; like them it is not atomic across partitions.
"""
from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from cassandra.query import PreparedStatement


class Statement(NamedTuple):
    """One CQL statement: a prepared statement (opaque here) and its parameters."""

    prepared: Any  # a driver PreparedStatement (cassandra-driver has no type information)
    params: tuple


class WriteItem(NamedTuple):
    """What the planner places: ``statements`` (one, or several forming a unit) on partition ``key`` of
    ``table``, about ``size`` bytes on the wire."""

    statements: tuple[Statement, ...]
    table: str
    key: bytes
    size: int

    @property
    def is_unit(self) -> bool:
        return len(self.statements) > 1


def single(prepared: PreparedStatement, params: tuple, table: str, key: bytes, size: int) -> WriteItem:
    return WriteItem((Statement(prepared, params),), table, key, size)


def plan_batches(
    items: Iterable[WriteItem],
    *,
    max_partitions: int,
    max_bytes: int,
    replicas_of: Callable[[bytes], Hashable] | None = None,
) -> Iterator[list[WriteItem]]:
    """The requests for ``items``, lazily: each a list of items to send as one batch (or, for one
    non-unit item, as its statement). ``replicas_of`` maps a partition key to its replica set (None: one
    group). A partition is (table, key)."""
    items = list(items)
    if max_partitions <= 1 or len(items) < 2:
        yield from ([item] for item in items)
        return
    group_of = replicas_of or (lambda key: None)
    groups: dict = {}
    for item in items:
        groups.setdefault(group_of(item.key), {}).setdefault((item.table, item.key), []).append(item)
    for by_partition in groups.values():
        batch: list[WriteItem] = []
        parts = size = 0
        for partition_items in by_partition.values():
            new_partition = True
            for item in partition_items:
                if item.size > max_bytes:
                    yield [item]
                    continue
                if batch and (size + item.size > max_bytes or (new_partition and parts >= max_partitions)):
                    yield batch
                    batch, parts, size = [], 0, 0
                    new_partition = True
                if new_partition:
                    parts += 1
                    new_partition = False
                batch.append(item)
                size += item.size
        if batch:
            yield batch
