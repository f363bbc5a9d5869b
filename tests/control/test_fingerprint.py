"""The fingerprint of a controller's code: moved by what runs, kept by its docstrings."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from adabatch.control import fingerprint as fp
from adabatch.control.static import StaticController
from adabatch.runs.simulated import make_scenario, simulate

CODE = '''"""A module."""

from adabatch.control import slo_model
from adabatch.control.base import Controller


def plan(x):
    """Twice x."""
    return 2 * x
'''


def module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, text: str) -> str:
    (tmp_path / f"{name}.py").write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    return name


def test_docstrings_keep_the_fingerprint_and_code_moves_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    same = module(tmp_path, monkeypatch, "fp_a", CODE)
    reworded = module(tmp_path, monkeypatch, "fp_b", CODE.replace("Twice x.", "x, doubled."))
    changed = module(tmp_path, monkeypatch, "fp_c", CODE.replace("2 * x", "3 * x"))
    assert fp._code(fp._tree(same)) == fp._code(fp._tree(reworded))
    assert fp._code(fp._tree(same)) != fp._code(fp._tree(changed))
    # what it imports from the control package, by either form of import, and through them
    # (slo_model imports fixed_point)
    assert set(fp._closure(same)) == {same} | {
        f"adabatch.control.{m}" for m in ("slo_model", "base", "fixed_point")
    }
    # a relative import inside the package, resolved against the importing module
    tree = ast.parse("from . import slo_model\nfrom .base import Controller\n")
    assert set(fp._imports(tree, "adabatch.control.x")) == {
        "adabatch.control.slo_model",
        "adabatch.control.base",
    }


def test_a_controller_is_named_by_its_own_code_and_what_it_imports() -> None:
    slo = fp.code_fingerprint("slo")
    assert slo is not None and len(slo) == 12 and int(slo, 16) >= 0
    assert fp.code_fingerprint("slo") == slo
    assert fp.code_fingerprint("static") == fp.code_fingerprint(StaticController) != slo
    assert set(fp._closure("adabatch.control.slo")) == {
        "adabatch.control.slo",
        "adabatch.control.slo_model",
        "adabatch.control.base",
        "adabatch.control.fixed_point",
    }


def test_no_fingerprint_without_a_controller_or_without_its_source() -> None:
    local = type("Local", (StaticController,), {"__module__": "__main__"})
    assert fp.code_fingerprint(local) is None
    assert fp.code_fingerprint("spark-default") is None


def test_a_simulated_run_records_its_controllers_code() -> None:
    result = simulate(make_scenario("reduce", "constant:1000", "5s", noise=0), "slo",
                      {"target": 2})  # fmt: skip
    assert result.summary.extra["controller_code"] == fp.code_fingerprint("slo")
