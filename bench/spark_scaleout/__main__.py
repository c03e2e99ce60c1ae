"""``python -m bench.spark_scaleout --fixed-cost FILE``: only the fixed-cost runs (B = 0), their document into FILE;
``--in-task URL_FILE`` and ``--connect ...``: the benchmark's child processes (internal)."""
from __future__ import annotations

import json
import sys

from .run import _connect_child, _in_task_child, run

if len(sys.argv) == 3 and sys.argv[1] == "--fixed-cost":
    with open(sys.argv[2], "w") as out:
        json.dump(run(quick=True, reps=3, fixed_cost_only=True), out, indent=1, default=str)
elif len(sys.argv) == 3 and sys.argv[1] == "--in-task":
    _in_task_child(sys.argv[2])
elif len(sys.argv) == 6 and sys.argv[1] == "--connect":
    _connect_child(*sys.argv[2:])
else:
    print("usage: python -m bench.spark_scaleout --fixed-cost FILE | --in-task URL_FILE (internal; run bench.run)",
          file=sys.stderr)
    sys.exit(2)
