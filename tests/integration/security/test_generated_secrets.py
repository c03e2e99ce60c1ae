"""The secrets and keys ``scripts/cassandra.sh secure ...`` (devkit/cassandra/secured.py) generates are readable by their owner only (issue 32
item 5: the CA's keystore ``ca.p12``, which holds the CA's private key, was mode 0644), and keytool never
gets a store password on its command line (``-storepass:file``)."""
from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest

from devkit.cassandra.secured import make_tls
from devkit.cassandra.topology import SecureLayout

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


def test_a_fresh_ca_and_node_keystore_are_private(tmp_path, monkeypatch):
    """The material `secure start` makes first (devkit.cassandra.secured.make_tls) in a directory of its own,
    keytool's every argument recorded (a wrapper first on PATH runs the real one)."""
    keytool = shutil.which("keytool")
    assert keytool, "keytool (Java 17) is required"
    calls = tmp_path / "keytool.calls"
    wrapper = tmp_path / "bin" / "keytool"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >>"{calls}"\nexec "{keytool}" "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{wrapper.parent}:{os.environ['PATH']}")
    make_tls(SecureLayout(tmp_path / "secure"), "127.0.0.50", lambda message: None)
    _assert_private(tmp_path / "secure")
    assert (tmp_path / "secure" / "ca" / "ca.pem").read_text().startswith("-----BEGIN CERTIFICATE-----")
    arguments = [line.split() for line in calls.read_text().splitlines()]
    assert len(arguments) >= 5 and all("-storepass:file" in args for args in arguments)
    assert not any(arg.startswith("-storepass") and arg != "-storepass:file" for args in arguments for arg in args), \
        "a keytool store password on a command line"


def test_the_secured_node_files_are_private(secure_node):
    """The running secured node's files (an older CA keystore is made 0600 at start); its settings file
    holds the keystore password."""
    secure_dir = secure_node.ca.parent.parent
    _assert_private(secure_dir)
    config = secure_dir / "node" / "cassandra.yaml"
    assert _mode(config) == 0o600
