"""Airflow settings: defaults, validation of every kind of bad value, engine keys in the Variable (both
spellings), layering under a task's store_config, the Variable (real env-var backend)."""
from __future__ import annotations

import json
import math
from datetime import timedelta

import pytest

from airflow_atlas.airflow.settings import OWNER, VARIABLE, AtlasSettings
from airflow_atlas.airflow.settings_doc import settings_markdown
from airflow_atlas.config import StoreConfig
from airflow_atlas.errors import InvalidInputError
from airflow_atlas.kvs.tables import SWEEPABLE_STRATEGY_NAMES
from airflow_atlas.settings_model import setting_fields


def test_defaults_are_valid_and_every_key_is_in_the_one_table():
    s = AtlasSettings()
    assert s.targeted_sweep_schedule == "*/5 * * * *"
    assert s.execution_mode == "in_task" and s.strategies == SWEEPABLE_STRATEGY_NAMES
    assert s.engine == StoreConfig()
    table = settings_markdown()
    for name in s.to_json():
        assert f"| `{name}` |" in table, f"setting {name} is not in the settings table"


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"no_such_setting": 1}, "unknown setting(s): no_such_setting (from the atlas_settings Variable)"),
        ({"execution_mode": "yarn"}, "execution_mode must be one of in_task, spark, auto"),
        ({"spark_min_backlog": 0}, "spark_min_backlog"),
        ({"batch_limit": 0}, "batch_limit must be between 1 and 100000, got 0"),
        ({"batch_limit": "10"}, "batch_limit must be an integer"),
        ({"batch_limit": True}, "batch_limit must be an integer"),
        ({"batch_limit": 10.0}, "batch_limit must be an integer"),
        ({"retries": 0}, "retries must be between 1 and 100"),
        ({"retries": True}, "retries"),
        ({"shard_count": 300}, "shard_count must be between 1 and 256"),
        ({"strategies": ["NOTHING"]}, "NOTHING is never swept"),
        ({"strategies": ["SOMETIMES"]}, "unknown sweep strategy"),
        ({"strategies": []}, "strategies must not be empty"),
        ({"nodetool_command": "nodetool compact"}, "nodetool_command must be a list of strings"),
        ({"lock_lease_seconds": 0}, "lock_lease_seconds must be between 1 and 86400, got 0"),
        ({"lock_lease_seconds": math.nan}, "lock_lease_seconds must be a finite number"),
        ({"lock_lease_seconds": math.inf}, "lock_lease_seconds must be a finite number"),
        ({"lock_wait_seconds": -1}, "lock_wait_seconds"),
        ({"sweep_timeout_seconds": 0}, "sweep_timeout_seconds"),
        ({"sweep_timeout_seconds": math.inf}, "sweep_timeout_seconds"),
        ({"retry_exponential_backoff": math.nan}, "retry_exponential_backoff"),
        ({"skip_idle_shards": "yes"}, "skip_idle_shards must be true or false"),
        ({"skip_idle_shards": 1}, "skip_idle_shards"),
        ({"store_config": {"unreadable_window_secs": 1}}, "unknown setting(s): unreadable_window_secs"),
        ({"store_config": [1]}, "store_config must be a JSON object"),
        ({"store_config": {"unreadable_window_seconds": -1}}, "unreadable_window_seconds must be between 0 and 31536000, got -1"),
        ({"store_config": {"unreadable_window_seconds": math.inf}}, "unreadable_window_seconds must be a finite number"),
        ({"store_config": {"transaction_lease_seconds": math.inf}}, "transaction_lease_seconds"),
        ({"running_writer_wait_seconds": -3}, "running_writer_wait_seconds must be between 0 and 86400, got -3"),
        ({"batch_limit": 10, "store_config": {"batch_limit": 10}}, "batch_limit given twice in the atlas_settings Variable"),
        ({"compaction_method": "major"}, "compaction_method must be one of compact, garbagecollect"),
        ({"targeted_sweep_schedule": ""}, "targeted_sweep_schedule must be a cron expression"),
        ({"scrub_schedule": 5}, "scrub_schedule"),
        ({"sweep_pool": ""}, "sweep_pool"),
        ({"sweep_pool": 5}, "sweep_pool"),
        ({"sweep_max_entries_per_second": -1}, "sweep_max_entries_per_second"),
        ({"store_config": {"sweep_max_entries_per_second": 2.5}}, "sweep_max_entries_per_second"),
    ],
)
def test_bad_settings_are_rejected_naming_the_setting_and_the_variable(overrides, message):
    with pytest.raises(InvalidInputError) as err:
        AtlasSettings.from_mapping(overrides)
    assert message in str(err.value)
    assert VARIABLE in str(err.value)


def test_a_non_object_variable_is_refused():
    with pytest.raises(InvalidInputError, match="atlas_settings Variable must hold a JSON object"):
        AtlasSettings.from_mapping([1, 2])


def test_every_airflow_key_is_validated():
    """Each Airflow key refuses a value of the wrong type: no key escapes validation."""
    for f in setting_fields(AtlasSettings):
        with pytest.raises(InvalidInputError, match=f.name):
            AtlasSettings.from_mapping({f.name: object()})


def test_values_are_normalised():
    s = AtlasSettings.from_mapping({"strategies": ["thorough", "THOROUGH"], "lock_wait_seconds": 2, "nodetool_command": ["a", "b"]})
    assert s.strategies == ("THOROUGH",)
    assert s.engine.lock_wait_seconds == 2.0 and isinstance(s.engine.lock_wait_seconds, float)  # an engine setting
    assert s.nodetool_command == ("a", "b")


def test_engine_keys_at_the_top_level_or_in_store_config_are_one_layer():
    s = AtlasSettings.from_mapping(
        {"batch_limit": 500, "lock_lease_seconds": 30, "store_config": {"unreadable_window_seconds": 5, "max_iterations_per_shard": 7}}
    )
    config = s.engine_config()
    assert config == StoreConfig(batch_limit=500, lock_lease_seconds=30.0, unreadable_window_seconds=5, max_iterations_per_shard=7)
    # engine keys read through the typed engine part of the Airflow settings: one value, no shadow copy
    assert (s.engine.batch_limit, s.engine.lock_lease_seconds, s.engine.max_iterations_per_shard) == (500, 30.0, 7)
    assert not hasattr(s, "batch_limit")  # never forwarded silently (type checkers would see Any)
    # an engine key may now sit in store_config (it used to be refused there)
    assert AtlasSettings.from_mapping({"store_config": {"batch_limit": 9}}).engine.batch_limit == 9


def test_a_tasks_store_config_layers_over_the_variable():
    s = AtlasSettings.from_mapping({"batch_limit": 500, "store_config": {"unreadable_window_seconds": 5}})
    config = s.engine_config(batch_limit=7)
    assert config.batch_limit == 7 and config.unreadable_window_seconds == 5
    assert s.engine_config() == s.engine  # the Variable is not changed by a task's overrides
    with pytest.raises(InvalidInputError, match=r"setting lock_lease_seconds must be a finite number between 1 and 86400, got nan \(from the task's store_config\)"):
        s.engine_config(lock_lease_seconds=math.nan)
    with pytest.raises(InvalidInputError, match=r"unknown setting\(s\): batch_size \(from the task's store_config\)"):
        s.engine_config(batch_size=1)


def test_to_json_is_flat_and_reads_back():
    s = AtlasSettings.from_mapping({"batch_limit": 123, "shard_count": 4, "nodetool_ssh_conn_ids": ["n1"]})
    doc = s.to_json()
    assert doc["batch_limit"] == 123 and doc["shard_count"] == 4 and doc["nodetool_ssh_conn_ids"] == ["n1"]
    assert "engine" not in doc and "store_config" not in doc
    assert json.loads(json.dumps(doc)) == doc
    assert AtlasSettings.from_mapping(doc) == s


def test_unknown_attribute_is_still_an_attribute_error():
    with pytest.raises(AttributeError):
        AtlasSettings().no_such_thing  # noqa: B018


def test_default_args_give_owner_retries_and_exponential_backoff():
    args = AtlasSettings.from_mapping({"retries": 3, "retry_delay_seconds": 2, "retry_exponential_backoff": 2.0}).default_args()
    assert args["owner"] == OWNER and args["retries"] == 3
    assert args["retry_delay"] == timedelta(seconds=2) and args["retry_exponential_backoff"] == 2.0
    assert "retry_exponential_backoff" not in AtlasSettings.from_mapping({"retry_exponential_backoff": 0}).default_args()


def test_group_size_follows_the_execution_mode():
    s = AtlasSettings.from_mapping({"in_task_group_size": 2, "spark_group_size": 8})
    assert s.group_size() == 2 and s.group_size("spark") == 8
    assert s.group_size("auto") == 2  # auto decides per group, groups are in-task sized


def test_the_default_in_task_group_size_maps_a_run_onto_at_most_max_parallel_groups_groups():
    s = AtlasSettings()
    assert s.in_task_group_size is None and s.max_parallel_groups == 16
    assert s.group_size("in_task", pairs=10) == 1  # up to 16 pairs: one pair per group, as before
    assert s.group_size("in_task", pairs=16) == 1
    assert s.group_size("in_task", pairs=17) == 2
    assert s.group_size("in_task", pairs=512) == 32  # 256 shards x 2 strategies: 16 groups, not 512
    assert s.group_size("spark", pairs=512) == 16  # Spark groups keep their own size
    assert AtlasSettings.from_mapping({"max_parallel_groups": 4}).group_size("auto", pairs=10) == 3


def test_auto_mode_and_its_threshold():
    s = AtlasSettings.from_mapping({"execution_mode": "auto", "spark_min_backlog": 1000})
    assert s.execution_mode == "auto" and s.spark_min_backlog == 1000
    assert AtlasSettings().spark_min_backlog == 250_000  # the benchmark's modelled crossover (issue 15 run)


def test_load_reads_the_airflow_variable(monkeypatch):
    monkeypatch.delenv("AIRFLOW_VAR_ATLAS_SETTINGS", raising=False)
    assert AtlasSettings.load() == AtlasSettings()
    monkeypatch.setenv(
        "AIRFLOW_VAR_ATLAS_SETTINGS",
        json.dumps({"shard_count": 8, "execution_mode": "spark", "batch_limit": 64, "store_config": {"punch_interval_seconds": 0}}),
    )
    loaded = AtlasSettings.load()
    assert loaded.shard_count == 8 and loaded.execution_mode == "spark"
    assert loaded.engine_config().batch_limit == 64 and loaded.engine_config().punch_interval_seconds == 0
    monkeypatch.setenv("AIRFLOW_VAR_ATLAS_SETTINGS", "{not json")
    with pytest.raises(InvalidInputError, match="not valid JSON"):
        AtlasSettings.load()
    # JSON's NaN / Infinity literals parse in Python: they must still be refused, naming the key
    monkeypatch.setenv("AIRFLOW_VAR_ATLAS_SETTINGS", '{"store_config": {"unreadable_window_seconds": NaN}}')
    with pytest.raises(InvalidInputError, match=r"unreadable_window_seconds must be a finite number.*\(from the atlas_settings Variable\)"):
        AtlasSettings.load()
    monkeypatch.setenv("AIRFLOW_VAR_ATLAS_SETTINGS", '{"lock_lease_seconds": Infinity}')
    with pytest.raises(InvalidInputError, match=r"lock_lease_seconds must be a finite number.*\(from the atlas_settings Variable\)"):
        AtlasSettings.load()


def test_dag_files_read_their_own_environment_variable_only(monkeypatch):
    """The DAG-shaping settings come from ATLAS_DAG_SETTINGS alone (no Variable.get, so no database query at
    parse time: tests/airflow/dags/test_parse_queries.py counts them); AIRFLOW_VAR_ATLAS_SETTINGS (the
    Variable) does not shape the DAGs; a run-time key in ATLAS_DAG_SETTINGS is refused, naming its place."""
    from airflow_atlas.airflow.settings import DAG_SETTINGS_ENV, VARIABLE_ENV

    assert DAG_SETTINGS_ENV == "ATLAS_DAG_SETTINGS"
    monkeypatch.delenv(DAG_SETTINGS_ENV, raising=False)
    monkeypatch.setenv(VARIABLE_ENV, json.dumps({"retries": 7}))
    assert AtlasSettings.for_dag_files() == AtlasSettings()
    monkeypatch.setenv(DAG_SETTINGS_ENV, json.dumps({"targeted_sweep_schedule": "*/2 * * * *", "retries": 5}))
    s = AtlasSettings.for_dag_files()
    assert s.targeted_sweep_schedule == "*/2 * * * *" and s.default_args()["retries"] == 5
    monkeypatch.setenv(DAG_SETTINGS_ENV, '{"retries": 0}')
    with pytest.raises(InvalidInputError, match=r"setting retries .*\(from the environment variable ATLAS_DAG_SETTINGS\)"):
        AtlasSettings.for_dag_files()
    monkeypatch.setenv(DAG_SETTINGS_ENV, '{"retries": 3, "batch_limit": 10, "store_conn_id": "x"}')
    with pytest.raises(InvalidInputError, match=r"ATLAS_DAG_SETTINGS may hold only .*; batch_limit, store_conn_id are "
                                                 r"read when a task runs: set them in the atlas_settings Variable"):
        AtlasSettings.for_dag_files()


def test_dag_shaping_settings_are_exactly_those_the_dag_files_read():
    from airflow_atlas.airflow.settings import dag_shaping_names

    assert set(dag_shaping_names()) == {
        "max_parallel_groups", "sweep_pool", "targeted_sweep_schedule", "sweep_timeout_seconds", "retries",
        "retry_delay_seconds", "retry_exponential_backoff", "max_retry_delay_seconds", "full_sweep_schedule",
        "scrub_schedule", "sensor_poke_seconds",
    }


def test_warnings_name_a_shadowing_environment_variable_and_ignored_dag_shaping_keys():
    import dataclasses

    s = AtlasSettings.from_mapping({"retries": 4, "batch_limit": 9})
    assert s.warnings() == [
        "the atlas_settings Variable sets retries, which shapes the DAGs: it is read when the DAG files are parsed, "
        "from the environment variable ATLAS_DAG_SETTINGS only, so the Variable's value has no effect (docs/SETTINGS.md)"
    ]
    shadowed = dataclasses.replace(AtlasSettings.from_mapping({"batch_limit": 9}), shadowed=True)
    (message,) = shadowed.warnings()
    assert "environment variable AIRFLOW_VAR_ATLAS_SETTINGS" in message and "have no effect" in message
    assert AtlasSettings.from_mapping({"batch_limit": 9}).warnings() == []


def test_effective_settings_name_each_values_layer(monkeypatch):
    from airflow_atlas.airflow.settings import DAG_SETTINGS_ENV
    from airflow_atlas.settings_resolver import Layer, Rank

    monkeypatch.setenv(DAG_SETTINGS_ENV, json.dumps({"retries": 5}))
    s = AtlasSettings.from_mapping({"batch_limit": 9, "lock_lease_seconds": 30, "store_conn_id": "c", "retries": 4})
    effective = {v.name: v for v in s.effective(Layer(Rank.COMMAND_LINE, "--set", {"lock_lease_seconds": 40}),
                                                 Layer(Rank.STORE, "connection 'c' extras", {"consistency_data_read": "ONE"}))}
    assert (effective["batch_limit"].value, effective["batch_limit"].source) == (9, "the atlas_settings Variable")
    assert (effective["lock_lease_seconds"].value, effective["lock_lease_seconds"].source) == (40.0, "--set")
    assert effective["consistency_data_read"].source == "connection 'c' extras"
    assert (effective["store_conn_id"].value, effective["store_conn_id"].group) == ("c", "Airflow")
    assert (effective["retries"].value, effective["retries"].source) == (5, "the environment variable ATLAS_DAG_SETTINGS")
    assert (effective["unreadable_window_seconds"].value, effective["unreadable_window_seconds"].source) == (3600.0, "default")
    assert effective["strategies"].value == ["CONSERVATIVE", "THOROUGH"]


def test_a_tasks_settings_are_resolved_in_one_call_with_the_variable():
    """The Variable and the task's store_config are layers of one resolve: a rule may be satisfied across them."""
    s = AtlasSettings.from_mapping({"allow_weak_sweep_consistency": True})
    config = s.engine_config(s.task_layer({"consistency_sentinel": "QUORUM"}))
    assert config.consistency_sentinel == "QUORUM"
    with pytest.raises(InvalidInputError, match="consistency_sentinel=QUORUM needs setting allow_weak_sweep_consistency"):
        AtlasSettings().engine_config(AtlasSettings.task_layer({"consistency_sentinel": "QUORUM"}))
    with pytest.raises(InvalidInputError, match="settings must be a mapping"):
        AtlasSettings().engine_config(AtlasSettings.task_layer(["batch_limit"]))
