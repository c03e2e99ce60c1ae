"""scripts/cassandra.sh: the JIT profile switch (no node is started here)."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "cassandra.sh"


def test_an_unknown_jit_profile_is_refused_before_anything_runs(tmp_path):
    env = {**os.environ, "ATLAS_CASSANDRA_JIT": "c2", "ATLAS_CASSANDRA_DIR": str(tmp_path / "node")}
    out = subprocess.run([str(SCRIPT), "status"], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 1
    assert "ATLAS_CASSANDRA_JIT must be c1 or full, got 'c2'" in out.stderr
    assert not (tmp_path / "node").exists()


def test_the_full_profile_has_a_c1_only_flag_to_drop():
    """``full`` drops -XX:TieredStopAtLevel from the server options: it must be there to drop."""
    options = (ROOT / "scripts" / "cassandra" / "conf" / "jvm17-server.options").read_text().splitlines()
    assert "-XX:TieredStopAtLevel=1" in options
    assert "grep -v -- '-XX:TieredStopAtLevel='" in SCRIPT.read_text()
