"""The one conversion rule for templated arguments (airflow_atlas/airflow/templated.py), on every templated
field of every operator and sensor of the package: each field has a kind; an int or boolean field converts
what a template renders to (text without ``render_template_as_native_obj``: ``"False"`` is false, ``"7"`` is
7); anything unclear fails ``execute`` at once, without retries, naming the argument and the value, before
the settings are read or a store is opened. The classes are found by importing every module of
``airflow_atlas.airflow``, so a new operator, sensor or templated field is covered (or fails here)."""
from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

from airflow_atlas.airflow.templated import AS_IS, TEMPLATED_KINDS
from airflow_atlas.errors import InvalidInputError, StoreAccessError, StoreUnavailableError, TableNotFoundError

pytestmark = pytest.mark.airflow


def _task_classes() -> list[type]:
    from airflow.sdk import BaseOperator

    import airflow_atlas.airflow as package

    found: dict[str, type] = {}
    for module in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
        for obj in vars(importlib.import_module(module.name)).values():
            if inspect.isclass(obj) and issubclass(obj, BaseOperator) and obj.__module__.startswith("airflow_atlas."):
                found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return [found[name] for name in sorted(found)]


CLASSES = _task_classes()
REQUIRED = {  # the arguments a class cannot be built without
    "FullTableSweepOperator": {"table": "t"},
    "ValidateSweepRequestOperator": {"request": "targeted"},
    "SweepableWorkSensor": {"shard": 0, "strategy": "THOROUGH"},
    "SweepTimestampSensor": {"target_ts": 1},
    "LockFreeSensor": {"lock": "some/lock"},
}
FIELDS = [(cls, field) for cls in CLASSES for field in cls.template_fields]
CONVERTED = [(cls, field) for cls, field in FIELDS if TEMPLATED_KINDS.get(field, AS_IS) != AS_IS]


def _build(cls: type):
    return cls(task_id="t", **REQUIRED.get(cls.__name__, {}))


def _argument(field: str) -> str:
    return {"sweep_dry_run": "dry_run", "scrub_dry_run": "dry_run"}.get(field, field)


GOOD = {
    "int": [(7, 7), ("7", 7), (" 12 ", 12), ("-3", -3), ("", None), (None, None)],
    "ints": [(["1", 2], [1, 2]), ((0,), [0]), ([], []), ("", None), (None, None)],
    "float": [("2.5", 2.5), (3, 3.0), (" 4 ", 4.0), (None, None)],
    "bool": [(True, True), (False, False), ("False", False), ("false", False), ("0", False), ("no", False),
             ("OFF", False), ("True", True), ("1", True), ("Yes", True), ("on", True), ("", None), (None, None)],
    "as_is": [("x", "x"), ([1], [1])],
}
BAD = {
    "int": ["seven", "7.5", 7.5, True, [7]],
    "ints": ["0,1", ["x"], [True], [None]],
    "float": ["soon", "nan", True, float("inf")],
    "bool": ["maybe", "Falsch", 2, 0, [True]],
}


def test_the_package_has_operators_and_sensors():
    names = {cls.__name__ for cls in CLASSES}
    assert {"SweepShardOperator", "CompactionOperator", "ScrubOperator", "SweepableWorkSensor", "LockFreeSensor"} <= names


@pytest.mark.parametrize("cls, field", FIELDS, ids=[f"{c.__name__}.{f}" for c, f in FIELDS])
def test_every_templated_field_has_a_kind_and_converts_by_it(cls, field):
    from airflow_atlas.airflow.templated import convert_templated_fields

    assert field in TEMPLATED_KINDS, f"{cls.__name__}.{field} has no conversion rule: add it to TEMPLATED_KINDS"
    for value, expected in GOOD[TEMPLATED_KINDS[field]]:
        task = _build(cls)
        setattr(task, field, value)
        convert_templated_fields(task)
        assert getattr(task, field) == expected and type(getattr(task, field)) is type(expected), (value, expected)


@pytest.mark.parametrize("cls, field", CONVERTED, ids=[f"{c.__name__}.{f}" for c, f in CONVERTED])
def test_an_unclear_value_fails_execute_at_once_naming_argument_and_value(cls, field, monkeypatch):
    """Through the task's own ``execute`` (the path Airflow runs): ``AirflowFailException`` (no retry)
    before anything else happens (no settings, no store: the connection named does not exist)."""
    from airflow.sdk.exceptions import AirflowFailException

    monkeypatch.delenv("AIRFLOW_CONN_ATLAS_TEST", raising=False)
    for value in BAD[TEMPLATED_KINDS[field]]:
        task = _build(cls)
        setattr(task, field, value)
        with pytest.raises(AirflowFailException) as failure:
            task.execute({"params": {}, "dag_run": None, "ti": None, "run_id": "r"})
        message = str(failure.value)
        named = [value, *value] if isinstance(value, list) else [value]  # a list's bad item is named
        assert _argument(field) in message and any(repr(v) in message for v in named), message
        assert "InvalidInputError" in message


@pytest.mark.parametrize("cls, field", [(c, f) for c, f in FIELDS if f in ("force", "sweep_dry_run", "scrub_dry_run",
                                                                            "skip_idle", "explain")],
                         ids=lambda x: x if isinstance(x, str) else x.__name__)
def test_a_false_rendered_to_text_is_false(cls, field):
    """``"{{ params.flag }}"`` in a DAG without native rendering renders ``"False"``: false, not true."""
    from airflow_atlas.airflow.templated import convert_templated_fields

    for flag in (False, True):
        task = _build(cls)
        setattr(task, field, "{{ params.flag }}")
        task.render_template_fields({"params": {"flag": flag}})
        assert getattr(task, field) == str(flag)  # Airflow rendered text
        convert_templated_fields(task)
        assert getattr(task, field) is flag


def test_every_int_and_bool_field_of_the_package_is_covered():
    """The int and boolean fields known today (the issue's list): each is declared with its kind."""
    from airflow_atlas.airflow.templated import BOOL, INT, INTS

    ints = {"shard", "sweep_ts", "threshold", "batch_limit", "max_iterations", "max_entries_per_second", "parts",
            "batch_size", "group_size", "max_entries", "target_ts"}
    bools = {"force", "sweep_dry_run", "scrub_dry_run", "skip_idle", "explain"}
    assert {f for f in ints if TEMPLATED_KINDS[f] != INT} == set()
    assert {f for f in bools if TEMPLATED_KINDS[f] != BOOL} == set()
    assert TEMPLATED_KINDS["shards"] == INTS
    declared = {field for _cls, field in FIELDS}
    assert ints | bools | {"shards"} <= declared


@pytest.mark.parametrize(
    "error, retried",
    [(InvalidInputError("bad"), False), (TableNotFoundError("t"), False), (StoreAccessError("who"), False),
     (StoreUnavailableError("down"), True)],
)
def test_the_one_mapping_to_airflow(error, retried):
    """InvalidInputError (and whatever no retry can fix) fails the task without retries; the rest is retried."""
    from airflow.sdk.exceptions import AirflowFailException

    from airflow_atlas.airflow.failures import airflow_failures

    with pytest.raises(Exception) as raised:  # noqa: B017 - which one is the point
        with airflow_failures():
            raise error
    if retried:
        assert raised.value is error
    else:
        assert isinstance(raised.value, AirflowFailException) and raised.value.__cause__ is error
        assert str(raised.value).startswith(type(error).__name__)
