"""The store's pace profile (sweep/pacing/pace_profile.py) on both backends: an adaptive run stores the baselines it
measured per pace bucket, the next run starts from them, and a stored profile is a moving minimum."""
from __future__ import annotations

from airflow_atlas.sweep.history import TABLE
from airflow_atlas.sweep.pacing.adaptive import PROFILE_RISE_PER_RUN, pace_bucket
from airflow_atlas.sweep.pacing.application import ApplicationPace
from airflow_atlas.sweep.pacing.pace_profile import PROFILE_CELL, PaceProfiles

from .helpers import THOR


def _no_profile(store) -> PaceProfiles:
    """The store's profiles, without the profile earlier adaptive runs stored (on Cassandra the keyspace is
    shared with the other sweep tests, test_adaptive_pace.py's runs among them)."""
    store.kvs.delete_wallclock(TABLE, [PROFILE_CELL])
    profiles = PaceProfiles(store.kvs)
    assert profiles.load() == {}
    return profiles


def test_an_adaptive_run_stores_its_baselines_and_a_profile_is_a_moving_minimum(harness):
    h = harness
    profiles = _no_profile(h.store)
    profiles.merge({"read": {2: 0.004}, "delete": {2: 0.010, 3: 0.5}})
    assert profiles.load() == {"read": {2: 0.004}, "delete": {2: 0.010, 3: 0.5}}
    profiles.merge({"delete": {2: 0.100, 3: 0.1}})  # 2: at most a tenth higher; 3: lower
    assert profiles.load() == {"read": {2: 0.004}, "delete": {2: 0.010 * (1 + PROFILE_RISE_PER_RUN), 3: 0.1}}

    # 200 ms at up to 400 entries/s: far above a real store's reads even on a machine busy with other tests (a
    # seeded 4 ms was not: a clean-clone CI run measured 4.2 ms, and the moving minimum then kept 4 ms).
    seeded_read = 0.200
    profiles.merge({"read": dict.fromkeys(range(3), seeded_read), "delete": {9: 0.5}})
    t = h.table(THOR)
    cells = h.cells_in_shard(t, 0, 8)
    for i in range(40):
        h.write(t, {c: b"v%d" % i for c in cells})
    h.settle()
    ts = h.sweep_timestamps()
    run = h.store.sweeper.sweep_shard(0, THOR, sweep_ts=ts[THOR.value], batch_limit=8, max_entries_per_second=300,
                                      latency_target=1.5)
    assert run.status == "caught_up" and run.iterations > 3, run
    stored = h.store.pace_profiles.load()
    # The run swept at 300 entries/s at most (buckets 0-2): it recorded no faster bucket; where it measured,
    # its read latency replaced the seeded one; nowhere did the stored value rise by more than a tenth.
    assert set(stored["read"]) <= set(range(pace_bucket(300) + 1)), stored
    assert min(stored["read"][b] for b in range(3)) < seeded_read, stored
    assert max(stored["read"].values()) <= seeded_read * (1 + PROFILE_RISE_PER_RUN), stored
    assert stored["delete"][9] == 0.5  # a bucket the run did not sweep at is kept


def test_an_unreadable_profile_is_an_empty_one(harness):
    h = harness
    h.store.kvs.put_wallclock(TABLE, {PROFILE_CELL: b"{not json"})
    assert PaceProfiles(h.store.kvs).load() == {}
    PaceProfiles(h.store.kvs).merge({"read": {4: 0.002}})  # replaces it
    assert PaceProfiles(h.store.kvs).load() == {"read": {4: 0.002}}


def test_the_application_pace_is_kept_beside_the_profile(harness):
    h = harness
    profiles = _no_profile(h.store)
    assert profiles.load_application() == ApplicationPace()
    profiles.merge({"read": {4: 0.002}}, ApplicationPace(baseline_p99_seconds=0.010, end_entries_per_second=800.0))
    assert profiles.load_application() == ApplicationPace(0.010, 800.0)
    profiles.merge({"read": {5: 0.003}})  # an own-latency run without the application pace keeps it
    assert profiles.load() == {"read": {4: 0.002, 5: 0.003}}
    assert profiles.load_application() == ApplicationPace(0.010, 800.0)
    profiles.merge({}, ApplicationPace(baseline_p99_seconds=0.050, end_entries_per_second=300.0))
    kept = profiles.load_application()  # the baseline a moving minimum, the end pace the last run's
    assert kept.baseline_p99_seconds == 0.010 * (1 + PROFILE_RISE_PER_RUN) and kept.end_entries_per_second == 300.0
    h.store.kvs.put_wallclock(TABLE, {PROFILE_CELL: b'{"kinds": {}, "application": {"baseline_p99_seconds": -1, '
                                                    b'"end_entries_per_second": "fast"}}'})
    assert profiles.load_application() == ApplicationPace()  # values that are not positive numbers are dropped
