"""The ``adabatch`` data source's options: strings in, one validated frozen object out.

Spark hands a data source its options as a case-insensitive dict of strings. This module
parses them once, in the user's process (:func:`adabatch.read_stream`) and again at
``load()`` (``DataSource.schema``), so a bad option fails before the query starts, with an
:class:`AdabatchError` naming the option, the value and what is allowed.

Options of the source itself (``keys``, ``seed``, ...) are every option not listed in
:data:`READER_OPTIONS` and not starting with ``param.``; the source validates them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from adabatch.batching import QUEUE_MODES
from adabatch.control import registry
from adabatch.control.base import Controller
from adabatch.errors import AdabatchError, shown
from adabatch.params import Param, Params, parse_values
from adabatch.profiles import parse_profile
from adabatch.sources import source_class
from adabatch.sources.base import RecordSource

SPARK_DEFAULT = "spark-default"
PARAM_PREFIX = "param."

# spark-default has no controller; its only parameter is the number of input partitions.
SPARK_DEFAULT_PARAMS = (Param("blocks", 2, "blocks (input partitions) per batch", kind=int, low=1),)
# Who an option of the ``adabatch`` data source itself belongs to, in messages.
OWNER = "adabatch source"

READER_OPTIONS: dict[str, str] = {
    "source": "record source (generator)",
    "controller": f"controller name, or {SPARK_DEFAULT!r} (Spark's trigger decides)",
    "profile": "rate profile of the source, e.g. constant:2000",
    "queue": "cut batches waiting while Spark is busy: fifo (one micro-batch each) or "
    "coalesce (merged into one)",
    "metrics_path": "metrics.jsonl to append one record per batch to",
    "state_path": "JSON file for controller state and cut schedule (keep it next to the "
    "checkpoint)",
    "max_rows_per_batch": "Spark ReadLimit: at most this many records per micro-batch",
    "min_rows_per_batch": "Spark ReadLimit: wait until a micro-batch has this many records",
}

DEFAULTS = {
    "source": "generator",
    "controller": "fixed-point",
    "profile": "constant:2000",
    "queue": "fifo",
}

# The options checked as values (the others name a source, controller, profile or file).
_QUEUE = Param("queue", DEFAULTS["queue"], READER_OPTIONS["queue"], kind=str, choices=QUEUE_MODES)
_ROWS = {
    name: Param(name, None, READER_OPTIONS[name], kind=int, low=1)
    for name in ("max_rows_per_batch", "min_rows_per_batch")
}


@dataclass(frozen=True)
class StreamOptions:
    """Validated options of one ``adabatch`` stream.

    ``source_options`` and ``params`` keep the user's strings (sorted pairs), so the object
    is hashable, picklable and compares equal for equal queries.
    """

    source: str
    source_options: tuple[tuple[str, str], ...]
    profile: str
    controller: str
    params: tuple[tuple[str, str], ...]
    queue: str
    metrics_path: str | None
    state_path: str | None
    max_rows_per_batch: int | None
    min_rows_per_batch: int | None

    @property
    def spark_default(self) -> bool:
        """Whether Spark's own trigger decides the batches (no controller)."""
        return self.controller == SPARK_DEFAULT

    def source_cls(self) -> type[RecordSource]:
        return source_class(self.source)

    def build_source(self, start_time: float = 0.0) -> RecordSource:
        """The record source, with ``start_time`` (Unix s) as stream time 0."""
        return self.source_cls().from_options(
            dict(self.source_options), self.profile, start_time=start_time
        )

    def build_controller(self) -> Controller | None:
        """A fresh controller, or ``None`` in ``spark-default`` mode."""
        if self.spark_default:
            return None
        return registry.create(self.controller, dict(self.params))

    def spark_default_blocks(self) -> int:
        """Blocks per batch in ``spark-default`` mode."""
        return int(parse_spark_default(dict(self.params)).blocks)

    def fingerprint(self) -> dict[str, Any]:
        """What must not change between runs that share a checkpoint and state."""
        return {
            "source": self.source,
            "source_options": dict(self.source_options),
            "profile": self.profile,
            "controller": self.controller,
            "params": dict(self.params),
            "queue": self.queue,
        }

    def to_options(self) -> dict[str, str]:
        """Back to Spark's string options (``parse_options(o.to_options()) == o``)."""
        out = {
            "source": self.source,
            "profile": self.profile,
            "controller": self.controller,
            "queue": self.queue,
        }
        out.update(dict(self.source_options))
        out.update({PARAM_PREFIX + k: v for k, v in self.params})
        for name in ("metrics_path", "state_path", "max_rows_per_batch", "min_rows_per_batch"):
            value = getattr(self, name)
            if value is not None:
                out[name] = str(value)
        return out


def parse_spark_default(params: Mapping[str, Any]) -> Params:
    """The parameters of ``spark-default`` mode (``SPARK_DEFAULT_PARAMS``), checked."""
    holder = f"controller {SPARK_DEFAULT!r}"
    return parse_values(SPARK_DEFAULT_PARAMS, params, owner=SPARK_DEFAULT, holder=holder)


def _rows(options: Mapping[str, str], name: str) -> int | None:
    raw = options.get(name)
    return None if raw is None else _ROWS[name].parse(raw, owner=OWNER, noun="option")


def _path(options: Mapping[str, str], name: str) -> str | None:
    raw = options.get(name)
    if raw is None:
        return None
    text = str(raw).strip()
    if not text:
        msg = f"{OWNER} option {name!r} is empty: give a file path"
        raise AdabatchError(msg)
    return text


def parse_options(options: Mapping[str, Any]) -> StreamOptions:
    """Validate Spark-style options (names case-insensitive, values strings or numbers).

    Builds the controller, the profile and the source once to check them; raises
    :class:`AdabatchError` on the first bad option.
    """
    opts = {str(k).lower(): str(v) for k, v in options.items()}
    get = {k: opts.get(k, d) for k, d in DEFAULTS.items()}
    source = get["source"].strip()
    cls = source_class(source)

    controller = get["controller"].strip()
    params = {k[len(PARAM_PREFIX) :]: v for k, v in opts.items() if k.startswith(PARAM_PREFIX)}
    if controller == SPARK_DEFAULT:
        parse_spark_default(params)
    elif controller not in registry.names():
        allowed = ", ".join([*registry.names(), SPARK_DEFAULT])
        msg = f"unknown controller {controller!r}: allowed {allowed}"
        raise AdabatchError(msg)
    else:
        registry.create(controller, params)  # unknown controller or bad parameter -> error

    queue = _QUEUE.parse(get["queue"].lower(), owner=OWNER, noun="option")
    max_rows, min_rows = (_rows(opts, name) for name in _ROWS)
    if max_rows is not None and min_rows is not None:
        msg = f"{OWNER} options max_rows_per_batch and min_rows_per_batch exclude each other"
        raise AdabatchError(msg)

    source_opts = {
        k: v for k, v in opts.items() if k not in READER_OPTIONS and not k.startswith(PARAM_PREFIX)
    }
    known_source = {p.name for p in cls.OPTIONS}
    unknown = sorted(set(source_opts) - known_source)
    if unknown:
        allowed = [*sorted([*READER_OPTIONS, *known_source]), PARAM_PREFIX + "<name>"]
        msg = f"{OWNER} has no option {shown(unknown[0])}: allowed {', '.join(allowed)}"
        raise AdabatchError(msg)
    parsed = StreamOptions(
        source=source,
        source_options=tuple(sorted(source_opts.items())),
        profile=get["profile"].strip(),
        controller=controller,
        params=tuple(sorted(params.items())),
        queue=queue,
        metrics_path=_path(opts, "metrics_path"),
        state_path=_path(opts, "state_path"),
        max_rows_per_batch=max_rows,
        min_rows_per_batch=min_rows,
    )
    values = cls.parse_options(dict(parsed.source_options))
    parse_profile(parsed.profile, seed=int(values.get("seed", 0)))  # type: ignore[call-overload]
    return parsed
