"""Security: credentials never leak, identifiers are validated, values are bound, no shell.

* Credentials come from an Airflow connection (or the environment) and never show up in logs, XCom values,
  exceptions (message, repr, chained causes, formatted traceback) or CLI output. The failure paths are
  exercised against a port nothing listens on (engine URL, ``ATLAS_STORE_URL``, the Airflow hook, an
  operator, ``atlas-sweep --store/--conn-id``); the success path against the
  shared node (its AllowAllAuthenticator accepts any credentials): operators' XCom values, sweep results
  and history records, ``atlas-sweep status --json``.
* Auth and TLS reach the driver from the connection (login/password and the ``ssl_options`` extra -> the
  store address the engine opens, its CA pinned before connecting).
* Identifiers: hostile table names are refused by every entry point before any CQL reaches the node (the
  session's statements are recorded); hostile cell names and values are bound parameters: stored, swept
  and read back byte for byte, and the keyspace is intact.
* No shell: no ``shell=True``, ``os.system`` or ``os.popen`` anywhere in the package; the nodetool runner
  passes a hostile table name as one argv element (a shell-injection attempt creates no file); a shell
  string as the nodetool command is refused.
"""
from __future__ import annotations

import ast
import json
import logging
import os
import socket
import subprocess
import sys
import traceback
from pathlib import Path
from urllib.parse import quote

import pytest

from airflow_atlas.errors import InvalidInputError, StoreUnavailableError, TableNotFoundError
from airflow_atlas.kvs.api import Cell
from airflow_atlas.serialisation import to_json
from airflow_atlas.store import AtlasStore
from tests.conftest import REPO_ROOT

from .helpers import CONFIG, sweep_all

pytestmark = pytest.mark.cassandra

SECRET = "S3cr3tPa55-w0rd"
ODD_SECRET = "p@ss:w/rd%;x"  # needs percent-encoding in a URL


def _dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again: nothing listens there


def _everything(exc: BaseException) -> str:
    """Message, repr and the formatted traceback of an exception and all its causes/contexts."""
    parts, seen = [], set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        parts += [str(exc), repr(exc), "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))]
        exc = exc.__cause__ or exc.__context__
    return "\n".join(parts)


def _assert_no_secret(text: str, *secrets: str) -> None:
    for secret in secrets or (SECRET,):
        for form in {secret, quote(secret, safe=""), quote(secret)}:
            assert form not in text, f"secret leaked: ...{text[max(0, text.find(form) - 200): text.find(form) + 50]}..."


def _cli(*args: str, env: dict | None = None, cwd=None) -> subprocess.CompletedProcess:
    full = os.environ.copy()
    full.pop("ATLAS_STORE_URL", None)
    full["PYTHONPATH"] = str(REPO_ROOT)
    full.update(env or {})
    return subprocess.run([sys.executable, "-m", "airflow_atlas.cli", *args], capture_output=True, text=True,
                          env=full, cwd=cwd, timeout=300)


# ----- credentials on failure paths -----------------------------------------------------------------------
@pytest.mark.parametrize("password", [SECRET, ODD_SECRET])
def test_engine_connection_failure_never_shows_the_password(password, caplog, capfd):
    caplog.set_level(logging.DEBUG)
    url = f"cassandra://sweeper:{quote(password, safe='')}@127.0.0.1:{_dead_port()}/atlas_sec?connect_timeout=2"
    with pytest.raises(StoreUnavailableError) as failure:
        AtlasStore.open(url)
    text = _everything(failure.value)
    assert "127.0.0.1" in text  # the error still says where it tried
    out, err = capfd.readouterr()
    _assert_no_secret(text + caplog.text + out + err, password)


def test_cli_never_shows_the_password(tmp_path, airflow_home):
    port = _dead_port()
    url = f"cassandra://sweeper:{SECRET}@127.0.0.1:{port}/atlas_sec?connect_timeout=2"
    # (--store with a password is covered by tests/integration/cli/test_cli_errors.py.)
    runs = {
        "env sweep": _cli("sweep", "--no-progress", env={"ATLAS_STORE_URL": url}, cwd=tmp_path),
        "--conn-id status": _cli("status", "--conn-id", "atlas_sec", cwd=tmp_path, env={
            "AIRFLOW_CONN_ATLAS_SEC": json.dumps({"conn_type": "cassandra", "host": "127.0.0.1", "port": port,
                                                  "schema": "atlas_sec", "login": "sweeper", "password": SECRET}),
        }),
    }
    for name, done in runs.items():
        assert done.returncode == 3, (name, done.returncode, done.stderr[-2000:])
        assert "127.0.0.1" in done.stderr, (name, done.stderr)
        _assert_no_secret(done.stdout + done.stderr)


def _conn(port: int, keyspace: str = "atlas_sec", **extra) -> str:
    return json.dumps({"conn_type": "cassandra", "host": "127.0.0.1", "port": port, "schema": keyspace,
                       "login": "sweeper", "password": SECRET, "extra": extra})


def test_hook_and_operator_failures_never_show_the_password(monkeypatch, caplog, capfd, airflow_home):
    from airflow.sdk.exceptions import AirflowFailException

    from airflow_atlas.airflow.hooks.atlas import AtlasHook
    from airflow_atlas.airflow.operators.sweep_timestamps import PlanTargetedSweepOperator

    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("AIRFLOW_CONN_ATLAS_SEC", _conn(_dead_port()))
    monkeypatch.setenv("AIRFLOW_VAR_ATLAS_SETTINGS", json.dumps({"store_conn_id": "atlas_sec"}))
    texts = []
    with AtlasHook("atlas_sec") as hook:
        with pytest.raises(StoreUnavailableError) as failure:
            hook.get_store()
        texts.append(_everything(failure.value))
        ok, message = hook.test_connection()  # the UI's "Test" button
        assert not ok
        texts.append(message)
        texts.append(json.dumps(hook.describe()))  # safe to log / XCom by contract
    with pytest.raises((StoreUnavailableError, AirflowFailException)) as failure:
        PlanTargetedSweepOperator(task_id="plan").execute({})
    texts.append(_everything(failure.value))
    out, err = capfd.readouterr()
    _assert_no_secret("\n".join(texts) + caplog.text + out + err)


def test_auth_and_tls_reach_the_driver_from_the_connection(monkeypatch, tmp_path, airflow_home):
    """The connection's login/password and ``ssl_options`` become the store address the engine opens (and the
    URL Spark gets); the pinned CA is loaded before any connection is tried."""
    from airflow_atlas.airflow.hooks.atlas import AtlasHook

    ca = tmp_path / "ca.pem"
    ca.write_text("not really a certificate\n")
    monkeypatch.setenv("AIRFLOW_CONN_ATLAS_SEC", _conn(9042, ssl_options={"ca_certs": str(ca)}))
    address = AtlasHook("atlas_sec").address()
    assert (address.username, address.password, address.ssl, address.ssl_ca) == ("sweeper", SECRET, True, str(ca))
    with AtlasHook("atlas_sec") as hook, pytest.raises(InvalidInputError, match="cannot load the TLS CA file") as refused:
        hook.get_store()  # the engine's one TLS context pins the connection's CA: refused before connecting
    url = AtlasHook("atlas_sec").get_store_url()  # for Spark executors: TLS and auth carried over
    assert "ssl=true" in url and quote(str(ca), safe="") in url and url.startswith("cassandra://sweeper:")
    info = AtlasHook("atlas_sec").describe()
    assert info["authenticated"] is True and info["ssl"] is True
    _assert_no_secret(json.dumps(info) + repr(address) + _everything(refused.value))


# ----- credentials on the success path: XCom values, results, history, status ----------------------------------
def test_a_sweep_with_credentials_leaks_them_nowhere(shared_stores, cassandra_node, monkeypatch, caplog, capfd,
                                                     tmp_path, airflow_home):
    from types import SimpleNamespace

    from airflow_atlas.airflow.operators.sweep import SweepShardOperator
    from airflow_atlas.airflow.operators.sweep_timestamps import PlanTargetedSweepOperator
    from airflow_atlas.workload import WorkloadSpec, run_workload

    caplog.set_level(logging.DEBUG)
    store, url = shared_stores(shards=2, user="sweeper", password=SECRET)
    assert SECRET in url
    run_workload(store, WorkloadSpec(transactions=30, rows=20, tables={"sec_t": "THOROUGH"}, seed=2))
    host, port = cassandra_node
    monkeypatch.setenv("AIRFLOW_CONN_ATLAS_SEC", json.dumps({"conn_type": "cassandra", "host": host, "port": port,
                       "schema": store.kvs.keyspace, "login": "sweeper", "password": SECRET}))
    monkeypatch.setenv("AIRFLOW_VAR_ATLAS_SETTINGS", json.dumps({"store_conn_id": "atlas_sec",
                       "store_config": {"unreadable_window_seconds": 0}}))
    xcoms = [PlanTargetedSweepOperator(task_id="plan", skip_idle=False).execute({})]
    _, results = sweep_all(store)
    xcoms.append([to_json(r) for r in results])
    sweep = SweepShardOperator(task_id="sweep", shard=0, strategy="THOROUGH", execution_mode="in_task")
    xcoms.append(sweep.execute({"ti": SimpleNamespace(dag_id="d", run_id="r")}))  # lock, sweep, reconcile, release
    history = [store.history.recent(s, "THOROUGH") for s in (0, 1)]
    status = _cli("status", "--json", env={"ATLAS_STORE_URL": url}, cwd=tmp_path)
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)  # the status document itself
    out, err = capfd.readouterr()
    _assert_no_secret(json.dumps(xcoms, default=str) + json.dumps(history) + status.stdout + status.stderr
                      + caplog.text + out + err + store.describe())


# ----- identifiers validated, values bound ---------------------------------------------------------------------
HOSTILE_TABLES = [
    "x; DROP KEYSPACE y",
    'x"; DROP TABLE atlas_locks; --',
    "x' OR '1'='1",
    "system.local",
    "_locks",  # an internal table
    "atlas_locks",  # the physical name of an internal table
    "T" * 100,
    "tbl\x00",
    "",
]


class StatementRecorder:
    """Records every statement the store's driver session is asked to run (and still runs it)."""

    def __init__(self, session):
        self.statements: list[str] = []
        for name in ("execute", "execute_async", "prepare"):
            real = getattr(session, name)

            def wrapped(query, *args, _real=real, **kwargs):
                self.statements.append(str(getattr(query, "query_string", query)))
                return _real(query, *args, **kwargs)

            setattr(session, name, wrapped)


def test_hostile_table_names_are_refused_before_any_cql(shared_stores):
    from airflow_atlas.kvs.cassandra import physical_table_name
    from airflow_atlas.workload import WorkloadSpec, run_workload

    store, _ = shared_stores()
    store.create_table("sec_ok", "THOROUGH")
    recorder = StatementRecorder(store.kvs.session)

    def attempts_on(name):
        attempts = {
            "create_table": lambda: store.create_table(name, "THOROUGH"),
            "drop_table": lambda: store.drop_table(name),
            "truncate_table": lambda: store.truncate_table(name),
            "set_sweep_strategy": lambda: store.set_sweep_strategy(name, "CONSERVATIVE"),
            "kvs.put": lambda: store.kvs.put(name, {Cell(b"r", b"c"): b"v"}, 5),
            "kvs.get": lambda: store.kvs.get(name, {Cell(b"r", b"c"): 10}),
            "physical_table_name": lambda: physical_table_name(name),
        }
        if name in HOSTILE_TABLES[:3]:  # these begin transactions (slow): a few names are enough
            attempts["workload"] = lambda: run_workload(store, WorkloadSpec(transactions=1, tables={name: "THOROUGH"}))
            attempts["transaction put"] = lambda: store.transactions.run(lambda t: t.put(name, {Cell(b"r", b"c"): b"v"}))
        return attempts

    for name in HOSTILE_TABLES:
        for what, attempt in attempts_on(name).items():
            if name == "_locks" and what in ("kvs.put", "kvs.get", "physical_table_name"):
                continue  # internal tables are valid at the key-value level, just not for users
            if name == "atlas_locks" and what == "physical_table_name":
                continue  # the mapping itself; creating a user table of that name is refused (above)
            try:
                attempt()
            except (InvalidInputError, TableNotFoundError) as exc:
                assert isinstance(exc, InvalidInputError) or what in ("kvs.put", "kvs.get"), (name, what, exc)
            else:
                pytest.fail(f"{what}({name!r}) was accepted")
    leaked = [s for s in recorder.statements if any(n and n in s for n in HOSTILE_TABLES)]
    assert leaked == [], leaked
    assert store.kvs.table_exists("sec_ok") and store.user_tables() == {"sec_ok": store.user_tables()["sec_ok"]}


HOSTILE_BYTES = [
    b"'; DROP KEYSPACE system; --",
    b'"); DELETE FROM atlas_locks; --',
    b"\x00\x00\xff\xfe",
    "🙂 ünïcödé".encode(),
    b"%s %d {0} ?",
    bytes(range(256)) * 5 + b"\xff" * 220,  # 1,500 bytes: the longest cell name
]


def test_hostile_cell_names_and_values_are_bound_stored_swept_and_read_back_verbatim(shared_stores):
    store, _ = shared_stores(config=CONFIG)
    table = "sec_bytes"
    store.create_table(table, "CONSERVATIVE")
    cells = [Cell(b, c) for b in HOSTILE_BYTES for c in (HOSTILE_BYTES[0], HOSTILE_BYTES[2])]
    values = {c: b"v1:" + c.row[:100] for c in cells}
    store.transactions.run(lambda t: t.put(table, values))
    newest = {c: c.row[:200] + b"'; --" + c.col[:10] for c in cells}
    store.transactions.run(lambda t: t.put(table, newest))
    ts, results = sweep_all(store)
    assert sum(r.counts.cells_tombstoned for r in results) == len(cells)
    assert store.transactions.run(lambda t: t.get(table, cells)) == newest
    remaining = {}
    for c, _version_ts, value in store.kvs.scan(table):
        remaining.setdefault(c, []).append(value)
    assert remaining == {c: [b"", newest[c]] for c in cells}  # the sentinel and the newest version, exactly
    # Hostile lock names and holders are just bytes in a cell too.
    lease = store.locks.acquire("sweep/x'; DROP KEYSPACE y; --", 'holder"; --', 30)
    assert lease is not None and store.locks.describe(lease.name).holder == 'holder"; --'
    assert store.locks.release(lease)
    assert store.kvs.table_exists(table)


# ----- no shell ----------------------------------------------------------------------------------------------------
def _calls(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            yield node


def test_no_shell_anywhere_in_the_package():
    offenders = []
    for path in sorted((REPO_ROOT / "airflow_atlas").rglob("*.py")) + sorted((REPO_ROOT / "spark_jobs").rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for call in _calls(tree):
            func = ast.unparse(call.func)
            if func in ("os.system", "os.popen", "subprocess.getoutput", "subprocess.getstatusoutput"):
                offenders.append(f"{path.name}:{call.lineno} {func}")
            for kw in call.keywords:
                if kw.arg == "shell" and not (isinstance(kw.value, ast.Constant) and kw.value.value is False):
                    offenders.append(f"{path.name}:{call.lineno} {func}(shell=...)")
            if func.startswith("subprocess.") and call.args and isinstance(call.args[0], (ast.Constant, ast.JoinedStr)):
                offenders.append(f"{path.name}:{call.lineno} {func} with a command string")
    assert offenders == []


def test_nodetool_runner_passes_a_hostile_table_as_one_argument(tmp_path):
    import shutil

    from airflow_atlas.airflow.hooks import nodetool

    echo = [shutil.which("printf"), "%s\\0"]  # prints each argument it receives, NUL-terminated
    runner = nodetool.LocalNodetoolRunner(echo, timeout_seconds=60)
    hostile = ["x; touch PWNED", "$(touch PWNED)", "`touch PWNED`", "x && touch PWNED", "x\ntouch PWNED"]
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        for table in hostile:
            (out,) = runner.run(["compact", "--", "ks", table])
            assert out.stdout.split("\0")[:-1] == ["compact", "--", "ks", table]
            for operation in (nodetool.compact, nodetool.flush, nodetool.table_stats):  # refused before running
                with pytest.raises(InvalidInputError, match="invalid table name"):
                    operation(runner, "ks", table)
    finally:
        os.chdir(cwd)
    assert not list(Path(tmp_path).iterdir()), "a shell ran the injected command"
    with pytest.raises(ValueError, match="not a shell string"):
        nodetool.LocalNodetoolRunner("nodetool -h 10.0.0.1; rm -rf /")
    with pytest.raises(ValueError, match="unknown compaction method"):
        nodetool.compact(runner, "ks", "t", "compact; rm -rf /")


def test_the_nodetool_command_setting_must_be_an_argument_list():
    from airflow_atlas.airflow.settings import AtlasSettings

    with pytest.raises(InvalidInputError, match="nodetool_command must be a list"):
        AtlasSettings.from_mapping({"nodetool_command": "nodetool; rm -rf /"})
