"""scripts/cassandra.sh (devkit/cassandra/) through its command line: the JIT profile switch, addresses, seeds,
cluster name, the cluster's nodes, refusing to adopt a node it did not start (no Cassandra node is started
here; the full profile's options: tests/unit/devkit/cassandra/test_config.py)."""
from __future__ import annotations

import os
import socket
import struct
import subprocess
import sys
import threading
from contextlib import contextmanager
from itertools import pairwise
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[4]
SCRIPT = ROOT / "scripts" / "cassandra.sh"


def test_an_unknown_jit_profile_is_refused_before_anything_runs(tmp_path):
    env = {**os.environ, "ATLAS_CASSANDRA_JIT": "c2", "ATLAS_CASSANDRA_DIR": str(tmp_path / "node")}
    out = subprocess.run([str(SCRIPT), "status"], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 1
    assert "ATLAS_CASSANDRA_JIT must be c1 or full, got 'c2'" in out.stderr
    assert not (tmp_path / "node").exists()


# ----- addresses, seeds, cluster name, adoption (no node is started) ---------------------------------------


def _run(*args: str, timeout: float = 60, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(SCRIPT), *args], capture_output=True, text=True, env={**os.environ, **env}, timeout=timeout
    )


def _yaml(text: str) -> dict[str, str]:
    """The top-level ``key: value`` lines and the seeds of a rendered cassandra.yaml."""
    values = {}
    for line in text.splitlines():
        if line.strip().startswith("- seeds:"):
            values["seeds"] = line.split(":", 1)[1].strip().strip('"')
        elif line and not line.startswith((" ", "#", "-")) and ": " in line:
            key, value = line.split(": ", 1)
            values[key] = value
    return values


def test_the_default_node_runs_on_the_shipped_yaml_unchanged():
    out = _run("config")
    assert out.returncode == 0, out.stderr
    assert out.stdout == (ROOT / "scripts" / "cassandra" / "conf" / "cassandra.yaml").read_text()


def test_a_private_node_gets_its_own_ports_seed_and_cluster_name(tmp_path):
    out = _run("config", ATLAS_CASSANDRA_PORT_OFFSET="300", ATLAS_CASSANDRA_DIR=str(tmp_path / "n"))
    conf = _yaml(out.stdout)
    assert (conf["native_transport_port"], conf["storage_port"]) == ("9342", "7300")
    assert conf["seeds"] == "127.0.0.1:7300"
    assert conf["cluster_name"] == "airflow-atlas-local-9342"
    assert conf["listen_address"] == conf["rpc_address"] == "127.0.0.1"
    assert "initial_token" not in conf
    assert not (tmp_path / "n").exists(), "config must write nothing"


def test_address_seeds_and_cluster_name_are_rendered(tmp_path):
    out = _run(
        "config",
        ATLAS_CASSANDRA_HOST="127.0.0.9",
        ATLAS_CASSANDRA_SEEDS="127.0.0.8:7000,127.0.0.9:7000",
        ATLAS_CASSANDRA_CLUSTER_NAME="my-cluster",
        ATLAS_CASSANDRA_DIR=str(tmp_path / "n"),
    )
    conf = _yaml(out.stdout)
    assert conf["listen_address"] == conf["rpc_address"] == "127.0.0.9"
    assert conf["seeds"] == "127.0.0.8:7000,127.0.0.9:7000"
    assert conf["cluster_name"] == "my-cluster"


def test_another_address_alone_never_joins_another_local_node():
    conf = _yaml(_run("config", ATLAS_CASSANDRA_HOST="127.0.0.9").stdout)
    assert conf["seeds"] == "127.0.0.9:7000"
    assert conf["cluster_name"] == "airflow-atlas-local-127.0.0.9-9042"


def test_cluster_nodes_share_seed_and_name_and_get_balanced_tokens():
    confs = [_yaml(_run("cluster", "config", str(i)).stdout) for i in (1, 2, 3)]
    assert [c["listen_address"] for c in confs] == ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
    assert [c["rpc_address"] for c in confs] == ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
    assert {c["seeds"] for c in confs} == {"127.0.0.2:7000"}
    assert {c["cluster_name"] for c in confs} == {"airflow-atlas-cluster"}
    assert {c["auto_bootstrap"] for c in confs} == {"false"}
    tokens = [int(c["initial_token"]) for c in confs]
    assert tokens == sorted(tokens) and tokens[0] == -(2**63)
    gaps = {b - a for a, b in pairwise(tokens)} | {2**64 - (tokens[-1] - tokens[0])}
    assert max(gaps) - min(gaps) <= 1


def test_a_five_node_cluster_is_rendered_on_five_addresses():
    conf = _yaml(_run("cluster", "config", "5", ATLAS_CLUSTER_NODES="5").stdout)
    assert conf["listen_address"] == "127.0.0.6"


def test_the_two_datacenter_cluster_splits_its_nodes_2_plus_1_with_gossiping_snitch(tmp_path):
    confs = [_yaml(_run("dc", "config", str(i), ATLAS_DC_DIR=str(tmp_path / "dc")).stdout) for i in (1, 2, 3)]
    assert [c["listen_address"] for c in confs] == ["127.0.0.21", "127.0.0.22", "127.0.0.23"]
    assert {c["seeds"] for c in confs} == {"127.0.0.21:7000,127.0.0.23:7000"}  # one seed per datacenter
    assert {c["cluster_name"] for c in confs} == {"airflow-atlas-dc"}
    assert {c["endpoint_snitch"] for c in confs} == {"GossipingPropertyFileSnitch"}
    tokens = [int(c["initial_token"]) for c in confs]
    assert tokens == [-(2**63), 0, -(2**63) + 100]  # balanced within each datacenter, unique in the ring
    assert not (tmp_path / "dc").exists(), "config must write nothing"
    two_two = _yaml(_run("dc", "config", "4", ATLAS_DC_LAYOUT="2+2").stdout)
    assert (two_two["listen_address"], int(two_two["initial_token"])) == ("127.0.0.24", 100)


def test_the_single_clusters_keep_the_simple_snitch():
    assert _yaml(_run("cluster", "config", "1").stdout)["endpoint_snitch"] == "SimpleSnitch"
    assert _yaml(_run("config").stdout)["endpoint_snitch"] == "SimpleSnitch"


@pytest.mark.parametrize(
    "args, env, message",
    [
        (["dc", "status"], {"ATLAS_DC_LAYOUT": "3"}, "ATLAS_DC_LAYOUT must be two node counts"),
        (["dc", "stop-node", "4"], {}, "node index must be in 1..3"),
        (["status"], {"ATLAS_CASSANDRA_DC": "dc 1"}, "ATLAS_CASSANDRA_DC may hold"),
        (["status"], {"ATLAS_CASSANDRA_HOST": "10.0.0.1"}, "ATLAS_CASSANDRA_HOST must be a loopback address"),
        (["status"], {"ATLAS_CASSANDRA_SEEDS": "a;b"}, "ATLAS_CASSANDRA_SEEDS must be"),
        (["status"], {"ATLAS_CASSANDRA_CLUSTER_NAME": "x/y"}, "ATLAS_CASSANDRA_CLUSTER_NAME may hold"),
        (["status"], {"ATLAS_CASSANDRA_CQL_PORT": "70000"}, "ports must be numbers in 1..65535"),
        (["status"], {"ATLAS_CASSANDRA_INITIAL_TOKEN": "abc"}, "ATLAS_CASSANDRA_INITIAL_TOKEN must be"),
        (["status"], {"ATLAS_CASSANDRA_ADOPT": "yes"}, "ATLAS_CASSANDRA_ADOPT must be 0 or 1"),
        (["cluster", "status"], {"ATLAS_CLUSTER_NODES": "0"}, "ATLAS_CLUSTER_NODES must be a number in 1..250"),
        (["cluster", "stop-node", "4"], {}, "node index must be in 1..3"),
        (["cluster", "nodetool", "x", "status"], {}, "node index must be in 1..3"),
        (["cluster", "reboot"], {}, "usage:"),
        (["start", "--force"], {"ATLAS_CASSANDRA_CQL_PORT": "1"}, "start takes --fresh and --adopt"),
    ],
)
def test_bad_settings_are_refused_with_a_usage_error(tmp_path, args, env, message):
    out = _run(*args, ATLAS_CASSANDRA_DIR=str(tmp_path / "n"), ATLAS_CLUSTER_DIR=str(tmp_path / "c"),
               ATLAS_DC_DIR=str(tmp_path / "c"), **env)
    assert out.returncode == 64, out.stderr
    assert message in out.stderr
    assert not (tmp_path / "n").exists() and not (tmp_path / "c").exists()


@contextmanager
def _something_speaking_cql():
    """A server on 127.0.0.1 that answers the CQL OPTIONS request with SUPPORTED: what the script sees when a
    node it did not start (another cluster, another version, another user's) listens on the port."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(2)
                try:
                    conn.recv(9)
                    conn.sendall(struct.pack(">BBhBi", 0x84, 0, 0, 0x06, 0))
                except OSError:
                    pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        stop.set()
        thread.join(5)
        server.close()


def test_start_refuses_to_adopt_a_node_it_did_not_start(tmp_path):
    with _something_speaking_cql() as port:
        env = {"ATLAS_CASSANDRA_CQL_PORT": str(port), "ATLAS_CASSANDRA_DIR": str(tmp_path / "n")}
        status = _run("status", **env)
        refused = _run("start", **env)
        adopted = _run("start", **env, ATLAS_CASSANDRA_ADOPT="1")
        adopted_by_flag = _run("start", "--adopt", **env)
    assert status.returncode == 0 and "not a node this script started" in status.stderr
    assert refused.returncode == 1
    assert f"a CQL server already answers on 127.0.0.1:{port} but this script did not start it" in refused.stderr
    assert "ATLAS_CASSANDRA_ADOPT=1" in refused.stderr
    assert adopted.returncode == 0 and "adopting it" in adopted.stderr
    assert adopted_by_flag.returncode == 0 and "adopting it" in adopted_by_flag.stderr
    assert not (tmp_path / "n").exists()


@pytest.mark.parametrize("command", ["stop", "discard"])
def test_stop_and_discard_never_end_a_process_of_another_node_directory(tmp_path, command):
    """A pid file naming a live process that is not this node directory's Cassandra (as after a pid
    was recycled) is neither stopped nor killed."""
    node = tmp_path / "n"
    node.mkdir()
    other = subprocess.Popen(["sleep", "60"])
    try:
        (node / "cassandra.pid").write_text(str(other.pid))
        out = _run(command, ATLAS_CASSANDRA_DIR=str(node), ATLAS_CASSANDRA_CQL_PORT="1")
        assert out.returncode == 0, out.stderr
        assert ("not running" in out.stderr) if command == "stop" else ("discarding pid" not in out.stderr)
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()


def test_discard_kills_the_node_at_once_and_deletes_its_data_but_not_its_logs(tmp_path):
    """``discard`` (a throwaway node: a test's fresh cluster) SIGKILLs this node directory's process, which a
    graceful stop would have let drain, and deletes the data; the logs stay. The process stands in for the JVM:
    its command line names the node's storage directory, as the JVM's does."""
    node = tmp_path / "n"
    (node / "data" / "commitlog").mkdir(parents=True)
    (node / "logs").mkdir()
    (node / "logs" / "system.log").write_text("kept\n")
    # A process that ignores SIGTERM: only a SIGKILL ends it within the test's time.
    jvm = subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, "
                            "signal.SIG_IGN); time.sleep(120)", f"-Dcassandra.storagedir={node}/data"])
    reaped: list[int] = []  # as init reaps the real node, whose starting script has exited
    reaper = threading.Thread(target=lambda: reaped.append(jvm.wait()), daemon=True)
    reaper.start()
    try:
        (node / "cassandra.pid").write_text(str(jvm.pid))
        out = _run("discard", ATLAS_CASSANDRA_DIR=str(node), ATLAS_CASSANDRA_CQL_PORT="1", timeout=30)
        assert out.returncode == 0, out.stderr
        reaper.join(timeout=10)
        assert reaped == [-9]
        assert "discarded" in out.stderr
        assert not (node / "data").exists() and not (node / "cassandra.pid").exists()
        assert (node / "logs" / "system.log").read_text() == "kept\n"
    finally:
        jvm.kill()
        jvm.wait()


@pytest.mark.parametrize(
    ("env", "cwd"),
    [
        ({"HOME": str(ROOT / "scripts")}, ROOT),  # what tests/integration/security once did: 67 MB got committed
        ({"ATLAS_CACHE_DIR": "scripts/.cache/airflow-atlas"}, ROOT),  # a relative cache, resolved from the checkout
        ({"ATLAS_CACHE_DIR": ".cache/airflow-atlas"}, ROOT / "scripts"),
    ],
)
def test_the_jar_cache_is_never_inside_the_repository(env, cwd):
    """Every command that needs the jars (here ``fetch`` and ``nodetool``) refuses a cache inside the checkout
    before anything is fetched or run."""
    base = {k: v for k, v in os.environ.items() if k != "ATLAS_CACHE_DIR"}
    for args in (["fetch"], ["nodetool", "status"]):
        out = subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, env={**base, **env}, cwd=cwd,
                             timeout=60)
        assert out.returncode == 64, out.stdout + out.stderr
        assert "lies inside the repository" in out.stderr and "set ATLAS_CACHE_DIR" in out.stderr
