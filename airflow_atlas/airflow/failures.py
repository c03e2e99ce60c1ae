"""The one mapping of the engine's error taxonomy to Airflow's task outcome.

An :class:`~airflow_atlas.errors.AtlasError` that no retry can fix (:func:`~airflow_atlas.errors.is_retriable`:
bad input - ``InvalidInputError``, ``TableNotFoundError`` -, a store that refuses our credentials, certificate
or permissions, a broken Spark executor environment) fails the task at once, without retries
(``AirflowFailException``, the message names the error type). Everything else (a store that is down, a lost
lease, a crash) propagates unchanged and Airflow retries it. Every operator and sensor runs its work inside
:func:`airflow_failures`.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from airflow.sdk.exceptions import AirflowFailException

from airflow_atlas.errors import AtlasError, is_retriable


@contextmanager
def airflow_failures() -> Iterator[None]:
    """Turn a non-retriable AtlasError raised in the block into ``AirflowFailException``."""
    try:
        yield
    except AtlasError as exc:
        if is_retriable(exc):
            raise
        raise AirflowFailException(f"{type(exc).__name__}: {exc}") from exc
