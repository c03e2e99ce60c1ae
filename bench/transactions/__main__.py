"""``python -m bench.transactions``: the benchmark outside ``bench.run`` (its options: ``--help``)."""
from __future__ import annotations

import sys

from .run import main

sys.exit(main())
