"""May compaction purge a table's tombstones? Cassandra's repair history decides (the compaction guard).

Cassandra purges a tombstone at compaction once it is older than the table's ``gc_grace_seconds``. A
replica that never received the tombstone (down, hints lost or expired) still holds the data it deleted;
once the tombstone is purged elsewhere, repair or read repair copies that data back: **deleted data comes
back** (issue 13). A tombstone is safe to purge when a successful repair of the table, over the whole
token ring and with every replica taking part, *started after the tombstone was written*.

Compaction purges every tombstone older than ``now - gc_grace_seconds``. Let ``R`` be the start of the
latest such complete repair. Every tombstone written before ``R`` reached every replica; one written after
``R`` is purged only if it is older than ``gc_grace_seconds``. So compaction purges nothing unsafe when
``R >= now + margin - gc_grace_seconds`` (``margin``: :data:`PURGE_MARGIN_SECONDS`, for the time between
this check and the compaction's own clock and for clock skew). :func:`check_table` applies this rule:

* replication factor 1 (one copy, no replica to miss a tombstone): always allowed;
* otherwise it reads ``system_distributed.parent_repair_history`` (one row per ``nodetool repair``
  command, full or incremental: keyspace, tables, the ranges that were repaired successfully, options),
  at consistency ALL, and allows compaction only when the successful ranges of the repairs of the table
  that started since ``now + margin - gc_grace_seconds`` cover the whole ring, counting only repairs with
  every replica (not ``--force``, which leaves dead nodes out, and not limited to some hosts or data
  centers). Otherwise it says why not: no repair in the window, a range left out, a repair without every
  replica, or ``gc_grace_seconds`` below the margin (then no repair can ever make a purge safe: raise
  ``gc_grace_seconds``). (``repair_history``, one row per session, keeps only one range of each session
  in Cassandra 4+/5, so it cannot show coverage.)

A role that may not read the repair history (``atlas-sweep grants`` prints the SELECT it needs) gets a
:class:`~airflow_atlas.errors.StorePermissionError` naming the permission and the table - never a refusal
that blames repair or node state, which would leave compaction skipping every table for ever.

The decision is pure (:func:`decide`, unit-tested); :func:`check_table` only reads the three inputs with
CQL through the store's session.
"""
from __future__ import annotations

import datetime as dt
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import TYPE_CHECKING

from airflow_atlas.errors import StorePermissionError
from airflow_atlas.grants import REPAIR_HISTORY_TABLE

if TYPE_CHECKING:
    from cassandra.cluster import Session

PURGE_MARGIN_SECONDS = 600
"""Slack between the guard's check and the compaction's purge time (and clock skew between machines)."""

MIN_TOKEN = -(2**63)
MAX_TOKEN = 2**63 - 1


@dataclass(frozen=True)
class RepairRow:
    """One range of one repair command that covered the table (from ``parent_repair_history``)."""

    range_begin: int
    range_end: int
    started_at: float  # epoch seconds
    status: str  # SUCCESS (in successful_ranges) or FAILED (requested, not successful)
    all_replicas: bool  # not --force, not limited to some hosts / data centers


@dataclass(frozen=True)
class GuardDecision:
    allowed: bool
    reason: str
    repaired_since: float | None = None  # epoch seconds: start of the oldest session needed for coverage


def ring_covered(ranges: Iterable[tuple[int, int]]) -> bool:
    """True when the union of Murmur3 ranges ``(begin, end]`` (``begin >= end`` wraps around) holds every
    token in ``(MIN_TOKEN, MAX_TOKEN]`` (the minimum token itself is never owned)."""
    spans: list[tuple[int, int]] = []
    for begin, end in ranges:
        if begin < end:
            spans.append((begin, end))
        else:  # wraps: (begin, MAX] and (MIN, end]
            if begin < MAX_TOKEN:
                spans.append((begin, MAX_TOKEN))
            spans.append((MIN_TOKEN, end))
    reached = MIN_TOKEN  # every token in (MIN_TOKEN, reached] is covered
    for begin, end in sorted(spans):
        if begin > reached:
            return False
        reached = max(reached, end)
        if reached >= MAX_TOKEN:
            return True
    return reached >= MAX_TOKEN


def decide(rows: Iterable[RepairRow], replication_factor: int, gc_grace_seconds: int, now: float) -> GuardDecision:
    """Whether compaction may purge the table's tombstones now (rule in the module docstring)."""
    if replication_factor <= 1:
        return GuardDecision(True, "replication factor 1: every tombstone is on the only replica")
    if gc_grace_seconds <= PURGE_MARGIN_SECONDS:
        return GuardDecision(
            False,
            f"gc_grace_seconds = {gc_grace_seconds} is not above the {PURGE_MARGIN_SECONDS} s safety margin: "
            "compaction may purge a tombstone before any repair could have copied it to every replica, and a "
            "replica that missed it would bring the deleted data back; raise gc_grace_seconds above your "
            "repair interval",
        )
    since = now + PURGE_MARGIN_SECONDS - gc_grace_seconds
    rows = [r for r in rows if r.started_at >= since]
    good = [r for r in rows if r.status == "SUCCESS" and r.all_replicas]
    window = f"since {_iso(since)} (gc_grace_seconds {gc_grace_seconds} - {PURGE_MARGIN_SECONDS} s ago)"
    if ring_covered((r.range_begin, r.range_end) for r in good):
        return GuardDecision(True, f"repaired with every replica over the whole ring {window}", min(r.started_at for r in good))
    if not rows:
        why = f"no repair of the table {window}"
    elif not any(r.status == "SUCCESS" for r in rows):
        why = f"every repair of the table {window} failed"
    elif len(good) < len([r for r in rows if r.status == "SUCCESS"]):
        why = (
            f"a repair of the table {window} ran without every replica (--force with a node down, or limited to "
            "some hosts or data centers) and no complete repair covers the ring"
        )
    else:
        why = f"the successful repairs of the table {window} do not cover the whole token ring"
    return GuardDecision(
        False,
        f"{why}: a tombstone older than gc_grace_seconds may be missing on a replica, and purging it would let "
        "that replica bring deleted data back. Run `nodetool repair <keyspace> <table>` (every node up), "
        "then compact",
    )


def _iso(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _epoch(value: dt.datetime | float) -> float:
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:  # the driver returns naive UTC datetimes
            value = value.replace(tzinfo=dt.UTC)
        return value.timestamp()
    return float(value)


def replication_factor(replication: dict) -> int:
    """Total replicas of a keyspace from its ``system_schema.keyspaces.replication`` map (SimpleStrategy:
    ``replication_factor``; NetworkTopologyStrategy: the sum over data centers; ``"3/1"`` = 3 with transient)."""
    cls = str(replication.get("class", ""))
    if cls.endswith("SimpleStrategy"):
        return int(str(replication.get("replication_factor", "1")).split("/")[0])
    return sum(int(str(v).split("/")[0]) for k, v in replication.items() if k != "class")


_RANGE = re.compile(r"\((-?[0-9]+),(-?[0-9]+)\]")


def parse_ranges(texts: Iterable[str]) -> list[tuple[int, int]]:
    """``"(a,b]"`` strings of ``parent_repair_history`` -> ``[(a, b)]`` (others ignored)."""
    out = []
    for text in texts or ():
        match = _RANGE.fullmatch(str(text).strip())
        if match:
            out.append((int(match[1]), int(match[2])))
    return out


def rows_of_command(row: SimpleNamespace, table: str) -> list[RepairRow]:
    """The :class:`RepairRow` s one ``parent_repair_history`` row gives for ``table`` (none if the command
    did not cover it, or has not started)."""
    if row.started_at is None or table not in set(row.columnfamily_names or ()):
        return []
    options = dict(row.options or {})
    all_replicas = (
        str(options.get("forceRepair", "false")).lower() != "true"
        and not str(options.get("hosts", "")).strip()
        and not str(options.get("dataCenters", "")).strip()
    )
    started = _epoch(row.started_at)
    good = parse_ranges(row.successful_ranges)
    failed = [r for r in parse_ranges(row.requested_ranges) if r not in set(good)]
    return [RepairRow(b, e, started, "SUCCESS", all_replicas) for b, e in good] + [
        RepairRow(b, e, started, "FAILED", all_replicas) for b, e in failed
    ]


_HISTORY_COLUMNS = ("keyspace_name", "columnfamily_names", "requested_ranges", "successful_ranges", "started_at",
                    "options")


def check_table(session: Session, keyspace: str, table: str, now: float | None = None) -> GuardDecision:
    """Read the keyspace's replication, the table's ``gc_grace_seconds`` and the repair history through
    ``session`` (a cassandra-driver session) and :func:`decide`. ``table`` is the CQL (physical) name."""
    from cassandra import ConsistencyLevel
    from cassandra.query import SimpleStatement

    now = time.time() if now is None else now
    ks = session.execute("SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = %s", (keyspace,)).one()
    tb = session.execute(
        "SELECT gc_grace_seconds FROM system_schema.tables WHERE keyspace_name = %s AND table_name = %s",
        (keyspace, table),
    ).one()
    if ks is None or tb is None:
        return GuardDecision(False, f"{keyspace}.{table} not found in system_schema")
    rf = replication_factor(dict(ks[0]))  # by position: the session's row factory may give plain tuples
    gc_grace = int(tb[0])
    rows: list[RepairRow] = []
    if rf > 1 and gc_grace > PURGE_MARGIN_SECONDS:
        statement = SimpleStatement(
            f"SELECT {', '.join(_HISTORY_COLUMNS)} FROM {REPAIR_HISTORY_TABLE} WHERE keyspace_name = %s ALLOW FILTERING",
            consistency_level=ConsistencyLevel.ALL,  # written at ONE by the repair coordinator
        )
        try:
            result = session.execute(statement, (keyspace,))
        except Exception as exc:  # e.g. a node down: then no repair can have been complete either
            _raise_if_refused(exc)
            return GuardDecision(
                False, f"could not read the repair history at consistency ALL ({exc.__class__.__name__}: {exc}); "
                "compaction waits until every node is up and the table is repaired",
            )
        for row in result:
            rows.extend(rows_of_command(SimpleNamespace(**dict(zip(_HISTORY_COLUMNS, row, strict=True))), table))
    return decide(rows, rf, gc_grace, now)


def _raise_if_refused(exc: BaseException) -> None:
    """A read of the repair history the role may not make is a missing grant, never retried and never
    reported as repair state: raise it as :class:`StorePermissionError` naming permission and table."""
    from airflow_atlas.kvs.cassandra.errors import access_error

    denied = access_error(exc, "read of the repair history", f" ({REPAIR_HISTORY_TABLE}, compaction's repair guard)",
                          f"{type(exc).__name__}: {exc}")
    if isinstance(denied, StorePermissionError):
        raise StorePermissionError(
            f"{denied}; `atlas-sweep grants` prints the grant (GRANT SELECT ON TABLE {REPAIR_HISTORY_TABLE} TO <role>)",
            permission=denied.permission or "SELECT", resource=denied.resource or f"<table {REPAIR_HISTORY_TABLE}>",
        ) from exc
    if denied is not None:
        raise denied from exc
