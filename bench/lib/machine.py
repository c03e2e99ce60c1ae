"""What a result records about the machine it ran on: CPU, cores, memory, versions, the node's facts (version,
heap, JIT, Paxos variant), load averages, and the CPU a step used (:class:`CpuProbe`). The machine is shared:
other work may run concurrently, which the load averages show."""
from __future__ import annotations

import os
import platform
import re
import subprocess
import time

from .node import cassandra_process, local_node_cmdline, node_jit, paxos_variant
from .paths import CASSANDRA_SCRIPT


def load_average() -> dict:
    one, five, fifteen = os.getloadavg()
    try:
        text = subprocess.run(["uptime"], capture_output=True, text=True, timeout=5).stdout.strip()
    except Exception:
        text = ""
    return {"1m": round(one, 2), "5m": round(five, 2), "15m": round(fifteen, 2), "uptime": text, "at": round(time.time(), 1)}


def _cpu_model() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=5).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except Exception:
        pass
    return platform.processor() or "unknown"


def _memory_bytes() -> int | None:
    try:
        import psutil

        return int(psutil.virtual_memory().total)
    except Exception:
        return None


def cassandra_facts(session=None) -> dict:
    """Cassandra version (from the node) and heap (nodetool info, else the JVM's -Xmx)."""
    facts: dict = {}
    if session is not None:
        try:
            facts["version"] = session.execute("SELECT release_version FROM system.local").one()[0]
        except Exception as exc:
            facts["version_error"] = str(exc)[:200]
        try:
            facts["paxos_variant"] = paxos_variant(session)
        except Exception as exc:
            facts["paxos_variant_error"] = str(exc)[:200]
    try:
        out = subprocess.run(
            [str(CASSANDRA_SCRIPT), "nodetool", "info"], capture_output=True, text=True, timeout=90
        ).stdout
        for line in out.splitlines():
            if line.startswith("Heap Memory (MB)"):
                used, total = (float(x) for x in line.split(":", 1)[1].split("/"))
                facts["heap_mb_used"] = used
                facts["heap_mb_max"] = total
    except Exception:
        pass
    cmd = local_node_cmdline()
    if cmd:
        facts["jit"] = node_jit(cmd)
        if "heap_mb_max" not in facts:
            for c in cmd:
                m = re.match(r"-Xmx(\d+)([GgMm])", c)
                if m:
                    facts["heap_mb_max"] = int(m.group(1)) * (1024 if m.group(2) in "Gg" else 1)
    return facts


_CASSANDRA_FACTS: dict = {}


def machine_info(cassandra_session=None) -> dict:
    info = {
        "cpu_model": _cpu_model(),
        "cores": os.cpu_count(),
        "memory_gib": round((_memory_bytes() or 0) / 2**30, 1),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }
    try:
        import cassandra

        info["cassandra_driver"] = cassandra.__version__
    except Exception:
        pass
    if cassandra_session is not None:
        if not _CASSANDRA_FACTS:  # nodetool starts a JVM: once per run
            _CASSANDRA_FACTS.update(cassandra_facts(cassandra_session))
        info["cassandra"] = dict(_CASSANDRA_FACTS)
    info["note"] = "shared machine: other work may run concurrently; see load averages"
    return info


class CpuProbe:
    """CPU used by this process, by the local Cassandra node and by the whole machine between start() and
    stop(), in cores (CPU seconds / wall seconds): where the time of a step goes."""

    def __init__(self):
        import psutil

        self._psutil = psutil
        self._me = psutil.Process()
        self._cassandra = cassandra_process()

    @staticmethod
    def _busy(t) -> float:
        return t.user + t.system + getattr(t, "nice", 0.0)

    def start(self) -> CpuProbe:
        self._t = time.perf_counter()
        self._mine = sum(self._me.cpu_times()[:2])
        self._node = sum(self._cassandra.cpu_times()[:2]) if self._cassandra else None
        self._all = self._busy(self._psutil.cpu_times())
        return self

    def stop(self) -> dict:
        wall = time.perf_counter() - self._t
        out = {
            "wall_seconds": wall,
            "this_process_cores": (sum(self._me.cpu_times()[:2]) - self._mine) / wall,
            "machine_busy_cores": (self._busy(self._psutil.cpu_times()) - self._all) / wall,
            "machine_cores": os.cpu_count(),
        }
        if self._cassandra is not None:
            try:
                out["cassandra_cores"] = (sum(self._cassandra.cpu_times()[:2]) - self._node) / wall
            except Exception:
                pass
        return out
