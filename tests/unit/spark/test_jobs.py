"""THE Spark job type (issue 47 item 3): a job is parsed once, when it is built, and written out in the two
forms it travels in - its command line (``to_argv``, read back by the job script's parser and ``from_args``)
and JSON (``to_json``, read back by ``job_from_json``: a Connect request, trigger kwargs) - each a round trip
to the same object. Pure: no Spark, no store."""
from __future__ import annotations

import json

import pytest

from airflow_atlas.errors import InvalidInputError
from airflow_atlas.spark import JOBS, FullSweepJob, TargetedSweepJob, job_from_json
from airflow_atlas.spark.main import build_parser

JOBS_TO_TRY = [
    TargetedSweepJob(pairs="0:THOROUGH"),
    TargetedSweepJob(pairs=[(3, "conservative"), {"shard": 1, "strategy": "THOROUGH"}, "3:CONSERVATIVE"], batch_limit=50,
                     max_iterations=7, dry_run=True, sweep_timestamps={"THOROUGH": 12, "CONSERVATIVE": 9}),
    FullSweepJob(table="orders"),
    FullSweepJob(table="orders", parts=8, batch_size=100, dry_run=True),
]


@pytest.mark.parametrize("job", JOBS_TO_TRY, ids=lambda j: f"{j.kind}:{len(j.to_argv())}")
def test_the_command_line_reads_back_to_the_same_job(job):
    parser = build_parser(type(job))
    argv = ["--store-url-file", "/x", *job.to_argv()]
    assert type(job).from_args(parser.parse_args(argv), parser) == job


@pytest.mark.parametrize("job", JOBS_TO_TRY, ids=lambda j: f"{j.kind}:{len(j.to_argv())}")
def test_json_reads_back_to_the_same_job(job):
    data = json.loads(json.dumps(job.to_json()))  # as in trigger kwargs
    assert job_from_json(job.kind, data) == job
    assert JOBS[job.kind] is type(job)


def test_the_pairs_are_parsed_once_when_the_job_is_built():
    job = TargetedSweepJob(pairs="1:thorough,1:THOROUGH,0:CONSERVATIVE")
    assert job.pairs == ((1, "THOROUGH"), (0, "CONSERVATIVE"))  # de-duplicated, in input order
    assert job.to_json()["pairs"] == [[1, "THOROUGH"], [0, "CONSERVATIVE"]]
    assert job.to_argv() == ["--pairs", "1:THOROUGH,0:CONSERVATIVE"]


def test_a_full_sweep_travels_without_what_the_driver_plans():
    planned = FullSweepJob(table="orders", parts=2)
    assert set(planned.to_json()) == {"table", "parts", "batch_size", "dry_run"}
    with pytest.raises(ValueError, match="unknown full-sweep job argument"):
        job_from_json("full-sweep", {"table": "orders", "sweep_ts": 5})


@pytest.mark.parametrize(("kind", "data", "match"), [
    ("compaction", {}, "kind must be one of"),
    ("targeted-sweep", {"pairs": "0:NOTHING"}, "strategy must be CONSERVATIVE or THOROUGH"),
    ("targeted-sweep", {"pairs": "0:THOROUGH", "tables": ["t"]}, "unknown targeted-sweep job argument"),
    ("targeted-sweep", {"pairs": "0:THOROUGH", "batch_limit": 0}, "batch_limit"),
    ("targeted-sweep", {"pairs": "0:THOROUGH", "max_iterations": "many"}, "max_iterations"),
    ("targeted-sweep", {"pairs": "0:THOROUGH", "sweep_timestamps": "THOROUGH=x"}, "not an integer"),
    ("targeted-sweep", "0:THOROUGH", "a JSON object"),
    ("full-sweep", {"table": "orders", "parts": 0}, "parts"),
    ("full-sweep", {"table": "_internal"}, "internal"),
])
def test_bad_jobs_are_refused_before_anything_runs(kind, data, match):
    with pytest.raises((ValueError, InvalidInputError), match=match):
        job_from_json(kind, data)
