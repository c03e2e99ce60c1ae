"""``python -m devkit.cassandra ARGS`` is ``scripts/cassandra.sh ARGS``."""
import sys

from devkit.cassandra.cli import main

sys.exit(main())
