"""``python -m bench.memory --child URL SWEEP_TS BATCH``: the measured sweep process (internal to the benchmark;
run it with ``python -m bench.run --only memory``)."""
from __future__ import annotations

import sys

from .run import _child

if len(sys.argv) == 5 and sys.argv[1] == "--child":
    _child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
else:
    print("usage: python -m bench.memory --child URL SWEEP_TS BATCH (internal; run bench.run)", file=sys.stderr)
    sys.exit(2)
