"""Spark application for the executor-kill test (not a test module): the project's targeted-sweep job
(``spark_jobs/targeted_sweep_job.py`` = ``airflow_atlas.spark_runtime.main("targeted")``) with one change:
a task attempt that claims one of the marker files in ``ATLAS_KILL_MARKER`` (``os.pathsep``-separated;
read on the driver, shipped in the task closure; each marker is claimed once) SIGKILLs its own Python
worker in the middle of its shard - after one iteration persisted its progress, right after a ranged delete (with its sentinels, for CONSERVATIVE) of the next iteration reached the store, lease held. Spark sees
a crashed Python worker and retries the task (``local[N,F]`` master).

    spark-submit --master 'local[2,4]' --py-files ENGINE_ZIP tests/reliability/spark_kill_job.py \
        --store-url-file FILE --output result.json --pairs 0:THOROUGH,1:THOROUGH ...
"""
import os
import signal
import sys

from airflow_atlas import spark_runtime as rt

MARKERS = os.environ["ATLAS_KILL_MARKER"].split(os.pathsep)
_real_partition = rt.sweep_pairs_partition


def killing_partition(spec, pairs):
    pairs = list(pairs)
    marker = next((m for m in MARKERS if rt._claim_marker(m)), None) if pairs else None
    if marker is not None:
        from airflow_atlas.kvs.cassandra import CassandraKeyValueService
        from airflow_atlas.sweep.progress import ShardProgress

        updates = []
        real_update = ShardProgress.update_progress
        real_delete = CassandraKeyValueService.delete_all_timestamps
        real_conservative = CassandraKeyValueService.add_gc_sentinels_and_delete_all_timestamps

        def update_progress(self, shard, strategy, value):
            out = real_update(self, shard, strategy, value)
            updates.append(out)
            return out

        def delete_all_timestamps(self, table, ranges, **kw):
            real_delete(self, table, ranges, **kw)
            die_if_progressed()

        def add_gc_sentinels_and_delete_all_timestamps(self, table, cells, ranges):  # CONSERVATIVE pairs
            real_conservative(self, table, cells, ranges)
            die_if_progressed()

        def die_if_progressed():
            if updates:
                with open(marker, "a") as f:
                    f.write(f"killed pid {os.getpid()} pair {pairs[0][0]}:{pairs[0][1]} progress {updates[-1]}\n")
                os.kill(os.getpid(), signal.SIGKILL)

        # This worker process only (it dies); the real task body runs unchanged otherwise.
        ShardProgress.update_progress = update_progress
        CassandraKeyValueService.delete_all_timestamps = delete_all_timestamps
        CassandraKeyValueService.add_gc_sentinels_and_delete_all_timestamps = add_gc_sentinels_and_delete_all_timestamps
    return _real_partition(spec, iter(pairs))


rt.sweep_pairs_partition = killing_partition  # run_targeted_sweep looks it up when it builds the job

if __name__ == "__main__":
    sys.exit(rt.main("targeted", sys.argv[1:]))
