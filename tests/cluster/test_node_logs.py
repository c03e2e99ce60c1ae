"""The cluster's nodes do not busy-loop while a peer is missing. A node that starts before the rest of the
ring (every ``cluster start`` starts nodes one after another) retries Cassandra's default-role setup until
all nodes are up; ``scripts/cassandra.sh`` once set that retry delay to 0, so the first nodes logged about
13,000 lines a second, took a core and rolled system.log over every few seconds. On a loaded 2-core CI
machine the roll-over then carried away the "listening for CQL clients" line the start script waited for.

Read from each node's own log, since its last start: the retries come at most one per 5 seconds (Cassandra's
default delay is 10 s), and the log did not roll over for size since the start. It may have rolled over at
midnight (logback's daily roll-over into ``system.log.<date>.<i>.zip``, see scripts/cassandra/conf/logback.xml):
the start and the lines after it are then read from the rolled zip(s) too (tests/cluster/node_logs.py)."""
from __future__ import annotations

from datetime import datetime

import pytest

from tests.cluster.conftest import NODES
from tests.cluster.node_logs import log_files, read_since_last

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(300)]

NODE_START = "Configuration location: "  # the first line a starting node logs
ROLE_SETUP_RETRY = "Setup task failed with error, rescheduling"
MIN_SECONDS_BETWEEN_RETRIES = 5.0


def _timestamp(line: str) -> datetime:
    """``INFO  [thread] 2026-11-25 17:42:03,120 File.java:1 - message`` -> its date and time."""
    after_thread = line.split("] ", 1)[1]
    return datetime.strptime(after_thread[:23], "%Y-%m-%d %H:%M:%S,%f")


@pytest.mark.parametrize("node", range(1, NODES + 1))
def test_a_node_retries_its_role_setup_slowly_since_its_start(cassandra_cluster, node):
    path = cassandra_cluster.logfile(node)
    log = read_since_last(path, NODE_START)
    assert log is not None, (
        f"node{node}'s log no longer holds the node's start: it rolled away since then "
        f"(files: {', '.join(f.path.name for f in log_files(path))})"
    )
    assert log.size_roll_overs == 0, (
        f"node{node}'s log rolled over for size {log.size_roll_overs} time(s) since its start: "
        f"{', '.join(f.path.name for f in log.files)}"
    )
    retries = [_timestamp(line) for line in log.lines if ROLE_SETUP_RETRY in line]
    span = (retries[-1] - retries[0]).total_seconds() if retries else 0.0
    assert len(retries) <= 2 + span / MIN_SECONDS_BETWEEN_RETRIES, (
        f"node{node} retried its role setup {len(retries)} times in {span:.1f} s since its start "
        f"(at most one per {MIN_SECONDS_BETWEEN_RETRIES:.0f} s expected)"
    )
