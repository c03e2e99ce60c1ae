"""Triggers of the deferrable sensors: they poll the store in the triggerer, holding no worker slot.

Each trigger opens the store once (through :class:`~airflow_atlas.airflow.hooks.atlas.AtlasHook`), polls
every ``poll_interval`` seconds, closes the store and yields ONE event::

    {"status": "success", ...what was found...}
    {"status": "error", "message": "..."}   # bad input at once; store errors after max_consecutive_errors

Every blocking engine call runs in a thread (``asyncio.to_thread``), never on the triggerer's event loop.
Unlike the Cassandra provider's sensors, an outage is not silently "not yet": a few consecutive failures
(a transient blip) are retried, then reported as an error event, which fails the sensor (and its retries
take over). The check functions are shared with the sensors' non-deferrable ``poke``.
"""
from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_atlas.errors import InvalidInputError, TableNotFoundError
from airflow_atlas.kvs.tables import SWEEPABLE_STRATEGY_NAMES, SweepStrategy

if TYPE_CHECKING:
    from airflow_atlas.airflow.hooks.atlas import AtlasHook
    from airflow_atlas.store import AtlasStore


# ----- checks (blocking; shared with the sensors) --------------------------------------------------
def check_sweepable_work(store: AtlasStore, shard: int, strategy: str) -> dict | None:
    """A payload when the pair has queue entries below its sweep timestamp, else None."""
    sweep_ts = store.sweep_timestamps.sweep_timestamp(strategy)
    if not store.sweeper.has_sweepable_work(shard, strategy, sweep_ts):
        return None
    return {"shard": shard, "strategy": SweepStrategy.parse(strategy).value, "sweep_ts": sweep_ts}


def check_sweep_ts_passed(store: AtlasStore, target_ts: int, strategies: list[str]) -> dict | None:
    """A payload when every strategy's sweep timestamp is above ``target_ts`` (a write committed at
    ``target_ts`` is then sweepable), else None."""
    timestamps = store.sweep_timestamps.all()
    wanted = {s: timestamps[s] for s in strategies}
    if all(ts > target_ts for ts in wanted.values()):
        return {"target_ts": target_ts, "sweep_timestamps": wanted}
    return None


def check_lock_free(store: AtlasStore, lock: str) -> dict | None:
    """A payload when nobody holds an unexpired lease on ``lock``, else None."""
    state = store.locks.describe(lock)
    if state is None or state.expired:
        return {"lock": lock, "last_holder": None if state is None else state.holder, "token": None if state is None else state.token}
    return None


def _strategies(strategy: str | None) -> list[str]:
    if strategy is None or str(strategy).upper() in ("", "ALL"):
        return list(SWEEPABLE_STRATEGY_NAMES)
    value = SweepStrategy.parse(strategy)
    if not value.is_swept:
        raise InvalidInputError(f"strategy {value.value} is never swept: use CONSERVATIVE, THOROUGH or ALL")
    return [value.value]


# ----- triggers ------------------------------------------------------------------------------------
class AtlasPollTrigger(BaseTrigger):
    """Base: poll :meth:`check` until it returns a payload.

    :param store_conn_id: the store's connection id.
    :param poll_interval: seconds between polls.
    :param store_config: engine settings (``StoreConfig`` fields) as a dict, so the trigger computes
        sweep timestamps exactly as the tasks do.
    :param max_consecutive_errors: store errors in a row before giving up with an error event.
    """

    def __init__(
        self,
        store_conn_id: str,
        poll_interval: float = 30.0,
        store_config: dict | None = None,
        max_consecutive_errors: int = 3,
    ) -> None:
        super().__init__()
        self.store_conn_id = store_conn_id
        self.poll_interval = float(poll_interval)
        self.store_config = dict(store_config or {})
        self.max_consecutive_errors = int(max_consecutive_errors)

    def _own_kwargs(self) -> dict[str, Any]:  # pragma: no cover - abstract
        raise NotImplementedError

    def check(self, store: AtlasStore) -> dict | None:  # pragma: no cover - abstract
        raise NotImplementedError

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "store_conn_id": self.store_conn_id,
                "poll_interval": self.poll_interval,
                "store_config": self.store_config,
                "max_consecutive_errors": self.max_consecutive_errors,
                **self._own_kwargs(),
            },
        )

    def _hook(self) -> AtlasHook:
        from airflow_atlas.airflow.hooks.atlas import AtlasHook
        from airflow_atlas.settings_resolver import Layer, Rank, resolve

        # The sensor's resolved settings (their non-default values): one layer, checked once more here.
        config = resolve(Layer(Rank.TASK, "the trigger's store_config", self.store_config))
        return AtlasHook(self.store_conn_id, config=config)

    def _poll(self, hook: AtlasHook) -> dict | None:
        return self.check(hook.get_store())

    async def run(self) -> AsyncIterator[TriggerEvent]:
        hook = self._hook()
        errors = 0
        try:
            while True:
                try:
                    payload = await asyncio.to_thread(self._poll, hook)
                    errors = 0
                except (InvalidInputError, TableNotFoundError) as exc:
                    event = {"status": "error", "message": f"{type(exc).__name__}: {exc}"}
                    break
                except Exception as exc:
                    errors += 1
                    message = f"{type(exc).__name__}: {exc}"
                    if errors >= self.max_consecutive_errors:
                        event = {"status": "error", "message": f"{errors} consecutive store errors, last: {message}"}
                        break
                    self.log.warning("poll failed (%d/%d): %s", errors, self.max_consecutive_errors, message)
                    await asyncio.to_thread(hook.close)  # reconnect on the next poll
                    await asyncio.sleep(self.poll_interval)
                    continue
                if payload is not None:
                    event = {"status": "success", **payload}
                    break
                await asyncio.sleep(self.poll_interval)
        finally:
            await asyncio.to_thread(hook.close)
        yield TriggerEvent(event)


class SweepableWorkTrigger(AtlasPollTrigger):
    """Fires when the (shard, strategy) pair has sweep-queue entries below its sweep timestamp."""

    def __init__(self, shard: int, strategy: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.shard = int(shard)
        self.strategy = SweepStrategy.parse(strategy).value

    def _own_kwargs(self) -> dict[str, Any]:
        return {"shard": self.shard, "strategy": self.strategy}

    def check(self, store: AtlasStore) -> dict | None:
        return check_sweepable_work(store, self.shard, self.strategy)


class SweepTimestampTrigger(AtlasPollTrigger):
    """Fires when the sweep timestamp of ``strategy`` (``None``/``"ALL"``: of every strategy) is above
    ``target_ts``, i.e. a write committed at ``target_ts`` can be swept."""

    def __init__(self, target_ts: int, strategy: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.target_ts = int(target_ts)
        self.strategy = strategy

    def _own_kwargs(self) -> dict[str, Any]:
        return {"target_ts": self.target_ts, "strategy": self.strategy}

    def check(self, store: AtlasStore) -> dict | None:
        return check_sweep_ts_passed(store, self.target_ts, _strategies(self.strategy))


class LockFreeTrigger(AtlasPollTrigger):
    """Fires when nobody holds an unexpired lease on ``lock`` (e.g. ``sweep/thorough/3``)."""

    def __init__(self, lock: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.lock = lock

    def _own_kwargs(self) -> dict[str, Any]:
        return {"lock": self.lock}

    def check(self, store: AtlasStore) -> dict | None:
        return check_lock_free(store, self.lock)
