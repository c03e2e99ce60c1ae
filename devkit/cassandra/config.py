"""The files a node runs on, rendered from its :class:`~devkit.cassandra.spec.NodeSpec`: its cassandra.yaml (the
shipped scripts/cassandra/conf/cassandra.yaml with the node's cluster name, addresses, ports, seeds, snitch,
token, and for a secured node its authenticator, authorizer and client TLS), its cassandra-rackdc.properties
and the JVM options of a profile. Pure: reads the shipped files, writes nothing."""
from __future__ import annotations

from pathlib import Path

from devkit.cassandra.spec import DEFAULT_CLUSTER_NAME, NodeSpec, ScriptError

CONF_DIR = Path(__file__).resolve().parents[2] / "scripts" / "cassandra" / "conf"
SHIPPED_CONFIG = CONF_DIR / "cassandra.yaml"
SERVER_OPTIONS = CONF_DIR / "jvm17-server.options"
CLIENT_OPTIONS = CONF_DIR / "jvm17-clients.options"
C1_ONLY_OPTION = "-XX:TieredStopAtLevel="
"""The option of the c1 profile that the full profile drops (the JVM's normal tiered compilation)."""


def jvm_options(options_file: Path, jit: str) -> list[str]:
    """The options (lines starting with ``-``) of a jvm17-*.options file as arguments; the ``full`` profile
    without :data:`C1_ONLY_OPTION`."""
    lines = [line for line in options_file.read_text().splitlines() if line.startswith("-")]
    if jit == "full":
        lines = [line for line in lines if C1_ONLY_OPTION not in line]
    return " ".join(lines).split()


def _replace_line(lines: list[str], old: str, new: str) -> None:
    for i, line in enumerate(lines):
        if line == old:
            lines[i] = new


def render_config(spec: NodeSpec, keystore_password: str = "", shipped: Path = SHIPPED_CONFIG) -> str:
    """The cassandra.yaml of ``spec``; ``keystore_password`` is the secured node's (its file's content).
    Raises :class:`ScriptError` when the shipped file no longer holds a line a setting replaces."""
    lines = shipped.read_text().splitlines()
    _replace_line(lines, f"cluster_name: {DEFAULT_CLUSTER_NAME}", f"cluster_name: {spec.cluster_name}")
    _replace_line(lines, "listen_address: 127.0.0.1", f"listen_address: {spec.host}")
    _replace_line(lines, "rpc_address: 127.0.0.1", f"rpc_address: {spec.host}")
    _replace_line(lines, "native_transport_port: 9042", f"native_transport_port: {spec.cql_port}")
    _replace_line(lines, "storage_port: 7000", f"storage_port: {spec.storage_port}")
    lines = [line.replace('seeds: "127.0.0.1:7000"', f'seeds: "{spec.seeds}"', 1) for line in lines]
    wanted = (f"cluster_name: {spec.cluster_name}", f"listen_address: {spec.host}", f"rpc_address: {spec.host}",
              f"native_transport_port: {spec.cql_port}", f"storage_port: {spec.storage_port}")
    if not all(line in lines for line in wanted) or not any(f'seeds: "{spec.seeds}"' in line for line in lines):
        raise ScriptError(f"could not render the node's settings into {spec.rendered_config} (did {shipped} change?)",
                          spec.label)
    if spec.datacenter is not None:
        _replace_line(lines, "endpoint_snitch: SimpleSnitch", "endpoint_snitch: GossipingPropertyFileSnitch")
        if "endpoint_snitch: GossipingPropertyFileSnitch" not in lines:
            raise ScriptError(f"could not render the snitch into {spec.rendered_config}", spec.label)
    if spec.initial_token is not None:
        lines += [f"initial_token: {spec.initial_token}", "auto_bootstrap: false"]
    if spec.security is not None:
        _replace_line(lines, "authenticator: AllowAllAuthenticator", "authenticator: PasswordAuthenticator")
        _replace_line(lines, "authorizer: AllowAllAuthorizer", "authorizer: CassandraAuthorizer")
        if "authenticator: PasswordAuthenticator" not in lines or "authorizer: CassandraAuthorizer" not in lines:
            raise ScriptError(f"could not render the authenticator/authorizer into {spec.rendered_config}",
                              spec.label)
        lines += [
            "client_encryption_options:",
            "  enabled: true",
            "  optional: false",
            f"  keystore: {spec.security.keystore}",
            f"  keystore_password: {keystore_password}",
            "  store_type: PKCS12",
            "  require_client_auth: false",
        ]
    return "\n".join(lines) + "\n"


def render_rackdc(spec: NodeSpec) -> str:
    """The node's cassandra-rackdc.properties (GossipingPropertyFileSnitch reads it); only for a node with a
    datacenter."""
    return f"dc={spec.datacenter}\nrack={spec.rack}\n"
