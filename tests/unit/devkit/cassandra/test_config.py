"""devkit/cassandra/config.py: a node's cassandra.yaml is the shipped file with exactly its settings replaced
(cluster name, addresses, ports, seeds; the snitch with a datacenter; a token appended; for a secured node the
authenticator, the authorizer and client TLS), the rackdc file names its place, and the full JIT profile drops
the one C1-only option."""
from __future__ import annotations

from pathlib import Path

import pytest

from devkit.cassandra.config import (
    C1_ONLY_OPTION,
    CLIENT_OPTIONS,
    SERVER_OPTIONS,
    SHIPPED_CONFIG,
    jvm_options,
    render_config,
    render_rackdc,
)
from devkit.cassandra.spec import NodeSpec, ScriptError
from devkit.cassandra.topology import local_cluster, secure_cluster, secure_node, two_datacenters

SHIPPED = SHIPPED_CONFIG.read_text().splitlines()


def _changed(rendered: str) -> dict[str, tuple[str, str]]:
    """The lines a rendering replaced (shipped -> rendered), by position; and what it appended as ``+i``."""
    lines = rendered.splitlines()
    changed = {str(i): (a, b) for i, (a, b) in enumerate(zip(SHIPPED, lines, strict=False)) if a != b}
    changed.update({f"+{i}": ("", line) for i, line in enumerate(lines[len(SHIPPED):])})
    return changed


def test_the_shipped_file_holds_every_line_a_setting_replaces():
    for line in ("cluster_name: airflow-atlas-local", "listen_address: 127.0.0.1", "rpc_address: 127.0.0.1",
                 "native_transport_port: 9042", "storage_port: 7000", "endpoint_snitch: SimpleSnitch",
                 "authenticator: AllowAllAuthenticator", "authorizer: AllowAllAuthorizer"):
        assert line in SHIPPED
    assert any('seeds: "127.0.0.1:7000"' in line for line in SHIPPED)


def test_a_moved_node_changes_its_addresses_ports_seed_and_name_only():
    node = NodeSpec(directory=Path("/n"), host="127.0.0.9", cql_port=9342, storage_port=7300)
    changed = sorted(b for _, b in _changed(render_config(node)).values())
    assert changed == ['      - seeds: "127.0.0.9:7300"', "cluster_name: airflow-atlas-local-127.0.0.9-9342",
                       "listen_address: 127.0.0.9", "native_transport_port: 9342", "rpc_address: 127.0.0.9",
                       "storage_port: 7300"]


def test_a_cluster_node_appends_its_token_and_no_bootstrap():
    rendered = render_config(local_cluster({}).node(2))
    assert rendered.endswith(f"initial_token: {local_cluster({}).node(2).initial_token}\nauto_bootstrap: false\n")
    assert "endpoint_snitch: SimpleSnitch" in rendered.splitlines()


def test_a_datacenter_node_uses_the_gossiping_snitch_and_names_its_place():
    node = two_datacenters({}).node(3)
    assert "endpoint_snitch: GossipingPropertyFileSnitch" in render_config(node).splitlines()
    assert render_rackdc(node) == "dc=dc2\nrack=rack1\n"


@pytest.mark.parametrize("node", [secure_node({}), secure_cluster({}).node(2)])
def test_a_secured_node_authenticates_authorizes_and_requires_tls(node):
    rendered = render_config(node, "s3cret")
    lines = rendered.splitlines()
    assert "authenticator: PasswordAuthenticator" in lines and "authorizer: CassandraAuthorizer" in lines
    assert rendered.endswith(
        f"client_encryption_options:\n  enabled: true\n  optional: false\n  keystore: {node.security.keystore}\n"
        "  keystore_password: s3cret\n  store_type: PKCS12\n  require_client_auth: false\n")


def test_a_shipped_file_without_a_replaced_line_is_an_error(tmp_path):
    shipped = tmp_path / "cassandra.yaml"
    shipped.write_text(SHIPPED_CONFIG.read_text().replace("storage_port: 7000", "storage_port: 7001"))
    with pytest.raises(ScriptError, match="could not render the node's settings"):
        render_config(NodeSpec(directory=tmp_path, host="127.0.0.9"), shipped=shipped)


def test_the_full_profile_has_a_c1_only_flag_to_drop():
    """``full`` drops -XX:TieredStopAtLevel from the server options: it must be there to drop."""
    assert "-XX:TieredStopAtLevel=1" in SERVER_OPTIONS.read_text().splitlines()
    c1, full = jvm_options(SERVER_OPTIONS, "c1"), jvm_options(SERVER_OPTIONS, "full")
    assert "-XX:TieredStopAtLevel=1" in c1
    assert [o for o in c1 if not o.startswith(C1_ONLY_OPTION)] == full


def test_an_option_line_with_a_space_is_two_arguments():
    options = jvm_options(CLIENT_OPTIONS, "c1")
    assert options[options.index("--add-exports") + 1].startswith("java.")
