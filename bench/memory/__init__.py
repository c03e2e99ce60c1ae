"""Benchmark memory: peak resident memory of one targeted-sweep shard iteration with a full batch (:mod:`.run`;
the measured child process: ``python -m bench.memory --child``)."""
