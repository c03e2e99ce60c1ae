"""``atlas-sweep``: operate an Atlas store from a shell.

Subcommands: ``init``, ``workload``, ``status``, ``sweep``, ``verify``, ``shards`` (``atlas-sweep COMMAND
--help`` for each). The store is chosen by ``--store URL`` (``sqlite:///path.db``,
``cassandra://[user:pass@]host[:port]/keyspace``), by ``--conn-id ID`` (an Airflow connection; Airflow is
imported only then) or by the environment variable ``ATLAS_STORE_URL``.

Exit codes (stable, for scripts):

====  ===========================================================================================
0     success
1     verification failed (``verify``), a sweep iteration failed (``sweep``), or an unexpected error
2     usage or bad input: unknown option, bad value, bad URL, store not initialized, lowering shards
3     store unavailable: Cassandra unreachable, timed out or refusing requests
====  ===========================================================================================

Errors are one line on stderr (``atlas-sweep: error: ...``) naming the problem; expected errors never
print a traceback (set ``ATLAS_DEBUG=1`` to get one for unexpected errors) and no message contains a
password. Results go to stdout (``--json`` for machine-readable output); progress bars go to stderr
(only when it is a terminal, unless ``--progress``).

This module imports nothing from Airflow at import time: ``--conn-id`` imports
``airflow_atlas.airflow.hooks.atlas`` lazily.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
import traceback
from urllib.parse import unquote

from . import __version__
from .errors import AtlasError, InvalidInputError, StoreUnavailableError, TableNotFoundError

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_UNAVAILABLE = 3
PROG = "atlas-sweep"
ENV_STORE_URL = "ATLAS_STORE_URL"
STRATEGIES = ("CONSERVATIVE", "THOROUGH")

EXIT_CODES_HELP = """\
exit codes:
  0  success
  1  verification failed (verify) or a sweep iteration failed (sweep); unexpected error
  2  usage or bad input (bad option or value, bad URL, store not initialized, lowering the shard count)
  3  store unavailable (Cassandra unreachable, timing out or refusing requests)

store selection (first that applies): --store URL, --conn-id ID (an Airflow connection), $ATLAS_STORE_URL
  sqlite:///relative/path.db   sqlite:////absolute/path.db
  cassandra://[user:password@]host1,host2[:port]/keyspace[?replication_factor=1&ssl=true...]
"""


class CliError(Exception):
    """An expected failure: ``message`` goes to stderr as one line, ``code`` is the exit code."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (raised, so main() prints them and returns exit code 2)."""

    def error(self, message: str):  # noqa: D401 - argparse API
        raise CliError(EXIT_USAGE, f"{message} (see '{self.prog} --help')")


# ----- progress bar ---------------------------------------------------------------------------------------
class ProgressBar:
    """A tiny progress bar on stderr: ``label [#######.........]  345/1000  34% 120/s``.

    Disabled (no output at all) unless ``enabled`` is True, or None and the stream is a terminal. Redraws
    at most every 0.1 s; :meth:`close` draws the final state and ends the line.
    """

    def __init__(self, total: int | None, label: str = "", *, stream=None, enabled: bool | None = None, width: int = 30):
        self.stream = stream if stream is not None else sys.stderr
        if enabled is None:
            enabled = bool(getattr(self.stream, "isatty", lambda: False)())
        self.enabled = enabled
        self.total = total if total and total > 0 else None
        self.label = label
        self.width = width
        self.done = 0
        self._started = time.monotonic()
        self._drawn = 0.0
        self._closed = False

    def advance(self, n: int = 1) -> None:
        self.update(self.done + n)

    def update(self, done: int, label: str | None = None) -> None:
        self.done = done
        if label is not None:
            self.label = label
        now = time.monotonic()
        if self.enabled and now - self._drawn >= 0.1:
            self._drawn = now
            self._draw()

    def _draw(self, end: str = "") -> None:
        elapsed = max(time.monotonic() - self._started, 1e-9)
        rate = self.done / elapsed
        if self.total:
            frac = min(1.0, self.done / self.total)
            filled = int(frac * self.width)
            bar = "#" * filled + "." * (self.width - filled)
            text = f"{self.label} [{bar}] {self.done}/{self.total} {frac * 100:3.0f}% {rate:.0f}/s"
        else:
            text = f"{self.label} {self.done} {rate:.0f}/s"
        self.stream.write("\r" + text + " " * 4 + end)
        self.stream.flush()

    def close(self) -> None:
        if self.enabled and not self._closed:
            self._draw(end="\n")
        self._closed = True

    def __enter__(self) -> "ProgressBar":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# ----- argument types ---------------------------------------------------------------------------------------
def _int_in(lo: int, hi: int | None = None):
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


def _ratio(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{value} must be between 0 and 1")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0 or value != value or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text} must be a positive number")
    return value


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
    from .kvs.api import validate_table_name

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
    common = argparse.ArgumentParser(add_help=False)
    g = common.add_argument_group("store")
    g.add_argument("--store", metavar="URL", default=argparse.SUPPRESS,
                   help=f"store URL (sqlite:///path.db or cassandra://host/keyspace); default ${ENV_STORE_URL}")
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
    p.add_argument("--backlog-cap", type=_int_in(1), default=100_000, metavar="N",
                   help="stop counting queued entries at N per shard and strategy (default 100000)")

    p = add("sweep", "run sweep iterations locally",
            "Run targeted-sweep iterations for the chosen shards and strategies (default: all) until each is "
            "caught up to the sweep timestamp, blocked, or --max-iterations is reached. Exit 1 if any "
            "iteration failed.")
    _selection_args(p)
    p.add_argument("--dry-run", action="store_true", help="read and report one batch per shard; change nothing")
    p.add_argument("--batch-limit", type=_int_in(1, 100_000), default=None, metavar="N",
                   help="queue entries per iteration (default: the batch_limit setting, 10000)")
    p.add_argument("--max-iterations", type=_int_in(1), default=None, metavar="N",
                   help="iterations per shard and strategy (default: max_iterations_per_shard, 100)")
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
    return parser


def _selection_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--shard", type=_int_in(0, 255), action="append", default=None, metavar="N",
                   help="shard to include (repeatable; default all)")
    p.add_argument("--strategy", type=_strategy, action="append", default=None,
                   help="CONSERVATIVE or THOROUGH (repeatable; default both)")


def _progress_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--progress", dest="progress", action="store_true", default=None,
                   help="always show the progress bar on stderr (default: only on a terminal)")
    p.add_argument("--no-progress", dest="progress", action="store_false", help="never show the progress bar")


# ----- store ----------------------------------------------------------------------------------------------
def _config(settings):
    """StoreConfig: defaults < ``--set NAME=VALUE`` (each parsed and validated by its setting's declaration)."""
    from .config import StoreConfig

    return StoreConfig().with_text(settings or [], "--set")


def _url_password(url: str | None) -> list[str]:
    """The password of a URL (raw and percent-decoded), to scrub from any message."""
    if not url or "://" not in url:
        return []
    netloc = url.split("://", 1)[1].split("/", 1)[0]
    if "@" not in netloc:
        return []
    userinfo = netloc.rsplit("@", 1)[0]
    if ":" not in userinfo:
        return []
    raw = userinfo.split(":", 1)[1]
    return [p for p in {raw, unquote(raw)} if p]


def _sqlite_path(url: str) -> str | None:
    rest = url.strip()[len("sqlite://"):]
    if not rest.startswith("/"):
        return None
    path = unquote(rest[1:].split("?", 1)[0].split("#", 1)[0])
    return os.path.abspath(path) if path else None


class StoreHandle:
    """The opened store and how to describe it without secrets."""

    def __init__(self, store, label: str, secrets: list[str]):
        self.store = store
        self.label = label
        self.secrets = secrets


def open_store(args, *, must_exist: bool = True) -> StoreHandle:
    """Open the store the arguments name. ``must_exist``: refuse to create anything (a missing SQLite file,
    Cassandra keyspace or internal tables are a usage error: run ``init`` first)."""
    url = getattr(args, "store", None)
    conn_id = getattr(args, "conn_id", None)
    if url is not None and conn_id is not None:
        raise CliError(EXIT_USAGE, "give either --store or --conn-id, not both")
    config = _config(getattr(args, "settings", None))
    if conn_id is not None:
        store, label, secrets = _open_from_connection(conn_id, config), f"Airflow connection {conn_id!r}", []
    else:
        if url is None:
            url = os.environ.get(ENV_STORE_URL)
            if not url:
                raise CliError(EXIT_USAGE, f"no store given: pass --store URL or --conn-id ID, or set {ENV_STORE_URL}")
        from .kvs.url import redact_url
        from .store import AtlasStore

        label = redact_url(url)
        secrets = _url_password(url)
        scheme = url.strip().partition("://")[0].lower()
        options = {}
        if must_exist and scheme == "sqlite":
            path = _sqlite_path(url)
            if path is not None and not os.path.exists(path):
                raise CliError(EXIT_USAGE, f"no store at {label} (file {path} does not exist): run '{PROG} init' first")
        if must_exist and scheme == "cassandra":
            options["create_keyspace"] = False
        try:
            store = AtlasStore.open(url, config, **options)
        except InvalidInputError as exc:
            message = _scrub(str(exc), secrets)
            if must_exist and "does not exist" in message:
                message = f"{message.split(' (')[0]}: run '{PROG} init --store URL' first"
            raise CliError(EXIT_USAGE, f"{label}: {message}") from None
    if must_exist:
        from .sweep.queue_tables import SWEEP_PROGRESS

        try:
            initialized = store.kvs.table_exists(SWEEP_PROGRESS)
        except BaseException:
            store.close()
            raise
        if not initialized:
            store.close()
            raise CliError(EXIT_USAGE, f"store {label} is not initialized: run '{PROG} init' first")
        try:
            store.transactions_schema_version  # refuse a disagreeing setting before anything runs
        except BaseException:
            store.close()
            raise
    return StoreHandle(store, label, secrets)


def _open_from_connection(conn_id: str, config):
    # Airflow may log to stdout while it loads its configuration and resolves the connection; keep stdout
    # for results (--json) by sending anything printed meanwhile to stderr.
    with contextlib.redirect_stdout(sys.stderr):
        try:
            from .airflow.hooks.atlas import AtlasHook  # imports Airflow: only on this path
        except ImportError as exc:
            raise CliError(EXIT_USAGE, f"--conn-id needs Apache Airflow and this package's Airflow hook: {exc}") from None
        try:
            return AtlasHook(atlas_conn_id=conn_id, config=config).get_store()
        except (AtlasError, CliError):
            raise
        except Exception as exc:
            names = {c.__name__ for c in type(exc).__mro__}
            if "AirflowNotFoundException" in names:
                raise CliError(EXIT_USAGE, f"Airflow connection {conn_id!r} is not defined") from None
            raise


def _scrub(text: str, secrets: list[str]) -> str:
    for secret in secrets:
        text = text.replace(secret, "***")
    return text


def _emit_json(data) -> None:
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")


# ----- commands -------------------------------------------------------------------------------------------
def cmd_init(args, h: StoreHandle) -> int:
    store = h.store
    before = None
    try:
        before = store.number_of_shards() if store.kvs.table_exists("_sweep_progress") else None
    except AtlasError:
        before = None
    store.initialize(shards=args.shards)
    created = []
    existing = store.user_tables()
    for name, strategy in args.table:
        if name in existing:
            if existing[name].value != strategy:
                raise CliError(EXIT_USAGE, f"table {name!r} exists with strategy {existing[name].value}, not {strategy}")
            continue
        store.create_table(name, strategy)
        created.append(name)
    shards = store.number_of_shards()
    result = {"store": store.describe(), "number_of_shards": shards, "shards_before": before,
              "tables_created": created, "tables": {k: v.value for k, v in sorted(store.user_tables().items())}}
    if getattr(args, "json", False):
        _emit_json(result)
    else:
        print(f"initialized {store.describe()}: {shards} shard(s)")
        if args.shards is not None and args.shards < shards:
            print(f"note: the shard count stays {shards}: it is never lowered")
        for name in created:
            print(f"created table {name} ({result['tables'][name]})")
    return EXIT_OK


def cmd_workload(args, h: StoreHandle) -> int:
    from .workload import WorkloadSpec, run_workload

    tables = dict(args.table) if args.table else None
    spec = WorkloadSpec(
        transactions=args.transactions,
        writes_per_transaction=args.writes_per_transaction,
        rows=args.rows,
        columns=args.columns,
        delete_ratio=args.delete_ratio,
        dead_writer_ratio=args.dead_writer_ratio,
        abort_ratio=args.abort_ratio,
        open_transactions=args.open_transactions,
        value_bytes=args.value_bytes,
        seed=args.seed,
    )
    if tables:
        spec.tables = tables
    if spec.dead_writer_ratio + spec.abort_ratio > 1.0:
        raise CliError(EXIT_USAGE, "--dead-writer-ratio plus --abort-ratio must not exceed 1")
    spec.validate()
    started = time.monotonic()
    with ProgressBar(spec.transactions, "workload", enabled=args.progress) as bar:
        report = run_workload(h.store, spec, progress=bar.update)
    result = report.to_json()
    result["seconds"] = round(time.monotonic() - started, 3)
    result["tables"] = dict(spec.tables)
    result["lease_seconds"] = h.store.config.transaction_lease_seconds
    if getattr(args, "json", False):
        _emit_json(result)
    else:
        print(
            f"workload: {spec.transactions} transaction(s) in {result['seconds']:.2f}s: {report.committed} committed, "
            f"{report.dead_writers} dead writer(s), {report.aborted} aborted, {report.conflicts} conflict(s); "
            f"{report.writes} write(s) ({report.deletes} delete(s)) to {', '.join(spec.tables)}"
        )
        if result["open"]:
            print(
                f"left open: {len(result['open'])} transaction(s) starting at {', '.join(map(str, result['open']))}; "
                f"they hold the sweep timestamp back until their lease expires (~{result['lease_seconds']:.0f}s)"
            )
    return EXIT_OK


def cmd_status(args, h: StoreHandle) -> int:
    from .status import compute_status

    status = compute_status(
        h.store,
        shards=args.shard,
        strategies=args.strategy,
        window_seconds=args.window,
        history_limit=args.history,
        backlog_cap=args.backlog_cap,
    )
    if getattr(args, "json", False):
        _emit_json(status)
    else:
        sys.stdout.write(render_status(status))
    return EXIT_OK


def cmd_sweep(args, h: StoreHandle) -> int:
    from .kvs.api import SweepStrategy
    from .sweep.targeted import ShardSweepResult, default_holder

    store = h.store
    shards = _check_shards(store, args.shard)
    strategies = args.strategy or list(STRATEGIES)
    strategies = [s for s in STRATEGIES if s in strategies]
    max_iterations = args.max_iterations or store.config.max_iterations_per_shard
    sweep_ts = {s: store.sweep_timestamps.sweep_timestamp(s) for s in strategies}
    pairs = [(shard, s) for shard in shards for s in strategies]
    bar = ProgressBar(None, "sweep", enabled=args.progress)
    if bar.enabled:
        total = 0
        for shard, s in pairs:
            progress = store.queue.progress.get_progress(shard, s)
            if progress < sweep_ts[s] - 1:
                total += store.queue.reader.count_entries(shard, s, progress, sweep_ts[s], cap=1_000_000)
        bar.total = total or None
    holder = default_holder()
    results, failures = [], []
    started = time.monotonic()
    with bar:
        for shard, s in pairs:
            bar.update(bar.done, label=f"shard {shard} {s.lower()}")
            summary = ShardSweepResult(shard=shard, strategy=s, status="caught_up", sweep_ts=sweep_ts[s])
            t0 = time.monotonic()
            try:
                for _ in range(max_iterations):
                    it = store.sweeper.run_iteration(
                        shard, SweepStrategy.parse(s), sweep_ts=sweep_ts[s], holder=holder,
                        batch_limit=args.batch_limit, dry_run=args.dry_run,
                    )
                    if it.status == "skipped_locked":
                        summary.status = "skipped_locked"
                        summary.lock_holder = it.lock_holder
                        break
                    summary.add(it)
                    summary.lock_holder = it.lock_holder
                    bar.advance(it.entries_read)
                    if it.status in ("caught_up", "blocked", "dry_run"):
                        summary.status = it.status
                        break
                else:
                    summary.status = "iteration_limit"
            except StoreUnavailableError:
                raise
            except Exception as exc:  # one failed shard does not stop the others; exit 1 at the end
                failures.append({"shard": shard, "strategy": s, "error": f"{type(exc).__name__}: {_scrub(str(exc), h.secrets)}"})
                summary.status = "failed"
            summary.duration_seconds = round(time.monotonic() - t0, 6)
            results.append(summary.to_json())
    totals = {k: sum(r[k] for r in results) for k in ("entries_read", "cells_tombstoned", "sentinels_written",
                                                      "aborted_writes_deleted", "transactions_aborted", "iterations")}
    out = {"dry_run": args.dry_run, "sweep_timestamps": sweep_ts, "results": results, "totals": totals,
           "failures": failures, "seconds": round(time.monotonic() - started, 3)}
    if getattr(args, "json", False):
        _emit_json(out)
    else:
        for r in results:
            what = "would sweep" if args.dry_run else r["status"]
            line = (f"shard {r['shard']} {r['strategy']}: {what} after {r['iterations']} iteration(s): progress "
                    f"{r['old_progress']} -> {r['new_progress']} (sweep ts {r['sweep_ts']}), {r['entries_read']} entries read, "
                    f"{r['cells_tombstoned']} cells tombstoned, {r['sentinels_written']} sentinels, "
                    f"{r['aborted_writes_deleted']} aborted writes deleted")
            if r["status"] == "skipped_locked":
                line = f"shard {r['shard']} {r['strategy']}: skipped, locked by {r['lock_holder']}"
            elif r["status"] == "failed":
                line = f"shard {r['shard']} {r['strategy']}: FAILED"
            elif r["status"] == "blocked" and r.get("blocked_by"):
                line += f"; blocked by transaction {r['blocked_by'].get('start_ts')} committed at {r['blocked_by'].get('commit_ts')}"
            print(line)
        print(f"{'dry run: ' if args.dry_run else ''}{len(results)} shard/strategy pair(s) in {out['seconds']:.2f}s: "
              f"{totals['entries_read']} entries, {totals['cells_tombstoned']} cells tombstoned, "
              f"{totals['aborted_writes_deleted']} aborted writes deleted")
    for f in failures:
        print(f"{PROG}: error: sweep of shard {f['shard']} {f['strategy']} failed: {f['error']}", file=sys.stderr)
    return EXIT_FAILED if failures else EXIT_OK


def cmd_verify(args, h: StoreHandle) -> int:
    from .verify import run_verify

    report = run_verify(h.store, max_examples=args.max_examples)
    if getattr(args, "json", False):
        _emit_json(report.to_json())
    else:
        print(f"transactions schema version {report.transactions_schema_version}; limits {report.limits}")
        for name, c in report.checks.items():
            status = "ok  " if c.ok and not c.count else ("warn" if c.ok else "FAIL")
            print(f"{status} {name}: {c.count} problem(s)")
            for f in (f for f in report.findings if f.check == name):
                print(f"     {f.kind}: {f.detail}")
                print(f"       what to do: {f.action}")
    if not report.ok:
        failed = [f"{c.count} {name.replace('_', ' ')}" for name, c in report.checks.items() if not c.ok]
        first = next((f.detail for f in report.findings if f.severity == "violation"), "")
        print(f"{PROG}: error: verification failed: {'; '.join(failed)} (first: {first})", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def cmd_shards(args, h: StoreHandle) -> int:
    store = h.store
    current = store.number_of_shards()
    result = {"store": store.describe(), "number_of_shards": current}
    if args.raise_to is not None:
        if args.raise_to < current:
            raise CliError(
                EXIT_USAGE,
                f"cannot lower the shard count from {current} to {args.raise_to}: shards are never removed "
                "(queued writes were placed by the count in force when they were written)",
            )
        new = store.queue.update_number_of_shards(args.raise_to)
        result.update(number_of_shards=new, previous=current, changed=new != current)
        if getattr(args, "json", False):
            _emit_json(result)
        elif new == current:
            print(f"the store already has {current} shard(s)")
        else:
            print(f"raised the shard count from {current} to {new}")
        return EXIT_OK
    result["progress"] = [
        {"shard": shard, **{s: store.queue.progress.get_progress(shard, s) for s in STRATEGIES}} for shard in range(current)
    ]
    if getattr(args, "json", False):
        _emit_json(result)
    else:
        print(f"{current} shard(s) in {store.describe()}")
        print(_table(["SHARD", "CONSERVATIVE PROGRESS", "THOROUGH PROGRESS"],
                     [[p["shard"], p["CONSERVATIVE"], p["THOROUGH"]] for p in result["progress"]]), end="")
    return EXIT_OK


def _check_shards(store, shards) -> list[int]:
    count = store.number_of_shards()
    if shards is None:
        return list(range(count))
    bad = [s for s in shards if s >= count]
    if bad:
        raise CliError(EXIT_USAGE, f"shard {bad[0]} is out of range: this store has {count} shard(s) (0..{count - 1})")
    return sorted(set(shards))


COMMANDS = {
    "init": (cmd_init, False),
    "workload": (cmd_workload, True),
    "status": (cmd_status, True),
    "sweep": (cmd_sweep, True),
    "verify": (cmd_verify, True),
    "shards": (cmd_shards, True),
}


# ----- rendering ------------------------------------------------------------------------------------------
def _table(headers: list[str], rows: list[list]) -> str:
    cells = [[("-" if v is None else str(v)) for v in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip()]
    for r in cells:
        lines.append("  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip())
    return "\n".join(lines) + "\n"


def _count(n: int, capped: bool) -> str:
    return f"{n}+" if capped else str(n)


def _rate(value) -> str:
    return "-" if value is None else f"{value:.3g}/s"


def render_status(status: dict) -> str:
    """The text form of :func:`airflow_atlas.status.compute_status` output."""
    from .status import format_duration as dur

    out = []
    ts = status["timestamps"]
    out.append(f"store: {status['store']}    shards: {status['number_of_shards']}    fresh ts: {ts['fresh_ts']}    "
               f"generated: {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(status['generated_at']))}")
    if status["tables"]:
        out.append("tables: " + ", ".join(f"{k} ({v})" for k, v in status["tables"].items()))
    out.append("sweep timestamps: " + ", ".join(f"{k} {v}" for k, v in status["sweep_timestamps"].items()))
    out.append("")
    rows = []
    for r in status["shards"]:
        last = r["last_run"]
        last_text = "never" if last is None else f"{last['status']} {dur(last['age_seconds'])} ago"
        lag_s = "-" if r["lag_seconds"] is None else (">" if r["lag_seconds_is_lower_bound"] else "") + dur(r["lag_seconds"])
        rows.append([
            r["shard"], r["strategy"], r["sweep_ts"], r["progress"], r["lag_ts"], lag_s,
            _count(r["backlog_entries"], r["backlog_capped"]), _count(r["sweepable_entries"], r["sweepable_capped"]),
            _count(r["pinned_entries"], r["pinned_capped"]), last_text, r["tombstones_written"], r["lock_holder"],
        ])
    out.append(_table(["SHARD", "STRATEGY", "SWEEP_TS", "PROGRESS", "LAG_TS", "LAG", "BACKLOG", "SWEEPABLE", "PINNED",
                       "LAST RUN", "TOMBSTONES", "LOCK"], rows).rstrip("\n"))
    out.append("")
    out.append("Why the sweep timestamp is not advancing")
    for strategy, w in status["why_not_advancing"].items():
        out.append(f"  {w['message']}")
        pinned = [p for p in w["pinned_by_shard"] if p["entries"]]
        if pinned and w["limited_by"] != "none":
            out.append("    pinned per shard: " + ", ".join(f"{p['shard']}: {_count(p['entries'], p['capped'])}" for p in pinned))
    out.append("")
    out.append(f"Backlog drain forecast (window {dur(status['settings']['window_seconds'])})")
    rows = []
    for r in status["shards"]:
        f = r["forecast"]
        drain = f["time_to_drain_seconds"]
        rows.append([
            r["shard"], r["strategy"], _count(f["backlog_entries"], f["backlog_capped"]), _rate(f["ingest_rate_per_second"]),
            _rate(f["sweep_rate_per_second"]), "-" if drain is None else dur(drain), f["state"],
            "INGEST OUTPACES SWEEP" if f["ingest_outpaces_sweep"] else "",
        ])
    out.append(_table(["SHARD", "STRATEGY", "BACKLOG", "INGEST", "SWEEP", "DRAIN IN", "STATE", ""], rows).rstrip("\n"))
    if status["warnings"] or status["quarantined_cells"]:
        out.append("")
        out.append("Warnings")
        for w in status["warnings"]:
            out.append(f"  shard {w['shard']} {w['strategy']}: {w['message']}")
        if status["quarantined_cells"]:
            out.append(f"  {status['quarantined_cells']} corrupt queue cell(s) quarantined recently")
    return "\n".join(out) + "\n"


# ----- main -----------------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    """Run ``atlas-sweep``; returns the exit code (see the module docstring)."""
    parser = build_parser()
    secrets: list[str] = []
    try:
        try:
            args = parser.parse_args(argv)
        except SystemExit as exc:  # --help / --version
            return int(exc.code or 0)
        secrets = _url_password(getattr(args, "store", None) or os.environ.get(ENV_STORE_URL))
        fn, must_exist = COMMANDS[args.command]
        handle = open_store(args, must_exist=must_exist)
        secrets = handle.secrets
        try:
            return fn(args, handle)
        finally:
            try:
                handle.store.close()
            except Exception:
                pass
    except CliError as exc:
        return _fail(exc.code, _scrub(exc.message, secrets))
    except StoreUnavailableError as exc:
        return _fail(EXIT_UNAVAILABLE, f"store unavailable: {_scrub(str(exc), secrets)}")
    except TableNotFoundError as exc:
        return _fail(EXIT_USAGE, f"{_scrub(str(exc), secrets)} (is the store initialized? run '{PROG} init')")
    except InvalidInputError as exc:
        return _fail(EXIT_USAGE, _scrub(str(exc), secrets))
    except AtlasError as exc:
        return _fail(EXIT_FAILED, f"{type(exc).__name__}: {_scrub(str(exc), secrets)}")
    except KeyboardInterrupt:
        return _fail(130, "interrupted")
    except Exception as exc:  # unexpected: still one line, unless ATLAS_DEBUG asks for the traceback
        if os.environ.get("ATLAS_DEBUG"):
            traceback.print_exc()
        return _fail(EXIT_FAILED, f"unexpected {type(exc).__name__}: {_scrub(str(exc), secrets)}")


def _fail(code: int, message: str) -> int:
    print(f"{PROG}: error: {message}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
