"""Replacing one experiment in an existing ``results.md``: its headline lines, its rows of
the default-vs-adaptive table, its section and its files, the rest of the page as it was.

``adabatch bench EXPERIMENT --docs DIR`` uses it, so a long experiment can be rerun and
published without the hours of ``bench all``; the page then lists which sections were
regenerated on their own, and when, next to the command that made the rest.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from adabatch.bench import report
from adabatch.bench.registry import names
from adabatch.errors import AdabatchError
from adabatch.outputs import mark_dir, write_atomic

if TYPE_CHECKING:
    from adabatch.bench.model import ExperimentResult

HEADLINES = "## Headlines"
WHO_WINS = "## Who wins"
QUICK_MARK = "**These are the `--quick` versions**"
SPLICED = (
    "Sections regenerated on their own since, each by the command in it "
    "(`adabatch bench EXPERIMENT --docs`):"
)
_FAILED = re.compile(r"^\d+ headline claim\(s\) did not hold on this run")
_SECTION = re.compile(r"^## .*\(`([a-z0-9-]+)`\)\s*$")


def _order(name: str) -> int:
    known = names()
    return known.index(name) if name in known else len(known)


def _blocks(lines: list[str]) -> list[list[str]]:
    """The page cut before every ``## `` heading (the first block is the preamble)."""
    blocks: list[list[str]] = [[]]
    for line in lines:
        if line.startswith("## "):
            blocks.append([])
        blocks[-1].append(line)
    return blocks


def _section_owner(head: str) -> str | None:
    m = _SECTION.match(head)
    return m.group(1) if m else None


def _bullet_owner(line: str) -> str | None:
    m = re.match(r"^- `([a-z0-9-]+)`: ", line)
    return m.group(1) if m else None


def _row_owner(line: str) -> str | None:
    cells = line.split("|")
    return cells[1].strip() if line.startswith("| ") and len(cells) > 2 else None


def _merge(
    kept: list[str], new: Sequence[str], owner: Callable[[str], str | None], name: str
) -> list[str]:
    """``kept`` (lines owned by other experiments) with ``new`` placed in registry order."""
    at = next(
        (i for i, line in enumerate(kept) if _order(owner(line) or "") > _order(name)),
        len(kept),
    )
    return kept[:at] + list(new) + kept[at:]


def _headlines_block(block: list[str], name: str, new: Sequence[str]) -> list[str]:
    bullets = [x for x in block if _bullet_owner(x) not in (None, name)]
    bullets = _merge(bullets, new, _bullet_owner, name)
    out = [block[0], "", *bullets]
    failed = sum(x.endswith("does NOT hold.") for x in bullets)
    if failed:
        out += ["", f"{failed} headline claim(s) did not hold on this run (see below)."]
    for line in block:
        if line.startswith("Not run: "):
            left = [p for p in line[len("Not run: ") : -1].split("; ") if p.split(" ")[0] != name]
            if left:
                out += ["", "Not run: " + "; ".join(left) + "."]
    return [*out, ""]


def _table_block(block: list[str], name: str, rows: Sequence[str]) -> list[str]:
    head = [x for x in block if not x.startswith("| ") or x.startswith("| experiment |")]
    table = [x for x in block if x.startswith("| ") and not x.startswith("| experiment |")]
    table = _merge([x for x in table if _row_owner(x) != name], rows, _row_owner, name)
    at = next((i for i, x in enumerate(head) if x.startswith("|---")), None)
    if at is None:  # a page without the table keeps its block as it was
        return block
    return head[: at + 1] + table + head[at + 1 :]


def _preamble(block: list[str], name: str, when: str) -> list[str]:
    """The preamble with ``name`` (and the date) in the list of sections regenerated alone."""
    entries = []
    for line in block:
        if line.startswith(SPLICED):
            entries = [e.strip() for e in line[len(SPLICED) :].rstrip(".").split(";")]
    entries = [e for e in entries if e and not e.startswith(f"`{name}` ")]
    entries.append(f"`{name}` ({when})")
    entries.sort(key=lambda e: _order(e.split("`")[1]))
    out = [x for x in block if not x.startswith(SPLICED)]
    while out and not out[-1].strip():
        out.pop()
    return [*out, "", SPLICED + " " + "; ".join(entries) + ".", ""]


def splice(text: str, result: ExperimentResult, section: str, *, when: str) -> str:
    """``text`` (a results page) with ``result``'s headlines, table rows and ``section``
    replacing those of the same experiment (added in registry order when absent)."""
    name = result.experiment.name
    if (QUICK_MARK in text) != result.settings.quick:
        kinds = ("--quick", "full") if result.settings.quick else ("full", "--quick")
        msg = (
            f"--docs: this is a {kinds[0]} run and the page holds {kinds[1]} runs; mixing "
            "sizes on one page is refused: publish into another --docs"
        )
        raise AdabatchError(msg)
    new_bullets = report.headline_lines([result])
    new_rows = [
        line
        for line in report.default_vs_adaptive_table([result]).markdown().split("\n")
        if _row_owner(line) == name
    ]
    mine = [*section.rstrip("\n").split("\n"), ""]
    blocks = _blocks(text.rstrip("\n").split("\n"))
    out: list[list[str]] = []
    placed = False
    for block in blocks:
        head = block[0] if block else ""
        owner = _section_owner(head)
        if not head.startswith("## "):
            block = _preamble(block, name, when)
        elif head == HEADLINES:
            block = _headlines_block(block, name, new_bullets)
        elif head.startswith(WHO_WINS):
            block = _table_block(block, name, new_rows)
        elif owner == name:
            block, placed = mine, True
        elif owner is not None and not placed and _order(owner) > _order(name):
            out.append(mine)
            placed = True
        out.append(block)
    if not placed:
        out.append(["", *mine])
    return "\n".join(line for block in out for line in block).rstrip("\n") + "\n"


def publish_experiment(result: ExperimentResult, docs_dir: Path, *, facts: dict[str, str]) -> Path:
    """Put ``result`` into ``docs_dir/results.md`` (its files under
    ``docs_dir/results/EXPERIMENT/``, replaced); a page that does not exist yet is written
    with this experiment alone."""
    page = docs_dir / "results.md"
    if not page.is_file():
        return report.write_results_page(
            [result], docs_dir, command=result.settings.command, facts=facts,
            quick=result.settings.quick,
        )  # fmt: skip
    text = page.read_text(encoding="utf-8")
    assets = mark_dir(docs_dir / "results", what="results directory")
    moved = report.publish_assets(result, assets)
    section = report.section_markdown(moved, link_base=docs_dir)
    when = facts.get("date", dt.date.today().isoformat())
    return write_atomic(page, splice(text, result, section, when=when).encode("utf-8"))
