"""PySpark job scripts (submitted with spark-submit; logic in :mod:`airflow_atlas.spark`)."""
