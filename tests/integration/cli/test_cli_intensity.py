"""``atlas-sweep sweep --max-entries-per-second`` and ``--set sweep_max_entries_per_second=N``: a paced run
sweeps everything (verify passes) and reports what it paced; bad values exit 2 before anything is written."""
from __future__ import annotations


def _pairs(out: dict) -> dict:
    return {(r["shard"], r["strategy"]): r for r in out["results"]}


def test_a_paced_cli_sweep_sweeps_everything_and_reports_the_pacing(sqlite_cli):
    sqlite_cli.ok("init")
    sqlite_cli.ok("workload", "-n", "12", "--writes-per-transaction", "2", "--table", "t:thorough")
    out = sqlite_cli.json("sweep", "--strategy", "thorough", "--batch-limit", "2", "--max-entries-per-second", "40")
    (r,) = _pairs(out).values()
    assert r["status"] == "caught_up" and r["max_entries_per_second"] == 40 and r["iterations"] > 2
    assert 0 < r["seconds_paced"] <= r["entries_read"] / 40 and out["totals"]["seconds_paced"] == r["seconds_paced"]
    sqlite_cli.ok("verify")
    text = sqlite_cli.ok("sweep", "--strategy", "thorough", "--max-entries-per-second", "40").stdout
    assert "caught_up" in text  # nothing left: no pacing line
    assert "paced" not in text


def test_the_setting_through_set_and_the_flag_wins(sqlite_cli):
    sqlite_cli.ok("init")
    sqlite_cli.ok("workload", "-n", "8", "--writes-per-transaction", "2", "--table", "t:thorough")
    out = sqlite_cli.json("sweep", "--strategy", "thorough", "--batch-limit", "2", "--set", "sweep_max_entries_per_second=50")
    (r,) = _pairs(out).values()
    assert r["max_entries_per_second"] == 50 and r["seconds_paced"] > 0
    sqlite_cli.ok("workload", "-n", "4", "--writes-per-transaction", "2", "--table", "t:thorough", "--seed", "8")
    out = sqlite_cli.json("sweep", "--strategy", "thorough", "--batch-limit", "2", "--set", "sweep_max_entries_per_second=50",
                          "--max-entries-per-second", "0")
    (r,) = _pairs(out).values()
    assert r["max_entries_per_second"] == 0 and r["seconds_paced"] == 0 and r["status"] == "caught_up"
    sqlite_cli.ok("verify")


def test_bad_rates_exit_2_and_sweep_nothing(sqlite_cli):
    sqlite_cli.ok("init")
    sqlite_cli.ok("workload", "-n", "3")
    bad = sqlite_cli.run("sweep", "--max-entries-per-second", "-5")
    assert bad.returncode == 2 and "--max-entries-per-second" in bad.stderr
    bad = sqlite_cli.run("sweep", "--set", "sweep_max_entries_per_second=fast")
    assert bad.returncode == 2 and "setting sweep_max_entries_per_second must be" in bad.stderr
    status = sqlite_cli.json("status")
    assert all(r["progress"] == -1 for r in status["shards"])
