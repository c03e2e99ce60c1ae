"""The secured 3-node cluster: roles replicated to every node (any node alone authenticates a role made
through another), TLS verified per node (each has its own certificate for its address), an RF 3 store
initialised by the administrator and swept and verified by the least-privilege sweeper."""
from __future__ import annotations

import json
import time
import uuid

import pytest

from tests.integration.cli.conftest import Cli

pytestmark = pytest.mark.cassandra

PASSWORD = "clu5ter-" + uuid.uuid4().hex[:8]


@pytest.fixture(scope="module")
def cluster_store(secure_cluster, tmp_path_factory):
    keyspace = f"atlas_secc_{uuid.uuid4().hex[:10]}"
    cwd = tmp_path_factory.mktemp("secure-cluster")
    admin = Cli(secure_cluster.admin_url(keyspace) + "&replication_factor=3", cwd)
    admin.ok("init", timeout=300)
    admin.ok("workload", "--transactions", "5", timeout=300)
    role = f"sweeper_{uuid.uuid4().hex[:8]}"
    printed = admin.json("grants", "--name", role)["grants"]
    secure_cluster.cql(f"CREATE ROLE {role} WITH LOGIN = true AND PASSWORD = '{PASSWORD}'", *(g["cql"].rstrip(";") for g in printed))
    yield keyspace, cwd, role
    secure_cluster.cql(f"DROP ROLE IF EXISTS {role}", f"DROP KEYSPACE IF EXISTS {keyspace}")


def test_roles_are_replicated_to_every_node(secure_cluster, cluster_store):
    keyspace, cwd, role = cluster_store
    for host in secure_cluster.host.split(","):  # each node alone as the only contact point
        url = secure_cluster.url(role, PASSWORD, keyspace).replace(f"@{secure_cluster.host}/", f"@{host}/")
        # a cluster just (re)started may answer a retriable "unavailable" (exit 3, e.g. a Paxos round not
        # yet at quorum) for a while, as a retried Airflow task would see it; never an access error (exit 5)
        deadline = time.monotonic() + 120
        result = Cli(url, cwd).run("status", "--json", timeout=180)
        while result.returncode == 3 and time.monotonic() < deadline:
            time.sleep(5)
            result = Cli(url, cwd).run("status", "--json", timeout=180)
        assert result.returncode == 0, f"status through {host} exited {result.returncode}: {result.stderr}"
        assert "shards" in json.loads(result.stdout)


def test_sweeper_sweeps_an_rf3_store_over_tls(secure_cluster, cluster_store):
    keyspace, cwd, role = cluster_store
    cli = Cli(secure_cluster.url(role, PASSWORD, keyspace), cwd, ("unreadable_window_seconds=0",))
    cli.ok("workload", "--transactions", "30", timeout=300)
    swept = cli.json("sweep", timeout=300)
    assert not swept["failures"] and sum(r["cells_tombstoned"] for r in swept["results"]) > 0, swept
    cli.ok("verify", timeout=300)
