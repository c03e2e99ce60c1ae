"""LatencyRecorder: the latency of what the application does, recorded by this process's transaction layer
into one :class:`~airflow_atlas.transactions.histogram.LatencyHistogram` per kind, until a publisher drains
them (:mod:`airflow_atlas.transactions.latency_publisher`).

Kinds (:data:`KINDS`), all measured with ``time.perf_counter``:

* ``commit`` - a transaction from the start of ``begin()`` (registration and start timestamp included) to
  the end of a successful ``commit()``; read-only transactions included;
* ``abort`` - the same for a transaction that ended aborted (by ``abort()``, a conflict, a lost
  registration or an error); each attempt of ``TransactionManager.run`` is one transaction;
* ``read`` - one ``get``/``get_row_columns`` of a transaction that reached the store (reads served from
  the transaction's own writes are not recorded).

Recording is one lock acquisition, one ``bisect`` and two additions; thread-safe.
"""
from __future__ import annotations

import threading

from .histogram import LatencyHistogram

COMMIT = "commit"
ABORT = "abort"
READ = "read"
KINDS: tuple[str, ...] = (COMMIT, ABORT, READ)


class LatencyRecorder:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._current = {kind: LatencyHistogram() for kind in KINDS}

    def record(self, kind: str, seconds: float) -> None:
        with self._lock:
            self._current[kind].record(seconds)

    def drain(self) -> dict[str, LatencyHistogram]:
        """What was recorded since the last drain (kinds with nothing recorded are left out)."""
        with self._lock:
            taken, self._current = self._current, {kind: LatencyHistogram() for kind in KINDS}
        return {kind: h for kind, h in taken.items() if h.count}


__all__ = ["ABORT", "COMMIT", "KINDS", "READ", "LatencyRecorder"]
