"""Markdown tables: the one renderer behind every table the tool writes.

Cells arrive as strings, already formatted by the caller (each report keeps its own
number style); a ``|`` inside a cell is escaped so it cannot split the row.
"""

from __future__ import annotations

from collections.abc import Sequence


def table_lines(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """The lines of a Markdown table: header, separator, one line per row."""
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows]
    return lines


def table(
    columns: Sequence[str], rows: Sequence[Sequence[str]], *, title: str = "", note: str = ""
) -> str:
    """A Markdown table, with a bold ``title`` line above and a ``note`` paragraph below
    when given."""
    lines = [f"**{title}**", ""] if title else []
    lines += table_lines(columns, rows)
    if note:
        lines += ["", note]
    return "\n".join(lines)
