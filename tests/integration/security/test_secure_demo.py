"""``scripts/demo.sh --secure`` (its Python entry, ``scripts/demo.py --secure``): the main job on the secured
node - the administrator initialises the store and creates the tables, then the workload, the
``atlas_targeted_sweep`` DAG run and the safety oracle run as the least-privilege role ``atlas_demo_sweeper``
over TLS - ends with the oracle's clean verdict."""
from __future__ import annotations

import subprocess
import sys
import uuid

import pytest

from tests.conftest import REPO_ROOT

pytestmark = [pytest.mark.cassandra, pytest.mark.airflow]


def test_demo_secure_runs_the_main_job_as_the_sweeper(secure_node, tmp_path):
    keyspace = f"atlas_sec_demo_{uuid.uuid4().hex[:8]}"
    command = [sys.executable, str(REPO_ROOT / "scripts" / "demo.py"), "--secure", "--keyspace", keyspace,
               "--transactions", "60", "--group-size", "8", "--work-dir", str(tmp_path)]
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=REPO_ROOT)
    finally:
        secure_node.cql(f"DROP KEYSPACE IF EXISTS {keyspace}")
    out = result.stdout + result.stderr
    assert result.returncode == 0, out[-4000:]
    assert f"role atlas_demo_sweeper granted SELECT on KEYSPACE {keyspace}" in out, out
    assert f"cassandra keyspace {keyspace} at {secure_node.host}" in out, out
    assert "DAG run success" in out and "visible data unchanged: yes" in out, out
    assert "obsolete versions left below the swept-to timestamps" in out and ": 0\n" in out, out
    assert secure_node.admin_password not in out
