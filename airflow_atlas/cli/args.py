"""The ``atlas-sweep`` argument parser and its argument types (one-line errors, exit code 2)."""
from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import NoReturn

from .. import __version__
from ..config import DEFAULT_SWEEP_MAX_ENTRIES_PER_SECOND
from ..errors import InvalidInputError
from ..kvs.tables import SWEEPABLE_STRATEGY_NAMES as STRATEGIES
from ..kvs.url import STORE_URL_ENV
from ..status.metrics import SCRAPE_BACKLOG_CAP, SCRAPE_HISTORY_LIMIT, SCRAPE_TIMEOUT_SECONDS
from ..sweep.queue.constants import DEFAULT_BATCH_LIMIT, MAX_BATCH_LIMIT
from ..sweep.queue.reader import DEFAULT_COUNT_CAP
from ..timestamps.addresses import DEFAULT_PORT
from ..timestamps.certs import DEFAULT_DAYS
from ..timestamps.lease import DEFAULT_LEASE_SECONDS
from .metrics import DEFAULT_LISTEN
from .output import EXIT_CODES_HELP, EXIT_USAGE, PROG, CliError


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (raised, so main() prints them and returns exit code 2)."""

    def error(self, message: str) -> NoReturn:  # noqa: D401 - argparse API
        raise CliError(EXIT_USAGE, f"{message} (see '{self.prog} --help')")


def _int_in(lo: int, hi: int | None = None) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < lo or (hi is not None and value > hi):
            raise argparse.ArgumentTypeError(
                f"{value} is out of range ({lo}..{hi})" if hi is not None else f"{value} must be at least {lo}"
            )
        return value

    parse.__name__ = "integer"
    return parse


def _float_where(accept: Callable[[float], bool], rule: str) -> Callable[[str], float]:
    """An argument type: a number that ``accept`` accepts; otherwise the error "<text> <rule>"."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not accept(value):
            raise argparse.ArgumentTypeError(f"{text} {rule}")
        return value

    parse.__name__ = "number"
    return parse


_ratio = _float_where(lambda value: 0.0 <= value <= 1.0, "must be between 0 and 1")
_positive_float = _float_where(lambda value: 0 < value < float("inf"), "must be a positive number")


def _strategy(text: str) -> str:
    value = text.strip().upper()
    if value not in STRATEGIES:
        raise argparse.ArgumentTypeError(f"{text!r} is not a sweep strategy: choose CONSERVATIVE or THOROUGH")
    return value


def _table_spec(text: str) -> tuple[str, str]:
    name, sep, strategy = text.partition(":")
    name = name.strip()
    strategy = (strategy.strip() or "CONSERVATIVE").upper() if sep else "CONSERVATIVE"
    if strategy not in ("NOTHING",) + STRATEGIES:
        raise argparse.ArgumentTypeError(
            f"{text!r}: unknown strategy {strategy!r} (use NAME:CONSERVATIVE, NAME:THOROUGH or NAME:NOTHING)"
        )
    from ..kvs.tables import validate_table_name

    try:
        validate_table_name(name, internal_ok=False)
    except InvalidInputError as exc:
        raise argparse.ArgumentTypeError(f"{text!r}: {exc}") from None
    return name, strategy


def _range(text: str) -> tuple[int, int]:
    lo_text, sep, hi_text = text.partition("-")
    try:
        lo = int(lo_text)
        hi = int(hi_text) if sep else lo
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not N or MIN-MAX") from None
    if not 1 <= lo <= hi:
        raise argparse.ArgumentTypeError(f"{text!r}: need 1 <= MIN <= MAX")
    return lo, hi


def _setting(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=VALUE")
    return name.strip(), value.strip()


# ----- parser ---------------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    """The ``atlas-sweep`` argument parser (also used by the tests)."""
    common = _Parser(add_help=False)  # a parent: only its arguments are used (one parser class, for the types)
    g = common.add_argument_group("store")
    g.add_argument("--store", metavar="URL", default=argparse.SUPPRESS,
                   help=f"store URL (sqlite:///path.db or cassandra://host/keyspace); default ${STORE_URL_ENV}. "
                        f"A URL with a password: put it in ${STORE_URL_ENV} or --store-file, never here")
    g.add_argument("--store-file", metavar="FILE", default=argparse.SUPPRESS,
                   help="file whose first line is the store URL (mode 0600: it may hold a password)")
    g.add_argument("--conn-id", metavar="ID", default=argparse.SUPPRESS,
                   help="Airflow connection id of the store (needs Apache Airflow installed)")
    g.add_argument("--set", metavar="NAME=VALUE", dest="settings", action="append", type=_setting,
                   default=argparse.SUPPRESS,
                   help="engine setting (docs/SETTINGS.md), e.g. unreadable_window_seconds=3600; repeatable")
    g.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print the result as JSON on stdout")

    parser = _Parser(
        prog=PROG,
        description="Operate an airflow-atlas store: create it, load a workload, watch and run targeted sweep, "
        "verify it.",
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[common],
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    def add(name: str, help_text: str, description: str) -> argparse.ArgumentParser:
        return sub.add_parser(
            name, help=help_text, description=description, epilog=EXIT_CODES_HELP,
            formatter_class=argparse.RawDescriptionHelpFormatter, parents=[common],
        )

    p = add("init", "create the store's tables",
            "Create every internal table of the store (idempotent) and make sure it has at least --shards shards. "
            "Optionally create user tables with their sweep strategies.")
    p.add_argument("--shards", type=_int_in(1, 256), default=None, help="minimum number of shards (1..256; never lowered)")
    p.add_argument("--table", metavar="NAME[:STRATEGY]", action="append", type=_table_spec, default=[],
                   help="create a user table (strategy CONSERVATIVE (default), THOROUGH or NOTHING); repeatable")

    p = add("workload", "generate transactions",
            "Run transactions against the store: committed writes and deletes, dead writers (enqueued and "
            "wrote, never committed), aborted transactions and transactions left open. Open transactions stay "
            "registered until their lease expires (transaction_lease_seconds, default 60 s) and hold the sweep "
            "timestamp back meanwhile.")
    p.add_argument("--transactions", "-n", type=_int_in(0), default=200, help="number of transactions (default 200)")
    p.add_argument("--writes-per-transaction", type=_range, default=(1, 8), metavar="MIN[-MAX]",
                   help="writes per transaction (default 1-8)")
    p.add_argument("--table", metavar="NAME[:STRATEGY]", action="append", type=_table_spec, default=None,
                   help="table to write (created if absent); repeatable; default demo_conservative:CONSERVATIVE "
                   "and demo_thorough:THOROUGH")
    p.add_argument("--rows", type=_int_in(1), default=200, help="distinct rows per table (default 200)")
    p.add_argument("--columns", type=_int_in(1), default=4, help="distinct columns per row (default 4)")
    p.add_argument("--delete-ratio", type=_ratio, default=0.1, help="fraction of writes that are deletes (default 0.1)")
    p.add_argument("--abort-ratio", type=_ratio, default=0.05, help="fraction of transactions aborted (default 0.05)")
    p.add_argument("--dead-writer-ratio", type=_ratio, default=0.05,
                   help="fraction of transactions that write and never commit (default 0.05)")
    p.add_argument("--open-transactions", type=_int_in(0), default=0, help="transactions left open at the end (default 0)")
    p.add_argument("--value-bytes", type=_int_in(1, 8 * 1024 * 1024), default=32, help="bytes per value (default 32)")
    p.add_argument("--seed", type=int, default=7, help="random seed (default 7)")
    _progress_args(p)

    p = add("status", "show sweep status per shard and strategy",
            "Per shard and strategy: sweep timestamp, progress, lag, backlog (sweepable and pinned), last run, "
            "tombstones, lock holder; why the sweep timestamp is not advancing; the backlog drain forecast.")
    _selection_args(p)
    p.add_argument("--window", type=_positive_float, default=3600.0, metavar="SECONDS",
                   help="how far back rates are measured (default 3600)")
    p.add_argument("--history", type=_int_in(1, 10_000), default=100, metavar="N",
                   help="history records read per shard and strategy (default 100)")
    p.add_argument("--backlog-cap", type=_int_in(1), default=DEFAULT_COUNT_CAP, metavar="N",
                   help=f"stop counting queued entries at N per shard and strategy (default {DEFAULT_COUNT_CAP})")

    p = add("metrics", "serve the sweep status as Prometheus gauges",
            "Serve the store's sweep status (lag, backlog, failing runs, lock holders, sweep and ingest rates, per "
            "shard and strategy; docs/METRICS.md) in the Prometheus text format over HTTP, read from the store at "
            "each scrape with small caps so a scrape stays cheap, until interrupted (SIGINT or SIGTERM). Listens "
            "on loopback unless --listen names another address.")
    _selection_args(p)
    p.add_argument("--listen", type=_listen, default=_listen(DEFAULT_LISTEN), metavar="HOST:PORT",
                   help=f"address to serve on (default {DEFAULT_LISTEN}; port 0 picks a free one, printed on stdout)")
    p.add_argument("--once", action="store_true", help="print the metrics once on stdout and exit (no server)")
    p.add_argument("--window", type=_positive_float, default=3600.0, metavar="SECONDS",
                   help="how far back rates are measured (default 3600)")
    p.add_argument("--history", type=_int_in(1, 10_000), default=SCRAPE_HISTORY_LIMIT, metavar="N",
                   help=f"history records read per shard and strategy and scrape (default {SCRAPE_HISTORY_LIMIT})")
    p.add_argument("--backlog-cap", type=_int_in(1), default=SCRAPE_BACKLOG_CAP, metavar="N",
                   help=f"stop counting queued entries at N per shard and strategy (default {SCRAPE_BACKLOG_CAP})")
    p.add_argument("--timeout", type=_positive_float, default=SCRAPE_TIMEOUT_SECONDS, metavar="SECONDS",
                   help="longest a scrape waits for the status; then it answers atlas_status_up 0 "
                        f"(default {SCRAPE_TIMEOUT_SECONDS:g})")

    p = add("sweep", "run sweep iterations locally",
            "Sweep the chosen shards and strategies (default: all), each pair under one lease for the whole run "
            "(the engine's TargetedSweeper.sweep_shard, as the Airflow tasks do), until it is caught up to the "
            "sweep timestamp, blocked, or --max-iterations is reached. A pair whose lease another sweeper holds "
            "is skipped (its holder and lease expiry are shown). Every run is recorded in the sweep history. "
            "Exit 1 if a pair failed, 4 if nothing failed but pairs were skipped.")
    _selection_args(p)
    p.add_argument("--dry-run", action="store_true", help="read and report one batch per shard; change nothing")
    p.add_argument("--batch-limit", type=_int_in(1, MAX_BATCH_LIMIT), default=None, metavar="N",
                   help=f"queue entries per iteration (default: the batch_limit setting, {DEFAULT_BATCH_LIMIT})")
    p.add_argument("--max-iterations", type=_int_in(1), default=None, metavar="N",
                   help="iterations per shard and strategy (default: max_iterations_per_shard, 100)")
    p.add_argument("--max-entries-per-second", default=None, metavar="N",  # checked with the settings (--set)
                   help="intensity: queue entries per second per pair at most, paced between iterations; 0 = unlimited "
                        f"(default: the sweep_max_entries_per_second setting, {DEFAULT_SWEEP_MAX_ENTRIES_PER_SECOND} "
                        "unless set; also settable with --set)")
    _progress_args(p)

    p = add("verify", "check the store with the safety oracle",
            "Checks that need no history: (1) no version that a complete sweep up to the shards' progress "
            "should have removed is still present (the oracle's obsolete_versions); (2) no sweep-queue row "
            "below a shard's progress was left behind; (3) no open transaction starts at or below a shard's "
            "progress. Exit 1 with a message on any violation.")
    p.add_argument("--max-examples", type=_int_in(1), default=10, metavar="N", help="violations listed per check (default 10)")

    p = add("shards", "show or raise the shard count",
            "Show the number of shards and each shard's progress, or raise the count with --raise-to. The "
            "shard count is never lowered (queued writes were placed by the count in force when they were "
            "written); asking for fewer shards is refused (exit 2).")
    p.add_argument("--raise-to", type=_int_in(1, 256), default=None, metavar="N", help="raise the shard count to N (1..256)")

    p = add("grants", "print (or apply) the CQL grants of a least-privilege role",
            "Print the GRANT statements a role needs on a Cassandra store's keyspace, each with why: the "
            "sweeper (every DAG, the CLI except init and shards --raise, the Spark jobs): SELECT on the keyspace, "
            "MODIFY on the tables it writes, SELECT on system_distributed.parent_repair_history (compaction's "
            "repair guard); the admin: CREATE, ALTER, DROP, SELECT, MODIFY on the keyspace; the timestamp server "
            "(`timestamps serve`): SELECT and MODIFY on atlas_timestamp, SELECT on atlas_metadata and "
            "atlas_transactions_schema - on every store it serves. Print them again after creating user tables "
            "(the sweeper needs MODIFY on each). Changes nothing, unless --apply.")
    p.add_argument("--role", choices=("sweeper", "admin", "timestamps"), default="sweeper",
                   help="which role (default sweeper; timestamps: the timestamp server's)")
    p.add_argument("--name", type=_identifier, default=None, metavar="ROLE",
                   help="the CQL role to grant to (default: the --role name)")
    p.add_argument("--apply", action="store_true",
                   help="apply the grants through the store's connection, which must be an administrator's "
                        f"(its URL in ${STORE_URL_ENV} or --store-file; a password in --store is refused): "
                        "grants what the role lacks, prints each grant as granted or already held (idempotent)")
    p.add_argument("--password-file", metavar="FILE", default=None,
                   help="with --apply: create the role (LOGIN) if it does not exist, with the password on the "
                        "first line of FILE (mode 0600)")
    p = add("timestamps", "run a timestamp server, adopt a store, or show who serves it",
            "serve: run a timestamp server instance for the store (Cassandra) until SIGTERM/SIGINT; run two or "
            "more for availability (one leads, the others take over within seconds). adopt: move the store's "
            "timestamps from its cell to a timestamp server, one-way (docs/RUNBOOK.md, \"The timestamp server\"). "
            "status: the store's record and each instance's state.")
    p.add_argument("action", choices=("serve", "adopt", "status"))
    p.add_argument("--listen", type=_server_address, default=f"127.0.0.1:{DEFAULT_PORT}", metavar="HOST:PORT",
                   help=f"serve: the address to listen on (default 127.0.0.1:{DEFAULT_PORT}; port 0 picks one)")
    p.add_argument("--advertise", type=_server_address, default=None, metavar="HOST:PORT",
                   help="serve: the address clients reach this instance at, recorded in the store (default --listen)")
    p.add_argument("--lease-seconds", type=_float_where(lambda v: 0.5 <= v <= 60, "must be 0.5..60"),
                   default=DEFAULT_LEASE_SECONDS, metavar="SECONDS",
                   help=f"serve: leadership lease (default {DEFAULT_LEASE_SECONDS:g}; a standby takes over about "
                        "1.2 leases after the leader's last renewal)")
    p.add_argument("--cert-file", metavar="FILE", default=None,
                   help="serve: the server's TLS certificate (chain), a PEM file; with --key-file the instance serves "
                        "only TLS and clients verify it with the CA of the setting timestamp_tls_ca (without both: "
                        "plaintext gRPC, a private network only). Checked at start")
    p.add_argument("--key-file", metavar="FILE", default=None,
                   help="serve: the private key of --cert-file, a PEM file (mode 0600)")
    p.add_argument("--client-ca-file", metavar="FILE", default=None,
                   help="serve, with --cert-file and --key-file: mutual TLS - every client must present a certificate "
                        "this CA (a PEM bundle) signed (settings timestamp_tls_cert/timestamp_tls_key); others are "
                        "refused at the handshake. Checked at start")
    p = sub.add_parser(
        "certs", help="make the timestamp servers' CA, server and client certificates (mutual TLS)",
        description="Make, in DIRECTORY, a CA of the deployment's own (ca.pem, ca.key), a server certificate for "
        "every --host the clients dial (server.pem, server.key: `timestamps serve --cert-file --key-file "
        "--client-ca-file ca.pem`) and a client certificate (client.pem, client.key: the settings "
        "timestamp_tls_ca, timestamp_tls_cert, timestamp_tls_key), keys mode 0600. Idempotent: a directory "
        "holding all six is kept (its server certificate must name every host); one holding some is refused. "
        "Needs no store.", epilog=EXIT_CODES_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("directory", metavar="DIRECTORY", help="where the six files go (created when missing)")
    p.add_argument("--host", action="append", required=True, metavar="NAME",
                   help="a host name or IP address the clients dial the servers by (no port); repeatable")
    p.add_argument("--days", type=_int_in(1, 36500), default=DEFAULT_DAYS, metavar="N",
                   help=f"validity of the certificates in days (default {DEFAULT_DAYS})")
    p.add_argument("--json", action="store_true", default=False, help="print the files as JSON on stdout")
    return parser


def _server_address(text: str) -> str:
    from ..timestamps.addresses import parse_address

    try:
        return parse_address(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _listen(text: str) -> tuple[str, int]:
    from .metrics import parse_listen

    try:
        return parse_listen(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _identifier(text: str) -> str:
    if not text or not (text[0].isalpha() or text[0] == "_") or not all(c.isalnum() or c == "_" for c in text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a plain CQL role name (letters, digits, underscore)")
    return text


def _selection_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--shard", type=_int_in(0, 255), action="append", default=None, metavar="N",
                   help="shard to include (repeatable; default all)")
    p.add_argument("--strategy", type=_strategy, action="append", default=None,
                   help="CONSERVATIVE or THOROUGH (repeatable; default both)")


def _progress_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--progress", dest="progress", action="store_true", default=None,
                   help="always show the progress bar on stderr (default: only on a terminal)")
    p.add_argument("--no-progress", dest="progress", action="store_false", help="never show the progress bar")


