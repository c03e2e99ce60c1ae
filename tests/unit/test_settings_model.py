"""The settings model (pure): every engine key's validation on typed and text paths, layering, the one
table in docs/SETTINGS.md. Needs no services."""
from __future__ import annotations

import math
import pathlib

import pytest

from airflow_atlas.config import StoreConfig
from airflow_atlas.errors import InvalidInputError
from airflow_atlas.settings_model import (
    Bool,
    Choice,
    Float,
    Int,
    Nullable,
    Text,
    TextList,
    TextMapping,
    default_of,
    setting_fields,
    spec_of,
)
from airflow_atlas.settings_resolver import Layer, Rank, resolve, text_layer
from airflow_atlas.sweep.queue.constants import DEFAULT_BATCH_LIMIT, MAX_BATCH_LIMIT, MAX_SHARDS

ROOT = pathlib.Path(__file__).resolve().parents[2]
ENGINE_KEYS = [f.name for f in setting_fields(StoreConfig)]

# For every engine key: values that must be refused (typed path) with a fragment of the message.
BAD = {
    "transactions_schema_version": [0, 3, True, 2.0, "2"],
    "transaction_lease_seconds": [0, -1, math.nan, math.inf, -math.inf, 86_401, True, "60", None],
    "punch_interval_seconds": [-1, math.nan, math.inf, 86_401, False, "0"],
    "running_writer_wait_seconds": [-3, -0.1, math.nan, math.inf, 86_401, True],
    "app_latency_publish": ["true", 1, None],
    "app_latency_interval_seconds": [0, 0.05, -1, math.nan, math.inf, 3601, True, "1"],
    "app_latency_ttl_seconds": [0, 9, 7 * 86_400 + 1, True, 60.5, "600"],
    "timestamp_servers": ["127.0.0.1:9350", [":9350"], ["h:0"], ["h:x"], [""], [1], None],
    "timestamp_retry_seconds": [0, 0.5, 601, math.nan, True, "20"],
    "timestamp_tls_ca": ["ca.pem", "", 3, True, ["/a.pem"]],
    "timestamp_tls_cert": ["client.pem", "./c.pem", "", 3, True, ["/c.pem"]],
    "timestamp_tls_key": ["client.key", " ", 0, False, {"/k": 1}],
    "unreadable_window_seconds": [-1, math.nan, math.inf, 365 * 86_400 + 1, True, "0"],
    "batch_limit": [0, -1, MAX_BATCH_LIMIT + 1, True, 10.0, "10", None],
    "lock_lease_seconds": [0, 0.5, -1, math.nan, math.inf, 86_401, True, "120"],
    "lock_wait_seconds": [-1, -0.5, math.nan, math.inf, 86_401, True, "5"],
    "max_iterations_per_shard": [0, 1_000_001, True, 1.5],
    "initial_shards": [0, MAX_SHARDS + 1, True, 1.0],
    "sweep_max_entries_per_second": [-1, 10_000_001, True, 1.5, "100", None],
    "sweep_latency_target": [-1, 0.5, 1, 1.0, 100.5, True, "1.5", None, float("nan")],
    "rollback_guard_min_transactions": [0, -1, True, 1.5, "20"],
    "rollback_guard_max_fraction": [-0.1, 1.1, math.nan, math.inf, True, "0.9"],
    **{
        f"consistency_{op}": ["ANY", "FIVE", "", 1, True, None]
        for op in ("data_read", "data_write", "queue_write", "sweep_delete", "sentinel", "abort_delete", "queue_cleanup")
    },
    "consistency_lwt_commit": ["EACH_QUORUM", "SERIAL", "ANY", 1, None],
    "consistency_serial": ["QUORUM", "ALL", "", None],
    "allow_weak_sweep_consistency": ["true", 1, None],
    "repair_interval_seconds": [0, -1, 10 * 365 * 86_400 + 1, True, 1.5, "864000"],
    "allow_gc_grace_below_repair_interval": ["yes", 0, None],
}


def test_every_engine_key_has_bad_values_listed():
    assert sorted(BAD) == sorted(ENGINE_KEYS), "add the new key's bad values to BAD"


@pytest.mark.parametrize("name, value", [(n, v) for n, values in BAD.items() for v in values])
def test_bad_typed_values_are_refused_naming_the_key_and_the_source(name, value):
    with pytest.raises(InvalidInputError) as err:
        resolve(Layer(Rank.TASK, "a test layer", {name: value}))
    assert str(err.value).startswith(f"setting {name} must be ") and str(err.value).endswith("(from a test layer)")
    with pytest.raises(InvalidInputError, match=f"setting {name} "):
        StoreConfig(**{name: value})  # direct construction validates too


@pytest.mark.parametrize(
    "name, text",
    [
        ("unreadable_window_seconds", "nan"),
        ("unreadable_window_seconds", "inf"),
        ("unreadable_window_seconds", "-inf"),
        ("transaction_lease_seconds", "inf"),
        ("transaction_lease_seconds", "1e400"),
        ("lock_lease_seconds", "0"),
        ("lock_lease_seconds", "nan"),
        ("lock_lease_seconds", "inf"),
        ("running_writer_wait_seconds", "-3"),
        ("punch_interval_seconds", "soon"),
        ("batch_limit", "0"),
        ("batch_limit", "1e3"),
        ("batch_limit", "100001"),
        ("batch_limit", "true"),
        ("batch_limit", ""),
        ("max_iterations_per_shard", "1.5"),
        ("initial_shards", "257"),
        ("transactions_schema_version", "3"),
    ],
)
def test_bad_text_values_are_refused_naming_the_key(name, text):
    with pytest.raises(InvalidInputError) as err:
        resolve(text_layer(Rank.COMMAND_LINE, {name: text}, "--set"))
    assert str(err.value).startswith(f"setting {name} must be ") and str(err.value).endswith("(from --set)")


def test_text_values_are_parsed_by_the_keys_type():
    config = resolve(text_layer(
        Rank.COMMAND_LINE,
        [("batch_limit", "500"), ("lock_lease_seconds", "30"), ("unreadable_window_seconds", "0.5"), ("initial_shards", "4")],
        "--set",
    ))
    assert (config.batch_limit, config.lock_lease_seconds, config.unreadable_window_seconds, config.initial_shards) == (500, 30.0, 0.5, 4)
    assert isinstance(config.lock_lease_seconds, float) and isinstance(config.batch_limit, int)


def test_unknown_and_repeated_keys_are_refused():
    with pytest.raises(InvalidInputError, match=r"unknown setting\(s\): batch_limt \(from --set\); known: .*batch_limit"):
        resolve(text_layer(Rank.COMMAND_LINE, {"batch_limt": "5"}, "--set"))
    with pytest.raises(InvalidInputError, match="setting batch_limit given twice"):
        text_layer(Rank.COMMAND_LINE, [("batch_limit", "5"), ("batch_limit", "6")], "--set")
    with pytest.raises(InvalidInputError, match=r"unknown setting\(s\): nope"):
        resolve(Layer(Rank.TASK, "the task", {"nope": 1}))
    with pytest.raises(TypeError):
        StoreConfig(nope=1)  # type: ignore[call-arg]


def test_defaults_are_valid_and_ranges_include_them():
    config = StoreConfig()
    assert config.batch_limit == DEFAULT_BATCH_LIMIT
    for f in setting_fields(StoreConfig):
        assert spec_of(f).kind.check(default_of(f)) == getattr(config, f.name)


def test_layers_apply_in_order_later_wins_key_by_key():
    variable = Layer(Rank.VARIABLE, "variable", {"batch_limit": 500, "unreadable_window_seconds": 5})
    task = Layer(Rank.TASK, "task", {"batch_limit": 7})
    cli = text_layer(Rank.COMMAND_LINE, {"unreadable_window_seconds": "9"}, "--set")
    assert (resolve(variable).batch_limit, resolve(variable).unreadable_window_seconds) == (500, 5.0)
    assert (resolve(variable, task).batch_limit, resolve(variable, task).unreadable_window_seconds) == (7, 5.0)
    for order in [(variable, task, cli), (cli, task, variable), (task, cli, variable)]:  # the rank decides
        config = resolve(*order)
        assert (config.batch_limit, config.unreadable_window_seconds) == (7, 9.0)
        assert config.lock_lease_seconds == StoreConfig().lock_lease_seconds  # untouched keys keep the default
    assert resolve() == StoreConfig() and resolve(Layer(Rank.TASK, "empty", {})) == StoreConfig()


def test_round_trip_through_json():
    config = StoreConfig(batch_limit=123, lock_lease_seconds=9)
    assert StoreConfig(**config.to_json()) == config
    assert resolve(Layer(Rank.SPARK_CONF, "json", config.to_json())) == config


@pytest.mark.parametrize(
    "kind, good, bad",
    [
        (Int(1, 10), [(1, 1), (10, 10)], [0, 11, True, 1.0, "1", None]),
        (Float(0, 1, lo_open=True), [(1, 1.0), (0.5, 0.5)], [0, 1.01, math.nan, math.inf, True, "0.5", 10**400]),
        (Bool(), [(True, True), (False, False)], [0, 1, "true", None]),
        (Choice(("a", "b")), [("a", "a")], ["A", "c", True, None]),
        (Choice(("ONE", "ALL"), upper=True), [("all", "ALL"), (" One ", "ONE")], ["two", 1]),
        (Text(), [("x", "x")], ["", "  ", 1, None]),
        (TextList(allow_empty=False), [(["a"], ("a",)), (("a", "b"), ("a", "b"))], [[], "a", [""], [1]]),
        (TextMapping(), [({"spark.x": "1", "n": 2}, {"spark.x": "1", "n": 2})], [[], {"": 1}, {"a": math.nan}, {"a": [1]}]),
        (Nullable(Int(1, 2)), [(None, None), (2, 2)], [0, "x"]),
    ],
)
def test_kinds(kind, good, bad):
    for value, expected in good:
        assert kind.check(value) == expected
    for value in bad:
        with pytest.raises(ValueError):
            kind.check(value)


@pytest.mark.parametrize(
    "kind, text, expected",
    [
        (Bool(), "yes", True),
        (Bool(), "OFF", False),
        (Bool(), "0", False),
        (Int(1, 10), " 7 ", 7),
        (Float(0, 10), "2.5", 2.5),
        (Nullable(Int(1, 2)), "null", None),
        (TextList(), "a, b,", ("a", "b")),
    ],
)
def test_text_parsing(kind, text, expected):
    assert kind.parse(text) == expected


def test_bool_text_other_than_true_or_false_is_refused_never_read_as_false():
    with pytest.raises(ValueError, match="must be true or false"):
        Bool().parse("maybe")


def test_the_settings_table_in_the_docs_is_current_and_linked():
    from airflow_atlas.airflow.settings_doc import DOC, render_doc

    doc = (ROOT / DOC).read_text()
    assert render_doc(doc) == doc, "docs/SETTINGS.md is stale: python -m airflow_atlas.airflow.settings_doc --write-docs"
    for name in ENGINE_KEYS:
        assert f"| `{name}` | engine |" in doc
    assert "docs/SETTINGS.md" in (ROOT / "README.md").read_text()


def test_the_engine_model_does_not_import_airflow():
    import subprocess
    import sys

    code = "import sys, airflow_atlas.config, airflow_atlas.settings_model; print('airflow' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert out.strip() == "False"


def test_transaction_config_takes_the_models_values():
    """TransactionConfig is built from StoreConfig (store.py); its defaults must not drift from the model."""
    from airflow_atlas.transactions.manager import TransactionConfig

    defaults, model = TransactionConfig(), StoreConfig()
    assert defaults.lease_seconds == model.transaction_lease_seconds
    assert defaults.punch_interval_seconds == model.punch_interval_seconds
    assert defaults.running_writer_wait_seconds == model.running_writer_wait_seconds


def test_store_wires_the_settings_into_its_components(tmp_path):
    from airflow_atlas.store import AtlasStore

    config = resolve(text_layer(
        Rank.COMMAND_LINE,
        {"transaction_lease_seconds": "7", "punch_interval_seconds": "0", "running_writer_wait_seconds": "0.5",
         "unreadable_window_seconds": "12", "app_latency_interval_seconds": "2.5", "app_latency_ttl_seconds": "60"},
        "--set",
    ))
    with AtlasStore.open(f"sqlite:///{tmp_path / 'a.db'}", config) as store:
        tc = store.transactions.config
        assert (tc.lease_seconds, tc.punch_interval_seconds, tc.running_writer_wait_seconds) == (7.0, 0.0, 0.5)
        assert store.sweep_timestamps.unreadable_window_seconds == 12.0
        assert tc.latency is not None and (tc.latency.interval_seconds, tc.latency.ttl_seconds) == (2.5, 60)
    off = resolve(text_layer(Rank.COMMAND_LINE, {"app_latency_publish": "off"}, "--set"))
    with AtlasStore.open(f"sqlite:///{tmp_path / 'a.db'}", off) as store:
        assert store.transactions.config.latency is None and store.transactions.latency is None


def test_check_setting_validates_a_per_call_argument_by_the_keys_declaration():
    from airflow_atlas.config import check_setting

    assert check_setting("batch_limit", 500) == 500
    assert check_setting("lock_lease_seconds", "30", "--lease", text=True) == 30.0
    with pytest.raises(InvalidInputError, match=r"setting batch_limit must be between 1 and 100000, got 100001 \(from the operator\)"):
        check_setting("batch_limit", MAX_BATCH_LIMIT + 1, "the operator")
    with pytest.raises(InvalidInputError, match="setting batch_limit must be an integer"):
        check_setting("batch_limit", True)
    with pytest.raises(InvalidInputError, match="unknown setting 'batch'"):
        check_setting("batch", 1)
