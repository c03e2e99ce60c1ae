"""``atlas-sweep timestamps serve|adopt|status``: run a timestamp server, move a store to it, look at it.

- ``serve --listen HOST:PORT [--cert-file FILE --key-file FILE [--client-ca-file FILE]]``: run one instance (over
  TLS with the certificate and key, PEM files checked at start, and requiring client certificates that the client
  CA signed with ``--client-ca-file``: mutual TLS; else plaintext gRPC) for the store (and, on request, the other
  adopted keyspaces of its cluster) until SIGTERM or SIGINT; prints ``serving ... on HOST:PORT`` once it listens.
- ``adopt``: move a Cassandra store's timestamps from its cell to a timestamp server (one-way; idempotent).
  A process of the previous release fails on the store from then on instead of drawing a timestamp.
- ``status``: the store's record (leader, epoch, bound) and what each server instance reports.
"""
from __future__ import annotations

import argparse
import signal
import threading
from typing import TYPE_CHECKING

from ..errors import InvalidInputError
from .output import EXIT_OK, EXIT_UNAVAILABLE, emit_json, wants_json

if TYPE_CHECKING:
    from .store import StoreHandle


def cmd_timestamps(args: argparse.Namespace, h: StoreHandle) -> int:
    kvs = h.store.kvs
    if kvs.backend != "cassandra":
        raise InvalidInputError(
            f"{h.label} is an embedded store: it keeps its timestamps in its own file and needs no timestamp server"
        )
    return {"serve": _serve, "adopt": _adopt, "status": _status}[args.action](args, h)


def _serve(args: argparse.Namespace, h: StoreHandle) -> int:
    from ..timestamps.server import TimestampServer
    from ..timestamps.tls import server_credentials

    listen = args.listen
    if (args.cert_file is None) != (args.key_file is None):
        raise InvalidInputError("timestamps serve: --cert-file and --key-file go together (TLS needs both)")
    if args.client_ca_file is not None and args.cert_file is None:
        raise InvalidInputError("timestamps serve: --client-ca-file needs --cert-file and --key-file (client "
                                "certificates are checked only over TLS)")
    # every file checked before the store is opened
    tls = server_credentials(args.cert_file, args.key_file, args.client_ca_file) if args.cert_file else None
    server = TimestampServer(h.store.kvs, args.advertise or listen, lease_seconds=args.lease_seconds)
    port = server.start(listen, credentials=tls)
    host = listen.rpartition(":")[0]
    mode = ("plaintext gRPC: a private network only" if tls is None
            else "TLS, client certificates required" if args.client_ca_file else "TLS")
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    print(f"serving the timestamps of {h.label} on {host}:{port} as {server.holder} "
          f"({mode})", flush=True)
    stop.wait()
    server.stop()
    print("stopped: leadership released", flush=True)
    return EXIT_OK


def _adopt(args: argparse.Namespace, h: StoreHandle) -> int:
    from ..timestamps.record import adopt

    h.store.timestamps.ensure_tables()
    bound = adopt(h.store.kvs)
    result = {"store": h.label, "bound_at_adoption": bound}
    if wants_json(args):
        emit_json(result)
    else:
        print(f"adopted {h.label}: every timestamp above {bound} comes from a timestamp server; start one with "
              "`atlas-sweep timestamps serve` (processes of the previous release now fail on this store)")
    return EXIT_OK


def _status(args: argparse.Namespace, h: StoreHandle) -> int:
    import grpc

    from ..timestamps import timestamps_pb2 as pb
    from ..timestamps.record import is_adopted, read_record
    from ..timestamps.rpc import TimestampsStub
    from ..timestamps.tls import closed_cause, is_closed

    kvs = h.store.kvs
    adopted = is_adopted(kvs)
    record = read_record(kvs, serial=False)[0] if adopted else None
    servers = list(dict.fromkeys([*h.store.config.timestamp_servers,
                                  *([record.leader_address] if record and record.leader else [])]))
    answers = []
    tls = h.store.timestamp_tls
    credentials = tls.credentials() if tls is not None else None
    for address in servers:
        channel = grpc.insecure_channel(address) if credentials is None else grpc.secure_channel(address, credentials)
        try:
            reply = TimestampsStub(channel).Describe(pb.DescribeRequest(), timeout=2.0)
            answers.append({"server": address, "stores": [
                {"store": s.store, "role": s.role, "epoch": s.epoch, "issued": s.issued, "bound": s.bound,
                 "leader": s.leader, "lease_remaining_seconds": round(s.lease_remaining_seconds, 3)}
                for s in reply.stores]})
        except grpc.RpcError as exc:
            closed = exc.code() == grpc.StatusCode.UNAVAILABLE and is_closed(exc.details())
            answers.append({"server": address, "error": f"{exc.code().name} {exc.details()}"
                            + (f" {closed_cause(tls)}" if closed else "")})
        finally:
            channel.close()
    result = {"store": h.label, "adopted": adopted,
              "record": None if record is None else {"epoch": record.epoch, "bound": record.bound,
                                                     "leader": record.leader_address, "seq": record.seq},
              "servers": answers}
    if wants_json(args):
        emit_json(result)
    else:
        if not adopted:
            print(f"{h.label}: timestamps from the store's cell (not adopted by a timestamp server)")
        elif record is not None:
            leader = record.leader_address or "(none)"
            print(f"{h.label}: served; leader {leader} epoch {record.epoch} bound {record.bound}")
        for a in answers:
            if "error" in a:
                print(f"  {a['server']}: unreachable ({a['error']})")
            for s in a.get("stores", []):
                print(f"  {a['server']}: {s['store']} {s['role']} epoch {s['epoch']} issued {s['issued']}")
    reachable = any("error" not in a for a in answers)
    return EXIT_OK if not adopted or reachable else EXIT_UNAVAILABLE
