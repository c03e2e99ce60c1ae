"""A secrets backend that records every Variable and connection lookup (to the file named by
``$ATLAS_TEST_SECRETS_LOG``) and finds nothing, so Airflow goes on to its other backends.

Configured with Airflow's own extension point (``[secrets] backend``, i.e. ``AIRFLOW__SECRETS__BACKEND``):
Airflow asks a configured backend first, in every context (a task, the DAG processor, a plain DagBag), so
it sees every ``Variable.get`` - used by test_parse_queries.py to prove that parsing a DAG file reads none.
"""
from __future__ import annotations

import os

from airflow.secrets import BaseSecretsBackend

LOG_ENV = "ATLAS_TEST_SECRETS_LOG"


class CountingSecretsBackend(BaseSecretsBackend):
    def _record(self, kind: str, key: str) -> None:
        with open(os.environ[LOG_ENV], "a", encoding="utf-8") as log:
            log.write(f"{kind} {key}\n")

    def get_variable(self, key: str, team_name: str | None = None) -> str | None:
        self._record("variable", key)
        return None

    def get_conn_value(self, conn_id: str, team_name: str | None = None) -> str | None:
        self._record("connection", conn_id)
        return None
