"""``python -m bench.takeover_drill``: the drill (its options: ``--help``)."""
from __future__ import annotations

import sys

from .run import main

sys.exit(main())
