"""bench/lib/placement.py: the placement of a sweep process on a real child process, and a window's processes'
record."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.lib import placement as P


def test_a_confined_sweep_process_gets_half_a_core_and_the_placement_is_recorded():
    burn = "import time\nt, w = time.process_time(), time.time()\nwhile time.time() - w < 1.5: pass\nprint(time.process_time() - t)"
    proc = subprocess.Popen([sys.executable, "-c", burn], stdout=subprocess.PIPE, text=True)
    record = P.confine(proc.pid, P.CONFINED)
    used = float(proc.communicate(timeout=30)[0])
    P.release(record)
    assert record["placement"] == P.CONFINED and record["method"]
    if record["method"].startswith("cgroup"):
        assert record["sweeper_cpu_cores"] == P.SWEEPER_CPU_CORES
        assert used <= 1.5 * P.SWEEPER_CPU_CORES * 1.3, (used, record)  # a quota of half a core (with slack)
        assert not Path(record["cgroup"]).exists()
    assert P.confine(proc.pid, P.SHARED)["sweeper_cpu_cores"] is None
    with pytest.raises(ValueError, match="unknown placement"):
        P.confine(proc.pid, "pinned")

def test_a_windows_sweep_processes_share_the_confined_cpu():
    quota = {"placement": P.CONFINED, "method": "cgroup v2 cpu.max 25000 100000", "sweeper_cpu_cores": 0.25}
    both = P.window_record([{**quota, "cgroup": "/a"}, {**quota, "cgroup": "/b"}])
    assert both == {**quota, "sweeper_cpu_cores": 0.5, "sweep_processes": 2}  # two quotas add up
    pinned = {"placement": P.CONFINED, "method": "taskset: core 1 only (no writable cgroup)", "sweeper_cpu_cores": 1.0}
    assert P.window_record([pinned, pinned])["sweeper_cpu_cores"] == 1.0  # both on the one core
    shared = P.confine(os.getpid(), P.SHARED)
    assert P.window_record([shared, shared]) == {**shared, "sweep_processes": 2}
