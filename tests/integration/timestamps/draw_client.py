"""The takeover drill's moving parts: client processes that draw timestamps continuously, and the faults.

:func:`client_main` runs in a process of its own (multiprocessing, 'spawn'): ``threads`` threads draw through
``AtlasStore.timestamps`` (the real client: coalescing, failover) until told to stop, and log every draw as
``(start_ns, end_ns, low, high)`` on ``time.monotonic_ns`` - CLOCK_MONOTONIC, one clock for every process of
the machine, so that "A returned before B started" means the same across processes. The log is written to a
file at the end; a few shared counters tell the parent, while it runs, when draws succeed again after a fault.

:class:`TakeoverDrill` injects the faults on real ``atlas-sweep timestamps serve`` processes and measures each
takeover as the time from the fault (just before the signal) until every running client has completed a draw
it *started* once the faulted leader was gone or stopped (such a draw cannot be served by it): kill -9 of the
leader (then a restart on its address), SIGSTOP of the leader (SIGCONT after the takeover; the resumed instance is then asked
directly and must refuse), SIGSTOP of a client process across such a takeover (SIGCONT after it).
Used by tests/integration/timestamps/test_takeover.py and bench/takeover_drill.py.
"""
from __future__ import annotations

import json
import multiprocessing
import os
import signal
import threading
import time
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .order_checker import Draw

# Slots of a client's shared counters (a RawArray of int64).
OK_COUNT, RECOVERED_NS, ERRORS, LAST_END_NS = range(4)
SLOTS = 4
DRAW_SIZES = (1, 1, 1, 2, 5)
"""The counts the threads ask for in turn (mostly single timestamps, as transactions do)."""


# ----- the client process --------------------------------------------------------------------------------
def client_main(store_url: str, servers: Sequence[str], threads: int, out: str, counters: Any, fault_ns: Any,
                stop: Any, max_seconds: float) -> None:
    """Draw with ``threads`` threads until ``stop`` is set or ``max_seconds`` pass; write the log to ``out``.

    ``counters`` (this client's): successful draws, the end of the first draw started after ``fault_ns``,
    failed draws, the end of the latest draw. A failed draw is counted and logged, never retried as success."""
    from airflow_atlas.config import StoreConfig
    from airflow_atlas.store import AtlasStore

    store = AtlasStore.open(store_url, StoreConfig(timestamp_servers=tuple(servers)))
    timestamps = store.timestamps
    deadline = time.monotonic() + max_seconds
    lock = threading.Lock()
    logs = [array("q") for _ in range(threads)]
    errors: list[str] = []

    def draw(index: int) -> None:
        log = logs[index]
        turn = index
        while not stop.is_set() and time.monotonic() < deadline:
            n = DRAW_SIZES[turn % len(DRAW_SIZES)]
            turn += 1
            start = time.monotonic_ns()
            try:
                block = timestamps.fresh_timestamps(n)
            except Exception as exc:  # logged and counted: the parent fails the drill on any
                end = time.monotonic_ns()
                with lock:
                    counters[ERRORS] += 1
                    if len(errors) < 20:
                        errors.append(f"{(end - start) / 1e9:.3f}s {exc.__class__.__name__}: {exc}")
                time.sleep(0.05)
                continue
            end = time.monotonic_ns()
            log.extend((start, end, block[0], block[-1]))
            counters[OK_COUNT] += 1
            counters[LAST_END_NS] = end
            if start > fault_ns.value and counters[RECOVERED_NS] <= fault_ns.value:
                with lock:
                    if counters[RECOVERED_NS] <= fault_ns.value:
                        counters[RECOVERED_NS] = end

    workers = [threading.Thread(target=draw, args=(i,), name=f"draw-{i}") for i in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=max(1.0, deadline - time.monotonic() + 30))  # a draw retries for at most 20 s
    merged = array("q")
    for log in logs:
        merged.extend(log)
    tmp = Path(out + ".tmp")
    with open(tmp, "wb") as f:
        merged.tofile(f)
    os.replace(tmp, out)
    Path(out + ".json").write_text(json.dumps({"errors": errors, "stuck_threads": sum(w.is_alive() for w in workers)}))
    store.close()
    os._exit(0)  # a stuck draw thread must not keep the process alive


def read_log(path: Path, source: str) -> list[Draw]:
    """The draws a client wrote to ``path``."""
    data = array("q")
    with open(path, "rb") as f:
        data.frombytes(f.read())
    return [Draw(data[i], data[i + 1], data[i + 2], data[i + 3], source) for i in range(0, len(data), 4)]


# ----- the drill -------------------------------------------------------------------------------------------
@dataclass
class Fault:
    """One injected fault and what it cost."""

    kind: str  # "leader_kill" | "leader_pause" | "client_pause"
    leader: str
    takeover_seconds: float | None  # None: draws did not resume within the drill's limit
    epoch_before: int
    epoch_after: int
    notes: dict = field(default_factory=dict)


class TakeoverDrill:
    """Client processes drawing from the instances ``servers`` of the store ``store_url`` while faults are
    injected. Use as a context manager (stops and joins the clients on the way out)."""

    def __init__(self, store_url: str, keyspace: str, servers: list, kvs: Any, work_dir: Path, *,
                 clients: int = 3, threads: int = 4, lease_seconds: float = 2.0, max_seconds: float = 120.0,
                 recovery_limit: float = 30.0):
        self.store_url = store_url
        self.keyspace = keyspace
        self.servers = servers
        self.kvs = kvs
        self.work_dir = work_dir
        self.lease_seconds = lease_seconds
        self.recovery_limit = recovery_limit
        self.max_seconds = max_seconds
        self.faults: list[Fault] = []
        self.probes: list[Draw] = []
        """Draws the drill made itself from a resumed old leader (each one it answered is a bug)."""
        self.probe_answers: list[str] = []
        ctx = multiprocessing.get_context("spawn")
        self._stop = ctx.Event()
        self._fault_ns = ctx.RawValue("q", 0)
        self._counters = [ctx.RawArray("q", SLOTS) for _ in range(clients)]
        self._outs = [work_dir / f"client-{i}.bin" for i in range(clients)]
        addresses = [s.address for s in servers]
        self.processes = [
            ctx.Process(target=client_main, name=f"draw-client-{i}", daemon=True,
                        args=(store_url, addresses, threads, str(self._outs[i]), self._counters[i],
                              self._fault_ns, self._stop, max_seconds))
            for i in range(clients)
        ]

    # ----- lifecycle -------------------------------------------------------------------------------------
    def __enter__(self) -> TakeoverDrill:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        for p in self.processes:
            p.start()
        ready = self._wait_recovered(0, range(len(self.processes)), 90.0)
        if ready is None:
            self.__exit__(None, None, None)
            raise RuntimeError(f"the draw clients did not draw within 90s (errors: {self.errors()})")
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for p in self.processes:
            if p.pid is not None:
                try:
                    os.kill(p.pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass
        for p in self.processes:
            p.join(timeout=60)
            if p.is_alive():
                p.kill()
                p.join(timeout=10)

    def history(self) -> list[Draw]:
        """Every draw of every client (after the drill), and the drill's own probes."""
        draws = list(self.probes)
        for i, out in enumerate(self._outs):
            if out.exists():
                draws.extend(read_log(out, f"client-{i}"))
        return draws

    def client_reports(self) -> list[dict]:
        found = []
        for out in self._outs:
            path = Path(str(out) + ".json")
            found.append(json.loads(path.read_text()) if path.exists() else {"missing": str(out)})
        return found

    def errors(self) -> int:
        return sum(c[ERRORS] for c in self._counters)

    def draws_so_far(self) -> int:
        return sum(c[OK_COUNT] for c in self._counters)

    # ----- observing -------------------------------------------------------------------------------------
    def record(self) -> tuple[str, int]:
        """The store record's leader address and epoch (a SERIAL read)."""
        from airflow_atlas.timestamps.record import read_record

        record, _ = read_record(self.kvs, serial=True)
        assert record is not None, "the store has no timestamp server record"
        return record.leader_address, record.epoch

    def leader(self) -> Any:
        """The ServerProcess the record names as leader (waits up to 10 s for one of ours to lead)."""
        deadline = time.monotonic() + 10
        while True:
            address, _ = self.record()
            for server in self.servers:
                if server.address == address and server.process.poll() is None:
                    return server
            if time.monotonic() > deadline:
                raise RuntimeError(f"no running instance leads the store (record names {address!r})")
            time.sleep(0.1)

    def _arm(self) -> int:
        """From now on, a client's next successful draw marks its recovery."""
        now = time.monotonic_ns()
        self._fault_ns.value = now
        return now

    @staticmethod
    def _wait_stopped(pid: int, limit: float = 5.0) -> None:
        """Until every thread of ``pid`` is stopped (state T in /proc): a draw started after that cannot be
        served by it, so it marks a recovery. (Without this wait, draws served while the signal was still on
        its way looked like an instant recovery.)"""
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            try:
                states = [Path(f"/proc/{pid}/task/{t}/stat").read_text().rsplit(")", 1)[1].split()[0]
                          for t in os.listdir(f"/proc/{pid}/task")]
            except (FileNotFoundError, ProcessLookupError, IndexError):
                continue
            if states and all(state in ("T", "t") for state in states):
                return
            time.sleep(0.001)
        raise RuntimeError(f"process {pid} did not stop within {limit:g}s of SIGSTOP")

    def _wait_recovered(self, fault_ns: int, clients: Any, limit: float) -> float | None:
        """Seconds from ``fault_ns`` until each of ``clients`` completed a draw started after it (the slowest);
        None when that did not happen within ``limit`` seconds."""
        clients = list(clients)
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            dead = [p.name for p in self.processes if p.exitcode is not None]
            if dead:
                raise RuntimeError(f"draw client processes exited early: {dead} (see the captured stderr)")
            ends = [self._counters[i][RECOVERED_NS] for i in clients]
            if all(end > fault_ns for end in ends):
                return (max(ends) - fault_ns) / 1e9
            time.sleep(0.01)
        return None

    def _settle(self) -> None:
        """Before the next fault: every instance running and the record's leader one of them, the others
        having watched the record for a while (so that the next takeover starts from a steady state)."""
        self.leader()
        time.sleep(self.lease_seconds / 2)

    def _probe(self, server: Any, tries: int = 3) -> None:
        """Ask ``server`` (a resumed old leader) for a timestamp directly: it must refuse. An answer is kept
        as a draw of the history (it is a bug whatever its value) and in :attr:`probe_answers`."""
        import grpc

        from airflow_atlas.timestamps import timestamps_pb2 as pb
        from airflow_atlas.timestamps.rpc import TimestampsStub

        with grpc.insecure_channel(server.address, options=[("grpc.enable_retries", 0)]) as channel:
            stub = TimestampsStub(channel)
            for _ in range(tries):
                start = time.monotonic_ns()
                try:
                    answer = stub.FreshTimestamps(pb.FreshTimestampsRequest(store=self.keyspace, count=1), timeout=5)
                except grpc.RpcError as exc:
                    self.probe_answers.append(exc.code().name)
                else:
                    end = time.monotonic_ns()
                    self.probes.append(Draw(start, end, answer.start, answer.start + answer.count - 1,
                                            f"probe {server.address} epoch {answer.epoch}"))
                    self.probe_answers.append(f"OK start={answer.start} epoch={answer.epoch}")
                time.sleep(0.05)

    # ----- the faults --------------------------------------------------------------------------------------
    def leader_kill(self) -> Fault:
        """kill -9 the leader, restart it on its address, wait until draws succeed again."""
        from devkit.timestamps import start_server

        self._settle()
        victim = self.leader()
        _, epoch = self.record()
        fault = time.monotonic_ns()
        victim.kill()  # returns once the process is gone
        armed = self._arm()
        restarted = start_server(self.store_url, victim.address, victim.log, lease_seconds=self.lease_seconds)
        self.servers[self.servers.index(victim)] = restarted
        took = self._took(fault, self._wait_recovered(armed, range(len(self.processes)), self.recovery_limit),
                          armed)
        return self._done(Fault("leader_kill", victim.address, took, epoch, self.record()[1]))

    def leader_pause(self, paused_client: int | None = None) -> Fault:
        """SIGSTOP the leader; once draws succeed again, SIGCONT it and ask it directly (it must refuse).
        With ``paused_client``, that client process is SIGSTOPped before the fault and SIGCONTed after the
        old leader resumed (its client still points at the old leader); its own recovery is in the notes."""
        self._settle()
        victim = self.leader()
        _, epoch = self.record()
        running = [i for i in range(len(self.processes)) if i != paused_client]
        notes: dict = {}
        if paused_client is not None:
            os.kill(self.processes[paused_client].pid, signal.SIGSTOP)
            self._wait_stopped(self.processes[paused_client].pid)
        fault = time.monotonic_ns()
        victim.signal(signal.SIGSTOP)
        try:
            self._wait_stopped(victim.process.pid)
            armed = self._arm()
            took = self._took(fault, self._wait_recovered(armed, running, self.recovery_limit), armed)
            leader_after, epoch_after = self.record()
        finally:
            victim.signal(signal.SIGCONT)
        notes["leader_after"] = leader_after
        self._probe(victim)
        if paused_client is not None:
            resumed = self._arm()
            os.kill(self.processes[paused_client].pid, signal.SIGCONT)
            back = self._wait_recovered(resumed, [paused_client], self.recovery_limit)
            notes["paused_client_recovery_seconds"] = back
        kind = "leader_pause" if paused_client is None else "client_pause"
        return self._done(Fault(kind, victim.address, took, epoch, epoch_after, notes))

    def client_pause(self, client: int) -> Fault:
        """SIGSTOP client process ``client`` across a takeover (a paused leader), SIGCONT it after."""
        return self.leader_pause(paused_client=client)

    @staticmethod
    def _took(fault_ns: int, since_armed: float | None, armed_ns: int) -> float | None:
        """Seconds from the fault (just before the signal) to the recovery measured from ``armed_ns``."""
        return None if since_armed is None else since_armed + (armed_ns - fault_ns) / 1e9

    def _done(self, fault: Fault) -> Fault:
        self.faults.append(fault)
        return fault
