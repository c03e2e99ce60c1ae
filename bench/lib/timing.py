"""Wall time of a benchmark's steps: a block timed into a dict, a method's calls timed by phase."""
from __future__ import annotations

import time
from contextlib import contextmanager


@contextmanager
def timed(out: dict, key: str):
    start = time.perf_counter()
    try:
        yield
    finally:
        out[key] = time.perf_counter() - start


def time_calls(obj, name: str, label: str, seconds: dict, calls: dict | None = None) -> None:
    """Replace ``obj.name`` (an instance's or a class's attribute) by a wrapper that adds each call's wall
    time to ``seconds[label]`` (and 1 to ``calls[label]``): where a benchmark's time goes, by phase.
    ``seconds`` and ``calls`` default missing labels to 0 (``collections.Counter`` or ``defaultdict``)."""
    fn = getattr(obj, name)

    def timed(*args, **kwargs):
        started = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            seconds[label] += time.perf_counter() - started
            if calls is not None:
                calls[label] += 1

    setattr(obj, name, timed)
