"""Development tools shared by the tests (tests/) and the benchmarks (bench/): real server processes they
start for themselves. Not part of the installed package (pyproject.toml packages only ``airflow_atlas`` and
``spark_jobs``) and never imported by it."""
