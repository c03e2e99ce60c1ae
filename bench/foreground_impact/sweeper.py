"""foreground_impact's sweep process: one ``TargetedSweeper.sweep_shard`` run of the THOROUGH backlog in a child
process of its own (as an Airflow worker or a Spark executor is), placed by :mod:`bench.lib.placement`, for one
window's seconds.

The parent side is :class:`Sweeper` (start the child, wait until it is connected, say go, read its JSON line);
the child side is :func:`sweeper_main`, run as
``python -m bench.foreground_impact.sweeper URL VARIANT SECONDS BATCH_LIMIT|- SHARD``.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from bench.lib import placement as P
from bench.lib.paths import REPO_ROOT

from .summary import DEFAULT, UNTHROTTLED

WINDOW_OVER, CAUGHT_UP = "window_over", "caught_up"
"""The statuses of a sweep window that did what it should: stopped at the window's end, or swept the backlog."""


class _WindowOver(Exception):
    """Raised by the sweep run's ``on_iteration`` callback after the first iteration past the window."""


def sweeper_main(url: str, variant: str, seconds: float, batch_limit: int | None = None, shard: int = 0) -> None:
    """Child process: open the store, say ``ready``, wait for ``go`` on stdin, sweep ``shard`` THOROUGH as the
    variant says for at most ``seconds`` (then the iteration under way finishes; ``batch_limit``: the run's, else
    the setting's), print one JSON line (start-up stays out of the measured window)."""
    from airflow_atlas.config import StoreConfig
    from airflow_atlas.serialisation import to_json
    from airflow_atlas.store import AtlasStore

    pacing: dict = {}  # the default: the settings' pace
    if variant != DEFAULT:  # a fixed rate (0: none at all)
        pacing = {"max_entries_per_second": 0 if variant == UNTHROTTLED else int(variant), "latency_target": 0.0}
    store = AtlasStore.open(url, StoreConfig())
    timeline: list[tuple[float, int, float | None]] = []  # (seconds since go, entries so far, pace)
    try:
        store.number_of_shards()  # connected and the schema read
        print("ready", flush=True)
        if sys.stdin.readline().strip() != "go":  # the benchmark stopped (its end of the pipe closed)
            return
        started = time.time()
        entries = 0

        def on_iteration(it) -> None:
            nonlocal entries
            entries += it.counts.entries_read
            now = time.time()
            timeline.append((round(now - started, 3), entries, it.pace_entries_per_second))
            if now - started >= seconds:
                raise _WindowOver

        try:
            run = to_json(store.sweeper.sweep_shard(shard, "THOROUGH", max_iterations=1_000_000, on_iteration=on_iteration,
                                            batch_limit=batch_limit, **pacing))
        except _WindowOver:
            run = store.history.runs(shard, "THOROUGH", limit=1)[0]  # the run as recorded: failed, by _WindowOver
            if run.get("status") != "failed" or not str(run.get("error", "")).startswith("_WindowOver"):
                raise RuntimeError(f"the newest run in the history is not this one: {run}") from None
            run["status"] = WINDOW_OVER
        ended = started + timeline[-1][0] if timeline else time.time()  # the end of the last iteration
    finally:
        store.close()
    print(json.dumps({
        "shard": shard, "started": started, "ended": ended, "status": run["status"], "entries_read": run["entries_read"],
        "cells_tombstoned": run["cells_tombstoned"], "iterations": run["iterations"],
        "seconds_paced": run["seconds_paced"], "max_entries_per_second": run["max_entries_per_second"],
        "latency_target": run.get("latency_target"), "pace_entries_per_second": run.get("pace_entries_per_second"),
        "pace_reason": run.get("pace_reason"), "pace_backoffs": run.get("pace_backoffs", 0),
        "pace_timeline": _thin(timeline) if variant == DEFAULT else [],
    }), flush=True)


def _thin(timeline: list, points: int = 60) -> list:
    """At most ``points`` entries of a timeline (every k-th, and the last)."""
    step = max(1, -(-len(timeline) // points))
    out = timeline[::step]
    if timeline and out[-1] != timeline[-1]:
        out.append(timeline[-1])
    return out


def combined(children: list[dict]) -> dict:
    """One window's sweep from the JSON lines of its sweep processes (one per pair swept at once): from the first
    start to the last end, their entries, cells, iterations and back-offs summed, their paces added up (the rate
    the store meets), the first's reason and timeline; ``window_over`` or ``caught_up`` only when every process
    ended so, else the first other status."""
    if len(children) == 1:
        return children[0]
    first = children[0]
    paces = [c["pace_entries_per_second"] for c in children]
    bad = [c["status"] for c in children if c["status"] not in (CAUGHT_UP, WINDOW_OVER)]
    return {
        **first, "shard": [c["shard"] for c in children],
        "started": min(c["started"] for c in children), "ended": max(c["ended"] for c in children),
        "status": bad[0] if bad else (WINDOW_OVER if any(c["status"] == WINDOW_OVER for c in children)
                                      else CAUGHT_UP),
        **{k: sum(c[k] for c in children) for k in ("entries_read", "cells_tombstoned", "iterations", "pace_backoffs")},
        "seconds_paced": max(c["seconds_paced"] for c in children),
        "pace_entries_per_second": None if any(p is None for p in paces) else sum(paces),
    }


class Sweeper:
    """The sweep process of one window and pair: constructing it starts the process (it connects while the
    parent loads the backlog); :meth:`start` returns once it is connected; :meth:`go` starts the sweep;
    :meth:`result` waits for its JSON line. ``cores``: its share when confined (a window's processes share
    :data:`~bench.lib.placement.SWEEPER_CPU_CORES`, as the tasks of one Airflow worker share its CPU)."""

    def __init__(self, url: str, variant, seconds: float, placement: str = P.SHARED, batch_limit: int | None = None,
                 shard: int = 0, cores: float = P.SWEEPER_CPU_CORES):
        env = {**os.environ, "PYTHONPATH": str(REPO_ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "bench.foreground_impact.sweeper", url, str(variant), str(seconds),
             "-" if batch_limit is None else str(batch_limit), str(shard)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
            cwd=str(REPO_ROOT))
        self.placement = P.confine(self._proc.pid, placement, cores=cores)  # before it connects: its whole run

    def start(self) -> Sweeper:
        line = self._proc.stdout.readline()
        if line.strip() != "ready":
            self._proc.kill()
            raise RuntimeError(f"sweep process did not start: {line!r} {self._proc.stderr.read()[-2000:]}")
        return self

    def go(self) -> None:
        self._proc.stdin.write("go\n")
        self._proc.stdin.flush()

    def result(self) -> dict:
        out, err = self._proc.communicate(timeout=3600)
        P.release(self.placement)
        if self._proc.returncode != 0:
            raise RuntimeError(f"sweep process exited {self._proc.returncode}: {err[-2000:]}")
        return json.loads(out.strip().splitlines()[-1])



def main(argv: list[str]) -> int:
    if len(argv) != 5:
        print("usage: python -m bench.foreground_impact.sweeper URL VARIANT SECONDS BATCH_LIMIT|- SHARD"
              " (run the benchmark with python -m bench.run --only foreground_impact)", file=sys.stderr)
        return 2
    url, variant, seconds, batch_limit, shard = argv
    sweeper_main(url, variant, float(seconds), None if batch_limit == "-" else int(batch_limit), int(shard))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
