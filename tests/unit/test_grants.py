"""The least-privilege grants (pure; the real node enforces them in tests/integration/security)."""
from __future__ import annotations

import pytest

from airflow_atlas.errors import InvalidInputError
from airflow_atlas.grants import (
    ADMIN_ONLY,
    REPAIR_HISTORY_TABLE,
    SWEEPER_MODIFY,
    THREAD_POOLS_TABLE,
    admin_grants,
    sweeper_grants,
)
from tests.conftest import REPO_ROOT

ALL_INTERNAL = [*SWEEPER_MODIFY, *ADMIN_ONLY]


def test_sweeper_reads_the_keyspace_and_modifies_only_what_it_writes():
    grants = sweeper_grants("ks", [*ALL_INTERNAL, "orders", "users"])
    assert {g.permission for g in grants} == {"SELECT", "MODIFY"}
    assert [g.resource for g in grants if g.permission == "SELECT"] == ["KEYSPACE ks", f"TABLE {REPAIR_HISTORY_TABLE}",
                                                                            f"TABLE {THREAD_POOLS_TABLE}"]
    modified = {g.resource for g in grants if g.permission == "MODIFY"}
    assert modified == {f"TABLE ks.atlas{t}" for t in SWEEPER_MODIFY} | {"TABLE ks.orders", "TABLE ks.users"}
    assert not any(f"atlas{t}" in r for t in ADMIN_ONLY for r in modified)
    assert all(g.why for g in grants)
    assert grants[0].cql("sweeper") == "GRANT SELECT ON KEYSPACE ks TO sweeper;"


def test_only_tables_of_the_store_are_named():
    """Cassandra refuses a grant on a table that does not exist (a v2 store has no _transactions)."""
    grants = sweeper_grants("ks", ["_timestamp"])
    assert [g.resource for g in grants] == ["KEYSPACE ks", "TABLE ks.atlas_timestamp", f"TABLE {REPAIR_HISTORY_TABLE}",
                                         f"TABLE {THREAD_POOLS_TABLE}"]


def test_the_sweeper_may_read_the_repair_history():
    """Compaction's repair guard reads system_distributed.parent_repair_history on a store with replicas
    (issue 32 item 1: without this grant atlas_compaction never compacted on RF 3)."""
    from airflow_atlas.airflow.hooks import repair

    grants = sweeper_grants("ks", [])
    assert ("SELECT", "TABLE system_distributed.parent_repair_history") in {(g.permission, g.resource) for g in grants}
    assert repair.REPAIR_HISTORY_TABLE == REPAIR_HISTORY_TABLE  # the table the guard reads


def test_admin_has_ddl_on_the_keyspace_only():
    assert {(g.permission, g.resource) for g in admin_grants("ks")} == {
        (p, "KEYSPACE ks") for p in ("CREATE", "ALTER", "DROP", "SELECT", "MODIFY")
    }


@pytest.mark.parametrize("keyspace", ["", "ks; DROP KEYSPACE x", "1ks", 'k"s'])
def test_identifiers_are_checked(keyspace):
    with pytest.raises(InvalidInputError, match="not a plain CQL identifier"):
        sweeper_grants(keyspace, [])


def test_security_doc_names_every_table():
    text = (REPO_ROOT / "docs" / "SECURITY.md").read_text()
    for table in ALL_INTERNAL:
        assert f"`atlas{table}`" in text, table
    assert f"`{REPAIR_HISTORY_TABLE}`" in text


def test_the_sweeper_role_may_publish_the_application_latency():
    """Every transaction client publishes into _app_latency (issue 31 item 1): the role that runs
    transactions needs MODIFY on it, and `grants` prints it once the table exists (after `init`)."""
    from airflow_atlas.transactions.latency_table import TABLE

    assert TABLE in SWEEPER_MODIFY
    assert ("MODIFY", f"TABLE ks.atlas{TABLE}") in {(g.permission, g.resource) for g in sweeper_grants("ks", [TABLE])}
