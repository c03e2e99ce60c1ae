"""PaceProfiles: the store's latency of the sweep's own requests at each pace, kept between runs for the
adaptive controller (sweep/pacing/adaptive.py).

Why: the sweep's requests slow the store down as the sweep speeds up, whether or not an application uses the
store; on a node that shares its cores with the sweeper a delete chunk at 16,000 entries/s takes several times
what it takes at 1,000. A controller that compares every pace with the latency at its slowest would back off
from its own load and leave an idle store mostly unswept. So the baseline is kept per pace bucket
(:func:`~airflow_atlas.sweep.pacing.adaptive.pace_bucket`, one per doubling of the rate), and a load is latency
above the baseline *of the same pace*. A run that starts while an application is busy cannot measure that
baseline itself (everything it sees includes the load): it starts from this profile, learned by earlier
runs, and compares with it.

Stored as one JSON cell (row ``pace_profile``) of the sweep history's WALLCLOCK table, with its TTL (7
days): a profile no run has refreshed for a week is forgotten and learned again. Written after every
adaptive run that measured something, as a moving minimum (:func:`~airflow_atlas.sweep.pacing.adaptive.merge_profiles`:
a run can raise a bucket's latency by 10% at most). Read-modify-write without a lock: two runs that end at
once may lose one's update - harmless, the next run writes it again. Never fatal: a profile that cannot be
read is an empty one (the run learns its own, as before the profile existed); one that cannot be written is
logged.
"""
from __future__ import annotations

import json
import logging
import math

from ...kvs.api import Cell, KeyValueService
from ..history import TABLE, TTL_SECONDS
from .adaptive import Profile, merge_profiles

log = logging.getLogger(__name__)

PROFILE_CELL = Cell(b"pace_profile", b"latest")
"""Where the profile is stored (row, column) in the history table."""


def _parse(raw: bytes) -> Profile:
    """A stored profile; entries that are not a finite positive latency per integer bucket are dropped."""
    document = json.loads(raw)
    out: Profile = {}
    for kind, buckets in (document.get("kinds") or {}).items():
        good = {int(b): float(v) for b, v in buckets.items()
                if str(b).isdigit() and isinstance(v, (int, float)) and math.isfinite(v) and v > 0}
        if good:
            out[str(kind)] = good
    return out


class PaceProfiles:
    def __init__(self, kvs: KeyValueService, ttl_seconds: int = TTL_SECONDS):
        self._kvs = kvs
        self._ttl = ttl_seconds

    def load(self) -> Profile:
        """The stored profile (empty when there is none or it cannot be read)."""
        try:
            rows = self._kvs.get_wallclock_row(TABLE, PROFILE_CELL.row, start_col=PROFILE_CELL.col, limit=1)
            return _parse(rows[0][1]) if rows and rows[0][0] == PROFILE_CELL.col else {}
        except Exception as exc:  # the run learns its own baselines instead
            log.warning("could not read the sweep's pace profile: %s", exc)
            return {}

    def merge(self, learned: Profile) -> None:
        """Fold what a run learned into the stored profile."""
        if not learned:
            return
        try:
            merged = merge_profiles(self.load(), learned)
            document = {"kinds": {kind: {str(b): v for b, v in sorted(buckets.items())}
                                  for kind, buckets in sorted(merged.items())}}
            self._kvs.put_wallclock(TABLE, {PROFILE_CELL: json.dumps(document).encode()}, ttl_seconds=self._ttl)
        except Exception as exc:  # the next run writes it again; never mask the run's outcome
            log.warning("could not store the sweep's pace profile: %s", exc)


__all__ = ["PROFILE_CELL", "PaceProfiles"]
