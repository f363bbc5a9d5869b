"""adabatch: Spark Structured Streaming jobs that choose their own batch sizes."""

__version__ = "0.1.0"


def __getattr__(name: str):
    if name == "read_stream":
        from adabatch.api import read_stream

        return read_stream
    raise AttributeError(name)
