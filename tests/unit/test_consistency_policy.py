"""The replica-safety settings (airflow_atlas.kvs.consistency): parsing, defaults and the guards. Pure logic."""
from __future__ import annotations

import pytest

from airflow_atlas.config import StoreConfig
from airflow_atlas.errors import InvalidInputError
from airflow_atlas.kvs import consistency as K
from airflow_atlas.kvs.consistency import ConsistencyPolicy, GcGraceGuard, Operation
from airflow_atlas.kvs.url import open_kvs


def test_defaults_per_operation():
    p = ConsistencyPolicy()
    assert {op.value: p.level(op) for op in Operation} == {
        "data_read": "LOCAL_QUORUM",
        "data_write": "LOCAL_QUORUM",
        "queue_write": "LOCAL_QUORUM",
        "sweep_delete": "ALL",
        "sentinel": "ALL",
        "abort_delete": "ALL",
        "queue_cleanup": "LOCAL_QUORUM",
        "lwt_commit": "LOCAL_QUORUM",
        "serial": "SERIAL",
    }
    assert p.allow_weak_sweep_consistency is False
    assert GcGraceGuard().repair_interval_seconds == 864_000
    assert GcGraceGuard().allow_gc_grace_below_repair_interval is False


def test_level_names_are_case_insensitive_and_normalised():
    p = ConsistencyPolicy(data_read=" one ", queue_cleanup="local_one", serial="local_serial")
    assert (p.data_read, p.queue_cleanup, p.serial) == ("ONE", "LOCAL_ONE", "LOCAL_SERIAL")


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("data_read", "FIVE", "consistency_data_read must be one of"),
        ("data_write", "ANY", "not durable"),
        ("data_write", "SERIAL", "consistency_data_write"),
        ("serial", "QUORUM", "consistency_serial must be one of SERIAL, LOCAL_SERIAL"),
        ("lwt_commit", "EACH_QUORUM", "rejects EACH_QUORUM for lightweight transactions"),
        ("queue_write", 3, "consistency_queue_write"),
    ],
)
def test_bad_levels_name_the_setting(field, value, message):
    with pytest.raises(InvalidInputError, match=message):
        ConsistencyPolicy(**{field: value})


@pytest.mark.parametrize("field", ["sweep_delete", "sentinel", "abort_delete"])
@pytest.mark.parametrize("level", ["QUORUM", "LOCAL_QUORUM", "EACH_QUORUM", "ONE"])
def test_lowering_a_sweep_delete_below_all_needs_the_explicit_override(field, level):
    with pytest.raises(InvalidInputError) as info:
        ConsistencyPolicy(**{field: level})
    text = str(info.value)
    assert f"consistency_{field}={level}" in text and "below ALL" in text
    assert "repair" in text and "gc_grace_seconds" in text and "allow_weak_sweep_consistency=true" in text
    p = ConsistencyPolicy(**{field: level}, allow_weak_sweep_consistency="true")
    assert p.level(field) == level and p.allow_weak_sweep_consistency is True


def test_other_operations_may_be_lowered_without_the_override():
    p = ConsistencyPolicy(data_read="ONE", data_write="ONE", queue_write="ONE", queue_cleanup="ONE", lwt_commit="ONE")
    assert p.sweep_delete == "ALL" and p.allow_weak_sweep_consistency is False


def test_each_quorum_is_offered_outside_lwt_commit():
    p = ConsistencyPolicy(data_read="EACH_QUORUM", sweep_delete="EACH_QUORUM", allow_weak_sweep_consistency=True)
    assert p.data_read == "EACH_QUORUM" and p.sweep_delete == "EACH_QUORUM"


def test_flat_settings_round_trip_and_ignore_other_keys():
    settings = {
        "consistency_sweep_delete": "quorum",
        "allow_weak_sweep_consistency": "yes",
        "repair_interval_seconds": "3600",
        "batch_limit": 10,
    }
    policy, guard = K.replica_settings(settings)
    assert policy.sweep_delete == "QUORUM" and policy.allow_weak_sweep_consistency is True
    assert policy.data_read == "LOCAL_QUORUM"
    assert guard.repair_interval_seconds == 3600 and guard.allow_gc_grace_below_repair_interval is False
    assert ConsistencyPolicy.from_settings(policy.to_settings()) == policy
    assert GcGraceGuard.from_settings(guard.to_settings()) == guard
    assert set(policy.to_settings()) | set(guard.to_settings()) == set(K.SETTING_NAMES)


@pytest.mark.parametrize(
    "name, value, message",
    [
        ("allow_weak_sweep_consistency", "maybe", "allow_weak_sweep_consistency must be true or false"),
        ("repair_interval_seconds", 0, "repair_interval_seconds must be between"),
        ("repair_interval_seconds", "ten days", "whole number of seconds"),
        ("repair_interval_seconds", True, "whole number of seconds"),
        ("consistency_nothing", "ALL", "unknown replica-safety setting"),
    ],
)
def test_check_setting_rejects_bad_values(name, value, message):
    with pytest.raises(InvalidInputError, match=message):
        K.check_setting(name, value)


def test_gc_grace_guard():
    guard = GcGraceGuard(repair_interval_seconds=86_400)
    guard.check("t", "CONSERVATIVE", 86_400)
    guard.check("t", "THOROUGH", 10**7)
    guard.check("t", "NOTHING", 0)  # not swept: no sweep tombstones
    guard.check("t", "THOROUGH", None)  # unknown (embedded store)
    with pytest.raises(InvalidInputError) as info:
        guard.check("orders", "THOROUGH", 3600)
    text = str(info.value)
    assert "'orders'" in text and "gc_grace_seconds=3600" in text and "repair_interval_seconds=86400" in text
    assert "resurrection" in text and "allow_gc_grace_below_repair_interval=true" in text
    GcGraceGuard(repair_interval_seconds=86_400, allow_gc_grace_below_repair_interval=True).check("t", "THOROUGH", 0)


def test_resolve_operation():
    assert K.resolve_operation(None, Operation.SWEEP_DELETE, K.WRITE_OPERATIONS, "m") is Operation.SWEEP_DELETE
    assert K.resolve_operation("queue_cleanup", Operation.SWEEP_DELETE, K.WRITE_OPERATIONS, "m") is Operation.QUEUE_CLEANUP
    with pytest.raises(InvalidInputError, match="unknown operation"):
        K.resolve_operation("cleanup", Operation.SWEEP_DELETE, K.WRITE_OPERATIONS, "delete_rows")
    with pytest.raises(InvalidInputError, match="check_and_set cannot run as operation 'data_write'"):
        K.resolve_operation(Operation.DATA_WRITE, Operation.LWT_COMMIT, K.LWT_OPERATIONS, "check_and_set")


def test_store_config_carries_and_validates_the_keys():
    config = StoreConfig().with_text(
        {"consistency_sweep_delete": "quorum", "allow_weak_sweep_consistency": "true", "repair_interval_seconds": "7200"}
    )
    settings = config.replica_settings()
    assert settings["consistency_sweep_delete"] == "QUORUM" and settings["allow_weak_sweep_consistency"] is True
    assert settings["repair_interval_seconds"] == 7200 and set(settings) == set(K.SETTING_NAMES)
    assert StoreConfig().replica_settings() == {K.setting_name(op): ConsistencyPolicy().level(op) for op in Operation} | {
        "allow_weak_sweep_consistency": False,
        "repair_interval_seconds": 864_000,
        "allow_gc_grace_below_repair_interval": False,
    }
    with pytest.raises(InvalidInputError, match="consistency_data_read"):
        StoreConfig(consistency_data_read="SOME")


def test_a_weak_url_is_refused_before_connecting():
    # The host does not exist: the policy is checked first, so the error is about the policy.
    with pytest.raises(InvalidInputError, match="consistency_sweep_delete=ONE is below ALL"):
        open_kvs("cassandra://no-such-host.invalid/ks?consistency_sweep_delete=ONE")
    with pytest.raises(InvalidInputError, match="consistency_sentinel=QUORUM is below ALL"):
        open_kvs("cassandra://no-such-host.invalid/ks", settings={"consistency_sentinel": "QUORUM"})
    with pytest.raises(InvalidInputError, match="consistency_abort_delete must be one of"):
        open_kvs("cassandra://no-such-host.invalid/ks?consistency_abort_delete=SOMETIMES")
    with pytest.raises(InvalidInputError, match="unknown replica-safety setting"):
        open_kvs("cassandra://no-such-host.invalid/ks", settings={"consistency_everything": "ALL"})


def test_embedded_store_validates_the_settings_and_has_no_gc_grace(tmp_path):
    with pytest.raises(InvalidInputError, match="below ALL"):
        open_kvs(f"sqlite:///{tmp_path}/a.db", settings={"consistency_sweep_delete": "ONE"})
    kvs = open_kvs(f"sqlite:///{tmp_path}/a.db", settings=StoreConfig().replica_settings())
    try:
        from airflow_atlas.kvs import TableMetadata

        kvs.create_table("t", TableMetadata(cassandra_options={"gc_grace_seconds": 0}))  # no grace period here
        assert kvs.gc_grace_seconds("t") is None
    finally:
        kvs.close()
