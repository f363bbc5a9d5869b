"""``adabatch run``: a controller steering a real Spark Structured Streaming query."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from adabatch.batching import QUEUE_MODES
from adabatch.commands import Command
from adabatch.commands.args import parse_choice, parse_int
from adabatch.control import registry
from adabatch.control.registry import parse_params
from adabatch.errors import AdabatchError, shown
from adabatch.outputs import check_dir_path
from adabatch.profiles import GRAMMAR, check_span, parse_duration, parse_profile
from adabatch.report.text import summary_rows, target_line
from adabatch.runs.checks import check_duration
from adabatch.runs.source_spec import SOURCE_FORMS, parse_source
from adabatch.runs.spark_job import (
    RunConfig,
    RunResult,
    SparkProgress,
    parse_trigger,
    run_spark,
)
from adabatch.sim.engine import check_batches
from adabatch.streaming.options import SPARK_DEFAULT, parse_spark_default
from adabatch.urls import redact_url
from adabatch.workloads import get_workload

# The modules the ``spark`` extra installs, imported only once every input is checked.
SPARK_MODULES = ("pyspark", "pyarrow")

NAME = "run"
HELP = "run a workload on real Spark with a controller sizing its micro-batches"


def add_shared_arguments(parser: argparse.ArgumentParser) -> None:
    """Options ``run`` and ``compare`` share (values are parsed by the library)."""
    parser.add_argument("--workload", required=True, help="filter, reduce, join or window")
    parser.add_argument(
        "--source", default="generator", help=f"where records come from: {SOURCE_FORMS}"
    )
    parser.add_argument(
        "--profile",
        help=f"rate profile of the generator: {GRAMMAR} (with a live source: the "
        "producer's, a label)",
    )
    parser.add_argument("--duration", required=True, help="stream time to run (90s, 10m)")
    parser.add_argument("--out", required=True, help="output directory (reused = restart)")
    parser.add_argument("--master", default="local[*]", help="Spark master URL")
    parser.add_argument("--db", help="results database URL (default: SQLite file in --out)")
    parser.add_argument("--seed", default="0", help="generator seed (integer >= 0)")
    parser.add_argument("--keys", default="1000", help="distinct keys of the generator")
    parser.add_argument(
        "--queue", default="fifo", help="batch queue: fifo (papers' model) or coalesce (Spark's)"
    )
    parser.add_argument(
        "--warmup", help="leave the first seconds out of means (default: min(20s, duration/2))"
    )
    parser.add_argument(
        "--source-option",
        action="append",
        metavar="K=V",
        help="option of the source, e.g. distribution=zipf (generator), format=csv (files)",
    )
    parser.add_argument("--per-key-commit", action="store_true", help="reduce: one commit per key")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--controller", required=True, help=f"see `adabatch controllers`, or {SPARK_DEFAULT}"
    )
    parser.add_argument("--param", action="append", metavar="K=V", help="controller parameter")
    parser.add_argument(
        "--trigger", default="default", help="default, or processingTime:1s (spark-default only)"
    )
    add_shared_arguments(parser)


def config_from_args(
    args: argparse.Namespace, controller: str, params: dict[str, Any], out: Path
) -> RunConfig:
    """A :class:`RunConfig` from the shared arguments."""
    source = parse_source(args.source)
    if args.profile is None and not source.live:
        msg = "--profile is required with --source generator: e.g. --profile constant:2000"
        raise AdabatchError(msg)
    return RunConfig(
        workload=args.workload,
        controller=controller,
        params=params,
        profile=args.profile or "",
        source=source.text,
        duration_s=parse_duration(args.duration),
        out_dir=out,
        master=args.master,
        db_url=args.db,
        trigger=getattr(args, "trigger", "default"),
        seed=parse_int(args.seed, "--seed", 0),
        keys=parse_int(args.keys, "--keys", 1),
        skip_s=None if args.warmup is None else parse_duration(args.warmup),
        queue=parse_choice(args.queue, "--queue", QUEUE_MODES),
        source_options=parse_params(args.source_option),
        per_key_commit=args.per_key_commit,
    )


def print_summary(result: RunResult) -> None:
    """The summary table, the latency target's line (with one), a word on an unstable run,
    and the files written."""
    s = result.summary
    for label, text in summary_rows(s):
        print(f"  {label:<30} {text}")
    line = target_line(s)
    if line is not None:
        print(f"  {line}")
    if not s.stable:
        print(
            f"  UNSTABLE: the batch queue grew ({s.queue_slope:.3f} s of queue delay per "
            f"s, {s.final_queue_len} batches waiting at the end): processing cannot keep "
            "up with this interval"
        )
    for name, path in result.paths.items():
        if name in ("metrics", "summary", "timeline") and path.exists():
            print(f"  {name:<30} {path}")


def check_controller(name: str, params: dict[str, Any], duration_s: float) -> None:
    """The controller name and its parameters, and the batches the duration implies at
    its smallest interval; no Spark needed."""
    if name == SPARK_DEFAULT:
        parse_spark_default(params)
        return
    if name not in registry.names():
        allowed = ", ".join([*registry.names(), SPARK_DEFAULT])
        msg = f"unknown controller {shown(name)}: allowed {allowed}"
        raise AdabatchError(msg)
    check_batches(duration_s, registry.create(name, params).smallest_interval())


def check_inputs(cfg: RunConfig) -> None:
    """Every input of a Spark run that can be checked without Spark: workload, source,
    controller, parameters, profile, duration, warm-up and trigger (a bad one is one line,
    before the optional ``spark`` extra is imported)."""
    get_workload(cfg.workload)
    parse_source(cfg.source)
    check_duration(cfg.duration_s, cfg.warmup_s)
    check_controller(cfg.controller, dict(cfg.params), cfg.duration_s)
    if cfg.profile.strip():
        check_span(parse_profile(cfg.profile, seed=cfg.seed), cfg.duration_s)
    parse_trigger(cfg.trigger)


def require_spark() -> None:
    """Import the ``spark`` extra's modules, or one line saying how to install them."""
    for module in SPARK_MODULES:
        try:
            __import__(module)
        except ImportError as exc:
            msg = (
                f"this command needs the spark extra ({exc.name or module} is not installed): "
                "pip install 'adabatch[spark]'"
            )
            raise AdabatchError(msg) from None


def run(args: argparse.Namespace) -> int:
    out = check_dir_path(args.out)
    cfg = config_from_args(args, args.controller, parse_params(args.param), out)
    check_inputs(cfg)
    require_spark()
    with SparkProgress() as line:
        result = run_spark(cfg, on_progress=line)
    print(f"{cfg.controller} on {cfg.workload} under {cfg.label} (Spark {redact_url(cfg.master)}):")
    print_summary(result)
    return 130 if result.interrupted else 0


COMMAND = Command(NAME, HELP, add_arguments, run)
