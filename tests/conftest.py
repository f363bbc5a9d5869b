"""Suite-wide pytest hooks: the run's summary names the versions it ran against."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

import pytest

# The dependencies whose version decides what the Spark tests exercise.
SHOWN = ("pyspark", "pandas", "pyarrow", "numpy", "scipy")


def versions_line() -> str:
    """``ran on: pyspark 4.3.0, pandas 2.3.3, ...``, from the installed distributions."""
    found = []
    for name in SHOWN:
        try:
            found.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            found.append(f"{name} not installed")
    return "ran on: " + ", ".join(found)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Shown under ``-q`` too, so CI's log says which pyspark the suite ran with (setup
    installs the newest pyproject.toml allows; tests/test_install.py covers the lowest)."""
    terminalreporter.write_line(versions_line())
