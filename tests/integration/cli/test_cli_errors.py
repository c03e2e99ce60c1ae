"""Exit codes and error lines a script can rely on (no Cassandra node needed)."""
from __future__ import annotations

from .conftest import Cli


def test_unreachable_cassandra_exits_3_without_the_password(tmp_path):
    cli = Cli("cassandra://sweeper:topsecret@127.0.0.1:1/atlas?connect_timeout=1", tmp_path)
    result = cli.run("status")
    assert result.returncode == 3, result.stderr
    assert result.stderr.startswith("atlas-sweep: error: store unavailable:")
    assert "127.0.0.1" in result.stderr and "topsecret" not in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert result.stdout == ""


def test_bad_urls_exit_2_naming_the_problem(tmp_path):
    cases = {
        "cassandra://127.0.0.1": "names no keyspace",
        "mysql://db/x": "unsupported key-value store URL scheme 'mysql'",
        "sqlite://": "sqlite URL needs a database file path",
    }
    for url, expected in cases.items():
        result = Cli(url, tmp_path).run("status")
        assert result.returncode == 2, (url, result.stderr)
        assert expected in result.stderr, (url, result.stderr)
        assert "Traceback" not in result.stderr


def test_usage_errors_exit_2(tmp_path):
    cli = Cli(None, tmp_path)
    missing = cli.run("status")
    assert missing.returncode == 2 and "no store given" in missing.stderr and "ATLAS_STORE_URL" in missing.stderr
    both = cli.run("status", "--store", "sqlite:///a.db", "--conn-id", "x")
    assert both.returncode == 2 and "either --store or --conn-id" in both.stderr
    bad = cli.run("init", "--store", "sqlite:///a.db", "--shards", "300")
    assert bad.returncode == 2 and "--shards" in bad.stderr and "300 is out of range" in bad.stderr
    assert not (tmp_path / "a.db").exists()
    helped = cli.run("sweep", "--help")
    assert helped.returncode == 0 and "exit codes:" in helped.stdout and "--dry-run" in helped.stdout
