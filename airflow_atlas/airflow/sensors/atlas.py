"""Sensors on the store, deferrable by default (the wait happens in the triggerer, no worker slot held).

* :class:`SweepableWorkSensor` - a (shard, strategy) pair has queue entries below its sweep timestamp.
* :class:`SweepTimestampSensor` - the sweep timestamp passed a given timestamp ("my bulk load is now
  sweepable").
* :class:`LockFreeSensor` - nobody holds a lock (e.g. a shard lock).

All take ``store_conn_id`` (default setting ``store_conn_id``), ``deferrable`` (default True) and the usual
sensor arguments (``poke_interval`` is also the trigger's poll interval, ``timeout``, ``mode`` for the
non-deferrable path, ``soft_fail``). Each checks once at once and returns without deferring when the
condition already holds. The value returned (XCom) is the trigger's payload, e.g. the sweep timestamps
seen, plus ``"deferred"``: whether the sensor had to wait in the triggerer. Store errors fail the sensor (they
are never mistaken for "not yet"). Every check first converts the templated arguments by the one rule of
:mod:`airflow_atlas.airflow.templated`; bad input (and a store that refuses our credentials) fails the sensor
without retries (:mod:`airflow_atlas.airflow.failures`).
"""
from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseSensorOperator, PokeReturnValue
from airflow.sdk.exceptions import AirflowException

from airflow_atlas.airflow.failures import airflow_failures
from airflow_atlas.airflow.hooks.atlas import AtlasHook
from airflow_atlas.airflow.settings import AtlasSettings
from airflow_atlas.airflow.templated import convert_templated_fields
from airflow_atlas.airflow.triggers.atlas import (
    AtlasPollTrigger,
    LockFreeTrigger,
    SweepableWorkTrigger,
    SweepTimestampTrigger,
    _strategies,
    check_lock_free,
    check_sweep_ts_passed,
    check_sweepable_work,
)
from airflow_atlas.config import StoreConfig
from airflow_atlas.errors import InvalidInputError
from airflow_atlas.kvs.tables import SweepStrategy
from airflow_atlas.sweep.targeted import TargetedSweeper

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_atlas.store import AtlasStore


class AtlasBaseSensor(BaseSensorOperator):
    template_fields: Sequence[str] = ("store_conn_id", "store_config")
    ui_color = "#fdf3e1"

    def __init__(self, *, store_conn_id: str | None = None, store_config: dict | None = None, deferrable: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.store_conn_id = store_conn_id
        self.store_config = store_config
        self.deferrable = deferrable

    # subclasses: the check and the trigger
    def check(self, store: AtlasStore) -> dict | None:  # pragma: no cover - abstract
        raise NotImplementedError

    def make_trigger(self, **common: Any) -> AtlasPollTrigger:  # pragma: no cover - abstract
        raise NotImplementedError

    def _config(self, settings: AtlasSettings) -> StoreConfig:
        return settings.engine_config(settings.task_layer(self.store_config))

    def check_arguments(self) -> None:
        """Refuse bad arguments before the store is opened (InvalidInputError); subclasses add theirs."""

    def _check_now(self, settings: AtlasSettings) -> dict | None:
        """The check, once: the templated arguments converted by the one rule (every poke and every
        deferral starts here), bad input and a refused store failing without retries."""
        with airflow_failures():
            convert_templated_fields(self)
            self.check_arguments()
            with AtlasHook(self.store_conn_id or settings.store_conn_id, config=self._config(settings)) as hook:
                return self.check(hook.get_store())

    def poke(self, context: Context) -> PokeReturnValue:
        payload = self._check_now(AtlasSettings.load())
        return PokeReturnValue(is_done=payload is not None, xcom_value=payload)

    def execute(self, context: Context) -> Any:
        if not self.deferrable:
            return super().execute(context)
        settings = AtlasSettings.load()
        payload = self._check_now(settings)
        if payload is not None:
            return {**payload, "deferred": False}
        defaults = StoreConfig().to_json()
        overrides = {k: v for k, v in self._config(settings).to_json().items() if v != defaults.get(k)}
        trigger = self.make_trigger(
            store_conn_id=self.store_conn_id or settings.store_conn_id,
            poll_interval=float(self.poke_interval),
            store_config=overrides,
        )
        self.defer(trigger=trigger, method_name="execute_complete", timeout=timedelta(seconds=float(self.timeout)))

    def execute_complete(self, context: Context, event: dict | None = None) -> Any:
        if not event or event.get("status") != "success":
            message = (event or {}).get("message", "no event")
            raise AirflowException(f"{self.task_id}: the trigger reported an error: {message}")
        self.log.info("condition met: %s", event)
        return {**{k: v for k, v in event.items() if k != "status"}, "deferred": True}


class SweepableWorkSensor(AtlasBaseSensor):
    """Wait until a (shard, strategy) pair has sweep-queue entries below its sweep timestamp.

    :param shard: the shard (templated; an int or a string of digits).
    :param strategy: ``"CONSERVATIVE"`` or ``"THOROUGH"`` (templated).
    """

    template_fields = (*AtlasBaseSensor.template_fields, "shard", "strategy")

    def __init__(self, *, shard: int, strategy: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.shard = shard
        self.strategy = strategy

    def check(self, store: AtlasStore) -> dict | None:
        return check_sweepable_work(store, self._shard(), SweepStrategy.parse(self.strategy).value)

    def make_trigger(self, **common: Any) -> AtlasPollTrigger:
        return SweepableWorkTrigger(shard=self._shard(), strategy=SweepStrategy.parse(self.strategy).value, **common)

    def _shard(self) -> int:
        if self.shard is None:  # a template rendered empty
            raise InvalidInputError("SweepableWorkSensor: shard is empty")
        return self.shard


class SweepTimestampSensor(AtlasBaseSensor):
    """Wait until the sweep timestamp is above ``target_ts``: everything committed at or before
    ``target_ts`` can then be swept (e.g. the commit timestamp of a bulk load).

    :param target_ts: the timestamp to pass (templated; an int or a string of digits).
    :param strategy: ``"CONSERVATIVE"``, ``"THOROUGH"`` or ``None``/``"ALL"`` for both (templated).
    """

    template_fields = (*AtlasBaseSensor.template_fields, "target_ts", "strategy")

    def __init__(self, *, target_ts: int | str, strategy: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.target_ts = target_ts
        self.strategy = strategy

    def _target(self) -> int:
        if not isinstance(self.target_ts, int):  # a template rendered empty (converted to None)
            raise InvalidInputError(f"target_ts must be an integer timestamp, got {self.target_ts!r}")
        return self.target_ts

    def check_arguments(self) -> None:
        self._target()
        _strategies(self.strategy)

    def check(self, store: AtlasStore) -> dict | None:
        return check_sweep_ts_passed(store, self._target(), _strategies(self.strategy))

    def make_trigger(self, **common: Any) -> AtlasPollTrigger:
        return SweepTimestampTrigger(target_ts=self._target(), strategy=self.strategy, **common)


class LockFreeSensor(AtlasBaseSensor):
    """Wait until a lock is free (released, expired or never taken).

    :param lock: the lock name (templated); or give ``shard`` and ``strategy`` for a shard lock.
    """

    template_fields = (*AtlasBaseSensor.template_fields, "lock", "shard", "strategy")

    def __init__(self, *, lock: str | None = None, shard: int | None = None, strategy: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if lock is None and (shard is None or strategy is None):
            raise ValueError("LockFreeSensor needs lock= or shard= and strategy=")
        self.lock = lock
        self.shard = shard
        self.strategy = strategy

    def _name(self) -> str:
        if self.lock:
            return self.lock
        if self.shard is None or self.strategy is None:  # a lock template rendered empty
            raise InvalidInputError("LockFreeSensor: the lock name is empty and no shard and strategy are given")
        return TargetedSweeper.lock_name(self.shard, self.strategy)

    def check(self, store: AtlasStore) -> dict | None:
        return check_lock_free(store, self._name())

    def make_trigger(self, **common: Any) -> AtlasPollTrigger:
        return LockFreeTrigger(lock=self._name(), **common)
