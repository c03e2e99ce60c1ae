"""The settings table of docs/SETTINGS.md, generated from the declarations (:class:`~airflow_atlas.config.StoreConfig`,
:class:`~airflow_atlas.airflow.settings.AtlasSettings`): ``python -m airflow_atlas.airflow.settings_doc --write-docs``
rewrites it; ``tests/unit/test_settings_model.py`` fails when it is stale."""
from __future__ import annotations

import pathlib
import sys

from airflow_atlas.airflow.settings import AtlasSettings
from airflow_atlas.config import StoreConfig
from airflow_atlas.errors import InvalidInputError
from airflow_atlas.settings_model import markdown_table


def settings_markdown() -> str:
    """The one settings table (docs/SETTINGS.md): engine keys, then Airflow keys."""
    return markdown_table(("engine", StoreConfig), ("Airflow", AtlasSettings))


DOC = "docs/SETTINGS.md"
BEGIN, END = "<!-- settings table: begin (generated) -->", "<!-- settings table: end -->"


def render_doc(text: str) -> str:
    """``text`` (docs/SETTINGS.md) with the generated table between the markers replaced."""
    head, sep, rest = text.partition(BEGIN)
    _, sep2, tail = rest.partition(END)
    if not sep or not sep2:
        raise InvalidInputError(f"{DOC} lacks the markers {BEGIN!r} / {END!r}")
    return f"{head}{BEGIN}\n{settings_markdown()}{END}{tail}"


def main() -> None:
    """``--write-docs``: rewrite the table in docs/SETTINGS.md; otherwise print it."""
    if sys.argv[1:] == ["--write-docs"]:
        path = pathlib.Path(__file__).resolve().parents[2] / DOC
        path.write_text(render_doc(path.read_text()))
        print(f"wrote {path}")
    else:
        print(settings_markdown(), end="")


if __name__ == "__main__":  # python -m airflow_atlas.airflow.settings_doc [--write-docs]
    main()
