"""Run ``nodetool`` against the Cassandra nodes of a store: locally, or over SSH on each node.

Commands are argument lists, never shell strings. The local runner executes the list directly
(``subprocess.run(list)``, no shell). The SSH runner has to hand the remote side one command line (that is
how SSH works); it quotes every argument with :func:`shlex.join`, so no argument can be interpreted by the
remote shell. The operations below also check keyspace and table names themselves (CQL names: letters,
digits, underscores) before any command is started, whatever the caller validated.

* :class:`LocalNodetoolRunner` - ``command`` is how nodetool is started on the Airflow worker, e.g.
  ``["nodetool", "-h", "10.0.0.1"]`` or, for the project's local node, ``["scripts/cassandra.sh", "nodetool"]``.
  Node-local operations (flush, compact, garbagecollect, tablestats) then apply to the node that nodetool
  talks to. With ``targets`` (``host:port`` of each node's JMX, setting ``nodetool_jmx_targets``) every
  operation runs once per node, one after the other, as ``[*command, "-h", host, "-p", port, *args]``
  (nodetool takes the last ``-h``/``-p``), e.g. the local cluster's ``127.0.0.1:7201..7203``.
* :class:`SSHNodetoolRunner` - one Airflow SSH connection per Cassandra node; ``command`` is how nodetool is
  started there (``["nodetool"]``). Each operation runs on every node, one after the other.

:func:`runner_from_settings` picks one from the ``atlas_settings`` Variable.
"""
from __future__ import annotations

import json
import logging
import re
import shlex
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from airflow_atlas.errors import InvalidInputError

if TYPE_CHECKING:
    from airflow_atlas.airflow.settings import AtlasSettings

log = logging.getLogger(__name__)

_CQL_NAME = re.compile(r"[A-Za-z0-9_]{1,222}", re.ASCII)
"""What Cassandra accepts as a keyspace or table name (``\\w+``, at most 222 characters for tables)."""

# nodetool prints this when a JMX MBean it is reading disappears: on a running node, a table of ANY keyspace
# dropped while ``tablestats`` walks every table's MBean (nodetool filters only afterwards). Transient.
_MBEAN_RACE = "Server is not initialized yet"
TABLESTATS_ATTEMPTS = 4
JMX_REFUSED = ("Authentication failed", "Credentials required", "Invalid username or password")
"""What nodetool prints when a node's JMX refuses it (no or wrong credentials)."""


class NodetoolError(RuntimeError):
    """nodetool exited non-zero (the message carries the node, the arguments and the end of stderr)."""


@dataclass(frozen=True)
class NodetoolOutput:
    node: str
    args: tuple[str, ...]
    stdout: str


def _tail(text: str, limit: int = 2000) -> str:
    text = text.strip()
    return text if len(text) <= limit else "..." + text[-limit:]


_TARGET = re.compile(r"(?P<host>[A-Za-z0-9][A-Za-z0-9.\-]*|\[[0-9A-Fa-f:.]+\]):(?P<port>[0-9]{1,5})", re.ASCII)


def parse_target(target: str) -> tuple[str, str]:
    """``"host:port"`` -> ``(host, port)``; InvalidInputError naming the value otherwise."""
    match = _TARGET.fullmatch(target) if isinstance(target, str) else None
    if match is None or not 0 < int(match["port"]) < 65536:
        raise InvalidInputError(f"nodetool JMX target must be host:port, got {target!r}")
    return match["host"].strip("[]"), match["port"]


class NodetoolRunner(Protocol):
    """What the operations run nodetool through: :class:`LocalNodetoolRunner`, :class:`SSHNodetoolRunner`."""

    def run(self, args: Sequence[str]) -> list[NodetoolOutput]: ...


class LocalNodetoolRunner:
    """Runs ``[*command, *args]`` on the Airflow worker (no shell); with ``targets``, once per node."""

    def __init__(self, command: Sequence[str] = ("nodetool",), timeout_seconds: float = 3600.0, targets: Sequence[str] = ()):
        if isinstance(command, str) or not command or not all(isinstance(c, str) and c for c in command):
            raise ValueError("nodetool command must be a non-empty list of arguments, not a shell string")
        if isinstance(targets, str):
            raise ValueError("nodetool targets must be a list of host:port strings")
        self.command = tuple(command)
        self.timeout_seconds = float(timeout_seconds)
        self.targets = tuple(targets)
        self._target_args = [parse_target(t) for t in self.targets]

    def describe(self) -> str:
        return "local:" + " ".join(self.command) + (f" on {','.join(self.targets)}" if self.targets else "")

    def run(self, args: Sequence[str]) -> list[NodetoolOutput]:
        if not self._target_args:
            return [self._run_one("local", [*self.command, *args], args)]
        return [
            self._run_one(target, [*self.command, "-h", host, "-p", port, *args], args)
            for target, (host, port) in zip(self.targets, self._target_args, strict=True)
        ]

    def _run_one(self, node: str, argv: list[str], args: Sequence[str]) -> NodetoolOutput:
        log.info("nodetool (local, %s): %s", node, argv)
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=self.timeout_seconds, check=False)
        except FileNotFoundError as exc:
            raise NodetoolError(f"nodetool command not found: {self.command[0]!r} ({exc})") from exc
        except subprocess.TimeoutExpired as exc:
            raise NodetoolError(f"nodetool {list(args)} timed out after {self.timeout_seconds:.0f}s on {node}") from exc
        if done.returncode != 0:
            where = "the local node" if node == "local" else node
            output = done.stderr or done.stdout
            refused = next((line.strip() for line in output.splitlines() if any(t in line for t in JMX_REFUSED)), None)
            if refused:  # the useful line is at the head, above the stack trace
                raise NodetoolError(
                    f"nodetool {list(args)} on {where}: JMX refused the credentials ({_tail(refused, 300)}); give "
                    "the JMX user and nodetool's password file in the nodetool_command setting (-u USER -pwf FILE)"
                )
            raise NodetoolError(f"nodetool {list(args)} exited {done.returncode} on {where}: {_tail(output)}")
        return NodetoolOutput(node, tuple(args), done.stdout)


class SSHNodetoolRunner:
    """Runs nodetool on each node through Airflow's SSH hook (one SSH connection id per node)."""

    def __init__(self, ssh_conn_ids: Sequence[str], command: Sequence[str] = ("nodetool",), timeout_seconds: float = 3600.0):
        if isinstance(ssh_conn_ids, str) or not ssh_conn_ids:
            raise ValueError("ssh_conn_ids must be a non-empty list of SSH connection ids")
        if isinstance(command, str) or not command or not all(isinstance(c, str) and c for c in command):
            raise ValueError("nodetool command must be a non-empty list of arguments, not a shell string")
        self.ssh_conn_ids = tuple(ssh_conn_ids)
        self.command = tuple(command)
        self.timeout_seconds = float(timeout_seconds)

    def describe(self) -> str:
        return "ssh:" + ",".join(self.ssh_conn_ids)

    def run(self, args: Sequence[str]) -> list[NodetoolOutput]:
        from airflow.providers.ssh.hooks.ssh import SSHHook

        line = shlex.join([*self.command, *args])
        outputs = []
        for conn_id in self.ssh_conn_ids:
            hook = SSHHook(ssh_conn_id=conn_id, cmd_timeout=self.timeout_seconds)
            with hook.get_conn() as client:
                status, out, err = hook.exec_ssh_client_command(
                    client, line, get_pty=False, environment=None, timeout=self.timeout_seconds
                )
            if status != 0:
                raise NodetoolError(
                    f"nodetool {list(args)} exited {status} on {conn_id}: "
                    f"{_tail(err.decode(errors='replace') or out.decode(errors='replace'))}"
                )
            outputs.append(NodetoolOutput(conn_id, tuple(args), out.decode(errors="replace")))
        return outputs


def runner_from_settings(settings: AtlasSettings) -> LocalNodetoolRunner | SSHNodetoolRunner:
    """SSH when ``nodetool_ssh_conn_ids`` is set, else the local command."""
    if settings.nodetool_ssh_conn_ids:
        return SSHNodetoolRunner(settings.nodetool_ssh_conn_ids, settings.nodetool_command, settings.nodetool_timeout_seconds)
    return LocalNodetoolRunner(settings.nodetool_command, settings.nodetool_timeout_seconds, settings.nodetool_jmx_targets)


# ----- operations ----------------------------------------------------------------------------------
def check_names(keyspace: str, table: str) -> None:
    """Raise InvalidInputError unless both are plain CQL names (checked before any command is started)."""
    for kind, name in (("keyspace", keyspace), ("table", table)):
        if not isinstance(name, str) or not _CQL_NAME.fullmatch(name):
            raise InvalidInputError(f"invalid {kind} name for nodetool: {name!r} (letters, digits and underscores only)")


def flush(runner: NodetoolRunner, keyspace: str, table: str) -> None:
    check_names(keyspace, table)
    runner.run(["flush", "--", keyspace, table])


def compact(runner: NodetoolRunner, keyspace: str, table: str, method: str = "compact") -> None:
    """``compact`` (major compaction of the table) or ``garbagecollect`` (drop deleted data per sstable)."""
    if method not in ("compact", "garbagecollect"):
        raise ValueError(f"unknown compaction method {method!r}")
    check_names(keyspace, table)
    runner.run([method, "--", keyspace, table])


STAT_KEYS = ("space_used_live", "space_used_total", "sstable_count")


def table_stats(runner: NodetoolRunner, keyspace: str, table: str) -> dict:
    """Live and total bytes and sstable count of one table, summed over the runner's nodes."""
    totals = dict.fromkeys(STAT_KEYS, 0)
    for stats in table_stats_per_node(runner, keyspace, table).values():
        for key in totals:
            totals[key] += stats[key]
    return totals


def table_stats_per_node(runner: NodetoolRunner, keyspace: str, table: str) -> dict[str, dict]:
    """``{node: {space_used_live, space_used_total, sstable_count}}`` of one table, per node of the runner.

    ``tablestats`` is read-only, so it is retried (a few times, briefly) when it hit the MBean race above.
    """
    check_names(keyspace, table)
    args = ["tablestats", "-F", "json", f"{keyspace}.{table}"]
    for attempt in range(1, TABLESTATS_ATTEMPTS + 1):
        try:
            outputs = runner.run(args)
            break
        except NodetoolError as exc:
            if _MBEAN_RACE not in str(exc) or attempt == TABLESTATS_ATTEMPTS:
                raise
            log.warning("nodetool tablestats of %s.%s hit a concurrent schema change (attempt %d), retrying", keyspace, table, attempt)
            time.sleep(0.5 * attempt)
    return {output.node: parse_tablestats(output.stdout, keyspace, table) for output in outputs}


def parse_tablestats(text: str, keyspace: str, table: str) -> dict:
    """The numbers we use from ``nodetool tablestats -F json ks.table`` (nodetool prints them as strings)."""
    start = text.find("{")
    if start < 0:
        raise NodetoolError(f"nodetool tablestats printed no JSON for {keyspace}.{table}: {_tail(text, 300)}")
    try:
        data = json.loads(text[start:])
        entry = data[keyspace]["tables"][table]
    except (ValueError, KeyError, TypeError) as exc:
        raise NodetoolError(f"unexpected nodetool tablestats output for {keyspace}.{table}: {exc}") from exc
    return {key: int(float(entry.get(key) or 0)) for key in STAT_KEYS}
