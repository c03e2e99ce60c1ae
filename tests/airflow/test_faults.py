from __future__ import annotations

import pytest

from airflow_atlas.airflow.faults import InjectedFault, maybe_fail


def test_no_rule_no_fault(monkeypatch):
    monkeypatch.delenv("ATLAS_FAULT_INJECT", raising=False)
    maybe_fail("sweep_shard", 1, shard=0, strategy="THOROUGH")


def test_a_rule_fails_only_matching_points_and_early_attempts(monkeypatch):
    monkeypatch.setenv("ATLAS_FAULT_INJECT", "sweep_shard:shard=1:strategy=thorough:tries=2; scrub")
    with pytest.raises(InjectedFault):
        maybe_fail("sweep_shard", 1, shard=1, strategy="THOROUGH")
    with pytest.raises(InjectedFault):
        maybe_fail("sweep_shard", 2, shard=1, strategy="THOROUGH")
    maybe_fail("sweep_shard", 3, shard=1, strategy="THOROUGH")
    maybe_fail("sweep_shard", 1, shard=0, strategy="THOROUGH")
    maybe_fail("full_sweep", 1, table="x")
    with pytest.raises(InjectedFault):
        maybe_fail("scrub", 1)


def test_hang_rules_sleep_instead_of_failing(monkeypatch):
    import time

    monkeypatch.setenv("ATLAS_FAULT_INJECT", "scrub:hang=0.3")
    started = time.monotonic()
    maybe_fail("scrub", 1)
    assert time.monotonic() - started >= 0.3
    maybe_fail("scrub", 2)  # later attempts pass at once
