"""The one conversion rule for templated arguments of the operators and sensors.

A templated argument arrives as the Python value the DAG author passed, or, when it was a Jinja template, as
what it rendered to: text in a DAG with the default rendering (``"{{ params.force }}"`` renders ``"False"``), a
Python object with ``render_template_as_native_obj=True``. Every templated field has a kind in
:data:`TEMPLATED_KINDS` (by field name: a name means the same everywhere), and
:func:`convert_templated_fields`, called first by every operator's ``execute`` (and ``execute_complete``)
and by every sensor's check, converts the rendered values in place:

* ``INT``: an int, or a string of digits (an optional sign, surrounding blanks ignored); ``True``/``False``
  are refused (a bool is not a number).
* ``INTS``: a list (or tuple) whose items each follow ``INT``.
* ``FLOAT``: an int or a finite float, or a string that reads as one; bool refused.
* ``BOOL``: ``True``/``False``, or the text ``true/false``, ``1/0``, ``yes/no``, ``on/off`` in any case (the
  same words as a boolean setting's text, :class:`airflow_atlas.settings_model.Bool`); nothing else, so the
  text ``"False"`` is never true.
* ``AS_IS``: text, lists and mappings checked where they are used (strategy names, targets, settings layers).

``None`` and an empty (or blank) string mean "not given" for ``INT``, ``INTS``, ``FLOAT`` and ``BOOL`` and
become ``None``; the operator then applies its default or the setting. Anything unclear is an
:class:`~airflow_atlas.errors.InvalidInputError` naming the argument and the value, which fails the task
without retries (:mod:`airflow_atlas.airflow.failures`).
"""
from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from airflow_atlas.errors import InvalidInputError
from airflow_atlas.settings_model import Bool

INT = "int"
INTS = "ints"
FLOAT = "float"
BOOL = "bool"
AS_IS = "as_is"

TEMPLATED_KINDS: Mapping[str, str] = {
    # every operator and sensor
    "store_conn_id": AS_IS,
    "store_config": AS_IS,
    # (shard, strategy) targets, the sweep run
    "targets": AS_IS,
    "shard": INT,
    "strategy": AS_IS,
    "sweep_ts": INT,
    "sweep_dry_run": BOOL,
    "execution_mode": AS_IS,
    "spark_conn_id": AS_IS,
    "batch_limit": INT,
    "max_iterations": INT,
    "max_entries_per_second": INT,
    "planned": AS_IS,
    "finished": AS_IS,
    # timestamps and the plan
    "explain": BOOL,
    "sweep_timestamps": AS_IS,
    "shards": INTS,
    "strategies": AS_IS,
    "skip_idle": BOOL,
    "group_size": INT,
    # full sweep
    "tables": AS_IS,
    "table": AS_IS,
    "parts": INT,
    "scan_ranges": AS_IS,
    "batch_size": INT,
    # compaction, scrub, asset events
    "force": BOOL,
    "threshold": INT,
    "method": AS_IS,
    "max_entries": INT,
    "scrub_dry_run": BOOL,
    "reports": AS_IS,
    "source": AS_IS,
    # sensors
    "target_ts": INT,
    "lock": AS_IS,
}
"""The kind of every templated field of the operators and sensors, by field name."""

_DIGITS = re.compile(r"[+-]?[0-9]+")
_BOOL = Bool()


def _not_given(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def templated_int(value: Any, name: str) -> int | None:
    """``INT``: an int or a string of digits; None for "not given"."""
    if _not_given(value):
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and _DIGITS.fullmatch(value.strip()):
        return int(value.strip())
    raise InvalidInputError(f"{name} must be an integer, got {value!r}")


def templated_ints(value: Any, name: str) -> list[int] | None:
    """``INTS``: a list of ``INT`` items (each given); None for "not given"."""
    if _not_given(value):
        return None
    if not isinstance(value, (list, tuple)):
        raise InvalidInputError(f"{name} must be a list of integers, got {value!r}")
    numbers = []
    for i, item in enumerate(value):
        number = templated_int(item, f"{name}[{i}]")
        if number is None:
            raise InvalidInputError(f"{name}[{i}] must be an integer, got {item!r}")
        numbers.append(number)
    return numbers


def templated_float(value: Any, name: str) -> float | None:
    """``FLOAT``: a finite number, or text that reads as one; None for "not given"."""
    if _not_given(value):
        return None
    number: float | None = None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            number = None
    if number is None or not math.isfinite(number):
        raise InvalidInputError(f"{name} must be a finite number, got {value!r}")
    return number


def templated_bool(value: Any, name: str) -> bool | None:
    """``BOOL``: True/False or true/false, 1/0, yes/no, on/off (any case); None for "not given"."""
    if _not_given(value):
        return None
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        try:
            return _BOOL.parse(value)
        except ValueError:
            pass
    raise InvalidInputError(f"{name} must be true or false (true/false, 1/0, yes/no, on/off), got {value!r}")


CONVERTERS: Mapping[str, Callable[[Any, str], Any]] = {
    INT: templated_int,
    INTS: templated_ints,
    FLOAT: templated_float,
    BOOL: templated_bool,
    AS_IS: lambda value, _name: value,
}


def argument_name(field: str) -> str:
    """How an error names a field: its constructor argument (``dry_run`` is kept as ``sweep_dry_run`` or
    ``scrub_dry_run``: ``dry_run`` is a method of ``BaseOperator``)."""
    return "dry_run" if field in ("sweep_dry_run", "scrub_dry_run") else field


def convert_templated_fields(task: Any) -> None:
    """Convert every templated field of ``task`` (rendered) by its kind, in place; InvalidInputError naming
    the argument and the value when one is unclear, or when a field has no kind."""
    for field in task.template_fields:
        kind = TEMPLATED_KINDS.get(field)
        if kind is None:
            raise InvalidInputError(f"templated field {field!r} of {type(task).__name__} has no conversion rule "
                                    "(add it to airflow_atlas.airflow.templated.TEMPLATED_KINDS)")
        setattr(task, field, CONVERTERS[kind](getattr(task, field), argument_name(field)))
