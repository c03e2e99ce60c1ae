"""The local clusters as lists of :class:`~devkit.cassandra.spec.NodeSpec`: the N-node cluster on 127.0.0.2..,
the two-datacenter cluster on 127.0.0.21.., and the secured node and 3-node cluster on 127.0.0.6 and
127.0.0.7-9. Pure: what each node's address, ports, directory, seeds, token and datacenter are; nothing is
started (the commands on them: :mod:`devkit.cassandra.cluster`)."""
from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from devkit.cassandra.spec import DEFAULT_RACK, NodeSpec, Security, SpecError

MIN_TOKEN = -(2**63)
DC_TOKEN_OFFSET = 100
"""A datacenter's tokens are its first datacenter's, offset by this much per datacenter (unique in the ring)."""


def balanced_token(index: int, nodes: int, datacenter: int = 1) -> int:
    """The balanced Murmur3 token of node ``index`` (1-based) of ``nodes`` in datacenter ``datacenter``
    (1-based)."""
    return MIN_TOKEN + (index - 1) * 2**64 // nodes + DC_TOKEN_OFFSET * (datacenter - 1)


@dataclass(frozen=True)
class Cluster:
    """Nodes 1..N of one local cluster. ``command``: its subcommand (``cluster``, ``dc``, ``secure cluster``),
    in messages; ``datacenters``: nodes per datacenter (dc1, dc2), empty for one datacenter and SimpleSnitch."""

    command: str
    name: str
    nodes: tuple[NodeSpec, ...]
    datacenters: tuple[int, ...] = ()

    def node(self, index: int) -> NodeSpec:
        return self.nodes[index - 1]

    @property
    def hosts(self) -> list[str]:
        return [node.host for node in self.nodes]


def _tmp(env: Mapping[str, str]) -> str:
    return env.get("TMPDIR") or "/tmp"


CLUSTER_NAME = "airflow-atlas-cluster"
CLUSTER_FIRST_HOST = 2
"""Node I of the cluster has address 127.0.0.(I+1)."""
CLUSTER_JMX_BASE = 7200
"""Node I of the cluster has JMX port 7200 + I."""
MAX_CLUSTER_NODES = 250


def local_cluster(env: Mapping[str, str]) -> Cluster:
    """``cluster``: ATLAS_CLUSTER_NODES (default 3) nodes on 127.0.0.2.., seed 127.0.0.2:7000."""
    raw = env.get("ATLAS_CLUSTER_NODES") or "3"
    if not re.fullmatch(r"[0-9]+", raw) or not 1 <= int(raw) <= MAX_CLUSTER_NODES:
        raise SpecError(f"ATLAS_CLUSTER_NODES must be a number in 1..{MAX_CLUSTER_NODES}, got '{raw}'")
    count = int(raw)
    directory = Path(env.get("ATLAS_CLUSTER_DIR") or f"{_tmp(env)}/airflow-atlas-cluster")
    heap = env.get("ATLAS_CLUSTER_HEAP") or "768M"
    nodes = tuple(
        NodeSpec(directory=directory / f"node{i}", host=f"127.0.0.{CLUSTER_FIRST_HOST + i - 1}",
                 jmx_port=CLUSTER_JMX_BASE + i, seeds=f"127.0.0.{CLUSTER_FIRST_HOST}:7000", cluster_name=CLUSTER_NAME,
                 initial_token=balanced_token(i, count), heap=heap, label=f"node{i}")
        for i in range(1, count + 1)
    )
    return Cluster("cluster", CLUSTER_NAME, nodes)


DC_CLUSTER_NAME = "airflow-atlas-dc"
DC_FIRST_HOST = 21
DC_JMX_BASE = 7220


def two_datacenters(env: Mapping[str, str]) -> Cluster:
    """``dc``: ATLAS_DC_LAYOUT (default 2+1) nodes in dc1 and dc2 on 127.0.0.21.., seeds the first node of each
    datacenter, GossipingPropertyFileSnitch, tokens balanced within each datacenter."""
    layout = env.get("ATLAS_DC_LAYOUT") or "2+1"
    if not re.fullmatch(r"[1-9]\+[1-9]", layout):
        raise SpecError(f"ATLAS_DC_LAYOUT must be two node counts such as 2+1 or 2+2, got '{layout}'")
    sizes = tuple(int(n) for n in layout.split("+"))
    directory = Path(env.get("ATLAS_DC_DIR") or f"{_tmp(env)}/airflow-atlas-dc")
    heap = env.get("ATLAS_DC_HEAP") or "512M"
    seeds = f"127.0.0.{DC_FIRST_HOST}:7000,127.0.0.{DC_FIRST_HOST + sizes[0]}:7000"
    nodes = []
    for i in range(1, sum(sizes) + 1):
        dc, j = (1, i) if i <= sizes[0] else (2, i - sizes[0])
        nodes.append(NodeSpec(
            directory=directory / f"node{i}", host=f"127.0.0.{DC_FIRST_HOST + i - 1}", jmx_port=DC_JMX_BASE + i,
            seeds=seeds, cluster_name=DC_CLUSTER_NAME, initial_token=balanced_token(j, sizes[dc - 1], dc),
            datacenter=f"dc{dc}", rack=DEFAULT_RACK, heap=heap, label=f"node{i} dc{dc}",
        ))
    return Cluster("dc", DC_CLUSTER_NAME, tuple(nodes), sizes)


SECURE_HOST = "127.0.0.6"
SECURE_JMX_PORT = 7206
SECURE_NAME = "airflow-atlas-secure"
SECURE_CLUSTER_NAME = "airflow-atlas-secure-cluster"
SECURE_CLUSTER_NODES = 3
SECURE_CLUSTER_FIRST_HOST = 7
"""The secured cluster's nodes: 127.0.0.7 .. 127.0.0.9, JMX 7207 .. 7209."""
SECURE_ADMIN = "atlas_admin"
JMX_USER = "atlas_jmx"


@dataclass(frozen=True)
class SecureLayout:
    """Where the secured nodes' material lives: ``directory/ca`` (the CA) and ``directory/secrets`` (every
    secret, mode 0600)."""

    directory: Path

    @property
    def ca_dir(self) -> Path:
        return self.directory / "ca"

    @property
    def ca_pem(self) -> Path:
        return self.ca_dir / "ca.pem"

    @property
    def ca_keystore(self) -> Path:
        return self.ca_dir / "ca.p12"

    @property
    def secrets(self) -> Path:
        return self.directory / "secrets"

    def keystore(self, host: str) -> Path:
        return self.secrets / f"node-{host}.p12"

    @property
    def admin_password(self) -> Path:
        return self.secrets / "admin.password"

    def security(self, host: str) -> Security:
        return Security(
            ca=self.ca_pem, keystore=self.keystore(host), keystore_password_file=self.secrets / "keystore.password",
            jmx_password_file=self.secrets / "jmx.password", jmx_access_file=self.secrets / "jmx.access",
            nodetool_password_file=self.secrets / "nodetool.password",
        )


def secure_layout(env: Mapping[str, str]) -> SecureLayout:
    return SecureLayout(Path(env.get("ATLAS_SECURE_DIR") or f"{_tmp(env)}/airflow-atlas-secure"))


def secure_node(env: Mapping[str, str]) -> NodeSpec:
    """``secure``: one node on 127.0.0.6 with TLS, passwords and JMX authentication."""
    layout = secure_layout(env)
    return NodeSpec(directory=layout.directory / "node", host=SECURE_HOST, jmx_port=SECURE_JMX_PORT,
                    cluster_name=SECURE_NAME, heap=env.get("ATLAS_SECURE_HEAP") or "768M", label="secure",
                    security=layout.security(SECURE_HOST))


def secure_cluster(env: Mapping[str, str]) -> Cluster:
    """``secure cluster``: the secured node's setup as 3 nodes on 127.0.0.7-9, seed the first."""
    layout = secure_layout(env)
    hosts = [f"127.0.0.{SECURE_CLUSTER_FIRST_HOST + i - 1}" for i in range(1, SECURE_CLUSTER_NODES + 1)]
    nodes = tuple(
        NodeSpec(directory=layout.directory / "cluster" / f"node{i}", host=host, jmx_port=SECURE_JMX_PORT + i,
                 seeds=f"{hosts[0]}:7000", cluster_name=SECURE_CLUSTER_NAME,
                 initial_token=balanced_token(i, SECURE_CLUSTER_NODES), heap=env.get("ATLAS_SECURE_HEAP") or "768M",
                 label=f"secure node{i}", security=layout.security(host))
        for i, host in enumerate(hosts, start=1)
    )
    return Cluster("secure cluster", SECURE_CLUSTER_NAME, nodes)
