"""Spark application for fault tests (not a test module): the project's targeted-sweep job
(``spark_jobs/targeted_sweep_job.py``) with one change made through the job's real seam, its store
opener: every task opens its store over a :class:`tests.faults.FaultyKvs`, so the first task attempt to
claim the marker file ``$ATLAS_TEST_FAULT_MARKER`` (read here, on the driver, and shipped in the task
closure) fails - ``$ATLAS_TEST_FAULT=raise`` - or SIGKILLs its own Python worker - ``kill`` - right after
a ranged delete reached the store, once one iteration persisted its progress.

    spark-submit --master 'local[2,4]' --py-files ENGINE_ZIP tests/spark/faulty_job.py \\
        --store-url-file FILE --output result.json --pairs 0:THOROUGH,1:THOROUGH ...
"""
import os
import sys

from airflow_atlas.spark import TargetedSweepJob, main
from tests.faults import faulty_opener, kill_self, raise_fault

if __name__ == "__main__":
    action = {"raise": raise_fault, "kill": kill_self}[os.environ.get("ATLAS_TEST_FAULT", "raise")]
    sys.exit(main(TargetedSweepJob, sys.argv[1:], open_store=faulty_opener(os.environ["ATLAS_TEST_FAULT_MARKER"], action)))
