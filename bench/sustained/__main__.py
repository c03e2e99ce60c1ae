"""``python -m bench.sustained [--quick] [--backend B] [--rates R,...] [--out DIR]``: the benchmark outside
``bench.run``."""
from __future__ import annotations

import argparse
from pathlib import Path

from bench.lib.log import log
from bench.lib.paths import RESULTS_DIR
from bench.lib.results import write_result

from .run import NAME, run

p = argparse.ArgumentParser(prog="python -m bench.sustained")
p.add_argument("--quick", action="store_true")
p.add_argument("--backend", action="append", choices=("sqlite", "cassandra"))
p.add_argument("--out", type=Path)
p.add_argument("--rates", type=lambda v: [int(x) for x in v.split(",")],
               help="comma list of transactions/s, rising (default: the mode's)")
a = p.parse_args()
out_dir = a.out or (RESULTS_DIR / ("quick" if a.quick else ""))
doc = run(quick=a.quick, reps=3, backends=tuple(a.backend or ("sqlite", "cassandra")), rates=a.rates)
log(f"-> {write_result(out_dir, NAME, doc)}")
