"""devkit/cassandra/spec.py: a node's rules - a bad address, port, datacenter, rack, seed list or cluster name is
refused before anything is written, naming the value (and the variable, read from the environment) - and its
defaults: its own seed, a cluster name of its own once its address or a port moves, the shipped
cassandra.yaml only for the project's node."""
from __future__ import annotations

from pathlib import Path

import pytest

from devkit.cassandra.spec import (
    NodeSpec,
    ScriptError,
    SpecError,
    node_from_environment,
    settings_from_environment,
)

NODE = Path("/nonexistent/node")


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"host": "10.0.0.1"}, "the node's address must be a loopback address 127.x.y.z, got '10.0.0.1'"),
        ({"host": "localhost"}, "got 'localhost'"),
        ({"cql_port": 0}, "the CQL port must be a number in 1..65535, got '0'"),
        ({"storage_port": 70000}, "the storage port must be a number in 1..65535, got '70000'"),
        ({"jmx_port": -1}, "the JMX port must be a number in 1..65535, got '-1'"),
        ({"datacenter": "dc 1"}, "the datacenter may hold letters, digits, '_' and '-' only, got 'dc 1'"),
        ({"rack": "r/1"}, "the rack may hold letters, digits, '_' and '-' only, got 'r/1'"),
        ({"seeds": "a;b"}, "the seeds must be a comma-separated list of address:port, got 'a;b'"),
        ({"cluster_name": "x/y"}, "the cluster name may hold letters, digits, '.', '_' and '-' only, got 'x/y'"),
    ],
)
def test_a_bad_setting_is_refused_naming_it(fields, message):
    with pytest.raises(SpecError) as refused:
        NodeSpec(directory=NODE, **fields)
    assert message in str(refused.value)
    assert refused.value.exit_code == 64


def test_the_project_node_runs_on_the_shipped_config():
    node = NodeSpec(directory=NODE)
    assert (node.seeds, node.cluster_name) == ("127.0.0.1:7000", "airflow-atlas-local")
    assert node.is_default_address and node.runs_on_shipped_config
    assert (node.pid_file, node.data_dir, node.log_dir) == (NODE / "cassandra.pid", NODE / "data", NODE / "logs")


@pytest.mark.parametrize(
    ("fields", "name"),
    [
        ({"cql_port": 9342, "storage_port": 7300}, "airflow-atlas-local-9342"),
        ({"host": "127.0.0.9"}, "airflow-atlas-local-127.0.0.9-9042"),
        ({"jmx_port": 7300}, "airflow-atlas-local-9042"),
    ],
)
def test_a_moved_node_gets_its_own_seed_and_cluster_name(fields, name):
    node = NodeSpec(directory=NODE, **fields)
    assert node.cluster_name == name
    assert node.seeds == f"{node.host}:{node.storage_port}"
    assert not node.runs_on_shipped_config


@pytest.mark.parametrize("fields", [{"cluster_name": "other"}, {"initial_token": 5}, {"datacenter": "dc1"}])
def test_a_token_datacenter_or_name_moves_the_project_node_to_a_rendered_config(fields):
    assert not NodeSpec(directory=NODE, **fields).runs_on_shipped_config


def test_the_environment_sets_every_field():
    node = node_from_environment({
        "TMPDIR": "/t", "ATLAS_CASSANDRA_PORT_OFFSET": "300", "ATLAS_CASSANDRA_JMX_PORT": "8000",
        "ATLAS_CASSANDRA_HOST": "127.0.0.9", "ATLAS_CASSANDRA_SEEDS": "127.0.0.8:7000",
        "ATLAS_CASSANDRA_INITIAL_TOKEN": "-12", "ATLAS_CASSANDRA_DC": "east", "ATLAS_CASSANDRA_RACK": "r2",
        "ATLAS_CASSANDRA_CLUSTER_NAME": "c", "ATLAS_CASSANDRA_HEAP": "2G",
    })
    assert node == NodeSpec(directory=Path("/t/airflow-atlas-cassandra"), host="127.0.0.9", cql_port=9342,
                            storage_port=7300, jmx_port=8000, seeds="127.0.0.8:7000", cluster_name="c",
                            initial_token=-12, datacenter="east", rack="r2", heap="2G")
    assert node_from_environment({}) == NodeSpec(directory=Path("/tmp/airflow-atlas-cassandra"))


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"ATLAS_CASSANDRA_HOST": "10.0.0.1"}, "ATLAS_CASSANDRA_HOST must be a loopback address 127.x.y.z, got '10.0.0.1'"),
        ({"ATLAS_CASSANDRA_CQL_PORT": "70000"}, "ports must be numbers in 1..65535, got '70000'"),
        ({"ATLAS_CASSANDRA_JMX_PORT": "x"}, "ports must be numbers in 1..65535, got 'x'"),
        ({"ATLAS_CASSANDRA_PORT_OFFSET": "-1"}, "ATLAS_CASSANDRA_PORT_OFFSET must be a number"),
        ({"ATLAS_CASSANDRA_SEEDS": "a;b"}, "ATLAS_CASSANDRA_SEEDS must be a comma-separated list of address:port"),
        ({"ATLAS_CASSANDRA_INITIAL_TOKEN": "abc"}, "ATLAS_CASSANDRA_INITIAL_TOKEN must be an integer token, got 'abc'"),
        ({"ATLAS_CASSANDRA_DC": "dc 1"}, "ATLAS_CASSANDRA_DC may hold letters, digits, '_' and '-' only, got 'dc 1'"),
        ({"ATLAS_CASSANDRA_RACK": "r/1"}, "ATLAS_CASSANDRA_RACK may hold"),
        ({"ATLAS_CASSANDRA_CLUSTER_NAME": "x/y"}, "ATLAS_CASSANDRA_CLUSTER_NAME may hold"),
    ],
)
def test_a_bad_variable_is_refused_naming_the_variable(env, message):
    with pytest.raises(SpecError) as refused:
        node_from_environment(env)
    assert message in str(refused.value)


def test_run_settings():
    settings = settings_from_environment({"HOME": "/h", "ATLAS_CASSANDRA_JIT": "full", "ATLAS_CASSANDRA_ADOPT": "1"})
    assert (settings.cache_dir, settings.jit, settings.timeout, settings.adopt) == (
        Path("/h/.cache/airflow-atlas"), "full", 240, True)
    with pytest.raises(ScriptError) as jit:
        settings_from_environment({"ATLAS_CASSANDRA_JIT": "c2"})
    assert (str(jit.value), jit.value.exit_code) == ("ATLAS_CASSANDRA_JIT must be c1 or full, got 'c2'", 1)
    with pytest.raises(SpecError, match="ATLAS_CASSANDRA_ADOPT must be 0 or 1, got 'yes'"):
        settings_from_environment({"ATLAS_CASSANDRA_ADOPT": "yes"})
