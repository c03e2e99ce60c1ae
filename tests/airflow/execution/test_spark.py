"""The Spark runner interface (issue 34 item 2), without a JVM: the runner is chosen once from the Spark
connection's type; the spark mode hands a runner (the job, resolved settings, the store's address) and never
the store, nor a lease (the Spark tasks take their pairs' locks); ``submit`` is the one entry point without an
operator; the operator picks its execution-mode object from the connection, through its one hook."""
from __future__ import annotations

import json

import pytest
from airflow.sdk import Connection

from airflow_atlas.airflow.execution.deferred import DeferredMode
from airflow_atlas.airflow.execution.in_task import InTaskMode
from airflow_atlas.airflow.execution.outcome import SweepOptions
from airflow_atlas.airflow.execution.spark import SparkMode, runner_for, spark_runner, submit
from airflow_atlas.airflow.execution.spark_connect import SparkConnectRunner
from airflow_atlas.airflow.execution.spark_submit import SparkSubmitRunner
from airflow_atlas.airflow.execution.spark_types import RunSettings
from airflow_atlas.airflow.targets import SweepTarget
from airflow_atlas.kvs.address import StoreAddress
from airflow_atlas.spark import JobDocument, TargetedSweepJob
from airflow_atlas.spark.document import ItemResult

pytestmark = pytest.mark.airflow

ADDRESS = StoreAddress.from_url("cassandra://sweeper:pw@127.0.0.1:9042/ks")


@pytest.mark.parametrize(("conn_type", "runner"), [
    ("spark", SparkSubmitRunner), ("spark_connect", SparkConnectRunner), ("yarn", SparkSubmitRunner),
])
def test_the_connection_type_chooses_the_runner(conn_type, runner):
    chosen = runner_for(Connection(conn_id="s", conn_type=conn_type, host="h"))
    assert type(chosen) is runner
    assert chosen.kill() is False  # nothing runs yet


def test_a_named_connection_chooses_by_its_type_and_a_missing_default_is_spark_submit(monkeypatch):
    monkeypatch.delenv("AIRFLOW_CONN_SPARK_DEFAULT", raising=False)
    assert type(spark_runner("spark_default")) is SparkSubmitRunner  # local[*], never YARN
    monkeypatch.setenv("AIRFLOW_CONN_SC_TEST", json.dumps({"conn_type": "spark_connect", "host": "sc://127.0.0.1"}))
    assert type(spark_runner("sc_test")) is SparkConnectRunner


class RecordingRunner:
    """A runner (the interface's other side): records what it is given, answers with a document."""

    def __init__(self, document: JobDocument):
        self.document = document
        self.calls: list[tuple] = []
        self.killed = False

    def run(self, job, settings, address, context=None):
        self.calls.append((job, settings, address))
        return self.document

    def kill(self) -> bool:
        self.killed = True
        return True


def _document(*results: ItemResult) -> JobDocument:
    return JobDocument(job="targeted_sweep", ok=True, store="cassandra://127.0.0.1:9042/ks", results=list(results))


def test_the_spark_mode_gives_a_runner_the_job_settings_and_address_and_maps_the_results():
    done = ItemResult(item={"shard": 0, "strategy": "THOROUGH"}, status="caught_up",
                      engine={"shard": 0, "strategy": "THOROUGH", "status": "caught_up", "lag": 0, "backlog": 3})
    held = ItemResult(item={"shard": 1, "strategy": "THOROUGH"}, status="skipped_locked",
                      engine={"shard": 1, "strategy": "THOROUGH", "status": "skipped_locked", "lock_holder": "other"})
    runner = RecordingRunner(_document(done, held))
    settings = RunSettings(spark_conn_id="spark_test", settings={"batch_limit": 7})
    mode = SparkMode(runner, settings, ADDRESS)
    targets = [SweepTarget(0, "THOROUGH", sweep_ts=41), SweepTarget(1, "THOROUGH", sweep_ts=41)]
    outcome = mode.sweep({}, targets, SweepOptions(batch_limit=5, max_iterations=2))

    ((job, got_settings, address),) = runner.calls
    # every pair of the task, in one job: each Spark task takes its pairs' locks (no lease handed over)
    assert job == TargetedSweepJob(pairs=[(0, "THOROUGH"), (1, "THOROUGH")], batch_limit=5, max_iterations=2,
                                   sweep_timestamps={"THOROUGH": 41})
    assert got_settings is settings and address is ADDRESS
    swept = {t.shard: t for t in outcome.swept}
    assert swept[0].result is not None and swept[0].result["backlog"] == 3
    assert swept[1].result is not None and swept[1].result["status"] == "skipped_locked"
    assert outcome.document is runner.document and outcome.trigger is None and not outcome.reported
    assert mode.kill() is True and runner.killed  # on_kill reaches the runner


def test_submit_runs_a_job_with_the_runner_of_its_spark_connection(monkeypatch):
    from airflow_atlas.airflow.execution import spark

    runner = RecordingRunner(_document())
    chosen = []
    monkeypatch.setattr(spark, "spark_runner", lambda conn_id: chosen.append(conn_id) or runner)
    job = TargetedSweepJob(pairs="0:THOROUGH")
    settings = RunSettings(spark_conn_id="spark_test")
    assert submit(job, settings, ADDRESS) is runner.document
    assert chosen == ["spark_test"] and runner.calls == [(job, settings, ADDRESS)]


@pytest.fixture
def store_connection(monkeypatch):
    """A Cassandra store connection nobody connects to (the modes are chosen without opening the store)."""
    monkeypatch.setenv("AIRFLOW_CONN_ATLAS_RUNNER", json.dumps({"conn_type": "cassandra", "host": "127.0.0.1",
                                                              "port": 1, "schema": "ks", "login": "u",
                                                              "password": "pw"}))
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_SUBMIT_T", json.dumps({"conn_type": "spark", "host": "local[1]"}))
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_CONNECT_T", json.dumps({"conn_type": "spark_connect", "host": "sc://127.0.0.1"}))


@pytest.mark.parametrize(("mode", "spark_conn_id", "deferrable", "expected", "runner"), [
    ("in_task", "spark_submit_t", True, InTaskMode, None),
    ("spark", "spark_submit_t", True, SparkMode, SparkSubmitRunner),
    ("spark", "spark_connect_t", False, SparkMode, SparkConnectRunner),
    ("spark", "spark_connect_t", True, DeferredMode, None),
])
def test_the_operator_chooses_its_mode_object_once_through_its_one_hook(store_connection, mode, spark_conn_id,
                                                                        deferrable, expected, runner):
    from airflow_atlas.airflow.operators.sweep import SweepShardOperator
    from airflow_atlas.airflow.settings import AtlasSettings

    settings = AtlasSettings.from_mapping({})
    operator = SweepShardOperator(task_id="sweep", store_conn_id="atlas_runner", spark_conn_id=spark_conn_id,
                                  deferrable=deferrable, shard=0, strategy="THOROUGH")
    with operator.open_hook(settings):
        chosen = operator.sweep_mode({}, store=None, settings=settings, mode=mode)
    assert type(chosen) is expected
    if runner is not None:
        assert isinstance(chosen, SparkMode) and type(chosen.runner) is runner
        address = chosen.address  # the connection's, as an address (a URL only where it enters Spark)
        assert (address.hosts, address.port, address.keyspace, address.password) == (("127.0.0.1",), 1, "ks", "pw")
        assert address.settings == () and chosen.settings.spark_conn_id == spark_conn_id
    if isinstance(chosen, DeferredMode):
        assert chosen.store_conn_id == "atlas_runner"  # the triggerer reads the URL itself: none in the kwargs
