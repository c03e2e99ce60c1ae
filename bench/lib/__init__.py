"""What the benchmarks share, one concept per module: where things are (:mod:`~bench.lib.paths`), the log
(:mod:`~bench.lib.log`), statistics (:mod:`~bench.lib.stats`), the machine and the node (:mod:`~bench.lib.machine`),
the stores (:mod:`~bench.lib.stores`), loading data (:mod:`~bench.lib.load`), the sweep process's placement
(:mod:`~bench.lib.placement`) and the result documents (:mod:`~bench.lib.results`)."""
