"""The sweep jobs through the real spark-submit, submitted by the Airflow glue with the Spark provider's
SparkSubmitHook (two JVM starts: keep this module small).

* spark_default -> local[2]: the job returns its JSON document; the store URL, which carries a password
  here, appears neither in the spark-submit command, nor in its output, nor in the returned document; the
  URL file is 0600 while the job runs and gone afterwards; executors run the engine from the zip and
  never import Airflow.
* spark-submit on local[2,4] (local mode retries tasks only with local[N,F]) of the job with a faulty
  store under it (``faulty_job.py``: the job's store-opener seam, embedded store): one task fails
  mid-shard after doing work, Spark retries it, and the end state equals the in-task engine's on an
  identical store.
"""
from __future__ import annotations

import json
import os
import re

import pytest

from airflow_atlas.serialisation import to_json
from airflow_atlas.spark.args import task_count

from .conftest import SETTINGS, SHARDS, STRATEGIES, cell_versions, end_state

pytestmark = [pytest.mark.spark, pytest.mark.airflow]

PASSWORD = "Pw-n0t-Used-4-Real-7781"  # the local node has no authentication: the driver ignores it
ALL_PAIRS = [(shard, strategy) for shard in range(SHARDS) for strategy in STRATEGIES]


@pytest.fixture
def captured(monkeypatch, tmp_path):
    """Everything spark-submit saw and said: its arguments, its output lines, the URL file's mode while it ran.

    The seam is the one the glue has: ``spark-submit`` is run by name from ``PATH``. A wrapper of that
    name, first on ``PATH``, records and then runs the real one."""
    import shutil
    import sys
    from pathlib import Path

    real = shutil.which("spark-submit") or str(Path(sys.executable).parent / "spark-submit")
    record = tmp_path / "spark-submit-record"
    record.mkdir()
    wrapper_dir = tmp_path / "wrapper-bin"
    wrapper_dir.mkdir()
    wrapper = wrapper_dir / "spark-submit"
    wrapper.write_text(f"""#!/usr/bin/env bash
printf '%s\\0' "$@" > '{record}/argv'
prev=""
for arg in "$@"; do
  if [[ "$prev" == "--store-url-file" ]]; then printf '%s' "$arg" > '{record}/url_file'; stat -c %a "$arg" > '{record}/url_mode'; fi
  prev="$arg"
done
'{real}' "$@" 2>&1 | tee '{record}/output'
exit "${{PIPESTATUS[0]}}"
""")
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{wrapper_dir}{os.pathsep}{Path(real).parent}{os.pathsep}{os.environ.get('PATH', '')}")

    def seen() -> dict:
        argv = (record / "argv").read_bytes().split(b"\0")[:-1]
        return {
            "commands": [["spark-submit", *(a.decode() for a in argv)]],
            "lines": (record / "output").read_text().splitlines(keepends=True),
            "url_files": {(record / "url_file").read_text(): int((record / "url_mode").read_text().strip(), 8)},
        }

    return seen


@pytest.mark.cassandra
def test_spark_submit_through_hook_returns_document_without_secrets(make_store, captured, monkeypatch, capfd, tmp_path):
    from airflow_atlas.airflow.execution.spark import submit
    from airflow_atlas.airflow.execution.spark_types import RunSettings
    from airflow_atlas.kvs.address import StoreAddress
    from airflow_atlas.spark import TargetedSweepJob

    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    monkeypatch.setenv("ATLAS_SPARK_ARTIFACT_DIR", str(tmp_path / "artifacts"))
    handle = make_store("cassandra", seed=3, transactions=60, url_user=f"atlas:{PASSWORD}")
    assert PASSWORD in handle.url
    before = cell_versions(handle.store)

    doc = to_json(submit(
        TargetedSweepJob(pairs=ALL_PAIRS, batch_limit=50, max_iterations=20),
        RunSettings(spark_conn_id="spark_default",
                    extra_conf={"spark.atlas.store.unreadable_window_seconds": "0", "spark.ui.enabled": "false"}),
        StoreAddress.from_url(handle.url),
        {},
    ))

    # The document (what goes to XCom): JSON, complete, every shard swept, the store redacted.
    text = json.dumps(doc)
    assert doc["ok"] and doc["job"] == "targeted_sweep" and doc["master"] == "local[2]"
    assert {(r["shard"], r["strategy"]) for r in doc["results"]} == set(ALL_PAIRS)
    assert {r["status"] for r in doc["results"]} == {"caught_up"}
    assert doc["store"] == handle.url.replace(PASSWORD, "***")
    assert doc["spark_submit"]["conn_id"] == "spark_default"
    assert cell_versions(handle.reopen()) != before
    # Executors: the engine came from the --py-files zip, and Airflow was never imported there.
    for result in doc["results"]:
        assert result["executor"]["airflow_imported"] is False
        assert ".zip" in result["executor"]["engine_path"] and "airflow_atlas-engine-" in result["executor"]["engine_path"]

    # No secret anywhere: command line, spark-submit output, task logs, document.
    captured = captured()
    (command,) = captured["commands"]
    assert command[:3] == ["spark-submit", "--master", "local[2]"]
    assert "--py-files" in command and "--store-url-file" in command
    out, err = capfd.readouterr()
    for where, content in {"command": " ".join(command), "spark-submit output": "".join(captured["lines"]),
                           "captured stdout/stderr": out + err, "document": text}.items():
        assert PASSWORD not in content, f"password leaked into the {where}"
    assert any("=====ATLAS-SPARK-RESULT-BEGIN=====" in line for line in captured["lines"])
    # The URL file was private while the job ran, and is gone now.
    ((url_file, mode),) = captured["url_files"].items()
    assert mode == 0o600
    assert not os.path.exists(url_file) and not os.path.exists(os.path.dirname(url_file))


def test_task_failing_mid_shard_is_retried_and_end_state_is_correct(make_store, tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    from airflow_atlas.spark.artifact import build_engine_zip
    from tests.conftest import REPO_ROOT
    from tests.faults import faulty_job_env

    # The embedded store: retries are the engine's and Spark's business, not the backend's, and the
    # Cassandra path of the same comparison runs in test_spark_jobs.py (keyspace DDL is slow).
    spark_store = make_store("sqlite", seed=17)
    task_store = make_store("sqlite", seed=17)
    marker = tmp_path / "fail-once.marker"
    url_file = tmp_path / "store-url"
    url_file.write_text(spark_store.url)
    url_file.chmod(0o600)
    output = tmp_path / "result.json"
    bin_dir = Path(sys.executable).parent
    env = faulty_job_env("raise", str(marker))
    command = [
        str(bin_dir / "spark-submit"), "--master", "local[2,4]", "--conf", "spark.ui.enabled=false",
        "--conf", f"spark.pyspark.python={sys.executable}", "--conf", f"spark.pyspark.driver.python={sys.executable}",
        "--py-files", build_engine_zip(tmp_path / "engine"), str(REPO_ROOT / "tests" / "spark" / "faulty_job.py"),
        "--store-url-file", str(url_file), "--output", str(output),
        "--pairs", ",".join(f"{shard}:{strategy}" for shard, strategy in ALL_PAIRS), "--batch-limit", "8",
        *[arg for name, value in SETTINGS.items() for arg in ("--setting", f"{name}={json.dumps(value)}")],
    ]
    done = subprocess.run(command, env=env, capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    doc = json.loads(output.read_text())
    for shard, strategy in ALL_PAIRS:
        assert task_store.store.sweeper.sweep_shard(shard, strategy, batch_limit=8).status == "caught_up"

    assert marker.exists(), "the fault was injected"
    assert doc["ok"] and doc["max_task_attempts"] == 4
    # One Spark task failed and was retried: the pairs of its group (two Spark tasks per core of local[2,4]).
    retried = [r for r in doc["results"] if r["attempt"] > 0]
    assert len({r["partition"] for r in retried}) == 1 and {r["attempt"] for r in retried} == {1}
    assert len(retried) == len(ALL_PAIRS) // task_count(len(ALL_PAIRS), 2)
    assert doc["summary"]["retried_tasks"] == 1
    # The failed attempt did real work (one iteration of the pair it failed in persisted progress); the retry
    # resumed from it.
    failed_pair = re.search(r"injected failure after pair (\d+):(\w+) progress (\d+)", done.stderr)
    assert failed_pair is not None, done.stderr[-3000:]
    again = next(r for r in retried if (r["shard"], r["strategy"]) == (int(failed_pair[1]), failed_pair[2]))
    assert again["old_progress"] == int(failed_pair[3]) > -1
    assert {r["status"] for r in doc["results"]} == {"caught_up"}
    assert "injected failure after" in done.stderr, "Spark logged the failed attempt"

    assert end_state(spark_store) == end_state(task_store)
