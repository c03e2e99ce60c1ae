"""The replica-safety settings: declared, parsed and checked (levels and the cross-field rule) by
StoreConfig, resolved with the other layers by the settings resolver; kvs/consistency.py holds the
operations, defaults and reasons, and the engine's lookups built from the validated settings. Pure logic."""
from __future__ import annotations

import pytest

from airflow_atlas.config import StoreConfig
from airflow_atlas.errors import InvalidInputError
from airflow_atlas.kvs import StoreAddress, open_kvs
from airflow_atlas.kvs import consistency as K
from airflow_atlas.kvs.consistency import ConsistencyPolicy, GcGraceGuard, Operation
from airflow_atlas.settings_resolver import Layer, Rank, resolve, text_layer
from airflow_atlas.store import AtlasStore

DEFAULTS = {
    "data_read": "LOCAL_QUORUM",
    "data_write": "EACH_QUORUM",
    "queue_write": "EACH_QUORUM",
    "sweep_delete": "ALL",
    "sentinel": "ALL",
    "abort_delete": "ALL",
    "queue_cleanup": "LOCAL_QUORUM",
    "lwt_commit": "LOCAL_QUORUM",
    "serial": "SERIAL",
}


def test_defaults_per_operation():
    p = ConsistencyPolicy()
    assert {op.value: p.level(op) for op in Operation} == DEFAULTS
    assert StoreConfig().consistency_policy() == p  # the declarations' defaults are the lookup's
    assert StoreConfig().allow_weak_sweep_consistency is False
    assert GcGraceGuard().repair_interval_seconds == 864_000 == StoreConfig().gc_grace_guard().repair_interval_seconds
    assert GcGraceGuard().allow_gc_grace_below_repair_interval is False


def test_the_settings_are_one_per_operation_from_its_table():
    """StoreConfig's consistency settings are generated from Operation: one per operation, in its order, with
    the operation's default, accepted levels and meaning (kvs/consistency.py)."""
    from dataclasses import fields

    from airflow_atlas.settings_model import default_of, spec_of

    declared = [f for f in fields(StoreConfig) if f.name.startswith("consistency_")]
    assert [f.name for f in declared] == [K.setting_name(op) for op in Operation]
    for f, op in zip(declared, Operation, strict=True):
        spec = spec_of(f)
        assert default_of(f) == K.DEFAULT_LEVELS[op] == DEFAULTS[op.value] and f.type == "str"
        assert spec.kind.options == K.ACCEPTED_LEVELS[op] and spec.doc == " ".join(K.SETTING_MEANINGS[op].split())
    assert K.ACCEPTED_LEVELS[Operation.SERIAL] == K.SERIAL_LEVELS
    assert "EACH_QUORUM" not in K.ACCEPTED_LEVELS[Operation.LWT_COMMIT]


def test_level_names_are_case_insensitive_and_normalised():
    c = StoreConfig(consistency_data_read=" one ", consistency_queue_cleanup="local_one", consistency_serial="local_serial")
    p = c.consistency_policy()
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
        StoreConfig(**{f"consistency_{field}": value})
    with pytest.raises(InvalidInputError, match=message):
        resolve(Layer(Rank.STORE, "the store URL", {f"consistency_{field}": value}, text=True))


@pytest.mark.parametrize("field", ["sweep_delete", "sentinel", "abort_delete"])
@pytest.mark.parametrize("level", ["QUORUM", "LOCAL_QUORUM", "EACH_QUORUM", "ONE"])
def test_lowering_a_sweep_delete_below_all_fails_at_the_declaration(field, level):
    """The cross-field rule is checked where the settings object is built (not when a store opens),
    naming both settings."""
    with pytest.raises(InvalidInputError) as info:
        StoreConfig(**{f"consistency_{field}": level})
    text = str(info.value)
    assert f"consistency_{field}={level}" in text and "allow_weak_sweep_consistency=true" in text
    assert "below ALL" in text and "repair" in text and "gc_grace_seconds" in text
    c = StoreConfig(**{f"consistency_{field}": level}, allow_weak_sweep_consistency=True)
    assert c.consistency_policy().level(field) == level


def test_the_rule_holds_across_layers_and_names_them():
    # the level and the override may come from different layers: resolved together, accepted
    c = resolve(Layer(Rank.VARIABLE, "the atlas_settings Variable", {"consistency_sweep_delete": "QUORUM"}),
                Layer(Rank.STORE, "connection 'c' extras", {"allow_weak_sweep_consistency": "true"}, text=True))
    assert c.consistency_sweep_delete == "QUORUM" and c.allow_weak_sweep_consistency is True
    # a higher layer taking the override back is refused, naming the layers that were combined
    with pytest.raises(InvalidInputError, match=r"consistency_sweep_delete=QUORUM needs setting allow_weak_sweep_consistency"
                                                r".*settings from: the atlas_settings Variable, --set"):
        resolve(Layer(Rank.VARIABLE, "the atlas_settings Variable",
                      {"consistency_sweep_delete": "QUORUM", "allow_weak_sweep_consistency": True}),
                text_layer(Rank.COMMAND_LINE, {"allow_weak_sweep_consistency": "false"}, "--set"))


def test_other_operations_may_be_lowered_without_the_override():
    c = StoreConfig(consistency_data_read="ONE", consistency_data_write="ONE", consistency_queue_write="ONE",
                    consistency_queue_cleanup="ONE", consistency_lwt_commit="ONE")
    assert c.consistency_sweep_delete == "ALL" and c.allow_weak_sweep_consistency is False


def test_each_quorum_is_offered_outside_lwt_commit():
    c = StoreConfig(consistency_data_read="EACH_QUORUM", consistency_sweep_delete="EACH_QUORUM",
                    allow_weak_sweep_consistency=True)
    assert c.consistency_policy().data_read == "EACH_QUORUM" and c.consistency_policy().sweep_delete == "EACH_QUORUM"


def test_the_engine_lookups_are_built_from_the_settings():
    c = resolve(text_layer(Rank.COMMAND_LINE, {
        "consistency_sweep_delete": "quorum", "allow_weak_sweep_consistency": "yes", "repair_interval_seconds": "3600",
        "allow_gc_grace_below_repair_interval": "on", "batch_limit": "10",
    }, "--set"))
    policy, guard = c.consistency_policy(), c.gc_grace_guard()
    assert policy.sweep_delete == "QUORUM" and policy.data_read == "LOCAL_QUORUM"
    assert guard == GcGraceGuard(repair_interval_seconds=3600, allow_gc_grace_below_repair_interval=True)
    assert {K.setting_name(op) for op in Operation} | {"allow_weak_sweep_consistency", "repair_interval_seconds",
                                                       "allow_gc_grace_below_repair_interval"} == set(K.SETTING_NAMES)
    assert not hasattr(K, "check_setting") and not hasattr(K, "parse_bool")  # one validator: the declarations


@pytest.mark.parametrize(
    "name, value, message",
    [
        ("allow_weak_sweep_consistency", "maybe", "allow_weak_sweep_consistency must be true or false"),
        ("repair_interval_seconds", "0", "repair_interval_seconds must be between"),
        ("repair_interval_seconds", "ten days", "repair_interval_seconds must be an integer"),
        ("consistency_nothing", "ALL", "may set only the replica-safety settings"),
    ],
)
def test_bad_text_values_of_the_store_layer_are_refused(name, value, message):
    with pytest.raises(InvalidInputError, match=message):
        resolve(Layer(Rank.STORE, "the store URL", {name: value}, text=True))


def test_the_store_layer_sets_replica_safety_keys_only():
    with pytest.raises(InvalidInputError, match="may set only the replica-safety settings.*not batch_limit"):
        Layer(Rank.STORE, "the store URL", {"batch_limit": "5"}, text=True)


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
    config = resolve(text_layer(  # as CLI --set / Spark conf give them
        Rank.COMMAND_LINE,
        {"consistency_sweep_delete": "quorum", "allow_weak_sweep_consistency": "true", "repair_interval_seconds": "7200"},
        "--set",
    ))
    assert config == resolve(Layer(Rank.VARIABLE, "the Variable", {  # as atlas_settings' JSON gives them
        "consistency_sweep_delete": "QUORUM", "allow_weak_sweep_consistency": True, "repair_interval_seconds": 7200,
    }))
    assert config.consistency_sweep_delete == "QUORUM" and config.repair_interval_seconds == 7200
    with pytest.raises(InvalidInputError, match="consistency_data_read"):
        StoreConfig(consistency_data_read="SOME")


def test_a_weak_url_is_refused_before_connecting():
    # The host does not exist: the settings are resolved first, so the error is about them.
    with pytest.raises(InvalidInputError, match="consistency_sweep_delete=ONE needs setting allow_weak_sweep_consistency"):
        AtlasStore.open("cassandra://no-such-host.invalid/ks?consistency_sweep_delete=ONE")
    with pytest.raises(InvalidInputError, match="consistency_abort_delete must be one of"):
        AtlasStore.open("cassandra://no-such-host.invalid/ks?consistency_abort_delete=SOMETIMES")
    # the URL's options are a layer over the caller's settings: together they may satisfy the rule
    base = StoreConfig(allow_weak_sweep_consistency=True)
    with pytest.raises(InvalidInputError, match="sentinel=ALL|below|needs") as info:
        AtlasStore.open("cassandra://no-such-host.invalid/ks?consistency_sentinel=QUORUM&allow_weak_sweep_consistency=false", base)
    assert "allow_weak_sweep_consistency" in str(info.value)
    # the key-value layer does not resolve settings: a URL with replica-safety options needs the resolved lookups
    with pytest.raises(InvalidInputError, match="are engine settings: open the store with AtlasStore.open"):
        open_kvs(StoreAddress.from_url("cassandra://no-such-host.invalid/ks?consistency_sweep_delete=ALL"))


def test_embedded_store_validates_the_settings_and_has_no_gc_grace(tmp_path):
    with pytest.raises(InvalidInputError, match="needs setting allow_weak_sweep_consistency"):
        AtlasStore.open(f"sqlite:///{tmp_path}/a.db", resolve(Layer(Rank.TASK, "t", {"consistency_sweep_delete": "ONE"})))
    assert not (tmp_path / "a.db").exists()
    kvs = open_kvs(StoreAddress.from_url(f"sqlite:///{tmp_path}/a.db"), consistency=StoreConfig().consistency_policy(),
                   gc_grace_guard=StoreConfig().gc_grace_guard())
    try:
        from airflow_atlas.kvs import TableMetadata

        kvs.create_table("t", TableMetadata(cassandra_options={"gc_grace_seconds": 0}))  # no grace period here
        assert kvs.gc_grace_seconds("t") is None
    finally:
        kvs.close()


# ----- several datacenters (kvs/consistency.py: multi_datacenter_problems) --------------------------------
TWO_DCS = {"dc1": 2, "dc2": 1}


def test_the_defaults_are_safe_in_two_datacenters():
    assert K.multi_datacenter_problems(ConsistencyPolicy(), TWO_DCS) == []


def test_one_datacenter_accepts_any_policy():
    weak = ConsistencyPolicy(data_write="LOCAL_QUORUM", queue_write="ONE", serial="LOCAL_SERIAL")
    assert K.multi_datacenter_problems(weak, {}) == []
    assert K.multi_datacenter_problems(weak, {"dc1": 3}) == []
    assert K.multi_datacenter_problems(weak, {"dc1": 3, "dc2": 0}) == []


def test_local_serial_is_unsafe_across_datacenters():
    (problem,) = K.multi_datacenter_problems(ConsistencyPolicy(serial="LOCAL_SERIAL"), TWO_DCS)
    assert "consistency_serial=LOCAL_SERIAL" in problem and "overlapping timestamps" in problem
    assert "dc1: 2, dc2: 1" in problem


@pytest.mark.parametrize(
    "write, read, safe",
    [
        ("LOCAL_QUORUM", "LOCAL_QUORUM", False),  # the old default: invisible in the other datacenter
        ("QUORUM", "LOCAL_QUORUM", False),  # a global quorum may lie in one datacenter
        ("LOCAL_ONE", "LOCAL_QUORUM", False),
        ("EACH_QUORUM", "LOCAL_QUORUM", True),
        ("EACH_QUORUM", "LOCAL_ONE", False),
        ("ALL", "LOCAL_ONE", True),
        ("QUORUM", "QUORUM", True),
        ("LOCAL_QUORUM", "ALL", True),
    ],
)
def test_data_and_queue_writes_must_overlap_a_read_in_the_other_datacenter(write, read, safe):
    policy = ConsistencyPolicy(data_write=write, queue_write=write, data_read=read)
    problems = K.multi_datacenter_problems(policy, TWO_DCS)
    assert (problems == []) is safe, problems
    if not safe:
        assert [p.split(" ", 1)[0] for p in problems] == [f"consistency_data_write={write}", f"consistency_queue_write={write}"]
        assert all("write at EACH_QUORUM" in p for p in problems)


def test_the_architecture_table_states_the_code_defaults():
    """docs/ARCHITECTURE.md "Consistency across datacenters": the "ours" column is DEFAULT_LEVELS."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[3] / "docs" / "ARCHITECTURE.md").read_text()
    section = text.split("## Consistency across datacenters", 1)[1].split("\n## ", 1)[0]
    ours = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0].split(" ")[0] in {op.value for op in Operation}:
            ours[cells[0].split(" ")[0]] = cells[1]
    assert ours == DEFAULTS
