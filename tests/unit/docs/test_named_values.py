"""Every constant the docs give with its value - "`CONNECT_ATTEMPTS` = 3", "`IN_READ_PARTITIONS` (100)",
"`CLOCK_DRIFT` (5%)", "`BLOCK`, 1,000,000" - has that value in the code. A name the code does not define fails
too (renamed or gone); one defined in several modules is looked up in the module its table row names. Pure:
reads the docs and imports the modules that define the names."""
from __future__ import annotations

import math
import re

import pytest

from tests.unit.docs.code_index import definitions, value
from tests.unit.docs.markdown import DOCS, ROOT, spans, split_row

DOC_FILES = sorted(DOCS.glob("*.md")) + [ROOT / "README.md"]
NAMED_VALUE = re.compile(
    r"`(?P<name>[A-Z][A-Z0-9_]{2,})`(?: = |=| \(|, | )"
    r"(?P<number>\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?)(?![.\d])(?P<percent>%)?"
)


def claims() -> list[tuple[str, int, str, float, list[str]]]:
    """(doc, line number, name, value, the paths its table row's first cell names) of every named value."""
    found = []
    for path in DOC_FILES:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            context = spans(split_row(line)[0]) if line.lstrip().startswith("|") else []
            for m in NAMED_VALUE.finditer(line):
                stated = float(m["number"].replace(",", "")) / (100 if m["percent"] else 1)
                found.append((path.name, number, m["name"], stated, context))
    return found


CLAIMS = claims()


def test_the_docs_state_named_values():
    """The pattern still finds what it is for (a rewrite of the docs' style would make the test vacuous)."""
    assert len(CLAIMS) >= 10
    assert {"CONNECT_ATTEMPTS", "IN_READ_PARTITIONS", "CLOCK_DRIFT", "BLOCK", "STRIPES"} <= {c[2] for c in CLAIMS}


@pytest.mark.parametrize("doc, line, name, stated, context", CLAIMS, ids=[f"{c[0]}:{c[1]}:{c[2]}" for c in CLAIMS])
def test_a_named_value_is_the_codes(doc, line, name, stated, context):
    homes = definitions().get(name, [])
    assert homes, f"{doc}:{line}: `{name}` is defined nowhere in the code (renamed or gone?)"
    if len(homes) > 1:  # the module the row is about
        homes = [p for p in homes if any(str(p).endswith(span) for span in context)]
    assert len(homes) == 1, f"{doc}:{line}: `{name}` is defined in several modules; its row names none of them"
    actual = value(homes[0], name)
    assert isinstance(actual, (int, float)) and not isinstance(actual, bool), (name, actual)
    assert math.isclose(actual, stated), f"{doc}:{line}: `{name}` is {actual} in {homes[0].relative_to(ROOT)}, " \
        f"the doc says {stated:g}"


# ----- settings' defaults -------------------------------------------------------------------------------------
SETTING_DEFAULT = re.compile(
    r"`(?P<name>[a-z][a-z0-9_]{3,})`(?:, | \()default (?P<number>\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?)(?![.\d])"
)


def setting_defaults() -> dict[str, object]:
    """Every setting's declared default: the engine's (``StoreConfig``) and the Airflow glue's (``AtlasSettings``)."""
    from airflow_atlas.airflow.settings import AtlasSettings
    from airflow_atlas.config import StoreConfig
    from airflow_atlas.settings_model import default_of, setting_fields

    return {f.name: default_of(f) for cls in (StoreConfig, AtlasSettings) for f in setting_fields(cls)}


DEFAULT_CLAIMS = [
    (path.name, number, m["name"], float(m["number"].replace(",", "")))
    for path in DOC_FILES
    for number, line in enumerate(path.read_text().splitlines(), 1)
    for m in SETTING_DEFAULT.finditer(line)
]


def test_the_docs_state_settings_defaults():
    assert len(DEFAULT_CLAIMS) >= 5
    assert {"lock_lease_seconds", "unreadable_window_seconds"} <= {c[2] for c in DEFAULT_CLAIMS}


@pytest.mark.parametrize("doc, line, name, stated", DEFAULT_CLAIMS, ids=[f"{c[0]}:{c[1]}:{c[2]}" for c in DEFAULT_CLAIMS])
def test_a_settings_default_is_its_declarations(doc, line, name, stated):
    """"`lock_lease_seconds` (default 120 s", "`timestamp_retry_seconds`, default 20 s": the declared default."""
    defaults = setting_defaults()
    assert name in defaults, f"{doc}:{line}: `{name}` is no setting (renamed or gone?)"
    assert math.isclose(defaults[name], stated), f"{doc}:{line}: `{name}` defaults to {defaults[name]}, the doc " \
        f"says {stated:g}"
