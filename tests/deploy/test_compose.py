"""The docker deployment: the compose file is well formed, names every service the runbook promises, and
every image it builds can find its inputs in the repository. (No Docker engine runs on the CI machine, so
images are not built here; docs/DEPLOYMENT.md says so.)"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

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
    "timestamps-1",
    "timestamps-2",
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


def test_airflow_processes_are_restarted_when_they_exit():
    """Airflow's dag-processor exits when its database goes away (tests/deploy/test_faults.py restarts
    Postgres mid-sweep): every long-running Airflow service is started again; airflow-init runs once."""
    services = _airflow_services()
    assert services.pop("airflow-init").get("restart") == "no"
    assert services and {name: s.get("restart") for name, s in services.items()} == dict.fromkeys(services, "unless-stopped")


@pytest.mark.skipif(
    shutil.which("docker-compose") is None, reason="docker-compose not installed (docs/DEPLOYMENT.md says how the file was validated)"
)
def test_docker_compose_config_validates():
    result = subprocess.run(["docker-compose", "-f", str(COMPOSE), "config", "-q"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_the_airflow_image_can_compact_every_node():
    """atlas_compaction needs nodetool in the Airflow image and a way to reach every Cassandra node."""
    dockerfile = (REPO_ROOT / "docker" / "airflow" / "Dockerfile").read_text()
    assert re.search(r"^FROM cassandra:5\.0\.7 AS cassandra$", dockerfile, re.M)
    assert "COPY --from=cassandra /opt/cassandra /opt/cassandra" in dockerfile
    services = _compose()["services"]
    settings = _seeded_settings()
    assert settings["nodetool_command"] == ["/opt/cassandra/bin/nodetool"]
    cassandras = sorted(name for name in services if name.startswith("cassandra-"))
    assert sorted(t.split(":")[0] for t in settings["nodetool_jmx_targets"]) == cassandras
    for name in cassandras:
        assert services[name]["environment"]["LOCAL_JMX"] == "no", name


# ----- issue 21 items 4 and 5: one visible source of settings; secrets, Celery, heartbeat, login ---------
SEED = REPO_ROOT / "docker" / "atlas_variables.json"
ENV_EXAMPLE = REPO_ROOT / "docker" / "airflow.env.example"
SECRETS = ("AIRFLOW__CORE__FERNET_KEY", "AIRFLOW__API_AUTH__JWT_SECRET", "AIRFLOW__API__SECRET_KEY")


def _airflow_services() -> dict:
    return {name: s for name, s in _compose()["services"].items() if name.startswith("airflow-")}


COMMON_ENV = REPO_ROOT / "docker" / "airflow-common.env"


def _service_env(service: dict, with_secrets: bool = False) -> dict:
    """What compose gives the container: its committed env files (docker/airflow.env, the secrets, is the
    user's and not read here unless ``with_secrets``), then its ``environment``."""
    env: dict = {}
    for name in service.get("env_file") or []:
        if name != "airflow.env" or with_secrets:
            env.update(_env_file(COMPOSE.parent / name))
    env.update({k: str(v) for k, v in (service.get("environment") or {}).items()})
    return env


def _seeded_settings() -> dict:
    return json.loads(SEED.read_text())["atlas_settings"]["value"]


def _env_file(path) -> dict:
    out = {}
    for line in path.read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            name, _, value = line.partition("=")
            out[name.strip()] = value.strip()
    return out


def test_no_environment_variable_shadows_the_settings_variable(monkeypatch):
    """Compose never sets AIRFLOW_VAR_ATLAS_SETTINGS (it would shadow the Variable: UI edits ignored); the
    DAG-shaping settings come from ATLAS_DAG_SETTINGS, which the DAG files accept."""
    from airflow_atlas.airflow.settings import DAG_SETTINGS_ENV, AtlasSettings

    for name, service in _airflow_services().items():
        env = _service_env(service)
        assert not any(k.startswith("AIRFLOW_VAR_") for k in env), f"{name} shadows a Variable: {sorted(env)}"
        if name != "airflow-init":
            assert DAG_SETTINGS_ENV in env, name
    env = _service_env(_airflow_services()["airflow-dag-processor"])
    monkeypatch.setenv(DAG_SETTINGS_ENV, env[DAG_SETTINGS_ENV])  # the real reader, given the compose value
    parsed = AtlasSettings.for_dag_files()
    assert parsed.targeted_sweep_schedule == json.loads(env[DAG_SETTINGS_ENV])["targeted_sweep_schedule"]


def test_init_seeds_the_variable_once_and_the_seed_is_valid():
    """airflow-init imports the seed with --action-on-existing-key skip (an edited Variable is kept); the seed
    holds run-time keys only, each valid, and explains unreadable_window_seconds where the user meets it."""
    from airflow_atlas.airflow.settings import AtlasSettings

    init = _airflow_services()["airflow-init"]
    command = " ".join(init["command"])
    match = re.search(r"airflow variables import --action-on-existing-key skip (\S+)", command)
    assert match and "airflow db migrate" in command, command
    mounts = [v.split(":") for v in init["volumes"]]
    assert [str((COMPOSE.parent / src).resolve()) for src, dst, *_ in mounts if dst == match.group(1)] == [str(SEED)]
    seed = json.loads(SEED.read_text())
    assert set(seed) == {"atlas_settings"}
    settings = AtlasSettings.from_mapping(seed["atlas_settings"]["value"])
    assert settings.warnings() == []  # no DAG-shaping key in the Variable
    # then the store's tables, with the seed's shard count (issue 32 item 6: the first runs found none)
    assert f"atlas-sweep init --conn-id atlas_default --shards {settings.shard_count}" in command, command
    assert settings.engine.unreadable_window_seconds == 3600
    description = seed["atlas_settings"]["description"]
    assert "unreadable_window_seconds" in description and "hour" in description


def test_secrets_come_from_an_env_file_the_user_fills():
    """Fernet key, JWT secret and API secret key: from docker/airflow.env (git-ignored) in every Airflow
    container, never a value in the compose file; the example file holds no secret."""
    compose_text = COMPOSE.read_text()
    for name, service in _airflow_services().items():
        assert service.get("env_file") == ["airflow-common.env", "airflow.env"], name
        env = _service_env(service)
        assert not set(SECRETS) & set(env), name
    assert "change-me" not in compose_text and "${AIRFLOW_JWT_SECRET" not in compose_text
    example = _env_file(ENV_EXAMPLE)
    assert set(example) == set(SECRETS) and all(v == "" for v in example.values()), example
    assert "docker/airflow.env" in (REPO_ROOT / ".gitignore").read_text().splitlines()


def test_the_env_script_generates_adequate_secrets_and_never_overwrites(tmp_path):
    from cryptography.fernet import Fernet

    out = tmp_path / "airflow.env"
    script = [sys.executable, str(REPO_ROOT / "scripts" / "docker_env.py"), "--output", str(out)]
    result = subprocess.run(script, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert out.stat().st_mode & 0o777 == 0o600
    env = _env_file(out)
    Fernet(env["AIRFLOW__CORE__FERNET_KEY"].encode())  # a valid Fernet key
    assert len(env["AIRFLOW__API_AUTH__JWT_SECRET"].encode()) >= 64
    assert len(env["AIRFLOW__API__SECRET_KEY"]) >= 32
    before = out.read_text()
    again = subprocess.run(script, capture_output=True, text=True, timeout=60)
    assert again.returncode == 1 and "exists" in again.stderr and out.read_text() == before


def test_airflow_reads_the_compose_settings_as_promised(tmp_path):
    """Airflow's own configuration, given the compose environment and a generated env file: the Celery
    visibility timeout exceeds the longest task, the heartbeat timeout suits sweep leases, DAGs start
    unpaused, the JWT secret is long enough, and the auth manager's users are USER:ROLE with a password
    generated, printed and kept in the passwords file on the auth volume (as docs/DEPLOYMENT.md says)."""
    from airflow_atlas.airflow.settings import AtlasSettings

    env_path = tmp_path / "airflow.env"
    subprocess.run([sys.executable, str(REPO_ROOT / "scripts" / "docker_env.py"), "--output", str(env_path)],
                   check=True, capture_output=True, timeout=60)
    api = _airflow_services()["airflow-apiserver"]
    passwords = tmp_path / "auth" / "passwords.json"
    passwords.parent.mkdir()
    assert api["environment"]["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE"] == "/opt/airflow/auth/passwords.json"
    assert "airflow-auth:/opt/airflow/auth" in api["volumes"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.update(_service_env(api))
    env.update(_env_file(env_path))
    env.update(AIRFLOW_HOME=str(tmp_path / "home"), AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE=str(passwords),
               AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=f"sqlite:///{tmp_path}/airflow.db")
    probe = """
import json
from airflow.configuration import conf
from airflow.api_fastapi.auth.managers.simple.simple_auth_manager import SimpleAuthManager
manager = SimpleAuthManager()
manager.init()
print("CONF " + json.dumps({
    "visibility_timeout": conf.getint("celery_broker_transport_options", "visibility_timeout"),
    "heartbeat_timeout": conf.getint("scheduler", "task_instance_heartbeat_timeout"),
    "heartbeat_default": int(conf.get_default_value("scheduler", "task_instance_heartbeat_timeout")),
    "paused_at_creation": conf.getboolean("core", "dags_are_paused_at_creation"),
    "jwt_secret_bytes": len(conf.get("api_auth", "jwt_secret").encode()),
    "fernet_key": conf.get("core", "fernet_key"),
    "users": [[u.username, u.role] for u in manager.get_users()],
    "passwords": manager.get_passwords(),
}))
"""
    result = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    got = json.loads(next(line for line in result.stdout.splitlines() if line.startswith("CONF "))[5:])
    longest_task = max(AtlasSettings().sweep_timeout_seconds or 0, AtlasSettings().nodetool_timeout_seconds)
    assert got["visibility_timeout"] > longest_task, got
    # A lost worker's task is retried after the heartbeat timeout: the dead sweeper's lease (the seed's) must
    # have expired by then, and the timeout is shorter than Airflow's 300 s (issue 21: recovery took 442 s).
    lease = AtlasSettings.from_mapping(_seeded_settings()).engine.lock_lease_seconds
    assert lease <= got["heartbeat_timeout"] < got["heartbeat_default"], (lease, got)
    assert got["paused_at_creation"] is False
    assert got["jwt_secret_bytes"] >= 64
    assert got["fernet_key"] == _env_file(env_path)["AIRFLOW__CORE__FERNET_KEY"]
    assert got["users"] == [["admin", "ADMIN"]] or got["users"] == [["admin", "admin"]], got["users"]
    (password,) = got["passwords"].values()
    assert list(got["passwords"]) == ["admin"] and len(password) >= 16
    assert f"Password for user 'admin': {password}" in result.stdout  # what the grep of docs/DEPLOYMENT.md finds


def test_the_deployment_doc_matches_the_compose_file():
    doc = (REPO_ROOT / "docs" / "DEPLOYMENT.md").read_text()
    section = doc[doc.index("# Deployment (docker/)"):doc.index("\n## Deployment test")]
    assert "admin/admin" not in section
    for needed in ("python3 scripts/docker_env.py", 'grep "Password for user"', "ATLAS_DAG_SETTINGS",
                   "atlas_variables.json", "unreadable_window_seconds", "AIRFLOW_VAR_ATLAS_SETTINGS",
                   "visibility_timeout", "task_instance_heartbeat_timeout", "DAGS_ARE_PAUSED_AT_CREATION"):
        assert needed in section, needed


def _pins(path) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        match = re.match(r"^([A-Za-z0-9_.\-\[\]]+)==(\S+)", line)
        if match:
            pins[match.group(1).lower()] = match.group(2)
    return pins


def test_the_image_lock_pins_everything_the_project_lock_pins_at_the_same_version():
    """docker/requirements-docker.lock is compiled from requirements.lock (-r) plus the Celery/Postgres
    extras: a package added to or bumped in requirements.lock without recompiling the image's lock (e.g.
    statsd, the StatsD client the statsd-exporter depends on) would be missing from or differ in the image.
    Recompile: ``cd docker && uv pip compile requirements-docker.in --python-version 3.11 -o requirements-docker.lock``."""
    project = _pins(REPO_ROOT / "requirements.lock")
    image = _pins(REPO_ROOT / "docker" / "requirements-docker.lock")
    assert project, "requirements.lock has no pins"
    missing = sorted(name for name in project if name not in image)
    differ = sorted(f"{name} {project[name]} != {image[name]}" for name in project if name in image and image[name] != project[name])
    assert not missing and not differ, f"recompile docker/requirements-docker.lock: missing {missing}, different {differ}"


# ----- issue 21 item 1: one source of configuration for compose and scripts/deploy.sh ------------------
TLS_FILES = ("ATLAS_TIMESTAMP_TLS_CA", "ATLAS_TIMESTAMP_TLS_CERT", "ATLAS_TIMESTAMP_TLS_KEY")
"""The timestamp servers' CA and the clients' certificate and key: file locations (issue 45)."""
ADDRESSES = {
    # where the other services are, and file locations: the only keys compose's `environment` may set
    "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", "AIRFLOW__CELERY__BROKER_URL", "AIRFLOW__CELERY__RESULT_BACKEND",
    "AIRFLOW__CORE__EXECUTION_API_SERVER_URL", "AIRFLOW__API__BASE_URL", "AIRFLOW__METRICS__STATSD_HOST",
    "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE", "AIRFLOW_CONN_ATLAS_DEFAULT", "AIRFLOW_CONN_SPARK_DEFAULT",
    "ATLAS_TIMESTAMP_SERVERS", *TLS_FILES,
}
DEPLOY_LOCATIONS = {"AIRFLOW_HOME", "AIRFLOW__CORE__DAGS_FOLDER", "AIRFLOW_CONN_ATLAS_EMBEDDED", "PATH"}


def _deploy_env(tmp_path) -> dict:
    """What scripts/deploy.sh gives its Airflow processes (``eval "$(scripts/deploy.sh env)"``)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "ATLAS_"))}
    env.update(ATLAS_DEPLOY_DIR=str(tmp_path / "state"), ATLAS_DEPLOY_CACHE=str(tmp_path / "cache"))
    script = REPO_ROOT / "scripts" / "deploy.sh"
    result = subprocess.run(["bash", "-c", f'eval "$({script} env)" && env -0'], env=env, capture_output=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    got = dict(item.split("=", 1) for item in result.stdout.decode().split("\0") if "=" in item)
    return {k: v for k, v in got.items() if k != "_" and (env.get(k) != v or k == "PATH")}


def test_compose_and_the_deploy_script_share_one_configuration(tmp_path):
    """docker/airflow-common.env is the one source: every Airflow service of compose loads it (env_file) and
    overrides none of it, its `environment` holds addresses and locations only; scripts/deploy.sh gives its
    processes exactly that file's values, plus the secrets and its own addresses and locations (the same
    keys as compose's, and where its files are) - nothing else, so the two cannot drift."""
    common = _env_file(COMMON_ENV)
    assert {"AIRFLOW__CORE__EXECUTOR", "AIRFLOW__CELERY_BROKER_TRANSPORT_OPTIONS__VISIBILITY_TIMEOUT",
            "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT", "ATLAS_DAG_SETTINGS"} <= set(common)
    assert not set(common) & (ADDRESSES | set(SECRETS)), set(common) & (ADDRESSES | set(SECRETS))
    for name, service in _airflow_services().items():
        assert service["env_file"][0] == "airflow-common.env", name
        environment = set(service.get("environment") or {})
        assert environment <= ADDRESSES, f"{name} sets more than addresses: {sorted(environment - ADDRESSES)}"
        assert not environment & set(common), f"{name} overrides the common file: {sorted(environment & set(common))}"
    deploy = _deploy_env(tmp_path)
    assert {k: deploy.get(k) for k in common} == common
    assert set(SECRETS) <= set(deploy)
    extra = set(deploy) - set(common) - set(SECRETS)
    assert extra == ADDRESSES | DEPLOY_LOCATIONS, sorted(extra ^ (ADDRESSES | DEPLOY_LOCATIONS))
    for key in TLS_FILES:  # the certificates `atlas-sweep certs` makes in the deployment's state
        assert deploy[key].startswith(str(tmp_path / "state" / "tls") + "/"), (key, deploy[key])
    for key in ADDRESSES - {"AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE", "AIRFLOW_CONN_ATLAS_DEFAULT",
                            *TLS_FILES}:
        # the deployment's own loopback address; spark_default too, where it starts no master: never the
        # address of another service on the machine (issue 32 item 7: it was scripts/spark.sh's 127.0.0.5)
        assert "127.0.0.11" in deploy[key], (key, deploy[key])


# ----- issue 45: the timestamp servers speak mutual TLS -------------------------------------------------
TLS_MOUNT = "timestamps-tls:/opt/airflow/tls"
SERVE_TLS = ["--cert-file", "/opt/airflow/tls/server.pem", "--key-file", "/opt/airflow/tls/server.key",
             "--client-ca-file", "/opt/airflow/tls/ca.pem"]


def test_the_timestamp_servers_and_their_clients_speak_mutual_tls(tmp_path):
    """airflow-init makes the CA, server and client certificates on the timestamps-tls volume (for every host
    the clients dial) before anything else; both timestamp servers serve them requiring client certificates;
    every Airflow process names the CA and its client certificate; the image makes the mount point the airflow
    user's. The certs command line airflow-init runs is run here for real (into a temporary directory)."""
    import shlex

    from airflow_atlas.cli import main

    compose = _compose()
    services = compose["services"]
    assert "timestamps-tls" in compose["volumes"]
    hosts = [a.rsplit(":", 1)[0] for a in
             services["airflow-apiserver"]["environment"]["ATLAS_TIMESTAMP_SERVERS"].split(",")]
    for name in ("timestamps-1", "timestamps-2"):
        command = services[name]["command"]
        assert command[-len(SERVE_TLS):] == SERVE_TLS, (name, command)
        assert command[command.index("--advertise") + 1].rsplit(":", 1)[0] in hosts, name
    for name, service in _airflow_services().items():
        assert TLS_MOUNT in service["volumes"], name
        env = service["environment"]
        assert (env["ATLAS_TIMESTAMP_TLS_CA"], env["ATLAS_TIMESTAMP_TLS_CERT"], env["ATLAS_TIMESTAMP_TLS_KEY"]) == (
            "/opt/airflow/tls/ca.pem", "/opt/airflow/tls/client.pem", "/opt/airflow/tls/client.key"), name
    init = services["airflow-init"]
    assert TLS_MOUNT in init["volumes"]
    first = init["command"][0].split("&&")[0]
    argv = shlex.split(first)
    assert argv[:3] == ["atlas-sweep", "certs", "/opt/airflow/tls"], first
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "--host"] == hosts, first
    assert main(["certs", str(tmp_path / "tls"), *argv[3:]]) == 0
    assert sorted(p.name for p in (tmp_path / "tls").iterdir()) == sorted(
        ["ca.pem", "ca.key", "server.pem", "server.key", "client.pem", "client.key"])
    dockerfile = (REPO_ROOT / "docker" / "airflow" / "Dockerfile").read_text().splitlines()
    user = dockerfile.index("USER airflow")
    assert any(line.startswith("RUN mkdir -p") and "/opt/airflow/tls" in line for line in dockerfile[user:]), \
        "the image must make /opt/airflow/tls as the airflow user (a named volume takes its owner)"
