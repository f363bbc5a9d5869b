"""adabatch: Spark Structured Streaming jobs that choose their own batch sizes."""

__version__ = "0.1.0"

# The library API, imported on first use so ``import adabatch`` stays light (no pyspark).
_API = ("read_stream", "export_prometheus")


def __getattr__(name: str):
    if name in _API:
        from adabatch import api

        return getattr(api, name)
    raise AttributeError(name)
