"""Settings: defaults, validation of every kind of bad value, the Variable (real env-var backend)."""
from __future__ import annotations

import json
from datetime import timedelta

import pytest

from airflow_atlas.airflow.settings import OWNER, VARIABLE, AtlasSettings
from airflow_atlas.errors import InvalidInputError


def test_defaults_are_valid_and_documented():
    s = AtlasSettings()
    assert s.targeted_sweep_schedule == "*/5 * * * *"
    assert s.execution_mode == "in_task" and s.strategies == ("CONSERVATIVE", "THOROUGH")
    import airflow_atlas.airflow.settings as module

    for name in s.to_json():
        assert f"\n{name} " in module.__doc__, f"setting {name} is not documented in the module docstring"


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"no_such_setting": 1}, "unknown key(s) in the atlas_settings Variable: no_such_setting"),
        ({"execution_mode": "yarn"}, "execution_mode must be one of in_task, spark, auto"),
        ({"spark_min_backlog": 0}, "spark_min_backlog"),
        ({"batch_limit": 0}, "batch_limit must be between 1 and 100000"),
        ({"batch_limit": "10"}, "batch_limit must be an integer"),
        ({"retries": 0}, "retries must be between 1 and 100"),
        ({"shard_count": 300}, "shard_count must be between 1 and 256"),
        ({"strategies": ["NOTHING"]}, "NOTHING is never swept"),
        ({"strategies": []}, "strategies must not be empty"),
        ({"nodetool_command": "nodetool compact"}, "nodetool_command must be a list of strings"),
        ({"lock_lease_seconds": 0}, "lock_lease_seconds must be positive"),
        ({"store_config": {"unreadable_window_secs": 1}}, "unknown setting(s): unreadable_window_secs"),
        ({"store_config": {"batch_limit": 10}}, "set batch_limit as top-level setting(s), not in store_config"),
        ({"store_config": {"unreadable_window_seconds": -1}}, "unreadable_window_seconds must be a non-negative number"),
        ({"compaction_method": "major"}, "compaction_method must be one of compact, garbagecollect"),
        ({"targeted_sweep_schedule": ""}, "targeted_sweep_schedule must be a cron expression"),
    ],
)
def test_bad_settings_are_rejected_naming_the_setting(overrides, message):
    with pytest.raises(InvalidInputError) as err:
        AtlasSettings.from_mapping(overrides)
    assert message in str(err.value)
    assert VARIABLE in str(err.value)


def test_engine_config_layers_store_config_under_the_sweep_settings():
    s = AtlasSettings.from_mapping(
        {"batch_limit": 500, "lock_lease_seconds": 30, "store_config": {"unreadable_window_seconds": 5}}
    )
    config = s.engine_config()
    assert config.batch_limit == 500 and config.lock_lease_seconds == 30.0 and config.unreadable_window_seconds == 5
    assert s.engine_config(batch_limit=7).batch_limit == 7


def test_default_args_give_owner_retries_and_exponential_backoff():
    args = AtlasSettings.from_mapping({"retries": 3, "retry_delay_seconds": 2, "retry_exponential_backoff": 2.0}).default_args()
    assert args["owner"] == OWNER and args["retries"] == 3
    assert args["retry_delay"] == timedelta(seconds=2) and args["retry_exponential_backoff"] == 2.0
    assert "retry_exponential_backoff" not in AtlasSettings.from_mapping({"retry_exponential_backoff": 0}).default_args()


def test_group_size_follows_the_execution_mode():
    s = AtlasSettings.from_mapping({"in_task_group_size": 2, "spark_group_size": 8})
    assert s.group_size() == 2 and s.group_size("spark") == 8
    assert s.group_size("auto") == 2  # auto decides per group, groups are in-task sized


def test_auto_mode_and_its_threshold():
    s = AtlasSettings.from_mapping({"execution_mode": "auto", "spark_min_backlog": 1000})
    assert s.execution_mode == "auto" and s.spark_min_backlog == 1000
    assert AtlasSettings().spark_min_backlog == 420_000  # the benchmark's modelled crossover


def test_load_reads_the_airflow_variable(monkeypatch):
    monkeypatch.delenv("AIRFLOW_VAR_ATLAS_SETTINGS", raising=False)
    assert AtlasSettings.load() == AtlasSettings()
    monkeypatch.setenv("AIRFLOW_VAR_ATLAS_SETTINGS", json.dumps({"shard_count": 8, "execution_mode": "spark"}))
    loaded = AtlasSettings.load()
    assert loaded.shard_count == 8 and loaded.execution_mode == "spark"
    monkeypatch.setenv("AIRFLOW_VAR_ATLAS_SETTINGS", "{not json")
    with pytest.raises(InvalidInputError, match="not valid JSON"):
        AtlasSettings.load()
