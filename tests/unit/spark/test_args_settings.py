"""Engine settings on the Spark paths: ``spark.atlas.store.<key>`` conf entries and the job script's
``--setting KEY=VALUE`` are validated by the one settings model (finite, in range, naming the key); the
job script exits 2 on a bad ``--setting`` before a SparkSession is created."""
from __future__ import annotations

import math

import pytest

from airflow_atlas.config import StoreConfig
from airflow_atlas.errors import InvalidInputError
from airflow_atlas.settings_resolver import Layer, Rank, resolve
from airflow_atlas.spark import EXIT_USAGE, TargetedSweepJob, main, settings_from_spark_conf
from airflow_atlas.spark.driver import job_config

PREFIX = "spark.atlas.store."


@pytest.mark.parametrize(
    "key, text",
    [
        ("unreadable_window_seconds", "NaN"),
        ("unreadable_window_seconds", "Infinity"),
        ("unreadable_window_seconds", "nan"),
        ("transaction_lease_seconds", "Infinity"),
        ("lock_lease_seconds", "0"),
        ("lock_lease_seconds", "inf"),
        ("running_writer_wait_seconds", "-3"),
        ("batch_limit", "true"),
        ("batch_limit", "0"),
        ("max_iterations_per_shard", "1.5"),
    ],
)
def test_bad_spark_conf_values_are_refused_naming_the_key(key, text):
    with pytest.raises(InvalidInputError, match=f"setting {key} must be .*from spark.atlas.store"):
        job_config([(PREFIX + key, text), ("spark.master", "local[2]")], None)


def test_spark_conf_values_layer_over_the_defaults():
    conf = [(PREFIX + "batch_limit", "500"), (PREFIX + "lock_lease_seconds", "30")]
    config = job_config(conf, None)
    assert (config.batch_limit, config.lock_lease_seconds) == (500, 30.0)
    assert config.unreadable_window_seconds == StoreConfig().unreadable_window_seconds
    # the job's --setting wins over the conf, key by key
    config = job_config(conf, {"batch_limit": 9})
    assert (config.batch_limit, config.lock_lease_seconds) == (9, 30.0)


def test_unknown_spark_conf_key_is_refused():
    with pytest.raises(InvalidInputError, match=r"unknown setting\(s\): batch_limt"):
        job_config([(PREFIX + "batch_limt", "5")], None)


@pytest.mark.parametrize("setting", ["lock_lease_seconds=nan", "unreadable_window_seconds=inf", "running_writer_wait_seconds=-3", "no_such=1"])
def test_job_script_exits_2_on_a_bad_setting_before_starting_spark(tmp_path, capsys, setting):
    url_file = tmp_path / "url"
    url_file.write_text(f"sqlite:///{tmp_path / 'a.db'}")
    url_file.chmod(0o600)
    code = main(TargetedSweepJob, ["--store-url-file", str(url_file), "--pairs", "0:THOROUGH", "--setting", setting])
    err = capsys.readouterr().err
    assert code == EXIT_USAGE
    assert setting.split("=")[0] in err and "(from --setting)" in err
    assert not (tmp_path / "a.db").exists()


def test_json_nan_literals_do_not_slip_through():
    assert math.isnan(settings_from_spark_conf([(PREFIX + "lock_lease_seconds", "NaN")])["lock_lease_seconds"])
    with pytest.raises(InvalidInputError, match="finite"):
        resolve(Layer(Rank.SPARK_CONF, "conf", settings_from_spark_conf([(PREFIX + "lock_lease_seconds", "NaN")])))
