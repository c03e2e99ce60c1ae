"""The secrets and keys ``scripts/cassandra.sh secure ...`` generates are readable by their owner only (issue 32
item 5: the CA's keystore ``ca.p12``, which holds the CA's private key, was mode 0644), and keytool never
gets a store password on its command line (``-storepass:file``)."""
from __future__ import annotations

import re
import stat
import subprocess
from pathlib import Path

import pytest

from tests.conftest import CASSANDRA_SCRIPT

pytestmark = pytest.mark.cassandra


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _assert_private(secure_dir: Path) -> None:
    assert _mode(secure_dir / "ca" / "ca.p12") == 0o600, oct(_mode(secure_dir / "ca" / "ca.p12"))
    secrets = secure_dir / "secrets"
    assert _mode(secrets) == 0o700
    files = sorted(secrets.iterdir())
    assert any(f.name.endswith(".p12") for f in files) and any(f.name == "ca.storepass" for f in files), files
    assert {f.name: oct(_mode(f)) for f in files if _mode(f) != 0o600} == {}


def test_a_fresh_ca_and_node_keystore_are_private(tmp_path):
    """secure_tls of the script (the function `secure start` runs first) in a directory of its own."""
    script = CASSANDRA_SCRIPT.read_text()
    functions = script[: script.index('\ncmd="${1:-}"')]  # everything but the command dispatch
    (tmp_path / "functions.sh").write_text(functions)
    made = subprocess.run(
        ["bash", "-c", f'source "{tmp_path / "functions.sh"}" && secure_tls 127.0.0.50'],
        env={"PATH": "/usr/bin:/bin:/usr/local/bin", "ATLAS_SECURE_DIR": str(tmp_path / "secure"),
             "HOME": str(tmp_path)},
        capture_output=True, text=True, timeout=300,
    )
    assert made.returncode == 0, made.stdout + made.stderr
    _assert_private(tmp_path / "secure")
    assert (tmp_path / "secure" / "ca" / "ca.pem").read_text().startswith("-----BEGIN CERTIFICATE-----")
    assert not re.search(r'-storepass "\$', script), "a keytool store password on a command line"


def test_the_secured_node_files_are_private(secure_node):
    """The running secured node's files (an older CA keystore is made 0600 at start); its settings file
    holds the keystore password."""
    secure_dir = secure_node.ca.parent.parent
    _assert_private(secure_dir)
    config = secure_dir / "node" / "cassandra.yaml"
    assert _mode(config) == 0o600
