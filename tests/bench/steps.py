"""What the smoke tests of bench/timestamps and bench/transactions check of a measured step and a document."""
from __future__ import annotations

DOC_KEYS = {"benchmark", "schema", "mode", "backend", "machine", "params", "results", "goals", "runs", "method"}


def check_step(step: dict, rate_key: str) -> None:
    """A step measured something: a rate, samples in its windows, p50 <= p99 with an interval, no error."""
    assert step[rate_key] > 0 and step["samples"] > 0 and step["in_window_draws"] > 0
    assert step["p50_ms"] > 0 and step["p99_ms"] >= step["p50_ms"]
    low, high = step["p99_ci90_ms"]
    assert low <= high
    assert step["errors"] == 0, step["first_error"]
