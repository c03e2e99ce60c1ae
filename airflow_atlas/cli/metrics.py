"""``atlas-sweep metrics``: the store's sweep status as Prometheus gauges
(:class:`airflow_atlas.status.metrics.StatusCollector`), served over HTTP at ``/metrics`` (any path answers)
on ``--listen HOST:PORT`` (loopback by default) until interrupted, or printed once with ``--once``."""
from __future__ import annotations

import argparse
import signal
import sys
import threading
from typing import TYPE_CHECKING

from .output import EXIT_OK, EXIT_USAGE, CliError

if TYPE_CHECKING:
    from .store import StoreHandle

DEFAULT_LISTEN = "127.0.0.1:9464"
"""Where ``atlas-sweep metrics`` listens by default: loopback only (expose it with an explicit host)."""


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6) -> (host, port); port 0 picks a free port."""
    host, sep, port_text = text.strip().rpartition(":")
    host = host.strip()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not sep or not host:
        raise ValueError(f"{text!r} is not HOST:PORT (e.g. {DEFAULT_LISTEN})")
    try:
        port = int(port_text)
    except ValueError:
        raise ValueError(f"{text!r}: the port {port_text!r} is not an integer") from None
    if not 0 <= port <= 65535:
        raise ValueError(f"{text!r}: the port must be between 0 and 65535")
    return host, port


def cmd_metrics(args: argparse.Namespace, h: StoreHandle) -> int:
    from prometheus_client import generate_latest, start_http_server

    from ..status.compaction import threshold_of
    from ..status.metrics import StatusCollector, status_registry

    threshold = threshold_of(h.settings)  # with --conn-id: the atlas_settings Variable's
    collector = StatusCollector(
        lambda: h.store,
        shards=args.shard,
        strategies=args.strategy,
        window_seconds=args.window,
        history_limit=args.history,
        backlog_cap=args.backlog_cap,
        timeout_seconds=args.timeout,
        compaction_threshold=lambda: threshold,
    )
    registry = status_registry(collector)
    try:
        if args.once:
            sys.stdout.write(generate_latest(registry).decode())
            return EXIT_OK
        host, port = args.listen
        try:
            server, thread = start_http_server(port, addr=host, registry=registry)
        except OSError as exc:
            raise CliError(EXIT_USAGE, f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
        stop = threading.Event()
        previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
        shown = f"[{host}]" if ":" in host else host
        print(f"serving the metrics of {h.label} at http://{shown}:{server.server_port}/metrics", flush=True)
        try:
            while not stop.wait(1.0):
                pass
        finally:
            signal.signal(signal.SIGTERM, previous)
            server.shutdown()
            server.server_close()
            thread.join(timeout=5)
        return EXIT_OK
    finally:
        collector.close()
