"""The commands on a local cluster (:class:`~devkit.cassandra.topology.Cluster`): start its nodes one after
another, then wait until every node sees all of them Up/Normal on one schema; stop or discard them all at
once; per-node start, stop, status, nodetool and logs. The secured cluster adds its material, its roles and
one repair of system_auth."""
from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from devkit.cassandra.node import Node, fetch, say
from devkit.cassandra.ring import cluster_settled
from devkit.cassandra.secured import make_jmx_files, make_tls, set_up_roles
from devkit.cassandra.spec import RunSettings, ScriptError, SpecError
from devkit.cassandra.topology import Cluster, SecureLayout

RING_POLL_SECONDS = 2


def _node_index(raw: str, cluster: Cluster) -> int:
    if not raw.isdigit() or not 1 <= int(raw) <= len(cluster.nodes):
        raise SpecError(f"node index must be in 1..{len(cluster.nodes)}, got '{raw}'")
    return int(raw)


def _all_at_once(nodes: Sequence[Node], action: Callable[[Node], None]) -> int:
    """``action`` on every node at once (a node's stop waits for its JVM's shutdown, seconds each); 1 when one
    failed (its error printed)."""
    def run(node: Node) -> int:
        try:
            action(node)
            return 0
        except ScriptError as exc:
            say(f"ERROR: {exc}", exc.label)
            return 1

    with ThreadPoolExecutor(max_workers=len(nodes)) as pool:
        return max(pool.map(run, nodes), default=0)


class ClusterCommands:
    """``cluster ...``, ``dc ...`` and ``secure cluster ...`` on one :class:`Cluster`."""

    def __init__(self, cluster: Cluster, settings: RunSettings, prog: str, secured: SecureLayout | None = None
                 ) -> None:
        """``secured``: the secured cluster's material (made at start, with its roles)."""
        self.cluster, self.settings, self.prog, self.secured = cluster, settings, prog, secured
        self.nodes = [Node(spec, settings) for spec in cluster.nodes]

    def ring_complete(self, node: Node) -> bool:
        """``node`` sees every node of the cluster Up/Normal and on one schema."""
        done = node.nodetool(["describecluster"], capture=True)
        return done.returncode == 0 and cluster_settled(done.stdout, len(self.nodes))

    def wait_for_ring(self, nodes: Sequence[Node]) -> None:
        waited = 0
        for node in nodes:
            while not self.ring_complete(node):
                if waited >= self.settings.timeout:
                    name = f"{'secured ' if self.secured else ''}node{self.nodes.index(node) + 1}"
                    raise ScriptError(f"{name} does not see {len(self.nodes)} nodes Up/Normal on one "
                                      f"schema within {self.settings.timeout}s")
                time.sleep(RING_POLL_SECONDS)
                waited += RING_POLL_SECONDS

    def usage(self) -> SpecError:
        secure = self.secured is not None
        commands = ("start [--fresh]|stop|status" if secure else "start [--fresh]|stop|discard|status") + (
            "|start-node I|stop-node I|status-node I|nodetool I ARGS...|log I|logfile I" + ("" if secure else "|config I"))
        return SpecError(f"usage: {self.prog} {self.cluster.command} {{{commands}}}")

    def run(self, arguments: Sequence[str]) -> int:
        sub, rest = (arguments[0], list(arguments[1:])) if arguments else ("", [])
        secure = self.secured is not None
        if sub == "start":
            self.start(rest)
            return 0
        if sub in ("stop", "discard") and not (secure and sub == "discard"):
            return _all_at_once(self.nodes[::-1], Node.stop if sub == "stop" else Node.discard)
        if sub == "status":
            return max(min(node.status(), 1) for node in self.nodes)
        per_node = ("start-node", "stop-node", "status-node", "nodetool", "log", "logfile") + (
            () if secure else ("config",))
        if sub not in per_node:
            raise self.usage()
        node = self.nodes[_node_index(rest[0] if rest else "", self.cluster) - 1]
        rest = rest[1:]
        if sub == "start-node":
            node.start(rest)
            if not secure:
                self.wait_for_ring(self.nodes)
            return 0
        if sub == "stop-node":
            node.stop()
            return 0
        if sub == "status-node":
            return node.status()
        if sub == "nodetool":
            node.exec_nodetool(rest)
        if sub == "log":
            node.log_tail()
            return 0
        if sub == "logfile":
            print(node.system_log)
            return 0
        sys.stdout.write(node.config_text())
        return 0

    def start(self, arguments: Sequence[str]) -> None:
        fetch(self.settings)
        if self.secured is not None:
            self.start_secured(self.secured, arguments)
            return
        for node in self.nodes:
            node.start(arguments)
        self.wait_for_ring(self.nodes)
        sizes = self.cluster.datacenters
        where = f" in datacenters dc1 ({sizes[0]} nodes) and dc2 ({sizes[1]})" if sizes else ""
        first, last = self.nodes[0].spec, self.nodes[-1].spec
        say(f"cluster {self.cluster.name}: {len(self.nodes)} nodes Up/Normal{where} on {first.host}..{last.host} "
            f"(CQL 9042, JMX {first.jmx_port}..{last.jmx_port})")

    def start_secured(self, layout: SecureLayout, arguments: Sequence[str]) -> None:
        for node in self.nodes:
            make_tls(layout, node.spec.host, say)
        make_jmx_files(layout)
        for node in self.nodes:
            node.start(arguments)
        self.wait_for_ring(self.nodes)
        set_up_roles(layout, self.cluster.hosts, self.settings.timeout)
        # system_auth now has one replica per node: bring every node's copy up to date, once per cluster
        marker = self.nodes[0].spec.directory / ".auth-repaired"
        if not marker.exists():
            done = self.nodes[0].nodetool(["repair", "-full", "system_auth"], capture=True)
            if done.returncode != 0:
                sys.stderr.write(done.stderr)
                raise ScriptError("repair of system_auth failed")
            marker.touch()
        hosts = ",".join(self.cluster.hosts)
        say(f"secured cluster up: CQL+TLS on {hosts}:9042 (CA {layout.ca_pem}), system_auth on every node; "
            f"credentials: {self.prog} secure env")
