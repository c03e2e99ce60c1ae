"""Tools beside the benchmarks (not run by ``bench.run``): where a sweep's time goes (:mod:`.profile_sweep`) and
two git revisions side by side (:mod:`.revisions`)."""
