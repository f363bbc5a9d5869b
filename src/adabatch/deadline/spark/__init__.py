"""The deadline scheduler on Spark: TPC-H data, queries, profiling, the runner and the
Structured Streaming baselines."""
