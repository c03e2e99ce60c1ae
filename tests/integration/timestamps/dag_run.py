"""One run of a DAG with the real ``dag.test()`` in a process of its own, for test_upgrade.py: the previous
release's ``atlas_targeted_sweep`` runs so, with that release's package first on ``PYTHONPATH`` and its DAG
file in ``AIRFLOW__CORE__DAGS_FOLDER`` (``dag.test()`` syncs that folder's DAGs to the metadata database), on
the Airflow of this venv and the test run's metadata database (``AIRFLOW_HOME``), as a worker not yet
upgraded would run it.

Usage: ``python dag_run.py DAGS_FOLDER DAG_ID``. Prints one line, :data:`RESULT_PREFIX` and a JSON object:
``package`` (the ``airflow_atlas`` this process imported), ``dag_file``, the run's ``state``, its ``tasks``
(``task_id``, ``map_index``, ``state``, ``try_number``, ``end_date`` as epoch seconds) and ``xcom`` (every
``return_value``: ``task_id``, ``map_index``, ``value``). A failed run exits 0 too: what failed is in the JSON
and the tasks' log (``dag.test()`` logs them to this process's output). Exit 2 when the folder does not parse.
Imports nothing of the tests: the process's ``sys.path`` is this directory and ``PYTHONPATH``.
"""
from __future__ import annotations

import json
import sys
from typing import Any

RESULT_PREFIX = "DAG-RUN-RESULT "


def main(argv: list[str]) -> int:
    dags_folder, dag_id = argv
    from airflow.dag_processing.dagbag import DagBag
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    import airflow_atlas

    bag = DagBag(dag_folder=dags_folder)
    if bag.import_errors or dag_id not in bag.dags:
        print(f"{dags_folder}: import errors {bag.import_errors}, DAGs {sorted(bag.dags)}", file=sys.stderr)
        return 2
    dag = bag.dags[dag_id]
    run = dag.test()
    tasks = [
        {"task_id": ti.task_id, "map_index": ti.map_index, "state": str(ti.state), "try_number": ti.try_number,
         "end_date": None if ti.end_date is None else ti.end_date.timestamp()}
        for ti in run.get_task_instances()
    ]
    with create_session() as session:
        rows = session.query(XComModel).filter_by(dag_id=run.dag_id, run_id=run.run_id, key="return_value").all()
        xcom: list[dict[str, Any]] = [
            {"task_id": row.task_id, "map_index": row.map_index, "value": XComModel.deserialize_value(row)}
            for row in rows
        ]
    result = {"package": airflow_atlas.__file__, "dag_file": dag.fileloc, "state": str(run.state), "tasks": tasks,
              "xcom": xcom}
    print(RESULT_PREFIX + json.dumps(result, default=str), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
