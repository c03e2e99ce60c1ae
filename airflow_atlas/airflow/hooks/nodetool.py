"""Run ``nodetool`` against the Cassandra nodes of a store: locally, or over SSH on each node.

Commands are argument lists, never shell strings. The local runner executes the list directly
(``subprocess.run(list)``, no shell). The SSH runner has to hand the remote side one command line (that is
how SSH works); it quotes every argument with :func:`shlex.join`, so keyspace and table names, already
validated by the engine, can never be interpreted by the remote shell.

* :class:`LocalNodetoolRunner` - ``command`` is how nodetool is started on the Airflow worker, e.g.
  ``["nodetool", "-h", "10.0.0.1"]`` or, for the project's local node, ``["scripts/cassandra.sh", "nodetool"]``.
  Node-local operations (flush, compact, garbagecollect, tablestats) then apply to the node that nodetool
  talks to.
* :class:`SSHNodetoolRunner` - one Airflow SSH connection per Cassandra node; ``command`` is how nodetool is
  started there (``["nodetool"]``). Each operation runs on every node, one after the other.

:func:`runner_from_settings` picks one from the ``atlas_settings`` Variable.
"""
from __future__ import annotations

import json
import logging
import shlex
import subprocess
from dataclasses import dataclass
from typing import Sequence

log = logging.getLogger(__name__)


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


class LocalNodetoolRunner:
    """Runs ``[*command, *args]`` on the Airflow worker (no shell)."""

    def __init__(self, command: Sequence[str] = ("nodetool",), timeout_seconds: float = 3600.0):
        if isinstance(command, str) or not command or not all(isinstance(c, str) and c for c in command):
            raise ValueError("nodetool command must be a non-empty list of arguments, not a shell string")
        self.command = tuple(command)
        self.timeout_seconds = float(timeout_seconds)

    def describe(self) -> str:
        return "local:" + " ".join(self.command)

    def run(self, args: Sequence[str]) -> list[NodetoolOutput]:
        argv = [*self.command, *args]
        log.info("nodetool (local): %s", argv)
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=self.timeout_seconds, check=False)
        except FileNotFoundError as exc:
            raise NodetoolError(f"nodetool command not found: {self.command[0]!r} ({exc})") from exc
        except subprocess.TimeoutExpired as exc:
            raise NodetoolError(f"nodetool {list(args)} timed out after {self.timeout_seconds:.0f}s") from exc
        if done.returncode != 0:
            raise NodetoolError(
                f"nodetool {list(args)} exited {done.returncode} on the local node: {_tail(done.stderr or done.stdout)}"
            )
        return [NodetoolOutput("local", tuple(args), done.stdout)]


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
                    f"nodetool {list(args)} exited {status} on {conn_id}: {_tail(err.decode(errors='replace'))}"
                )
            outputs.append(NodetoolOutput(conn_id, tuple(args), out.decode(errors="replace")))
        return outputs


def runner_from_settings(settings) -> LocalNodetoolRunner | SSHNodetoolRunner:
    """SSH when ``nodetool_ssh_conn_ids`` is set, else the local command."""
    if settings.nodetool_ssh_conn_ids:
        return SSHNodetoolRunner(settings.nodetool_ssh_conn_ids, settings.nodetool_command, settings.nodetool_timeout_seconds)
    return LocalNodetoolRunner(settings.nodetool_command, settings.nodetool_timeout_seconds)


# ----- operations ----------------------------------------------------------------------------------
def flush(runner, keyspace: str, table: str) -> None:
    runner.run(["flush", "--", keyspace, table])


def compact(runner, keyspace: str, table: str, method: str = "compact") -> None:
    """``compact`` (major compaction of the table) or ``garbagecollect`` (drop deleted data per sstable)."""
    if method not in ("compact", "garbagecollect"):
        raise ValueError(f"unknown compaction method {method!r}")
    runner.run([method, "--", keyspace, table])


def table_stats(runner, keyspace: str, table: str) -> dict:
    """Live and total bytes and sstable count of one table, summed over the runner's nodes."""
    totals = {"space_used_live": 0, "space_used_total": 0, "sstable_count": 0}
    for output in runner.run(["tablestats", "-F", "json", f"{keyspace}.{table}"]):
        stats = parse_tablestats(output.stdout, keyspace, table)
        for key in totals:
            totals[key] += stats[key]
    return totals


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
    return {key: int(float(entry.get(key) or 0)) for key in ("space_used_live", "space_used_total", "sstable_count")}
