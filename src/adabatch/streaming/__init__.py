"""The Structured Streaming data source ``adabatch`` that runs a controller inside Spark.

Modules, one idea each: :mod:`~adabatch.streaming.options` (string options -> validated),
:mod:`~adabatch.batching` (batching and batch queue, pure),
:mod:`~adabatch.streaming.offsets` (what Spark checkpoints),
:mod:`~adabatch.streaming.partitions` (a batch's blocks),
:mod:`~adabatch.streaming.state` (controller state and schedule across restarts),
:mod:`~adabatch.streaming.runtime` (the driver side: clock, metrics),
:mod:`~adabatch.streaming.reader` and :mod:`~adabatch.streaming.source` (Spark's classes),
:mod:`~adabatch.streaming.guard` (refuses a trigger that would fight the controller),
:mod:`~adabatch.streaming.progress` (Spark's progress, a line per batch, as it arrives),
:mod:`~adabatch.streaming.prometheus` (live gauges for Prometheus, in the driver).
Importing this package does not import PySpark.
"""
