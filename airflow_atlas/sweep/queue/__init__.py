"""The sweep queue (spec 000: sweepableCells, sweepableTimestamps, sweepProgressPerShard): what a committing
transaction enqueues, its encodings, the writer, reader and cleaner, and shard progress. The bottom of
``sweep``: imports no other part of it."""
