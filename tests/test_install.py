"""adabatch installed as a user installs it, at the lowest versions pyproject.toml allows.

A fresh venv gets a non-editable install of this checkout with every extra (``spark``,
the test tools of ``dev``, ...) under a constraints file that pins each declared lower
bound (``>=X`` becomes ``==X``, read from pyproject.toml). In that venv a plain
SparkSession reads ``format("adabatch")`` without ``register()`` (PySpark finds the
top-level ``pyspark_adabatch`` package), every adabatch module imports, and the controller
contract suite passes. So a bound that is too low, or a package Spark cannot find, fails
here and not on a user's machine.

The install reaches PyPI through pip, or its cache when a previous run filled it; the
first run downloads PySpark's source distribution and builds it once (see README).
"""

from __future__ import annotations

import json
import os
import pkgutil
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
# The venv tests also carry ``spark`` (the first runs Spark; both wait for the install), so
# the fast loop, which leaves out ``spark``, leaves them out too. The first test to run pays
# for the install: a cold pip cache downloads PySpark's 450 MB source distribution.
SLOW_INSTALL = 1200


def declared() -> list[Requirement]:
    """Every requirement pyproject.toml declares: the dependencies and all extras."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    lines = list(project["dependencies"])
    for extra in project.get("optional-dependencies", {}).values():
        lines += extra
    return [Requirement(line) for line in lines]


def lower_bounds() -> dict[str, str]:
    """Canonical distribution name -> the version of its ``>=`` bound, for each requirement
    of :func:`declared`; a requirement without one is an error naming it."""
    bounds: dict[str, str] = {}
    for req in declared():
        lows = [s.version for s in req.specifier if s.operator == ">="]
        if len(lows) != 1:
            msg = f"{req} in pyproject.toml needs exactly one lower bound (>=)"
            raise AssertionError(msg)
        name = canonicalize_name(req.name)
        if bounds.get(name, lows[0]) != lows[0]:
            msg = f"{req.name} has two lower bounds: {bounds[name]} and {lows[0]}"
            raise AssertionError(msg)
        bounds[name] = lows[0]
    return bounds


def test_every_dependency_has_one_lower_bound() -> None:
    bounds = lower_bounds()
    assert {"pyspark", "pandas", "scipy", "numpy"} <= set(bounds)
    assert Version(bounds["scipy"]) >= Version("1.12")  # optimize.isotonic_regression
    assert Version(bounds["pyspark"]) >= Version("4.2")  # latestOffset(start, limit)


def test_pyspark_finds_the_package_in_this_environment() -> None:
    """What PySpark's lookup does (``pyspark/sql/worker/lookup_data_sources.py``), here in
    the development venv: an editable install must expose the package to pkgutil too."""
    found = {m.name for m in pkgutil.iter_modules() if m.name.startswith("pyspark_")}
    assert "pyspark_adabatch" in found
    from pyspark.sql.datasource import DataSource

    import pyspark_adabatch
    from adabatch.streaming.source import AdabatchDataSource

    assert pyspark_adabatch.DefaultSource is AdabatchDataSource
    assert issubclass(pyspark_adabatch.DefaultSource, DataSource)
    assert pyspark_adabatch.DefaultSource.name() == "adabatch"


def _copy_checkout(dest: Path) -> Path:
    """The files a wheel is built from, so the build leaves nothing in the checkout."""
    dest.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, dest / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "*.pyc")
    shutil.copytree(ROOT / "src", dest / "src", ignore=ignore)
    return dest


def _run(args: list[str], env: dict[str, str], cwd: Path, timeout: float) -> str:
    done = subprocess.run(
        args, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False
    )
    tail = f"{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    assert done.returncode == 0, f"{' '.join(map(str, args[:6]))} exited {done.returncode}:\n{tail}"
    return done.stdout


@pytest.fixture(scope="module")
def lowest(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A venv holding this checkout and its lowest allowed dependencies: (its python, env)."""
    tmp = tmp_path_factory.mktemp("lowest")
    constraints = tmp / "constraints.txt"
    constraints.write_text("".join(f"{n}=={v}\n" for n, v in sorted(lower_bounds().items())))
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", tmp / "venv"], check=True)
    python = tmp / "venv" / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.pop("SPARK_HOME", None)
    env |= {"PYSPARK_PYTHON": str(python), "PYSPARK_DRIVER_PYTHON": str(python)}
    extras = ",".join(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    )
    checkout = _copy_checkout(tmp / "checkout")
    pip = [sys.executable, "-m", "pip", "--python", str(python), "install", "-q"]
    _run([*pip, "-c", str(constraints), f"{checkout}[{extras}]"], env, tmp, 1100)
    return python, env


# Run in the lowest venv by a plain SparkSession that never imports adabatch: the source
# must come from PySpark's own lookup of pyspark_* packages.
READ_WITHOUT_REGISTER = """
import json, sys, time
from importlib.metadata import version
from pyspark.sql import SparkSession

spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
         .config("spark.sql.shuffle.partitions", "2").getOrCreate())
df = (spark.readStream.format("adabatch").option("controller", "static")
      .option("param.interval", "0.5").option("profile", "constant:2000").load())
query = (df.writeStream.format("memory").queryName("rows")
         .option("checkpointLocation", sys.argv[1]).start())
rows, deadline = 0, time.monotonic() + 120
while rows == 0 and query.isActive and time.monotonic() < deadline:
    query.awaitTermination(1)  # returns early if the query fails
    rows = spark.table("rows").count()
error = query.exception()
query.stop()
print(json.dumps({"rows": rows, "error": str(error) if error else None,
                  "adabatch_imported": "adabatch" in sys.modules,
                  "versions": {name: version(name) for name in sys.argv[2:]}}))
"""

# Every adabatch module imports, every registered controller constructs.
IMPORT_ALL = """
import importlib, json, pkgutil
import adabatch
from adabatch.control import create, names
from adabatch.control.registry import controller_class

modules = [m.name for m in pkgutil.walk_packages(adabatch.__path__, "adabatch.")
           if not m.name.endswith(".__main__")]
for name in modules:
    importlib.import_module(name)
print(json.dumps({"file": adabatch.__file__, "modules": len(modules),
                  "controllers": [create(n, controller_class(n).EXAMPLE_PARAMS).describe()[
                      "controller"] for n in names()]}))
"""


def _in_venv(lowest: tuple[Path, dict[str, str]], args: list[str], timeout: float) -> str:
    python, env = lowest
    return _run([str(python), *args], env, python.parents[2], timeout)


@pytest.mark.install
@pytest.mark.spark
@pytest.mark.timeout(SLOW_INSTALL)
def test_format_adabatch_without_register_at_the_lowest_versions(
    lowest: tuple[Path, dict[str, str]],
) -> None:
    bounds = lower_bounds()
    ckpt = lowest[0].parents[2] / "ckpt"
    out = _in_venv(lowest, ["-c", READ_WITHOUT_REGISTER, str(ckpt), *sorted(bounds)], 300)
    result = json.loads(out.strip().splitlines()[-1])
    assert result["error"] is None
    assert result["rows"] > 0
    assert result["adabatch_imported"] is False  # the driver never named adabatch
    installed = {n: Version(v) for n, v in result["versions"].items()}
    assert installed == {n: Version(v) for n, v in bounds.items()}
    print("lowest versions:", {n: result["versions"][n] for n in ("pyspark", "scipy", "numpy")})


@pytest.mark.install
@pytest.mark.spark
@pytest.mark.timeout(SLOW_INSTALL)
def test_every_module_and_the_controller_contract_at_the_lowest_versions(
    lowest: tuple[Path, dict[str, str]],
) -> None:
    result = json.loads(_in_venv(lowest, ["-c", IMPORT_ALL], 300).strip().splitlines()[-1])
    venv = lowest[0].parents[1]
    assert Path(result["file"]).is_relative_to(venv)  # the installed copy, not the checkout
    assert result["modules"] > 50
    from adabatch.control import names

    assert result["controllers"] == names()
    # The contract suite, and one module of property tests for hypothesis's lower bound.
    tests = [
        str(ROOT / "tests" / "control" / f) for f in ("test_contract.py", "test_fixed_point.py")
    ]
    out = _in_venv(lowest, ["-m", "pytest", "-p", "no:cacheprovider", "-q", *tests], 300)
    ran_on = re.search(r"ran on: pyspark (\S+),", out)  # the line of tests/conftest.py
    assert ran_on is not None and Version(ran_on[1]) == Version(lower_bounds()["pyspark"])
    assert " passed" in out.splitlines()[-1] and "failed" not in out.splitlines()[-1]
