"""The Spark data source ``adabatch``: ``spark.readStream.format("adabatch")``.

Installed with pip, ``format("adabatch")`` works in any session (``pyspark_adabatch``); an
explicit :func:`register` still works (``adabatch.read_stream`` calls it)::

    df = (spark.readStream.format("adabatch")
          .option("controller", "fixed-point").option("param.rho", "0.7")
          .option("profile", "constant:2000").option("metricsPath", "run/metrics.jsonl")
          .load())

Options are strings (:mod:`adabatch.streaming.options` lists them); they are validated at
``load()``, where Spark asks for the schema, so a bad option fails before the query starts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql.datasource import DataSource, DataSourceStreamReader

from adabatch.streaming.options import parse_options
from adabatch.streaming.reader import AdabatchStreamReader

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

FORMAT = "adabatch"


class AdabatchDataSource(DataSource):
    """A replayable record source whose micro-batches a controller sizes."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> str:
        return parse_options(self.options).build_source().spark_schema()

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return AdabatchStreamReader(parse_options(self.options))


def register(spark: SparkSession) -> None:
    """Make ``format("adabatch")`` available in ``spark`` and guard its queries against a
    trigger that would fight the controller (:mod:`adabatch.streaming.guard`); idempotent."""
    from adabatch.streaming.guard import install

    spark.dataSource.register(AdabatchDataSource)
    install(spark)
