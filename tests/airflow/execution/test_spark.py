"""The Spark runner interface (issue 34 item 2), without a JVM: the runner is chosen once from the Spark
connection's type; the spark mode hands a runner (job, resolved settings, store address) and never the
store; the operator picks its execution-mode object from the connection, through its one hook."""
from __future__ import annotations

import json

import pytest
from airflow.sdk import Connection

from airflow_atlas.airflow.execution.deferred import DeferredMode
from airflow_atlas.airflow.execution.in_task import InTaskMode
from airflow_atlas.airflow.execution.outcome import SweepOptions
from airflow_atlas.airflow.execution.spark import SparkMode, runner_for, spark_runner
from airflow_atlas.airflow.execution.spark_connect import SparkConnectRunner
from airflow_atlas.airflow.execution.spark_submit import SparkSubmitRunner
from airflow_atlas.airflow.execution.spark_types import RunSettings, SparkJob
from airflow_atlas.airflow.targets import SweepTarget
from airflow_atlas.spark import JobDocument
from airflow_atlas.spark.document import ItemResult

pytestmark = pytest.mark.airflow

URL = "cassandra://sweeper:pw@127.0.0.1:9042/ks"


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

    def run(self, job, settings, store_url, context=None):
        self.calls.append((job, settings, store_url))
        return self.document

    def kill(self) -> bool:
        self.killed = True
        return True


def _document(*results: ItemResult) -> JobDocument:
    return JobDocument(job="targeted_sweep", ok=True, store="cassandra://127.0.0.1:9042/ks", results=list(results))


def test_the_spark_mode_gives_a_runner_the_job_settings_and_address_and_maps_the_results():
    done = ItemResult(item={"shard": 0, "strategy": "THOROUGH"}, status="caught_up",
                      engine={"shard": 0, "strategy": "THOROUGH", "status": "caught_up", "lag": 0, "backlog": 3})
    runner = RecordingRunner(_document(done))
    settings = RunSettings(spark_conn_id="spark_test", settings={"batch_limit": 7})
    mode = SparkMode(runner, settings, URL)
    targets = [SweepTarget(0, "THOROUGH", sweep_ts=41), SweepTarget(1, "THOROUGH", acquired=False, held_by="other")]
    outcome = mode.sweep({}, targets, SweepOptions(batch_limit=5, max_iterations=2))

    ((job, got_settings, store_url),) = runner.calls
    assert job == SparkJob.targeted_sweep([(0, "THOROUGH")], 5, 2, False, {"THOROUGH": 41})  # the locked pair only
    assert got_settings is settings and store_url == URL
    swept = {t.shard: t for t in outcome.swept}
    assert swept[0].result is not None and swept[0].result["backlog"] == 3
    assert swept[1].result is not None and swept[1].result["status"] == "skipped_locked"
    assert outcome.document is runner.document and outcome.trigger is None and not outcome.reported
    assert mode.kill() is True and runner.killed  # on_kill reaches the runner


def test_a_spark_mode_with_every_pair_skipped_runs_nothing():
    runner = RecordingRunner(_document())
    outcome = SparkMode(runner, RunSettings(), URL).sweep({}, [SweepTarget(0, "THOROUGH", acquired=False)],
                                                          SweepOptions(batch_limit=5, max_iterations=2))
    assert runner.calls == [] and [t.result["status"] for t in outcome.swept if t.result] == ["skipped_locked"]


def test_a_job_of_an_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="Spark job kind"):
        SparkJob("compaction", {})


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
        assert chosen.store_url.startswith("cassandra://") and chosen.settings.spark_conn_id == spark_conn_id
    if isinstance(chosen, DeferredMode):
        assert chosen.store_conn_id == "atlas_runner"  # the triggerer reads the URL itself: none in the kwargs
