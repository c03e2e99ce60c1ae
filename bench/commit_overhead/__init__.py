"""Benchmark commit_overhead: commit latency with the sweep queue and the application-latency publication
on and off (:mod:`.run`)."""
