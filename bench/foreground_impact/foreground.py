"""foreground_impact's application: open-loop snapshot transactions on a CONSERVATIVE table of pre-loaded cells,
each reading :data:`READS` random cells of one half and writing one random cell of the other half, issued at a
planned rate (each starts at its planned instant on a thread pool; its latency is measured from that instant, so
queueing behind a slow store counts - no coordinated omission). Conflicts are counted, not timed."""
from __future__ import annotations

import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor

READS = 4
"""Cells each foreground transaction reads (it writes one)."""
FG_TABLE = "fg_app"
"""The application's table (CONSERVATIVE)."""


class Foreground:
    """Open-loop snapshot transactions at ``rate`` per second until :meth:`stop`; samples are
    (planned wall instant, latency seconds)."""

    def __init__(self, store, cells, rate: float, seed: int):
        self._store = store
        # Reads and writes on disjoint halves: a reader never waits for a running writer of its cell
        # (that application-level contention would swamp what the store's load does to latency).
        half = len(cells) // 2
        self._read_cells, self._write_cells = cells[:half], cells[half:]
        self._rate = rate
        self._rng = random.Random(seed)
        self._stop = threading.Event()
        self.samples: list[tuple[float, float]] = []
        self.conflicts = 0
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=64, thread_name_prefix="fg")
        self._thread = threading.Thread(target=self._schedule, name="fg-schedule", daemon=True)

    def start(self) -> Foreground:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self._pool.shutdown(wait=True)

    def _schedule(self) -> None:
        perf0, wall0 = time.perf_counter(), time.time()
        i = 0
        while not self._stop.is_set():
            planned = perf0 + i / self._rate
            delay = planned - time.perf_counter()
            if delay > 0 and self._stop.wait(delay):
                break
            reads = self._rng.sample(self._read_cells, READS)
            write = self._rng.choice(self._write_cells)
            value = self._rng.randbytes(32)
            self._pool.submit(self._one, planned, wall0 + (planned - perf0), reads, write, value)
            i += 1

    def _one(self, planned: float, planned_wall: float, reads, write, value) -> None:
        from airflow_atlas.errors import TransactionConflictError

        try:
            txn = self._store.transactions.begin()
            try:
                txn.get(FG_TABLE, reads)
                txn.put(FG_TABLE, {write: value})
                txn.commit()
            except BaseException:
                if txn.is_open:
                    txn.abort()
                raise
        except TransactionConflictError:
            with self._lock:
                self.conflicts += 1
            return
        except Exception as exc:  # reported, never hidden
            with self._lock:
                self.errors.append(f"{type(exc).__name__}: {exc}")
            return
        latency = time.perf_counter() - planned
        with self._lock:
            self.samples.append((planned_wall, latency))

    def window(self, start: float, end: float) -> list[float]:
        with self._lock:
            return sorted(lat for at, lat in self.samples if start <= at <= end)


