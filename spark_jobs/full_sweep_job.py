"""Spark application: legacy (scan-based) sweep of one table, split into ranges, one Spark task per range.

    spark-submit --master local[2] --py-files airflow_atlas-engine-<hash>.zip \
        spark_jobs/full_sweep_job.py \
        --store-url-file /tmp/atlas-url (mode 0600; or set ATLAS_STORE_URL) \
        --table orders --parts 8 [--batch-size 1000] [--dry-run] [--setting NAME=VALUE ...] \
        [--output result.json]

Ranges are Cassandra token ranges (embedded store: row-key ranges) from kvs.split_ranges. For
migrating data written before the sweep queue existed. Prints/writes one JSON document like the
targeted job (same markers and exit codes). See docs/SPARK.md.
"""
import sys

from airflow_atlas.spark import FullSweepJob, main

if __name__ == "__main__":
    sys.exit(main(FullSweepJob, sys.argv[1:]))
