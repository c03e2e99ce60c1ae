"""Reading the docs' Markdown for the doc tests: sections by heading, tables (cells split on ``|`` outside code
spans, so ```start|stop``` stays one cell), code spans. Pure text; nothing is rendered."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
DOCS = ROOT / "docs"

_HEADING = re.compile(r"(#{1,6}) (.+)")
_SPAN = re.compile(r"`([^`\n]+)`")


def read(name: str) -> str:
    return (DOCS / name).read_text()


def sections(text: str) -> dict[str, str]:
    """Heading text (without the ``#``) -> its body up to the next heading of any level; a ``#`` line inside a
    fenced code block is no heading."""
    out: dict[str, str] = {}
    title, body, fenced = "", [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        heading = None if fenced else _HEADING.fullmatch(line)
        if heading:
            out[title] = "\n".join(body)
            title, body = heading.group(2).strip(), []
        else:
            body.append(line)
    out[title] = "\n".join(body)
    return out


def section(text: str, title: str) -> str:
    found = sections(text)
    assert title in found, f"no section {title!r} (the doc test reads it; renamed?)"
    return found[title]


def split_row(line: str) -> list[str]:
    """The cells of one table row; a ``|`` inside a code span does not split."""
    line = line.strip()
    line = line[1:] if line.startswith("|") else line
    line = line[:-1] if line.endswith("|") else line
    cells, cell, code = [], [], False
    for ch in line:
        if ch == "`":
            code = not code
        if ch == "|" and not code:
            cells.append("".join(cell).strip())
            cell = []
        else:
            cell.append(ch)
    cells.append("".join(cell).strip())
    return cells


def tables(body: str) -> list[list[list[str]]]:
    """Every table of ``body``: its rows without the header and the separator, each a list of cells."""
    found: list[list[list[str]]] = []
    current: list[list[str]] | None = None
    for line in body.splitlines():
        if not line.lstrip().startswith("|"):
            current = None
            continue
        cells = split_row(line)
        if current is None:  # the header
            current = []
            found.append(current)
        elif all(re.fullmatch(r":?-+:?", c) for c in cells):
            continue
        else:
            current.append(cells)
    return found


def rows(body: str) -> list[list[str]]:
    return [row for table in tables(body) for row in table]


def spans(text: str) -> list[str]:
    """The code spans of ``text``, in order."""
    return _SPAN.findall(text)
