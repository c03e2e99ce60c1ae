"""devkit/cassandra/ring.py: a ring is settled when describecluster shows every node live, none joining,
moving, leaving or unreachable, and one schema version all of them hold."""
from __future__ import annotations

from devkit.cassandra.ring import cluster_settled

SETTLED = """Cluster Information:
\tName: airflow-atlas-cluster
\tSnitch: org.apache.cassandra.locator.SimpleSnitch
\tDynamicEndPointSnitch: enabled
\tPartitioner: org.apache.cassandra.dht.Murmur3Partitioner
\tSchema versions:
\t\t6b4c1b8e-1b9b-3a4e-9b1c-4f2d6e0c7a11: [127.0.0.2, 127.0.0.3, 127.0.0.4]

Stats for all nodes:
\tLive: 3
\tJoining: 0
\tMoving: 0
\tLeaving: 0
\tUnreachable: 0
"""


def test_a_settled_ring():
    assert cluster_settled(SETTLED, 3)
    assert not cluster_settled(SETTLED, 4)


def test_a_node_down_joining_or_unreachable_is_not_settled():
    assert not cluster_settled(SETTLED.replace("Live: 3", "Live: 2"), 3)
    assert not cluster_settled(SETTLED.replace("Joining: 0", "Joining: 1"), 3)
    assert not cluster_settled(SETTLED.replace("Unreachable: 0", "Unreachable: 1"), 3)
    assert not cluster_settled("", 3)


def test_two_schema_versions_or_a_node_missing_from_the_version_are_not_settled():
    split = SETTLED.replace("127.0.0.3, 127.0.0.4]", "127.0.0.3]\n\t\t7b4c1b8e-1b9b-3a4e-9b1c-4f2d6e0c7a11: [127.0.0.4]")
    assert not cluster_settled(split, 3)
    assert not cluster_settled(SETTLED.replace(", 127.0.0.4]", "]"), 3)
