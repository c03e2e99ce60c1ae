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

The application-latency pace (sweep/pacing/application.py) keeps its part in the same cell, under
``"application"``: the application's baseline p99 a run learned (a moving minimum as above) and the pace the
last run ended with (the next run's starting ceiling; the last run to end wins).
"""
from __future__ import annotations

import json
import logging
import math
from dataclasses import asdict

from ...kvs.api import Cell, KeyValueService
from ..history import TABLE, TTL_SECONDS
from .adaptive import Profile, merge_profiles
from .application import ApplicationPace, merge_application

log = logging.getLogger(__name__)

PROFILE_CELL = Cell(b"pace_profile", b"latest")
"""Where the profile is stored (row, column) in the history table."""


def _positive(value: object) -> float | None:
    """A finite positive number, else None."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0:
        return float(value)
    return None


def _parse_application(document: dict) -> ApplicationPace:
    """The application pace's part of a stored profile; values that are not finite positive numbers are dropped."""
    part = document.get("application")
    if not isinstance(part, dict):
        return ApplicationPace()
    return ApplicationPace(baseline_p99_seconds=_positive(part.get("baseline_p99_seconds")),
                           end_entries_per_second=_positive(part.get("end_entries_per_second")))


def _parse(document: dict) -> Profile:
    """A stored profile; entries that are not a finite positive latency per integer bucket are dropped."""
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

    def _document(self) -> dict:
        """The stored JSON document (empty when there is none or it cannot be read)."""
        try:
            rows = self._kvs.get_wallclock_row(TABLE, PROFILE_CELL.row, start_col=PROFILE_CELL.col, limit=1)
            document = json.loads(rows[0][1]) if rows and rows[0][0] == PROFILE_CELL.col else {}
            if not isinstance(document, dict):
                raise ValueError(f"not a JSON object: {type(document).__name__}")
            return document
        except Exception as exc:  # the run learns its own baselines instead
            log.warning("could not read the sweep's pace profile: %s", exc)
            return {}

    def load(self) -> Profile:
        """The stored profile (empty when there is none or it cannot be read)."""
        try:
            return _parse(self._document())
        except Exception as exc:  # the run learns its own baselines instead
            log.warning("could not read the sweep's pace profile: %s", exc)
            return {}

    def load_application(self) -> ApplicationPace:
        """The application pace's part (empty when there is none or it cannot be read)."""
        return _parse_application(self._document())

    def merge(self, learned: Profile, application: ApplicationPace | None = None) -> None:
        """Fold what a run learned into the stored profile (``application``: the application pace's part)."""
        if not learned and application is None:
            return
        try:
            stored = self._document()
            merged = merge_profiles(_parse(stored), learned)
            document: dict = {"kinds": {kind: {str(b): v for b, v in sorted(buckets.items())}
                                        for kind, buckets in sorted(merged.items())}}
            kept = _parse_application(stored)
            if application is not None:
                kept = merge_application(kept, application)
            if kept != ApplicationPace():
                document["application"] = {key: value for key, value in asdict(kept).items() if value is not None}
            self._kvs.put_wallclock(TABLE, {PROFILE_CELL: json.dumps(document).encode()}, ttl_seconds=self._ttl)
        except Exception as exc:  # the next run writes it again; never mask the run's outcome
            log.warning("could not store the sweep's pace profile: %s", exc)


__all__ = ["PROFILE_CELL", "PaceProfiles"]
