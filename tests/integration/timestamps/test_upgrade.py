"""Upgrade in place (issue 45 item 5): a Cassandra store with history from the previous release is adopted by a
timestamp server of this release and keeps working; the previous release then refuses the store.

The previous release is commit :data:`PREVIOUS_RELEASE` (the last one before the timestamp server), built once
into a wheel (cached under ``~/.cache/airflow-atlas/previous-release/<commit>/``) and unpacked into a directory
that its processes put first on ``PYTHONPATH``: they run this venv's interpreter and dependencies with the old
``airflow_atlas`` package. Every step goes through the real CLI of one release or the other, as an operator's
upgrade would, or through the real ``atlas_targeted_sweep`` DAG of each: the DAGs keep running across the
upgrade. The previous release's DAG file comes from ``git show`` of its commit (the wheel ships no ``dags/``)
and runs with ``dag.test()`` in a process of that release (``dag_run.py``, ``AIRFLOW__CORE__DAGS_FOLDER`` its
folder), as a worker not yet upgraded would; this release's DAG runs in this process, as the suite's DAG tests
run it. Both use the test run's one Airflow metadata database (``AIRFLOW_HOME``, tests/conftest.py), as a
deployment's Airflow keeps its database across the package upgrade.
"""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from airflow_atlas.encoding import from_fixed_long
from airflow_atlas.kvs import StoreAddress, open_kvs
from airflow_atlas.kvs.api import KeyValueService
from airflow_atlas.store import AtlasStore
from airflow_atlas.timestamps import StoreServedByServerError, TimestampService
from airflow_atlas.timestamps.record import BOUND_CELL, TIMESTAMP_TABLE, marker, marker_bound
from devkit.airflow import free_port
from devkit.timestamps import start_server
from tests.airflow.conftest import CONN_ID, FAST, load_dag, set_connection, set_settings, settle, task_states, xcom
from tests.conftest import CASSANDRA_HOST, CASSANDRA_PORT, REPO_ROOT

from .dag_run import RESULT_PREFIX

pytestmark = pytest.mark.cassandra

PREVIOUS_RELEASE = "9c35cdc"
CACHE_DIR = Path.home() / ".cache" / "airflow-atlas" / "previous-release" / PREVIOUS_RELEASE
BUILD_TIMEOUT = 300.0
CLI_TIMEOUT = 120.0
TABLES = ("--table", "t:CONSERVATIVE", "--table", "u:THOROUGH")
OLD_ERROR = "fixed long needs 8 bytes"
OPEN_MARGIN_SECONDS = 10.0
"""The open transaction of the previous release counts as open until this long before its lease ends."""
DAG_ID = "atlas_targeted_sweep"
DAG_RUN = Path(__file__).with_name("dag_run.py")
DAG_RUN_TIMEOUT = 300.0
DAG_LEASE_SECONDS = 40.0
"""The lease of the previous release's open transaction in the DAG test: it holds back that release's DAG run
(seconds after the workload) and has ended before this release's run (the test waits for the rest)."""
OLD_DAG_TASK = "shard.acquire_lock"
"""A task of the previous release's DAG only (a task group per group of pairs; this release's has one task)."""
DAG_SETTINGS: dict[str, Any] = {
    **FAST, "store_config": {**FAST["store_config"], "sweep_max_entries_per_second": 0},
}
"""The suite's fast DAG settings (1 s retry delays, a 1 s read-only window), the sweep unpaced; the same keys
for both releases."""
STRATEGIES = ("CONSERVATIVE", "THOROUGH")


def _run(argv: list[str], *, cwd: Path, env: dict[str, str] | None = None, timeout: float = CLI_TIMEOUT,
         input_bytes: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=cwd, env=env, timeout=timeout, capture_output=True, input=input_bytes)


def _checked(result: subprocess.CompletedProcess, what: str) -> subprocess.CompletedProcess:
    assert result.returncode == 0, f"{what} exited {result.returncode}:\n{result.stdout!r}\n{result.stderr!r}"
    return result


def _build_isolation_flags() -> list[str]:
    """``--no-build-isolation`` when this venv can build the project itself (setuptools>=68 and wheel, as
    pyproject.toml requires); else pip builds in an isolated environment from the index."""
    if importlib.util.find_spec("wheel") is None or importlib.util.find_spec("setuptools") is None:
        return []
    import setuptools

    return ["--no-build-isolation"] if int(setuptools.__version__.split(".")[0]) >= 68 else []


def _previous_wheel(scratch: Path) -> Path:
    """The previous release's wheel: from the cache, else built from ``git archive`` of its commit."""
    cached = sorted(CACHE_DIR.glob("airflow_atlas-*.whl"))
    if cached and zipfile.is_zipfile(cached[0]):
        return cached[0]
    source, out = scratch / "source", scratch / "wheel"
    source.mkdir()
    archive = _checked(_run(["git", "-C", str(REPO_ROOT), "archive", PREVIOUS_RELEASE], cwd=scratch, timeout=60),
                       f"git archive {PREVIOUS_RELEASE}")
    _checked(_run(["tar", "-x", "-C", str(source)], cwd=scratch, input_bytes=archive.stdout, timeout=60), "tar -x")
    # An absolute path: pip reads a bare word as a package name on the index.
    _checked(_run([sys.executable, "-m", "pip", "wheel", "--no-deps", *_build_isolation_flags(), "-w", str(out),
                   str(source.resolve())], cwd=scratch, timeout=BUILD_TIMEOUT), "pip wheel")
    (built,) = out.glob("airflow_atlas-*.whl")
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    partial = CACHE_DIR / f".{built.name}.{os.getpid()}"
    shutil.copyfile(built, partial)
    os.replace(partial, CACHE_DIR / built.name)  # atomic: a concurrent run sees the whole wheel or none
    return CACHE_DIR / built.name


@pytest.fixture(scope="module")
def previous_release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The previous release's packages, unpacked (the ``PYTHONPATH`` of its processes); checked to be what such
    a process imports: its ``airflow_atlas`` lives there and has the module ``timestamps.py`` (this release
    has a ``timestamps/`` package instead)."""
    scratch = tmp_path_factory.mktemp("previous-release")
    old = scratch / "site"
    with zipfile.ZipFile(_previous_wheel(scratch)) as wheel:
        wheel.extractall(old)
    probe = _checked(_run(
        [sys.executable, "-c", "import json, airflow_atlas, airflow_atlas.timestamps as t; "
         "print(json.dumps([airflow_atlas.__file__, t.__file__]))"],
        cwd=scratch, env=_old_env(old), timeout=60), "the previous release's import probe")
    package, timestamps = (Path(p) for p in json.loads(probe.stdout))
    assert package.is_relative_to(old), f"the previous release's process imported {package}, not from {old}"
    assert timestamps == old / "airflow_atlas" / "timestamps.py", timestamps
    return old


def _old_env(old: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("ATLAS_STORE_URL", "PYTHONPATH")}
    return {**env, "PYTHONPATH": str(old)}


def _new_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "ATLAS_STORE_URL"}
    return {**env, "PYTHONPATH": str(REPO_ROOT)}


@dataclass
class Release:
    """The CLI of one release against one store. Its processes run in ``cwd``, outside the repository: ``python
    -m`` puts the working directory first on ``sys.path``, which would shadow ``PYTHONPATH``."""

    url: str
    env: dict[str, str]
    cwd: Path

    def run(self, *args: str) -> subprocess.CompletedProcess:
        return _run([sys.executable, "-m", "airflow_atlas.cli", "--store", self.url, *args],
                    cwd=self.cwd, env=self.env)

    def json(self, *args: str) -> dict:
        result = _checked(self.run(*args, "--json"), f"atlas-sweep {' '.join(args)}")
        assert b"Traceback" not in result.stderr, result.stderr.decode(errors="replace")
        return json.loads(result.stdout)


@pytest.fixture
def store_url(cassandra_node: tuple[str, int], fresh_keyspace: str) -> str:
    return f"cassandra://{CASSANDRA_HOST}:{CASSANDRA_PORT}/{fresh_keyspace}"


@pytest.fixture
def kvs(store_url: str) -> Iterator[KeyValueService]:
    """This release's key-value service on the store, for reading cells directly."""
    service = open_kvs(StoreAddress.from_url(store_url))
    yield service
    service.close()


def _bound_cell(kvs: KeyValueService) -> bytes | None:
    return kvs.get_lwt(TIMESTAMP_TABLE, [BOUND_CELL], serial=True).get(BOUND_CELL)


def _contents(session, keyspace: str) -> dict[str, list[tuple]]:
    """Every row of every table of the keyspace, but the timestamp server's own record (``ts/server``, which a
    running server renews): a write by a process shows here as a difference."""
    tables = [r.table_name for r in session.execute(
        "SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s", (keyspace,))]
    contents = {}
    for table in sorted(tables):
        rows = [tuple(r) for r in session.execute(f'SELECT * FROM "{keyspace}"."{table}"')]
        contents[table] = sorted((r for r in rows if r[:2] != (b"ts", b"server")), key=repr)
    return contents


def test_upgrade_in_place_from_the_previous_release(previous_release: Path, store_url: str, kvs: KeyValueService,
                                                    cassandra_session, fresh_keyspace: str, tmp_path: Path) -> None:
    """History written and swept by the previous release, then ``timestamps adopt`` and one server of this
    release: timestamps continue above every one the cell issued, this release writes, sweeps and verifies the
    store; the previous release fails on it without writing anything, and this release's cell service refuses it."""
    old = Release(store_url, _old_env(previous_release), tmp_path)
    new = Release(store_url, _new_env(), tmp_path)

    # ----- the previous release: history, one sweep, one transaction left open
    old.json("init", *TABLES)
    written = old.json("workload", "-n", "150", "--open-transactions", "1", "--no-progress", *TABLES)
    open_until = time.monotonic() + written["lease_seconds"] - OPEN_MARGIN_SECONDS
    assert written["committed"] > 0 and len(written["open"]) == 1, written
    swept = old.json("sweep", "--max-entries-per-second", "0", "--no-progress")
    assert sum(r["entries_read"] for r in swept["results"]) > 0, swept
    before = _bound_cell(kvs)
    assert before is not None and len(before) == 8, before
    cell_bound = from_fixed_long(before)
    assert cell_bound > written["open"][0], (cell_bound, written)

    # ----- the upgrade: adopt with this release, then one server
    adopted = new.json("timestamps", "adopt")
    assert adopted["bound_at_adoption"] == cell_bound, adopted
    assert _bound_cell(kvs) == marker(cell_bound)
    with pytest.raises(StoreServedByServerError):
        TimestampService(kvs).fresh_timestamp()

    server = start_server(store_url, f"127.0.0.1:{free_port()}", tmp_path / "timestamps.log")
    try:
        store = AtlasStore.open(store_url)
        try:
            first = store.timestamps.fresh_timestamp()
            assert first > cell_bound, (first, cell_bound)

            # ----- the previous release after adoption: a clear error, and nothing written
            snapshot = _contents(cassandra_session, fresh_keyspace)
            for args in (("workload", "-n", "5", "--no-progress", *TABLES), ("sweep", "--no-progress")):
                result = old.run(*args)
                stderr = result.stderr.decode(errors="replace")
                assert result.returncode != 0 and OLD_ERROR in stderr, (args, result.returncode, stderr)
                assert "Traceback" not in stderr, stderr
            assert _bound_cell(kvs) == marker(cell_bound)
            assert _contents(cassandra_session, fresh_keyspace) == snapshot
            assert store.timestamps.fresh_timestamp() > first
        finally:
            store.close()

        # ----- this release on the adopted store: write, sweep (CONSERVATIVE too: a 1 s window), verify
        assert new.json("workload", "-n", "50", "--no-progress", *TABLES)["committed"] > 0
        time.sleep(1.5)  # past the unreadable window of the sweep below
        window = ("--set", "unreadable_window_seconds=1")
        still_open = time.monotonic() < open_until
        swept = new.json("sweep", "--max-entries-per-second", "0", "--no-progress", *window)
        by_strategy = {r["strategy"]: r for r in swept["results"]}
        assert all(r["error"] is None for r in swept["results"]), swept
        assert by_strategy["CONSERVATIVE"]["sweep_ts"] > 0 and by_strategy["CONSERVATIVE"]["entries_read"] > 0, swept
        if still_open:  # the previous release's open transaction, within its lease, still holds sweep back
            assert by_strategy["THOROUGH"]["sweep_ts"] <= written["open"][0], (written["open"], swept)
        verified = new.run("verify", "--json", *window)
        assert verified.returncode == 0 and json.loads(verified.stdout)["ok"] is True, (
            verified.stdout.decode(errors="replace"), verified.stderr.decode(errors="replace"))
        assert marker_bound(_bound_cell(kvs)) == cell_bound  # nothing of this release drew from the cell either
    finally:
        server.stop()


# ----- the DAGs across the upgrade ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def previous_dags(previous_release: Path) -> Path:
    """A DAG folder with the previous release's ``atlas_targeted_sweep.py``, from ``git show`` of its commit."""
    folder = previous_release.parent / "dags"
    folder.mkdir()
    source = _checked(_run(["git", "-C", str(REPO_ROOT), "show", f"{PREVIOUS_RELEASE}:dags/{DAG_ID}.py"],
                           cwd=folder, timeout=60), f"git show {PREVIOUS_RELEASE}:dags/{DAG_ID}.py")
    (folder / f"{DAG_ID}.py").write_bytes(source.stdout)
    return folder


@dataclass
class PreviousDagRun:
    """What ``dag_run.py`` reported of one run of the previous release's DAG, and the process's output (the
    tasks' log: ``dag.test()`` logs them there)."""

    state: str
    tasks: dict[tuple[str, int], dict]
    xcom: dict[tuple[str, int], Any]
    output: str

    def tail(self, chars: int = 6000) -> str:
        return f"state {self.state}, tasks {self.states()}\n...{self.output[-chars:]}"

    def states(self) -> dict[tuple[str, int], str]:
        return {key: task["state"] for key, task in self.tasks.items()}


def _previous_dag_run(old: Path, dags: Path, cwd: Path) -> PreviousDagRun:
    """One run of the previous release's ``atlas_targeted_sweep`` (``dag.test()``) in a process of that release;
    its connection and settings are this process's environment (``set_connection``, ``set_settings``)."""
    env = {**_old_env(old), "AIRFLOW__CORE__DAGS_FOLDER": str(dags)}
    result = _run([sys.executable, str(DAG_RUN), str(dags), DAG_ID], cwd=cwd, env=env, timeout=DAG_RUN_TIMEOUT)
    stdout, stderr = result.stdout.decode(errors="replace"), result.stderr.decode(errors="replace")
    lines = [line for line in stdout.splitlines() if line.startswith(RESULT_PREFIX)]
    assert result.returncode == 0 and len(lines) == 1, (result.returncode, stdout[-4000:], stderr[-4000:])
    document = json.loads(lines[0][len(RESULT_PREFIX):])
    assert Path(document["package"]).is_relative_to(old), document["package"]  # that release's package ran it
    assert Path(document["dag_file"]).resolve() == (dags / f"{DAG_ID}.py").resolve(), document["dag_file"]  # its DAG
    return PreviousDagRun(
        state=document["state"],
        tasks={(t["task_id"], t["map_index"]): t for t in document["tasks"]},
        xcom={(x["task_id"], x["map_index"]): x["value"] for x in document["xcom"]},
        output=stdout + stderr,
    )


def _progress(store: AtlasStore) -> dict[tuple[int, str], int]:
    return {(shard, strategy): store.queue.progress.get_progress(shard, strategy)
            for shard in range(store.number_of_shards()) for strategy in STRATEGIES}


@pytest.mark.airflow
def test_the_sweep_dag_runs_before_and_after_the_upgrade(previous_release: Path, previous_dags: Path, store_url: str,
                                                         kvs: KeyValueService, cassandra_session, fresh_keyspace: str,
                                                         airflow_home: Path, monkeypatch, tmp_path: Path) -> None:
    """The previous release's ``atlas_targeted_sweep`` sweeps its history (held back by its open transaction),
    ``timestamps adopt`` and one server of this release; then a run of the previous release's DAG fails at its
    first task with that release's clear error (in the task's log; not retried), planning, sweeping and writing
    nothing, and this release's DAG sweeps what the first run left (the open transaction's lease over) and this
    release's new writes: past both, the data every reader sees unchanged, no obsolete version left, every
    pair's progress beyond the first run's; ``verify`` is clean."""
    from airflow_atlas.oracle import Reader, compare, observe, obsolete_versions
    from airflow_atlas.workload import WorkloadSpec, run_workload

    set_connection(monkeypatch, CONN_ID, {"conn_type": "cassandra", "host": CASSANDRA_HOST, "port": CASSANDRA_PORT,
                                          "schema": fresh_keyspace})
    set_settings(monkeypatch, **DAG_SETTINGS)
    old = Release(store_url, _old_env(previous_release), tmp_path)
    new = Release(store_url, _new_env(), tmp_path)

    # ----- the previous release: history and an open transaction (its CLI), one run of its DAG
    old.json("init", *TABLES)
    began = time.time()
    written = old.json("workload", "-n", "150", "--open-transactions", "1", "--no-progress", *TABLES,
                       "--set", f"transaction_lease_seconds={DAG_LEASE_SECONDS:g}",
                       "--set", "punch_interval_seconds=0")  # punches up to the end: the 1 s window passes over it
    lease_over = time.time() + written["lease_seconds"]  # the registration is at most this old when it expires
    (open_start,) = written["open"]
    first = _previous_dag_run(previous_release, previous_dags, tmp_path)
    assert first.state == "success", first.tail()
    assert (OLD_DAG_TASK, 0) in first.tasks, first.states()
    first_ts = first.xcom[("compute_sweep_timestamps", -1)]
    computed_after = first.tasks[("compute_sweep_timestamps", -1)]["end_date"] - began
    assert all(first_ts[s] <= open_start for s in STRATEGIES), (first_ts, open_start, computed_after)
    first_summary = first.xcom[("summary", -1)]
    assert first_summary["failed_pairs"] == [] and first_summary["entries_read"] > 0, first_summary

    # ----- the upgrade: adopt with this release, then one server
    cell_bound = new.json("timestamps", "adopt")["bound_at_adoption"]
    server = start_server(store_url, f"127.0.0.1:{free_port()}", tmp_path / "timestamps.log")
    try:
        store = AtlasStore.open(store_url)
        try:
            progress_before = _progress(store)  # the first run's
            assert all(value > -1 for value in progress_before.values()), progress_before

            # ----- the previous release's DAG after adoption: its run fails with the clear error, writes nothing
            snapshot = _contents(cassandra_session, fresh_keyspace)
            refused = _previous_dag_run(previous_release, previous_dags, tmp_path)
            assert refused.state == "failed", refused.tail()
            # its first task fails at once (the error is bad input to it: no retry can fix it, none is made) ...
            compute = refused.tasks[("compute_sweep_timestamps", -1)]
            assert compute["state"] == "failed" and compute["try_number"] == 1, refused.tail()
            assert OLD_ERROR in refused.output, refused.tail()
            # ... and nothing was planned or swept
            swept = {state for (task_id, _), state in refused.states().items() if task_id in ("plan", OLD_DAG_TASK)}
            assert swept == {"upstream_failed"}, refused.tail()
            assert _bound_cell(kvs) == marker(cell_bound)
            assert _contents(cassandra_session, fresh_keyspace) == snapshot

            # ----- this release: new writes, then its DAG (in this process) once the open transaction's lease is over
            report = run_workload(store, WorkloadSpec(transactions=50, rows=40, tables={"t": "CONSERVATIVE",
                                                                                        "u": "THOROUGH"}, seed=13))
            assert report.committed > 0, report
            above_new_writes = store.timestamps.fresh_timestamp()
            time.sleep(max(0.0, lease_over - time.time()))
            settle(store)  # a punch, then the read-only window passes over it
            fresh = store.timestamps.fresh_timestamp()
            readers = [Reader(fresh), Reader(fresh, read_only=True)]
            seen = observe(store, readers)
            run = load_dag(DAG_ID).test()
            states = task_states(run)
            assert str(run.state) == "success", states
            assert (OLD_DAG_TASK, 0) not in states, states
            sweep_ts = xcom(run, "compute_sweep_timestamps")
            assert all(sweep_ts[s] > max(open_start, above_new_writes) for s in STRATEGIES), (
                sweep_ts, open_start, above_new_writes)
            summary = xcom(run, "summary")
            assert summary["failed_pairs"] == [] and summary["entries_read"] > 0, summary
            assert compare(seen, observe(store, readers), sweep_ts) == []
            assert obsolete_versions(store, sweep_ts) == []
            progress_after = _progress(store)
            assert all(progress_after[pair] > progress_before[pair] for pair in progress_before), (
                progress_before, progress_after)
        finally:
            store.close()
        verified = new.run("verify", "--json", "--set", "unreadable_window_seconds=1")
        assert verified.returncode == 0 and json.loads(verified.stdout)["ok"] is True, (
            verified.stdout.decode(errors="replace"), verified.stderr.decode(errors="replace"))
        assert marker_bound(_bound_cell(kvs)) == cell_bound  # nothing of this release drew from the cell
    finally:
        server.stop()
