"""``atlas-sweep --set KEY=VALUE``: every bad value exits 2 naming the key, before anything is written.

The values of issue 16 item 6 (nan / inf / 0 / negative leases and windows) and more; ``main()`` runs
in-process on a SQLite file in tmp."""
from __future__ import annotations

import json

import pytest

from airflow_atlas.cli import main

BAD = [
    ("unreadable_window_seconds", "nan"),
    ("unreadable_window_seconds", "inf"),
    ("unreadable_window_seconds", "-1"),
    ("transaction_lease_seconds", "inf"),
    ("transaction_lease_seconds", "0"),
    ("lock_lease_seconds", "0"),
    ("lock_lease_seconds", "nan"),
    ("lock_lease_seconds", "inf"),
    ("running_writer_wait_seconds", "-3"),
    ("punch_interval_seconds", "-inf"),
    ("batch_limit", "100001"),
    ("batch_limit", "true"),
    ("max_iterations_per_shard", "0"),
    ("initial_shards", "1.5"),
    ("transactions_schema_version", "7"),
]


@pytest.fixture(autouse=True)
def no_env_store(monkeypatch):
    monkeypatch.delenv("ATLAS_STORE_URL", raising=False)


@pytest.mark.parametrize("key, text", BAD)
def test_bad_value_on_init_exits_2_naming_the_key_and_creates_nothing(capsys, tmp_path, key, text):
    db = tmp_path / "new.db"
    code = main(["init", "--store", f"sqlite:///{db}", "--set", f"{key}={text}"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"setting {key} must be " in err and "(from --set)" in err
    assert "unexpected" not in err
    assert not db.exists(), "nothing may be written before the settings are validated"


@pytest.mark.parametrize("key, text", BAD)
def test_bad_value_on_sweep_exits_2(capsys, tmp_path, key, text):
    url = f"sqlite:///{tmp_path / 'a.db'}"
    assert main(["init", "--store", url]) == 0
    code = main(["sweep", "--store", url, "--set", f"{key}={text}", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and f"setting {key} must be " in err, err


def test_good_values_are_used(capsys, tmp_path):
    url = f"sqlite:///{tmp_path / 'a.db'}"
    assert main(["init", "--store", url, "--set", "initial_shards=3"]) == 0
    capsys.readouterr()
    assert main(["shards", "--store", url, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["number_of_shards"] == 3


def test_a_key_given_twice_is_refused(capsys, tmp_path):
    url = f"sqlite:///{tmp_path / 'a.db'}"
    code = main(["init", "--store", url, "--set", "batch_limit=5", "--set", "batch_limit=6"])
    assert code == 2 and "setting batch_limit given twice (from --set)" in capsys.readouterr().err


@pytest.mark.parametrize("option", ["connect_timeout=inf", "request_timeout=nan", "request_timeout=-1", "connect_timeout=0"])
def test_non_finite_url_timeouts_exit_2_naming_the_option(capsys, option):
    code = main(["status", "--store", f"cassandra://127.0.0.1:1/no_such_ks?{option}"])
    err = capsys.readouterr().err
    assert code == 2 and f"URL option {option.split('=')[0]} must be a positive finite number" in err, err


@pytest.mark.parametrize("text, message", [
    ("-1", "setting sweep_max_entries_per_second must be between 0 and 10000000, got -1 (from --max-entries-per-second)"),
    ("1.5", "setting sweep_max_entries_per_second must be an integer between 0 and 10000000, got '1.5' (from --max-entries-per-second)"),
])
def test_bad_max_entries_per_second_exits_2_as_a_setting(capsys, tmp_path, text, message):
    """``--max-entries-per-second`` is the setting sweep_max_entries_per_second in the command-line layer:
    one check, the declaration's."""
    url = f"sqlite:///{tmp_path / 'a.db'}"
    assert main(["init", "--store", url]) == 0
    capsys.readouterr()
    code = main(["sweep", "--store", url, "--max-entries-per-second", text, "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and message in err, err


def test_max_entries_per_second_is_the_setting_of_the_run(capsys, tmp_path):
    from airflow_atlas.cli.args import build_parser
    from airflow_atlas.cli.store import engine_config

    parser = build_parser()
    args = parser.parse_args(["sweep", "--set", "sweep_max_entries_per_second=50", "--set", "batch_limit=7"])
    assert (engine_config(args).sweep_max_entries_per_second, engine_config(args).batch_limit) == (50, 7)
    args = parser.parse_args(["sweep", "--set", "sweep_max_entries_per_second=50", "--max-entries-per-second", "9"])
    assert engine_config(args).sweep_max_entries_per_second == 9  # the option wins over --set of the same key
