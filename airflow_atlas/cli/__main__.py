"""``python -m airflow_atlas.cli``: the same as the ``atlas-sweep`` console script."""
import sys

from . import main

sys.exit(main())
