"""scripts/spark.sh: settings, the driver's properties and adoption (no Spark daemon is started here)."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "scripts" / "spark.sh"


def _run(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(SCRIPT), *args], capture_output=True, text=True, env={**os.environ, **env}, timeout=60
    )


def _props(text: str) -> dict[str, str]:
    return dict(line.split(" ", 1) for line in text.splitlines() if line.strip())


def test_the_driver_properties_name_the_master_loopback_driver_and_the_executors_python():
    out = _run("conf", ATLAS_PYTHON=sys.executable)
    assert out.returncode == 0, out.stderr
    props = _props(out.stdout)
    assert props["spark.master"] == "spark://127.0.0.5:7077"
    assert props["spark.driver.host"] == "127.0.0.1"
    assert props["spark.pyspark.python"] == sys.executable
    assert props["spark.cores.max"] == "2"


def test_the_defaults_python_is_the_repositorys_venv():
    props = _props(_run("conf", ATLAS_PYTHON="").stdout)
    if (ROOT / ".venv" / "bin" / "python").exists():
        assert props["spark.pyspark.python"] == str(ROOT / ".venv" / "bin" / "python")


def test_host_port_and_workers_are_configurable():
    props = _props(
        _run("conf", ATLAS_SPARK_HOST="127.0.0.7", ATLAS_SPARK_PORT="7177", ATLAS_SPARK_WORKERS="3").stdout
    )
    assert props["spark.master"] == "spark://127.0.0.7:7177"
    assert props["spark.cores.max"] == "3"


@pytest.mark.parametrize(
    "env, message",
    [
        ({"ATLAS_SPARK_HOST": "10.1.1.1"}, "ATLAS_SPARK_HOST must be a loopback address"),
        ({"ATLAS_SPARK_DRIVER_HOST": "example.org"}, "ATLAS_SPARK_DRIVER_HOST must be a loopback address"),
        ({"ATLAS_SPARK_WORKERS": "0"}, "ATLAS_SPARK_WORKERS must be in 1..16"),
        ({"ATLAS_SPARK_PORT": "x"}, "must be numbers"),
        ({"ATLAS_SPARK_WORKER_MEMORY": "lots"}, "ATLAS_SPARK_WORKER_MEMORY and ATLAS_SPARK_DAEMON_MEMORY"),
        ({"ATLAS_SPARK_ADOPT": "yes"}, "ATLAS_SPARK_ADOPT must be 0 or 1"),
    ],
)
def test_bad_settings_are_refused_before_anything_runs(tmp_path, env, message):
    out = _run("start", ATLAS_SPARK_DIR=str(tmp_path / "spark"), **env)
    assert out.returncode == 64
    assert message in out.stderr
    assert not (tmp_path / "spark").exists()


def test_an_unknown_command_is_a_usage_error():
    out = _run("launch")
    assert out.returncode == 64 and "usage:" in out.stderr


def test_start_refuses_to_adopt_a_master_it_did_not_start(tmp_path):
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = str(server.getsockname()[1])
        env = {"ATLAS_SPARK_HOST": "127.0.0.1", "ATLAS_SPARK_PORT": port, "ATLAS_SPARK_DIR": str(tmp_path / "s")}
        refused = _run("start", **env)
        adopted = _run("start", **env, ATLAS_SPARK_ADOPT="1")
    assert refused.returncode == 1
    assert f"something already listens on 127.0.0.1:{port} but this script did not start it" in refused.stderr
    assert adopted.returncode == 0 and "adopting it" in adopted.stderr
    assert not (tmp_path / "s").exists()


def test_status_of_a_master_that_is_not_there_fails(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free = str(s.getsockname()[1])
    out = _run("status", ATLAS_SPARK_HOST="127.0.0.1", ATLAS_SPARK_WEBUI_PORT=free, ATLAS_SPARK_DIR=str(tmp_path))
    assert out.returncode == 1 and "does not answer" in out.stderr


def test_stop_never_stops_a_process_it_did_not_start(tmp_path):
    """A pid file naming a live process that is not a daemon of this directory (a recycled pid)."""
    other = subprocess.Popen(["sleep", "60"])
    try:
        (tmp_path / "master.pid").write_text(str(other.pid))
        out = _run("stop", ATLAS_SPARK_DIR=str(tmp_path))
        assert out.returncode == 0
        assert "stopping master" not in out.stderr
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()
