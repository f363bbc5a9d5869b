"""Fixtures of the workload tests: one SparkSession per module."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def spark():
    from adabatch.spark import get_spark

    return get_spark("local[2]", conf={"spark.ui.showConsoleProgress": "false"})
