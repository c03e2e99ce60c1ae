"""Running one operator for real, without a DAG run: its template fields rendered by Airflow's own
``render_template_fields`` against a context, then ``execute`` against the test's store (the store comes
from ``tests/airflow/conftest.py``: connection ``atlas_test`` and the settings Variable in the environment).

The context is the task's argument; :class:`TaskInstance` is the part of the task instance the operators
read (``dag_id``, ``run_id`` for the lock holder, ``xcom_push`` for the extra XComs)."""
from __future__ import annotations

import json
from typing import Any

import pytest


class TaskInstance:
    def __init__(self, dag_id: str = "test_dag", run_id: str = "run_1"):
        self.dag_id = dag_id
        self.run_id = run_id
        self.pushed: dict[str, Any] = {}

    def xcom_push(self, key: str, value: Any) -> None:
        self.pushed[key] = value


NATIVE = {"render_template_as_native_obj": True}
"""Operator argument: templates render to Python objects (as in a DAG with that setting), not to text."""


def run_operator(operator, params: dict | None = None, ti: TaskInstance | None = None) -> tuple[Any, TaskInstance]:
    """Render ``operator``'s template fields with ``params`` and execute it; returns (the XCom value, the
    task instance). The value must be plain JSON."""
    ti = ti or TaskInstance()
    context = {"ti": ti, "params": params or {}, "dag_run": None, "run_id": ti.run_id}
    operator.render_template_fields(context)
    value = operator.execute(context)
    assert json.loads(json.dumps(value)) == value, "an XCom value must be plain JSON"
    return value, ti


def fails_at_once(call, message: str) -> None:
    """Bad input fails the task without retries (AirflowFailException), naming the problem."""
    from airflow.sdk.exceptions import AirflowFailException

    with pytest.raises(AirflowFailException) as failure:
        call()
    assert message in str(failure.value)
