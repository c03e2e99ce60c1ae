"""The suite's timestamp servers: every store the tests initialise on the local node is adopted and served by the
two local instances (``scripts/timestamps.sh``, started on first use of the node by ``cassandra_node``), named
for every process of the run by ``$ATLAS_TIMESTAMP_SERVERS``. A tier on another cluster starts two instances
of its own for it (:func:`serving`: the 3-node cluster, the secured node and cluster); the two-datacenter tier
runs without (:func:`without_local_servers`: its stores keep their cell)."""
from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from airflow_atlas.timestamps.addresses import SERVERS_ENV
from devkit import timestamps as devkit_timestamps
from devkit.airflow import free_port
from devkit.timestamps import ServerProcess, running_servers

LOCAL_SERVERS = ",".join(f"127.0.0.1:{port}" for port in devkit_timestamps.LOCAL_PORTS)


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
    """Inside the block, stores initialised by this process and its children are not adopted by the local node's
    servers (they belong to another cluster)."""
    previous = os.environ.pop(SERVERS_ENV, None)
    try:
        yield
    finally:
        if previous is not None:
            os.environ[SERVERS_ENV] = previous


@contextmanager
def serving(home_url: str, log_dir: Path) -> Iterator[list[ServerProcess]]:
    """Two timestamp server instances for the cluster ``home_url`` is on (its home store initialised and adopted
    there), named by ``$ATLAS_TIMESTAMP_SERVERS`` inside the block: the stores a tier initialises on that cluster
    are served by them."""
    addresses = [f"127.0.0.1:{free_port()}" for _ in range(2)]
    previous = os.environ.get(SERVERS_ENV)
    with running_servers(home_url, addresses, log_dir) as servers:
        os.environ[SERVERS_ENV] = ",".join(addresses)
        try:
            yield servers
        finally:
            if previous is None:
                os.environ.pop(SERVERS_ENV, None)
            else:
                os.environ[SERVERS_ENV] = previous
