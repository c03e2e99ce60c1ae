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
* otherwise it reads ``system_distributed.repair_history`` (written by every ``nodetool repair``, full or
  incremental) for the table since ``now + margin - gc_grace_seconds`` and allows compaction only when the
  successful sessions' ranges cover the whole ring and each had all replicas (coordinator + participants
  = the replication factor). Otherwise it says why not: no repair in the window, a range left out, a
  session without every replica (e.g. ``--force`` with a node down), or ``gc_grace_seconds`` below the
  margin (then no repair can ever make a purge safe: raise ``gc_grace_seconds``).

The decision is pure (:func:`decide`, unit-tested); :func:`check_table` only reads the three inputs with
CQL through the store's session.
"""
from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass
from typing import Iterable

PURGE_MARGIN_SECONDS = 600
"""Slack between the guard's check and the compaction's purge time (and clock skew between machines)."""

MIN_TOKEN = -(2**63)
MAX_TOKEN = 2**63 - 1


@dataclass(frozen=True)
class RepairRow:
    """One range of one repair session of the table (a row of ``system_distributed.repair_history``)."""

    range_begin: int
    range_end: int
    started_at: float  # epoch seconds
    status: str
    replicas: int  # coordinator + participants


@dataclass(frozen=True)
class GuardDecision:
    allowed: bool
    reason: str
    repaired_since: float | None = None  # epoch seconds: start of the oldest session needed for coverage

    def to_json(self) -> dict:
        return {"allowed": self.allowed, "reason": self.reason, "repaired_since": self.repaired_since}


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
    good = [r for r in rows if r.status == "SUCCESS" and r.replicas >= replication_factor]
    window = f"since {_iso(since)} (gc_grace_seconds {gc_grace_seconds} - {PURGE_MARGIN_SECONDS} s ago)"
    if ring_covered((r.range_begin, r.range_end) for r in good):
        return GuardDecision(True, f"repaired with every replica over the whole ring {window}", min(r.started_at for r in good))
    if not rows:
        why = f"no repair of the table {window}"
    elif not any(r.status == "SUCCESS" for r in rows):
        why = f"every repair of the table {window} failed"
    elif len(good) < len([r for r in rows if r.status == "SUCCESS"]):
        why = (
            f"a repair of the table {window} ran without every replica (fewer than {replication_factor} nodes took "
            "part, e.g. --force with a node down) and no complete repair covers the ring"
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
    return dt.datetime.fromtimestamp(epoch, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _epoch(value) -> float:
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:  # the driver returns naive UTC datetimes
            value = value.replace(tzinfo=dt.timezone.utc)
        return value.timestamp()
    return float(value)


def replication_factor(replication: dict) -> int:
    """Total replicas of a keyspace from its ``system_schema.keyspaces.replication`` map (SimpleStrategy:
    ``replication_factor``; NetworkTopologyStrategy: the sum over data centers; ``"3/1"`` = 3 with transient)."""
    cls = str(replication.get("class", ""))
    if cls.endswith("SimpleStrategy"):
        return int(str(replication.get("replication_factor", "1")).split("/")[0])
    return sum(int(str(v).split("/")[0]) for k, v in replication.items() if k != "class")


def check_table(session, keyspace: str, table: str, now: float | None = None) -> GuardDecision:
    """Read the keyspace's replication, the table's ``gc_grace_seconds`` and its repair history through
    ``session`` (a cassandra-driver session) and :func:`decide`. ``table`` is the CQL (physical) name."""
    now = time.time() if now is None else now
    ks = session.execute(
        "SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = %s", (keyspace,)
    ).one()
    tb = session.execute(
        "SELECT gc_grace_seconds FROM system_schema.tables WHERE keyspace_name = %s AND table_name = %s",
        (keyspace, table),
    ).one()
    if ks is None or tb is None:
        return GuardDecision(False, f"{keyspace}.{table} not found in system_schema")
    rf = replication_factor(dict(ks.replication))
    gc_grace = int(tb.gc_grace_seconds)
    rows: list[RepairRow] = []
    if rf > 1 and gc_grace > PURGE_MARGIN_SECONDS:
        since_ms = int((now + PURGE_MARGIN_SECONDS - gc_grace) * 1000)
        result = session.execute(
            "SELECT range_begin, range_end, started_at, status, participants FROM system_distributed.repair_history "
            "WHERE keyspace_name = %s AND columnfamily_name = %s AND id > minTimeuuid(%s)",
            (keyspace, table, dt.datetime.fromtimestamp(since_ms / 1000, dt.timezone.utc)),
        )
        for r in result:
            if r.range_begin is None or r.range_end is None or r.started_at is None:
                continue
            rows.append(
                RepairRow(
                    int(r.range_begin), int(r.range_end), _epoch(r.started_at), str(r.status or ""),
                    1 + len(r.participants or ()),
                )
            )
    return decide(rows, rf, gc_grace, now)
