"""``python -m bench.orchestration [--quick] [--reps N] [--out DIR]``: the benchmark outside ``bench.run``."""
from __future__ import annotations

import argparse
from pathlib import Path

from bench.lib.log import log
from bench.lib.paths import RESULTS_DIR
from bench.lib.results import write_result

from .run import NAME, run

p = argparse.ArgumentParser(prog="python -m bench.orchestration")
p.add_argument("--quick", action="store_true")
p.add_argument("--reps", type=int)
p.add_argument("--out", type=Path)
a = p.parse_args()
out_dir = a.out or (RESULTS_DIR / ("quick" if a.quick else ""))
doc = run(quick=a.quick, reps=a.reps)
log(f"-> {write_result(out_dir, NAME, doc)}")
