"""airflow-atlas: AtlasDB-style targeted sweep for MVCC stores on Apache Cassandra.

The package root and every module outside :mod:`airflow_atlas.airflow` form the *engine*: they never
import Airflow, so Spark executors and the CLI can use them with only cassandra-driver and pydantic (the
results' serialisation) installed.
"""

__version__ = "0.1.0"
