"""Whether a cluster's ring is settled, read from ``nodetool describecluster``'s output. Pure."""
from __future__ import annotations

import re

_SCHEMA_VERSION = re.compile(r"^\s+[0-9a-f-]{36}: \[")


def cluster_settled(describecluster: str, nodes: int) -> bool:
    """``nodetool describecluster``'s output shows ``nodes`` nodes live, none joining, leaving, moving or
    unreachable, and one schema version that all of them hold. Up/Normal alone is not enough: a node restarted
    a moment ago is Up/Normal in gossip before it has pulled the schema, and a keyspace created then is missing
    on it for a while (INCOMPATIBLE_SCHEMA from that replica, seen in CI after a test's node restart)."""
    lines = describecluster.split("\n")
    if not any(re.fullmatch(rf"\s*Live: {nodes}", line) for line in lines):
        return False
    for state in ("Joining", "Moving", "Leaving", "Unreachable"):
        if not any(re.fullmatch(rf"\s*{state}: 0", line) for line in lines):
            return False
    if "Schema versions:" not in describecluster:
        return False
    block, inside = [], False
    for line in lines:
        if not inside and "Schema versions:" in line:
            inside = True
        if inside:
            block.append(line)
            if line == "" and len(block) > 1:
                inside = False
    versions = [line for line in block if _SCHEMA_VERSION.match(line)]
    return len(versions) == 1 and versions[0].count(",") == nodes - 1
