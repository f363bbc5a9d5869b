"""Hypothesis strategies for hostile ``adabatch`` invocations, one builder per command.

Each builder draws a *mode* first: ``legal`` (every value legal and small, so the run
finishes fast and writes its outputs), ``one`` (one option or field hostile, the rest
legal: every validator is reached on its own) or ``many`` (each value hostile or legal at
random). Options are passed as ``--name=value`` so values starting with ``-`` reach the
program instead of argparse's option parsing; no unknown flags and no missing required
options are generated (those are argparse's business).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import yaml
from harness import Case
from hypothesis import strategies as st

# ------------------------------------------------------------------ values


ARG_ALPHABET = st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",))

# Numbers a user can type that are famous for breaking things.
NUMBER_WORDS = [
    "0", "-0", "-1", "1e-300", "-1e-300", "4.9e-324", "1e308", "-1e308", "1e309",
    "1.7976931348623157e308",
    "nan", "NaN", "-nan", "inf", "-inf", "Infinity", "", " ", " 1 ", "abc", "1,5", "1e", "--1",
    "0x10", "1_000", "\u0663", "\uff11", "9" * 400, "1" + "0" * 5000, "1e-9", "2**64",
    "18446744073709551617", "-9223372036854775809", "\udcff",
]  # fmt: skip

LONG = st.sampled_from(["x" * 300, "é" * 5000, "a/" * 2000, "../" * 100 + "x", "\n".join("ab")])


def hostile_text() -> st.SearchStrategy[str]:
    """Any string an argv can hold (no NUL), including non-UTF-8 bytes as surrogates."""
    return st.one_of(
        st.sampled_from(NUMBER_WORDS),
        st.text(ARG_ALPHABET, max_size=24),
        LONG,
        st.text(st.sampled_from(":@,-.e0123456789 smh"), max_size=30),
    )


def hostile_number() -> st.SearchStrategy[str]:
    return st.one_of(
        st.sampled_from(NUMBER_WORDS),
        st.floats().map(repr),
        st.integers(-(10**30), 10**30).map(str),
        hostile_text(),
    )


def fmt(value: float) -> str:
    return f"{value:.6g}"


def between(low: float, high: float) -> st.SearchStrategy[str]:
    return st.floats(low, high).map(fmt)


def ints(low: int, high: int) -> st.SearchStrategy[str]:
    return st.integers(low, high).map(str)


DURATION_UNITS = st.sampled_from(["", "s", "ms", "m", "h"])


def hostile_duration() -> st.SearchStrategy[str]:
    return st.one_of(
        st.tuples(hostile_number(), DURATION_UNITS).map("".join),
        st.sampled_from(["1e9", "1e9s", "1e308h", "99999h", "10h", "1e-300ms", "-5s", "inf s"]),
    )


# ------------------------------------------------------------------ paths

# Output paths relative to R/work (cwd); ``{root}`` is the case root. Never above R.
OUT_DIRS = [
    "out", "out/a/b", "prior", "keep", "link-out", "results", "existing.json", "notes.txt",
    "pipe.yaml", "dir.yaml", ".", "..", "out/../out2", "{root}/work/abs-out", "{root}/tmp",
    "docs/results", "staging", "x" * 300, "ünï/çødé", "out\nline", "\udcff-out", "out/",
    "../victim.txt", "{root}/home",
]  # fmt: skip


def out_dir() -> st.SearchStrategy[str]:
    return st.one_of(st.just("out"), st.sampled_from(OUT_DIRS), st.just(""))


REFUSED_OUT = {"", "existing.json", "notes.txt", "pipe.yaml", "../victim.txt", "x" * 300}


# ------------------------------------------------------------------ profiles


def profile(trace_files: dict[str, Any]) -> st.SearchStrategy[str]:
    """A ``--profile`` string of any grammar kind, legal or hostile; a ``trace:`` profile
    adds the file it names to ``trace_files`` (relative to R)."""
    n = hostile_number()
    d = st.one_of(hostile_duration(), n)
    legal = st.one_of(
        between(10, 5000).map(lambda r: f"constant:{r}"),
        st.tuples(between(10, 5000), between(10, 5000), between(1, 60)).map(
            lambda t: f"step:{t[0]}:{t[1]}:{t[2]}s"
        ),
        st.tuples(between(10, 3000), between(3000, 6000), between(5, 120)).map(
            lambda t: f"sine:{t[0]}:{t[1]}:{t[2]}s"
        ),
        st.tuples(between(10, 3000), between(10, 3000), between(1, 30)).map(
            lambda t: f"markov:{t[0]},{t[1]}:{t[2]}s"
        ),
        st.tuples(between(10, 1000), between(1000, 5000), between(10, 30), between(1, 9)).map(
            lambda t: f"bursts:{t[0]}:{t[1]}:{t[2]}s:{t[3]}s"
        ),
        st.just("steps:100@0,2000@10s,500@30s"),
    )
    hostile = st.one_of(
        n.map(lambda r: f"constant:{r}"),
        st.tuples(n, n, d).map(lambda t: "step:" + ":".join(t)),
        st.tuples(n, n, d).map(lambda t: "sine:" + ":".join(t)),
        st.tuples(st.lists(n, max_size=4), d).map(lambda t: f"markov:{','.join(t[0])}:{t[1]}"),
        st.tuples(n, n, d, d).map(lambda t: "bursts:" + ":".join(t)),
        st.lists(st.tuples(n, d), max_size=5).map(
            lambda xs: "steps:" + ",".join(f"{r}@{t}" for r, t in xs)
        ),
        st.sampled_from(
            [
                "markov:1,2:1e-300",
                "bursts:1:2:1e-300:1e-301",
                "constant:1e308",
                "constant:100000000",
                "sine:1:2:1e308",
                "sine:1:2:1e-300",
                "markov:" + ",".join(["5"] * 20000) + ":1s",
                "steps:" + ",".join(f"{i + 1}@{i}ms" for i in range(20000)),
                "steps:1@0,2@0",
                "constant:",
                "constant",
                ":",
                "",
                "nosuch:1",
                "CONSTANT:5",
                "constant:5:extra",
                "trace:",
                "trace:/",
                "trace:{root}/etc/passwd",
                "trace:../victim.txt",
                "trace:dir.yaml",
                "trace:pipe.yaml",
                "trace:missing.csv",
                "trace:\udcff.csv",
            ]
        ),
        trace(trace_files),
    )
    return st.one_of(legal, legal, hostile)


TRACE_BODIES = [
    b"time_s,rate_rps\n0,100\n10,200\n",
    b"time_s,rate_rps\n0,100\n10,200\n5,300\n",
    b"time_s,rate_rps\n0,nan\n",
    b"time_s,rate_rps\n0,1e308\n1,1e308\n",
    b"time_s,rate_rps\n1e308,1\n",
    b"time_s,rate_rps\n",
    b"",
    b"\xff\xfe\x00\x01garbage",
    b"time_s,rate_rps\n0,-5\n",
    b"wrong,header\n0,1\n",
    b"time_s,rate_rps\n" + b"".join(b"%d,%d\n" % (i, i % 97 + 1) for i in range(200000)),
    b"time_s,rate_rps\n0," + b"9" * 400 + b"\n",
    b"time_s,rate_rps\n0,1,2,3\n",
]


@st.composite
def trace(draw: Callable, trace_files: dict[str, Any]) -> str:
    body = draw(st.sampled_from(TRACE_BODIES))
    name = draw(st.sampled_from(["trace.csv", "t r.csv", "traces/deep.csv"]))
    trace_files[f"work/{name}"] = body
    return f"trace:{name}" + draw(st.sampled_from(["", ":step", ":linear", ":cubic", ":"]))


# ------------------------------------------------------------------ option assembly


@st.composite
def options(draw: Callable, fields: list[tuple[str, Any, Any]]) -> tuple[list[str], set[str]]:
    """``--name=value`` for each ``(name, legal, hostile)``; ``legal``/``hostile`` are
    strategies, or ``None`` to leave the option out. Returns the args and the hostile names."""
    mode = draw(st.sampled_from(["one", "many", "legal"]))
    chosen = draw(st.integers(0, len(fields) - 1)) if mode == "one" else -1
    if mode == "legal" and fields[-1][0] == "out" and draw(st.booleans()):
        chosen = len(fields) - 1  # a legal run into a hostile output directory
    args: list[str] = []
    bad: set[str] = set()
    for i, (name, legal, hostile) in enumerate(fields):
        use_hostile = i == chosen or (mode == "many" and draw(st.booleans()))
        strategy = hostile if use_hostile and hostile is not None else legal
        if use_hostile and hostile is not None:
            bad.add(name)
        if strategy is None:
            continue
        value = draw(strategy)
        if value is None:
            continue
        if value is True:
            args.append(f"--{name}")
        else:
            args.append(f"--{name}={value}")
    return args, bad


def maybe(strategy: st.SearchStrategy) -> st.SearchStrategy:
    return st.one_of(st.none(), strategy)


# ------------------------------------------------------------------ simulate


def controller_params() -> dict[str, list[dict[str, Any]]]:
    """``adabatch controllers --json``, read from the same code."""
    from adabatch.commands.controllers import catalogue

    return {entry["name"]: entry["params"] for entry in catalogue()}


CONTROLLERS = controller_params()
WORKLOADS = ["filter", "reduce", "join", "window"]


@st.composite
def param_values(draw: Callable, controller: str, hostile: bool) -> list[str]:
    params = CONTROLLERS.get(controller, [])
    out = []
    names = [p["name"] for p in params] or ["interval"]
    for name in draw(st.lists(st.sampled_from(names), max_size=3, unique=True)):
        if hostile:
            value = draw(
                st.one_of(
                    hostile_number(),
                    st.sampled_from(["1e18", "1e-300", "true", "unset", "yes", "tcp", ""]),
                )
            )
            key = draw(st.one_of(st.just(name), st.sampled_from(["", "nosuch", "a=b", " "])))
            out.append(f"--param={key}={value}" if draw(st.booleans()) else f"--param={key}")
        else:
            default = next((p["default"] for p in params if p["name"] == name), 1)
            out.append(f"--param={name}={_legal_param(default)}")
    return out


def _legal_param(default: Any) -> str:
    if isinstance(default, bool):
        return str(default).lower()
    if default is None:
        return "unset"
    return str(default)


@st.composite
def simulate_case(draw: Callable) -> Case:
    files: dict[str, Any] = {}
    known = st.sampled_from(sorted(CONTROLLERS))
    controller = draw(st.one_of(known, known, known, st.sampled_from(["", "nosuch", "PID"])))
    fields = [
        ("workload", st.sampled_from(WORKLOADS), st.one_of(hostile_text(), st.just("Reduce"))),
        ("controller", st.just(controller), None),
        ("profile", profile(files), profile(files)),
        ("duration", st.sampled_from(["1", "30s", "90", "2m", "500ms"]), hostile_duration()),
        ("seed", maybe(ints(0, 10**6)), hostile_number()),
        ("noise", maybe(between(0, 0.5)), hostile_number()),
        ("warmup", maybe(st.sampled_from(["0", "5s", "10"])), hostile_duration()),
        ("resources", maybe(st.just("0.5@10s-20s")), maybe(hostile_text())),
        ("model", maybe(st.just("sigma=0.05")), st.sampled_from(["sigma=nan", "cores=0", "x=1"])),
        ("blocks-cores", maybe(st.just("2")), hostile_number()),
        ("poisson", maybe(st.just(True)), None),
        ("sweep-static", maybe(st.just(True)), st.just(True)),
        (
            "intervals",
            maybe(st.sampled_from(["0.5:2:0.5", "1,2", "0.25:1:0.25"])),
            st.one_of(
                st.sampled_from(["1e-9:1:1e-9", "1:1e308:1", "0:1:0", "1:0:1", "nan:1:1"]),
                hostile_text(),
            ),
        ),
        ("sweep-blocks", maybe(st.sampled_from(["1", "2", "1,2"])), hostile_text()),
        ("out", st.just("out"), out_dir()),
    ]
    args, _ = draw(options(fields))
    args += draw(param_values(controller, hostile=draw(st.integers(0, 3)) == 0))
    out = next((a.split("=", 1)[1] for a in args if a.startswith("--out=")), "runs/simulate")
    refuse = None
    if out in REFUSED_OUT:
        refuse = f"--out {out!r} is empty or an existing file"
    elif controller not in CONTROLLERS:
        refuse = f"controller {controller!r} does not exist"
    return Case("simulate", ["simulate", *args], files, out, "dir", refuse)


# ------------------------------------------------------------------ pid-sweep


@st.composite
def pid_sweep_case(draw: Callable) -> Case:
    grid_hostile = st.one_of(
        st.sampled_from(["0:1e9:1e-9", "0:1:1e-300", "0:1e308:1", "nan:1:0.1", "1:0:1", ",,,"]),
        st.sampled_from([",".join(["1"] * 100000), "0:2:0.2:9", "inf", "-1"]),
        hostile_text(),
    )
    fields = [
        ("kp", st.sampled_from(["0,1", "0.5", "0:1:0.5"]), grid_hostile),
        ("ki", st.sampled_from(["0", "0.2"]), grid_hostile),
        ("kd", st.sampled_from(["0", "0.1,1"]), grid_hostile),
        ("initial-batch", st.sampled_from(["2500", "2500,7500"]), grid_hostile),
        ("min-rate", st.sampled_from(["100", "100,4500"]), grid_hostile),
        ("target", maybe(between(100, 10000)), hostile_number()),
        ("interval", maybe(between(0.1, 5)), hostile_number()),
        ("iterations", ints(1, 60), st.one_of(hostile_number(), st.just("1000000000"))),
        ("out", st.just("out"), out_dir()),
    ]
    args, _ = draw(options(fields))
    out = next(a.split("=", 1)[1] for a in args if a.startswith("--out="))
    refuse = f"--out {out!r} is empty or an existing file" if out in REFUSED_OUT else None
    return Case("pid-sweep", ["pid-sweep", *args], {}, out, "dir", refuse)


# ------------------------------------------------------------------ deadline specs

QUERY_NAMES = ["cq1", "cq2", "cq3", "cq4", "q1", "q3", "q4", "q6", "q10", "q12", "q14", "q19"]

HOSTILE_IDS = [
    "../x", "/abs", "../../../../etc/cron.d", "{root}/home/thesis", "a/b", ".", "..", ".hidden",
    "-x", "", " ", "a" * 65, "ø", "a b", "q\n1", "CON", "\udcff", "q*", "~",
]  # fmt: skip

BIG = [1e308, -1e308, 1e-300, 0, -1, float("nan"), float("inf"), -float("inf"), 10**400, 2**63]


def hostile_scalar() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.sampled_from(BIG),
        st.floats(),
        st.integers(),
        st.sampled_from(["1e6", "1e308", "", "soon", "nan", "x" * 10000, "\x00", True, None]),
        st.text(max_size=10),
    )


def hostile_value() -> st.SearchStrategy[Any]:
    return st.recursive(
        hostile_scalar(),
        lambda inner: st.one_of(
            st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=5), inner, max_size=3)
        ),
        max_leaves=8,
    )


def legal_cost() -> st.SearchStrategy[dict[str, Any]]:
    return st.one_of(
        st.builds(
            lambda p, o: {"kind": "linear", "per_tuple": p, "overhead": o},
            st.floats(1e-4, 0.01),
            st.floats(0, 2),
        ),
        st.just({"kind": "piecewise", "breakpoints": [[0, 0.5], [1000, 2.0], [10000, 9.0]]}),
        st.just({"kind": "expr", "expr": "0.4 + 0.003 * n ** 0.9"}),
    )


def hostile_cost() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.builds(
            lambda p, o: {"kind": "linear", "per_tuple": p, "overhead": o},
            hostile_scalar(),
            hostile_scalar(),
        ),
        st.builds(lambda b: {"kind": "piecewise", "breakpoints": b}, hostile_value()),
        st.sampled_from(
            [
                {"kind": "piecewise", "breakpoints": [[i, i * 0.01] for i in range(100000)]},
                {"kind": "piecewise", "breakpoints": [[0, 1], [0, 2]]},
                {"kind": "expr", "expr": "__import__('os').system('touch pwned')"},
                {"kind": "expr", "expr": "n.__class__"},
                {"kind": "expr", "expr": "9**9**9**9"},
                {"kind": "expr", "expr": "n ** 1e308"},
                {"kind": "expr", "expr": "(" * 5000 + "n" + ")" * 5000},
                {"kind": "expr", "expr": "-n"},
                {"kind": "expr", "expr": "log(0)"},
                {"kind": "expr", "expr": "1/0"},
                {"kind": "expr", "expr": ""},
                {"kind": "nosuch"},
                "cost.json",
                "../victim.txt",
                "{root}/etc/passwd",
                "dir.yaml",
                "pipe.json",
                "missing.json",
            ]
        ),
        hostile_value(),
    )


@st.composite
def legal_query(draw: Callable, index: int) -> dict[str, Any]:
    start = draw(st.floats(0, 100))
    width = draw(st.floats(1, 600))
    rate = draw(st.floats(0.1, 100))
    q: dict[str, Any] = {
        "id": f"q{index}",
        "window_start": start,
        "window_end": start + width,
        "deadline": start + width + draw(st.one_of(st.floats(5, 100), st.floats(-1, 5))),
        "rate": rate,
        "cost": draw(legal_cost()),
    }
    if draw(st.booleans()):
        q["query"] = draw(st.sampled_from(QUERY_NAMES))
    if draw(st.booleans()):
        q["agg_cost"] = {"kind": "linear", "per_batch": draw(st.floats(0, 0.5))}
    return q


QUERY_HOSTILE: dict[str, st.SearchStrategy[Any]] = {
    "id": st.one_of(st.sampled_from(HOSTILE_IDS), hostile_value()),
    "query": st.one_of(st.sampled_from(["q99", "", "../q6"]), hostile_value()),
    "inputs": st.one_of(
        st.sampled_from([[], ["../x"], "lineitem", [1], ["a"] * 1000]), hostile_value()
    ),
    "window_start": hostile_scalar(),
    "window_end": hostile_scalar(),
    "deadline": hostile_scalar(),
    "rate": st.one_of(
        hostile_scalar(),
        st.sampled_from(
            [
                "markov:1,2:1e-300",
                "bursts:1:2:1e-300:1e-301",
                "constant:1e308",
                "sine:1:2:1e308",
                "trace:../victim.txt",
                "trace:{root}/etc/passwd",
                {"arrivals": [[0, 5], [1, 5]]},
                {"arrivals": [[0, 1e308], [1, -5]]},
                {"arrivals": "landed.csv"},
                {"arrivals": "{root}/etc/passwd"},
                {"arrivals": []},
                {"arrivals": [[i, 1] for i in range(100000)]},
            ]
        ),
        hostile_value(),
    ),
    "total": st.one_of(st.sampled_from([10**12, 10**18, 10**400]), hostile_scalar()),
    "cost": hostile_cost(),
    "agg_cost": hostile_cost(),
    "groups": hostile_scalar(),
    "added_at": hostile_scalar(),
    "removed_at": hostile_scalar(),
    "actual_rate": st.one_of(st.sampled_from(["constant:1e-300", "step:1:0:1"]), hostile_value()),
    "total_known": hostile_value(),
    "nosuch_field": st.just(1),
}  # fmt: skip

SCHEDULER_HOSTILE: dict[str, st.SearchStrategy[Any]] = {
    "strategy": st.one_of(st.just("fifo"), hostile_value()),
    "rsf": hostile_scalar(),
    "c_max": st.one_of(st.sampled_from(["inf", 1e-300]), hostile_scalar()),
    "min_batch": hostile_value(),
    "poll_s": st.one_of(st.sampled_from([1e-300, 1e-9]), hostile_scalar()),
    "time_trigger": hostile_value(),
    "nosuch": st.just(1),
}


@st.composite
def spec_document(draw: Callable) -> Any:
    """A spec document: legal queries, then in ``one``/``many`` mode hostile fields."""
    mode = draw(st.sampled_from(["legal", "one", "many", "shape"]))
    count = draw(st.integers(1, 4))
    queries = [draw(legal_query(i)) for i in range(count)]
    doc: dict[str, Any] = {"queries": queries}
    if draw(st.booleans()):
        doc["scheduler"] = {
            "strategy": draw(st.sampled_from(["llf", "edf", "sjf", "rr"])),
            "rsf": draw(st.floats(0, 1)),
            "c_max": draw(st.floats(1, 60)),
        }
    if mode == "legal":
        return doc
    if mode == "shape":
        return draw(
            st.sampled_from(
                [
                    [],
                    None,
                    "queries",
                    {"queries": []},
                    {"queries": {"id": "q"}},
                    {"queries": [None]},
                    {"queries": queries, "defaults": [1]},
                    {"queries": queries, "defaults": {"id": "x"}},
                    {"queries": queries, "scheduler": "llf"},
                    {"queries": queries, "extra": 1},
                    {"queries": queries * 50},
                    {"queries": [dict(queries[0], id=f"q{i}") for i in range(300)]},
                    {"queries": [queries[0], dict(queries[0])]},
                ]
            )
        )
    rounds = 1 if mode == "one" else draw(st.integers(1, 4))
    for _ in range(rounds):
        if draw(st.integers(0, 5)) == 0:
            sched = doc.setdefault("scheduler", {})
            key = draw(st.sampled_from(sorted(SCHEDULER_HOSTILE)))
            sched[key] = draw(SCHEDULER_HOSTILE[key])
        else:
            target = draw(st.sampled_from(queries))
            key = draw(st.sampled_from(sorted(QUERY_HOSTILE)))
            target[key] = draw(QUERY_HOSTILE[key])
    if draw(st.integers(0, 4)) == 0:
        doc["defaults"] = {
            draw(st.sampled_from(["rate", "cost", "deadline"])): draw(hostile_value())
        }
    return doc


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value if v is not None) + "]"
    if isinstance(value, dict):
        items = [
            f"{json.dumps(str(k))} = {_toml_value(v)}" for k, v in value.items() if v is not None
        ]
        return "{" + ", ".join(items) + "}"
    return '""'


def serialize(doc: Any, suffix: str) -> bytes:
    """``doc`` as YAML, JSON (NaN allowed, as Python writes it) or TOML text."""
    if suffix == ".json":
        return json.dumps(doc).encode("utf-8", "surrogatepass")
    if suffix == ".toml":
        if not isinstance(doc, dict):
            return b"= broken"
        lines = [
            f"{json.dumps(str(k))} = {_toml_value(v)}" for k, v in doc.items() if v is not None
        ]
        return "\n".join(lines).encode("utf-8", "surrogatepass")
    return yaml.safe_dump(doc, allow_unicode=True).encode("utf-8", "surrogatepass")


def alias_bomb(levels: int) -> bytes:
    lines = ['a0: ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, levels):
        refs = ",".join([f"*a{i - 1}"] * 9)
        lines.append(f"a{i}: &a{i} [{refs}]")
    lines[0] = lines[0].replace("a0:", "a0: &a0")
    lines.append(f"queries: [{{id: q, deadline: *a{levels - 1}}}]")
    return "\n".join(lines).encode()


RAW_SPECS: list[tuple[str, Any]] = [
    ("empty.yaml", b""),
    ("empty.json", b""),
    ("bad-utf8.yaml", b"queries:\n  - id: \xff\xfe\n"),
    ("bad-utf8.toml", b"x = '\xc3\x28'\n"),
    ("deep.json", b"[" * 100000 + b"]" * 100000),
    ("deep.yaml", b"[" * 20000 + b"]" * 20000),
    ("deep.toml", b"a = " + b"[" * 20000 + b"]" * 20000),
    ("bomb.yaml", alias_bomb(8)),
    ("python.yaml", b"queries: !!python/object/apply:os.system ['touch pwned']\n"),
    ("syntax.yaml", b"queries: [\n"),
    ("nul.yaml", b"queries:\x00\n"),
    ("big.yaml", b"# padding\n" * (400 << 10)),
    ("spec.txt", b"queries: []\n"),
    ("noext", b"queries: []\n"),
    ("UPPER.YAML", b"queries: [{id: q, window_start: 0, window_end: 10, deadline: 20, rate: 1, "
     b"cost: {kind: linear, per_tuple: 0.01}}]\n"),
    ("nan.json", b'{"queries": [{"id": "q", "window_start": NaN, "window_end": Infinity,'
     b' "deadline": -Infinity, "rate": 1, "cost": {"kind": "linear", "per_tuple": 0.1}}]}'),
    ("bigint.json", b'{"queries": [{"id": "q", "window_start": 0, "window_end": 1' + b"0" * 5000
     + b', "deadline": 5, "rate": 1, "cost": {"kind": "linear", "per_tuple": 0.1}}]}'),
    ("exp.yaml", b"queries: [{id: q, window_start: 0, window_end: 1e6, deadline: 1e308, rate: 1,"
     b" cost: {kind: linear, per_tuple: 0.1}}]\n"),
]  # fmt: skip

NAMED_SPECS = ["dir.yaml", "pipe.yaml", "link.yaml", "passwd.yaml", "missing.yaml",
               "link-dir.yaml", "{root}/etc/passwd", ""]  # fmt: skip

SIDE_FILES = {
    "work/specs/cost.json": b'{"kind": "linear", "per_tuple": 0.01}',
    "work/specs/landed.csv": b"time_s,count\n0,5\n1,5\n",
}


@st.composite
def spec_file(draw: Callable) -> tuple[str, dict[str, Any]]:
    """A spec path (relative to R/work) and the files to create for it."""
    kind = draw(st.sampled_from(["doc", "doc", "doc", "raw", "named"]))
    files = dict(SIDE_FILES)
    if kind == "raw":
        name, body = draw(st.sampled_from(RAW_SPECS))
        files[f"work/specs/{name}"] = body
        return f"specs/{name}", files
    if kind == "named":
        return draw(st.sampled_from(NAMED_SPECS)), files
    suffix = draw(st.sampled_from([".yaml", ".yml", ".json", ".toml"]))
    body = serialize(draw(spec_document()), suffix)
    files[f"work/specs/spec{suffix}"] = body
    return f"specs/spec{suffix}", files


@st.composite
def deadline_plan_case(draw: Callable) -> Case:
    path, files = draw(spec_file())
    fields = [
        ("json", maybe(st.just(True)), None),
        ("method", maybe(st.sampled_from(["function1", "milp"])), st.just("simplex")),
        ("ahead", maybe(st.just(True)), None),
    ]
    args, _ = draw(options(fields))
    return Case("deadline plan", ["deadline", "plan", *args, "--", path], files)


@st.composite
def deadline_simulate_case(draw: Callable) -> Case:
    path, files = draw(spec_file())
    fields = [
        ("strategy", maybe(st.sampled_from(["llf", "edf", "sjf", "rr", "all"])), st.just("fifo")),
        ("rsf", maybe(between(0, 1)), hostile_number()),
        ("c-max", maybe(between(1, 60)), hostile_number()),
        ("no-min-batch", maybe(st.just(True)), None),
        ("time-trigger", maybe(st.sampled_from(["budget", "always"])), st.just("never")),
        ("noise", maybe(between(0, 0.3)), hostile_number()),
        ("seed", maybe(ints(0, 1000)), hostile_number()),
        ("json", maybe(st.just(True)), None),
    ]
    args, _ = draw(options(fields))
    return Case("deadline simulate", ["deadline", "simulate", *args, "--", path], files)


GEN_OUTS = [
    "gen.yaml", "gen.json", "gen/deep/s.yml", "existing.json", "link.yaml", "passwd.yaml",
    "pipe.json", "dir.yaml", "link-dir.yaml", "gen.txt", "gen", ".yaml", "", "keep",
    "{root}/etc/passwd.yaml", "{root}/etc/passwd", "../victim.txt", "x" * 300 + ".yaml",
    "\udcff.yaml", "out/../g.json",
]  # fmt: skip

GEN_REFUSED = {"gen.txt", "gen", "", "keep", "{root}/etc/passwd", "../victim.txt", "dir.yaml",
               "link-dir.yaml", "x" * 300 + ".yaml"}  # fmt: skip


@st.composite
def deadline_generate_case(draw: Callable) -> Case:
    out = draw(st.one_of(st.just("gen.yaml"), st.sampled_from(GEN_OUTS)))
    fields = [
        ("queries", maybe(ints(1, 20)), st.one_of(hostile_number(), st.just("100000000"))),
        ("delta", maybe(between(0.1, 2)), hostile_number()),
        ("seed", maybe(ints(0, 1000)), hostile_number()),
        ("same-window", maybe(st.just(True)), None),
        ("rsf", maybe(between(0, 1)), hostile_number()),
        ("c-max", maybe(between(1, 60)), hostile_number()),
        ("strategy", maybe(st.sampled_from(["llf", "edf", "sjf", "rr"])), st.just("fifo")),
    ]
    args, _ = draw(options(fields))
    refuse = (
        f"output {out!r} is not a writable .yaml/.json file path" if out in GEN_REFUSED else None
    )
    argv = ["deadline", "generate", *args, "--", out]
    return Case("deadline generate", argv, {}, out, "file", refuse)


BUILDERS: dict[str, Callable[[], st.SearchStrategy[Case]]] = {
    "simulate": simulate_case,
    "pid-sweep": pid_sweep_case,
    "deadline plan": deadline_plan_case,
    "deadline simulate": deadline_simulate_case,
    "deadline generate": deadline_generate_case,
}
