"""What one local Cassandra node is - its directory, address, ports, seeds, cluster, token, datacenter and rack,
heap, and the secured node's TLS/JMX material - and the rules its values obey. Pure: reads nothing, starts
nothing. :func:`node_from_environment` is the single node of ``scripts/cassandra.sh`` (the ``ATLAS_CASSANDRA_*``
variables); the clusters build their nodes in :mod:`devkit.cassandra.topology`."""
from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

DEFAULT_HOST = "127.0.0.1"
DEFAULT_CQL_PORT = 9042
DEFAULT_STORAGE_PORT = 7000
DEFAULT_JMX_PORT = 7199
DEFAULT_CLUSTER_NAME = "airflow-atlas-local"
DEFAULT_RACK = "rack1"
DEFAULT_HEAP = "1G"
JMX_HOST = "127.0.0.1"
"""-Dcassandra.jmx.local.port binds JMX to the loopback address only; nodetool targets it there."""

_LOOPBACK = re.compile(r"127\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}")
_SEEDS = re.compile(r"[0-9.:,]+")
_TOKEN = re.compile(r"-?[0-9]+")
_PLACE_NAME = re.compile(r"[A-Za-z0-9_-]+")
_CLUSTER_NAME = re.compile(r"[A-Za-z0-9._-]+")
_NUMBER = re.compile(r"[0-9]+")


class ScriptError(RuntimeError):
    """What ``scripts/cassandra.sh`` reports as ``[cassandra LABEL] ERROR: ...`` and exits with ``exit_code``."""

    exit_code = 1

    def __init__(self, message: str, label: str = "") -> None:
        super().__init__(message)
        self.label = label


class SpecError(ScriptError, ValueError):
    """A setting breaks its rule: a usage error (exit 64), raised before anything is written or run."""

    exit_code = 64


def check_host(value: str, what: str = "the node's address") -> str:
    if not _LOOPBACK.fullmatch(value):
        raise SpecError(f"{what} must be a loopback address 127.x.y.z, got '{value}'")
    return value


def check_port(value: int, what: str) -> int:
    if not 0 < value < 65536:
        raise SpecError(f"{what} must be a number in 1..65535, got '{value}'")
    return value


def check_place(value: str, what: str) -> str:
    """A datacenter or rack name (it goes into cassandra-rackdc.properties)."""
    if not _PLACE_NAME.fullmatch(value):
        raise SpecError(f"{what} may hold letters, digits, '_' and '-' only, got '{value}'")
    return value


def check_cluster_name(value: str, what: str = "the cluster name") -> str:
    if not _CLUSTER_NAME.fullmatch(value):
        raise SpecError(f"{what} may hold letters, digits, '.', '_' and '-' only, got '{value}'")
    return value


def check_seeds(value: str, what: str = "the seeds") -> str:
    if not _SEEDS.fullmatch(value):
        raise SpecError(f"{what} must be a comma-separated list of address:port, got '{value}'")
    return value


@dataclass(frozen=True)
class Security:
    """The secured node's material (:mod:`devkit.cassandra.secured` makes the files): client-to-node TLS with
    ``keystore`` (its password in ``keystore_password_file``), clients verify against ``ca``; JMX with password
    and access files; nodetool's password file. With it the node also runs PasswordAuthenticator and
    CassandraAuthorizer."""

    ca: Path
    keystore: Path
    keystore_password_file: Path
    jmx_password_file: Path
    jmx_access_file: Path
    nodetool_password_file: Path


@dataclass(frozen=True)
class NodeSpec:
    """One node. ``label`` names it in the messages (``[cassandra node2 dc1] ...``; empty for the single node).
    ``initial_token`` set: the node of a new, empty cluster joins the ring at once with that token
    (``auto_bootstrap: false``). ``datacenter`` set: GossipingPropertyFileSnitch with a rackdc file in the node
    directory; unset: SimpleSnitch, one datacenter ``datacenter1``."""

    directory: Path
    host: str = DEFAULT_HOST
    cql_port: int = DEFAULT_CQL_PORT
    storage_port: int = DEFAULT_STORAGE_PORT
    jmx_port: int = DEFAULT_JMX_PORT
    seeds: str = ""
    """``address:port,...``; empty: the node itself (``host:storage_port``)."""
    cluster_name: str = ""
    """Empty: :meth:`default_cluster_name`."""
    initial_token: int | None = None
    datacenter: str | None = None
    rack: str = DEFAULT_RACK
    heap: str = DEFAULT_HEAP
    label: str = ""
    security: Security | None = None

    def __post_init__(self) -> None:
        check_host(self.host)
        for what, port in (("the CQL port", self.cql_port), ("the storage port", self.storage_port),
                           ("the JMX port", self.jmx_port)):
            check_port(port, what)
        if not self.seeds:
            object.__setattr__(self, "seeds", f"{self.host}:{self.storage_port}")
        check_seeds(self.seeds)
        if not self.cluster_name:
            object.__setattr__(self, "cluster_name", self.default_cluster_name())
        check_cluster_name(self.cluster_name)
        if self.datacenter is not None:
            check_place(self.datacenter, "the datacenter")
        check_place(self.rack, "the rack")

    @property
    def is_default_address(self) -> bool:
        """The project's node: 127.0.0.1 with the default ports, its own seed."""
        return (self.host, self.cql_port, self.storage_port, self.jmx_port, self.seeds) == (
            DEFAULT_HOST, DEFAULT_CQL_PORT, DEFAULT_STORAGE_PORT, DEFAULT_JMX_PORT,
            f"{DEFAULT_HOST}:{DEFAULT_STORAGE_PORT}")

    def default_cluster_name(self) -> str:
        """``airflow-atlas-local``; with a moved port or another address a name of its own, so such a node never
        joins another local node unless both name and seeds say so."""
        if self.is_default_address:
            return DEFAULT_CLUSTER_NAME
        if self.host == DEFAULT_HOST:
            return f"{DEFAULT_CLUSTER_NAME}-{self.cql_port}"
        return f"{DEFAULT_CLUSTER_NAME}-{self.host}-{self.cql_port}"

    @property
    def runs_on_shipped_config(self) -> bool:
        """The node runs on scripts/cassandra/conf/cassandra.yaml unchanged (else on a copy rendered into its
        directory)."""
        return (self.is_default_address and self.cluster_name == DEFAULT_CLUSTER_NAME
                and self.initial_token is None and self.datacenter is None and self.security is None)

    @property
    def pid_file(self) -> Path:
        return self.directory / "cassandra.pid"

    @property
    def log_dir(self) -> Path:
        return self.directory / "logs"

    @property
    def data_dir(self) -> Path:
        return self.directory / "data"

    @property
    def rendered_config(self) -> Path:
        return self.directory / "cassandra.yaml"

    @property
    def rackdc_file(self) -> Path:
        return self.directory / "cassandra-rackdc.properties"


JIT_PROFILES = ("c1", "full")
"""c1: the JVM stops at the C1 compiler (quick start-up: tests and CI); full: the JVM's normal tiered C1+C2
compilation, as a production node runs (bench/run.py starts the node so)."""


@dataclass(frozen=True)
class RunSettings:
    """How the script runs any node: the jar cache, the JIT profile, how long a start waits for CQL, and whether
    ``start`` accepts a CQL server it did not start."""

    cache_dir: Path
    jit: str = "c1"
    timeout: int = 240
    adopt: bool = False


def settings_from_environment(env: Mapping[str, str]) -> RunSettings:
    jit = env.get("ATLAS_CASSANDRA_JIT") or "c1"
    if jit not in JIT_PROFILES:
        raise ScriptError(f"ATLAS_CASSANDRA_JIT must be c1 or full, got '{jit}'")
    adopt = env.get("ATLAS_CASSANDRA_ADOPT") or "0"
    if adopt not in ("0", "1"):
        raise SpecError(f"ATLAS_CASSANDRA_ADOPT must be 0 or 1, got '{adopt}'")
    timeout = env.get("ATLAS_CASSANDRA_TIMEOUT") or "240"
    if not _NUMBER.fullmatch(timeout):
        raise SpecError(f"ATLAS_CASSANDRA_TIMEOUT must be a number of seconds, got '{timeout}'")
    home = env.get("HOME") or str(Path.home())
    return RunSettings(cache_dir=Path(env.get("ATLAS_CACHE_DIR") or f"{home}/.cache/airflow-atlas"), jit=jit,
                       timeout=int(timeout), adopt=adopt == "1")


def _number(env: Mapping[str, str], name: str, default: int, message: str) -> int:
    raw = env.get(name) or str(default)
    if not _NUMBER.fullmatch(raw):
        raise SpecError(message.format(raw=raw))
    return int(raw)


def node_from_environment(env: Mapping[str, str]) -> NodeSpec:
    """The single node the ``ATLAS_CASSANDRA_*`` variables describe (every one optional; see the module doc of
    :mod:`devkit.cassandra`), each checked with the variable's name in the message."""
    tmp = env.get("TMPDIR") or "/tmp"
    directory = Path(env.get("ATLAS_CASSANDRA_DIR") or f"{tmp}/airflow-atlas-cassandra")
    offset = _number(env, "ATLAS_CASSANDRA_PORT_OFFSET", 0, "ATLAS_CASSANDRA_PORT_OFFSET must be a number")
    host = check_host(env.get("ATLAS_CASSANDRA_HOST") or DEFAULT_HOST, "ATLAS_CASSANDRA_HOST")
    ports = []
    for name, default in (("ATLAS_CASSANDRA_CQL_PORT", DEFAULT_CQL_PORT), ("ATLAS_CASSANDRA_STORAGE_PORT",
                          DEFAULT_STORAGE_PORT), ("ATLAS_CASSANDRA_JMX_PORT", DEFAULT_JMX_PORT)):
        port = _number(env, name, default + offset, "ports must be numbers in 1..65535, got '{raw}'")
        if not 0 < port < 65536:
            raise SpecError(f"ports must be numbers in 1..65535, got '{port}'")
        ports.append(port)
    cql_port, storage_port, jmx_port = ports
    seeds = check_seeds(env.get("ATLAS_CASSANDRA_SEEDS") or f"{host}:{storage_port}", "ATLAS_CASSANDRA_SEEDS")
    token = env.get("ATLAS_CASSANDRA_INITIAL_TOKEN") or ""
    if token and not _TOKEN.fullmatch(token):
        raise SpecError(f"ATLAS_CASSANDRA_INITIAL_TOKEN must be an integer token, got '{token}'")
    datacenter = env.get("ATLAS_CASSANDRA_DC") or None
    if datacenter is not None:
        check_place(datacenter, "ATLAS_CASSANDRA_DC")
    rack = check_place(env.get("ATLAS_CASSANDRA_RACK") or DEFAULT_RACK, "ATLAS_CASSANDRA_RACK")
    name = env.get("ATLAS_CASSANDRA_CLUSTER_NAME") or ""
    if name and not _CLUSTER_NAME.fullmatch(name):
        raise SpecError("ATLAS_CASSANDRA_CLUSTER_NAME may hold letters, digits, '.', '_' and '-' only")
    return NodeSpec(
        directory=directory, host=host, cql_port=cql_port, storage_port=storage_port, jmx_port=jmx_port,
        seeds=seeds, cluster_name=name, initial_token=int(token) if token else None, datacenter=datacenter,
        rack=rack, heap=env.get("ATLAS_CASSANDRA_HEAP") or DEFAULT_HEAP,
    )
