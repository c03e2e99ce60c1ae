"""bench/run.py's arguments: ``--placement`` reaches foreground_impact only, and is refused without it."""
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
