"""The Spark Connect job trigger's pure logic: its kwargs (small, JSON, no store URL, checked at once), the
event it makes of a job's outcome (scrubbed of the URL and its secrets, retriable or not) and the task side's
reading of that event. The trigger running real jobs from an event loop: tests/spark/test_spark_connect_deferred.py."""
from __future__ import annotations

import json

import pytest

from airflow_atlas.airflow.execution.spark_connect import ConnectRequest
from airflow_atlas.airflow.execution.spark_types import SparkSweepFailed, SparkSweepRefused
from airflow_atlas.airflow.triggers.spark_connect import (
    SparkConnectJobTrigger,
    describe_event,
    document_from_event,
    job_event,
)
from airflow_atlas.errors import InvalidInputError
from airflow_atlas.kvs.address import StoreAddress
from airflow_atlas.serialisation import to_json
from airflow_atlas.spark import JobDocument, TargetedSweepJob
from tests.airflow.conftest import import_string

PASSWORD = "s3cr%t/pw"
URL = f"cassandra://sweeper:{PASSWORD.replace('%', '%25').replace('/', '%2F')}@127.0.0.1:9042/ks"
ADDRESS = StoreAddress.from_url(URL)


def request() -> dict:
    job = TargetedSweepJob(pairs=[(0, "THOROUGH"), (1, "CONSERVATIVE")], batch_limit=10, sweep_timestamps={"THOROUGH": 99})
    return ConnectRequest(job=job, spark_conn_id="spark_connect_test", settings={"batch_limit": 10}).to_json()


def test_serialize_round_trips_without_the_store_url():
    trigger = SparkConnectJobTrigger(request=request(), store_conn_id="atlas_test")
    classpath, kwargs = trigger.serialize()
    assert set(kwargs) == {"request", "store_conn_id"}
    text = json.dumps(kwargs)  # JSON as stored in the metadata DB (trigger table)
    assert "cassandra://" not in text and "sqlite:" not in text and len(text) < 1500
    clone = import_string(classpath)(**json.loads(text))
    assert clone.serialize() == (classpath, kwargs)
    assert kwargs["request"]["tag"].startswith("atlas-")  # fixed when the task deferred: on_kill finds the job
    assert kwargs["request"]["kind"] == "targeted-sweep"
    assert kwargs["request"]["job"]["pairs"] == [[0, "THOROUGH"], [1, "CONSERVATIVE"]]
    assert clone.request == trigger.request  # the same job object, parsed once on each side


def test_each_request_gets_its_own_tag():
    assert request()["tag"] != request()["tag"]


@pytest.mark.parametrize(("change", "error", "match"), [
    ({"kind": "scrub"}, ValueError, "kind must be one of"),
    ({"spark_conn_id": ""}, ValueError, "spark_conn_id is required"),
    ({"job": {"pairs": "0:NOTHING"}}, (ValueError, InvalidInputError), "NOTHING"),
    ({"job": {"pairs": "x:THOROUGH"}}, (ValueError, InvalidInputError), None),
    ({"job": {"pairs": "0:THOROUGH", "tables": ["t"]}}, ValueError, "unknown targeted-sweep job argument"),
])
def test_bad_requests_fail_before_anything_is_deferred(change, error, match):
    with pytest.raises(error, match=match):
        ConnectRequest.from_json({**request(), **change})


def test_trigger_needs_the_store_connection():
    with pytest.raises(ValueError, match="store_conn_id"):
        SparkConnectJobTrigger(request=request(), store_conn_id="")


def document(**changes) -> JobDocument:
    fields = {"job": "targeted_sweep", "ok": True, "store": "cassandra://sweeper:***@127.0.0.1:9042/ks",
              "params": {"pairs": [[0, "THOROUGH"]]}, "summary": {"entries_read": 3}}
    return JobDocument(**{**fields, **changes})


def test_a_finished_job_becomes_a_done_event_and_back():
    event = job_event(lambda: document(app_id="app-1/abc"), lambda: ADDRESS)
    assert event["status"] == "done"
    back = document_from_event(json.loads(json.dumps(event)))
    assert to_json(back) == to_json(document(app_id="app-1/abc"))


def test_failures_become_error_events_scrubbed_of_the_url_and_its_password():
    def fails():
        raise SparkSweepFailed(f"the server dropped {URL} (password {PASSWORD})")

    event = job_event(fails, lambda: ADDRESS)
    assert event["status"] == "error" and event["retriable"] is True
    assert PASSWORD not in json.dumps(event) and "sweeper:***@" in event["message"]
    with pytest.raises(SparkSweepFailed, match="failed in the triggerer: SparkSweepFailed") as raised:
        document_from_event(event)
    assert not isinstance(raised.value, SparkSweepRefused)  # Airflow retries the task


def test_a_finished_document_is_scrubbed_too():
    event = job_event(lambda: document(ok=False, error=f"boom at {URL}"), lambda: ADDRESS)
    assert PASSWORD not in json.dumps(event) and document_from_event(event).error == "boom at cassandra://sweeper:***@127.0.0.1:9042/ks"


@pytest.mark.parametrize("exc", [InvalidInputError("shard 9 out of range"), ValueError("bad job"),
                                 SparkSweepRefused("cannot run the engine")])
def test_what_retrying_cannot_fix_is_refused(exc):
    def fails():
        raise exc

    event = job_event(fails, lambda: ADDRESS)
    assert event["retriable"] is False
    with pytest.raises(SparkSweepRefused, match="not retried"):
        document_from_event(event)


def test_an_unreadable_store_connection_is_an_error_event():
    def no_url():
        raise RuntimeError("connection 'atlas_x' is not defined")

    event = job_event(lambda: document(store=no_url()), no_url)
    assert event == {"status": "error", "message": "RuntimeError: connection 'atlas_x' is not defined", "retriable": True}


@pytest.mark.parametrize("event", [None, {}, {"status": "done"}, {"status": "running"}])
def test_no_event_or_a_strange_one_fails_retriably(event):
    with pytest.raises(SparkSweepFailed) as raised:
        document_from_event(event)
    assert not isinstance(raised.value, SparkSweepRefused)


def test_the_log_line_says_what_happened():
    """A job that ran and failed logged its empty summary ("{}") until 2026-11-27."""
    assert describe_event(job_event(lambda: document(), lambda: ADDRESS)) == "done: {'entries_read': 3}"
    failed = document(ok=False, summary={}, error_type="SparkSweepFailed", error=f"2 pairs failed at {URL}",
                      failed=[{"shard": 0, "strategy": "THOROUGH"}])
    line = describe_event(job_event(lambda: failed, lambda: ADDRESS))
    assert line == ("failed: SparkSweepFailed: 2 pairs failed at cassandra://sweeper:***@127.0.0.1:9042/ks "
                    "(1 failed: [{'shard': 0, 'strategy': 'THOROUGH'}])"), line

    def raises():
        raise SparkSweepFailed("the server went away")

    assert describe_event(job_event(raises, lambda: ADDRESS)) == "failed: SparkSweepFailed: the server went away"
