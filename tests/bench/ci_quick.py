"""Which ``--quick`` experiments CI runs on real Spark, and which are ``slow`` there with a
smoke test in their place (shared by test_bench_quick and the CI budget check)."""

# long on Spark, with a simulated smoke in CI (seconds on local[2]: 211, 177, 161)
LONG_ON_SPARK = frozenset({"calibrate", "pid", "params"})
NEEDS_SERVICES = frozenset({"overhead"})  # its live runs read a Redis Stream
NOT_IN_CI = LONG_ON_SPARK | NEEDS_SERVICES
