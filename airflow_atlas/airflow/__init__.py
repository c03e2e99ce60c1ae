"""The Airflow side of airflow-atlas: hooks, operators, sensors, triggers, settings and the plugin.

Everything here is thin glue around the engine (:mod:`airflow_atlas.store`): the engine does the work,
these classes open the store from an Airflow connection, pass settings and report results to XCom.

* :mod:`.settings` - every setting and its default (one Airflow Variable, ``atlas_settings``)
* :mod:`.hooks.atlas` - ``AtlasHook``: the store from a ``cassandra`` or ``atlas_embedded`` connection
* :mod:`.hooks.nodetool` - running nodetool locally or over SSH
* :mod:`.operators` - locks, sweep timestamps and planning, shard sweep, queue reconcile, compaction,
  full-table sweep, scrub
* :mod:`.sensors` / :mod:`.triggers` - deferrable waits on the store
* :mod:`.assets` - per-table asset events that schedule compaction
* :mod:`.groups` - the shard task group used by the sweep DAGs
* :mod:`.plugin` / :mod:`.provider_info` - registration with Airflow
"""
