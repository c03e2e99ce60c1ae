"""Benchmark embedded: targeted_vs_legacy and delete_rate on the embedded store (SQLite) (:mod:`.run`)."""
