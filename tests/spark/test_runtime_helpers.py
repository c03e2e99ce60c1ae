"""Fast tests (no JVM) of the Spark jobs' helpers: arguments, retries arithmetic, the store URL file,
secret scrubbing, the result document markers and the engine zip."""
from __future__ import annotations

import io
import json
import os
import zipfile

import pytest

from airflow_atlas.kvs.scrub import redact_url, scrub
from airflow_atlas.serialisation import from_json, to_json
from airflow_atlas.spark import (
    EXIT_USAGE,
    RESULT_BEGIN,
    RESULT_END,
    STORE_URL_ENV,
    FullSweepJob,
    ItemResult,
    JobDocument,
    TargetedSweepJob,
    effective_max_failures,
    emit_document,
    extract_document,
    main,
    parse_pairs,
    read_store_url,
    settings_from_spark_conf,
)
from airflow_atlas.spark.args import TASKS_PER_CORE, pairs_from_shards, spark_parallelism, task_count
from airflow_atlas.spark.artifact import build_engine_zip, engine_files

SECRET_URL = "cassandra://atlas:p%40ss-W0rd@10.0.0.1,10.0.0.2:9042/prod"


def test_parse_pairs_accepts_every_spelling_and_deduplicates():
    expected = [(0, "CONSERVATIVE"), (1, "THOROUGH")]
    assert parse_pairs("0:CONSERVATIVE, 1:thorough,0:conservative") == expected
    assert parse_pairs([(0, "CONSERVATIVE"), ("1", "THOROUGH")]) == expected
    assert parse_pairs([{"shard": 0, "strategy": "conservative"}, "1:THOROUGH"]) == expected
    from airflow_atlas.kvs.tables import SweepStrategy

    assert parse_pairs([(0, SweepStrategy.CONSERVATIVE), {"shard": 1, "strategy": SweepStrategy.THOROUGH}]) == expected
    assert pairs_from_shards("0-1,3", "THOROUGH") == [(0, "THOROUGH"), (1, "THOROUGH"), (3, "THOROUGH")]


@pytest.mark.parametrize("bad", ["", "0", "x:THOROUGH", "0:NOTHING", "-1:THOROUGH", [(0, "EVERYTHING")]])
def test_parse_pairs_rejects_bad_input(bad):
    with pytest.raises(ValueError):
        parse_pairs(bad)


@pytest.mark.parametrize(
    "master, conf, expected",
    [
        ("local", "4", 1),
        ("local[2]", "4", 1),  # local mode ignores spark.task.maxFailures
        ("local[*]", None, 1),
        ("local[2,4]", None, 4),
        ("local[*,3]", "8", 3),
        ("local-cluster[2,1,1024]", "5", 5),
        ("yarn", None, 4),
        ("spark://h:7077", "8", 8),
        ("k8s://https://h:443", "2", 2),
    ],
)
def test_effective_max_failures(master, conf, expected):
    assert effective_max_failures(master, conf) == expected


@pytest.mark.parametrize(
    ("master", "conf", "expected"),
    [
        ("local", {}, 1),
        ("local[2]", {}, 2),
        ("local[3,4]", {}, 3),
        ("local[*]", {}, None),  # the server's cores: its conf does not say
        ("local-cluster[2,3,1024]", {}, 6),
        ("spark://127.0.0.1:7077", {}, None),
        ("spark://127.0.0.1:7077", {"spark.cores.max": "8"}, 8),
        ("spark://127.0.0.1:7077", {"spark.cores.max": "8", "spark.default.parallelism": "5"}, 5),
        ("local[2]", {"spark.default.parallelism": "nonsense"}, 2),
        ("yarn", {"spark.cores.max": "0"}, None),
    ],
)
def test_spark_parallelism_from_a_connect_servers_conf(master, conf, expected):
    assert spark_parallelism(master, conf) == expected


@pytest.mark.parametrize(
    ("items", "parallelism", "expected"),
    [
        (16, 2, 2 * TASKS_PER_CORE),  # the fixed-cost benchmark's 16 pairs on local[2]: 4 tasks, 4 pairs each
        (3, 2, 3),  # never more tasks than pairs
        (16, None, 16),  # unknown cores: one task per pair, as before
        (16, 100, 16),
        (0, 2, 1),
        (1, 1, 1),
    ],
)
def test_task_count_groups_pairs_at_most_two_tasks_per_core(items, parallelism, expected):
    assert task_count(items, parallelism) == expected


def test_store_url_file_must_be_private(tmp_path):
    path = tmp_path / "url"
    path.write_text(SECRET_URL + "\n")
    os.chmod(path, 0o600)
    assert read_store_url(str(path), environ={}) == SECRET_URL
    os.chmod(path, 0o644)
    with pytest.raises(ValueError, match="0600") as err:
        read_store_url(str(path), environ={})
    assert "W0rd" not in str(err.value)
    with pytest.raises(ValueError, match="does not exist"):
        read_store_url(str(tmp_path / "missing"), environ={})
    empty = tmp_path / "empty"
    empty.write_text("\n")
    os.chmod(empty, 0o600)
    with pytest.raises(ValueError, match="empty"):
        read_store_url(str(empty), environ={})


def test_store_url_from_environment():
    assert read_store_url(None, environ={STORE_URL_ENV: f" {SECRET_URL} "}) == SECRET_URL
    with pytest.raises(ValueError, match=STORE_URL_ENV):
        read_store_url(None, environ={})


def test_scrub_removes_url_and_password_in_every_spelling():
    text = f"failed to open {SECRET_URL}: bad password p@ss-W0rd (p%40ss-W0rd)"
    out = scrub(text, url=SECRET_URL)
    assert "W0rd" not in out
    assert redact_url(SECRET_URL) in out
    assert scrub("nothing secret", url="sqlite:////tmp/x.db") == "nothing secret"


def test_settings_from_spark_conf():
    conf = [("spark.atlas.store.batch_limit", "500"), ("spark.atlas.store.unreadable_window_seconds", "0.5"),
            ("spark.master", "local[2]")]
    assert settings_from_spark_conf(conf) == {"batch_limit": 500, "unreadable_window_seconds": 0.5}


def test_document_round_trip_through_decorated_log_lines(tmp_path):
    doc = {"job": "targeted_sweep", "ok": True, "results": [{"shard": 0, "status": "caught_up"}]}
    out = io.StringIO()
    emit_document(doc, str(tmp_path / "sub" / "result.json"), stream=out)
    assert json.loads((tmp_path / "sub" / "result.json").read_text()) == doc
    assert extract_document(out.getvalue()) == doc
    # As the Spark provider's hook logs each line inside Airflow: a prefix and a logger suffix.
    logged = "\n".join(
        f"2026-01-01T00:00:00Z [info     ] {line} [airflow.task.hooks.SparkSubmitHook] loc=x.py:1"
        for line in out.getvalue().splitlines()
    )
    assert extract_document(logged) == doc
    assert extract_document("no markers here") is None
    assert extract_document(f"{RESULT_BEGIN}\n{RESULT_END}") is None


def test_job_refuses_missing_arguments_before_starting_spark(monkeypatch, capsys):
    monkeypatch.delenv(STORE_URL_ENV, raising=False)
    assert main(TargetedSweepJob, ["--pairs", "0:THOROUGH"]) == EXIT_USAGE
    assert STORE_URL_ENV in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        main(TargetedSweepJob, ["--store-url-file", "/nonexistent"])  # neither --pairs nor --shards
    assert exit_.value.code == 2


def test_engine_zip_excludes_airflow_glue_and_is_cached(tmp_path):
    path = build_engine_zip(tmp_path)
    names = zipfile.ZipFile(path).namelist()
    assert "airflow_atlas/__init__.py" in names
    assert "airflow_atlas/store.py" in names and "airflow_atlas/spark/driver.py" in names
    assert "airflow_atlas/sweep/targeted.py" in names
    assert not [n for n in names if n.startswith("airflow_atlas/airflow/")]
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    assert {n for n, _ in engine_files()} == set(names)
    mtime = os.stat(path).st_mtime_ns
    assert build_engine_zip(tmp_path) == path and os.stat(path).st_mtime_ns == mtime
    assert [p.name for p in tmp_path.iterdir()] == [os.path.basename(path)]  # no temp files left


def test_engine_zip_name_follows_content(tmp_path):
    pkg = tmp_path / "src" / "airflow_atlas"
    (pkg / "airflow").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "engine.py").write_text("X = 1\n")
    (pkg / "airflow" / "glue.py").write_text("import airflow\n")
    first = build_engine_zip(tmp_path / "out", package_dir=pkg)
    assert zipfile.ZipFile(first).namelist() == ["airflow_atlas/__init__.py", "airflow_atlas/engine.py"]
    (pkg / "airflow" / "glue.py").write_text("import airflow  # changed\n")  # glue is not in the zip
    assert build_engine_zip(tmp_path / "out", package_dir=pkg) == first
    (pkg / "engine.py").write_text("X = 2\n")
    second = build_engine_zip(tmp_path / "out", package_dir=pkg)
    assert second != first
    assert zipfile.ZipFile(second).read("airflow_atlas/engine.py") == b"X = 2\n"


def test_every_engine_module_imports_from_the_zip_alone_without_airflow(tmp_path):
    """What an executor does: only the zip on the path (no checkout), import every module of it."""
    import subprocess
    import sys

    path = build_engine_zip(tmp_path / "zip")
    modules = sorted(
        n[:-3].replace("/", ".").removesuffix(".__init__") for n in zipfile.ZipFile(path).namelist()
        if n.endswith(".py") and not n.endswith("__main__.py")  # entry points run a command when imported
    )
    code = (
        "import importlib, json, sys\n"
        f"modules = {modules!r}\n"
        "for m in modules: importlib.import_module(m)\n"
        "import airflow_atlas\n"
        "print(json.dumps({'file': airflow_atlas.__file__,"
        " 'airflow': sorted(m for m in sys.modules if m == 'airflow' or m.startswith('airflow.'))}))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = path
    run = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-2000:]
    seen = json.loads(run.stdout.strip().splitlines()[-1])
    assert seen["file"].startswith(path)
    assert seen["airflow"] == []
    assert "airflow_atlas.spark.executor" in modules and "airflow_atlas.store" in modules


def test_document_dataclasses_round_trip_through_json_and_keep_none():
    ok = ItemResult(item={"shard": 0, "strategy": "THOROUGH"}, status="caught_up", attempt=1,
                    engine={"status": "caught_up", "iterations": 2, "sweep_ts": None}, partition=0)
    bad = ItemResult(item={"shard": 9, "strategy": "CONSERVATIVE"}, status="failed", error_type="InvalidInputError",
                     error="shard 9 out of range", retriable=False)
    doc = JobDocument(job="targeted_sweep", ok=False, store="sqlite:////x.db", retriable=False,
                      params={"pairs": ["0:THOROUGH", "9:CONSERVATIVE"], "batch_limit": None}, results=[ok, bad],
                      failed=[{"shard": 9, "strategy": "CONSERVATIVE", "error": bad.error}])
    data = json.loads(json.dumps(to_json(doc)))
    assert data["batch_limit"] is None and data["results"][0]["sweep_ts"] is None  # None stays None
    assert data["results"][0]["iterations"] == 2 and data["results"][1]["retriable"] is False
    back = from_json(JobDocument, data)
    assert back == doc
    assert back.result_for(shard=9).error_type == "InvalidInputError"


def test_job_strategies_validate_their_input_before_spark():
    assert TargetedSweepJob(pairs="1:thorough,1:THOROUGH").pairs == ((1, "THOROUGH"),)
    with pytest.raises(ValueError):
        TargetedSweepJob(pairs="0:NOTHING")
    with pytest.raises(ValueError):
        TargetedSweepJob(pairs="0:THOROUGH", sweep_timestamps="THOROUGH=x")
    with pytest.raises(ValueError):
        FullSweepJob(table="t", parts=0)
    with pytest.raises(ValueError):
        FullSweepJob(table="_internal", parts=2)
