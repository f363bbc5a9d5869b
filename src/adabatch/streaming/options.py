"""The ``adabatch`` data source's options: strings in, one validated frozen object out.

Spark hands a data source its options as a case-insensitive dict of strings. This module
parses them once, in the user's process (:func:`adabatch.read_stream`) and again at
``load()`` (``DataSource.schema``), so a bad option fails before the query starts, with an
:class:`AdabatchError` naming the option, the value and what is allowed.

The reader's options carry Spark's camelCase names (:data:`READER_OPTIONS`:
``maxRowsPerTrigger``, ``metricsPath``, ...); the earlier snake_case names
(:data:`RENAMED_OPTIONS`) still work and warn. Options of the source itself (``keys``,
``seed``, ...) are every option not listed there and not starting with ``param.``; the
source validates them, under their own names or the same in camelCase (``wordsPerLine``).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from adabatch.batching import QUEUE_MODES
from adabatch.control import registry
from adabatch.control.base import Controller
from adabatch.errors import AdabatchError, shown
from adabatch.params import Param, Params, parse_values
from adabatch.profiles import parse_duration, parse_profile
from adabatch.sources import source_class
from adabatch.sources.base import RecordSource

SPARK_DEFAULT = "spark-default"
PARAM_PREFIX = "param."

# spark-default has no controller; its only parameter is the number of input partitions.
SPARK_DEFAULT_PARAMS = (Param("blocks", 2, "blocks (input partitions) per batch", kind=int, low=1),)
# Who an option of the ``adabatch`` data source itself belongs to, in messages.
OWNER = "adabatch source"

MODES = ("control", "advise")
"""``control``: the controller cuts the batches; ``advise``: Spark's trigger decides and the
controller only observes, plans and writes its recommendation into the metrics."""

# Kafka's default for maxTriggerDelay: a held batch waits at most 15 minutes.
DEFAULT_MAX_TRIGGER_DELAY = "15m"
# Longest duration an option may name: a backlog of a day cut at the smallest interval
# (0.1 s) stays below the cutter's MAX_CUTS_PER_POLL.
MAX_DURATION_S = 86_400.0

READER_OPTIONS: dict[str, str] = {
    "source": "record source: generator, files (a landing directory) or redis (a stream)",
    "controller": f"controller name, or {SPARK_DEFAULT!r} (Spark's trigger decides)",
    "mode": "control (the controller cuts the batches) or advise (Spark's trigger decides; "
    "the controller observes and writes its recommended interval and blocks to the metrics)",
    "profile": "rate profile of the source, e.g. constant:2000",
    "queue": "cut batches waiting while Spark is busy: fifo (one micro-batch each) or "
    "coalesce (merged into one)",
    "metricsPath": "metrics.jsonl to append one record per batch to",
    "statePath": "JSON file for controller state and cut schedule (keep it next to the checkpoint)",
    "maxRowsPerTrigger": "Spark ReadLimit: at most this many records per micro-batch",
    "minRowsPerTrigger": "Spark ReadLimit: wait until a micro-batch has this many records",
    "maxTriggerDelay": "with minRowsPerTrigger: release a held micro-batch once its oldest "
    f"record has waited this long (default {DEFAULT_MAX_TRIGGER_DELAY}, as Kafka's)",
    "startingBacklog": "a new query's stream starts this long before the query, so the "
    "records of that span wait at once, as after downtime (default 0)",
}

RENAMED_OPTIONS: dict[str, str] = {
    "metrics_path": "metricsPath",
    "state_path": "statePath",
    "max_rows_per_batch": "maxRowsPerTrigger",
    "min_rows_per_batch": "minRowsPerTrigger",
}
"""Earlier option names, still accepted with a ``DeprecationWarning``: old -> new."""

DEFAULTS = {
    "source": "generator",
    "controller": "fixed-point",
    "mode": "control",
    "profile": "constant:2000",
    "queue": "fifo",
}


def _duration(text: str) -> float:
    """Seconds of a duration option (``"30s"``, ``"5 seconds"``), at most a day."""
    seconds = parse_duration(text)
    if seconds > MAX_DURATION_S:
        msg = f"{seconds:g} s is longer than a day ({MAX_DURATION_S:g} s)"
        raise AdabatchError(msg)
    return seconds


# The options checked as values (the others name a source, controller, profile or file).
_QUEUE = Param("queue", DEFAULTS["queue"], READER_OPTIONS["queue"], kind=str, choices=QUEUE_MODES)
_MODE = Param("mode", DEFAULTS["mode"], READER_OPTIONS["mode"], kind=str, choices=MODES)
_ROWS = {
    name: Param(name, None, READER_OPTIONS[name], kind=int, low=1)
    for name in ("maxRowsPerTrigger", "minRowsPerTrigger")
}
_DURATIONS = {
    name: Param(name, None, READER_OPTIONS[name], kind=str, check=_duration)
    for name in ("maxTriggerDelay", "startingBacklog")
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
    max_trigger_delay_s: float | None = None  # set exactly when min_rows_per_batch is
    starting_backlog_s: float = 0.0
    mode: str = "control"

    @property
    def spark_default(self) -> bool:
        """Whether Spark's own trigger decides the batches (no controller)."""
        return self.controller == SPARK_DEFAULT

    @property
    def advise(self) -> bool:
        """Whether Spark's trigger decides and the controller only recommends."""
        return self.mode == "advise"

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
        """Blocks per batch when Spark's trigger decides: ``param.blocks`` in
        ``spark-default`` mode, the default (2) in ``advise`` mode."""
        if self.advise:
            return int(SPARK_DEFAULT_PARAMS[0].default)
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
            # only when not the default, so state written before modes existed still matches
            **({"mode": self.mode} if self.advise else {}),
        }

    def to_options(self) -> dict[str, str]:
        """Back to Spark's string options (``parse_options(o.to_options()) == o``)."""
        out = {
            "source": self.source,
            "profile": self.profile,
            "controller": self.controller,
            "mode": self.mode,
            "queue": self.queue,
        }
        out.update(dict(self.source_options))
        out.update({PARAM_PREFIX + k: v for k, v in self.params})
        named = {
            "metricsPath": self.metrics_path,
            "statePath": self.state_path,
            "maxRowsPerTrigger": self.max_rows_per_batch,
            "minRowsPerTrigger": self.min_rows_per_batch,
            "maxTriggerDelay": self.max_trigger_delay_s,
            "startingBacklog": self.starting_backlog_s or None,
        }
        out.update({k: str(v) for k, v in named.items() if v is not None})
        return out


def parse_spark_default(params: Mapping[str, Any]) -> Params:
    """The parameters of ``spark-default`` mode (``SPARK_DEFAULT_PARAMS``), checked."""
    holder = f"controller {SPARK_DEFAULT!r}"
    return parse_values(SPARK_DEFAULT_PARAMS, params, owner=SPARK_DEFAULT, holder=holder)


def _rows(options: Mapping[str, str], name: str) -> int | None:
    raw = options.get(name.lower())
    return None if raw is None else _ROWS[name].parse(raw, owner=OWNER, noun="option")


def _seconds(options: Mapping[str, str], name: str, default: str | None) -> float | None:
    raw = options.get(name.lower(), default)
    if raw is None:
        return None
    return _duration(_DURATIONS[name].parse(raw, owner=OWNER, noun="option"))


def _path(options: Mapping[str, str], name: str) -> str | None:
    raw = options.get(name.lower())
    if raw is None:
        return None
    text = str(raw).strip()
    if not text:
        msg = f"{OWNER} option {name!r} is empty: give a file path"
        raise AdabatchError(msg)
    return text


def _renamed(opts: dict[str, str]) -> dict[str, str]:
    """``opts`` (lower-case names) with the earlier option names turned into the current
    ones, each with a ``DeprecationWarning``; both names at once must agree."""
    out = dict(opts)
    for old, new in RENAMED_OPTIONS.items():
        if old not in out:
            continue
        value = out.pop(old)
        warnings.warn(
            f"{OWNER} option {old!r} is deprecated: use {new!r}", DeprecationWarning, stacklevel=3
        )
        if out.get(new.lower(), value) != value:
            msg = f"{OWNER} options {old!r} and {new!r} name the same option: give only {new!r}"
            raise AdabatchError(msg)
        out[new.lower()] = value
    return out


def _source_options(opts: Mapping[str, str], cls: type[RecordSource]) -> dict[str, str]:
    """The options of the record source: every name that is not the reader's nor a
    controller parameter, camelCase spellings turned into the source's own names."""
    reader = {name.lower() for name in READER_OPTIONS}
    known = {p.name.replace("_", "").lower(): p.name for p in cls.OPTIONS}
    out: dict[str, str] = {}
    for k, v in opts.items():
        if k in reader or k.startswith(PARAM_PREFIX):
            continue
        name = known.get(k.replace("_", ""), k) if k not in known.values() else k
        if name in out:
            msg = f"{OWNER} option {name!r} is given twice (as {k!r} too): give it once"
            raise AdabatchError(msg)
        out[name] = v
    unknown = sorted(set(out) - set(known.values()))
    if unknown:
        allowed = [*sorted([*READER_OPTIONS, *known.values()]), PARAM_PREFIX + "<name>"]
        msg = f"{OWNER} has no option {shown(unknown[0])}: allowed {', '.join(allowed)}"
        raise AdabatchError(msg)
    return out


def _check_controller(controller: str, params: Mapping[str, str], mode: str) -> None:
    """The controller exists, its parameters are valid, and ``mode`` fits it."""
    if controller == SPARK_DEFAULT:
        parse_spark_default(params)
        if mode == "advise":
            msg = (
                f"{OWNER} option 'mode' = 'advise' needs a controller to advise: "
                f"controller {SPARK_DEFAULT!r} has none (name one, e.g. fixed-point)"
            )
            raise AdabatchError(msg)
    elif controller not in registry.names():
        allowed = ", ".join([*registry.names(), SPARK_DEFAULT])
        msg = f"unknown controller {controller!r}: allowed {allowed}"
        raise AdabatchError(msg)
    else:
        registry.create(controller, params)  # unknown controller or bad parameter -> error


def _check_live(parsed: StreamOptions) -> None:
    """A live source keeps its manifest in the state file, and its records arrive when
    others write them: it needs ``statePath`` and has no ``startingBacklog``."""
    if parsed.state_path is None:
        msg = (
            f"the {parsed.source} source needs option 'statePath': the file that keeps which "
            "offset is which record (put it next to the query's checkpoint, e.g. "
            "CHECKPOINT/adabatch-state.json)"
        )
        raise AdabatchError(msg)
    if parsed.starting_backlog_s:
        msg = (
            f"{OWNER} option 'startingBacklog' applies to the generator only: the "
            f"{parsed.source} source's backlog is what has landed and not been read"
        )
        raise AdabatchError(msg)


def parse_options(options: Mapping[str, Any]) -> StreamOptions:
    """Validate Spark-style options (names case-insensitive, values strings or numbers).

    Builds the controller, the profile and the source once to check them; raises
    :class:`AdabatchError` on the first bad option.
    """
    opts = _renamed({str(k).lower(): str(v) for k, v in options.items()})
    get = {k: opts.get(k, d) for k, d in DEFAULTS.items()}
    source = get["source"].strip()
    cls = source_class(source)

    controller = get["controller"].strip()
    params = {k[len(PARAM_PREFIX) :]: v for k, v in opts.items() if k.startswith(PARAM_PREFIX)}
    mode = _MODE.parse(get["mode"].strip().lower(), owner=OWNER, noun="option")
    _check_controller(controller, params, mode)

    queue = _QUEUE.parse(get["queue"].lower(), owner=OWNER, noun="option")
    max_rows, min_rows = (_rows(opts, name) for name in _ROWS)
    if max_rows is not None and min_rows is not None:
        msg = f"{OWNER} options maxRowsPerTrigger and minRowsPerTrigger exclude each other"
        raise AdabatchError(msg)
    if min_rows is None and "maxtriggerdelay" in opts:
        msg = f"{OWNER} option 'maxTriggerDelay' bounds minRowsPerTrigger's wait: set both"
        raise AdabatchError(msg)
    delay = None if min_rows is None else DEFAULT_MAX_TRIGGER_DELAY

    source_opts = _source_options(opts, cls)
    parsed = StreamOptions(
        source=source,
        source_options=tuple(sorted(source_opts.items())),
        profile=get["profile"].strip(),
        controller=controller,
        params=tuple(sorted(params.items())),
        queue=queue,
        metrics_path=_path(opts, "metricsPath"),
        state_path=_path(opts, "statePath"),
        max_rows_per_batch=max_rows,
        min_rows_per_batch=min_rows,
        max_trigger_delay_s=_seconds(opts, "maxTriggerDelay", delay),
        starting_backlog_s=_seconds(opts, "startingBacklog", "0") or 0.0,
        mode=mode,
    )
    if cls.LIVE:
        _check_live(parsed)
    values = cls.parse_options(dict(parsed.source_options))
    parse_profile(parsed.profile, seed=int(values.get("seed", 0)))  # type: ignore[call-overload]
    return parsed
