"""What the mixins (:mod:`.schema`, :mod:`.reads`, :mod:`.lwt`) use of
:class:`~.service.CassandraKeyValueService`, declared once for the type checker. The service (or
:class:`~.schema.SchemaMixin`, for ``_meta`` and ``_require``) defines each of them; at run time this class
adds nothing."""
from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ..consistency import ConsistencyPolicy, GcGraceGuard, Operation
from ..tables import TableMetadata, WriteMode

if TYPE_CHECKING:
    from cassandra.cluster import Session


class CassandraHost:
    """Base of the Cassandra service's mixins: the attributes and helpers they share with the service."""

    keyspace: str
    consistency: ConsistencyPolicy
    gc_grace_guard: GcGraceGuard
    _levels: dict[Operation, int]
    _ddl_timeout: float
    _meta_ttl: float
    _lock: threading.Lock
    _prepared: dict[tuple, object]
    _meta_cache: dict[str, tuple[TableMetadata, float]]
    _request_timeout: float

    if TYPE_CHECKING:

        def _s(self) -> Session: ...

        def _translate(self, exc: BaseException, op: str, table: str | None, lwt: bool = False) -> Exception: ...

        def _q(self, phys: str) -> str: ...

        def _execute(
            self, op: str, table: str | None, statement: Any, params: Any = None, timeout: Any = None, lwt: bool = False
        ) -> Any: ...

        def _rows(self, op: str, table: str | None, rs: Any) -> Iterator[tuple]: ...

        def _concurrent(self, op: str, table: str | None, statements_and_params: list, lwt: bool = False) -> list: ...

        def _prep(self, table: str, kind: str, operation: Operation | None = None) -> Any: ...

        def _meta(self, table: str, op: str) -> TableMetadata: ...

        def _require(self, table: str, op: str, *modes: WriteMode) -> TableMetadata: ...
