"""The benchmarks' progress log: one line on stderr per step, with the wall time."""
from __future__ import annotations

import sys
import time


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)
