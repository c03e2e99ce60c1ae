"""Fine and coarse timestamp partitions (spec 000).

A fine partition of a timestamp ``ts`` is ``ts // 50_000``; a coarse partition is ``ts // 10_000_000``.
Every coarse partition holds exactly 200 fine partitions. Timestamps are non-negative longs; a negative
argument is a caller bug and raises :class:`~airflow_atlas.errors.InvalidInputError`.
"""
from __future__ import annotations

from ...encoding import LONG_MAX
from ...validation import check_int
from .constants import COARSE_PARTITION, FINE_PARTITION

FINE_PER_COARSE = COARSE_PARTITION // FINE_PARTITION


def _check_ts(ts: int, what: str = "timestamp") -> int:
    return check_int(ts, what, 0, LONG_MAX)


def fine(ts: int) -> int:
    """The fine timestamp partition of ``ts``: ``ts // 50_000``."""
    return _check_ts(ts) // FINE_PARTITION


def coarse(ts: int) -> int:
    """The coarse timestamp partition of ts: ``ts // 10_000_000``."""
    return _check_ts(ts) // COARSE_PARTITION


def fine_to_coarse(fine_partition: int) -> int:
    """The coarse partition that contains the fine partition ``fine_partition``."""
    return _check_ts(fine_partition, "fine partition") // FINE_PER_COARSE


def min_ts_of_fine(fine_partition: int) -> int:
    """Smallest timestamp in the fine partition."""
    return _check_ts(fine_partition, "fine partition") * FINE_PARTITION


def max_ts_of_fine(fine_partition: int) -> int:
    """Greatest timestamp in the fine partition."""
    return min_ts_of_fine(fine_partition) + FINE_PARTITION - 1


def min_ts_of_coarse(coarse_partition: int) -> int:
    """Smallest timestamp in the coarse partition."""
    return _check_ts(coarse_partition, "coarse partition") * COARSE_PARTITION


def max_ts_of_coarse(coarse_partition: int) -> int:
    """Greatest timestamp in the coarse partition."""
    return min_ts_of_coarse(coarse_partition) + COARSE_PARTITION - 1
