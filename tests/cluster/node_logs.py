"""Read a Cassandra node's system.log together with the files logback rolled it over into.

``scripts/cassandra/conf/logback.xml`` rolls ``system.log`` with a SizeAndTimeBasedRollingPolicy into
``system.log.<yyyy-MM-dd>.<i>.zip`` (one zipped ``system.log.<yyyy-MM-dd>.<i>`` each): at the first line
logged after midnight (the date is the day that ended; ``i`` restarts at 0 each day), and whenever the
file reaches its size cap (``i`` + 1 within the day). A run that crosses midnight therefore finds the
node's start in a rolled zip, not in ``system.log``.

:func:`read_since_last` reads the rolled files and the current one in the order they were written and
returns the lines since the last line holding a marker (e.g. the node's first line at a start), with the
rolled files those lines span, so a caller can tell a daily roll-over from a size roll-over.
"""
from __future__ import annotations

import glob
import re
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

_ROLLED = re.compile(r"^(?P<base>.+)\.(?P<date>\d{4}-\d{2}-\d{2})\.(?P<index>\d+)\.zip$")


@dataclass(frozen=True)
class LogFile:
    """One file of a node's log: rolled (``date`` and ``index`` from its name) or current (both None)."""

    path: Path
    date: str | None = None
    index: int | None = None

    @property
    def rolled(self) -> bool:
        return self.date is not None

    def lines(self) -> list[str]:
        if not self.rolled:
            return self.path.read_text(errors="replace").splitlines()
        with zipfile.ZipFile(self.path) as archive:
            members = archive.namelist()
            if len(members) != 1:
                raise ValueError(f"{self.path}: a rolled log holds one file, this one holds {members}")
            return archive.read(members[0]).decode(errors="replace").splitlines()


@dataclass(frozen=True)
class LogSince:
    """The lines from the last marker line on (that line first), and the files they came from, oldest first."""

    lines: list[str]
    files: list[LogFile]

    @property
    def size_roll_overs(self) -> int:
        """How many of the rolled files since the marker were rolled for size rather than at midnight: a
        day's last rolled file is its midnight roll-over, its others were rolled for size."""
        rolled = [f for f in self.files if f.rolled]
        return len(rolled) - len({f.date for f in rolled})


def log_files(current: Path, *, compressing_wait_seconds: float = 10.0) -> list[LogFile]:
    """``current`` (a node's system.log) and the files rolled from it, in the order they were written.
    Other files of the directory (stdout.log, gc logs, another log's rolls) are left out.

    Logback renames the file it rolls to ``<zip name without .zip><nanoTime>.tmp`` and zips that in the
    background, deleting it when the zip is complete: while such a file exists, a roll-over is being
    compressed, and this waits (up to ``compressing_wait_seconds``) until it is done."""
    deadline = time.monotonic() + compressing_wait_seconds
    while pending := sorted(p.name for p in current.parent.glob(f"{glob.escape(current.name)}.*.tmp")):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{current.parent}: roll-over still being compressed after {compressing_wait_seconds} s: {pending}")
        time.sleep(0.2)
    rolled = []
    for path in current.parent.iterdir():
        match = _ROLLED.match(path.name)
        if match and match["base"] == current.name:
            rolled.append(LogFile(path, match["date"], int(match["index"])))
    rolled.sort(key=lambda f: (f.date, f.index))
    return [*rolled, *([LogFile(current)] if current.exists() else [])]


def read_since_last(current: Path, marker: str) -> LogSince | None:
    """The lines of ``current``'s log (rolled files included) from the last line holding ``marker``; None
    when no file holds it (all rolled away, or never logged)."""
    files = log_files(current)
    for start in range(len(files) - 1, -1, -1):  # newest file first: the last marker is usually in it
        lines = files[start].lines()
        hits = [i for i, line in enumerate(lines) if marker in line]
        if hits:
            since = lines[hits[-1]:]
            for later in files[start + 1:]:
                since.extend(later.lines())
            return LogSince(since, files[start:])
    return None
