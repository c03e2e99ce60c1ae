"""The whole suite's two groups, which ``scripts/test.sh`` runs at once with pytest-xdist (``-n 2 --dist
loadgroup``): each group runs on one worker, in collection order, as one pytest process would.

Split so that their tiers' serial times (``test-artifacts/durations/``) are about equal; what they share is what
every tier already shares one test at a time (the local node, each test in a keyspace of its own; the Spark
master, which queues a second application). Pure: nothing here starts or imports a service.
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

SERVERS = ("tests/integration/security", "tests/deploy", "tests/datacenters", "tests/integration/kvs",
           "tests/integration/foundation", "tests/integration/sweep/queue", "tests/integration/timestamps")
"""The tiers of the ``servers`` group: their own clusters and deployment, and the store's integration tiers."""
MAIN = "main"
"""Every other test's group."""


def group_of(path: str) -> str:
    """The group of the test file at ``path`` (relative to the repository, ``/``-separated)."""
    return "servers" if any(path == tier or path.startswith(tier + "/") for tier in SERVERS) else MAIN


def mark_groups(items: Sequence[pytest.Item], root: Path) -> None:
    """Mark each test with its group (``xdist_group``); called by tests/conftest.py's collection hook, which must
    run before pytest-xdist's own (``tryfirst``): that one reads the marks."""
    for item in items:
        item.add_marker(pytest.mark.xdist_group(group_of(item.path.relative_to(root).as_posix())))
