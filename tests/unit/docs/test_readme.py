"""README.md's mechanical claims: the DAG table lists the DAGs of dags/, and the replica-safety table's defaults
are the declared ones. Pure: reads files and the settings' declarations."""
from __future__ import annotations

import re

from tests.unit.docs.markdown import ROOT, rows, spans

README = (ROOT / "README.md").read_text()


def _table_after(header: str) -> list[list[str]]:
    assert header in README, f"README.md has no table headed {header!r}"
    return rows(header + README.split(header, 1)[1].split("\n\n", 1)[0])


def test_the_dag_table_lists_every_dag_of_the_dags_folder():
    dag_ids = {m for path in (ROOT / "dags").glob("*.py") for m in re.findall(r'dag_id="([^"]+)"', path.read_text())}
    listed = [spans(row[0])[0] for row in _table_after("| DAG | what it does |")]
    assert sorted(listed) == sorted(dag_ids)


def test_the_consistency_table_states_the_declared_defaults():
    """"| `consistency_data_read` / `consistency_data_write` | LOCAL_QUORUM / EACH_QUORUM |": each setting's
    default, in order; every `consistency_*` setting has a row."""
    from airflow_atlas.config import StoreConfig
    from airflow_atlas.settings_model import default_of, setting_fields

    stated = {}
    for row in _table_after("| setting | default | used by |"):
        names, defaults = spans(row[0]), [d.strip().strip("*") for d in row[1].split("/")]
        assert len(names) == len(defaults), row
        stated.update(zip(names, defaults, strict=True))
    assert stated == {f.name: default_of(f) for f in setting_fields(StoreConfig) if f.name.startswith("consistency_")}
