"""devkit/cassandra/topology.py: the local clusters' nodes - addresses, JMX ports, directories, seeds, cluster
names, datacenters and balanced tokens - and where the secured nodes' material lives."""
from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import pytest

from devkit.cassandra.spec import SpecError
from devkit.cassandra.topology import (
    balanced_token,
    local_cluster,
    secure_cluster,
    secure_layout,
    secure_node,
    two_datacenters,
)

ENV = {"TMPDIR": "/t"}


def test_the_cluster_is_three_nodes_on_127_0_0_2_to_4_with_balanced_tokens():
    cluster = local_cluster(ENV)
    assert cluster.hosts == ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
    assert [n.jmx_port for n in cluster.nodes] == [7201, 7202, 7203]
    assert [n.directory for n in cluster.nodes] == [Path(f"/t/airflow-atlas-cluster/node{i}") for i in (1, 2, 3)]
    assert {(n.seeds, n.cluster_name, n.heap, n.cql_port, n.storage_port, n.datacenter) for n in cluster.nodes} == {
        ("127.0.0.2:7000", "airflow-atlas-cluster", "768M", 9042, 7000, None)}
    assert [n.label for n in cluster.nodes] == ["node1", "node2", "node3"]
    tokens = [n.initial_token for n in cluster.nodes]
    assert tokens[0] == -(2**63)
    gaps = {b - a for a, b in pairwise(tokens)} | {2**64 - (tokens[-1] - tokens[0])}
    assert max(gaps) - min(gaps) <= 1


def test_the_cluster_size_and_place_come_from_the_environment():
    cluster = local_cluster({"ATLAS_CLUSTER_NODES": "5", "ATLAS_CLUSTER_DIR": "/c", "ATLAS_CLUSTER_HEAP": "1G"})
    assert cluster.node(5).host == "127.0.0.6" and cluster.node(5).directory == Path("/c/node5")
    assert cluster.node(1).heap == "1G"
    for bad in ("0", "251", "x"):
        with pytest.raises(SpecError, match=f"ATLAS_CLUSTER_NODES must be a number in 1..250, got '{bad}'"):
            local_cluster({"ATLAS_CLUSTER_NODES": bad})


def test_two_datacenters_2_plus_1():
    cluster = two_datacenters(ENV)
    assert cluster.hosts == ["127.0.0.21", "127.0.0.22", "127.0.0.23"]
    assert [n.datacenter for n in cluster.nodes] == ["dc1", "dc1", "dc2"]
    assert [n.jmx_port for n in cluster.nodes] == [7221, 7222, 7223]
    assert {n.seeds for n in cluster.nodes} == {"127.0.0.21:7000,127.0.0.23:7000"}  # one seed per datacenter
    assert [n.initial_token for n in cluster.nodes] == [-(2**63), 0, -(2**63) + 100]
    assert [n.label for n in cluster.nodes] == ["node1 dc1", "node2 dc1", "node3 dc2"]
    assert cluster.datacenters == (2, 1) and cluster.node(1).directory == Path("/t/airflow-atlas-dc/node1")
    assert {(n.rack, n.heap, n.cluster_name) for n in cluster.nodes} == {("rack1", "512M", "airflow-atlas-dc")}


def test_two_datacenters_2_plus_2_and_a_bad_layout():
    cluster = two_datacenters({"ATLAS_DC_LAYOUT": "2+2"})
    assert (cluster.node(4).host, cluster.node(4).initial_token, cluster.node(4).datacenter) == ("127.0.0.24", 100, "dc2")
    with pytest.raises(SpecError, match="ATLAS_DC_LAYOUT must be two node counts such as 2"):
        two_datacenters({"ATLAS_DC_LAYOUT": "3"})


def test_the_secured_node_and_cluster():
    layout = secure_layout(ENV)
    node = secure_node(ENV)
    assert (node.host, node.jmx_port, node.cluster_name, node.directory) == (
        "127.0.0.6", 7206, "airflow-atlas-secure", Path("/t/airflow-atlas-secure/node"))
    assert node.security is not None and node.security.keystore == layout.secrets / "node-127.0.0.6.p12"
    assert node.security.ca == Path("/t/airflow-atlas-secure/ca/ca.pem")
    cluster = secure_cluster(ENV)
    assert cluster.hosts == ["127.0.0.7", "127.0.0.8", "127.0.0.9"]
    assert [n.jmx_port for n in cluster.nodes] == [7207, 7208, 7209]
    assert {n.seeds for n in cluster.nodes} == {"127.0.0.7:7000"}
    assert cluster.node(2).directory == Path("/t/airflow-atlas-secure/cluster/node2")
    assert [n.initial_token for n in cluster.nodes] == [balanced_token(i, 3) for i in (1, 2, 3)]
    assert cluster.node(3).security is not None and cluster.node(3).security.keystore.name == "node-127.0.0.9.p12"
