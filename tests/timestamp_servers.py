"""The suite's timestamp servers: every Cassandra store the tests initialise is adopted and served by a timestamp
server (issue 45: the cell only on the embedded store).

* The local node: its two instances (``scripts/timestamps.sh``, started on first use of the node by
  ``cassandra_node``: :func:`ensure_local_servers`), named for every process of the run by
  ``$ATLAS_TIMESTAMP_SERVERS`` (tests/conftest.py).
* Every other cluster: its tier starts two instances of its own for it (:func:`serving`, around the fixture that
  starts the cluster): the 3-node cluster (tests/cluster), the secured node and the secured 3-node cluster (as the
  administrator's role with its password, over TLS, and serving mutual TLS themselves: tests/integration/security), the
  two datacenters
  (tests/datacenters, a home keyspace replicated in both), the reliability tier's private node. Inside the block
  ``$ATLAS_TIMESTAMP_SERVERS`` names them, so the stores the tier initialises on that cluster - through
  ``AtlasStore``, the CLI, the DAGs, the demo - are adopted at ``init`` and served by them.
* The guard: :func:`serving` registers a :class:`CellDraws` for its cluster, and :func:`check_served` (called by
  the tier's ``pytest_runtest_call`` hook after each test's body) fails the test when a keyspace of an active
  cluster shows that its cell handed out a timestamp - a store initialised without the servers, or one that drew
  before it was adopted. A store adopted at ``init`` holds the marker with the bound 0 (nothing was ever drawn
  from its cell, and the cell refuses it from then on), so each keyspace is cleared once and never read again.
  Every tier with a cluster of its own calls it (tests/cluster, tests/integration/security, tests/datacenters,
  tests/reliability). The local node has no guard: the suite's two lanes share it, so one lane's guard would see
  the other's stores, among them those that draw from their cell on purpose (below, and the previous release's
  store in tests/integration/timestamps/test_upgrade.py); its stores are adopted by ``init`` as everywhere.
* :func:`without_local_servers`: a store that must stay on its cell on purpose (the refusal of a store never
  adopted, tests/integration/timestamps/test_server.py).
"""
from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from airflow_atlas.encoding import from_fixed_long
from airflow_atlas.errors import AtlasError
from airflow_atlas.timestamps.addresses import SERVERS_ENV
from airflow_atlas.timestamps.record import BOUND_CELL, TIMESTAMP_TABLE, marker_bound
from airflow_atlas.timestamps.tls import CA_ENV, CERT_ENV, KEY_ENV
from devkit import timestamps as devkit_timestamps
from devkit.airflow import free_port
from devkit.timestamps import ServerProcess, ServerTls, running_servers
from tests.tls_material import Material, make_material

if TYPE_CHECKING:
    from airflow_atlas.kvs.api import KeyValueService
    from airflow_atlas.kvs.cassandra import CassandraKeyValueService

LOCAL_SERVERS = ",".join(f"127.0.0.1:{port}" for port in devkit_timestamps.LOCAL_PORTS)
HOME = "atlas_timestamps_home"
"""The keyspace a tier's instances are started for (they serve every adopted keyspace of the cluster on request)."""


def ensure_local_servers() -> None:
    """Start the local instances unless they run (under a file lock: both lanes of the suite may ask at once)."""
    lock_path = f"{os.environ.get('TMPDIR', '/tmp')}/airflow-atlas-timestamps.lock"
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        code = devkit_timestamps.main(["start"])
    if code != 0:
        raise RuntimeError("could not start the local timestamp servers (scripts/timestamps.sh start)")


@contextmanager
def without_local_servers() -> Iterator[None]:
    """Inside the block, stores initialised by this process and its children are not adopted (they keep their
    cell): only for a test of the cell path itself."""
    previous = os.environ.pop(SERVERS_ENV, None)
    try:
        yield
    finally:
        if previous is not None:
            os.environ[SERVERS_ENV] = previous


SERVED = "served"
""":func:`cell_verdict` of a store adopted before its cell handed out anything."""


def cell_verdict(kvs: KeyValueService) -> str | None:
    """What a Cassandra store's ``_timestamp`` cell shows: :data:`SERVED`; None (no draw yet: created a moment
    ago - ``init`` adopts it next - or initialised and never drawn from); else how its cell handed out timestamps
    (never adopted, or adopted after drawing)."""
    value = kvs.get_lwt(TIMESTAMP_TABLE, [BOUND_CELL], serial=False).get(BOUND_CELL)
    if value is None:
        return None
    bound = marker_bound(value)
    if bound == 0:
        return SERVED
    if bound is not None:
        return f"adopted after its cell handed out timestamps up to {bound}"
    return f"never adopted: its cell handed out timestamps up to {from_fixed_long(value)}"


class CellDraws:
    """Which keyspaces of one cluster have handed out timestamps from their cell since this object was made.
    ``home_url``: a store URL of the cluster (with the credentials that may read every keyspace: the
    administrator's on a secured cluster); the other keyspaces are read on its session, as a timestamp server
    reads the stores it serves. The keyspaces that exist when it is made are not this run's (a developer's
    cluster kept running, a run killed before its drops): they are never looked at."""

    QUERY = "SELECT keyspace_name FROM system_schema.tables WHERE table_name = 'atlas_timestamp' ALLOW FILTERING"

    def __init__(self, home_url: str):
        self.home_url = home_url
        self._kvs: CassandraKeyValueService | None = None
        self._cleared: set[str] = {row[0] for row in self._stores()}

    def _session_kvs(self) -> CassandraKeyValueService:
        from airflow_atlas.kvs.address import StoreAddress
        from airflow_atlas.kvs.cassandra import CassandraKeyValueService
        from airflow_atlas.kvs.opening import open_kvs

        if self._kvs is None:
            kvs = open_kvs(StoreAddress.from_url(self.home_url), must_exist=True)
            assert isinstance(kvs, CassandraKeyValueService), kvs.describe()
            self._kvs = kvs
        return self._kvs

    def drawn(self) -> dict[str, str]:
        """Keyspace -> what its ``_timestamp`` cell shows, for each keyspace (not cleared before) that drew from
        its cell: a cell bound (never adopted) or a marker whose bound at adoption is above 0."""
        from airflow_atlas.kvs.cassandra import CassandraKeyValueService

        rows = self._stores()
        home = self._session_kvs()
        session = home.session
        found: dict[str, str] = {}
        for row in rows:
            keyspace = row[0]
            if keyspace in self._cleared:
                continue
            try:
                kvs = CassandraKeyValueService(session, keyspace, consistency=home.consistency, create_registry=False)
                verdict = cell_verdict(kvs)
            except AtlasError:  # dropped meanwhile, or not (yet) a store: nothing drawn from it
                continue
            if verdict == SERVED:
                self._cleared.add(keyspace)  # adopted before any draw: its cell never hands out again
            elif verdict is not None:
                found[keyspace] = verdict
        return found

    def _stores(self) -> list:
        """The rows (keyspace_name,) of every keyspace holding an Atlas ``_timestamp`` table."""
        try:
            return list(self._session_kvs().session.execute(self.QUERY, timeout=60))
        except Exception:  # a session that lost the cluster (a drill stopped its nodes) may still back off: anew
            self.close()
            return list(self._session_kvs().session.execute(self.QUERY, timeout=60))

    def close(self) -> None:
        if self._kvs is not None:
            self._kvs.close()
            self._kvs = None


_ACTIVE: list[CellDraws] = []


def check_served(test: str) -> None:
    """Fail ``test`` when a store of a cluster a tier serves (:func:`serving`) drew from its cell."""
    problems = [f"{keyspace} ({guard.home_url.split('@')[-1].split('/')[0]}): {what}"
                for guard in list(_ACTIVE) for keyspace, what in sorted(guard.drawn().items())]
    assert not problems, (
        f"{test}: every Cassandra store of the suite must be served by a timestamp server (issue 45), but "
        + "; ".join(problems) + " - initialise it inside the tier's `serving` block (tests/timestamp_servers.py)"
    )


_TLS: list[Material | None] = []


def tier_tls() -> Material | None:
    """The TLS material of the innermost :func:`serving` block (None: plaintext, or no block): a tier's test that
    starts instances of its own serves them with it (:func:`server_tls`: mutual TLS), so that the tier's clients
    (``$ATLAS_TIMESTAMP_TLS_CA``, ``_CERT``, ``_KEY``) verify them and are accepted by them."""
    return _TLS[-1] if _TLS else None


def server_tls(material: Material) -> ServerTls:
    """How a tier's instances serve with ``material``: its server certificate, and clients' certificates required
    signed by its CA (mutual TLS: the servers authenticate their clients too)."""
    return ServerTls(material.cert, material.key, client_ca=material.ca)


_TLS_ENV = (CA_ENV, CERT_ENV, KEY_ENV)


def _restore(name: str, previous: str | None) -> None:
    if previous is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = previous


@contextmanager
def serving(home_url: str, log_dir: Path, *, tls: bool = False) -> Iterator[list[ServerProcess]]:
    """Two timestamp server instances for the cluster ``home_url`` is on (its home store initialised and adopted
    there), named by ``$ATLAS_TIMESTAMP_SERVERS`` inside the block: the stores a tier initialises on that cluster
    are served by them, and :func:`check_served` watches the cluster's keyspaces. ``tls``: mutual TLS - they serve
    TLS with a certificate of a CA of their own (tests/tls_material.py) and require a client certificate that CA
    signed; inside the block ``$ATLAS_TIMESTAMP_TLS_CA`` names the CA and ``$ATLAS_TIMESTAMP_TLS_CERT`` /
    ``_KEY`` a client certificate and key of it (the secured tier: TLS everywhere, every client authenticated)."""
    addresses = [f"127.0.0.1:{free_port()}" for _ in range(2)]
    previous = os.environ.get(SERVERS_ENV)
    previous_tls = {name: os.environ.get(name) for name in _TLS_ENV}
    material = make_material(log_dir / "tls") if tls else None
    with running_servers(home_url, addresses, log_dir,
                         tls=server_tls(material) if material else None) as servers:
        guard = CellDraws(home_url)  # before the tier's first store: what exists now is not the tier's
        os.environ[SERVERS_ENV] = ",".join(addresses)
        for name, value in zip(_TLS_ENV, (material.ca, material.client_cert, material.client_key) if material
                               else (None, None, None), strict=True):
            if value is not None:
                os.environ[name] = str(value)
            else:
                os.environ.pop(name, None)
        _ACTIVE.append(guard)
        _TLS.append(material)
        try:
            yield servers
        finally:
            _TLS.pop()
            _ACTIVE.remove(guard)
            guard.close()
            _restore(SERVERS_ENV, previous)
            for name, value in previous_tls.items():
                _restore(name, value)
