"""Spec files: reading a :class:`~adabatch.deadline.core.spec.DeadlineScenario` from YAML,
TOML or JSON (docs/deadline-spec.md), and writing one back.

Every error names the file, the query and the field, the value and what is allowed
(``FILE: query 'ID': field 'NAME' = VALUE: allowed ...``); files and side files (cost
models, arrival CSVs) are size-limited before they are read, and a document's nesting and
alias expansion are bounded before it is walked.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from adabatch.deadline.core.arrival import (
    TOTAL,
    ArrivalModel,
    ConstantArrival,
    ProfileArrival,
    TraceArrival,
    trace_from_rows,
)
from adabatch.deadline.core.cost import (
    NO_AGG,
    AggregationCost,
    QueryCost,
    agg_cost_from_json,
    cost_from_json,
)
from adabatch.deadline.core.numbers import check_number
from adabatch.deadline.core.spec import (
    C_MAX,
    GROUPS,
    MAX_RATE,
    POLL_S,
    QUERY_FIELDS,
    RATE,
    RSF,
    SCHEDULER_FIELDS,
    STRATEGIES,
    TIME_TRIGGERS,
    TIMES,
    TOP_FIELDS,
    DeadlineScenario,
    QuerySpec,
    known_query_names,
    query_spec,
)
from adabatch.errors import AdabatchError, check_name, shown
from adabatch.inputs import read_text_file
from adabatch.outputs import check_new_file, write_atomic
from adabatch.params import Param
from adabatch.profiles import parse_profile

MAX_SPEC_BYTES = 1 << 20
"""Largest spec or cost-model file read (1 MiB); checked before the file is read."""
MAX_CSV_BYTES = 64 << 20
"""Largest arrivals CSV read (64 MiB, some 3 million rows)."""
MAX_DEPTH = 32
"""Deepest nesting of lists and mappings in a spec (the format needs 5)."""
MAX_VALUES = 1_000_000
"""Most values a spec may hold once YAML aliases are expanded (a 1 MiB file holds fewer
without aliases)."""


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
    for param in (RSF, C_MAX, POLL_S):
        if param.name in settings:
            kwargs[param.name] = _number(param, settings[param.name], _Where(p))
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


def _number(param: Param, value: Any, where: _Where, name: str | None = None) -> Any:
    """A numeric field checked by ``param`` (a numeric string such as ``"1e6"`` too)."""
    return check_number(param, value, where.prefix(name or param.name), allow_inf=param is C_MAX)


def _is_number(value: Any) -> bool:
    """A number or a numeric string (YAML 1.1 reads ``1e6`` as a string), not a boolean."""
    if isinstance(value, bool):
        return False
    if isinstance(value, str):
        try:
            float(value.strip())
        except ValueError:
            return False
        return True
    return isinstance(value, int | float)


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
    ws = _number(TIMES["window_start"], raw["window_start"], where)
    we = _number(TIMES["window_end"], raw["window_end"], where)
    deadline = _number(TIMES["deadline"], raw["deadline"], where)
    if we <= ws:
        raise where.fail("window_end", raw["window_end"], f"a time after window_start = {ws:g}")
    total = raw.get("total")
    if total is not None:
        total = _number(TOTAL, total, where)
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
        groups = _number(GROUPS, groups, where)
    added, removed = (
        None if raw.get(name) is None else _number(TIMES[name], raw[name], where)
        for name in ("added_at", "removed_at")
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
    if _is_number(value):
        try:
            return float(check_number(RATE, value))
        except AdabatchError:
            raise where.fail(name, value, f"{allowed}; a rate from 0 to {MAX_RATE:g}") from None
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
