"""Fault: a Spark executor (the Python worker running a shard's task) is SIGKILLed in the middle of its shard.

The real targeted-sweep job runs through ``spark-submit --master local[2,4]`` (local mode retries a task
only with ``local[N,F]``), with one change made through the job's store-opener seam
(``tests/spark/faulty_job.py`` with ``tests.faults.FaultyKvs``): the first task attempt to claim a
marker file kills its own Python worker with SIGKILL after one iteration persisted progress, right after
a ranged delete of the next iteration reached the store, while it holds the shard's lease. Spark sees a
crashed worker ("Python worker exited unexpectedly") and retries the task.

What holds (``test_spark_executor_killed_mid_shard``):

* the job survives: Spark retried the killed task (attempt >= 1), every other pair caught up, the job
  document is ok, and neither spark-submit's output nor the document shows the store password;
* the retry resumes from the progress the dead attempt persisted (never from scratch, never backwards) and
  catches up; no other holder swept the shard meanwhile;
* the oracle holds (an open transaction and fresh readers read the same before and after), nothing
  committed is lost, and after the sweep nothing obsolete, nothing queued below the sweep timestamp and
  no queue row below progress is left.

``test_spark_retry_of_a_killed_task_sweeps_its_shard``: the retry itself sweeps the shard - the lock holder
of a pair is the same for every attempt of its task (``airflow_atlas.spark.holder``), so the retry re-acquires
(and fences off) the lease its dead predecessor left instead of waiting for it to expire.

The long variant (``-m reliability``) kills two executors (two different tasks) of one job, on a larger
store with 4 shards.
"""
from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_atlas.oracle import Reader, compare, observe, obsolete_versions
from tests.conftest import REPO_ROOT
from tests.faults import faulty_job_env

from .helpers import (
    CONFIG,
    STRATEGIES,
    Model,
    WriterLoop,
    backlog_below,
    ensure_tables,
    leaked_queue_rows,
    model_mismatches,
    progress_of,
    sweep_all,
    wait_until,
)

pytestmark = [pytest.mark.cassandra, pytest.mark.spark]

TABLES = {"spark_c": "CONSERVATIVE", "spark_t": "THOROUGH"}
SECRET = "Sp4rk-S3cret-pw"
# Long enough that Spark's retry (seconds after the kill) always comes while the dead attempt's lease is
# valid - so the retry must re-acquire its own lease - and short enough to wait out after the job.
LEASE = 15


class _Never:
    def is_set(self) -> bool:
        return False


def _run_job(store, url: str, workdir: Path, *, shards: int, kills: int, batch_limit: int) -> dict:
    from airflow_atlas.spark.artifact import build_engine_zip

    pairs = ",".join(f"{shard}:{s}" for shard in range(shards) for s in STRATEGIES)
    url_file = workdir / "store-url"
    fd = os.open(url_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(url)
    output = workdir / "result.json"
    markers = [workdir / f"kill-{i}.marker" for i in range(kills)]
    env = faulty_job_env("kill", os.pathsep.join(map(str, markers)))
    command = [
        str(Path(sys.executable).parent / "spark-submit"),
        "--master", "local[2,4]",
        "--conf", "spark.ui.enabled=false",
        "--conf", f"spark.pyspark.python={sys.executable}",
        "--conf", f"spark.pyspark.driver.python={sys.executable}",
        "--py-files", build_engine_zip(workdir / "engine"),
        str(REPO_ROOT / "tests" / "spark" / "faulty_job.py"),
        "--store-url-file", str(url_file),
        "--output", str(output),
        "--pairs", pairs,
        "--batch-limit", str(batch_limit),
        "--setting", "unreadable_window_seconds=0",
        "--setting", f"lock_lease_seconds={LEASE}",
    ]
    done = subprocess.run(command, env=env, capture_output=True, text=True, cwd=workdir, timeout=900)
    assert output.exists(), f"the job wrote no result (exit {done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    document = json.loads(output.read_text())
    killed = []
    for marker in markers:
        assert marker.exists(), f"no task claimed {marker.name}:\n{done.stderr[-3000:]}"
        killed += [line for line in marker.read_text().splitlines() if line.startswith("killed")]
    assert len(killed) == kills, f"{len(killed)} of {kills} tasks were killed:\n{done.stderr[-3000:]}"
    return {"returncode": done.returncode, "stdout": done.stdout, "stderr": done.stderr,
            "document": document, "killed": killed, "command": command}



def _killed_pair(line: str) -> tuple[tuple[int, str], int]:
    # "killed pid P pair SHARD:STRATEGY progress N"
    words = line.split()
    shard, strategy = words[4].split(":")
    return (int(shard), strategy), int(words[6])


def _scenario(shared_stores, tmp_path, *, shards: int, kills: int, transactions: int, batch_limit: int) -> dict:
    store, url = shared_stores(config=dataclasses.replace(CONFIG, lock_lease_seconds=LEASE), shards=shards,
                               user="sweeper", password=SECRET)
    ensure_tables(store, TABLES)
    model = Model()
    writer = WriterLoop(store, model, TABLES, seed=23, rows=50, columns=3, shards_for_large=shards)
    writer.run(_Never(), transactions=transactions)
    pinned = store.transactions.begin()
    pinned_view = {t: pinned.get(t, writer.domain) for t in TABLES}
    WriterLoop(store, model, TABLES, seed=24, rows=50, columns=3).run(_Never(), transactions=5)
    fresh = store.timestamps.fresh_timestamp()
    readers = [Reader(pinned.start_timestamp), Reader(fresh), Reader(fresh, read_only=True)]
    before = observe(store, readers)

    progress_before = progress_of(store)
    job = _run_job(store, url, tmp_path, shards=shards, kills=kills, batch_limit=batch_limit)
    outcome = {"store": store, "job": job, "killed": [_killed_pair(line) for line in job["killed"]], "next_run": {}}
    text = job["stdout"] + job["stderr"] + json.dumps(job["document"]) + " ".join(job["command"])
    assert SECRET not in text, "the store password leaked into spark-submit's command, output or document"
    assert "Python worker exited unexpectedly" in job["stderr"], "Spark did not see a crashed worker"

    # Progress never went backwards; the shard a dead attempt held resumes from what it persisted.
    progress_now = progress_of(store)
    assert all(progress_now[k] >= v for k, v in progress_before.items())
    for (pair, persisted) in outcome["killed"]:
        assert progress_now[pair] >= persisted > -1
        name = store.sweeper.lock_name(*pair)
        wait_until(lambda name=name: store.locks.describe(name).expired, 60, "the dead attempt's lease to expire")
        nxt = store.sweeper.sweep_shard(pair[0], pair[1], holder="next-run")
        assert nxt.status == "caught_up" and nxt.old_progress >= persisted, nxt
        outcome["next_run"][pair] = nxt

    ts = store.sweep_timestamps.all()
    sweep_all(store, ts)  # at one fixed timestamp, so obsolete_versions has a reference point
    assert compare(before, observe(store, readers), ts) == []
    assert obsolete_versions(store, ts) == []
    assert backlog_below(store, ts) == {}
    assert leaked_queue_rows(store) == []
    assert {t: pinned.get(t, writer.domain) for t in TABLES} == pinned_view
    pinned.abort()
    model.resolve(store)
    assert model_mismatches(store, model, store.timestamps.fresh_timestamp(), TABLES) == []
    return outcome


@pytest.fixture(scope="module")
def killed_job(module_stores, tmp_path_factory):
    """One Spark job with one killed executor, shared by the tests of this module (spark-submit is slow)."""
    return _scenario(module_stores, tmp_path_factory.mktemp("spark-kill"), shards=2, kills=1,
                     transactions=45, batch_limit=8)


def test_spark_executor_killed_mid_shard(killed_job):
    job = killed_job["job"]
    document = job["document"]
    assert job["returncode"] == 0 and document["ok"] and document["max_task_attempts"] == 4
    (pair, persisted), = killed_job["killed"]
    by_pair = {(r["shard"], r["strategy"]): r for r in document["results"]}
    assert by_pair[pair]["attempt"] >= 1, "Spark did not retry the killed task"
    assert document["summary"]["retried_tasks"] == 1
    others = {p: r["status"] for p, r in by_pair.items() if p != pair}
    assert set(others.values()) == {"caught_up"}, others
    # The retry re-acquired its own pair's lease (same holder for every attempt) and swept the shard.
    retry = by_pair[pair]
    assert retry["status"] == "caught_up", retry
    assert retry["lock_holder"] == f"spark:{document['app_id']}:{pair[0]}:{pair[1].lower()}"
    assert retry["old_progress"] == persisted, "the retry must resume from the dead attempt's persisted progress"


def test_spark_retry_of_a_killed_task_sweeps_its_shard(killed_job):
    job = killed_job["job"]
    (pair, _), = killed_job["killed"]
    retry = {(r["shard"], r["strategy"]): r for r in job["document"]["results"]}[pair]
    assert retry["status"] == "caught_up", retry


@pytest.mark.reliability
def test_two_spark_executors_killed_in_a_larger_job(shared_stores, tmp_path):
    outcome = _scenario(shared_stores, tmp_path, shards=4, kills=2, transactions=200, batch_limit=12)
    document = outcome["job"]["document"]
    assert outcome["job"]["returncode"] == 0 and document["ok"]
    assert document["summary"]["retried_tasks"] == 2
    killed = {pair for pair, _ in outcome["killed"]}
    assert len(killed) == 2
    for r in document["results"]:
        if (r["shard"], r["strategy"]) in killed:
            assert r["attempt"] >= 1 and r["status"] == "caught_up", r
        else:
            assert r["status"] == "caught_up", r
