"""What the dashboard's routes (:mod:`.app`, :mod:`.metrics`) share: the store they read (:class:`StoreCache`)
and the header that keeps their answers out of caches (:data:`NO_STORE`). Imports neither route module."""
from __future__ import annotations

import hashlib
import json
import logging
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from airflow_atlas.airflow.hooks.atlas import AtlasHook
    from airflow_atlas.store import AtlasStore

log = logging.getLogger(__name__)

NO_STORE = {"Cache-Control": "no-store"}


class StoreCache:
    """One open store for the configured connection and settings, shared by the requests."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._key: str | None = None
        self._hook: AtlasHook | None = None
        self.compaction_threshold: int | None = None
        """``compaction_threshold_tombstones`` as the last :meth:`get_with_settings` read it (the metrics')."""

    def get(self) -> AtlasStore:
        return self.get_with_settings()[0]

    def get_with_settings(self) -> tuple[AtlasStore, list, list[str]]:
        """(the store, its effective settings with their sources, the settings warnings): the Variable read
        as a task reads it, the connection's extras on top (:meth:`AtlasSettings.effective`)."""
        from airflow_atlas.airflow.hooks.atlas import AtlasHook, connection_layer
        from airflow_atlas.airflow.settings import AtlasSettings

        settings = AtlasSettings.load(log_warnings=False)  # shown on the page instead of logged per request
        config = settings.engine_config()
        conn = AtlasHook.get_connection(settings.store_conn_id)
        effective = settings.effective(connection_layer(conn))
        self.compaction_threshold = settings.compaction_threshold_tombstones
        key = hashlib.sha256(
            json.dumps([settings.store_conn_id, conn.get_uri(), config.to_json()], sort_keys=True, default=str).encode()
        ).hexdigest()
        with self._lock:
            if self._hook is None or self._key != key:
                old = self._hook
                hook = AtlasHook(settings.store_conn_id, config=config)
                hook.get_store()
                self._hook, self._key = hook, key
                if old is not None:
                    _close_quietly(old)
            return self._hook.get_store(), effective, settings.warnings()

    def discard(self, store: AtlasStore) -> None:
        with self._lock:
            hook = self._hook
            if hook is not None and hook._store is store:
                self._hook, self._key = None, None
                _close_quietly(hook)

    def close(self) -> None:
        with self._lock:
            hook, self._hook, self._key = self._hook, None, None
        if hook is not None:
            _close_quietly(hook)


def _close_quietly(hook: AtlasHook) -> None:
    try:
        hook.close()
    except Exception as exc:  # closing must never fail a request
        log.warning("atlas dashboard: closing the store failed: %s", exc)
