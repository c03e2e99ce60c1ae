"""SweepShardOperator and the in-task execution mode on their own (no DAG run): where a group is swept,
argument checks, and sweep_in_task on a real embedded store (each pair's lock taken and released by the
engine, foreign locks skipped, failures isolated, a killed task starting no further pair, on_kill releasing
this run's leases)."""
from __future__ import annotations

import pytest

from airflow_atlas.airflow.execution.in_task import sweep_in_task
from airflow_atlas.airflow.execution.outcome import SweepOptions
from airflow_atlas.airflow.settings import AtlasSettings
from airflow_atlas.airflow.targets import SweepTarget
from airflow_atlas.errors import InvalidInputError
from airflow_atlas.serialisation import to_json

pytestmark = pytest.mark.airflow


def _operator(**kwargs):
    from airflow_atlas.airflow.operators.sweep import SweepShardOperator

    return SweepShardOperator(task_id="sweep", **kwargs)


@pytest.mark.parametrize(
    "argument, planned, setting, expected",
    [
        (None, "spark", "in_task", "spark"),  # the plan's choice wins over the setting
        (None, None, "spark", "spark"),
        (None, None, "auto", "in_task"),  # auto without a plan: in the task
        ("in_task", "spark", "auto", "in_task"),  # an explicit argument wins
    ],
)
def test_execution_mode_follows_the_plan(argument, planned, setting, expected):
    targets = [SweepTarget(0, "THOROUGH", execution_mode=planned), SweepTarget(1, "THOROUGH", execution_mode=planned)]
    assert _operator(execution_mode=argument)._mode(targets, AtlasSettings(execution_mode=setting)) == expected


def test_auto_is_decided_by_the_plan_not_the_sweep_task():
    with pytest.raises(InvalidInputError, match="decided once per group by the plan"):
        _operator(execution_mode="auto")._mode([SweepTarget(0, "THOROUGH")], AtlasSettings())
    mixed = [SweepTarget(0, "THOROUGH", execution_mode="spark"), SweepTarget(1, "THOROUGH", execution_mode="in_task")]
    with pytest.raises(InvalidInputError, match="different execution modes"):
        _operator()._mode(mixed, AtlasSettings())


def _converted(**kwargs):
    """The operator with its templated arguments converted, as ``execute`` does first."""
    from airflow_atlas.airflow.templated import convert_templated_fields

    operator = _operator(**kwargs)
    convert_templated_fields(operator)
    return operator


def test_options_default_to_the_settings_and_refuse_bad_values():
    options = _converted(batch_limit=0, max_iterations="7", dry_run=True)._options(AtlasSettings.from_mapping({"batch_limit": 500}))
    assert options == SweepOptions(batch_limit=500, max_iterations=7, dry_run=True)
    assert _converted(dry_run="False")._options(AtlasSettings()).dry_run is False
    with pytest.raises(InvalidInputError, match="batch_limit"):
        _converted(batch_limit=100_001)._options(AtlasSettings())
    with pytest.raises(InvalidInputError, match="max_iterations must be an integer"):
        _converted(max_iterations="many")


@pytest.fixture
def store(tmp_path):
    from airflow_atlas.config import StoreConfig
    from airflow_atlas.store import AtlasStore
    from airflow_atlas.workload import WorkloadSpec, run_workload

    store = AtlasStore.open(f"sqlite:///{tmp_path / 'atlas.db'}", config=StoreConfig(unreadable_window_seconds=0))
    store.initialize(shards=2)
    run_workload(store, WorkloadSpec(transactions=30, rows=10, seed=4))
    yield store
    store.close()


def _holder(target: SweepTarget) -> str:
    return f"airflow:dag:run:{target.strategy}:{target.shard}"


def test_sweep_in_task_takes_and_releases_each_pairs_lock_and_skips_a_foreign_one(store):
    dead = store.locks.acquire(SweepTarget(0, "THOROUGH").lock_name, _holder(SweepTarget(0, "THOROUGH")), 60.0)
    other = store.locks.acquire(SweepTarget(1, "THOROUGH").lock_name, "someone-else", 60.0)
    targets = [SweepTarget(0, "THOROUGH"), SweepTarget(1, "THOROUGH"), SweepTarget(0, "CONSERVATIVE"),
               SweepTarget(1, "CONSERVATIVE")]
    reported = []
    swept, failed = sweep_in_task(store, targets, SweepOptions(batch_limit=50, max_iterations=10), holder_of=_holder,
                                  on_pair=reported.append)
    statuses = {(t.shard, t.strategy): t.status for t in swept}
    assert failed == [] and [t.label for t in reported] == [t.label for t in targets]  # each pair as it is done
    assert statuses == {(0, "THOROUGH"): "caught_up", (1, "THOROUGH"): "skipped_locked",
                        (0, "CONSERVATIVE"): "caught_up", (1, "CONSERVATIVE"): "caught_up"}
    assert swept[1].result["lock_holder"] == "someone-else"
    assert swept[0].result["lock_holder"] == _holder(targets[0])
    # the same holder (a retry of the task) took over the lease its dead try left, then released it
    state = store.locks.describe(targets[0].lock_name)
    assert state.holder is None and state.token == dead.token + 1
    assert store.locks.describe(targets[1].lock_name).holder == "someone-else" == other.holder  # untouched
    assert [lock.name for lock in store.locks.list_locks("sweep/") if lock.held] == [targets[1].lock_name]


def test_a_failing_pair_does_not_stop_the_others_and_bad_input_stops_at_once(store, monkeypatch):
    from airflow_atlas.errors import StoreUnavailableError, TableNotFoundError

    real = store.sweeper.sweep_shard

    def flaky(shard, strategy, **kw):
        if (shard, strategy) == (0, "THOROUGH"):
            raise StoreUnavailableError("node down")
        return real(shard, strategy, **kw)

    monkeypatch.setattr(store.sweeper, "sweep_shard", flaky)
    targets = [SweepTarget(0, "THOROUGH"), SweepTarget(1, "THOROUGH")]
    swept, failed = sweep_in_task(store, targets, SweepOptions(batch_limit=50, max_iterations=10), holder_of=_holder)
    assert [t.label for t in swept] == ["THOROUGH/1"]
    assert failed[0].result == {"status": "failed", "error": "StoreUnavailableError: node down"}

    def missing(shard, strategy, **kw):
        raise TableNotFoundError("no table t")

    monkeypatch.setattr(store.sweeper, "sweep_shard", missing)
    with pytest.raises(TableNotFoundError):
        sweep_in_task(store, targets, SweepOptions(batch_limit=50, max_iterations=10), holder_of=_holder)


def test_a_killed_task_starts_no_further_pair(store):
    from airflow_atlas.airflow.execution.in_task import KILLED, InTaskMode

    mode = InTaskMode(store, holder_of=_holder, on_pair=lambda target: mode.kill())  # killed after the first pair
    outcome = mode.sweep({}, [SweepTarget(0, "THOROUGH"), SweepTarget(1, "THOROUGH")],
                         SweepOptions(batch_limit=50, max_iterations=10))
    assert [t.status for t in outcome.swept] == ["caught_up"] and outcome.reported
    assert [(t.label, t.result) for t in outcome.failed] == [("THOROUGH/1", {"status": "failed", "error": KILLED})]
    assert store.locks.describe(SweepTarget(1, "THOROUGH").lock_name) is None  # never taken


def test_on_kill_mid_pair_releases_this_runs_lease_and_no_further_pair_starts(embedded_store, monkeypatch, tmp_path):
    """On SIGTERM Airflow calls on_kill in the task's main thread, mid-sweep. It releases this run's leases of
    the task's pairs with a connection of its own (the task's may be mid-request), by holder: the pair being
    swept loses its lease (the engine's fencing stops it) and no further pair starts; another holder's lock
    is left alone. Here on_kill is called where the signal would land: right after a ranged delete."""
    from airflow.sdk.exceptions import AirflowException

    from airflow_atlas.kvs import opening
    from airflow_atlas.workload import WorkloadSpec, run_workload
    from tests.airflow.conftest import settle
    from tests.faults import FaultyKvs

    from .conftest import run_operator

    store, _ = embedded_store
    run_workload(store, WorkloadSpec(transactions=40, rows=10, seed=5, dead_writer_ratio=0, abort_ratio=0))
    settle(store)
    pairs = [SweepTarget(s, t) for t in ("THOROUGH", "CONSERVATIVE") for s in range(store.number_of_shards())]
    foreign = store.locks.acquire(pairs[-1].lock_name, "someone-else", 60.0)
    operator = _operator(targets=[to_json(t) for t in pairs], execution_mode="in_task")
    open_kvs = opening.open_kvs
    monkeypatch.setattr(opening, "open_kvs", lambda address, **kw: FaultyKvs(
        open_kvs(address, **kw), str(tmp_path / "kill.marker"), lambda marker, what: operator.on_kill(),
        after_progress=False))
    with pytest.raises(AirflowException, match="pair\\(s\\) failed") as raised:
        run_operator(operator)
    assert "the task was killed before this pair was swept" in str(raised.value)
    assert (tmp_path / "kill.marker").exists(), "on_kill was called mid-sweep"
    held = {lock.name: lock.holder for lock in store.locks.list_locks("sweep/") if lock.held}
    assert held == {foreign.name: "someone-else"}  # this run holds nothing; the other holder keeps its lock
