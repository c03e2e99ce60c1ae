"""Benchmark orchestration: what Airflow costs a targeted-sweep run as the shard count grows (:mod:`.run`)."""
