"""Targeted sweep, in three layers (docs/ARCHITECTURE.md, "The sweep package"):

* :mod:`.queue` - the sweep queue (spec 000: sweepableCells, sweepableTimestamps, sweepProgressPerShard):
  its encodings, writer, reader, cleaner and shard progress; imports no other part of ``sweep``;
* :mod:`.pacing` - how fast a run may sweep (the pacer, the application pace, the node-pressure guard);
  imports nothing of ``sweep`` but :mod:`.history` (the table its profile is kept in);
* the modules here - the sweepers and their parts (targeted, legacy, scrub, deletes, commits, leases,
  sweep timestamps, results, history); they may import both sub-packages.
"""
