"""Which version of a controller's code ran: a short hash of what it executes.

Runs kept across sessions are compared with runs measured later; a run of an older
controller must not stand beside them unnoticed. The fingerprint covers the module that
defines the controller and every ``adabatch.control`` module it imports, directly or
through another, as parsed code without docstrings, so that rewording a docstring or a
comment keeps it and any change to what runs moves it.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
from functools import cache

from adabatch.control.base import Controller
from adabatch.control.registry import controller_class, names

PACKAGE = "adabatch.control"


def code_fingerprint(controller: str | type[Controller]) -> str | None:
    """Twelve hex digits naming the code of ``controller``, a registered name or a class
    (see the module doc); ``None`` for a name no controller is registered under (Spark's own
    triggers run none) and for a class whose module has no source file (defined in
    ``__main__`` or interactively)."""
    if isinstance(controller, str) and controller not in names():
        return None
    cls = controller_class(controller) if isinstance(controller, str) else controller
    try:
        return _fingerprint(cls.__module__)
    except (OSError, SyntaxError, ValueError, ModuleNotFoundError):
        return None


@cache
def _fingerprint(module: str) -> str:
    digest = hashlib.sha256()
    for mod, tree in sorted(_closure(module).items()):
        digest.update(mod.encode() + b"\0" + _code(tree).encode() + b"\0")
    return digest.hexdigest()[:12]


def _closure(module: str) -> dict[str, ast.Module]:
    """``module`` and the control modules it imports, transitively, each parsed once."""
    trees: dict[str, ast.Module] = {}
    todo = [module]
    while todo:
        mod = todo.pop()
        if mod in trees:
            continue
        trees[mod] = _tree(mod)
        todo += [m for m in _imports(trees[mod], mod) if m.startswith(PACKAGE + ".")]
    return trees


def _tree(module: str) -> ast.Module:
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
        raise ModuleNotFoundError(f"no source file for module {module!r}")
    with open(spec.origin, encoding="utf-8") as f:
        return ast.parse(f.read(), filename=spec.origin)


def _imports(tree: ast.Module, module: str) -> list[str]:
    """Absolute names of the modules ``tree``, the code of ``module``, imports; ``from
    package import x`` names module ``package.x`` too when there is one."""
    out: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative to the package of ``module``
                parent = module.rsplit(".", node.level)[0]
                base = f"{parent}.{base}" if base else parent
            out.append(base)
            for a in node.names:
                sub = f"{base}.{a.name}"
                if sub.startswith(PACKAGE + ".") and _is_module(sub):
                    out.append(sub)
    return [m for m in out if m != PACKAGE]


def _is_module(name: str) -> bool:
    """Whether ``name`` is a module (``package.attribute`` is not)."""
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # the parent is a module, not a package
        return False


def _code(tree: ast.Module) -> str:
    """A module's parsed code with every docstring taken out (``tree`` is changed)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and _is_text(first.value):
                node.body = node.body[1:] or [ast.Pass()]
    return ast.dump(tree)


def _is_text(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)
