"""The Spark data source ``adabatch``: ``spark.readStream.format("adabatch")``.

Register it once per session with :func:`register` (``adabatch.read_stream`` does), then::

    df = (spark.readStream.format("adabatch")
          .option("controller", "fixed-point").option("param.rho", "0.7")
          .option("profile", "constant:2000").option("metrics_path", "run/metrics.jsonl")
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
    """Make ``format("adabatch")`` available in ``spark`` (idempotent)."""
    spark.dataSource.register(AdabatchDataSource)
