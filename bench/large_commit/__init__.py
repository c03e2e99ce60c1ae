"""Benchmark large_commit: commit time of large transactions on the local node (:mod:`.run`)."""
