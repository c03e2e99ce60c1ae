"""tests/cluster/node_logs.py: a node's system.log read with the zips logback rolled it into (no node runs
here: the directories are laid out as logback leaves them)."""
from __future__ import annotations

import threading
import time
import zipfile

import pytest

from tests.cluster.node_logs import log_files, read_since_last

START = "Configuration location: file:/tmp/conf/cassandra.yaml"


def _line(when: str, message: str) -> str:
    return f"INFO  [main] {when},000 File.java:1 - {message}"


def _rolled(logs, date: str, index: int, lines: list[str]) -> None:
    """A file rolled as logback does it: system.log.<date>.<index>.zip holding system.log.<date>.<index>."""
    with zipfile.ZipFile(logs / f"system.log.{date}.{index}.zip", "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(f"system.log.{date}.{index}", "\n".join(lines) + "\n")


def _current(logs, lines: list[str]):
    path = logs / "system.log"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_start_rolled_over_at_midnight_is_read_from_the_zip_then_the_current_file(tmp_path):
    _rolled(tmp_path, "2026-11-24", 0, [_line("2026-11-24 10:00:00", START), _line("2026-11-24 10:00:01", "old run")])
    _rolled(tmp_path, "2026-11-25", 0, [
        _line("2026-11-25 09:00:00", "old run, still"),
        _line("2026-11-25 21:51:43", START),
        _line("2026-11-25 21:51:44", "after the start"),
        _line("2026-11-25 23:59:59", "before midnight"),
    ])
    (tmp_path / "stdout.log").write_text(_line("2026-11-26 00:00:01", START) + "\n")  # not the node's log
    path = _current(tmp_path, [_line("2026-11-26 00:00:00", "after midnight")])

    log = read_since_last(path, "Configuration location: ")
    assert log is not None
    assert log.lines == [
        _line("2026-11-25 21:51:43", START),
        _line("2026-11-25 21:51:44", "after the start"),
        _line("2026-11-25 23:59:59", "before midnight"),
        _line("2026-11-26 00:00:00", "after midnight"),
    ]
    assert [f.path.name for f in log.files] == ["system.log.2026-11-25.0.zip", "system.log"]
    assert log.size_roll_overs == 0


def test_the_last_start_wins_and_a_start_in_the_current_file_reads_no_zip(tmp_path):
    _rolled(tmp_path, "2026-11-25", 0, [_line("2026-11-25 21:51:43", START)])
    path = _current(tmp_path, [_line("2026-11-26 00:00:00", "x"), _line("2026-11-26 01:00:00", START), _line("2026-11-26 01:00:01", "y")])
    log = read_since_last(path, "Configuration location: ")
    assert log is not None and log.lines == [_line("2026-11-26 01:00:00", START), _line("2026-11-26 01:00:01", "y")]
    assert [f.path.name for f in log.files] == ["system.log"] and log.size_roll_overs == 0


def test_rolled_files_are_ordered_by_date_then_numeric_index_and_size_roll_overs_are_counted(tmp_path):
    """Within a day the index grows with each size roll-over; the day's last file is its midnight roll."""
    _rolled(tmp_path, "2026-11-25", 0, [_line("2026-11-25 20:00:00", START), "a"])
    for index in range(1, 11):
        _rolled(tmp_path, "2026-11-25", index, [f"b{index}"])
    _rolled(tmp_path, "2026-11-26", 0, ["c"])
    (tmp_path / "debug.log.2026-11-25.0.zip").write_bytes(b"another log's roll")
    path = _current(tmp_path, ["d"])
    names = [f.path.name for f in log_files(path)]
    assert names == ["system.log.2026-11-25.0.zip", *(f"system.log.2026-11-25.{i}.zip" for i in range(1, 11)),
                     "system.log.2026-11-26.0.zip", "system.log"]
    log = read_since_last(path, "Configuration location: ")
    assert log is not None
    assert log.lines == [_line("2026-11-25 20:00:00", START), "a", *(f"b{i}" for i in range(1, 11)), "c", "d"]
    assert log.size_roll_overs == 10  # 12 rolled files over 2 days: 2 at midnight, 10 for size


def test_a_start_that_rolled_away_entirely_is_none(tmp_path):
    _rolled(tmp_path, "2026-11-25", 0, ["no start here"])
    assert read_since_last(_current(tmp_path, ["nor here"]), "Configuration location: ") is None


def test_a_roll_over_being_compressed_is_waited_for(tmp_path):
    """logback renames the rolled file to <zip name without .zip><nanoTime>.tmp, zips it in the background,
    then deletes it: the reader waits until the zip is complete, and gives up with a clear error."""
    path = _current(tmp_path, ["after midnight"])
    pending = tmp_path / "system.log.2026-11-25.0123456789.tmp"
    pending.write_text(_line("2026-11-25 21:51:43", START) + "\n")
    with pytest.raises(TimeoutError, match=r"roll-over still being compressed after 0.3 s: \['system.log.2026-11-25.0123456789.tmp'\]"):
        log_files(path, compressing_wait_seconds=0.3)

    def finish():
        time.sleep(0.5)
        _rolled(tmp_path, "2026-11-25", 0, [_line("2026-11-25 21:51:43", START)])
        pending.unlink()

    finisher = threading.Thread(target=finish)
    finisher.start()
    try:
        log = read_since_last(path, "Configuration location: ")
    finally:
        finisher.join()
    assert log is not None and log.lines == [_line("2026-11-25 21:51:43", START), "after midnight"]
