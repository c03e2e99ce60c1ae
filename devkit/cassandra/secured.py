"""The secured nodes' material and roles: generated secrets (mode 0600), the local CA and one certificate per
node address made with keytool, the JMX password and access files, nodetool's password file, the
replacement of the default superuser by ``atlas_admin``, and ``secure env``. Every step keeps what exists
(keys, certificates, passwords): safe to re-run."""
from __future__ import annotations

import os
import secrets
import shutil
import string
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from devkit.cassandra.spec import ScriptError
from devkit.cassandra.topology import (
    JMX_USER,
    SECURE_ADMIN,
    SECURE_HOST,
    SECURE_JMX_PORT,
    SecureLayout,
)

CERT_DAYS = 3650
_ALPHABET = string.ascii_letters + string.digits


@contextmanager
def _private_files() -> Iterator[None]:
    """umask 077 for what is made inside (this process and keytool): mode 0600 files."""
    old = os.umask(0o077)
    try:
        yield
    finally:
        os.umask(old)


def new_secret(path: Path) -> None:
    """A random password of 32 letters and digits in ``path`` (mode 0600), unless the file has content."""
    if path.exists() and path.stat().st_size > 0:
        return
    tmp = path.with_name(path.name + ".tmp")
    with _private_files():
        tmp.write_text("".join(secrets.choice(_ALPHABET) for _ in range(32)))
    tmp.replace(path)


def read_secret(path: Path) -> str:
    """A secret file's content without trailing newlines (as a shell's ``$(cat file)``)."""
    return path.read_text().rstrip("\n")


def _keytool(args: Sequence[str], failure: str, *, stdin: bytes | None = None) -> bytes:
    done = subprocess.run(["keytool", *args], input=stdin if stdin is not None else b"", capture_output=True)
    if done.returncode != 0:
        raise ScriptError(failure)
    return done.stdout


def make_tls(layout: SecureLayout, host: str, say: Callable[[str], None]) -> None:
    """The local CA (once) and the certificate of ``host``, signed by it (once per address: subjectAltName
    IP:host, so clients verify the hostname). Every key store is made mode 0600 (the CA's holds the CA's private
    key; ca.pem, the certificate clients pin, is public); keytool reads the store passwords from their files
    (``-storepass:file``), never from its command line. A CA keystore of mode 0644 is made 0600 here."""
    if shutil.which("keytool") is None:
        raise ScriptError("keytool (Java 17) is required for the secured node")
    layout.ca_dir.mkdir(parents=True, exist_ok=True)
    layout.secrets.mkdir(parents=True, exist_ok=True)
    layout.secrets.chmod(0o700)
    ca_pass_file, ks_pass_file = layout.secrets / "ca.storepass", layout.secrets / "keystore.password"
    new_secret(ca_pass_file)
    new_secret(ks_pass_file)
    capass = ["-storepass:file", str(ca_pass_file)]
    kspass = ["-storepass:file", str(ks_pass_file)]
    ca_store = ["-keystore", str(layout.ca_keystore)]
    if not (layout.ca_pem.exists() and layout.ca_pem.stat().st_size > 0):
        say(f"making the local CA in {layout.ca_dir}")
        layout.ca_keystore.unlink(missing_ok=True)
        with _private_files():
            _keytool(["-genkeypair", "-alias", "ca", "-keyalg", "RSA", "-keysize", "2048", "-validity", str(CERT_DAYS),
                      "-dname", "CN=airflow-atlas local CA", "-ext", "bc:c", *ca_store, "-storetype", "PKCS12",
                      *capass], "keytool could not make the CA")
        pem = _keytool(["-exportcert", "-rfc", "-alias", "ca", *ca_store, *capass],
                       "keytool could not export the CA certificate")
        tmp = layout.ca_pem.with_name("ca.pem.tmp")
        tmp.write_bytes(pem)
        tmp.replace(layout.ca_pem)
    layout.ca_keystore.chmod(0o600)
    keystore = layout.keystore(host)
    if keystore.exists() and keystore.stat().st_size > 0:
        return
    say(f"making the certificate of {host} (signed by the local CA)")
    tmp, crt = keystore.with_name(keystore.name + ".tmp"), keystore.with_name(keystore.name + ".crt")
    tmp.unlink(missing_ok=True)
    node_store = ["-keystore", str(tmp)]
    with _private_files():
        _keytool(["-genkeypair", "-alias", "node", "-keyalg", "RSA", "-keysize", "2048", "-validity", str(CERT_DAYS),
                  "-dname", f"CN={host}", *node_store, "-storetype", "PKCS12", *kspass],
                 "keytool could not make the node key")
        request = _keytool(["-certreq", "-alias", "node", *node_store, *kspass],
                           "keytool could not sign the node certificate")
        signed = _keytool(["-gencert", "-alias", "ca", *ca_store, *capass, "-validity", str(CERT_DAYS),
                           "-ext", f"SAN=IP:{host}", "-ext", "ku:c=digitalSignature,keyEncipherment",
                           "-ext", "eku=serverAuth", "-rfc"], "keytool could not sign the node certificate",
                          stdin=request)
        crt.write_bytes(signed)
        failure = "keytool could not import the signed node certificate"
        _keytool(["-importcert", "-noprompt", "-alias", "ca", "-file", str(layout.ca_pem), *node_store, *kspass],
                 failure)
        _keytool(["-importcert", "-noprompt", "-alias", "node", "-file", str(crt), *node_store, *kspass], failure)
    crt.unlink()
    tmp.chmod(0o600)
    tmp.replace(keystore)


def make_jmx_files(layout: SecureLayout) -> None:
    """JMX password and access files (the JVM insists on mode 0600) and nodetool's password file."""
    secret = layout.secrets / "jmx.secret"
    new_secret(secret)
    password = read_secret(secret)
    with _private_files():
        (layout.secrets / "jmx.password").write_text(f"{JMX_USER} {password}\n")
        (layout.secrets / "jmx.access").write_text(f"{JMX_USER} readwrite\n")
        (layout.secrets / "nodetool.password").write_text(f"{JMX_USER} {password}\n")


def secure_env(layout: SecureLayout, cluster_hosts: Sequence[str]) -> str:
    """``secure env``: where the secured nodes are and their credentials' files, as shell variables."""
    return "".join(f"{name}={value}\n" for name, value in (
        ("ATLAS_SECURE_HOST", SECURE_HOST),
        ("ATLAS_SECURE_CQL_PORT", 9042),
        ("ATLAS_SECURE_JMX_PORT", SECURE_JMX_PORT),
        ("ATLAS_SECURE_CA", layout.ca_pem),
        ("ATLAS_SECURE_ADMIN_USER", SECURE_ADMIN),
        ("ATLAS_SECURE_ADMIN_PASSWORD_FILE", layout.admin_password),
        ("ATLAS_SECURE_JMX_USER", JMX_USER),
        ("ATLAS_SECURE_NODETOOL_PASSWORD_FILE", layout.secrets / "nodetool.password"),
        ("ATLAS_SECURE_NODE_DIR", layout.directory / "node"),
        ("ATLAS_SECURE_CLUSTER_HOSTS", ",".join(cluster_hosts)),
    ))


def set_up_roles(layout: SecureLayout, hosts: Sequence[str], timeout: float) -> None:
    """Replaces the default superuser (once): role atlas_admin with a generated password; ``cassandra`` gets a
    random password and loses LOGIN and SUPERUSER. Waits for the role manager's setup
    (superuser_setup_delay_ms). On a cluster, system_auth is replicated to every node first, and every node must
    then authenticate the administrator on its own. Needs cassandra-driver (the project's .venv)."""
    try:
        from cassandra import AuthenticationFailed, InvalidRequest
        from cassandra.auth import PlainTextAuthProvider
        from cassandra.cluster import Cluster, NoHostAvailable, Session
    except ImportError:
        raise ScriptError("the project's .venv is needed to set up roles (run scripts/bootstrap.sh)") from None
    import ssl

    new_secret(layout.admin_password)
    password = layout.admin_password.read_text()
    context = ssl.create_default_context(cafile=str(layout.ca_pem))
    admin = SECURE_ADMIN

    def session_as(user: str, pw: str, contact: Sequence[str] | None = None) -> tuple[Cluster, Session]:
        cluster = Cluster(list(contact or hosts), auth_provider=PlainTextAuthProvider(user, pw), ssl_context=context,
                          ssl_options={"check_hostname": True}, protocol_version=5, connect_timeout=10)
        try:
            return cluster, cluster.connect()
        except BaseException:
            cluster.shutdown()
            raise

    def auth_failed(exc: Exception) -> bool:
        return isinstance(exc, NoHostAvailable) and any(
            isinstance(e, AuthenticationFailed) for e in exc.errors.values())

    deadline = time.monotonic() + timeout
    while True:
        try:
            cluster, session = session_as(admin, password)
            break  # set up already (still make sure the default superuser is disabled, below)
        except NoHostAvailable as exc:
            if not auth_failed(exc):
                raise ScriptError(f"{admin} cannot log in: {exc}") from exc
        try:
            cluster, session = session_as("cassandra", "cassandra")
        except NoHostAvailable as exc:  # the default superuser appears after superuser_setup_delay_ms
            if time.monotonic() > deadline:
                raise ScriptError(f"neither {admin} nor the default superuser can log in: {exc}") from exc
            time.sleep(2)
            continue
        if len(hosts) > 1:  # roles on every node before the first one is made (and repaired after)
            session.execute("ALTER KEYSPACE system_auth WITH replication = {'class': 'SimpleStrategy', "
                            f"'replication_factor': {len(hosts)}}}")
        try:
            session.execute(f"CREATE ROLE {admin} WITH SUPERUSER = true AND LOGIN = true AND PASSWORD = %s",
                            [password])
        except InvalidRequest:  # the role exists with another password (its file was removed): set ours
            time.sleep(5.5)  # Cassandra allows one password change per role every 5 s
            session.execute(f"ALTER ROLE {admin} WITH PASSWORD = %s", [password])
        cluster.shutdown()
        cluster, session = session_as(admin, password)
        session.execute("ALTER ROLE cassandra WITH PASSWORD = %s", [secrets.token_urlsafe(24)])
        break
    session.execute("ALTER ROLE cassandra WITH SUPERUSER = false AND LOGIN = false")
    cluster.shutdown()
    # Every node authenticates on its own (after a restart, system_auth's replicas may still be coming up there).
    for host in hosts if len(hosts) > 1 else []:
        while True:
            try:
                session_as(admin, password, [host])[0].shutdown()
                break
            except NoHostAvailable as exc:
                if time.monotonic() > deadline:
                    raise ScriptError(f"{admin} cannot log in through {host} alone: {exc}") from exc
                time.sleep(2)
    print(f"role {admin} set up; the default superuser can no longer log in", file=sys.stderr)
