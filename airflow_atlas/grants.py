"""Least privilege on Cassandra: what each role of a deployment may do on the store's keyspace.

Three roles (docs in docs/TESTING.md "Secured node" and docs/SECURITY.md):

* the **administrator** creates the keyspace and the tables (``init``, ``create_table``, new user tables
  of the workload), raises the shard count and changes strategies: CREATE, ALTER, DROP on the keyspace
  (or a superuser);
* the **sweeper** runs every DAG, the CLI (``status``, ``sweep``, ``verify``, ``workload`` on existing tables,
  ``shards`` to read) and the Spark jobs: SELECT on the keyspace, MODIFY on the tables listed in
  :data:`SWEEPER_MODIFY` and on every user table, SELECT on the system tables of :data:`SWEEPER_SYSTEM_SELECT`
  (compaction's repair guard reads the repair history) - and nothing else: no CREATE, ALTER, DROP or
  AUTHORIZE, no MODIFY outside the keyspace, no MODIFY on the tables only the administrator writes
  (:data:`ADMIN_ONLY`);
* the **timestamp server** (``atlas-sweep timestamps serve``, one role for every instance): SELECT and MODIFY on
  ``_timestamp`` (its record and bound: serial reads, check-and-sets) and SELECT on the two tables opening a
  store reads (:data:`TIMESTAMP_SERVER_SELECT`) - nothing else: it reads no data and writes no other table.
  One deployment serves every adopted keyspace of a cluster, so the role needs these grants on each.

:func:`apply_grants` applies them through an administrator's session (``atlas-sweep grants --apply``: the
project installs no CQL client): it creates the login role when asked (its password bound as a parameter,
never printed), grants only what the role does not hold yet (``LIST ALL PERMISSIONS OF ... NORECURSIVE``)
and reports each grant as granted or already held - idempotent.

A missing permission fails the command at once with
:class:`~airflow_atlas.errors.StorePermissionError` naming it (CLI exit 5, an Airflow task without retry).
Cassandra's permissions are per table, not per statement kind, so the ``shards --raise`` of the
administrator stays possible for a sweeper (it writes the progress table the sweep writes): by convention,
not by grant. User tables created after the grants were printed need their MODIFY grant too: print the
grants again after creating tables.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, Literal

from .errors import InvalidInputError
from .locks import LOCKS_TABLE
from .sweep.history import TABLE as SWEEP_HISTORY_TABLE
from .sweep.queue.queue_tables import SWEEP_PROGRESS, SWEEPABLE_CELLS, SWEEPABLE_TIMESTAMPS
from .sweep.scrub import TABLE as SCRUB_TABLE
from .table_marks import TABLE as TABLE_MARKS_TABLE
from .timestamps import TIMESTAMP_TABLE
from .transactions.latency_table import TABLE as APP_LATENCY_TABLE
from .transactions.punch import PUNCH_TABLE
from .transactions.registry import OPEN_TRANSACTIONS_TABLE
from .transactions.schema import SCHEMA_TABLE
from .transactions.service import TRANSACTIONS2_TABLE, TRANSACTIONS_TABLE

if TYPE_CHECKING:
    from .kvs.cassandra import CassandraKeyValueService

SWEEPER_MODIFY: dict[str, str] = {
    TIMESTAMP_TABLE: "fresh timestamps: every sweep timestamp, every transaction's start and commit, status",
    LOCKS_TABLE: "the (shard, strategy) leases of sweep",
    TRANSACTIONS_TABLE: "commit timestamps (schema v1): commits, and sweep aborting dead writers",
    TRANSACTIONS2_TABLE: "commit timestamps (schema v2): commits, and sweep aborting dead writers",
    OPEN_TRANSACTIONS_TABLE: "registrations of open read-write transactions (the immutable timestamp)",
    PUNCH_TABLE: "punches: wall clock -> timestamp (the unreadable timestamp)",
    SWEEPABLE_CELLS: "the sweep queue: written at commit, cleaned by sweep",
    SWEEPABLE_TIMESTAMPS: "the sweep queue's index: written at commit, cleaned by sweep",
    SWEEP_PROGRESS: "shard progress, persisted by sweep with check-and-set",
    SWEEP_HISTORY_TABLE: "the record of every sweep run and iteration (status, dashboard, compaction)",
    SCRUB_TABLE: "the scrub queue (hard deletes) and its processing",
    APP_LATENCY_TABLE: "every transaction client publishes that it is alive and its latency (the sweep's application pace reads it)",
}
"""The engine's tables the sweeper writes, and why."""

REPAIR_HISTORY_TABLE = "system_distributed.parent_repair_history"
"""Cassandra's record of every ``nodetool repair`` command: compaction's repair guard
(:mod:`airflow_atlas.airflow.hooks.repair`) reads it before purging tombstones of a table with replicas."""

THREAD_POOLS_TABLE = "system_views.thread_pools"
"""Each node's thread pools (a node-local virtual table): the application pace's node-pressure guard
(:mod:`airflow_atlas.sweep.pacing.pressure`) reads it."""

SWEEPER_SYSTEM_SELECT: dict[str, str] = {
    REPAIR_HISTORY_TABLE: "compaction's repair guard: may compaction purge tombstones (complete repair since?)",
    THREAD_POOLS_TABLE: "the node-pressure guard of the application pace: pending and blocked tasks per node",
}
"""Tables outside the store's keyspace the sweeper reads, and why (``system_schema`` is readable by every
role and needs no grant)."""

ADMIN_ONLY: dict[str, str] = {
    "_metadata": "the table registry: written by init and create_table",
    SCHEMA_TABLE: "the transactions schema version: recorded once, by init",
    TABLE_MARKS_TABLE: "drop/truncate marks: written when the administrator drops or truncates a table",
}
"""The engine's tables only the administrator writes (the sweeper reads them)."""


TIMESTAMP_SERVER_SELECT: dict[str, str] = {
    "_metadata": "opening the store: the table registry (which tables exist, their write mode)",
    SCHEMA_TABLE: "opening the store it is started for (`serve`): the transactions schema version",
    TIMESTAMP_TABLE: "the server's record and bound: serial reads (the leader, its lease, the bound)",
}
"""The tables the timestamp server reads, and why."""

TIMESTAMP_SERVER_MODIFY: dict[str, str] = {
    TIMESTAMP_TABLE: "the server's record and bound: lease renewals, takeovers, the bound (check-and-set)",
}
"""The one table the timestamp server writes, and why."""


@dataclass(frozen=True)
class Grant:
    """One permission on one resource, and why the role needs it."""

    permission: str
    resource: str
    why: str

    def cql(self, role: str) -> str:
        return f"GRANT {self.permission} ON {self.resource} TO {role};"


def _ident(name: str, what: str) -> str:
    if not name or not (name[0].isalpha() or name[0] == "_") or not all(c.isalnum() or c == "_" for c in name):
        raise InvalidInputError(f"{what} {name!r} is not a plain CQL identifier (letters, digits, underscore)")
    return name


def sweeper_grants(keyspace: str, tables: list[str]) -> list[Grant]:
    """The sweeper's grants on ``keyspace`` holding these tables (logical names, as ``list_tables`` gives
    them: an engine table ``_x`` is ``atlas_x`` in CQL; Cassandra refuses a grant on a table that does not
    exist, so only tables of the store are named)."""
    ks = _ident(keyspace, "keyspace")
    grants = [Grant("SELECT", f"KEYSPACE {ks}", "every read: queue, transactions, progress, data, registry")]
    present = set(tables)
    for table, why in SWEEPER_MODIFY.items():
        if table in present:
            grants.append(Grant("MODIFY", f"TABLE {ks}.atlas{table}", why))
    for table in sorted(t for t in present if not t.startswith("_")):
        grants.append(Grant("MODIFY", f"TABLE {ks}.{_ident(table, 'table')}",
                            "user data: the workload's writes, sweep's sentinels and ranged tombstones"))
    grants += [Grant("SELECT", f"TABLE {table}", why) for table, why in SWEEPER_SYSTEM_SELECT.items()]
    return grants


def timestamp_server_grants(keyspace: str, tables: list[str]) -> list[Grant]:
    """The timestamp server's grants on ``keyspace`` holding these tables (logical names; the registry
    ``_metadata`` always exists in a store; only tables of the store are named, as for the sweeper)."""
    ks = _ident(keyspace, "keyspace")
    present = {"_metadata", *tables}
    grants = [Grant("SELECT", f"TABLE {ks}.atlas{t}", why)
              for t, why in TIMESTAMP_SERVER_SELECT.items() if t in present]
    grants += [Grant("MODIFY", f"TABLE {ks}.atlas{t}", why)
               for t, why in TIMESTAMP_SERVER_MODIFY.items() if t in present]
    return grants


def admin_grants(keyspace: str) -> list[Grant]:
    """The administrator's grants on ``keyspace`` (a superuser has them all)."""
    ks = _ident(keyspace, "keyspace")
    return [
        Grant("CREATE", f"KEYSPACE {ks}", "init: the engine's tables; new user tables"),
        Grant("ALTER", f"KEYSPACE {ks}", "table options (gc_grace_seconds, compaction) and sweep strategies"),
        Grant("DROP", f"KEYSPACE {ks}", "dropping user tables"),
        Grant("SELECT", f"KEYSPACE {ks}", "reading the registry and the shard count"),
        Grant("MODIFY", f"KEYSPACE {ks}", "the registry, the schema record, shard growth, drop/truncate marks"),
    ]


GrantOutcome = Literal["granted", "already held"]
"""What applying one grant did (the JSON's string)."""
GRANTED: Final = "granted"
ALREADY_HELD: Final = "already held"


@dataclass(frozen=True)
class GrantsApplied:
    """What :func:`apply_grants` did: whether it created the role, and each grant with its outcome
    (:data:`GRANTED` or :data:`ALREADY_HELD`)."""

    role: str
    keyspace: str
    role_created: bool
    outcomes: list[tuple[Grant, GrantOutcome]] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"role": self.role, "keyspace": self.keyspace, "applied": True, "role_created": self.role_created,
                "grants": [{"permission": g.permission, "resource": g.resource, "why": g.why, "cql": g.cql(self.role),
                            "outcome": outcome} for g, outcome in self.outcomes]}


def _listed(resource: str) -> str:
    """``TABLE ks.t`` -> ``<table ks.t>``: a resource as ``LIST PERMISSIONS`` shows it."""
    kind, _, name = resource.partition(" ")
    return f"<{kind.lower()} {name}>"


def apply_grants(kvs: CassandraKeyValueService, role: str, grants: Sequence[Grant], password: str | None = None) -> GrantsApplied:
    """Apply ``grants`` to ``role`` through the session of ``kvs`` (a Cassandra key-value service opened as an
    administrator: a superuser, or a role with AUTHORIZE on the resources and, to create the role, CREATE
    on ALL ROLES). With ``password`` a missing role is created (LOGIN; an existing role keeps its
    password); without it the role must exist. Idempotent. A refusal is the engine's error
    (StorePermissionError naming the permission the administrator lacks)."""
    from .kvs.cassandra.errors import translate

    role = _ident(role, "role")
    keyspace = kvs.keyspace
    secrets = [password] if password else []

    def run(statement: str, params: tuple = ()) -> list:
        try:
            return list(kvs.session.execute(statement, params or None))
        except Exception as exc:
            raise translate(exc, "grants --apply", None, keyspace, secrets) from None

    exists = bool(run("SELECT role FROM system_auth.roles WHERE role = %s", (role,)))
    if not exists and password is None:
        raise InvalidInputError(f"role {role} does not exist: give its password in a file (--password-file FILE, "
                                "mode 0600) to create it, or create it first")
    if not exists:
        run(f"CREATE ROLE IF NOT EXISTS {role} WITH LOGIN = true AND PASSWORD = %s", (password,))
    # (role, username, resource, permission) rows; by position, whatever the session's row factory
    held = {(row[3], row[2]) for row in run(f"LIST ALL PERMISSIONS OF {role} NORECURSIVE")}
    outcomes: list[tuple[Grant, GrantOutcome]] = []
    for grant in grants:
        if (grant.permission, _listed(grant.resource)) in held:
            outcomes.append((grant, ALREADY_HELD))
        else:
            run(grant.cql(role).rstrip(";"))
            outcomes.append((grant, GRANTED))
    return GrantsApplied(role, str(keyspace), not exists, outcomes)
