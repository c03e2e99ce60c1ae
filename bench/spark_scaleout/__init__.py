"""Benchmark spark_scaleout: Spark scale-out of targeted sweep, the fixed cost of a Spark submission and the
backlog above which Spark mode beats in-task mode (:mod:`.run`); the deferred-Connect runs' triggerer and task
processes (:mod:`.deferred`); the figures (:mod:`.summary`)."""
