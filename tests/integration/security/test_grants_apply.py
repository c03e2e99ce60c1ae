"""``atlas-sweep grants --apply`` on the secured node (issue 32 item 5: the printed grants could not be applied
with anything the project installs): through the administrator's connection, read from ``$ATLAS_STORE_URL``
or a 0600 ``--store-file`` (never a password on the command line), it creates the role from a 0600 password
file, grants what it lacks, and says what it granted; a second run grants nothing."""
from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from tests.integration.cli.conftest import Cli

pytestmark = pytest.mark.cassandra

PASSWORD = "ap/pl1ed:" + uuid.uuid4().hex[:8]


def _private(path: Path, text: str, mode: int = 0o600) -> Path:
    path.write_text(text + "\n")
    path.chmod(mode)
    return path


@pytest.fixture(scope="module")
def admin(secure_node, secure_keyspace, tmp_path_factory):
    """The administrator's URL in a 0600 file, and the initialised store (init through $ATLAS_STORE_URL)."""
    cwd = tmp_path_factory.mktemp("grants-apply")
    Cli(None, cwd).ok("init", store=False, env={"ATLAS_STORE_URL": secure_node.admin_url(secure_keyspace)}, timeout=300)
    return _private(cwd / "admin-url", secure_node.admin_url(secure_keyspace)), cwd


def test_apply_creates_the_role_grants_once_and_the_role_works(secure_node, secure_keyspace, admin):
    url_file, cwd = admin
    role = f"applied_{uuid.uuid4().hex[:8]}"
    password_file = _private(cwd / f"{role}.password", PASSWORD)
    cli = Cli(None, cwd)
    try:
        printed = cli.json("grants", "--name", role, "--store-file", str(url_file), store=False)["grants"]
        first = cli.json("grants", "--apply", "--name", role, "--password-file", str(password_file),
                         "--store-file", str(url_file), store=False)
        assert first["role_created"] is True
        assert [(g["cql"], g["outcome"]) for g in first["grants"]] == [(g["cql"], "granted") for g in printed]
        again = cli.ok("grants", "--apply", "--name", role, "--password-file", str(password_file), store=False,
                       env={"ATLAS_STORE_URL": secure_node.admin_url(secure_keyspace)})
        assert "exists (its password unchanged)" in again.stdout and "-- 0 granted," in again.stdout, again.stdout
        assert all(line.startswith(("--", "already held")) for line in again.stdout.splitlines()), again.stdout
        for result in (again,):
            assert PASSWORD not in result.stdout + result.stderr
        # the role logs in and has what the sweeper needs (status reads, draws a fresh timestamp)
        status = Cli(None, cwd).ok("status", "--json", store=False,
                                   env={"ATLAS_STORE_URL": secure_node.url(role, PASSWORD, secure_keyspace)}, timeout=180)
        assert json.loads(status.stdout)["number_of_shards"] >= 1
    finally:
        secure_node.cql(f"DROP ROLE IF EXISTS {role}")


def test_apply_refuses_secrets_on_the_command_line_and_open_files(secure_node, secure_keyspace, admin):
    url_file, cwd = admin
    role = f"refused_{uuid.uuid4().hex[:8]}"
    on_line = Cli(secure_node.admin_url(secure_keyspace), cwd).run("grants", "--apply", "--name", role)
    assert on_line.returncode == 2 and "ATLAS_STORE_URL" in on_line.stderr and "--store-file" in on_line.stderr
    assert secure_node.admin_password not in on_line.stderr + on_line.stdout
    cli = Cli(None, cwd)
    no_password = cli.run("grants", "--apply", "--name", role, "--store-file", str(url_file), store=False)
    assert no_password.returncode == 2 and f"role {role} does not exist" in no_password.stderr, no_password.stderr
    readable = _private(cwd / "readable.password", PASSWORD, 0o644)
    refused = cli.run("grants", "--apply", "--name", role, "--password-file", str(readable), "--store-file",
                      str(url_file), store=False)
    assert refused.returncode == 2 and "mode 644" in refused.stderr and PASSWORD not in refused.stderr
    open_url = _private(cwd / "open-url", secure_node.admin_url(secure_keyspace), 0o644)
    status = cli.run("status", "--store-file", str(open_url), store=False)
    assert status.returncode == 2 and "mode 644" in status.stderr and secure_node.admin_password not in status.stderr
