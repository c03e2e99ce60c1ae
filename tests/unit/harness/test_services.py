"""tests/services.py on stand-in commands (shell scripts in a temporary directory; no service is started): a
service that runs is not started, one that does not is started once however many ask at once, an install's
binary must exist afterwards, and a start that fails or leaves no binary fails the asking test naming the
service and its log."""
from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tests import services
from tests.services import Service


@pytest.fixture(autouse=True)
def _own_dirs(tmp_path, monkeypatch):
    monkeypatch.setattr(services, "LOCK_DIR", tmp_path / "locks")
    monkeypatch.setattr(services, "LOG_DIR", tmp_path / "logs")


def _script(path: Path, body: str) -> str:
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return str(path)


def _server(tmp_path: Path, start_body: str = "") -> Service:
    """Runs when ``up`` exists; its start counts itself in ``starts``, takes a moment, then makes ``up``."""
    up, starts = tmp_path / "up", tmp_path / "starts"
    start = _script(tmp_path / "start.sh", start_body or f"echo started >>{starts}; sleep 0.3; touch {up}")
    running = _script(tmp_path / "running.sh", f"test -e {up}")
    return Service("the stand-in server", "stand-in", (start,), running=(running,))


def test_a_running_service_is_not_started(tmp_path):
    (tmp_path / "up").touch()
    assert _server(tmp_path).ensure() == ""
    assert not (tmp_path / "starts").exists()


def test_two_asking_at_once_start_it_once(tmp_path):
    service = _server(tmp_path)
    threads = [threading.Thread(target=service.ensure) for _ in range(2)]  # flock: one open file each
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert (tmp_path / "starts").read_text() == "started\n"
    assert service.log.read_text().count("----- ") == 1  # one start logged


def test_a_failed_start_names_the_service_and_its_log(tmp_path):
    service = _server(tmp_path, start_body="echo 'no disk left' >&2; exit 3")
    with pytest.raises(pytest.fail.Exception) as failed:
        service.ensure()
    message = str(failed.value)
    assert message.startswith("the stand-in server is not available: ") and "exited 3" in message
    assert str(service.log) in message and "no disk left" in message


def test_an_install_returns_its_binary_and_fails_when_it_is_missing(tmp_path):
    binary = tmp_path / "tool"
    install = _script(tmp_path / "install.sh", f"printf '#!/bin/sh\\n' >{binary}; chmod +x {binary}")
    assert Service("the tool", "tool", (install,), binary=str(binary)).ensure() == str(binary)
    warn_only = _script(tmp_path / "warn.sh", "echo 'WARNING: not root' >&2")
    with pytest.raises(pytest.fail.Exception) as failed:
        Service("the other tool", "other", (warn_only,), binary=str(tmp_path / "other")).ensure()
    assert "the other tool is not available" in str(failed.value) and "WARNING: not root" in str(failed.value)


def test_a_start_runs_in_the_environment_the_run_started_with(tmp_path, monkeypatch):
    monkeypatch.setenv("ATLAS_A_TESTS_OWN_VARIABLE", "leaked")
    shown = _script(tmp_path / "show.sh", 'echo "[${ATLAS_A_TESTS_OWN_VARIABLE:-}]"')
    assert Service("the shower", "shower", (shown,)).ensure() == "[]"


def test_an_install_without_a_known_binary_returns_what_its_script_prints(tmp_path):
    found = _script(tmp_path / "found.sh", "echo /usr/local/bin/exporter")
    assert Service("the exporter", "exporter", (found,)).ensure() == "/usr/local/bin/exporter"
