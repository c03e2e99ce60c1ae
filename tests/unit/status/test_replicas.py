"""The status document's datacenter warnings (airflow_atlas/status/replicas.py). Pure logic, no services."""
from __future__ import annotations

from airflow_atlas.kvs.consistency import ConsistencyPolicy
from airflow_atlas.status.replicas import datacenter_warnings


def test_a_datacenter_down_is_named_with_what_it_stops():
    (message,) = datacenter_warnings({"dc2": ["127.0.0.23"]}, ConsistencyPolicy())
    assert message.startswith("datacenter dc2: 1 replica(s) down (127.0.0.23)")
    assert "sweep is paused" in message and "ALL" in message and "EACH_QUORUM" in message


def test_nothing_down_no_warning_and_weak_levels_say_nothing_waits():
    assert datacenter_warnings({}, ConsistencyPolicy()) == []
    weak = ConsistencyPolicy(sweep_delete="EACH_QUORUM", sentinel="EACH_QUORUM", abort_delete="EACH_QUORUM",
                             data_write="LOCAL_QUORUM", queue_write="LOCAL_QUORUM")
    (message,) = datacenter_warnings({"dc2": ["127.0.0.23"]}, weak)
    assert "no operation of this store waits for it" in message
