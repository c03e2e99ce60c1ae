"""bench/run.py's arguments: ``--placement`` reaches foreground_impact only, and is refused without it; a focused
foreground_impact run (``--phase``, ``--variant``, ``--backlog-writes``) becomes ``run``'s keyword arguments, needs
its own ``--out`` and names what is wrong with a bad value."""
from __future__ import annotations

import pytest

from bench.run import parse_args


def test_placement_selects_foreground_impacts_placements():
    args = parse_args(["--only", "foreground_impact", "--placement", "confined"])
    assert args.names == ["foreground_impact"] and args.placement == ["confined"]
    assert parse_args(["--only", "foreground_impact"]).placement is None  # default: every placement


def test_placement_without_foreground_impact_or_unknown_is_refused(capsys):
    with pytest.raises(SystemExit):
        parse_args(["--only", "memory", "--placement", "confined"])
    assert "--placement applies to foreground_impact only" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parse_args(["--only", "foreground_impact", "--placement", "pinned"])
    assert "invalid choice: 'pinned'" in capsys.readouterr().err


def test_a_focused_run_becomes_foreground_impacts_keywords(tmp_path):
    args = parse_args(["--only", "foreground_impact", "--out", str(tmp_path), "--phase", "steady", "--variant",
                       "no_sweep", "--variant", "250", "--variant", "default", "--backlog-writes", "5",
                       "--baseline-after-load", "--batch-limit", "62", "--sweep-tasks", "2"])
    assert args.focus == {"phases": ("steady",), "only_variants": ("no_sweep", 250, "default"),
                          "backlog_writes": 5, "baseline_after_load": True, "batch_limit": 62, "sweep_tasks": 2}
    assert parse_args(["--only", "foreground_impact"]).focus == {}  # the full run: everything
    phases = parse_args(["--only", "foreground_impact", "--out", str(tmp_path), "--phase", "burst", "--phase", "idle"])
    assert phases.focus == {"phases": ("idle", "burst")}  # in the run's order


@pytest.mark.parametrize("argv, message", [
    (["--only", "foreground_impact", "--phase", "steady"], "give it --out"),
    (["--only", "foreground_impact", "--baseline-after-load"], "give it --out"),
    (["--only", "foreground_impact", "--out", "x", "--batch-limit", "0"], "--batch-limit must be at least 1"),
    (["--only", "foreground_impact", "--out", "x", "--sweep-tasks", "0"], "--sweep-tasks must be at least 1"),
    (["--only", "foreground_impact", "--sweep-tasks", "2"], "give it --out"),
    (["--only", "memory", "--out", "x", "--backlog-writes", "5"], "apply to foreground_impact only"),
    (["--only", "foreground_impact,memory", "--out", "x", "--phase", "steady"], "apply to foreground_impact only"),
    (["--only", "foreground_impact", "--out", "x", "--variant", "300"], "--variant '300': expected one of"),
    (["--only", "foreground_impact", "--out", "x", "--quick", "--variant", "250"], "of the quick mode (2000)"),
    (["--only", "foreground_impact", "--out", "x", "--variant", "fast"], "--variant 'fast'"),
    (["--only", "foreground_impact", "--out", "x", "--backlog-writes", "0"], "--backlog-writes must be at least 1"),
    (["--only", "foreground_impact", "--out", "x", "--phase", "night"], "invalid choice: 'night'"),
])
def test_a_bad_focus_is_refused_naming_it(argv, message, capsys):
    with pytest.raises(SystemExit):
        parse_args(argv)
    assert message in capsys.readouterr().err
