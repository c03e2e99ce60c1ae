"""``atlas-sweep grants``: the CQL grants of a least-privilege role on the store's keyspace (prints only)."""
from __future__ import annotations

from ..grants import admin_grants, sweeper_grants
from .output import EXIT_OK, EXIT_USAGE, CliError, emit_json, wants_json


def cmd_grants(args, h) -> int:
    kvs = h.store.kvs
    keyspace = getattr(kvs, "keyspace", None)
    if keyspace is None:
        raise CliError(EXIT_USAGE, f"grants apply to Cassandra stores; {h.store.describe()} has no roles")
    role = args.name or args.role
    grants = sweeper_grants(keyspace, kvs.list_tables()) if args.role == "sweeper" else admin_grants(keyspace)
    if wants_json(args):
        emit_json({"role": role, "keyspace": keyspace,
                   "grants": [{"permission": g.permission, "resource": g.resource, "why": g.why, "cql": g.cql(role)}
                              for g in grants]})
        return EXIT_OK
    print(f"-- {args.role} role {role} on keyspace {keyspace}: CREATE ROLE {role} WITH LOGIN = true AND PASSWORD = '...';")
    for g in grants:
        print(f"{g.cql(role):<72} -- {g.why}")
    return EXIT_OK
