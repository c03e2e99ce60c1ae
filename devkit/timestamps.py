"""Timestamp server instances as real processes, for the scripts, the tests and the benchmarks.

:class:`ServerProcess` is one ``atlas-sweep timestamps serve`` process (its own process group, its log in a
file); :func:`running_servers` starts N of them for one store on loopback ports and stops them on the way out.
``python -m devkit.timestamps start|stop|status`` (``scripts/timestamps.sh``) keeps instances running for the
local Cassandra node between commands, with pid files, as ``scripts/cassandra.sh`` keeps the node.
"""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
LOCAL_HOME_STORE = "cassandra://127.0.0.1:9042/atlas_timestamps_home?replication_factor=1"
"""The store the local instances are started for (they serve every adopted keyspace of the node on request)."""
LOCAL_PORTS = (9350, 9351)
START_TIMEOUT = 60.0


class ServerProcessError(RuntimeError):
    """An instance exited or did not listen in time (with its log's tail), or its store's ``init`` failed."""


@dataclass
class ServerProcess:
    address: str
    process: subprocess.Popen
    log: Path

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def signal(self, sig: int) -> None:
        try:
            os.killpg(self.process.pid, sig)
        except ProcessLookupError:
            pass

    def kill(self) -> None:
        """kill -9, as a crash."""
        self.signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self, timeout: float = 15.0) -> None:
        if self.process.poll() is None:
            self.signal(signal.SIGCONT)  # a paused instance cannot handle SIGTERM
            self.signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()


def atlas_command() -> list[str]:
    return [sys.executable, "-m", "airflow_atlas.cli"]


@dataclass(frozen=True)
class ServerTls:
    """An instance's TLS files (PEM): its certificate and key (it serves TLS) and, for mutual TLS, the CA its
    clients' certificates must be signed by (``--client-ca-file``)."""

    cert: Path
    key: Path
    client_ca: Path | None = None

    def arguments(self) -> list[str]:
        """``--cert-file CERT --key-file KEY [--client-ca-file CA]``."""
        return ["--cert-file", str(self.cert), "--key-file", str(self.key),
                *(["--client-ca-file", str(self.client_ca)] if self.client_ca is not None else [])]


def start_server(store_url: str, address: str, log: Path, *, lease_seconds: float = 2.0,
                 env: dict[str, str] | None = None, tls: ServerTls | None = None) -> ServerProcess:
    """One instance for ``store_url`` (initialised and adopted) listening on ``address``; returns once it
    listens. The URL goes through the environment (it may hold a password). ``tls``: serve TLS (with its
    ``client_ca``: mutual TLS)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    out = open(log, "ab")
    process = subprocess.Popen(
        [*atlas_command(), "timestamps", "serve", "--listen", address, "--lease-seconds", str(lease_seconds),
         *(tls.arguments() if tls else [])],
        stdout=out, stderr=subprocess.STDOUT, start_new_session=True, cwd=REPO_ROOT,
        env={**os.environ, **(env or {}), "ATLAS_STORE_URL": store_url},
    )
    out.close()
    server = ServerProcess(address, process, log)
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise ServerProcessError(f"timestamp server {address} exited with {process.returncode}:\n{server.log_tail()}")
        if b"serving the timestamps" in log.read_bytes():
            return server
        time.sleep(0.1)
    server.kill()
    raise ServerProcessError(f"timestamp server {address} did not listen within {START_TIMEOUT:g}s:\n{server.log_tail()}")


def prepare_store(store_url: str, servers: Sequence[str]) -> None:
    """``atlas-sweep init`` of ``store_url`` with ``servers`` as its timestamp servers (adopts it); ServerProcessError
    with what ``init`` said when it fails (its messages never hold the URL's password)."""
    done = subprocess.run(
        [*atlas_command(), "init", "--set", f"timestamp_servers={','.join(servers)}"],
        capture_output=True, text=True, cwd=REPO_ROOT, env={**os.environ, "ATLAS_STORE_URL": store_url},
    )
    if done.returncode != 0:
        raise ServerProcessError(f"atlas-sweep init of the timestamp servers' store exited {done.returncode}:\n"
                                 f"{done.stdout[-2000:]}\n{done.stderr[-3000:]}")


@contextmanager
def running_servers(store_url: str, addresses: Sequence[str], log_dir: Path, *, lease_seconds: float = 2.0,
                    tls: ServerTls | None = None) -> Iterator[list[ServerProcess]]:
    """``len(addresses)`` instances for ``store_url`` (initialised and adopted here), stopped on exit; ``tls``:
    serving TLS (mutual TLS with its ``client_ca``)."""
    prepare_store(store_url, addresses)
    servers: list[ServerProcess] = []
    try:
        for address in addresses:
            name = address.replace(":", "_")
            servers.append(start_server(store_url, address, log_dir / f"timestamps-{name}.log",
                                        lease_seconds=lease_seconds, tls=tls))
        yield servers
    finally:
        for server in servers:
            server.stop()


# ----- the command line: instances kept running for the local node ------------------------------------------
def _state_dir() -> Path:
    return Path(os.environ.get("ATLAS_TIMESTAMPS_DIR", f"{os.environ.get('TMPDIR', '/tmp')}/airflow-atlas-timestamps"))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _pids() -> dict[int, int]:
    found = {}
    for port in LOCAL_PORTS:
        path = _state_dir() / f"{port}.pid"
        if path.exists():
            pid = int(path.read_text().strip() or 0)
            if pid and _alive(pid):
                found[port] = pid
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/timestamps.sh", description=__doc__)
    parser.add_argument("action", choices=("start", "stop", "status"))
    parser.add_argument("--cert-file", metavar="FILE", default=None,
                        help="start: serve TLS with this certificate (PEM; with --key-file; clients then need "
                             "$ATLAS_TIMESTAMP_TLS_CA naming the CA that signed it)")
    parser.add_argument("--key-file", metavar="FILE", default=None, help="start: the certificate's key (PEM, 0600)")
    parser.add_argument("--client-ca-file", metavar="FILE", default=None,
                        help="start, with --cert-file/--key-file: require client certificates this CA signed (mutual "
                             "TLS; clients then need $ATLAS_TIMESTAMP_TLS_CERT and $ATLAS_TIMESTAMP_TLS_KEY)")
    args = parser.parse_args(argv)
    if (args.cert_file is None) != (args.key_file is None):
        parser.error("--cert-file and --key-file go together")
    if args.client_ca_file is not None and args.cert_file is None:
        parser.error("--client-ca-file needs --cert-file and --key-file")
    running = _pids()
    addresses = [f"127.0.0.1:{port}" for port in LOCAL_PORTS]
    if args.action == "status":
        for port in LOCAL_PORTS:
            print(f"[timestamps] 127.0.0.1:{port}: " + (f"running (pid {running[port]})" if port in running else "stopped"))
        return 0 if len(running) == len(LOCAL_PORTS) else 1
    if args.action == "stop":
        for port, pid in running.items():
            os.killpg(pid, signal.SIGTERM)
            print(f"[timestamps] stopping 127.0.0.1:{port} (pid {pid})")
        for pid in running.values():
            deadline = time.monotonic() + 15
            while _alive(pid) and time.monotonic() < deadline:
                time.sleep(0.1)
        return 0
    prepare_store(LOCAL_HOME_STORE, addresses)
    state = _state_dir()
    state.mkdir(parents=True, exist_ok=True)
    for port, address in zip(LOCAL_PORTS, addresses, strict=True):
        if port in running:
            print(f"[timestamps] {address} already running (pid {running[port]})")
            continue
        tls = (ServerTls(Path(args.cert_file), Path(args.key_file),
                         Path(args.client_ca_file) if args.client_ca_file else None) if args.cert_file else None)
        server = start_server(LOCAL_HOME_STORE, address, state / f"{port}.log", tls=tls)
        (state / f"{port}.pid").write_text(str(server.process.pid))
        print(f"[timestamps] {address} serving (pid {server.process.pid}, log {server.log})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
