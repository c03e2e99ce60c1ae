"""The docker deployment: the compose file is well formed, names every service the runbook promises, and
every image it builds can find its inputs in the repository. (No Docker engine runs on the CI machine, so
images are not built here; README says so.)"""
from __future__ import annotations

import re
import shutil
import subprocess

import pytest
import yaml

from tests.conftest import REPO_ROOT

COMPOSE = REPO_ROOT / "docker" / "docker-compose.yml"
EXPECTED = {
    "cassandra-1",
    "cassandra-2",
    "cassandra-3",
    "spark-master",
    "spark-worker-1",
    "spark-worker-2",
    "airflow-apiserver",
    "airflow-scheduler",
    "airflow-dag-processor",
    "airflow-triggerer",
    "airflow-worker-1",
    "airflow-worker-2",
}


def _compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


def test_compose_has_the_promised_services():
    services = set(_compose()["services"])
    assert EXPECTED <= services, EXPECTED - services


def test_every_built_image_finds_its_inputs():
    compose = _compose()
    builds = [s["build"] for s in compose["services"].values() if "build" in s]
    assert builds, "no service builds an image from the repository"
    for build in builds:
        context = (COMPOSE.parent / build["context"]).resolve()
        dockerfile = context / build["dockerfile"]
        assert dockerfile.is_file(), dockerfile
        for line in dockerfile.read_text().splitlines():
            match = re.match(r"^COPY\s+(.+)\s+(\S+)$", line.strip())
            if not match or match.group(1).startswith("--from="):  # from another image/stage, not the repo
                continue
            for source in match.group(1).split():
                assert (context / source).exists(), f"{dockerfile}: COPY source {source} missing"


def test_airflow_services_mount_dags_and_name_connections():
    services = _compose()["services"]
    api = services["airflow-apiserver"]
    assert any(str(v).endswith(":/opt/airflow/dags:ro") for v in api["volumes"])
    env = api["environment"]
    assert "AIRFLOW_CONN_ATLAS_DEFAULT" in env and "AIRFLOW_CONN_SPARK_DEFAULT" in env


@pytest.mark.skipif(
    shutil.which("docker-compose") is None, reason="docker-compose not installed (the README says how the file was validated)"
)
def test_docker_compose_config_validates():
    result = subprocess.run(["docker-compose", "-f", str(COMPOSE), "config", "-q"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_the_airflow_image_can_compact_every_node():
    """atlas_compaction needs nodetool in the Airflow image and a way to reach every Cassandra node."""
    import json

    dockerfile = (REPO_ROOT / "docker" / "airflow" / "Dockerfile").read_text()
    assert re.search(r"^FROM cassandra:5\.0\.7 AS cassandra$", dockerfile, re.M)
    assert "COPY --from=cassandra /opt/cassandra /opt/cassandra" in dockerfile
    services = _compose()["services"]
    settings = json.loads(services["airflow-worker-1"]["environment"]["AIRFLOW_VAR_ATLAS_SETTINGS"])
    assert settings["nodetool_command"] == ["/opt/cassandra/bin/nodetool"]
    cassandras = sorted(name for name in services if name.startswith("cassandra-"))
    assert sorted(t.split(":")[0] for t in settings["nodetool_jmx_targets"]) == cassandras
    for name in cassandras:
        assert services[name]["environment"]["LOCAL_JMX"] == "no", name
