"""Benchmark delete_rate: targeted-sweep throughput vs the store's own ranged-delete rate (:mod:`.run`)."""
