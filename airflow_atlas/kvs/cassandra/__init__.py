"""The Cassandra key-value service (cassandra-driver, protocol v5 against Cassandra 5.0).

Modules, one concern each:

* :mod:`.statements` - the Atlas table's CQL (``(key blob, column1 blob, column2 bigint, value blob)``),
  every statement kind with its default operation, identifiers (``_x`` tables are stored as ``atlas_x``);
* :mod:`.batching` - the pure planner of UNLOGGED batches (:class:`~.batching.WriteItem`, units);
* :mod:`.requests` - planned batches -> driver requests, values pre-serialised through public driver API;
* :mod:`.errors` - driver exceptions -> InvalidInputError / TableNotFoundError / StoreUnavailableError;
* :mod:`.connection` - the cluster factory of ``connect``, TCP_NODELAY, re-connecting after ``fork``;
* :mod:`.session` - :class:`~.session.CqlSession`, the one door to the driver that the parts below share:
  the driver session (owned or a caller's, rebuilt after ``fork``), prepared statements, execution
  (one, concurrent, streams in windows), error translation;
* the parts the contract's methods call (:mod:`airflow_atlas.kvs.api` checks the arguments first), each
  holding the session: :mod:`.schema` (keyspace, tables, the metadata registry, the gc_grace guard),
  :mod:`.reads` (point reads, version lists, row slices, token-range scans), :mod:`.writes` (LOGICAL writes,
  fresh write timestamps, batches), :mod:`.lwt` (LWT (Paxos) and WALLCLOCK tables);
* :mod:`.service` - :class:`CassandraKeyValueService`: construction, the parts wired on one session,
  lifecycle, node pressure and down datacenters.

Write modes (see :mod:`airflow_atlas.kvs.api`): LOGICAL writes use ``USING TIMESTAMP <atlas ts>``;
``delete``, ``delete_all_timestamps``, ``add_gc_sentinels`` and ``delete_rows`` take ONE fresh timestamp from
the supplier per call (spec 002). LWT tables are written only by lightweight transactions, never ``USING
TIMESTAMP``. WALLCLOCK tables get plain writes at client time, optional TTL.

Multi-cell operations run concurrently (``cassandra.concurrent.execute_concurrent``). Multi-cell LOGICAL
writes go as small UNLOGGED batches (:mod:`.batching`); write results are not kept, so memory stays
bounded by the in-flight window whatever the size of the call. Driver failures become
StoreUnavailableError naming the operation and table.

Consistency: every statement runs at the level of its *operation* (:mod:`airflow_atlas.kvs.consistency`):
reads at data_read, writes at the operation the caller names (data_write, queue_write, sweep_delete,
sentinel, abort_delete, queue_cleanup), LWTs at lwt_commit with serial. A prepared statement object exists
per (table, kind, operation), and a batch carries its operation's level.
"""
from __future__ import annotations

from .service import CassandraKeyValueService
from .statements import RING_MAX, RING_MIN, physical_table_name, validate_keyspace

__all__ = ["RING_MAX", "RING_MIN", "CassandraKeyValueService", "physical_table_name", "validate_keyspace"]
