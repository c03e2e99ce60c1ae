"""No module of the package, the DAGs or the Spark jobs over :data:`MAX_LINES` lines (the brief: a module one
cannot hold in one's head is split by concept - not into mixins to meet the count)."""
from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_LINES = 500
FOLDERS = ("airflow_atlas", "dags", "spark_jobs")


def test_no_module_is_over_the_limit():
    sizes = {path.relative_to(ROOT).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
             for folder in FOLDERS for path in (ROOT / folder).rglob("*.py")}
    assert sizes, "no module found"
    over = {name: n for name, n in sorted(sizes.items()) if n > MAX_LINES}
    assert not over, f"modules over {MAX_LINES} lines (split them by concept): {over}"
