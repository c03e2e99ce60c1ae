"""What the benchmarks share, one concept per module: where things are (:mod:`~bench.lib.paths`), the progress log
(:mod:`~bench.lib.log`), statistics (:mod:`~bench.lib.stats`), timing steps (:mod:`~bench.lib.timing`), the
machine (:mod:`~bench.lib.machine`) and the local node (:mod:`~bench.lib.node`), the stores
(:mod:`~bench.lib.stores`), loading data (:mod:`~bench.lib.load`), closed-loop calls and their step statistics
(:mod:`~bench.lib.closed_loop`), the sweep process's placement (:mod:`~bench.lib.placement`), the Airflow
processes (:mod:`~bench.lib.airflow`), the result documents (:mod:`~bench.lib.results`) and ``python -m
bench.<name>`` (:mod:`~bench.lib.standalone`)."""
