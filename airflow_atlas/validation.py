"""Argument checks shared by the whole engine and the glue (public; never imports a backend driver).

The key-value backends keep their own, richer checks in ``kvs/_common`` (private to ``kvs/``); everything
outside ``kvs/`` that validates a number imports it from here. Each check raises
:class:`~airflow_atlas.errors.InvalidInputError` naming what was wrong (CLI exit 2, Airflow task failed
without retry).
"""
from __future__ import annotations

import math

from .encoding import LONG_MAX, LONG_MIN
from .errors import InvalidInputError

__all__ = ["check_float", "check_int"]


def check_int(value: object, what: str, lo: int = LONG_MIN, hi: int = LONG_MAX) -> int:
    """An integer (never bool) with ``lo <= value <= hi``."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidInputError(f"{what} must be an integer, got {type(value).__name__}")
    if not lo <= value <= hi:
        raise InvalidInputError(f"{what} must be an integer in {lo}..{hi}, got {value!r}")
    return value


def check_float(value: object, what: str, lo: float, hi: float = math.inf, *, finite: bool = True) -> float:
    """A number (int or float, never bool) with ``lo < value <= hi``; ``finite=False`` also accepts inf."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidInputError(f"{what} must be a number, got {type(value).__name__}")
    number = float(value)
    if (finite and not math.isfinite(number)) or not lo < number <= hi:
        raise InvalidInputError(f"{what} must be a number in ({lo}, {hi}], got {number!r}")
    return number
