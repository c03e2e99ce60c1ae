"""atlas_scrub: hard deletes are physically removed once no open transaction can read them."""
from __future__ import annotations

import pytest

from tests.airflow.conftest import load_dag, task_states, xcom

pytestmark = pytest.mark.airflow


def test_scrub_removes_hard_deleted_data_and_announces_the_table(embedded_store):
    from airflow_atlas.kvs.api import Cell

    store, _ = embedded_store
    store.create_table("secrets", "THOROUGH")
    cells = [Cell(f"user{i}".encode(), b"ssn") for i in range(5)]
    store.transactions.run(lambda txn: txn.put("secrets", {c: b"123-45-6789" for c in cells}))
    store.transactions.run(lambda txn: txn.delete("secrets", cells), hard_delete=True)
    assert store.scrub_queue.pending()

    run = load_dag("atlas_scrub").test()
    assert str(run.state) == "success", task_states(run)
    result = xcom(run, "scrub")
    assert result["entries_scrubbed"] >= 5 and result["tables"]["secrets"] == 5
    assert not store.scrub_queue.pending()
    assert all(value != b"123-45-6789" for _, _, value in store.kvs.scan("secrets"))
    assert xcom(run, "publish_swept_tables")["secrets"]["tombstones"] == 5
