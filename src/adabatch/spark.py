"""Starting Spark the way every adabatch entry point does (one place for the settings)."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"


def get_spark(
    master: str = DEFAULT_MASTER,
    app_name: str = "adabatch",
    conf: dict[str, str] | None = None,
) -> SparkSession:
    """The shared SparkSession (created on first use).

    Python workers run ``sys.executable`` so they import the same adabatch as the driver.
    Shuffle partitions default to the core count of a local master, not Spark's 200, which
    would dominate the cost of the small micro-batches the papers study.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.sql.shuffle.partitions", str(os.cpu_count() or 2))
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.extraJavaOptions", "-Xss16m")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "2g")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
    )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
