"""Query specs for deadline scheduling, loaded from YAML or TOML (docs/deadline-spec.md).

A :class:`QuerySpec` holds the paper's query attributes (Table 1): window start and end,
deadline, input stream(s) and rate, total tuples, the batch cost model and the
final-aggregation cost model, plus when the query joins (and optionally leaves) a dynamic
multi-query system (Sec. 4). All times are seconds on one time axis.

A :class:`Scenario` adds the multi-query scheduler settings (strategy, resource slack
factor δ_RSF, C_max) for ``adabatch deadline simulate`` and the runners.
"""

from __future__ import annotations

import csv
import json
import math
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from adabatch.deadline.arrival import (
    ArrivalModel,
    ConstantArrival,
    ProfileArrival,
    TraceArrival,
    floor_count,
    trace_from_rows,
)
from adabatch.deadline.cost import (
    NO_AGG,
    TIME_EPS,
    AggCostModel,
    CostModel,
    agg_cost_from_json,
    cost_from_json,
)
from adabatch.errors import AdabatchError
from adabatch.profiles import parse_profile

STRATEGIES = ("llf", "edf", "sjf", "rr")
"""Multi-query queue orders (Sec. 4.2): least laxity, earliest deadline, shortest job,
round robin."""
TIME_TRIGGERS = ("budget", "always")
"""When a late MinBatch's arrived tuples are processed on time (Sec. 4.4): ``always``, as
the paper does; ``budget``, only while the query stays within its ``(1 + δ_RSF)`` cost
bound or its deadline is at risk (see :mod:`adabatch.deadline.multi`)."""

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


def known_query_names() -> tuple[str, ...] | None:
    """The query names the Spark runner implements, or ``None`` when that module is absent."""
    try:
        from adabatch.deadline.queries import QUERY_NAMES
    except ModuleNotFoundError as exc:
        if exc.name != "adabatch.deadline.queries":
            raise
        return None
    return tuple(QUERY_NAMES)


@dataclass(frozen=True)
class QuerySpec:
    """One deadline query (the paper's Table 1 attributes); ``query`` names what a Spark
    runner executes (one of ``adabatch.deadline.queries.QUERY_NAMES``, or ``None``).

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
    cost: CostModel
    agg_cost: AggCostModel = NO_AGG
    groups: int | None = None
    added_at: float | None = None
    removed_at: float | None = None
    actual: ArrivalModel | None = None
    total_known: bool = True
    rate: float | str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if self.added_at is None:
            object.__setattr__(self, "added_at", self.window_start)
        for name in ("window_start", "window_end", "deadline", "added_at"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                msg = f"query {self.id!r}: {name} = {value!r}: allowed a number of seconds"
                raise AdabatchError(msg)
            if not math.isfinite(value):
                msg = f"query {self.id!r}: {name} = {value!r}: allowed a finite number"
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
class Scenario:
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
            msg = f"strategy = {self.strategy!r}: allowed one of {', '.join(STRATEGIES)}"
            raise AdabatchError(msg)
        if self.time_trigger not in TIME_TRIGGERS:
            msg = f"time_trigger = {self.time_trigger!r}: allowed one of {', '.join(TIME_TRIGGERS)}"
            raise AdabatchError(msg)
        if not (math.isfinite(self.rsf) and self.rsf >= 0):
            msg = f"rsf = {self.rsf!r}: allowed a finite number >= 0 (0.5 = 50%)"
            raise AdabatchError(msg)
        if not self.c_max > 0:
            msg = f"c_max = {self.c_max!r}: allowed a number of seconds > 0 (or inf)"
            raise AdabatchError(msg)
        if not (math.isfinite(self.poll_s) and self.poll_s > 0):
            msg = f"poll_s = {self.poll_s!r}: allowed a finite number of seconds > 0"
            raise AdabatchError(msg)
        ids = [q.id for q in self.queries]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            msg = f"query ids must be unique: {dupes} appear more than once"
            raise AdabatchError(msg)


def query_spec(
    id: str,
    *,
    window_start: float,
    window_end: float,
    deadline: float,
    cost: CostModel,
    rate: float | str | ArrivalModel | None = None,
    total: int | None = None,
    query: str | None = None,
    inputs: Sequence[str] = ("lineitem",),
    agg_cost: AggCostModel = NO_AGG,
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
    >>> from adabatch.deadline.cost import LinearCost
    >>> q = query_spec("case3", window_start=1, window_end=10, deadline=12, rate=1.0,
    ...                cost=LinearCost(per_tuple=0.5))
    >>> q.total, q.arrivals.input_time(6)
    (10, 6.0)
    """
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
    if isinstance(rate, bool):
        msg = f"query {qid!r}: rate = {rate!r}: allowed tuples/s > 0 or a profile string"
        raise AdabatchError(msg)
    if isinstance(rate, int | float):
        rate = float(rate)
        if not (math.isfinite(rate) and rate > 0):
            msg = f"query {qid!r}: rate = {rate!r}: allowed tuples/s > 0 or a profile string"
            raise AdabatchError(msg)
        if total is None:
            if end is None:
                msg = f"query {qid!r}: total is needed to model arrivals at rate {rate:g}"
                raise AdabatchError(msg)
            total = floor_count((end - start) * rate) + 1
        return ConstantArrival(float(start), rate, total)
    if isinstance(rate, str):
        profile = parse_profile(rate)
        if total is None:
            if end is None:
                msg = f"query {qid!r}: total is needed to model arrivals by profile {rate!r}"
                raise AdabatchError(msg)
            total = floor_count(profile.cumulative(end - start)) + 1
        return ProfileArrival(float(start), profile, total)
    if rate is None:
        if total is None or end is None:
            msg = f"query {qid!r}: give rate (tuples/s or a profile), total, or both"
            raise AdabatchError(msg)
        even = 1.0 if total <= 1 else (total - 1) / (end - start)
        return ConstantArrival(float(start), even, total)
    msg = f"query {qid!r}: rate = {rate!r}: allowed a number, a profile string or arrivals"
    raise AdabatchError(msg)


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
        shown = repr(value)
        if len(shown) > 80:
            shown = shown[:77] + "..."
        if name is None:
            return AdabatchError(f"{self.prefix()}: {allowed}")
        return AdabatchError(f"{self.prefix(name)} = {shown}: allowed {allowed}")

    def wrap(self, exc: AdabatchError, name: str | None = None) -> AdabatchError:
        return AdabatchError(f"{self.prefix(name)}: {exc}")


def read_document(path: str | Path) -> Any:
    """Parse a ``.yaml``/``.yml``/``.toml``/``.json`` file; errors name the file."""
    p = Path(path)
    if not p.is_file():
        msg = f"spec file {str(p)!r} does not exist"
        raise AdabatchError(msg)
    suffix = p.suffix.lower()
    text = p.read_text(encoding="utf-8")
    try:
        if suffix in (".yaml", ".yml"):
            return yaml.safe_load(text)
        if suffix == ".toml":
            return tomllib.loads(text)
        if suffix == ".json":
            return json.loads(text)
    except (yaml.YAMLError, tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        msg = f"{p}: not valid {suffix[1:].upper()}: {first}"
        raise AdabatchError(msg) from None
    msg = f"spec file {str(p)!r} has extension {suffix!r}: allowed .yaml, .yml, .toml, .json"
    raise AdabatchError(msg)


def load_specs(path: str | Path) -> list[QuerySpec]:
    """The queries of a spec file (YAML or TOML by extension)."""
    return list(load_scenario(path).queries)


def load_scenario(path: str | Path, **overrides: Any) -> Scenario:
    """Queries and scheduler settings of a spec file; ``overrides`` (non-``None``) replace
    the file's ``scheduler`` values (the CLI's ``--strategy``, ``--rsf``, ...)."""
    p = Path(path)
    doc = read_document(p)
    top = _Where(p)
    if not isinstance(doc, Mapping):
        raise top.fail(None, doc, "the file must hold a mapping with a 'queries' list")
    unknown = sorted(set(doc) - set(TOP_FIELDS))
    if unknown:
        msg = f"{p}: unknown top-level keys {unknown}: allowed {list(TOP_FIELDS)}"
        raise AdabatchError(msg)
    raw_queries = doc.get("queries")
    if not isinstance(raw_queries, list) or not raw_queries:
        raise top.fail("queries", raw_queries, "a non-empty list of query tables")
    defaults = doc.get("defaults", {}) or {}
    if not isinstance(defaults, Mapping):
        raise top.fail("defaults", defaults, "a mapping of query fields")
    bad_defaults = sorted(set(defaults) - set(QUERY_FIELDS) | ({"id"} & set(defaults)))
    if bad_defaults:
        msg = f"{p}: defaults has keys {bad_defaults}: allowed {list(QUERY_FIELDS[1:])}"
        raise AdabatchError(msg)
    names = known_query_names()
    queries = []
    for i, raw in enumerate(raw_queries):
        if not isinstance(raw, Mapping):
            raise top.fail(f"queries[{i}]", raw, "a mapping of query fields")
        merged = {**defaults, **raw}
        queries.append(_parse_query(merged, i, p, names))
    scheduler = doc.get("scheduler", {}) or {}
    if not isinstance(scheduler, Mapping):
        raise top.fail("scheduler", scheduler, "a mapping with " + ", ".join(SCHEDULER_FIELDS))
    unknown = sorted(set(scheduler) - set(SCHEDULER_FIELDS))
    if unknown:
        msg = f"{p}: scheduler has unknown keys {unknown}: allowed {list(SCHEDULER_FIELDS)}"
        raise AdabatchError(msg)
    settings = dict(scheduler)
    settings.update({k: v for k, v in overrides.items() if v is not None})
    kwargs: dict[str, Any] = {}
    if "strategy" in settings:
        kwargs["strategy"] = str(settings["strategy"]).lower()
    if "time_trigger" in settings:
        kwargs["time_trigger"] = str(settings["time_trigger"]).lower()
    for name in ("rsf", "c_max", "poll_s"):
        if name in settings:
            kwargs[name] = _number(settings[name], name, _Where(p), allow_inf=name == "c_max")
    if "min_batch" in settings:
        if not isinstance(settings["min_batch"], bool):
            raise _Where(p).fail("min_batch", settings["min_batch"], "true or false")
        kwargs["min_batch"] = settings["min_batch"]
    try:
        return Scenario(tuple(queries), **kwargs)
    except AdabatchError as exc:
        raise _Where(p).wrap(exc, "scheduler") from None


def _number(value: Any, name: str, where: _Where, *, allow_inf: bool = False) -> float:
    if isinstance(value, str) and allow_inf and value.strip().lower() in ("inf", "infinity"):
        return math.inf
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise where.fail(name, value, "a number of seconds" if name != "rsf" else "a number")
    number = float(value)
    if math.isnan(number) or (math.isinf(number) and not allow_inf):
        raise where.fail(name, value, "a finite number")
    return number


def _parse_query(raw: Mapping[str, Any], index: int, path: Path, names: Any) -> QuerySpec:
    qid = raw.get("id")
    if isinstance(qid, int) and not isinstance(qid, bool):
        qid = str(qid)
    if not isinstance(qid, str) or not qid.strip():
        raise _Where(path).fail(f"queries[{index}].id", qid, "a non-empty string")
    where = _Where(path, qid)
    unknown = sorted(set(raw) - set(QUERY_FIELDS))
    if unknown:
        msg = f"{where.prefix()}: unknown fields {unknown}: allowed {list(QUERY_FIELDS)}"
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
    ws = _number(raw["window_start"], "window_start", where)
    we = _number(raw["window_end"], "window_end", where)
    deadline = _number(raw["deadline"], "deadline", where)
    if we <= ws:
        raise where.fail("window_end", raw["window_end"], f"a time after window_start = {ws:g}")
    total = raw.get("total")
    if total is not None:
        if isinstance(total, float) and total.is_integer():
            total = int(total)
        if isinstance(total, bool) or not isinstance(total, int) or total < 1:
            raise where.fail("total", total, "an integer >= 1 (tuples in the window)")
    rate = _parse_rate(raw.get("rate"), "rate", where, path, ws)
    actual_rate = _parse_rate(raw.get("actual_rate"), "actual_rate", where, path, ws)
    if "cost" not in raw:
        raise where.fail("cost", None, "a cost model object or a path to a profile JSON file")
    cost, profile_agg = _parse_cost(raw["cost"], where, path)
    agg = profile_agg if profile_agg is not None else NO_AGG
    if raw.get("agg_cost") is not None:
        agg = _parse_agg(raw["agg_cost"], where, path)
    groups = raw.get("groups")
    if groups is not None and (isinstance(groups, bool) or not isinstance(groups, int)):
        raise where.fail("groups", groups, "an integer >= 1")
    if groups is not None and groups < 1:
        raise where.fail("groups", groups, "an integer >= 1")
    added_at = raw.get("added_at")
    removed_at = raw.get("removed_at")
    added = None if added_at is None else _number(added_at, "added_at", where)
    removed = None if removed_at is None else _number(removed_at, "removed_at", where)
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
    if isinstance(value, int | float):
        if not (math.isfinite(value) and value > 0):
            raise where.fail(name, value, allowed)
        return float(value)
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
    if not path.is_file():
        raise where.fail(name, str(path), "an existing CSV file with columns time_s,count")
    rows: list[list[float]] = []
    with path.open(newline="", encoding="utf-8") as fh:
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
    if not path.is_file():
        raise where.fail(name, value, "an inline model or the path of an existing JSON file")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise where.fail(name, value, f"a JSON file ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(data, Mapping):
        raise where.fail(name, value, "a JSON object")
    return data


def _parse_cost(value: Any, where: _Where, base: Path) -> tuple[CostModel, AggCostModel | None]:
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


def _parse_agg(value: Any, where: _Where, base: Path) -> AggCostModel:
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


def write_scenario(scenario: Scenario, path: str | Path) -> Path:
    """Write ``scenario`` as a YAML (or ``.json``) spec file that loads back unchanged."""
    p = Path(path)
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
    p.parent.mkdir(parents=True, exist_ok=True)
    if p.suffix.lower() == ".json":
        p.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    elif p.suffix.lower() in (".yaml", ".yml"):
        p.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    else:
        msg = f"scenario file {str(p)!r}: allowed extension .yaml, .yml or .json"
        raise AdabatchError(msg)
    return p
