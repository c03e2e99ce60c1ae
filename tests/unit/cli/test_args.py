"""``atlas-sweep`` argument parsing: defaults, exit code 2 on bad input, error lines that name the problem.

Runs ``main()`` in-process; nothing here needs a store server (a few cases open a SQLite file in tmp)."""
from __future__ import annotations

import io
import sys

import pytest

from airflow_atlas import cli
from airflow_atlas.cli import EXIT_USAGE, ProgressBar, build_parser, main


def parse(*argv):
    return build_parser().parse_args(list(argv))


def run(capsys, *argv) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(autouse=True)
def no_env_store(monkeypatch):
    monkeypatch.delenv("ATLAS_STORE_URL", raising=False)


def test_defaults_and_common_options_in_either_position():
    args = parse("--store", "sqlite:///a.db", "status")
    assert args.command == "status" and args.store == "sqlite:///a.db"
    assert args.shard is None and args.strategy is None and args.window == 3600.0 and args.backlog_cap == 100_000
    args = parse("sweep", "--store", "sqlite:///a.db", "--shard", "1", "--shard", "0", "--strategy", "thorough",
                 "--dry-run", "--batch-limit", "50", "--max-iterations", "3", "--json")
    assert args.shard == [1, 0] and args.strategy == ["THOROUGH"] and args.dry_run and args.json
    assert (args.batch_limit, args.max_iterations) == (50, 3)
    assert args.max_entries_per_second is None
    # text: checked with the settings (the resolver's COMMAND_LINE layer), tests/unit/cli/test_args_settings.py
    assert parse("sweep", "--max-entries-per-second", "2500").max_entries_per_second == "2500"
    args = parse("workload", "--table", "orders:thorough", "--table", "audit", "--writes-per-transaction", "3-9",
                 "--open-transactions", "2", "--set", "transaction_lease_seconds=5")
    assert args.table == [("orders", "THOROUGH"), ("audit", "CONSERVATIVE")]
    assert args.writes_per_transaction == (3, 9) and args.open_transactions == 2
    assert args.settings == [("transaction_lease_seconds", "5")]
    assert parse("init").shards is None and parse("init", "--shards", "8").shards == 8
    assert parse("shards", "--raise-to", "16").raise_to == 16
    assert parse("workload", "--writes-per-transaction", "4").writes_per_transaction == (4, 4)


@pytest.mark.parametrize(
    "argv, expected",
    [
        ([], "the following arguments are required: COMMAND"),
        (["frobnicate"], "invalid choice: 'frobnicate'"),
        (["init", "--shards", "0"], "argument --shards: 0 is out of range (1..256)"),
        (["init", "--shards", "many"], "argument --shards: 'many' is not an integer"),
        (["shards", "--raise-to", "257"], "argument --raise-to: 257 is out of range (1..256)"),
        (["status", "--strategy", "NOTHING"], "argument --strategy: 'NOTHING' is not a sweep strategy"),
        (["status", "--shard", "-1"], "argument --shard: -1 is out of range (0..255)"),
        (["status", "--window", "0"], "argument --window: 0 must be a positive number"),
        (["sweep", "--batch-limit", "100001"], "argument --batch-limit: 100001 is out of range (1..100000)"),
        (["workload", "--delete-ratio", "1.5"], "argument --delete-ratio: 1.5 must be between 0 and 1"),
        (["workload", "--abort-ratio", "x"], "argument --abort-ratio: 'x' is not a number"),
        (["workload", "--writes-per-transaction", "5-2"], "'5-2': need 1 <= MIN <= MAX"),
        (["workload", "--table", "Bad-Name"], "argument --table: 'Bad-Name'"),
        (["workload", "--table", "t:SOMETIMES"], "unknown strategy 'SOMETIMES'"),
        (["status", "--set", "nonsense"], "argument --set: 'nonsense' is not NAME=VALUE"),
        (["status", "--bogus"], "unrecognized arguments: --bogus"),
    ],
)
def test_bad_arguments_exit_2_with_one_line_naming_the_problem(capsys, argv, expected):
    code, out, err = run(capsys, *argv)
    assert code == EXIT_USAGE
    assert out == ""
    assert err.startswith("atlas-sweep") and "error:" in err and expected in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_store_selection_errors(capsys, tmp_path, monkeypatch):
    code, _, err = run(capsys, "status")
    assert code == 2 and "no store given: pass --store URL or --conn-id ID, or set ATLAS_STORE_URL" in err
    code, _, err = run(capsys, "status", "--store", "sqlite:///a.db", "--conn-id", "atlas_default")
    assert code == 2 and "give either --store or --conn-id, not both" in err
    missing = tmp_path / "missing.db"
    code, _, err = run(capsys, "verify", "--store", f"sqlite:///{missing}")
    assert code == 2 and "does not exist" in err and "run 'atlas-sweep init' first" in err
    assert not missing.exists()
    monkeypatch.setenv("ATLAS_STORE_URL", f"sqlite:///{missing}")
    code, _, err = run(capsys, "shards")
    assert code == 2 and str(missing) in err


@pytest.mark.parametrize(
    "url, expected",
    [
        ("cassandra://127.0.0.1", "names no keyspace"),
        ("cassandra://h/ks?bogus=1", "unknown URL option 'bogus'"),
        ("cassandra://h:99999/ks", "port 99999 is outside 1-65535"),
        ("redis://h/0", "unsupported key-value store URL scheme 'redis'"),
        ("just-a-path.db", "has no scheme"),
        ("sqlite://host/x.db", "sqlite URLs have no host"),
    ],
)
def test_bad_store_urls_exit_2(capsys, url, expected):
    code, _, err = run(capsys, "status", "--store", url)
    assert code == 2 and expected in err and len(err.strip().splitlines()) == 1


def test_password_never_printed(capsys):
    code, _, err = run(capsys, "status", "--store", "cassandra://bob:hunter2@h/ks?bogus=1")
    assert code == 2 and "hunter2" not in err and "bob:***@h" in err


def test_bad_settings_exit_2(capsys, tmp_path):
    url = f"sqlite:///{tmp_path / 'a.db'}"
    assert run(capsys, "init", "--store", url)[0] == 0
    code, _, err = run(capsys, "status", "--store", url, "--set", "no_such_setting=1")
    assert code == 2 and "unknown setting(s): no_such_setting (from --set)" in err
    code, _, err = run(capsys, "status", "--store", url, "--set", "batch_limit=lots")
    assert code == 2 and "setting batch_limit must be an integer between 1 and 100000, got 'lots' (from --set)" in err
    code, _, err = run(capsys, "status", "--store", url, "--set", "batch_limit=0")
    assert code == 2 and "batch_limit must be between 1 and 100000" in err


def test_out_of_range_shard_is_a_usage_error(capsys, tmp_path):
    url = f"sqlite:///{tmp_path / 'a.db'}"
    assert run(capsys, "init", "--store", url, "--shards", "2")[0] == 0
    for command in ("status", "sweep"):
        code, _, err = run(capsys, command, "--store", url, "--shard", "2")
        assert code == 2 and "shard 2 is out of range: this store has 2 shard(s) (0..1)" in err


def test_help_documents_exit_codes(capsys):
    for argv in (["--help"], ["status", "--help"], ["verify", "--help"]):
        code, out, _ = run(capsys, *argv)
        assert code == 0 and "exit codes:" in out and "3  store unavailable" in out
    assert run(capsys, "--version")[0] == 0


def test_cli_and_status_modules_do_not_import_airflow():
    import subprocess

    code = "import sys, airflow_atlas.cli, airflow_atlas.status; sys.exit(1 if any(m == 'airflow' or m.startswith('airflow.') for m in sys.modules) else 0)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_progress_bar():
    stream = io.StringIO()
    with ProgressBar(10, "work", stream=stream, enabled=True) as bar:
        for _ in range(10):
            bar.advance()
    text = stream.getvalue()
    assert "work [" in text and "10/10 100%" in text and text.endswith("\n")
    quiet = io.StringIO()
    with ProgressBar(10, "work", stream=quiet) as bar:  # not a terminal: silent
        bar.advance(5)
    assert quiet.getvalue() == ""
    unknown = io.StringIO()
    with ProgressBar(None, "scan", stream=unknown, enabled=True) as bar:
        bar.update(7)
    assert "scan 7" in unknown.getvalue()


def test_entry_point_is_main():
    import tomllib

    from tests.conftest import REPO_ROOT

    scripts = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["atlas-sweep"] == "airflow_atlas.cli:main" and callable(cli.main)


def test_store_file_is_read_only_when_private(capsys, tmp_path):
    """--store-file: the store URL from a 0600 file (a password never on the command line); a file readable by
    group or others, a second store option or an empty file is refused, naming the file, never its content."""
    url_file = tmp_path / "store-url"
    url_file.write_text("cassandra://u:s3cret-pw@127.0.0.1/ks\n")
    url_file.chmod(0o644)
    code, _, err = run(capsys, "status", "--store-file", str(url_file))
    assert code == 2 and "mode 644" in err and "0600" in err and "s3cret-pw" not in err
    code, _, err = run(capsys, "status", "--store-file", str(url_file), "--store", "sqlite:///a.db")
    assert code == 2 and "give either --store or --store-file, not both" in err
    missing = tmp_path / "missing.db"
    url_file.write_text(f"sqlite:///{missing}\n")
    url_file.chmod(0o600)
    code, _, err = run(capsys, "status", "--store-file", str(url_file), "--conn-id", "atlas_default")
    assert code == 2 and "give either --store-file or --conn-id, not both" in err
    code, _, err = run(capsys, "verify", "--store-file", str(url_file))
    assert code == 2 and "does not exist" in err and "run 'atlas-sweep init' first" in err  # the file's URL was used
    url_file.write_text("\n")
    code, _, err = run(capsys, "verify", "--store-file", str(url_file))
    assert code == 2 and "is empty" in err
