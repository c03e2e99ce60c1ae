"""What every ``atlas-sweep`` command shares for output: exit codes, the expected-error type, JSON on
stdout, text tables, the stderr progress bar and the one-line error."""
from __future__ import annotations

import argparse
import json
import sys
import time
from typing import TextIO

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_UNAVAILABLE = 3
EXIT_SKIPPED = 4
"""``sweep``: nothing failed, but at least one pair was skipped because another sweeper holds its lease."""
EXIT_ACCESS = 5
"""The store refused the credentials, the TLS handshake failed, or the role lacks a permission."""
EXIT_INTERRUPTED = 130
PROG = "atlas-sweep"

EXIT_CODES_HELP = """\
exit codes:
  0  success
  1  verification failed (verify) or a sweep of a pair failed (sweep); unexpected error
  2  usage or bad input (bad option, value, path or URL, store not initialized, lowering the shard count)
  3  store unavailable (Cassandra unreachable, timing out or refusing requests)
  4  sweep: nothing failed, but some pairs were skipped (another sweeper holds their lease)
  5  access refused: wrong credentials, an untrusted/expired/mismatched certificate, a missing permission

store selection (first that applies): --store URL, --conn-id ID (an Airflow connection), $ATLAS_STORE_URL
  sqlite:///relative/path.db   sqlite:////absolute/path.db
  cassandra://[user:password@]host1,host2[:port]/keyspace[?replication_factor=1&ssl=true...]
"""

class CliError(Exception):
    """An expected failure: ``message`` goes to stderr as one line, ``code`` is the exit code."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code
        self.message = message

def wants_json(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "json", False))

def emit_json(data: object) -> None:
    """The one place a command's result is serialised for ``--json`` (None stays null)."""
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")

def fail(code: int, message: str) -> int:
    print(f"{PROG}: error: {message}", file=sys.stderr)
    return code

def table(headers: list[str], rows: list[list]) -> str:
    """A left-aligned text table; None prints as ``-``."""
    cells = [[("-" if v is None else str(v)) for v in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    for r in cells:
        lines.append("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip())
    return "\n".join(lines) + "\n"

def count(n: int, capped: bool) -> str:
    return f"{n}+" if capped else str(n)

def rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}/s"

class ProgressBar:
    """A tiny progress bar on stderr: ``label [#######.........]  345/1000  34% 120/s``.

    Disabled (no output at all) unless ``enabled`` is True, or None and the stream is a terminal. Redraws
    at most every 0.1 s; :meth:`close` draws the final state and ends the line.
    """

    def __init__(self, total: int | None, label: str = "", *, stream: TextIO | None = None, enabled: bool | None = None,
                 width: int = 30) -> None:
        self.stream = stream if stream is not None else sys.stderr
        if enabled is None:
            enabled = bool(getattr(self.stream, "isatty", lambda: False)())
        self.enabled = enabled
        self.total = total if total and total > 0 else None
        self.label = label
        self.width = width
        self.done = 0
        self._started = time.monotonic()
        self._drawn = 0.0
        self._closed = False

    def advance(self, n: int = 1) -> None:
        self.update(self.done + n)

    def update(self, done: int, label: str | None = None) -> None:
        self.done = done
        if label is not None:
            self.label = label
        now = time.monotonic()
        if self.enabled and now - self._drawn >= 0.1:
            self._drawn = now
            self._draw()

    def _draw(self, end: str = "") -> None:
        elapsed = max(time.monotonic() - self._started, 1e-9)
        speed = self.done / elapsed
        if self.total:
            frac = min(1.0, self.done / self.total)
            filled = int(frac * self.width)
            bar = "#" * filled + "." * (self.width - filled)
            text = f"{self.label} [{bar}] {self.done}/{self.total} {frac * 100:3.0f}% {speed:.0f}/s"
        else:
            text = f"{self.label} {self.done} {speed:.0f}/s"
        self.stream.write("\r" + text + " " * 4 + end)
        self.stream.flush()

    def close(self) -> None:
        if self.enabled and not self._closed:
            self._draw(end="\n")
        self._closed = True

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
