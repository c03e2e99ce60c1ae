"""What the mixins (:mod:`.reads`, :mod:`.writes`, :mod:`.lwt`) use of
:class:`~.service.SqliteKeyValueService`, declared once for the type checker. The service (or
:class:`~.writes.WritesMixin`, for ``_exec_many``) defines each of them; at run time this class adds nothing."""
from __future__ import annotations

import sqlite3
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from ..tables import TableMetadata, WriteMode


class SqliteHost:
    """Base of the embedded store's mixins: the attributes and helpers they share with the service."""

    _last_purge: dict[str, float]

    if TYPE_CHECKING:

        def _conn(self) -> sqlite3.Connection: ...

        def _translate(self, exc: BaseException, op: str, table: str | None) -> Exception: ...

        def _write(self, op: str, table: str | None) -> AbstractContextManager[sqlite3.Connection]: ...

        def _read(self, op: str, table: str | None) -> AbstractContextManager[sqlite3.Connection]: ...

        def _meta(self, table: str, op: str) -> TableMetadata: ...

        def _require(self, table: str, op: str, *modes: WriteMode) -> TableMetadata: ...

        def _exec_many(self, conn: sqlite3.Connection, sql: str, params: list, op: str, table: str) -> None: ...
