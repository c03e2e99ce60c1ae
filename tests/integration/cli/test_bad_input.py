"""Bad input is refused before anything is written (issue 16 items 4, 5, 7, 8), on the embedded store.

The Cassandra side of items 4, 5 and 8 is in ``test_cli_cassandra.py``.
"""
from __future__ import annotations

import hashlib
import os
import sqlite3

import pytest

from airflow_atlas.kvs.scrub import redact_url, scrub, url_secrets

from .conftest import Cli

NOT_INIT = ("status", "sweep", "verify", "shards", "workload")


def _digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ----- 16.4: every command but init creates nothing ----------------------------------------------------
def test_commands_create_nothing_in_an_empty_sqlite_file(tmp_path):
    db = tmp_path / "empty.db"
    db.touch()
    cli = Cli(f"sqlite:///{db}", tmp_path)
    for command in NOT_INIT:
        result = cli.run(command)
        assert result.returncode == 2, (command, result.stderr)
        assert "run 'atlas-sweep init' first" in result.stderr and "Traceback" not in result.stderr
    assert db.stat().st_size == 0  # no kvs_meta, no WAL header
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.db"]  # no -wal / -shm


def test_commands_leave_a_foreign_sqlite_database_alone(tmp_path):
    db = tmp_path / "other.db"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE accounts (id INTEGER PRIMARY KEY, owner TEXT)")
    conn.execute("INSERT INTO accounts (owner) VALUES ('ada')")
    conn.commit()
    conn.close()
    before = _digest(db)
    cli = Cli(f"sqlite:///{db}", tmp_path)
    for command in NOT_INIT:
        result = cli.run(command)
        assert result.returncode == 2, (command, result.stderr)
        assert "not an Atlas store" in result.stderr and "run 'atlas-sweep init' first" in result.stderr
    # init refuses it too: an Atlas store needs its own file
    refused = cli.run("init")
    assert refused.returncode == 2 and "database of something else" in refused.stderr and "accounts" in refused.stderr
    assert _digest(db) == before
    with sqlite3.connect(db) as check:
        assert check.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
        assert [r[0] for r in check.execute("SELECT name FROM sqlite_master WHERE type='table'")] == ["accounts"]


def test_missing_file_and_directory_are_not_created(tmp_path):
    cli = Cli(f"sqlite:///{tmp_path / 'sub' / 'dir' / 'atlas.db'}", tmp_path)
    for command in NOT_INIT:
        result = cli.run(command)
        assert result.returncode == 2 and "does not exist" in result.stderr, (command, result.stderr)
    assert not (tmp_path / "sub").exists()


# ----- 16.5: init validates everything, then applies ---------------------------------------------------
def test_init_refuses_a_conflicting_table_before_raising_shards_or_creating_tables(sqlite_cli):
    sqlite_cli.ok("init", "--shards", "4", "--table", "demo_conservative:CONSERVATIVE")
    result = sqlite_cli.run("init", "--shards", "16", "--table", "newtab:THOROUGH", "--table", "demo_conservative:THOROUGH")
    assert result.returncode == 2, result.stderr
    assert "demo_conservative" in result.stderr and "CONSERVATIVE" in result.stderr and "nothing was changed" in result.stderr
    shown = sqlite_cli.json("shards")
    assert shown["number_of_shards"] == 4
    status = sqlite_cli.json("status")
    assert status["tables"] == {"demo_conservative": "CONSERVATIVE"}
    twice = sqlite_cli.run("init", "--table", "x:THOROUGH", "--table", "x:CONSERVATIVE")
    assert twice.returncode == 2 and "given twice" in twice.stderr
    assert "x" not in sqlite_cli.json("status")["tables"]
    # the valid form applies everything
    sqlite_cli.ok("init", "--shards", "16", "--table", "newtab:THOROUGH", "--table", "demo_conservative:CONSERVATIVE")
    assert sqlite_cli.json("shards")["number_of_shards"] == 16
    assert sqlite_cli.json("status")["tables"]["newtab"] == "THOROUGH"


# ----- 16.7: bad paths are bad input naming the path --------------------------------------------------------
@pytest.mark.parametrize("command", ["init", "status"])
def test_bad_paths_exit_2_naming_the_path(tmp_path, command):
    (tmp_path / "adir").mkdir()
    text = tmp_path / "notes.txt"
    text.write_text("this is not a database, just text that is long enough to have a header " * 10)
    long_name = "a" * 300 + ".db"
    cases = {
        str(tmp_path / "adir"): ("is a directory", str(tmp_path / "adir")),
        str(text): ("not an SQLite database", str(text)),
        str(tmp_path / long_name): ("303 bytes long", "aaaa"),
        "/proc/atlas-test/atlas.db": ("/proc/atlas-test", "/proc/atlas-test"),
        str(tmp_path / "nul%00byte.db"): ("NUL byte", str(tmp_path)),
        str(text / "below-a-file.db"): ("notes.txt", str(text)),
    }
    for path, (reason, named) in cases.items():
        result = Cli(f"sqlite:///{path}", tmp_path).run(command)
        assert result.returncode == 2, (path, result.returncode, result.stderr)
        assert reason in result.stderr and named in result.stderr, (path, result.stderr)
        assert "Traceback" not in result.stderr and "unexpected" not in result.stderr
    assert text.read_text().startswith("this is not a database")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adir", "notes.txt"]


# ----- 16.8: credentials are never echoed ----------------------------------------------------------------------
PASSWORD = "S3cretPW"
BAD_URLS = [
    f"cassandra://sweeper:pa/{PASSWORD}@127.0.0.1:1/atlas?connect_timeout=1",  # unescaped slash
    f"cassandra://sweeper:{PASSWORD}@127.0.0.1:notaport/atlas",
    f"cassandra://sweeper:{PASSWORD}@bad host/atlas",
    f"cassandra://sweeper:{PASSWORD}@127.0.0.1/",
    f"cassandra://sweeper:{PASSWORD}@127.0.0.1/a/b",
    f"cassandra://sweeper:{PASSWORD}@127.0.0.1/atlas?bogus=1",
    f"cassandra://sweeper:{PASSWORD}@127.0.0.1/atlas#frag",
    f"cassandra://sweeper:pa?{PASSWORD}@127.0.0.1/atlas",
    f"cassandra://sweeper:pa#{PASSWORD}@127.0.0.1/atlas",
    f"cassandra://sweeper:{PASSWORD}:x@[::1/atlas",
    f"cassandra://127.0.0.1:1/atlas?password={PASSWORD}&connect_timeout=1",
    f"cassandra://:{PASSWORD}@127.0.0.1/atlas",
]


def test_no_error_echoes_any_part_of_the_password(tmp_path):
    for url in BAD_URLS:
        result = Cli(url, tmp_path).run("status")
        assert result.returncode in (2, 3), (url, result.stderr)
        out = result.stdout + result.stderr
        assert PASSWORD not in out and PASSWORD[:5] not in out, (url, out)
        assert "Traceback" not in out


def test_one_redaction_function_covers_userinfo_and_query():
    for url in BAD_URLS:
        shown = redact_url(url)
        assert PASSWORD not in shown and PASSWORD[:5] not in shown, (url, shown)
        assert PASSWORD not in scrub(f"failed: {url} ({PASSWORD})", url_secrets(url))
    assert redact_url("cassandra://u:p%2Fw@h:9042/ks?ssl=true") == "cassandra://u:***@h:9042/ks?ssl=true"
    assert redact_url("sqlite:////tmp/a@b/x.db") == "sqlite:////tmp/a@b/x.db"  # a path, not credentials
    assert url_secrets("sqlite:////tmp/a@b/x.db") == []


def test_password_with_a_slash_is_parsed_as_the_password():
    from airflow_atlas.kvs.address import StoreAddress

    a = StoreAddress.from_url(f"cassandra://u:pa/{PASSWORD}@h:9042/ks?ssl=true")
    assert (a.username, a.password, a.hosts, a.port, a.keyspace, a.ssl) == ("u", f"pa/{PASSWORD}", ("h",), 9042, "ks", True)
    assert os.sep == "/"
