"""The package's layers: every import points down, and no two units import each other.

A unit is a top-level module or subpackage of ``adabatch`` (``deadline.core`` and
``deadline.spark`` count as units of their own). Imports inside functions count too: a
lazy import is still a dependency.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "src" / "adabatch"

# Lowest first. A unit may import its own modules and any unit in an earlier layer.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors", "urls"),
    ("registry", "params", "inputs", "outputs", "spark"),
    ("profiles", "cluster"),
    ("control",),
    ("sources", "metrics"),
    ("batching",),
    ("sim", "streaming", "deadline.core"),
    ("workloads", "deadline.spark", "api"),
    ("report",),
    ("runs",),
    ("bench",),
    ("commands",),
    ("cli",),
)
RANK = {unit: i for i, layer in enumerate(LAYERS) for unit in layer}
SPLIT = {"deadline"}  # packages whose subpackages are units


def unit_of(module: str) -> str | None:
    """``adabatch.deadline.core.spec`` -> ``deadline.core``; ``None`` outside adabatch."""
    parts = module.split(".")
    if parts[0] != "adabatch" or len(parts) == 1:
        return None
    if parts[1] in SPLIT and len(parts) > 2:
        return f"{parts[1]}.{parts[2]}"
    return parts[1]


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: Path, name: str | None = None) -> set[str]:
    """Every ``adabatch`` module ``path`` (module ``name``) imports, absolute or relative,
    at any depth."""
    name = name or module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.add(target)
            found.update(f"{target}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {m for m in found if m.startswith("adabatch.")}


def edges() -> dict[tuple[str, str], list[str]]:
    """(importing unit, imported unit) -> the files that make the edge."""
    out: dict[tuple[str, str], list[str]] = {}
    for path in sorted(ROOT.rglob("*.py")):
        source = unit_of(module_name(path))
        if source is None:  # adabatch/__init__.py: the facade, lazily re-exports the API
            continue
        for target in {unit_of(m) for m in imports(path)} - {None, source}:
            if target in SPLIT:  # "from adabatch.deadline import core" names the subpackage
                continue
            out.setdefault((source, target), []).append(str(path.relative_to(ROOT)))
    return out


def test_every_unit_has_a_layer() -> None:
    units = {unit_of(module_name(p)) for p in ROOT.rglob("*.py")} - {None}
    units -= SPLIT
    assert units - set(RANK) == set(), "add the new unit to LAYERS"


def test_imports_point_down() -> None:
    upward = [
        f"{src} imports {dst} ({', '.join(files)})"
        for (src, dst), files in edges().items()
        if RANK.get(dst, -1) >= RANK.get(src, -1)
    ]
    assert upward == []


def test_the_checker_sees_lazy_and_relative_imports(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    import adabatch.runs.cpu\n    from ..bench import core\n")
    found = imports(probe, "adabatch.control.probe")
    assert {unit_of(m) for m in found} == {"runs", "bench"}
