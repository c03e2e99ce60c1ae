"""The PySpark jobs of ``spark_jobs/`` (part of the engine: no Airflow; pyspark is imported only inside
functions, so importing this package needs only the engine).

* :mod:`.jobs` - THE job type (:class:`~.jobs.SparkJob`): the targeted and full-table jobs as two strategies
  (arguments parsed once, written out by ``to_argv`` / ``to_json``, read back by ``from_args`` /
  :func:`~.jobs.job_from_json`; items, planning, one item's sweep);
* :mod:`.driver` - the one driver body (``run_job``) and the wrappers ``run_targeted_sweep`` /
  ``run_full_sweep``;
* :mod:`.executor` - the one task body (``run_partition``), failure classification, the store opener;
* :mod:`.document` - the result document (``JobDocument``, ``ItemResult``), its markers and exit codes;
* :mod:`.args`, :mod:`.secrets` - inputs, and the store URL (0600 file or environment, always redacted);
* :mod:`.main` - the command line of the job scripts.

See docs/SPARK.md.
"""
from .args import (
    STORE_SETTING_CONF_PREFIX,
    effective_max_failures,
    parse_pairs,
    parse_settings,
    settings_from_spark_conf,
)
from .document import (
    EXIT_JOB_FAILED,
    EXIT_OK,
    EXIT_PAIRS_FAILED,
    EXIT_USAGE,
    RESULT_BEGIN,
    RESULT_END,
    ItemResult,
    JobDocument,
    emit_document,
    extract_document,
)
from .driver import run_full_sweep, run_job, run_targeted_sweep
from .jobs import JOBS, FullSweepJob, SparkJob, TargetedSweepJob, holder, job_from_json
from .main import main
from .secrets import STORE_URL_ENV, read_store_url

__all__ = [
    "EXIT_JOB_FAILED", "EXIT_OK", "EXIT_PAIRS_FAILED", "EXIT_USAGE", "RESULT_BEGIN", "RESULT_END",
    "JOBS", "STORE_SETTING_CONF_PREFIX", "STORE_URL_ENV", "FullSweepJob", "ItemResult", "JobDocument", "SparkJob",
    "TargetedSweepJob", "effective_max_failures", "emit_document", "extract_document", "holder", "job_from_json", "main",
    "parse_pairs", "parse_settings",
    "read_store_url", "run_full_sweep", "run_job", "run_targeted_sweep", "settings_from_spark_conf",
]
