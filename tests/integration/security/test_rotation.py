"""Issue 22 item 5, rotation, on the secured node: the sweeper's password is changed (``ALTER ROLE``) and the
Airflow connection updated between two runs of ``atlas_targeted_sweep`` (``dag.test()``, as the least-privilege
sweeper, over TLS): the next run works in the same process, nothing is restarted. A run in flight during the
change (the role's password altered after ``plan`` succeeded, the connection not yet updated) fails clearly -
the refusal named, each failed task tried once (an access error is never retried automatically) - and its
retry (the run cleared and run again, after the connection is updated) succeeds."""
from __future__ import annotations

import uuid
from datetime import UTC, datetime
from urllib.parse import quote

import pytest

from tests.airflow.conftest import (
    CONN_ID,
    FAST,
    engine_config,
    load_dag,
    set_connection,
    set_settings,
    task_instances,
    task_states,
    xcom,
)
from tests.integration.security.conftest import grant_sweeper
from tests.integration.security.test_secured_airflow import connection

pytestmark = [pytest.mark.cassandra, pytest.mark.airflow]


def _password(tag: str) -> str:
    return f"{tag}:r0t@te/{uuid.uuid4().hex[:8]}%"


def _write_work(secure_node, keyspace: str, role: str, password: str, seed: int) -> None:
    """A workload as the sweeper with the given password (its own session, closed), then settled."""
    from airflow_atlas.store import AtlasStore
    from airflow_atlas.workload import WorkloadSpec, run_workload
    from tests.airflow.conftest import settle

    with AtlasStore.open(secure_node.url(role, password, keyspace, create_keyspace="false"), config=engine_config()) as store:
        run_workload(store, WorkloadSpec(transactions=20, rows=10, seed=seed))
        settle(store)


def _alter_password(secure_node, role: str, password: str, deadline_s: float = 30.0) -> None:
    """``ALTER ROLE`` with the new password. Cassandra refuses a role's password change within 5 s of the last one
    (its creation included: "Password for role ... can only be changed every 5000ms", an overloaded error):
    until the deadline, such a refusal is waited out and the change tried again."""
    import time

    from cassandra.cluster import NoHostAvailable

    escaped = password.replace("'", "''")
    stop = time.monotonic() + deadline_s
    while True:
        try:
            secure_node.cql(f"ALTER ROLE {role} WITH PASSWORD = '{escaped}'")
            return
        except NoHostAvailable as exc:
            if "can only be changed every" not in str(exc) or time.monotonic() > stop:
                raise
        time.sleep(0.5)


def _until_refused(secure_node, role: str, old_password: str, deadline_s: float = 30.0) -> None:
    """Waits until the node refuses a new login with the old password. Cassandra caches credentials
    (``credentials_validity``, 2 s by default): for that long after ``ALTER ROLE`` a new connection may still log
    in with the old password. A run that starts in that window is not yet "in flight during the change"."""
    import ssl
    import time

    from cassandra import AuthenticationFailed
    from cassandra.auth import PlainTextAuthProvider
    from cassandra.cluster import Cluster, NoHostAvailable

    context = ssl.create_default_context(cafile=str(secure_node.ca))
    stop = time.monotonic() + deadline_s
    while True:
        cluster = Cluster(secure_node.host.split(","), auth_provider=PlainTextAuthProvider(role, old_password),
                          ssl_context=context, protocol_version=5)
        try:
            cluster.connect()
        except NoHostAvailable as exc:
            if not isinstance(exc.errors, dict):
                pass  # the pools failed without a reason (docs/SECURITY.md): try again
            elif any(isinstance(error, AuthenticationFailed) for error in exc.errors.values()):
                return
            else:
                raise
        finally:
            cluster.shutdown()
        assert time.monotonic() < stop, f"the old password of {role} still logs in {deadline_s} s after ALTER ROLE"
        time.sleep(0.5)


def _swept(run) -> int:
    summary = xcom(run, "summary")
    assert summary["failed_pairs"] == [], summary
    return summary["cells_tombstoned"]


def test_rotation_between_runs_and_during_a_run(secure_node, secure_keyspace, monkeypatch, airflow_home, tmp_path,
                                                caplog, capfd):
    from airflow_atlas.store import AtlasStore
    from airflow_atlas.workload import WorkloadSpec, run_workload

    first, second, third = _password("one"), _password("two"), _password("three")
    with AtlasStore.open(secure_node.admin_url(secure_keyspace), config=engine_config()) as admin:
        admin.initialize(shards=2)
        run_workload(admin, WorkloadSpec(transactions=5, rows=5, seed=1))  # the tables (CREATE: the admin's)
    role = grant_sweeper(secure_node, secure_keyspace, first, tmp_path)
    try:
        current = [first]

        def rotate_role(password: str) -> None:
            _alter_password(secure_node, role, password)
            _until_refused(secure_node, role, current[0])  # Cassandra's credentials cache, see _until_refused
            current[0] = password

        set_settings(monkeypatch, **FAST, in_task_group_size=4)  # one group: fewer tasks, each opens the store

        # during a run: the role's password changes once `plan` has succeeded (its success callback, run by the
        # task runner between two tasks), while the connection still holds the old one
        set_connection(monkeypatch, CONN_ID, connection(secure_node, secure_keyspace, role, first))
        _write_work(secure_node, secure_keyspace, role, first, seed=2)
        dag = load_dag("atlas_targeted_sweep")
        dag.get_task("plan").on_success_callback = [lambda context: rotate_role(second)]
        logical_date = datetime.now(UTC)
        failed = dag.test(logical_date=logical_date)
        # the task runner logs a failed callback and goes on: say so if the rotation itself did not happen
        assert current[0] == second, "the password was not changed after plan (see the callback's error above)"
        assert str(failed.state) == "failed", task_states(failed)
        tis = task_instances(failed)
        assert str(tis[("plan", -1)].state) == "success", task_states(failed)
        refused = {key: ti for key, ti in tis.items() if str(ti.state) == "failed"}
        assert ("sweep", 0) in refused, task_states(failed)
        assert all(ti.try_number == 1 for ti in refused.values()), {k: ti.try_number for k, ti in refused.items()}
        out, err = capfd.readouterr()
        text = caplog.text + out + err
        assert "refused the credentials" in text, text[-3000:]

        # its retry, once the connection is updated: the run (same logical date) cleared and run again
        set_connection(monkeypatch, CONN_ID, connection(secure_node, secure_keyspace, role, second))
        dag.get_task("plan").on_success_callback = []
        retried = dag.test(logical_date=logical_date)
        assert retried.logical_date == failed.logical_date
        assert str(retried.state) == "success", task_states(retried)
        assert _swept(retried) > 0

        # between two runs: ALTER ROLE, then the connection; the next run works (same process, no restart)
        rotate_role(third)
        set_connection(monkeypatch, CONN_ID, connection(secure_node, secure_keyspace, role, third))
        _write_work(secure_node, secure_keyspace, role, third, seed=3)
        run = load_dag("atlas_targeted_sweep").test()
        assert str(run.state) == "success", task_states(run)
        assert _swept(run) > 0

        out, err = capfd.readouterr()
        text += caplog.text + out + err
        for secret in (first, second, third):
            for form in (secret, quote(secret, safe=""), quote(secret)):
                assert form not in text
    finally:
        secure_node.cql(f"DROP ROLE IF EXISTS {role}")
