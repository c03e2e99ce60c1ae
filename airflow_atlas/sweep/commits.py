"""Commit timestamps of a batch of writers, in bulk, aborting the ones with no commit entry.

Shared by the targeted sweeper, the legacy sweeper and the scrubber: a writer below the sweep (or
immutable) timestamp with no commit entry can no longer commit, so it is rolled back with
put-unless-exists(-1); if it committed meanwhile, its commit timestamp wins (spec 000, step 3).
"""
from __future__ import annotations

from ..errors import KeyAlreadyExistsError

ABORTED = -1


def resolve_commits(service, starts, *, dry_run: bool = False) -> tuple[dict[int, int], int]:
    """Return ({start: commit or ABORTED}, number of transactions this call aborted).

    ``dry_run`` treats missing entries as aborted without writing anything."""
    starts = sorted(set(starts))
    commits = dict(service.get_many(starts)) if starts else {}
    aborted_now = 0
    for start in starts:
        if start in commits:
            continue
        if dry_run:
            commits[start] = ABORTED
            continue
        try:
            service.put_unless_exists(start, ABORTED)
            commits[start] = ABORTED
            aborted_now += 1
        except KeyAlreadyExistsError:
            value = service.get(start)
            commits[start] = ABORTED if value is None else value
    return commits, aborted_now
