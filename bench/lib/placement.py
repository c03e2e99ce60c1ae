"""Process placement of a benchmark's sweep process (issue 31 item 3): where its client CPU may run, recorded
with every result.

* ``confined`` models production, where the sweeper runs on its own Airflow worker: the sweep process gets a
  bounded share of the machine, :data:`SWEEPER_CPU_CORES`, by a CPU quota of its own cgroup (v2 ``cpu.max`` or
  v1 ``cpu.cfs_quota_us``, under the cgroup root of this machine, when writable), else pinned to one core with
  ``taskset`` (then the share is that core, shared with whatever else runs there). The node and the
  application are not pinned: pinning them to the other core saturated it (issue 31: a no-sweep steady p99
  of 449 ms in one repetition and 42 ms in the next).
* ``shared``: no confinement; every process competes for every core (as before issue 31).

:func:`confine` returns the record that goes into the result (``placement``, ``method``, ``sweeper_cpu_cores``);
:func:`release` removes a cgroup once its process has exited. Benchmarks only: nothing of the engine uses this.
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

CONFINED, SHARED = "confined", "shared"
PLACEMENTS = (CONFINED, SHARED)
SWEEPER_CPU_CORES = 0.5
"""The confined sweep process's CPU quota: half a core, a quarter of the 2-core machine the results come from
(the sweep's client CPU at full speed is about one core: bench/ANALYSIS.md)."""
PERIOD_US = 100_000
CGROUP_ROOT = Path("/sys/fs/cgroup")


def _v2_dir() -> Path | None:
    if (CGROUP_ROOT / "cgroup.controllers").exists() and "cpu" in (CGROUP_ROOT / "cgroup.subtree_control").read_text():
        return CGROUP_ROOT
    return None


def _v1_dir() -> Path | None:
    cpu = CGROUP_ROOT / "cpu"
    return cpu if (cpu / "cpu.cfs_quota_us").exists() else None


def confine(pid: int, placement: str, *, cores: float = SWEEPER_CPU_CORES) -> dict:
    """Place process ``pid`` as ``placement`` says; the record of what was done (``cgroup`` names the
    directory to :func:`release`)."""
    if placement == SHARED:
        return {"placement": SHARED, "method": "none: every process on every core", "sweeper_cpu_cores": None}
    if placement != CONFINED:
        raise ValueError(f"unknown placement {placement!r}; expected one of {', '.join(PLACEMENTS)}")
    quota = int(cores * PERIOD_US)
    for base, version in ((_v2_dir(), 2), (_v1_dir(), 1)):
        if base is None:
            continue
        group = base / f"airflow-atlas-bench-{pid}"
        try:
            group.mkdir(exist_ok=True)
            if version == 2:
                (group / "cpu.max").write_text(f"{quota} {PERIOD_US}")
                method = f"cgroup v2 cpu.max {quota} {PERIOD_US}"
            else:
                (group / "cpu.cfs_period_us").write_text(str(PERIOD_US))
                (group / "cpu.cfs_quota_us").write_text(str(quota))
                method = f"cgroup v1 cpu.cfs_quota_us {quota} / cpu.cfs_period_us {PERIOD_US}"
            (group / "cgroup.procs").write_text(str(pid))
        except OSError:
            _rmdir(group)  # not writable here: try the next way
            continue
        return {"placement": CONFINED, "method": method, "sweeper_cpu_cores": cores, "cgroup": str(group)}
    last = (os.cpu_count() or 1) - 1
    subprocess.run(["taskset", "-a", "-cp", str(last), str(pid)], check=True, capture_output=True)
    return {"placement": CONFINED, "method": f"taskset: core {last} only (no writable cgroup)", "sweeper_cpu_cores": 1.0}


def window_record(records: list[dict]) -> dict:
    """The record of one window's sweep processes (from :func:`confine`, one each): the first's without its
    ``cgroup``, with ``sweep_processes`` and their CPU share together - their quotas add up, while ``taskset``
    puts them all on the same core (so one core) and ``shared`` bounds none."""
    first = {k: v for k, v in records[0].items() if k != "cgroup"}
    if records[0].get("cgroup"):  # a quota of its own per process (taskset shares one core, shared bounds none)
        first["sweeper_cpu_cores"] = sum(r["sweeper_cpu_cores"] for r in records)
    return {**first, "sweep_processes": len(records)}


def _rmdir(group: Path) -> None:
    try:
        group.rmdir()
    except OSError:
        pass


def release(record: dict) -> None:
    """Remove the cgroup :func:`confine` made (its process has exited; a cgroup with processes stays)."""
    if record.get("cgroup"):
        _rmdir(Path(record["cgroup"]))


__all__ = ["CONFINED", "PLACEMENTS", "SHARED", "SWEEPER_CPU_CORES", "confine", "release", "window_record"]
