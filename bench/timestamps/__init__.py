"""Benchmark timestamps: timestamp draws from the timestamp server vs from the store's cell (:mod:`.run`; also
``python -m bench.timestamps``)."""
