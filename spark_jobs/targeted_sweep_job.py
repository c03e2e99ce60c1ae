"""Spark application: targeted sweep of (shard, strategy) pairs, in groups: at most two Spark tasks per core.

    spark-submit --master local[2] --py-files airflow_atlas-engine-<hash>.zip \
        spark_jobs/targeted_sweep_job.py \
        --store-url-file /tmp/atlas-url (mode 0600; or set ATLAS_STORE_URL) \
        --pairs 0:CONSERVATIVE,1:THOROUGH [--shards 0-7 --strategies CONSERVATIVE] \
        [--batch-limit N] [--max-iterations N] [--dry-run] [--setting NAME=VALUE ...] \
        [--output result.json]

Prints one JSON document between =====ATLAS-SPARK-RESULT-BEGIN===== and =====ATLAS-SPARK-RESULT-END=====
and writes it to --output. Exit codes: 0 ok, 1 job failed, 2 usage, 3 some pair failed (document still
written; shards whose lock was held elsewhere are "skipped_locked", not failures). See docs/SPARK.md.

Executors import only the engine (airflow_atlas without airflow_atlas.airflow), never Airflow.
"""
import sys

from airflow_atlas.spark import TargetedSweepJob, main

if __name__ == "__main__":
    sys.exit(main(TargetedSweepJob, sys.argv[1:]))
