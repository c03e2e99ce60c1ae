"""Replica safety: the consistency level of every store operation, and the gc_grace guard of swept tables.

Cassandra keeps each row on ``replication_factor`` replicas; the consistency level of a request says how
many of them must acknowledge it. Sweep writes tombstones that hide data *forever*: a tombstone that misses a
replica, and is purged (after ``gc_grace_seconds``) by compaction on the replicas that got it before repair
copies it to the one that did not, lets that replica's copy of the deleted data come back (Cassandra's own
contract, see ``docs/ARCHITECTURE.md`` invariant 11 and the README's "Consistency and repair"). So the
levels are chosen per operation, not per process.

Operations and defaults, for one datacenter and for several (the reason beside each; the reference
system's choice, AtlasDB, beside ours: ``../shared/notes/atlasdb-lessons.md`` and spec 002). This table is
THE policy; ``docs/ARCHITECTURE.md`` ("Consistency across datacenters") points here and walks through it.

=====================  ============  ============  ==========================================================
operation              default       AtlasDB       why (one datacenter; several datacenters)
=====================  ============  ============  ==========================================================
``data_read``          LOCAL_QUORUM  LOCAL_QUORUM  transactions' snapshot reads, registries, commit-table
                                                   reads, the sweeper's queue reads, ``verify``. With writes
                                                   at EACH_QUORUM a local quorum overlaps every acknowledged
                                                   write in EVERY datacenter (R + W > RF per datacenter), so
                                                   a reader in dc2 sees what a writer in dc1 committed,
                                                   without a cross-datacenter round trip per read.
``data_write``         EACH_QUORUM   EACH_QUORUM   transactional data and WALLCLOCK registries, among them
                                                   the open-transaction registry that holds the sweep
                                                   timestamp back. At LOCAL_QUORUM a transaction in dc2
                                                   could register (and write) unseen by a sweeper reading
                                                   at LOCAL_QUORUM in dc1: the sweep timestamp would pass
                                                   it and sweep delete versions it can still read, and a
                                                   dc2 reader would miss a committed dc1 write. In one
                                                   datacenter EACH_QUORUM is LOCAL_QUORUM (SimpleStrategy:
                                                   QUORUM). Cost: a datacenter down stops writes.
``queue_write``        EACH_QUORUM   EACH_QUORUM   the sweep queue, written before the data (ARCHITECTURE
                                                   invariant 1) and read by a sweeper that may run in the
                                                   other datacenter: a queued write it cannot see is never
                                                   swept (same overlap argument as ``data_write``).
``lwt_commit``         LOCAL_QUORUM  (SERIAL CAS)  commit phase of lightweight transactions: put-unless-
                                                   exists of commit timestamps (the transactions table),
                                                   progress CAS, locks, the timestamp bound. The Paxos
                                                   round itself runs at ``serial`` (a quorum of ALL
                                                   replicas). A reader in the other datacenter that does
                                                   not see a commit yet at LOCAL_QUORUM rolls the writer
                                                   back with put-unless-exists(ABORTED) at SERIAL, loses
                                                   to the committed value and reads it at SERIAL: nothing
                                                   is lost, the remote reader pays one Paxos round. Not
                                                   EACH_QUORUM: Cassandra refuses it for LWTs on
                                                   SimpleStrategy keyspaces, so the setting does not take it.
``serial``             SERIAL        SERIAL        Paxos of every LWT and serial read: timestamp service,
                                                   transactions table, progress, locks. LOCAL_SERIAL runs
                                                   one Paxos per datacenter: two datacenters could both
                                                   move the timestamp bound from the same value
                                                   (overlapping timestamps), one commit and the other abort
                                                   the same transaction, both hold a lock, both move
                                                   progress. So on a keyspace with replicas in several
                                                   datacenters LOCAL_SERIAL is refused when the store opens.
``sweep_delete``       ALL           ALL           ranged tombstones of sweep: every replica in every
                                                   datacenter holds them before progress moves past them,
                                                   so no compaction anywhere can purge a tombstone some
                                                   replica lacks. A replica down -> the iteration fails
                                                   (retriable StoreUnavailableError naming the down
                                                   datacenter and hosts), progress stays, retried later.
                                                   Availability: ONE DATACENTER DOWN STOPS SWEEPING (not
                                                   transactions reading locally); ``atlas-sweep status``
                                                   warns, naming it. EACH_QUORUM would keep sweeping but
                                                   leaves replicas without the tombstone until repair:
                                                   only with ``allow_weak_sweep_consistency`` and a full
                                                   repair in EVERY datacenter within gc_grace (the repair
                                                   guard reads ``system_distributed.parent_repair_history``,
                                                   replicated to every datacenter).
``sentinel``           ALL           EACH_QUORUM   sentinels written alone (legacy sweep, ``add_gc_sentinels``).
                                                   In CONSERVATIVE targeted sweep each sentinel travels in
                                                   the SAME single-partition batch unit as its cell's ranged
                                                   tombstone, so it is written at the ``sweep_delete``
                                                   level, atomically with it.
``abort_delete``       ALL           ALL           deletes of a dead writer's aborted versions (rolled back
                                                   by sweep): a missed rollback delete must never resurface
                                                   after purge - the version would come back with its queue
                                                   entry gone, so sweep never revisits it.
``queue_cleanup``      LOCAL_QUORUM  ALL           partition tombstones of swept queue rows. A resurrected
                                                   queue row (in any datacenter) lies below progress or is
                                                   read again and its deletes re-applied, which is
                                                   idempotent: no data can come back through it.
=====================  ============  ============  ==========================================================

Locks, progress CAS, commit timestamps and the timestamp bound are all LWTs (``lwt_commit`` + ``serial``);
their non-serial reads (``data_read``) may be stale in a remote datacenter, which only makes a CAS fail and
be retried from the value read at SERIAL - they never move backwards or hand out a value twice.

The datacenter a process runs in is the store option ``datacenter`` (store URL query, Airflow connection
extra): the driver's DC-aware load balancing sends requests to coordinators there (``local_dc``), so LOCAL_*
levels mean that datacenter. Run the sweeper (and its Spark jobs) with the ``datacenter`` it runs in; it may
be either one - the levels above do not depend on where the sweeper runs. :func:`multi_datacenter_problems`
is the rule a store checks when its keyspace has replicas in several datacenters.

The reference implementation's history records that a single node down stalled deletes at ALL: here the
failure is a clean, retriable error of one iteration (progress unchanged), which the operators retry with
backoff. EACH_QUORUM may be chosen for non-LWT operations (Cassandra 5.0 accepts it for plain reads and
writes with SimpleStrategy too, as QUORUM, checked on the test node), never for ``lwt_commit`` (Cassandra
refuses it there on SimpleStrategy: "EACH_QUORUM not compatible with replication strategy SimpleStrategy"). ANY is never accepted (a write stored only as a hint is not durable); neither
are SERIAL levels outside ``serial``.

Lowering ``sweep_delete``, ``sentinel`` or ``abort_delete`` below ALL is refused unless
``allow_weak_sweep_consistency`` is true: a tombstone then may miss a replica, and only a full repair of
the keyspace completed within ``gc_grace_seconds`` of the sweep prevents resurrection.

Settings keys (flat, so that every layer - the CLI ``--set``, ``atlas_settings``, Spark
``spark.atlas.store.*``, the store URL query and Airflow connection extras - carries them):
``consistency_<operation>``, ``allow_weak_sweep_consistency``, ``repair_interval_seconds``,
``allow_gc_grace_below_repair_interval``. They are declared, parsed and validated (levels, and the rule
above) by :class:`airflow_atlas.config.StoreConfig`, resolved by
:func:`airflow_atlas.settings_resolver.resolve`; this module holds the operations, the level names, the
defaults and reasons, and the engine's lookups built from the validated settings.

Nothing here imports the Cassandra driver: levels are names, the Cassandra backend maps them.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass

from ..errors import InvalidInputError


class Operation(str, enum.Enum):
    """What a request does; each has its own consistency level (see the module docstring)."""

    DATA_READ = "data_read"
    DATA_WRITE = "data_write"
    QUEUE_WRITE = "queue_write"
    SWEEP_DELETE = "sweep_delete"
    SENTINEL = "sentinel"
    ABORT_DELETE = "abort_delete"
    QUEUE_CLEANUP = "queue_cleanup"
    LWT_COMMIT = "lwt_commit"
    SERIAL = "serial"


REPLICATED_LEVELS = ("ONE", "TWO", "THREE", "QUORUM", "ALL", "LOCAL_QUORUM", "EACH_QUORUM", "LOCAL_ONE")
SERIAL_LEVELS = ("SERIAL", "LOCAL_SERIAL")
LWT_COMMIT_LEVELS = tuple(level for level in REPLICATED_LEVELS if level != "EACH_QUORUM")
GUARDED_OPERATIONS = (Operation.SWEEP_DELETE, Operation.SENTINEL, Operation.ABORT_DELETE)
"""Deletes whose loss on one replica can bring deleted data back: ALL unless explicitly weakened."""

DEFAULT_REPAIR_INTERVAL_SECONDS = 864_000
"""Ten days: Cassandra's default ``gc_grace_seconds``, the interval a repair schedule must beat."""
CASSANDRA_DEFAULT_GC_GRACE_SECONDS = 864_000
"""``gc_grace_seconds`` of a table created without the option (Cassandra 5.0's default)."""
MAX_REPAIR_INTERVAL_SECONDS = 10 * 365 * 86_400

DEFAULT_LEVELS = {
    Operation.DATA_READ: "LOCAL_QUORUM",
    Operation.DATA_WRITE: "EACH_QUORUM",
    Operation.QUEUE_WRITE: "EACH_QUORUM",
    Operation.SWEEP_DELETE: "ALL",
    Operation.SENTINEL: "ALL",
    Operation.ABORT_DELETE: "ALL",
    Operation.QUEUE_CLEANUP: "LOCAL_QUORUM",
    Operation.LWT_COMMIT: "LOCAL_QUORUM",
    Operation.SERIAL: "SERIAL",
}
"""The default level of each operation (reasons in the module docstring)."""

ACCEPTED_LEVELS: dict[Operation, tuple[str, ...]] = {
    **dict.fromkeys(Operation, REPLICATED_LEVELS),
    Operation.LWT_COMMIT: LWT_COMMIT_LEVELS,
    Operation.SERIAL: SERIAL_LEVELS,
}
"""The levels each operation's setting accepts (no SERIAL level outside ``serial``, no EACH_QUORUM for
``lwt_commit``; ANY never)."""

SETTING_MEANINGS: dict[Operation, str] = {
    Operation.DATA_READ: "consistency level of data reads: transactions' reads, registries, the sweeper's queue reads "
    "(R + W > RF with the writes)",
    Operation.DATA_WRITE: "consistency level of transactional data writes and WALLCLOCK registries (EACH_QUORUM: a "
    "LOCAL_QUORUM read in every datacenter sees them; below it, refused on a keyspace in several datacenters)",
    Operation.QUEUE_WRITE: "consistency level of sweep-queue writes (read back at consistency_data_read: keep R + W > "
    "RF, in every datacenter, so sweep sees every queued write)",
    Operation.SWEEP_DELETE: "consistency level of sweep's ranged tombstones (and of each CONSERVATIVE sentinel, which "
    "shares its tombstone's batch unit); a replica down fails the iteration (retriable), progress stays; below ALL "
    "only with allow_weak_sweep_consistency",
    Operation.SENTINEL: "consistency level of sentinels written alone (legacy sweep); below ALL only with "
    "allow_weak_sweep_consistency",
    Operation.ABORT_DELETE: "consistency level of deletes of dead writers' aborted versions; below ALL only with "
    "allow_weak_sweep_consistency",
    Operation.QUEUE_CLEANUP: "consistency level of removing swept queue rows (a resurrected row only causes an "
    "idempotent re-sweep)",
    Operation.LWT_COMMIT: "commit level of lightweight transactions (progress CAS, commit timestamps, locks, "
    "timestamp bound)",
    Operation.SERIAL: "Paxos level of lightweight transactions and serial reads (LOCAL_SERIAL is refused on a keyspace "
    "in several datacenters: overlapping timestamps)",
}
"""What each operation's setting ``consistency_<operation>`` means, for docs/SETTINGS.md. With
:data:`DEFAULT_LEVELS` and :data:`ACCEPTED_LEVELS` it is what :class:`airflow_atlas.config.StoreConfig`
declares one setting per :class:`Operation` from (in the enum's order)."""

WEAK_SWEEP_REASON = (
    "a sweep tombstone below ALL could miss a replica, and compaction after gc_grace_seconds would let that "
    "replica's deleted data come back. Only a full repair of the keyspace completed within gc_grace_seconds "
    "of every sweep prevents that; set allow_weak_sweep_consistency=true only if your repair schedule "
    "guarantees it"
)
"""Why :data:`GUARDED_OPERATIONS` below ALL need ``allow_weak_sweep_consistency`` (the settings' cross-field
rule, :class:`airflow_atlas.config.StoreConfig`)."""


WRITES_SEEN_FROM_EVERY_DATACENTER = ("EACH_QUORUM", "ALL")
"""Write levels that reach a quorum in every datacenter: a LOCAL_QUORUM read anywhere overlaps them."""
READS_OVER_EACH_QUORUM = ("LOCAL_QUORUM", "QUORUM", "EACH_QUORUM", "ALL")
"""Read levels that overlap a write at EACH_QUORUM (a quorum of the reader's datacenter, or more)."""


def multi_datacenter_problems(policy: ConsistencyPolicy, datacenters: dict[str, int]) -> list[str]:
    """What in ``policy`` is unsafe for a keyspace replicated as ``datacenters`` (datacenter -> replicas):
    nothing for one datacenter; for several, the rules of the module docstring's table (SERIAL Paxos; data
    and queue writes that a LOCAL_QUORUM read in the other datacenter sees). Empty when safe."""
    if len([dc for dc, rf in datacenters.items() if rf > 0]) < 2:
        return []
    where = ", ".join(f"{dc}: {rf}" for dc, rf in sorted(datacenters.items()))
    problems = []
    if policy.serial != "SERIAL":
        problems.append(
            f"consistency_serial={policy.serial} runs one Paxos per datacenter on a keyspace replicated in "
            f"several ({where}): two datacenters could hand out overlapping timestamps, commit and abort the "
            "same transaction, or both hold a lock; use SERIAL"
        )
    for op in (Operation.DATA_WRITE, Operation.QUEUE_WRITE):
        write, read = policy.level(op), policy.data_read
        overlap = (
            write == "ALL"
            or read == "ALL"
            or (write in WRITES_SEEN_FROM_EVERY_DATACENTER and read in READS_OVER_EACH_QUORUM)
            or (write in ("QUORUM", "EACH_QUORUM") and read == "QUORUM")
        )
        if not overlap:
            problems.append(
                f"{setting_name(op)}={write} with consistency_data_read={read} on a keyspace replicated in several "
                f"datacenters ({where}): a reader (or the sweeper) in another datacenter may not see an "
                "acknowledged write - a committed write missed, or a running transaction's registration unseen so "
                "sweep deletes versions it can still read; write at EACH_QUORUM (the default) or ALL"
            )
    return problems


def setting_name(operation: Operation) -> str:
    return f"consistency_{operation.value}"


@dataclass(frozen=True)
class ConsistencyPolicy:
    """The consistency level (a name) of each :class:`Operation`: the engine's per-operation lookup.

    Built from the validated settings (:meth:`airflow_atlas.config.StoreConfig.consistency_policy`), which
    check the level names and the cross-field rule; the defaults here are :data:`DEFAULT_LEVELS`."""

    data_read: str = DEFAULT_LEVELS[Operation.DATA_READ]
    data_write: str = DEFAULT_LEVELS[Operation.DATA_WRITE]
    queue_write: str = DEFAULT_LEVELS[Operation.QUEUE_WRITE]
    sweep_delete: str = DEFAULT_LEVELS[Operation.SWEEP_DELETE]
    sentinel: str = DEFAULT_LEVELS[Operation.SENTINEL]
    abort_delete: str = DEFAULT_LEVELS[Operation.ABORT_DELETE]
    queue_cleanup: str = DEFAULT_LEVELS[Operation.QUEUE_CLEANUP]
    lwt_commit: str = DEFAULT_LEVELS[Operation.LWT_COMMIT]
    serial: str = DEFAULT_LEVELS[Operation.SERIAL]

    def level(self, operation: Operation | str) -> str:
        return str(getattr(self, Operation(operation).value))


@dataclass(frozen=True)
class GcGraceGuard:
    """Refuses swept tables whose ``gc_grace_seconds`` is below the repair interval.

    A tombstone is purgeable once ``gc_grace_seconds`` old; a replica that missed it (down during the
    sweep, or a weakened consistency level) is made whole only by repair. With ``gc_grace_seconds`` below
    the interval at which repair runs, a purge can come first, and the deleted data comes back. Built from
    the validated settings (:meth:`airflow_atlas.config.StoreConfig.gc_grace_guard`).
    """

    repair_interval_seconds: int = DEFAULT_REPAIR_INTERVAL_SECONDS
    allow_gc_grace_below_repair_interval: bool = False

    def check(self, table: str, strategy: str, gc_grace_seconds: int | None) -> None:
        """Raise InvalidInputError when a table swept with ``strategy`` would have ``gc_grace_seconds``
        below the repair interval (unless allowed). ``None`` (unknown) passes."""
        from .tables import SWEEPABLE_STRATEGY_NAMES

        if strategy not in SWEEPABLE_STRATEGY_NAMES or gc_grace_seconds is None:
            return
        if gc_grace_seconds >= self.repair_interval_seconds or self.allow_gc_grace_below_repair_interval:
            return
        raise InvalidInputError(
            f"table {table!r} would be swept ({strategy}) with gc_grace_seconds={gc_grace_seconds}, below the "
            f"repair interval repair_interval_seconds={self.repair_interval_seconds}: a sweep tombstone may then "
            "be purged by compaction before repair copies it to a replica that missed it, and the deleted data "
            "comes back (resurrection). Raise gc_grace_seconds to at least the repair interval, or - if repair "
            "really runs more often - lower repair_interval_seconds, or set allow_gc_grace_below_repair_interval=true"
        )


SETTING_NAMES = tuple(setting_name(op) for op in Operation) + (
    "allow_weak_sweep_consistency",
    "repair_interval_seconds",
    "allow_gc_grace_below_repair_interval",
)
"""Every replica-safety settings key: the StoreConfig fields that the store layer (URL query options,
connection extras) may set too."""


def check_policies(consistency: object, gc_grace_guard: object) -> tuple[ConsistencyPolicy, GcGraceGuard]:
    """A backend's ``consistency`` / ``gc_grace_guard`` arguments: the defaults for None, else the right types."""
    consistency = ConsistencyPolicy() if consistency is None else consistency
    gc_grace_guard = GcGraceGuard() if gc_grace_guard is None else gc_grace_guard
    if not isinstance(consistency, ConsistencyPolicy):
        raise InvalidInputError("consistency must be a ConsistencyPolicy (airflow_atlas.kvs.consistency)")
    if not isinstance(gc_grace_guard, GcGraceGuard):
        raise InvalidInputError("gc_grace_guard must be a GcGraceGuard (airflow_atlas.kvs.consistency)")
    return consistency, gc_grace_guard


WRITE_OPERATIONS = (
    Operation.DATA_WRITE,
    Operation.QUEUE_WRITE,
    Operation.SWEEP_DELETE,
    Operation.SENTINEL,
    Operation.ABORT_DELETE,
    Operation.QUEUE_CLEANUP,
)
"""Operations a plain (non-LWT) write or delete may be made as."""
LWT_OPERATIONS = (Operation.LWT_COMMIT,)


def resolve_operation(
    operation: Operation | str | None, default: Operation, allowed: tuple, method: str
) -> Operation:
    """``operation`` (or ``default`` when None) if ``method`` may run as it, else InvalidInputError."""
    if operation is None:
        return default
    try:
        operation = Operation(operation)
    except ValueError:
        raise InvalidInputError(
            f"{method}: unknown operation {operation!r}; expected one of {', '.join(o.value for o in allowed)}"
        ) from None
    if operation not in allowed:
        raise InvalidInputError(
            f"{method} cannot run as operation {operation.value!r}; expected one of "
            f"{', '.join(o.value for o in allowed)}"
        )
    return operation
