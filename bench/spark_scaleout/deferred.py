"""The deferred Spark Connect path for ``bench.spark_scaleout``: a submission as an Airflow task with
``deferrable=True`` makes it, minus Airflow's own scheduling (see below).

* **the task, before deferring**: a fresh Python process opens the store (the task checks the sweep timestamps
  of its group of pairs, then builds the job's request; the leases are the Spark tasks') and closes it; it never
  imports pyspark;
* **the trigger**: ONE long-lived process stands for the triggerer (started once per benchmark, like an
  ``airflow triggerer``): it runs the real :class:`~airflow_atlas.airflow.triggers.spark_connect.SparkConnectJobTrigger`
  in its asyncio event loop for every submission (the Connect client imported once, by the unmeasured
  warm-up submission); its kwargs come as JSON (as from the metadata DB), the store URL from the store's
  Airflow connection (``AIRFLOW_CONN_*`` in its environment);
* **the task, resumed**: a fresh Python process reads the event's document (``JobDocument.from_json``); it
  opens no store (each pair's result in the document carries its lag and backlog after the run).

A run's ``seconds`` is the sum of the three (timed by the parent: each process from start to exit, the
trigger from the request to its event); ``cpu_seconds`` the CPU of the two task processes
(``RUSAGE_CHILDREN``) and of the triggerer process while it ran the trigger (``time.process_time``), and
``trigger_seconds`` the trigger's part. Not included, because they are Airflow's and not the path's: the
triggerer noticing the new trigger and the scheduler queueing the resumed task (each up to about a
second with the default loop intervals), and the second Airflow task process's own start-up
(``airflow_task_start_seconds`` of the benchmark measures a proxy: a fresh process importing the Task
SDK and the sweep operator).
"""
from __future__ import annotations

import asyncio
import json
import os
import resource
import subprocess
import sys
import time

STORE_CONN = "bench_store"


def child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


class Triggerer:
    """The long-lived triggerer stand-in (module doc); one request at a time over stdin/stdout."""

    def __init__(self, env: dict, cwd: str, keyspace: str, host: str, connect_ports: dict[str, int], workdir: str):
        env = {
            **env,
            f"AIRFLOW_CONN_{STORE_CONN.upper()}": json.dumps(
                {"conn_type": "cassandra", "host": host, "port": 9042, "schema": keyspace}),
            "ATLAS_SPARK_ARTIFACT_DIR": os.path.join(workdir, "triggerer-artifacts"),
        }
        self.conn_ids = {}
        for master, port in connect_ports.items():
            conn_id = "bench_connect_" + "".join(ch for ch in master if ch.isalnum())
            env[f"AIRFLOW_CONN_{conn_id.upper()}"] = json.dumps(
                {"conn_type": "spark_connect", "host": "sc://127.0.0.1", "port": port})
            self.conn_ids[master] = conn_id
        self.proc = subprocess.Popen([sys.executable, "-m", "bench.spark_scaleout.deferred", "--triggerer"], env=env, cwd=cwd,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def run(self, master: str, request: dict) -> dict:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps({"request": {**request, "spark_conn_id": self.conn_ids[master]},
                                          "store_conn_id": STORE_CONN}) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the triggerer process exited ({self.proc.wait()})")
        return json.loads(line)

    def stop(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def submission(triggerer: Triggerer, master: str, request: dict, url_file: str, env: dict, cwd: str) -> tuple[dict, float, dict]:
    """One deferred submission (module doc): ``(document JSON, seconds, timings)``."""
    cpu = child_cpu()
    started = time.perf_counter()
    _task(["--task-before", url_file], env, cwd)
    before = time.perf_counter() - started
    reply = triggerer.run(master, request)
    trigger = reply["seconds"]
    event = reply["event"]
    if event.get("status") != "done":
        raise RuntimeError(f"the trigger failed: {event}")
    event_file = os.path.join(os.path.dirname(url_file), "event.json")
    with open(event_file, "w") as f:
        json.dump(event, f)
    resumed = time.perf_counter()
    out = _task(["--task-after", event_file], env, cwd)
    after = time.perf_counter() - resumed
    timings = {"task_before_seconds": before, "trigger_seconds": trigger, "task_after_seconds": after,
               "cpu_seconds": child_cpu() - cpu + reply["cpu_seconds"], "trigger_cpu_seconds": reply["cpu_seconds"]}
    return json.loads(out), before + trigger + after, timings


def _task(args: list[str], env: dict, cwd: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "bench.spark_scaleout.deferred", *args], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=3600)
    if proc.returncode != 0:
        raise RuntimeError(f"deferred task {args[0]} failed:\n{proc.stderr[-4000:]}")
    return proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else "{}"


def airflow_task_start(env: dict, cwd: str) -> float:
    """Seconds of a fresh process importing the Task SDK and the sweep operator (module doc)."""
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import airflow.sdk, airflow_atlas.airflow.operators.sweep"],
                   env=env, cwd=cwd, check=True, capture_output=True, timeout=600)
    return time.perf_counter() - started


def _open_close(url_file: str) -> None:
    from airflow_atlas.store import AtlasStore

    with open(url_file) as f:
        AtlasStore.open(f.read().strip()).close()


def _task_before(url_file: str) -> None:
    _open_close(url_file)  # what the task does before deferring (module doc)
    print("{}")


def _task_after(event_file: str) -> None:
    from airflow_atlas.serialisation import from_json, to_json
    from airflow_atlas.spark import JobDocument

    with open(event_file) as f:
        document = from_json(JobDocument, json.load(f)["document"])
    print(json.dumps(to_json(document)))


def _triggerer_main() -> None:
    import warnings

    warnings.filterwarnings("ignore", category=FutureWarning)  # pyspark's note on pandas 3
    # The replies go to the original stdout; everything else written to fd 1 (libraries, logging) to stderr.
    replies = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    from airflow_atlas.airflow.triggers.spark_connect import SparkConnectJobTrigger

    async def serve() -> None:
        loop = asyncio.get_running_loop()
        while True:
            line = await loop.run_in_executor(None, sys.stdin.readline)
            if not line:
                return
            kwargs = json.loads(line)
            cpu, started = time.process_time(), time.perf_counter()
            trigger = SparkConnectJobTrigger(**kwargs)
            event = None
            async for fired in trigger.run():
                event = fired.payload
                break
            reply = {"event": event, "seconds": time.perf_counter() - started, "cpu_seconds": time.process_time() - cpu}
            replies.write(json.dumps(reply) + "\n")
            replies.flush()

    asyncio.run(serve())


if __name__ == "__main__":
    if sys.argv[1:2] == ["--triggerer"]:
        _triggerer_main()
    elif sys.argv[1:2] == ["--task-before"] and len(sys.argv) == 3:
        _task_before(sys.argv[2])
    elif sys.argv[1:2] == ["--task-after"] and len(sys.argv) == 3:
        _task_after(sys.argv[2])
    else:
        print("internal to bench.spark_scaleout", file=sys.stderr)
        sys.exit(2)
