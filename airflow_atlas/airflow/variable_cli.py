"""Reading an Airflow Variable from a process that is neither a task nor an Airflow server
(``atlas-sweep --conn-id``): there the Task SDK's ``Variable.get`` does not reach the metadata database, so
the Variable is read as Airflow's own CLI reads it - ``airflow variables get`` (the environment, the secrets
backends, then the database: the precedence a task sees), Airflow's public interface, run with this
interpreter. It costs an Airflow CLI start (a few seconds) per call."""
from __future__ import annotations

import json
import subprocess
import sys

from airflow_atlas.errors import InvalidInputError


def variable_through_airflow_cli(name: str) -> str:
    """The Variable's text as ``airflow variables get <name>`` prints it (empty when it does not
    exist), run with this interpreter; InvalidInputError with Airflow's message when the command fails.
    The value is what the command prints last (log lines may come before it; a stored JSON value may span
    lines): the shortest tail of the output that is JSON, else its last line."""
    command = [sys.executable, "-m", "airflow", "variables", "get", name, "--default", ""]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        detail = (result.stderr.strip() or result.stdout.strip()).splitlines()[-1:] or ["no output"]
        raise InvalidInputError(f"reading the {name} Variable with `airflow variables get` failed "
                                f"(exit {result.returncode}): {detail[0]}")
    lines = result.stdout.removesuffix("\n").split("\n")
    for start in range(len(lines) - 1, -1, -1):
        tail = "\n".join(lines[start:])
        try:
            json.loads(tail)
        except ValueError:
            continue
        return tail
    return lines[-1]
