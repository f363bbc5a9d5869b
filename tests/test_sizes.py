"""Modules stay readable: at most 600 lines each, functions at most 80 lines. A module
that needs more says why in its docstring, with a line starting ``Size:``."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "src" / "adabatch"
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80


def oversized(path: Path, root: Path = ROOT) -> list[str]:
    """What in ``path`` is over the limits, unless its docstring explains (``Size:``)."""
    text = path.read_text(encoding="utf-8")
    tree = ast.parse(text)
    if "\nSize:" in (ast.get_docstring(tree) or ""):
        return []
    name = path.relative_to(root)
    out = []
    if len(text.splitlines()) > MAX_MODULE_LINES:
        out.append(f"{name}: {len(text.splitlines())} lines")
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > MAX_FUNCTION_LINES:
                out.append(f"{name}:{node.lineno} {node.name}() {length} lines")
    return out


def test_modules_and_functions_within_limits() -> None:
    assert [o for p in sorted(ROOT.rglob("*.py")) for o in oversized(p)] == []


def test_the_check_sees_a_long_function(tmp_path: Path) -> None:
    long = tmp_path / "adabatch_probe.py"
    long.write_text("def f():\n" + "    x = 1\n" * MAX_FUNCTION_LINES)
    assert oversized(long, tmp_path) == ["adabatch_probe.py:1 f() 81 lines"]
    long.write_text('"""Probe.\n\nSize: generated on purpose."""\n' + long.read_text())
    assert oversized(long, tmp_path) == []
