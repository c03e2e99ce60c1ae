"""TimestampService on real stores: strictly increasing across processes, never reissued after a restart."""
from __future__ import annotations

import multiprocessing
import time

import pytest

from airflow_atlas.errors import InvalidInputError
from airflow_atlas.timestamps import TimestampService

PROCESSES = 4
DRAWS = 200


def _draw_many(url: str, draws: int, barrier) -> list[tuple[int, int, int]]:
    """Child process: open the store, wait for the others, draw one timestamp at a time.
    Returns (started_ns, finished_ns, timestamp) per draw, on the machine-wide monotonic clock."""
    from airflow_atlas.kvs import StoreAddress, open_kvs

    kvs = open_kvs(StoreAddress.from_url(url))
    try:
        service = TimestampService(kvs)
        service.fresh_timestamp()  # warm up connections before the race
        barrier.wait(timeout=60)
        out = []
        for _ in range(draws):
            began = time.monotonic_ns()
            ts = service.fresh_timestamp()
            out.append((began, time.monotonic_ns(), ts))
        return out
    finally:
        kvs.close()


def test_first_timestamp_is_one_and_blocks_are_contiguous(clean_kvs):
    service = TimestampService(clean_kvs)
    service.ensure_tables()
    assert service.current_bound() == 0
    assert service.fresh_timestamp() == 1
    block = service.fresh_timestamps(5)
    assert list(block) == [2, 3, 4, 5, 6]
    assert service.current_bound() == 6
    assert service.fresh_timestamp() == 7


def test_bad_block_size(kvs):
    service = TimestampService(kvs)
    service.ensure_tables()
    for bad in (0, -1, 1.5, True, "3"):
        with pytest.raises(InvalidInputError):
            service.fresh_timestamps(bad)


def test_restart_never_reissues(kvs, kvs_url):
    from airflow_atlas.kvs import StoreAddress, open_kvs

    first = TimestampService(kvs)
    first.ensure_tables()
    issued = [first.fresh_timestamp() for _ in range(5)] + list(first.fresh_timestamps(10))
    # a new service object on the same store ...
    again = TimestampService(kvs)
    assert again.fresh_timestamp() > max(issued)
    # ... and one on a freshly opened connection to the same store
    reopened = open_kvs(StoreAddress.from_url(kvs_url))
    try:
        later = TimestampService(reopened).fresh_timestamp()
    finally:
        reopened.close()
    assert later > max(issued) + 1


def test_threads_draw_distinct_increasing_timestamps(kvs):
    from concurrent.futures import ThreadPoolExecutor

    service = TimestampService(kvs)
    service.ensure_tables()

    def draw(_):
        return [service.fresh_timestamp() for _ in range(25)]

    with ThreadPoolExecutor(4) as pool:
        runs = list(pool.map(draw, range(4)))
    flat = [ts for run in runs for ts in run]
    assert len(set(flat)) == len(flat)
    for run in runs:
        assert run == sorted(run)


def test_processes_draw_distinct_increasing_timestamps(kvs, kvs_url):
    TimestampService(kvs).ensure_tables()
    ctx = multiprocessing.get_context("spawn")
    with ctx.Manager() as mp_manager:
        barrier = mp_manager.Barrier(PROCESSES)
        with ctx.Pool(PROCESSES) as pool:
            results = pool.starmap(_draw_many, [(kvs_url, DRAWS, barrier)] * PROCESSES, chunksize=1)

    draws = [d for run in results for d in run]
    assert len(draws) == PROCESSES * DRAWS
    stamps = [ts for _, _, ts in draws]
    assert len(set(stamps)) == len(stamps), "a timestamp was issued twice"
    assert min(stamps) >= 1
    for run in results:
        seq = [ts for _, _, ts in run]
        assert seq == sorted(seq), "a process saw its timestamps go backwards"

    # Real-time order: a draw that started after another finished must be larger (any processes).
    by_end = sorted(draws, key=lambda d: d[1])
    checked = 0
    for began, _, ts in sorted(draws, key=lambda d: d[0]):
        # every draw that finished before this one began
        earlier = [d for d in by_end if d[1] < began]
        if earlier:
            assert max(e[2] for e in earlier) < ts
            checked += 1
    assert checked > PROCESSES * DRAWS // 2
    # the processes really overlapped
    spans = [(run[0][0], run[-1][1]) for run in results]
    assert max(s for s, _ in spans) < min(e for _, e in spans)
