"""The why-explainer: why a strategy's sweep timestamp is not advancing (pure)."""
from __future__ import annotations

from .document import HeldBy, OpenTransaction, PinnedByShard, ShardRow, Why
from .text import format_duration, round_or_none


def explain_why(explain: dict, rows: list[ShardRow], strategy: str, wall_of_sweep_ts: float | None, now: float) -> Why:
    """Why the strategy's sweep timestamp is where it is: the oldest open read-write transaction or the
    read-only window holding it back, how old that is, and the queued work it pins per shard.

    ``explain``: :meth:`SweepTimestampProvider.explain` of the strategy; ``rows``: the shard rows shown;
    ``wall_of_sweep_ts``: the estimated wall time of the sweep timestamp (None when unknown)."""
    mine = [r for r in rows if r.strategy == strategy]
    pinned_by_shard = [PinnedByShard(r.shard, r.pinned_entries, r.pinned_capped) for r in mine]
    pinned = sum(r.pinned_entries for r in mine)
    pinned_capped = any(r.pinned_capped for r in mine)
    sweep_ts, fresh = explain["sweep_ts"], explain["fresh_ts"]
    wall = wall_of_sweep_ts
    age = None if wall is None else max(0.0, now - wall)
    oldest = explain.get("oldest_open_transaction")
    limited_by = explain["limited_by"]
    held_by = None
    pins = f"{pinned}{'+' if pinned_capped else ''} queued entr{'y' if pinned == 1 else 'ies'}"
    shards_pinned = [p for p in pinned_by_shard if p.entries]
    where = f" in {len(shards_pinned)} shard(s)" if shards_pinned else ""
    if limited_by == "open_transaction" and oldest is not None:
        held_by = HeldBy(
            "open_transaction",
            oldest["start_ts"],
            round_or_none(oldest["age_seconds"]),
            oldest["holder"],
            round_or_none(oldest["expires_in_seconds"]),
        )
        message = (
            f"{strategy} sweep timestamp {sweep_ts} is held back by open transaction {oldest['start_ts']} "
            f"(holder {oldest['holder']}, open {format_duration(oldest['age_seconds'])}, lease expires in "
            f"{format_duration(max(0.0, oldest['expires_in_seconds']))}); it pins {pins}{where}"
        )
    elif limited_by == "read_only_window":
        window = explain.get("unreadable_window_seconds")
        held_by = HeldBy("read_only_window", explain.get("unreadable_ts"), round_or_none(age), None, None)
        punched = "no punch is that old yet" if sweep_ts == 0 else f"punched {format_duration(age)} ago"
        message = (
            f"{strategy} sweep timestamp {sweep_ts} is the unreadable timestamp, the timestamp punched at "
            f"least the read-only window ({format_duration(window or 0)}) ago ({punched}): CONSERVATIVE sweep "
            f"stays that far behind to protect read-only transactions; it pins {pins}{where}"
        )
    else:
        message = f"{strategy} sweep timestamp {sweep_ts} is not held back (it is the fresh timestamp)"
    return Why(
        strategy=strategy,
        sweep_ts=sweep_ts,
        fresh_ts=fresh,
        immutable_ts=explain["immutable_ts"],
        unreadable_ts=explain.get("unreadable_ts"),
        unreadable_window_seconds=explain.get("unreadable_window_seconds"),
        limited_by=limited_by,
        sweep_ts_age_seconds=round_or_none(age),
        behind_fresh_ts=max(0, fresh - sweep_ts),
        held_by=held_by,
        oldest_open_transaction=None
        if oldest is None
        else OpenTransaction(
            oldest["start_ts"],
            oldest["holder"],
            round_or_none(oldest["age_seconds"]),
            round_or_none(oldest["expires_in_seconds"]),
        ),
        pinned_entries=pinned,
        pinned_capped=pinned_capped,
        pinned_by_shard=pinned_by_shard,
        message=message,
    )
