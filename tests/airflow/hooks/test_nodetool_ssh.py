"""The SSH nodetool runner against a real SSH server: a PRIVATE sshd (its own config, host key and client
key in a temporary directory, on 127.0.0.1 and a free port; the system sshd is never touched), reached
through Airflow's SSH hook with a real ``AIRFLOW_CONN_*`` connection. The "remote" node is this machine:
nodetool is started there as ``scripts/cassandra.sh nodetool`` against the local Cassandra node.

Nothing is mocked. /usr/sbin/sshd comes from Debian's openssh-server (``sshd_binary``, tests/airflow/conftest.py:
scripts/ensure_sshd.sh installs it when missing); without it the tests fail, they never skip.
"""
from __future__ import annotations

import json
import os
import pwd
import re
import shutil
import socket
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from airflow_atlas.airflow.hooks import nodetool
from airflow_atlas.airflow.hooks.nodetool import LocalNodetoolRunner, NodetoolError, SSHNodetoolRunner
from airflow_atlas.errors import InvalidInputError
from tests.airflow.conftest import set_settings
from tests.conftest import CASSANDRA_SCRIPT

pytestmark = [pytest.mark.airflow, pytest.mark.cassandra]

SSH_CONN_ID = "atlas_test_ssh"
NODETOOL_TIMEOUT = 300.0

# The environment of scripts/cassandra.sh that a non-interactive SSH session does not inherit.
_FORWARDED_ENV = (
    "ATLAS_CACHE_DIR",
    "ATLAS_CASSANDRA_DIR",
    "ATLAS_CASSANDRA_PORT_OFFSET",
    "ATLAS_CASSANDRA_CQL_PORT",
    "ATLAS_CASSANDRA_STORAGE_PORT",
    "ATLAS_CASSANDRA_JMX_PORT",
    "TMPDIR",
)
_SSH_SESSION_PATH = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")


def remote_nodetool_command() -> list[str]:
    """``[<abs path>/scripts/cassandra.sh, "nodetool"]``, behind ``env VAR=...`` only when this process has
    cassandra.sh settings (or a java) that an SSH session would not see."""
    command = [str(CASSANDRA_SCRIPT.resolve()), "nodetool"]
    env = [f"{name}={os.environ[name]}" for name in _FORWARDED_ENV if os.environ.get(name)]
    java = shutil.which("java")
    if java and os.path.dirname(java) not in _SSH_SESSION_PATH:
        env.append(f"PATH={os.path.dirname(java)}:{':'.join(_SSH_SESSION_PATH)}")
    return ["env", *env, *command] if env else command


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _banner(port: int) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
        s.settimeout(2)
        return s.recv(64)


class PrivateSSHD:
    def __init__(self, directory: Path, port: int, user: str, client_key: Path, proc: subprocess.Popen, log: Path):
        self.directory, self.port, self.user, self.client_key, self.proc, self.log = directory, port, user, client_key, proc, log

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def accepted_logins(self) -> int:
        """Sessions sshd accepted so far (it logs one line per successful public key login)."""
        return self.log_text().count("Accepted publickey for ")


@pytest.fixture(scope="module")
def private_sshd(tmp_path_factory, sshd_binary):
    keygen = shutil.which("ssh-keygen")
    if keygen is None:
        pytest.fail("ssh-keygen is missing (package openssh-client); run scripts/ensure_sshd.sh as root")
    directory = tmp_path_factory.mktemp("sshd")
    host_key, client_key = directory / "ssh_host_ed25519_key", directory / "client_ed25519"
    for key, comment in ((host_key, "atlas-test-host"), (client_key, "atlas-test-client")):
        subprocess.run([keygen, "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(key)], check=True, capture_output=True)
    authorized_keys = directory / "authorized_keys"
    authorized_keys.write_text((directory / "client_ed25519.pub").read_text())
    authorized_keys.chmod(0o600)
    user = pwd.getpwuid(os.getuid()).pw_name
    port = _free_port()
    config = directory / "sshd_config"
    config.write_text(
        "\n".join(
            [
                f"Port {port}",
                "ListenAddress 127.0.0.1",
                f"HostKey {host_key}",
                f"AuthorizedKeysFile {authorized_keys}",
                f"PidFile {directory / 'sshd.pid'}",
                f"AllowUsers {user}",
                "PasswordAuthentication no",
                "KbdInteractiveAuthentication no",
                "PubkeyAuthentication yes",
                "PermitRootLogin prohibit-password",
                "StrictModes no",
                "UsePAM no",
                "PrintMotd no",
                "X11Forwarding no",
                "AllowTcpForwarding no",
                "AllowAgentForwarding no",
                "LogLevel INFO",
                "",
            ]
        )
    )
    try:
        Path("/run/sshd").mkdir(parents=True, exist_ok=True)  # privilege separation directory
    except PermissionError:
        pass  # not root: sshd runs without privilege separation and only lets this same user in
    checked = subprocess.run([sshd_binary, "-t", "-f", str(config)], capture_output=True, text=True)
    if checked.returncode != 0:
        pytest.fail(f"the private sshd config is rejected by `sshd -t`:\n{checked.stderr}\n{config.read_text()}")
    log = directory / "sshd.log"
    with open(log, "wb") as log_file:
        proc = subprocess.Popen(
            [sshd_binary, "-D", "-e", "-f", str(config)], stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT
        )
    server = PrivateSSHD(directory, port, user, client_key, proc, log)
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                pytest.fail(f"the private sshd exited with {proc.returncode}:\n{server.log_text()[-3000:]}")
            try:
                if _banner(port).startswith(b"SSH-2.0-"):
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"the private sshd does not answer on 127.0.0.1:{port} after 30s:\n{server.log_text()[-3000:]}")
            time.sleep(0.1)
        conn = {
            "conn_type": "ssh",
            "host": "127.0.0.1",
            "port": port,
            "login": user,
            "extra": {"key_file": str(client_key), "no_host_key_check": True},
        }
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv(f"AIRFLOW_CONN_{SSH_CONN_ID.upper()}", json.dumps(conn))
            yield server
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@pytest.fixture
def ssh_runner(private_sshd, airflow_home):
    return SSHNodetoolRunner([SSH_CONN_ID], remote_nodetool_command(), timeout_seconds=NODETOOL_TIMEOUT)


def _fail_with_log(server: PrivateSSHD, exc: Exception):
    pytest.fail(f"{type(exc).__name__}: {exc}\n--- private sshd log ---\n{server.log_text()[-3000:]}")


def test_status_over_ssh_through_the_settings(private_sshd, airflow_home, monkeypatch):
    """runner_from_settings picks SSH for nodetool_ssh_conn_ids; `status` runs on the remote side."""
    from airflow_atlas.airflow.settings import AtlasSettings

    set_settings(
        monkeypatch,
        nodetool_command=remote_nodetool_command(),
        nodetool_ssh_conn_ids=[SSH_CONN_ID],
        nodetool_timeout_seconds=NODETOOL_TIMEOUT,
    )
    runner = nodetool.runner_from_settings(AtlasSettings.load())
    assert isinstance(runner, SSHNodetoolRunner) and runner.describe() == f"ssh:{SSH_CONN_ID}"
    logins = private_sshd.accepted_logins()
    try:
        outputs = runner.run(["status"])
    except Exception as exc:  # noqa: BLE001 - show sshd's side of a failed login
        _fail_with_log(private_sshd, exc)
    assert [(o.node, o.args) for o in outputs] == [(SSH_CONN_ID, ("status",))]
    assert re.search(r"^UN\s+127\.0\.0\.1\s", outputs[0].stdout, re.MULTILINE), outputs[0].stdout
    assert private_sshd.accepted_logins() == logins + 1  # it really went through our sshd
    assert f"Accepted publickey for {private_sshd.user} from 127.0.0.1" in private_sshd.log_text()


def test_tablestats_over_ssh_match_the_local_runner(ssh_runner, private_sshd, cassandra_session, cassandra_keyspace):
    from cassandra.concurrent import execute_concurrent_with_args

    table = f"ssh_stats_{uuid.uuid4().hex[:8]}"
    cassandra_session.execute(f"CREATE TABLE {cassandra_keyspace}.{table} (k int PRIMARY KEY, v blob)")
    insert = cassandra_session.prepare(f"INSERT INTO {cassandra_keyspace}.{table} (k, v) VALUES (?, ?)")
    execute_concurrent_with_args(cassandra_session, insert, [(k, os.urandom(1000)) for k in range(200)], raise_on_first_error=True)
    try:
        nodetool.flush(ssh_runner, cassandra_keyspace, table)
        stats = nodetool.table_stats(ssh_runner, cassandra_keyspace, table)
    except Exception as exc:  # noqa: BLE001
        _fail_with_log(private_sshd, exc)
    print("tablestats over SSH:", stats)
    assert stats["sstable_count"] >= 1
    assert stats["space_used_live"] > 200 * 1000 * 0.5  # random bytes barely compress
    assert stats["space_used_total"] >= stats["space_used_live"]
    local = nodetool.table_stats(LocalNodetoolRunner([str(CASSANDRA_SCRIPT), "nodetool"], NODETOOL_TIMEOUT), cassandra_keyspace, table)
    assert local == stats  # same node, nothing written since the flush


HOSTILE_TABLES = [
    "t; touch {marker}",
    "$(touch {marker})",
    "`touch {marker}`",
    "t && touch {marker}",
    "t | touch {marker}",
    "t\ntouch {marker}",
    "-h",
    "../t",
    "t t",
    "",
    "t" * 223,
]


def test_hostile_names_are_rejected_before_anything_is_sent(private_sshd, airflow_home, tmp_path, cassandra_keyspace):
    """The remote command records its arguments: nothing reaches it (not even an SSH login) for a hostile
    name, and a good name arrives as separate arguments."""
    marker, record = tmp_path / "pwned", tmp_path / "argv"
    recorder = SSHNodetoolRunner([SSH_CONN_ID], ["sh", "-c", f'printf "[%s]\\n" "$@" >> {record}', "nodetool"])
    logins = private_sshd.accepted_logins()
    for template in HOSTILE_TABLES:
        table = template.format(marker=marker)
        for operation in (nodetool.flush, nodetool.compact, nodetool.table_stats):
            with pytest.raises(InvalidInputError, match="invalid table name"):
                operation(recorder, cassandra_keyspace, table)
    for keyspace in (f"{cassandra_keyspace}; touch {marker}", "ks.t", "-p"):
        with pytest.raises(InvalidInputError, match="invalid keyspace name"):
            nodetool.flush(recorder, keyspace, "t")
    assert not record.exists() and not marker.exists()
    assert private_sshd.accepted_logins() == logins  # rejected before any SSH connection

    nodetool.compact(recorder, cassandra_keyspace, "good_table", "garbagecollect")
    assert record.read_text() == f"[garbagecollect]\n[--]\n[{cassandra_keyspace}]\n[good_table]\n"
    assert private_sshd.accepted_logins() == logins + 1


def test_arguments_reach_the_remote_as_separate_quoted_words(private_sshd, airflow_home, tmp_path):
    """Whatever the arguments hold, the remote shell gets them back verbatim, one word each, and runs none of it."""
    marker = tmp_path / "pwned"
    args = [
        f"t; touch {marker}",
        f"$(touch {marker})",
        f"`touch {marker}`",
        f"a && touch {marker} || touch {marker}",
        f"> {marker}",
        "two words",
        "it's \"quoted\"",
        "$HOME ${PATH} * ?",
        "line1\nline2",
        "-h",
        "",
    ]
    runner = SSHNodetoolRunner([SSH_CONN_ID], ["printf", "[%s]\\n"], timeout_seconds=60)
    try:
        (output,) = runner.run(args)
    except Exception as exc:  # noqa: BLE001
        _fail_with_log(private_sshd, exc)
    assert output.stdout == "".join(f"[{a}]\n" for a in args)
    assert not marker.exists()


def test_remote_failures_name_the_connection(private_sshd, airflow_home):
    runner = SSHNodetoolRunner([SSH_CONN_ID], ["sh", "-c", "echo 'nodetool: bad use' ; exit 3", "nodetool"], timeout_seconds=60)
    with pytest.raises(NodetoolError, match=rf"exited 3 on {SSH_CONN_ID}: nodetool: bad use"):
        runner.run(["flush"])


def _disable_autocompaction(session, keyspace: str, table: str) -> None:
    """Keep the table's strategy but run only the compaction the operator triggers. On a busy shared node,
    commit-log pressure flushes the table's memtable many times (COMMITLOG_DIRTY), and a background
    compaction of those sstables would reclaim the space before the operator measures it."""
    row = session.execute(
        "SELECT compaction FROM system_schema.tables WHERE keyspace_name = %s AND table_name = %s", (keyspace, table)
    ).one()
    options = {**dict(row["compaction"] if isinstance(row, dict) else row[0]), "enabled": "false"}
    literal = ", ".join(f"'{k}': '{v}'" for k, v in options.items())
    session.execute(f"ALTER TABLE {keyspace}.{table} WITH compaction = {{{literal}}}")


def test_compaction_dag_over_ssh_drops_live_space(private_sshd, ssh_runner, cassandra_store, cassandra_session, monkeypatch):
    """The real atlas_compaction DAG (dag.test()) with nodetool_ssh_conn_ids: flush, tablestats, compact,
    tablestats all go through the private sshd, and the table's live space drops. Like
    tests/airflow/dags/test_atlas_compaction.py, but the sweep that writes the tombstones runs through the
    engine directly (the sweep DAG is that test's business): the store counts its tombstones."""
    from tests.airflow.conftest import FAST, SHARDS, load_dag, task_states, xcom
    from tests.airflow.dags.test_atlas_compaction import TABLE, _overwrite

    store, conn = cassandra_store
    store.create_table(TABLE, "THOROUGH", gc_grace_seconds=0)
    keyspace = conn["schema"]
    _disable_autocompaction(cassandra_session, keyspace, TABLE)
    _overwrite(store)  # 6 versions of 150 cells of 2000 random bytes (~1.8 MB); the sweep deletes 5 of them
    # The versions must be on disk before the sweep: deleted in the memtable, they would never be written.
    nodetool.flush(ssh_runner, keyspace, TABLE)
    tombstones = sum(store.sweeper.sweep_shard(shard, "THOROUGH").counts.cells_tombstoned for shard in range(SHARDS))
    assert tombstones >= 150
    set_settings(
        monkeypatch,
        **FAST,
        compaction_threshold_tombstones=100,
        nodetool_command=remote_nodetool_command(),
        nodetool_ssh_conn_ids=[SSH_CONN_ID],
        nodetool_timeout_seconds=NODETOOL_TIMEOUT,
    )
    logins = private_sshd.accepted_logins()

    run = load_dag("atlas_compaction").test()
    if str(run.state) != "success":
        pytest.fail(f"atlas_compaction: {task_states(run)}\n--- private sshd log ---\n{private_sshd.log_text()[-3000:]}")
    report = xcom(run, "compact")
    compacted = report["compacted"][TABLE]
    print("compaction report over SSH:", compacted)
    assert compacted["runner"] == f"ssh:{SSH_CONN_ID}"
    assert private_sshd.accepted_logins() >= logins + 4  # flush, tablestats, compact, tablestats (+ tablestats retries)
    before = compacted["space_before_bytes"]
    assert before > 6 * 150 * 2000 * 0.5  # every version is on disk, plus the tombstones
    assert compacted["space_after_bytes"] < before / 2
    assert report["pending"][TABLE] == 0
    local = LocalNodetoolRunner([str(CASSANDRA_SCRIPT), "nodetool"], timeout_seconds=NODETOOL_TIMEOUT)
    live_after = nodetool.table_stats(local, keyspace, TABLE)["space_used_live"]  # independent, local check
    assert live_after < before / 2, (compacted, live_after)
