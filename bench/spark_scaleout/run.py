"""Benchmark 4: Spark scale-out of targeted sweep, the fixed cost of a Spark submission, and the backlog
above which Spark mode beats in-task mode.

A Cassandra store with 16 shards; a backlog of B queue entries (committed transactions of 50 writes on
distinct cells, spread over the shards by the shard hash) is written before EVERY run, so every run
starts from the same state; then the benchmark waits until the local node is quiet (:func:`bench.lib.node.settle_node`,
``runs[].settle_seconds``), so no run pays for the flushes and compactions of the load or of the run
before it (added for the issue-15 run: without it, B = 0 runs measured 1-3 s of the previous run's
compactions). Runs, interleaved (rotating order) in every repetition:

* ``spark local[1]`` and ``spark local[2]``: the targeted-sweep job (``spark_jobs/targeted_sweep_job.py``)
  over the 16 CONSERVATIVE pairs (one Spark task per pair until 2026-11-27; since then two per core, each
  sweeping a group of the pairs: ``airflow_atlas.spark.args.task_count``). Full mode: a real ``spark-submit`` (engine zip
  via ``--py-files``, store URL in a 0600 file), timed from process start to exit. Quick mode: the same
  job function (``run_targeted_sweep``) on an in-process SparkSession created and stopped per run (no
  JVM launch per run, so its "fixed cost" is smaller than a submission's).
* ``in-task``: what an Airflow task does in in-task mode: a fresh Python process opens the store and
  sweeps the 16 pairs one after the other, timed from process start to exit.
* ``connect local[1]`` and ``connect local[2]``: the same job on a long-lived Spark application reached
  through Spark Connect (two servers started by ``scripts/spark.sh connect-start`` before the runs, one per
  master): a fresh Python process (like an Airflow task) opens the engine's Connect session (reused:
  ``airflow_atlas.spark.connect.open_session``; one unmeasured warm-up submission per server creates it and
  ships the engine once) and runs the job, timed from process start to exit. The first submission of a
  session (new server or new engine) is recorded separately (``connect_first_session_seconds``).
* ``deferred local[2]``: the same job the way an Airflow task with ``deferrable=True`` submits it: the task
  process opens the store and defers, the job runs from a long-lived triggerer process through the real
  ``SparkConnectJobTrigger`` (the Connect client imported there once), a second task process resumes with
  the document (:mod:`bench.spark_scaleout.deferred` says exactly what is timed and what of Airflow's own scheduling
  is not). ``airflow_task_start_seconds``: a proxy of the resumed task's extra process start.

Every run records ``cpu_seconds`` too: the CPU of the client-side processes (the child processes'
``RUSAGE_CHILDREN``; for ``deferred``, plus the triggerer's CPU while it ran the trigger). The Connect
servers' and spark-submit's JVMs are not client-side: their CPU is not in it. On a shared, loaded machine
the CPU figures are the steadier ones.

Every child process (in-task, spark-submit and its Python workers, Connect clients, the Connect servers'
Python workers) caches Python bytecode in the bench's work directory (``PYTHONPYCACHEPREFIX``), as an
installed package has its ``.pyc``: without it, each process compiles pyspark/pandas from source (the
Connect client imports pandas: +2.6 s here), which is a property of the environment, not of the path.

Figures: scale-out = time(local[1]) / time(local[2]) at the largest backlog (whole run, and the job's
own duration without JVM start-up); fixed cost = time(spark local[2], B=0) - time(in-task, B=0), for
spark-submit, Connect in the task and Connect deferred (also in CPU seconds), and their ratio (same repetition, side by side); per-entry time of a path =
(time(B top) - time(B=0)) / B top, compared with in-task's (local[1]: one executor core, like the task);
the crossover is where the straight lines fitted through time(B) of in-task and of Spark local[2] meet.
"""
from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

from bench.lib.load import cell, commit_synthetic, value
from bench.lib.log import log
from bench.lib.machine import load_average, machine_info
from bench.lib.node import settle_node
from bench.lib.paths import REPO_ROOT
from bench.lib.results import Stopwatch, goal, result_document
from bench.lib.stats import median, rotated
from bench.lib.stores import DEFAULT_CASSANDRA, cassandra_url, drop_store, new_keyspace_name, open_store

from . import deferred as spark_deferred
from .summary import FIXED_COST_TASKS, SHARDS, summarize, summarize_fixed

NAME = "spark_scaleout"
TXN_WRITES = 50
SETTINGS = {"unreadable_window_seconds": 0, "sweep_max_entries_per_second": 0, "sweep_latency_target": 0}
"""Unthrottled and without the application pace (docs/INTENSITY.md): the jobs are compared at full speed."""


def _backlogs(quick: bool) -> list[int]:
    return [0, 1_600] if quick else [0, 32_000, 96_000]


_PYCACHE: list[str] = []  # the bytecode cache directory of this run's child processes (module doc)


def _env() -> dict:
    bin_dir = os.path.dirname(sys.executable)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "PYTHONPATH": str(REPO_ROOT),
    }
    if _PYCACHE:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = _PYCACHE[0]
    return env


class _ConnectServers:
    """One Spark Connect server per master (scripts/spark.sh connect-start), stopped at the end."""

    def __init__(self, workdir: str, masters: list[str]):
        import socket

        self.script = str(REPO_ROOT / "scripts" / "spark.sh")
        self.envs: dict[str, dict] = {}
        self.urls: dict[str, str] = {}
        self.start_seconds: dict[str, float] = {}
        for master in masters:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            env = {**_env(), "ATLAS_SPARK_DIR": os.path.join(workdir, f"connect-{port}"),
                   "ATLAS_SPARK_CONNECT_PORT": str(port), "ATLAS_SPARK_CONNECT_MASTER": master}
            self.envs[master] = env
            started = time.perf_counter()
            proc = subprocess.run([self.script, "connect-start"], env=env, capture_output=True, text=True, timeout=600)
            if proc.returncode != 0:
                self.stop()
                raise RuntimeError(f"connect-start {master} failed:\n{proc.stderr[-3000:]}")
            self.start_seconds[master] = time.perf_counter() - started
            self.urls[master] = f"sc://127.0.0.1:{port}"

    def stop(self) -> None:
        for env in self.envs.values():
            subprocess.run([self.script, "connect-stop"], env=env, capture_output=True, text=True, timeout=120)


class _Runner:
    def __init__(self, url: str, quick: bool, workdir: str):
        self.url = url
        self.quick = quick
        self.workdir = workdir
        self.url_file = os.path.join(workdir, "store-url")
        fd = os.open(self.url_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(url + "\n")
        from airflow_atlas.spark.artifact import build_engine_zip

        self.zip = build_engine_zip(os.path.join(workdir, "artifact"))

    def spark(self, master: str) -> dict:
        return self._inprocess(master) if self.quick else self._submit(master)

    def connect(self, url: str) -> dict:
        """One submission to a Connect server from a fresh Python process (like an Airflow task)."""
        session_file = os.path.join(self.workdir, "sessions", url.rsplit(":", 1)[-1] + ".id")
        cpu = spark_deferred.child_cpu()
        started = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "bench.spark_scaleout", "--connect", url, self.url_file, self.zip, session_file],
            capture_output=True, text=True, env=_env(), cwd=str(REPO_ROOT), timeout=3600,
        )
        seconds = time.perf_counter() - started
        if proc.returncode != 0:
            raise RuntimeError(f"Connect run on {url} failed:\n{proc.stderr[-4000:]}")
        return {**self._summary(json.loads(proc.stdout.strip().splitlines()[-1]), seconds),
                "cpu_seconds": spark_deferred.child_cpu() - cpu}

    def deferred(self, triggerer, master: str) -> dict:
        """One submission the deferred way (:mod:`bench.spark_scaleout.deferred`)."""
        request = {"kind": "targeted-sweep", "tag": "", "settings": dict(SETTINGS),
                   "job": {"pairs": [[s, "CONSERVATIVE"] for s in range(SHARDS)], "batch_limit": None,
                           "max_iterations": None, "dry_run": False, "sweep_timestamps": None}}
        doc, seconds, timings = spark_deferred.submission(triggerer, master, request, self.url_file, _env(), str(REPO_ROOT))
        return {**self._summary(doc, seconds), **timings}

    def _submit(self, master: str) -> dict:
        out = os.path.join(self.workdir, f"result-{time.time_ns()}.json")
        cmd = [
            os.path.join(os.path.dirname(sys.executable), "spark-submit"),
            "--master", master,
            "--conf", f"spark.pyspark.python={sys.executable}",
            "--conf", f"spark.pyspark.driver.python={sys.executable}",
            "--conf", "spark.ui.enabled=false",
            "--conf", "spark.ui.showConsoleProgress=false",
            "--py-files", self.zip,
            str(REPO_ROOT / "spark_jobs" / "targeted_sweep_job.py"),
            "--store-url-file", self.url_file,
            "--shards", f"0-{SHARDS - 1}", "--strategies", "CONSERVATIVE",
            *[a for k, v in SETTINGS.items() for a in ("--setting", f"{k}={v}")],
            "--output", out,
        ]
        started = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, env=_env(), cwd=self.workdir, timeout=3600)
        seconds = time.perf_counter() - started
        if proc.returncode != 0 or not os.path.exists(out):
            raise RuntimeError(f"spark-submit {master} failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
        with open(out) as f:
            doc = json.load(f)
        return self._summary(doc, seconds)

    def _inprocess(self, master: str) -> dict:
        import logging

        from pyspark.sql import SparkSession

        from airflow_atlas.serialisation import to_json
        from airflow_atlas.spark import run_targeted_sweep

        logging.getLogger("py4j").setLevel(logging.WARNING)
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        started = time.perf_counter()
        spark = (
            SparkSession.builder.master(master)
            .appName(f"atlas-bench-{master}")
            .config("spark.ui.enabled", "false")
            .config("spark.pyspark.python", sys.executable)
            .config("spark.ui.showConsoleProgress", "false")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        try:
            doc = to_json(run_targeted_sweep(
                spark,
                store_url=self.url,
                pairs=[(s, "CONSERVATIVE") for s in range(SHARDS)],
                settings=dict(SETTINGS),
                engine_zip=self.zip,
            ))
        finally:
            spark.stop()
        return self._summary(doc, time.perf_counter() - started)

    @staticmethod
    def _summary(doc: dict, seconds: float) -> dict:
        if not doc.get("ok"):
            raise RuntimeError(f"the Spark job failed: {json.dumps(doc.get('failed') or doc.get('error'))[:3000]}")
        return {
            "seconds": seconds,
            "job_seconds": doc.get("duration_seconds"),
            "ok": doc.get("ok"),
            "entries_read": doc["summary"]["entries_read"],
            "cells_tombstoned": doc["summary"]["cells_tombstoned"],
            "by_status": doc["summary"]["by_status"],
            "task_seconds_sum": sum(r.get("task_seconds") or 0 for r in doc.get("results", [])),
            "executor_pids": sorted({(r.get("executor") or {}).get("pid") for r in doc.get("results", [])} - {None}),
        }

    def in_task(self) -> dict:
        cpu = spark_deferred.child_cpu()
        started = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "bench.spark_scaleout", "--in-task", self.url_file],
            capture_output=True, text=True, env=_env(), cwd=str(REPO_ROOT), timeout=3600,
        )
        seconds = time.perf_counter() - started
        if proc.returncode != 0:
            raise RuntimeError(f"in-task run failed:\n{proc.stderr[-4000:]}")
        doc = json.loads(proc.stdout.strip().splitlines()[-1])
        doc["seconds"] = seconds
        doc["cpu_seconds"] = spark_deferred.child_cpu() - cpu
        return doc


def _in_task_child(url_file: str) -> None:
    from airflow_atlas.config import StoreConfig
    from airflow_atlas.store import AtlasStore

    with open(url_file) as f:
        url = f.read().strip()
    started = time.perf_counter()
    store = AtlasStore.open(url, StoreConfig(**SETTINGS))
    entries = cells = 0
    for shard in range(SHARDS):
        r = store.sweeper.sweep_shard(shard, "CONSERVATIVE")
        entries += r.counts.entries_read
        cells += r.counts.cells_tombstoned
    store.close()
    print(json.dumps({"job_seconds": time.perf_counter() - started, "entries_read": entries, "cells_tombstoned": cells}))


def _connect_child(url: str, url_file: str, zip_path: str, session_file: str) -> None:
    import warnings

    warnings.filterwarnings("ignore", category=FutureWarning)  # pyspark's note on pandas 3
    from airflow_atlas.serialisation import to_json
    from airflow_atlas.spark import run_targeted_sweep
    from airflow_atlas.spark.connect import open_session

    with open(url_file) as f:
        url_store = f.read().strip()
    spark = open_session(url, zip_path, session_file)
    doc = run_targeted_sweep(spark, store_url=url_store, pairs=[(s, "CONSERVATIVE") for s in range(SHARDS)],
                             settings=dict(SETTINGS))
    print(json.dumps(to_json(doc)))


def run(*, quick: bool, reps: int, backend: str = "cassandra", tmpdir: str = "/tmp", name: str = NAME,
        fixed_cost_only: bool = False) -> dict:
    """The benchmark (module doc); ``fixed_cost_only``: only :data:`FIXED_COST_TASKS` (no backlog, no
    scale-out: ``python -m bench.spark_scaleout --fixed-cost OUT.json``, for a loaded machine)."""
    from airflow_atlas.kvs.tables import SweepStrategy

    watch = Stopwatch()
    backlogs = [0] if fixed_cost_only else _backlogs(quick)
    store = open_store(cassandra_url(new_keyspace_name("spark")), shards=SHARDS, **SETTINGS)
    url = cassandra_url(store.kvs.keyspace)
    workdir = tempfile.mkdtemp(prefix="atlas-bench-spark-")
    _PYCACHE[:] = [os.path.join(workdir, "pycache")]
    runs: list[dict] = []
    servers = None
    triggerer = None
    first_session: dict[str, float] = {}
    task_start: list[float] = []
    try:
        machine = machine_info(store.kvs.session)
        store.create_table("sp", SweepStrategy.CONSERVATIVE)
        runner = _Runner(url, quick and not fixed_cost_only, workdir)  # fixed cost: a real spark-submit
        servers = _ConnectServers(workdir, ["local[2]"] if fixed_cost_only else ["local[1]", "local[2]"])
        for master, server_url in servers.urls.items():  # creates the session, ships the engine: unmeasured
            first_session[master] = runner.connect(server_url)["seconds"]
        host = DEFAULT_CASSANDRA.rsplit(":", 1)[0]
        triggerer = spark_deferred.Triggerer(_env(), str(REPO_ROOT), store.kvs.keyspace, host,
                                             {"local[2]": int(servers.urls["local[2]"].rsplit(":", 1)[-1])}, workdir)
        first_session["deferred local[2]"] = runner.deferred(triggerer, "local[2]")["seconds"]  # imports the client
        task_start[:] = [spark_deferred.airflow_task_start(_env(), str(REPO_ROOT)) for _ in range(3)]
        rng = random.Random(11)
        offset = [0]

        def load(b: int) -> float:
            started = time.perf_counter()
            if b:
                cells = [cell(offset[0] + i, "sp") for i in range(b)]
                offset[0] += b
                items = [(c, value(rng)) for c in cells]
                commit_synthetic(
                    store, "sp", [dict(items[i : i + TXN_WRITES]) for i in range(0, b, TXN_WRITES)], threads=8
                )
            return time.perf_counter() - started

        top = backlogs[-1]
        tasks = FIXED_COST_TASKS if fixed_cost_only else (
            [("local[1]", 0), ("local[1]", top)] + [("local[2]", b) for b in backlogs] + [("in-task", b) for b in backlogs]
            + [("connect local[1]", 0), ("connect local[1]", top)] + [("connect local[2]", b) for b in backlogs]
            + [("deferred local[2]", b) for b in backlogs]
        )
        for rep in range(reps):
            for variant, b in rotated(tasks, rep):
                rec = {"rep": rep, "variant": variant, "backlog": b, "load_avg_1m": load_average()["1m"]}
                rec["load_seconds"] = load(b)
                # the node's flushes and compactions after the load (or the previous run) are not this run's
                rec["settle_seconds"] = round(settle_node(), 2)
                log(f"{name}: rep {rep} {variant} backlog {b:,}")
                if variant == "in-task":
                    rec.update(runner.in_task())
                elif variant.startswith("connect "):
                    rec.update(runner.connect(servers.urls[variant.split(" ", 1)[1]]))
                elif variant.startswith("deferred "):
                    rec.update(runner.deferred(triggerer, variant.split(" ", 1)[1]))
                else:
                    rec.update(runner.spark(variant))
                rec["check"] = rec["entries_read"] == b and rec["cells_tombstoned"] == b
                runs.append(rec)
    finally:
        if triggerer is not None:
            triggerer.stop()
        if servers is not None:
            servers.stop()
        drop_store(store)
        shutil.rmtree(workdir, ignore_errors=True)
        _PYCACHE.clear()
    results = summarize_fixed(runs) if fixed_cost_only else summarize(runs, backlogs, reps)
    results["connect_first_session_seconds"] = first_session
    results["airflow_task_start_seconds"] = median(task_start) if task_start else None
    results["connect_server_start_seconds"] = servers.start_seconds if servers else None
    goals = [
        goal("fixed cost of one deferred Spark Connect submission (local[2], B=0, minus in-task)",
               results["deferred_fixed_cost_seconds"], 1.0, "<=", "s"),
        goal("the same in CPU seconds of the client-side processes", results["deferred_fixed_cost_cpu_seconds"], 1.0, "<=", "s"),
        goal("fixed cost of one Spark Connect submission in the task (local[2], B=0, minus in-task)",
               results["connect_fixed_cost_seconds"], 3.0, "<=", "s", binding=False),
    ]
    if not fixed_cost_only:
        goals += [
            goal(f"per-entry time, Connect local[1] / in-task ({backlogs[-1]:,} entries)", results["per_entry_ratio_connect_local1"], 1.2, "<=", "x"),
            goal("fixed cost of one spark-submit (local[2], B=0, minus in-task)", results["fixed_cost_seconds"], 3.0, "<=", "s", binding=False),
            goal(f"per-entry time, spark-submit local[1] / in-task ({backlogs[-1]:,} entries)", results["per_entry_ratio_submit_local1"], 1.2, "<=", "x", binding=False),
            goal(f"Spark local[2] vs local[1], 16 shards, {backlogs[-1]:,} entries (job time)", results["scaleout_job"], 1.6, ">=", "x"),
            goal(f"Spark local[2] vs local[1], 16 shards, {backlogs[-1]:,} entries (whole submission)", results["scaleout_wall"], 1.6, ">=", "x"),
        ]
    return result_document(
        name, quick=quick, backend=backend, watch=watch, machine=machine,
        params={
            "shards": SHARDS,
            "backlogs": backlogs,
            "transaction_writes": TXN_WRITES,
            "spark_mode": "in-process SparkSession" if quick and not fixed_cost_only else "spark-submit",
            "fixed_cost_only": fixed_cost_only,
            "connect_mode": "Spark Connect servers local[1] and local[2] (scripts/spark.sh), a fresh client process per run, the session reused",
            "deferred_mode": "task process, the real SparkConnectJobTrigger in one long-lived triggerer process, resumed task process (bench/spark_deferred.py)",
            "bytecode_cache": "PYTHONPYCACHEPREFIX in the work directory for every child process",
            "strategy": "CONSERVATIVE",
            "settings": SETTINGS,
            "repetitions": reps,
        },
        results=results, goals=goals, runs=runs, method=__doc__,
    )
