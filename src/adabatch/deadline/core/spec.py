"""Query specs for deadline scheduling, loaded from YAML or TOML (docs/deadline-spec.md).

A :class:`QuerySpec` holds the paper's query attributes (Table 1): window start and end,
deadline, input stream(s) and rate, total tuples, the batch cost model and the
final-aggregation cost model, plus when the query joins (and optionally leaves) a dynamic
multi-query system (Sec. 4). All times are seconds on one time axis.

A :class:`DeadlineScenario` adds the multi-query scheduler settings (strategy, resource slack
factor δ_RSF, C_max) for ``adabatch deadline simulate`` and the runners.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from adabatch.deadline.core.arrival import (
    ArrivalModel,
    ConstantArrival,
    ProfileArrival,
    TraceArrival,
    floor_count,
    trace_from_rows,
)
from adabatch.deadline.core.cost import (
    MAX_TUPLES,
    NO_AGG,
    TIME_EPS,
    AggregationCost,
    QueryCost,
    agg_cost_from_json,
    cost_from_json,
)
from adabatch.errors import AdabatchError, check_name, shown
from adabatch.inputs import read_text_file
from adabatch.outputs import check_new_file, write_atomic
from adabatch.profiles import parse_profile

STRATEGIES = ("llf", "edf", "sjf", "rr")
"""Multi-query queue orders (Sec. 4.2): least laxity, earliest deadline, shortest job,
round robin."""
TIME_TRIGGERS = ("budget", "always")
"""When a late MinBatch's arrived tuples are processed on time (Sec. 4.4): ``always``, as
the paper does; ``budget``, only while the query stays within its ``(1 + δ_RSF)`` cost
bound or its deadline is at risk (see :mod:`adabatch.deadline.core.multi`)."""

QUERY_FIELDS = (
    "id",
    "query",
    "inputs",
    "window_start",
    "window_end",
    "deadline",
    "rate",
    "total",
    "cost",
    "agg_cost",
    "groups",
    "added_at",
    "removed_at",
    "actual_rate",
    "total_known",
)
SCHEDULER_FIELDS = ("strategy", "rsf", "c_max", "min_batch", "poll_s", "time_trigger")
TOP_FIELDS = ("queries", "defaults", "scheduler")

MAX_TIME = 1e12
"""Largest magnitude of a time in seconds (31,700 years): beyond it the window's tuple
count and the planners' float arithmetic overflow or lose whole seconds."""
MAX_RATE = float(MAX_TUPLES)
"""Largest arrival rate in tuples/s (the most tuples a window may hold)."""
MIN_POLL_S = 1e-3
"""Shortest interval at which the multi-query scheduler looks for input (1 ms)."""
MAX_SPEC_BYTES = 1 << 20
"""Largest spec or cost-model file read (1 MiB); checked before the file is read."""
MAX_CSV_BYTES = 64 << 20
"""Largest arrivals CSV read (64 MiB, some 3 million rows)."""
MAX_DEPTH = 32
"""Deepest nesting of lists and mappings in a spec (the format needs 5)."""
MAX_VALUES = 1_000_000
"""Most values a spec may hold once YAML aliases are expanded (a 1 MiB file holds fewer
without aliases)."""


QUERY_NAMES: tuple[str, ...] = (
    "cq1", "cq2", "cq3", "cq4", "q1", "q3", "q4", "q6", "q10", "q12", "q14", "q19",
)  # fmt: skip
"""The queries a spec may name: those :mod:`adabatch.deadline.spark.queries` implements
(it checks that its table matches this list)."""


def known_query_names() -> tuple[str, ...]:
    """The query names a spec's ``query`` field accepts."""
    return QUERY_NAMES


@dataclass(frozen=True)
class QuerySpec:
    """One deadline query (the paper's Table 1 attributes); ``query`` names what a Spark
    runner executes (one of ``adabatch.deadline.spark.queries.QUERY_NAMES``, or ``None``).

    ``arrivals`` is the expected input model the planner uses; ``actual`` (simulation only)
    is how tuples really arrive, e.g. a slower profile (Sec. 4.4); ``None`` means as
    expected. ``total_known = False`` makes the multi-query scheduler estimate the total
    from the observed rate instead of trusting ``total`` (Sec. 4.4, last paragraph).
    """

    id: str
    query: str | None
    inputs: tuple[str, ...]
    window_start: float
    window_end: float
    deadline: float
    arrivals: ArrivalModel
    cost: QueryCost
    agg_cost: AggregationCost = NO_AGG
    groups: int | None = None
    added_at: float | None = None
    removed_at: float | None = None
    actual: ArrivalModel | None = None
    total_known: bool = True
    rate: float | str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        check_name(self.id, "query id")
        if self.added_at is None:
            object.__setattr__(self, "added_at", self.window_start)
        for name in ("window_start", "window_end", "deadline", "added_at", "removed_at"):
            value = getattr(self, name)
            if value is None and name == "removed_at":
                continue
            if isinstance(value, bool) or not isinstance(value, int | float):
                msg = f"query {self.id!r}: {name} = {shown(value)}: allowed a number of seconds"
                raise AdabatchError(msg)
            # planners try later deadlines than a user may give (the earliest completion)
            limit = math.inf if name == "deadline" else MAX_TIME
            if not (math.isfinite(value) and abs(value) <= limit):
                span = "" if math.isinf(limit) else f" from -{limit:g} to {limit:g}"
                msg = f"query {self.id!r}: {name} = {shown(value)}: allowed finite seconds{span}"
                raise AdabatchError(msg)
        if not self.window_start < self.window_end:
            msg = (
                f"query {self.id!r}: window_end = {self.window_end!r} must be after "
                f"window_start = {self.window_start!r}"
            )
            raise AdabatchError(msg)
        if self.arrivals.last_arrival > self.window_end + TIME_EPS * max(1.0, self.window_end):
            msg = (
                f"query {self.id!r}: the expected input ({self.total} tuples) arrives until "
                f"{self.arrivals.last_arrival:g}, after window_end = {self.window_end:g}: "
                "allowed a rate and total whose last tuple arrives by the window end"
            )
            raise AdabatchError(msg)
        if self.arrivals.input_time(1) < self.window_start - TIME_EPS:
            msg = (
                f"query {self.id!r}: input starts at {self.arrivals.input_time(1):g}, "
                f"before window_start = {self.window_start:g}"
            )
            raise AdabatchError(msg)
        for what, model in (
            ("one batch of all", self.cost.cost),
            ("the final aggregation of one batch per", self.agg_cost.cost),
        ):
            try:
                seconds = model(self.total)
            except (ArithmeticError, ValueError):
                seconds = math.inf
            if not math.isfinite(seconds):
                msg = (
                    f"query {self.id!r}: {what} {self.total} tuples costs {seconds:g} s: "
                    "allowed cost models whose cost stays finite"
                )
                raise AdabatchError(msg)
        if self.removed_at is not None and self.removed_at < self.added_at:  # type: ignore[operator]
            msg = (
                f"query {self.id!r}: removed_at = {self.removed_at:g} is before "
                f"added_at = {self.added_at:g}"
            )
            raise AdabatchError(msg)

    @property
    def total(self) -> int:
        """Total tuples of the window (``numTupleTotal``)."""
        return self.arrivals.total

    @property
    def actual_arrivals(self) -> ArrivalModel:
        """How tuples really arrive (the expected model unless ``actual`` is set)."""
        return self.arrivals if self.actual is None else self.actual

    @property
    def single_batch_cost(self) -> float:
        """``minCompCost``: all tuples in one batch (no final aggregation needed)."""
        return self.cost.cost(self.total)

    def describe(self) -> dict[str, Any]:
        """A JSON-able summary (for reports; not the spec file format)."""
        return {
            "id": self.id,
            "query": self.query,
            "inputs": list(self.inputs),
            "window_start": self.window_start,
            "window_end": self.window_end,
            "deadline": self.deadline,
            "rate": self.rate,
            "total": self.total,
            "cost": self.cost.to_json(),
            "agg_cost": self.agg_cost.to_json(),
            "added_at": self.added_at,
            "removed_at": self.removed_at,
        }


@dataclass(frozen=True)
class DeadlineScenario:
    """Queries plus the multi-query scheduler settings (Sec. 4, Algorithm 2 inputs)."""

    queries: tuple[QuerySpec, ...]
    strategy: str = "llf"
    rsf: float = 0.5
    c_max: float = math.inf
    min_batch: bool = True
    poll_s: float = 1.0
    time_trigger: str = "budget"

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            msg = f"strategy = {shown(self.strategy)}: allowed one of {', '.join(STRATEGIES)}"
            raise AdabatchError(msg)
        if self.time_trigger not in TIME_TRIGGERS:
            allowed = ", ".join(TIME_TRIGGERS)
            msg = f"time_trigger = {shown(self.time_trigger)}: allowed one of {allowed}"
            raise AdabatchError(msg)
        if not (math.isfinite(self.rsf) and self.rsf >= 0):
            msg = f"rsf = {shown(self.rsf)}: allowed a finite number >= 0 (0.5 = 50%)"
            raise AdabatchError(msg)
        if not self.c_max > 0:
            msg = f"c_max = {shown(self.c_max)}: allowed a number of seconds > 0 (or inf)"
            raise AdabatchError(msg)
        if not (math.isfinite(self.poll_s) and self.poll_s >= MIN_POLL_S):
            msg = (
                f"poll_s = {shown(self.poll_s)}: allowed a finite number of seconds >= "
                f"{MIN_POLL_S:g}"
            )
            raise AdabatchError(msg)
        ids = [q.id for q in self.queries]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            msg = f"query ids must be unique: {shown(dupes)} appear more than once"
            raise AdabatchError(msg)


def query_spec(
    id: str,
    *,
    window_start: float,
    window_end: float,
    deadline: float,
    cost: QueryCost,
    rate: float | str | ArrivalModel | None = None,
    total: int | None = None,
    query: str | None = None,
    inputs: Sequence[str] = ("lineitem",),
    agg_cost: AggregationCost = NO_AGG,
    groups: int | None = None,
    added_at: float | None = None,
    removed_at: float | None = None,
    actual_rate: float | str | ArrivalModel | None = None,
    total_known: bool = True,
) -> QuerySpec:
    """A :class:`QuerySpec` from Python values.

    ``query`` names the Spark query a runner executes (``None``: planning and simulation
    only). ``rate`` is tuples/s (a number), a profile string (``adabatch.profiles`` grammar,
    time 0 = window start) or an :class:`ArrivalModel`; ``total`` defaults to what the rate
    delivers over the window (one tuple at the window start, then one per ``1/rate``). With
    a total and no rate, the tuples are spread evenly from window start to window end.

    Examples
    --------
    >>> from adabatch.deadline.core.cost import LinearCost
    >>> q = query_spec("case3", window_start=1, window_end=10, deadline=12, rate=1.0,
    ...                cost=LinearCost(per_tuple=0.5))
    >>> q.total, q.arrivals.input_time(6)
    (10, 6.0)
    """
    check_name(id, "query id")
    if isinstance(deadline, int | float) and not abs(deadline) <= MAX_TIME:
        msg = (
            f"query {id!r}: deadline = {shown(deadline)}: allowed a number of seconds from "
            f"-{MAX_TIME:g} to {MAX_TIME:g}"
        )
        raise AdabatchError(msg)
    arrivals = _arrival_model(rate, total, window_start, window_end, id)
    actual = None
    if actual_rate is not None:
        actual = _arrival_model(actual_rate, arrivals.total, window_start, None, id)
        if actual.total != arrivals.total:
            msg = (
                f"query {id!r}: actual_rate delivers {actual.total} tuples, the spec "
                f"{arrivals.total}: allowed the same total"
            )
            raise AdabatchError(msg)
    return QuerySpec(
        id=id,
        query=query,
        inputs=tuple(inputs),
        window_start=float(window_start),
        window_end=float(window_end),
        deadline=float(deadline),
        arrivals=arrivals,
        cost=cost,
        agg_cost=agg_cost,
        groups=groups,
        added_at=None if added_at is None else float(added_at),
        removed_at=None if removed_at is None else float(removed_at),
        actual=actual,
        total_known=total_known,
        rate=rate if isinstance(rate, int | float | str) else None,
    )


def _arrival_model(
    rate: float | str | ArrivalModel | None,
    total: int | None,
    start: float,
    end: float | None,
    qid: str,
) -> ArrivalModel:
    if isinstance(rate, ConstantArrival | ProfileArrival | TraceArrival):
        if total is not None and rate.total != total:
            msg = f"query {qid!r}: total = {total} but the arrival model holds {rate.total}"
            raise AdabatchError(msg)
        return rate
    if isinstance(total, int) and total > MAX_TUPLES:
        msg = f"query {qid!r}: total = {shown(total)}: allowed an integer from 1 to {MAX_TUPLES}"
        raise AdabatchError(msg)
    if isinstance(rate, bool):
        msg = f"query {qid!r}: rate = {shown(rate)}: allowed tuples/s > 0 or a profile string"
        raise AdabatchError(msg)
    if isinstance(rate, int | float):
        rate = float(rate)
        if not (math.isfinite(rate) and 0 < rate <= MAX_RATE):
            msg = (
                f"query {qid!r}: rate = {shown(rate)}: allowed tuples/s > 0 and at most "
                f"{MAX_RATE:g}, or a profile string"
            )
            raise AdabatchError(msg)
        if total is None:
            if end is None:
                msg = f"query {qid!r}: total is needed to model arrivals at rate {rate:g}"
                raise AdabatchError(msg)
            total = _window_count((end - start) * rate, qid, f"rate {rate:g}")
        return ConstantArrival(float(start), rate, total)
    if isinstance(rate, str):
        profile = parse_profile(rate)
        if total is None:
            if end is None:
                msg = f"query {qid!r}: total is needed to model arrivals by profile {shown(rate)}"
                raise AdabatchError(msg)
            try:
                expected = profile.cumulative(end - start)
            except (ArithmeticError, ValueError):
                expected = math.inf
            total = _window_count(expected, qid, f"profile {shown(rate)}")
        return ProfileArrival(float(start), profile, total)
    if rate is None:
        if total is None or end is None:
            msg = f"query {qid!r}: give rate (tuples/s or a profile), total, or both"
            raise AdabatchError(msg)
        even = 1.0 if total <= 1 else (total - 1) / (end - start)
        return ConstantArrival(float(start), even, total)
    msg = f"query {qid!r}: rate = {shown(rate)}: allowed a number, a profile string or arrivals"
    raise AdabatchError(msg)


def _window_count(expected: float, qid: str, source: str) -> int:
    """Tuples of a window whose arrivals expect ``expected`` after the first one."""
    if not (math.isfinite(expected) and expected < MAX_TUPLES):
        msg = (
            f"query {qid!r}: the window at {source} holds {expected:g} tuples: allowed at "
            f"most {MAX_TUPLES} (a lower rate or a shorter window)"
        )
        raise AdabatchError(msg)
    return floor_count(max(expected, 0.0)) + 1


# ---------------------------------------------------------------------------------------
# Loading files


class _Where:
    """Formats errors as ``FILE: query 'ID': field 'NAME' = VALUE: allowed ...``."""

    def __init__(self, path: Path, qid: str | None = None) -> None:
        self.path = path
        self.qid = qid

    def prefix(self, name: str | None = None) -> str:
        out = f"{self.path}"
        if self.qid is not None:
            out += f": query {self.qid!r}"
        if name is not None:
            out += f": field {name!r}"
        return out

    def fail(self, name: str | None, value: Any, allowed: str) -> AdabatchError:
        if name is None:
            return AdabatchError(f"{self.prefix()}: {allowed}")
        return AdabatchError(f"{self.prefix(name)} = {shown(value)}: allowed {allowed}")

    def wrap(self, exc: AdabatchError, name: str | None = None) -> AdabatchError:
        return AdabatchError(f"{self.prefix(name)}: {exc}")


class _Loader(yaml.SafeLoader):
    """``yaml.safe_load`` that also reads ``1e6`` as a number (YAML 1.2; 1.1 needs a dot)."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def read_document(path: str | Path) -> Any:
    """Parse a ``.yaml``/``.yml``/``.toml``/``.json`` file; errors name the file.

    The file may hold at most :data:`MAX_SPEC_BYTES`, nest at most :data:`MAX_DEPTH`
    deep and expand (YAML aliases) to at most :data:`MAX_VALUES` values."""
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix not in (".yaml", ".yml", ".toml", ".json"):
        msg = (
            f"spec file {shown(str(p))} has extension {shown(suffix)}: allowed .yaml, .yml, "
            ".toml, .json"
        )
        raise AdabatchError(msg)
    text = read_text_file(p, "spec file", MAX_SPEC_BYTES)
    kind = suffix[1:].upper().replace("YML", "YAML")
    try:
        if suffix == ".toml":
            doc = tomllib.loads(text)
        elif suffix == ".json":
            doc = json.loads(text)
        else:
            doc = yaml.load(text, Loader=_Loader)
    except (yaml.YAMLError, ValueError) as exc:  # ValueError: JSON, TOML, a 5000-digit int
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if "integer string conversion" in first:
            first = "an integer of more than 4300 digits"
        msg = f"{p}: not valid {kind}: {first[:200]}"
        raise AdabatchError(msg) from None
    except RecursionError:
        msg = f"{p}: {kind} nested too deeply: allowed at most {MAX_DEPTH} levels"
        raise AdabatchError(msg) from None
    _check_shape(doc, p)
    return doc


def _check_shape(doc: Any, path: Path) -> None:
    """Refuse documents nested deeper than :data:`MAX_DEPTH` or holding more than
    :data:`MAX_VALUES` values with aliases expanded (counted without expanding them)."""
    stack = [(doc, 0)]
    counted = 1
    while stack:
        value, depth = stack.pop()
        if not isinstance(value, Mapping | list):
            continue
        if depth >= MAX_DEPTH:
            msg = f"{path}: nested more than {MAX_DEPTH} levels deep: allowed at most {MAX_DEPTH}"
            raise AdabatchError(msg)
        counted += len(value)
        if counted > MAX_VALUES:
            msg = (
                f"{path}: the document holds more than {MAX_VALUES} values (YAML aliases "
                f"expanded): allowed at most {MAX_VALUES}"
            )
            raise AdabatchError(msg)
        children = value.values() if isinstance(value, Mapping) else value
        stack.extend((child, depth + 1) for child in children)


def load_specs(path: str | Path) -> list[QuerySpec]:
    """The queries of a spec file (YAML or TOML by extension)."""
    return list(load_scenario(path).queries)


def load_scenario(path: str | Path, **overrides: Any) -> DeadlineScenario:
    """Queries and scheduler settings of a spec file; ``overrides`` (non-``None``) replace
    the file's ``scheduler`` values (the CLI's ``--strategy``, ``--rsf``, ...)."""
    p = Path(path)
    doc = read_document(p)
    top = _Where(p)
    if not isinstance(doc, Mapping):
        raise top.fail(None, doc, "the file must hold a mapping with a 'queries' list")
    unknown = sorted(set(doc) - set(TOP_FIELDS), key=str)
    if unknown:
        msg = f"{p}: unknown top-level keys {_keys(unknown)}: allowed {list(TOP_FIELDS)}"
        raise AdabatchError(msg)
    raw_queries = doc.get("queries")
    if not isinstance(raw_queries, list) or not raw_queries:
        raise top.fail("queries", raw_queries, "a non-empty list of query tables")
    defaults = doc.get("defaults", {}) or {}
    if not isinstance(defaults, Mapping):
        raise top.fail("defaults", defaults, "a mapping of query fields")
    bad_defaults = sorted(set(defaults) - set(QUERY_FIELDS) | ({"id"} & set(defaults)), key=str)
    if bad_defaults:
        msg = f"{p}: defaults has keys {_keys(bad_defaults)}: allowed {list(QUERY_FIELDS[1:])}"
        raise AdabatchError(msg)
    names = known_query_names()
    queries: list[QuerySpec] = []
    first_index: dict[str, int] = {}
    for i, raw in enumerate(raw_queries):
        if not isinstance(raw, Mapping):
            raise top.fail(f"queries[{i}]", raw, "a mapping of query fields")
        merged = {**defaults, **raw}
        spec = _parse_query(merged, i, p, names)
        if spec.id in first_index:
            allowed = f"a unique id (queries[{first_index[spec.id]}] has it too)"
            raise top.fail(f"queries[{i}].id", spec.id, allowed)
        first_index[spec.id] = i
        queries.append(spec)
    scheduler = doc.get("scheduler", {}) or {}
    if not isinstance(scheduler, Mapping):
        raise top.fail("scheduler", scheduler, "a mapping with " + ", ".join(SCHEDULER_FIELDS))
    unknown = sorted(set(scheduler) - set(SCHEDULER_FIELDS), key=str)
    if unknown:
        msg = f"{p}: scheduler has unknown keys {_keys(unknown)}: allowed {list(SCHEDULER_FIELDS)}"
        raise AdabatchError(msg)
    settings = dict(scheduler)
    settings.update({k: v for k, v in overrides.items() if v is not None})
    kwargs: dict[str, Any] = {}
    for name, choices in (("strategy", STRATEGIES), ("time_trigger", TIME_TRIGGERS)):
        if name in settings:
            if not isinstance(settings[name], str):
                raise _Where(p).fail(name, settings[name], "one of " + ", ".join(choices))
            kwargs[name] = settings[name].lower()
    for name in ("rsf", "c_max", "poll_s"):
        if name in settings:
            kwargs[name] = _number(settings[name], name, _Where(p), allow_inf=name == "c_max")
    if "min_batch" in settings:
        if not isinstance(settings["min_batch"], bool):
            raise _Where(p).fail("min_batch", settings["min_batch"], "true or false")
        kwargs["min_batch"] = settings["min_batch"]
    try:
        return DeadlineScenario(tuple(queries), **kwargs)
    except AdabatchError as exc:
        raise _Where(p).wrap(exc, "scheduler") from None


def _keys(keys: list[Any]) -> str:
    """``['a', 'b']`` for a message, at most 8 keys of 40 characters each."""
    more = ", ..." if len(keys) > 8 else ""
    return "[" + ", ".join(shown(k, 40) for k in keys[:8]) + more + "]"


def _number(
    value: Any, name: str, where: _Where, *, allow_inf: bool = False, bound: float = math.inf
) -> float:
    """A number field (a numeric string such as ``"1e6"`` too) of magnitude at most
    ``bound``; ``inf`` only when ``allow_inf``."""
    what = "a number of seconds" if name != "rsf" else "a number"
    number = numeric(value)
    if not isinstance(number, float):
        raise where.fail(name, value, what)
    if math.isnan(number) or (math.isinf(number) and not allow_inf):
        raise where.fail(name, value, f"{what}, finite")
    if abs(number) > bound:
        raise where.fail(name, value, f"{what} from -{bound:g} to {bound:g}")
    return number


def numeric(value: Any) -> float | Any:
    """``value`` as a float when it is a number or a numeric string (YAML 1.1 reads ``1e6``
    as a string); anything else unchanged."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return value
    if isinstance(value, int | float):
        try:
            return float(value)
        except OverflowError:  # an integer beyond the float range
            return math.copysign(math.inf, value)
    return value


def _count(value: Any, name: str, where: _Where, allowed: str, limit: int) -> int:
    """A whole-number field from 1 to ``limit`` (``1e6`` and ``"1e6"`` too)."""
    number = numeric(value)
    if isinstance(number, float) and number.is_integer() and 1 <= number <= limit:
        return int(value) if isinstance(value, int) else int(number)
    raise where.fail(name, value, allowed)


def _parse_query(raw: Mapping[str, Any], index: int, path: Path, names: Any) -> QuerySpec:
    qid = raw.get("id")
    if isinstance(qid, int) and not isinstance(qid, bool):
        qid = str(qid)
    check_name(qid, f"{path}: field 'queries[{index}].id'")
    where = _Where(path, qid)
    unknown = sorted(set(raw) - set(QUERY_FIELDS), key=str)
    if unknown:
        msg = f"{where.prefix()}: unknown fields {_keys(unknown)}: allowed {list(QUERY_FIELDS)}"
        raise AdabatchError(msg)
    query = raw.get("query")
    if query is not None:
        if not isinstance(query, str) or not query:
            raise where.fail("query", query, "the name of a query")
        if names is not None and query.lower() not in names:
            raise where.fail("query", query, "one of " + ", ".join(names))
        query = query.lower()
    inputs = raw.get("inputs", ["lineitem"])
    if isinstance(inputs, str):
        inputs = [inputs]
    if not isinstance(inputs, list) or not inputs or not all(isinstance(s, str) for s in inputs):
        raise where.fail("inputs", inputs, "a list of stream names, e.g. [orders, lineitem]")
    for name in ("window_start", "window_end", "deadline"):
        if name not in raw:
            raise where.fail(name, None, "a number of seconds (it is required)")
    ws = _number(raw["window_start"], "window_start", where, bound=MAX_TIME)
    we = _number(raw["window_end"], "window_end", where, bound=MAX_TIME)
    deadline = _number(raw["deadline"], "deadline", where, bound=MAX_TIME)
    if we <= ws:
        raise where.fail("window_end", raw["window_end"], f"a time after window_start = {ws:g}")
    total = raw.get("total")
    if total is not None:
        allowed = f"an integer from 1 to {MAX_TUPLES} (tuples in the window)"
        total = _count(total, "total", where, allowed, MAX_TUPLES)
    rate = _parse_rate(raw.get("rate"), "rate", where, path, ws)
    actual_rate = _parse_rate(raw.get("actual_rate"), "actual_rate", where, path, ws)
    if "cost" not in raw:
        raise where.fail("cost", None, "a cost model object or a path to a profile JSON file")
    cost, profile_agg = _parse_cost(raw["cost"], where, path)
    agg = profile_agg if profile_agg is not None else NO_AGG
    if raw.get("agg_cost") is not None:
        agg = _parse_agg(raw["agg_cost"], where, path)
    groups = raw.get("groups")
    if groups is not None:
        groups = _count(groups, "groups", where, f"an integer from 1 to {MAX_TUPLES}", MAX_TUPLES)
    added_at = raw.get("added_at")
    removed_at = raw.get("removed_at")
    added = None if added_at is None else _number(added_at, "added_at", where, bound=MAX_TIME)
    removed = (
        None if removed_at is None else _number(removed_at, "removed_at", where, bound=MAX_TIME)
    )
    total_known = raw.get("total_known", True)
    if not isinstance(total_known, bool):
        raise where.fail("total_known", total_known, "true or false")
    try:
        return query_spec(
            qid,
            query=query,
            inputs=inputs,
            window_start=ws,
            window_end=we,
            deadline=deadline,
            rate=rate,
            total=total,
            cost=cost,
            agg_cost=agg,
            groups=groups,
            added_at=added,
            removed_at=removed,
            actual_rate=actual_rate,
            total_known=total_known,
        )
    except AdabatchError as exc:
        text = str(exc)
        prefix = f"query {qid!r}: "
        text = text[len(prefix) :] if text.startswith(prefix) else text
        raise AdabatchError(f"{where.prefix()}: {text}") from None


def _parse_rate(
    value: Any, name: str, where: _Where, base: Path, start: float
) -> float | str | ArrivalModel | None:
    if value is None:
        return None
    allowed = (
        "tuples/s (a number > 0), a profile string (e.g. 'step:100:50:60s'), "
        "or {arrivals: [[time_s, count], ...] or a CSV path with time_s,count}"
    )
    if isinstance(value, bool):
        raise where.fail(name, value, allowed)
    if isinstance(numeric(value), float):
        number = numeric(value)
        if not (math.isfinite(number) and 0 < number <= MAX_RATE):
            raise where.fail(name, value, f"{allowed}; a rate from 0 to {MAX_RATE:g}")
        return number
    if isinstance(value, str):
        try:
            parse_profile(value, base_dir=base.parent)
        except AdabatchError as exc:
            raise where.wrap(exc, name) from None
        if value.strip().lower().startswith("trace:"):
            # resolve the trace path against the spec's folder once, here
            rest = value.strip()[len("trace:") :]
            tail = ""
            head, sep, mode = rest.rpartition(":")
            if sep and mode.strip().lower() in ("step", "linear"):
                rest, tail = head, ":" + mode.strip()
            trace_path = Path(rest).expanduser()
            if not trace_path.is_absolute():
                trace_path = base.parent / trace_path
            value = f"trace:{trace_path}{tail}"
        return value
    if isinstance(value, Mapping):
        if set(value) != {"arrivals"}:
            raise where.fail(name, value, allowed)
        rows = value["arrivals"]
        if isinstance(rows, str):
            rows = _read_arrivals_csv(base.parent / rows, where, name)
        if not isinstance(rows, list):
            raise where.fail(name, value, allowed)
        try:
            return trace_from_rows(rows, f"{name} arrivals")
        except AdabatchError as exc:
            raise where.wrap(exc, name) from None
    raise where.fail(name, value, allowed)


def _read_arrivals_csv(path: Path, where: _Where, name: str) -> list[list[float]]:
    try:
        text = read_text_file(path, "arrivals CSV", MAX_CSV_BYTES)
    except AdabatchError as exc:
        raise where.wrap(exc, name) from None
    rows: list[list[float]] = []
    with io.StringIO(text, newline="") as fh:
        reader = csv.DictReader(fh)
        fields = [f.strip() for f in (reader.fieldnames or [])]
        if "time_s" not in fields or "count" not in fields:
            raise where.fail(name, str(path), "a CSV whose header has columns time_s,count")
        for line_no, row in enumerate(reader, start=2):
            row = {k.strip(): v for k, v in row.items() if k is not None}
            try:
                rows.append([float(row["time_s"]), float(row["count"])])
            except (TypeError, ValueError):
                raise where.fail(
                    name, f"{path}:{line_no}", "numeric time_s and count on every line"
                ) from None
    return rows


def _load_model_file(value: str, where: _Where, base: Path, name: str) -> Mapping[str, Any]:
    path = Path(value).expanduser()
    if not path.is_absolute():
        path = base.parent / path
    if not path.exists():
        raise where.fail(name, value, "an inline model or the path of an existing JSON file")
    try:
        data = json.loads(read_text_file(path, "cost model file", MAX_SPEC_BYTES))
    except AdabatchError as exc:
        raise where.wrap(exc, name) from None
    except json.JSONDecodeError as exc:
        raise where.fail(name, value, f"a JSON file ({exc.msg} at line {exc.lineno})") from None
    except RecursionError:
        raise where.fail(name, value, f"JSON nested at most {MAX_DEPTH} levels") from None
    _check_shape(data, path)
    if not isinstance(data, Mapping):
        raise where.fail(name, value, "a JSON object")
    return data


def _parse_cost(value: Any, where: _Where, base: Path) -> tuple[QueryCost, AggregationCost | None]:
    """The batch cost model and, for a profile file, its final-aggregation model."""
    agg = None
    if isinstance(value, str):
        data = _load_model_file(value, where, base, "cost")
        if "kind" not in data:
            if "cost" not in data:
                raise where.fail("cost", value, "a profile JSON with a 'cost' object")
            if data.get("agg_cost") is not None:
                try:
                    agg = agg_cost_from_json(data["agg_cost"])
                except AdabatchError as exc:
                    raise where.wrap(exc, "cost") from None
            data = data["cost"]
        value = data
    try:
        return cost_from_json(value), agg
    except AdabatchError as exc:
        raise where.wrap(exc, "cost") from None


def _parse_agg(value: Any, where: _Where, base: Path) -> AggregationCost:
    if isinstance(value, str):
        data = _load_model_file(value, where, base, "agg_cost")
        value = data.get("agg_cost", data) if "kind" not in data else data
    try:
        return agg_cost_from_json(value)
    except AdabatchError as exc:
        raise where.wrap(exc, "agg_cost") from None


# ---------------------------------------------------------------------------------------
# Writing files


def _arrival_document(model: ArrivalModel) -> Any:
    if isinstance(model, ConstantArrival):
        return model.rate
    if isinstance(model, ProfileArrival):
        return model.profile.spec
    if isinstance(model, TraceArrival):
        return {"arrivals": [[t, c] for t, c in zip(model.times, model.counts, strict=True)]}
    msg = f"arrival model {type(model).__name__} cannot be written to a spec file"
    raise AdabatchError(msg)


def query_document(spec: QuerySpec) -> dict[str, Any]:
    """The spec-file table of one query (what :func:`load_specs` reads back)."""
    out: dict[str, Any] = {"id": spec.id}
    if spec.query is not None:
        out["query"] = spec.query
    out["inputs"] = list(spec.inputs)
    out["window_start"] = spec.window_start
    out["window_end"] = spec.window_end
    out["deadline"] = spec.deadline
    out["rate"] = _arrival_document(spec.arrivals)
    out["total"] = spec.total
    out["cost"] = spec.cost.to_json()
    if spec.agg_cost.model is not None or spec.agg_cost.per_group != 0.0:
        out["agg_cost"] = spec.agg_cost.to_json()
    if spec.groups is not None:
        out["groups"] = spec.groups
    if spec.added_at != spec.window_start:
        out["added_at"] = spec.added_at
    if spec.removed_at is not None:
        out["removed_at"] = spec.removed_at
    if spec.actual is not None:
        out["actual_rate"] = _arrival_document(spec.actual)
    if not spec.total_known:
        out["total_known"] = False
    return out


def write_scenario(scenario: DeadlineScenario, path: str | Path, *, force: bool = False) -> Path:
    """Write ``scenario`` as a YAML (or ``.json``) spec file that loads back unchanged; an
    existing file is replaced only with ``force`` (by a rename: a symlink is not followed)."""
    p = check_new_file(path, "scenario file", force=force)
    doc: dict[str, Any] = {
        "scheduler": {
            "strategy": scenario.strategy,
            "rsf": scenario.rsf,
            "c_max": "inf" if math.isinf(scenario.c_max) else scenario.c_max,
            "min_batch": scenario.min_batch,
            "poll_s": scenario.poll_s,
            "time_trigger": scenario.time_trigger,
        },
        "queries": [query_document(q) for q in scenario.queries],
    }
    if p.suffix.lower() == ".json":
        text = json.dumps(doc, indent=2) + "\n"
    elif p.suffix.lower() in (".yaml", ".yml"):
        text = yaml.safe_dump(doc, sort_keys=False)
    else:
        msg = f"scenario file {shown(str(p))}: allowed extension .yaml, .yml or .json"
        raise AdabatchError(msg)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        return write_atomic(p, text.encode("utf-8"))
    except OSError as exc:
        msg = (
            f"scenario file {shown(str(p))} cannot be written ({exc.strerror}): allowed a "
            "path you can write"
        )
        raise AdabatchError(msg) from None
