"""PySpark's hook for the ``adabatch`` data source: ``format("adabatch")`` without ``register()``.

PySpark imports every top-level ``pyspark_*`` package it finds on the Python path and
registers its ``DefaultSource`` under ``DefaultSource.name()``, so installing adabatch is
enough (``pyspark/sql/worker/lookup_data_sources.py``).
"""

from adabatch.streaming.source import AdabatchDataSource as DefaultSource

__all__ = ["DefaultSource"]
