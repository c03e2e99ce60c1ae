"""Benchmark sustained: the sweep's lag under steady ingest, with a real Airflow scheduler (:mod:`.run`)."""
