"""Timestamps: strictly increasing Atlas timestamps shared by every process and machine of a store.

- :mod:`.cell` - drawn from the store's own cell with a check-and-set (the embedded store; a Cassandra store
  before adoption)
- :mod:`.record` - the timestamp server's record in the store, and adoption (cell -> server, one-way)
- :mod:`.lease` - one store's leadership inside a server: the lease, the block, takeover
- :mod:`.server` - the server process (``atlas-sweep timestamps serve``), gRPC (:mod:`.rpc`)
- :mod:`.client` - the client every drawer of a served store uses: coalescing, failover, order check
- :mod:`.source` - which of the two a store's draws go to
"""
from .cell import TimestampService
from .record import TIMESTAMP_TABLE, TIMESTAMP_TABLE_METADATA, StoreServedByServerError
from .source import TimestampSource, open_timestamps

__all__ = [
    "TIMESTAMP_TABLE",
    "TIMESTAMP_TABLE_METADATA",
    "StoreServedByServerError",
    "TimestampService",
    "TimestampSource",
    "open_timestamps",
]
