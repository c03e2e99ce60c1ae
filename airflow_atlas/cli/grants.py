"""``atlas-sweep grants``: the CQL grants of a least-privilege role on the store's keyspace (the sweeper, the
administrator, the timestamp server: :mod:`airflow_atlas.grants`); prints them, or
with ``--apply`` applies them through the store's connection, which must be an administrator's
(:func:`airflow_atlas.grants.apply_grants`). The administrator's password comes from ``$ATLAS_STORE_URL``
or ``--store-file``, the new role's from ``--password-file``: never from the command line."""
from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ..errors import InvalidInputError
from ..grants import GRANTED, Grant, admin_grants, apply_grants, sweeper_grants, timestamp_server_grants
from ..kvs.scrub import url_secrets
from ..kvs.url import read_private_line
from .output import EXIT_OK, EXIT_USAGE, CliError, emit_json, wants_json

if TYPE_CHECKING:
    from ..kvs.cassandra import CassandraKeyValueService
    from .store import StoreHandle


def cmd_grants(args: argparse.Namespace, h: StoreHandle) -> int:
    from ..kvs.cassandra import CassandraKeyValueService

    kvs = h.store.kvs
    if not isinstance(kvs, CassandraKeyValueService):
        raise CliError(EXIT_USAGE, f"grants apply to Cassandra stores; {h.store.describe()} has no roles")
    keyspace = kvs.keyspace
    role = args.name or args.role
    if args.role == "sweeper":
        grants = sweeper_grants(keyspace, kvs.list_tables())
    elif args.role == "timestamps":
        grants = timestamp_server_grants(keyspace, kvs.list_tables())
    else:
        grants = admin_grants(keyspace)
    if args.apply:
        return _apply(args, h, kvs, role, grants)
    if args.password_file is not None:
        raise CliError(EXIT_USAGE, "--password-file goes with --apply (it is the password of the role --apply creates)")
    if wants_json(args):
        emit_json({"role": role, "keyspace": keyspace,
                   "grants": [{"permission": g.permission, "resource": g.resource, "why": g.why, "cql": g.cql(role)}
                              for g in grants]})
        return EXIT_OK
    print(f"-- {args.role} role {role} on keyspace {keyspace}: CREATE ROLE {role} WITH LOGIN = true AND PASSWORD = '...';")
    for g in grants:
        print(f"{g.cql(role):<72} -- {g.why}")
    return EXIT_OK


def _apply(
    args: argparse.Namespace, h: StoreHandle, kvs: CassandraKeyValueService, role: str, grants: list[Grant]
) -> int:
    if url_secrets(getattr(args, "store", None)):
        raise CliError(EXIT_USAGE, "grants --apply: the administrator's password is on the command line (--store), "
                       "where every local user sees it; put the URL in $ATLAS_STORE_URL or a 0600 file (--store-file)")
    password = None
    if args.password_file is not None:
        try:
            password = read_private_line(args.password_file, "password file")
        except InvalidInputError as exc:
            raise CliError(EXIT_USAGE, str(exc)) from None
        h.secrets.append(password)
    done = apply_grants(kvs, role, grants, password)
    if wants_json(args):
        emit_json(done.to_json())
        return EXIT_OK
    made = "created (LOGIN, password from the file)" if done.role_created else "exists (its password unchanged)"
    print(f"-- {args.role} role {role} on keyspace {done.keyspace}: {made}")
    for grant, outcome in done.outcomes:
        print(f"{outcome:<13} {grant.cql(role):<72} -- {grant.why}")
    granted = sum(1 for _, outcome in done.outcomes if outcome == GRANTED)
    print(f"-- {granted} granted, {len(done.outcomes) - granted} already held")
    return EXIT_OK
