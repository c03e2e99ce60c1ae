"""The command line of the job scripts in ``spark_jobs/``: ``main(TargetedSweepJob, argv)``.

Exit codes: 0 ok; 3 some item failed (document still written); 1 the job failed as a whole (document with
``error``); 2 bad arguments (nothing started)."""
from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..errors import InvalidInputError
from ..kvs.address import StoreAddress
from .args import STORE_SETTING_CONF_PREFIX, parse_settings
from .document import EXIT_JOB_FAILED, EXIT_OK, EXIT_PAIRS_FAILED, EXIT_USAGE, emit_document
from .driver import check_setting_values, failure_document, run_job
from .executor import open_store as default_open_store
from .secrets import STORE_URL_ENV, read_store_url

if TYPE_CHECKING:
    from .executor import StoreOpener
    from .jobs import FullSweepJob, TargetedSweepJob


def build_parser(job_class: type[TargetedSweepJob] | type[FullSweepJob]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=job_class.prog,
        description=job_class.summary_line,
        epilog=(
            f"The store URL is read from --store-url-file (mode 0600) or ${STORE_URL_ENV}; never pass it as "
            f"an argument. Store settings: --setting NAME=VALUE or --conf {STORE_SETTING_CONF_PREFIX}NAME=VALUE."
        ),
    )
    parser.add_argument("--store-url-file", help=f"file holding the store URL (default: ${STORE_URL_ENV})")
    parser.add_argument("--output", help="write the JSON result document to this path (driver's filesystem)")
    parser.add_argument("--dry-run", action="store_true", help="read and report, delete nothing")
    parser.add_argument("--setting", action="append", default=[], metavar="NAME=VALUE", help="StoreConfig override")
    parser.add_argument("--app-name", help="Spark application name")
    job_class.add_arguments(parser)
    return parser


def main(
    job_class: type[TargetedSweepJob] | type[FullSweepJob],
    argv: Sequence[str] | None = None,
    *,
    open_store: StoreOpener = default_open_store,
) -> int:
    """Entry point of a job script. Returns the process exit code. ``open_store(address, settings)`` opens
    the store in the driver and the tasks (default: the address's store, ``AtlasStore.open``)."""
    parser = build_parser(job_class)
    args = parser.parse_args(argv)
    started = time.time()
    try:
        settings = parse_settings(args.setting)
        check_setting_values(settings)  # bad values: exit 2 naming the setting, before Spark starts
        job = job_class.from_args(args, parser)
        address = StoreAddress.from_url(read_store_url(args.store_url_file))  # parsed once, here
    except ValueError as exc:  # InvalidInputError too; never holds the URL's password
        print(f"{parser.prog}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE

    from pyspark.sql import SparkSession

    # No console progress bars: this output ends up in Airflow task logs.
    builder = SparkSession.builder.config("spark.ui.showConsoleProgress", "false")
    if args.app_name:
        builder = builder.appName(args.app_name)
    spark = builder.getOrCreate()
    try:
        sc = spark.sparkContext
        sc.setLogLevel(sc.getConf().get("spark.atlas.logLevel", "WARN"))
        print(f"[atlas] {job.name} on {sc.master} app {sc.applicationId}, store {address.redacted()}", flush=True)
        try:
            doc = run_job(spark, job, address=address, settings=settings, open_store=open_store)
        except Exception as exc:
            doc = failure_document(job.name, address, exc, started)
            emit_document(doc, args.output)
            print(f"[atlas] {job.name} failed: {doc.error}", file=sys.stderr, flush=True)
            # Bad input the driver found before any task ran (e.g. a spark.atlas.store.* conf value): exit 2.
            return EXIT_USAGE if isinstance(exc, InvalidInputError) else EXIT_JOB_FAILED
        emit_document(doc, args.output)
        return EXIT_OK if doc.ok else EXIT_PAIRS_FAILED
    finally:
        spark.stop()
